//! The resources and prompts the suite reads and gets.

use mcpipe::{
    base64, Content, McpServer, Prompt, PromptMessage, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::json;

use super::*;

pub(super) fn resources(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
    server
        .resource(
            Resource::new("test://static-text", "static-text")
                .description("A static text resource")
                .mime_type("text/plain"),
            |_, uri, _| {
                Ok(vec![ResourceContents::text(
                    uri,
                    Some("text/plain"),
                    "This is the content of the static text resource.",
                )])
            },
        )
        .resource(
            Resource::new("test://static-binary", "static-binary")
                .description("A static binary resource (a PNG)")
                .mime_type("image/png"),
            |_, uri, _| Ok(vec![ResourceContents::blob(uri, Some("image/png"), &PNG)]),
        )
        .resource(
            Resource::new("test://watched-resource", "watched-resource")
                .description("A resource to subscribe to")
                .mime_type("text/plain"),
            |_, uri, _| {
                Ok(vec![ResourceContents::text(
                    uri,
                    Some("text/plain"),
                    "Watched resource content",
                )])
            },
        )
        .resource_template(
            ResourceTemplate::new("test://template/{id}/data", "template-data")
                .description("Data for an id")
                .mime_type("application/json"),
            |_, uri, vars, _| {
                let id = vars.string("id")?;
                Ok(vec![ResourceContents::text(
                    uri,
                    Some("application/json"),
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                        .to_string(),
                )])
            },
        )
}

pub(super) fn prompts(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
    server
        .prompt(
            Prompt::new("test_simple_prompt", "A simple prompt without arguments"),
            |_, _, _| {
                Ok(vec![PromptMessage::user(Content::text(
                    "This is a simple prompt for testing.",
                ))])
            },
        )
        .prompt(
            Prompt::new(
                "test_prompt_with_arguments",
                "A prompt with two required arguments",
            )
            .argument("arg1", "First test argument", true)
            .argument("arg2", "Second test argument", true),
            |_, args, _| {
                Ok(vec![PromptMessage::user(Content::text(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    args.string("arg1")?,
                    args.string("arg2")?
                )))])
            },
        )
        .prompt(
            Prompt::new(
                "test_prompt_with_embedded_resource",
                "A prompt that embeds a resource",
            )
            .argument("resourceUri", "URI of the resource to embed", true),
            |_, args, _| {
                let uri = args.string("resourceUri")?;
                Ok(vec![
                    PromptMessage::user(Content::resource(ResourceContents::text(
                        uri,
                        Some("text/plain"),
                        "Embedded resource content for testing.",
                    ))),
                    PromptMessage::user(Content::text(
                        "Please process the embedded resource above.",
                    )),
                ])
            },
        )
        .prompt(
            Prompt::new("test_prompt_with_image", "A prompt with an image"),
            |_, _, _| {
                Ok(vec![
                    PromptMessage::user(Content::image(base64(&PNG), "image/png")),
                    PromptMessage::user(Content::text("Please analyze the image above.")),
                ])
            },
        )
        .prompt(
            Prompt::new(
                "test_input_required_result_prompt",
                "A prompt that first asks the user for context (key user_context)",
            ),
            |_, _, cx| {
                let answer = cx.input(
                    "user_context",
                    "elicitation/create",
                    elicitation("What context should the prompt use?", "context", "string"),
                    ASK_TIMEOUT,
                )?;
                Ok(vec![PromptMessage::user(Content::text(format!(
                    "Use this context: {}",
                    elicited(&answer, "context")
                )))])
            },
        )
}
