//! `mcpipe demo --conformance`: the fixtures the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server mode) calls by name, at 2025-11-25 (handshake
//! era) and at 2026-07-28 (stateless, input-required results).
//!
//! The contract (names, arguments, what each must return) was read from the suite's scenario
//! sources; `shared/CONFORMANCE-FIXTURES.md` summarises it. Every fixture is written once
//! against the crate's API and served in both eras by the MCP layer: the tools that ask the
//! client something use `McpContext::input` (or `elicit` / `create_message` / `list_roots`),
//! which sends a request and waits in the handshake era and ends the round with an
//! `input_required` result under 2026-07-28.

use std::time::Duration;

use mcpipe::{
    base64, Content, LogLevel, McpContext, McpServer, Prompt, PromptMessage, Resource,
    ResourceContents, ResourceTemplate, Tool, ToolError, ToolResult,
};
use serde_json::{json, Value};

/// A 1×1 RGBA PNG (made for these fixtures).
const PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf0, 0x9a, 0x70, 0xf3,
    0x3f, 0x00, 0x05, 0x8e, 0x02, 0xb3, 0x22, 0x8b, 0xca, 0x3e, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
/// A complete WAV file: 8 kHz mono 16-bit, one silent sample (made for these fixtures).
const WAV: [u8; 46] = [
    0x52, 0x49, 0x46, 0x46, 0x26, 0x00, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
    0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00,
    0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// How long a handshake-era request to the client may take (the suite's client answers at once;
/// its own per-request timeout is 60 s).
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause between the notifications of the logging and progress fixtures.
const STEP: Duration = Duration::from_millis(50);

/// The conformance profile's state: nothing but a counter of list changes announced.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    changes: u64,
}

fn text_schema(property: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { property: { "type": "string", "description": description } },
        "required": [property]
    })
}

/// An elicitation asking for one field.
fn elicitation(message: &str, property: &str, kind: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { property: { "type": kind } },
            "required": [property]
        }
    })
}

/// A sampling request with one user message.
fn sampling(prompt: &str, max_tokens: u64) -> Value {
    json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": max_tokens
    })
}

/// The text of a sampling answer (`CreateMessageResult.content`, a block or a list of them).
fn sampled_text(answer: &Value) -> String {
    let content = &answer["content"];
    let block = if content.is_array() {
        &content[0]
    } else {
        content
    };
    block["text"].as_str().unwrap_or_default().to_owned()
}

/// A field of an accepted elicitation, or a word saying why there is none.
fn elicited(answer: &Value, field: &str) -> String {
    match answer["action"].as_str() {
        Some("accept") => match &answer["content"][field] {
            Value::String(s) => s.clone(),
            Value::Null => format!("(no {field})"),
            other => other.to_string(),
        },
        Some(action) => format!("({action})"),
        None => "(no action)".to_owned(),
    }
}

/// The roots of a `ListRootsResult`, as a comma-separated list of URIs.
fn root_uris(answer: &Value) -> String {
    let uris: Vec<&str> = answer["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    if uris.is_empty() {
        "(none)".to_owned()
    } else {
        uris.join(", ")
    }
}

/// The JSON Schema 2020-12 input schema of `json_schema_2020_12_tool`, with the keywords both
/// suite lines look for (`$schema`, `$defs`, `$anchor`, `additionalProperties`, `allOf`,
/// `anyOf`, `if`/`then`/`else`).
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "address",
                "type": "object",
                "properties": {
                    "street": { "type": "string" },
                    "city": { "type": "string" }
                }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "Your name", "default": "John Doe" },
            "age": { "type": "integer", "description": "Your age", "default": 30 },
            "score": { "type": "number", "description": "A score", "default": 95.5 },
            "status": {
                "type": "string",
                "description": "Account status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": { "type": "boolean", "description": "Verified?", "default": true }
        },
        "required": []
    })
}

fn sep1330_schema() -> Value {
    let titled = |values: [(&str, &str); 3]| -> Value {
        values
            .iter()
            .map(|(v, t)| json!({ "const": v, "title": t }))
            .collect()
    };
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Pick one",
                "enum": ["option1", "option2", "option3"]
            },
            "titledSingle": {
                "type": "string",
                "description": "Pick one (titled)",
                "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")])
            },
            "legacyEnum": {
                "type": "string",
                "description": "Pick one (enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Pick some",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
            },
            "titledMulti": {
                "type": "array",
                "description": "Pick some (titled)",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])
                }
            }
        },
        "required": []
    })
}

/// An elicitation with a given schema, reported as `Elicitation completed: ...`.
fn elicit_schema(
    cx: &mut McpContext<'_>,
    key: &str,
    message: &str,
    schema: Value,
) -> Result<ToolResult, ToolError> {
    let answer = cx.input(
        key,
        "elicitation/create",
        json!({ "message": message, "requestedSchema": schema }),
        ASK_TIMEOUT,
    )?;
    Ok(ToolResult::text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").unwrap_or(&Value::Null)
    )))
}

/// Three log messages, ~50 ms apart (sent only as the client asked: `logging/setLevel`, or the
/// request's `_meta` logLevel under 2026-07-28).
fn three_logs(cx: &mut McpContext<'_>, logger: &str) -> Result<ToolResult, ToolError> {
    for (i, text) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            cx.sleep(STEP)?;
        }
        cx.log(LogLevel::Info, Some(logger), json!(text))?;
    }
    Ok(ToolResult::text("Logging test completed"))
}

fn tools(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
    server
        .tool(
            Tool::new("test_simple_text", "Returns a simple text response"),
            |_, _, _| {
                Ok(ToolResult::text(
                    "This is a simple text response for testing.",
                ))
            },
        )
        .tool(
            Tool::new("test_image_content", "Returns an image (a 1x1 PNG)"),
            |_, _, _| {
                Ok(ToolResult::new(vec![Content::image(
                    base64(&PNG),
                    "image/png",
                )]))
            },
        )
        .tool(
            Tool::new("test_audio_content", "Returns audio (a tiny WAV file)"),
            |_, _, _| {
                Ok(ToolResult::new(vec![Content::audio(
                    base64(&WAV),
                    "audio/wav",
                )]))
            },
        )
        .tool(
            Tool::new("test_embedded_resource", "Returns an embedded resource"),
            |_, _, _| {
                Ok(ToolResult::new(vec![Content::resource(
                    ResourceContents::text(
                        "test://embedded-resource",
                        Some("text/plain"),
                        "This is an embedded resource content.",
                    ),
                )]))
            },
        )
        .tool(
            Tool::new(
                "test_multiple_content_types",
                "Returns text, an image and an embedded resource",
            ),
            |_, _, _| {
                Ok(ToolResult::new(vec![
                    Content::text("Multiple content types test:"),
                    Content::image(base64(&PNG), "image/png"),
                    Content::resource(ResourceContents::text(
                        "test://mixed-content-resource",
                        Some("application/json"),
                        json!({ "test": "data", "value": 123 }).to_string(),
                    )),
                ]))
            },
        )
        .tool(
            Tool::new(
                "test_tool_with_logging",
                "Sends three log messages while it runs",
            ),
            |_, _, cx| three_logs(cx, "test_tool_with_logging"),
        )
        .tool(
            Tool::new(
                "test_tool_with_progress",
                "Sends progress 0, 50, 100 of 100 while it runs",
            ),
            |_, _, cx| {
                for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        cx.sleep(STEP)?;
                    }
                    cx.progress(done, Some(100.0), Some(&format!("{done}% done")))?;
                }
                Ok(ToolResult::text("Progress test completed"))
            },
        )
        .tool(
            Tool::new("test_error_handling", "Always fails with a tool error"),
            |_, _, _| {
                Err(ToolError::new(
                    "This tool intentionally returns an error for testing",
                ))
            },
        )
        .tool(
            Tool::new(
                "test_sampling",
                "Asks the client's model to answer a prompt",
            )
            .input_schema(text_schema("prompt", "The prompt to send")),
            |_, args, cx| {
                let prompt = args.string("prompt")?;
                let answer = cx.create_message(sampling(prompt, 100), ASK_TIMEOUT)?;
                Ok(ToolResult::text(format!(
                    "LLM response: {}",
                    sampled_text(&answer)
                )))
            },
        )
        .tool(
            Tool::new("test_elicitation", "Asks the user for a username and email")
                .input_schema(text_schema("message", "The question to ask")),
            |_, args, cx| {
                let message = args.string("message")?;
                let answer = cx.elicit(
                    json!({
                        "message": message,
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "username": { "type": "string", "description": "User's response" },
                                "email": { "type": "string", "description": "User's email address" }
                            },
                            "required": ["username", "email"]
                        }
                    }),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "User response: action={}, content={}",
                    answer["action"].as_str().unwrap_or("?"),
                    answer.get("content").unwrap_or(&Value::Null)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_elicitation_sep1034_defaults",
                "Elicits fields that carry default values (SEP-1034)",
            ),
            |_, _, cx| {
                elicit_schema(
                    cx,
                    "sep1034",
                    "Please review and update the form fields with defaults",
                    sep1034_schema(),
                )
            },
        )
        .tool(
            Tool::new(
                "test_elicitation_sep1330_enums",
                "Elicits the five kinds of enum fields (SEP-1330)",
            ),
            |_, _, cx| {
                elicit_schema(
                    cx,
                    "sep1330",
                    "Please select options from the enum fields",
                    sep1330_schema(),
                )
            },
        )
        .tool(
            Tool::new(
                "json_schema_2020_12_tool",
                "A tool whose input schema uses JSON Schema 2020-12 keywords",
            )
            .input_schema(schema_2020_12()),
            |_, args, _| {
                Ok(ToolResult::text(format!(
                    "received {}",
                    Value::Object(args.as_map().clone())
                )))
            },
        )
        .tool(
            Tool::new(
                "test_reconnection",
                "Answers after a short pause (an HTTP-transport fixture)",
            ),
            |_, _, cx| {
                cx.sleep(STEP)?;
                Ok(ToolResult::text("Reconnection test completed"))
            },
        )
}

/// The fixtures of the 2026-07-28 scenarios (`server-stateless`, `input-required-result-*`).
/// They work in the handshake era too: inputs are then asked for live.
fn modern_tools(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
    server
        .tool(
            Tool::new(
                "test_missing_capability",
                "Needs the client's sampling capability (-32021 without it under 2026-07-28)",
            ),
            |_, _, cx| {
                let answer = cx.create_message(sampling("Say hello", 20), ASK_TIMEOUT)?;
                Ok(ToolResult::text(format!(
                    "Sampled: {}",
                    sampled_text(&answer)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_streaming_elicitation",
                "Needs an elicitation (an input_required result under 2026-07-28, never a request)",
            ),
            |_, _, cx| {
                let answer = cx.input(
                    "confirmation",
                    "elicitation/create",
                    elicitation("Continue?", "ok", "boolean"),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "Streaming elicitation answered: {}",
                    elicited(&answer, "ok")
                )))
            },
        )
        .tool(
            Tool::new(
                "test_logging_tool",
                "Logs three messages, only when the request asked for a log level",
            ),
            |_, _, cx| three_logs(cx, "test_logging_tool"),
        )
        .tool(
            Tool::new(
                "test_trigger_tool_change",
                "Announces that the tool list changed",
            ),
            |fixtures, _, cx| {
                fixtures.changes += 1;
                cx.tools_changed();
                Ok(ToolResult::text(format!(
                    "tools/list_changed announced ({} changes so far)",
                    fixtures.changes
                )))
            },
        )
        .tool(
            Tool::new(
                "test_trigger_prompt_change",
                "Announces that the prompt list changed",
            ),
            |fixtures, _, cx| {
                fixtures.changes += 1;
                cx.prompts_changed();
                Ok(ToolResult::text(format!(
                    "prompts/list_changed announced ({} changes so far)",
                    fixtures.changes
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_elicitation",
                "Asks for the user's name (key user_name), then greets them",
            ),
            |_, _, cx| {
                let answer = cx.input(
                    "user_name",
                    "elicitation/create",
                    elicitation("What is your name?", "name", "string"),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "Hello, {}!",
                    elicited(&answer, "name")
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_sampling",
                "Asks the client's model for the capital of France (key capital_question)",
            ),
            |_, _, cx| {
                let answer = cx.input(
                    "capital_question",
                    "sampling/createMessage",
                    sampling("What is the capital of France?", 100),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "The model said: {}",
                    sampled_text(&answer)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_list_roots",
                "Asks for the client's roots (key client_roots)",
            ),
            |_, _, cx| {
                let answer = cx.input("client_roots", "roots/list", Value::Null, ASK_TIMEOUT)?;
                Ok(ToolResult::text(format!(
                    "Client roots: {}",
                    root_uris(&answer)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_request_state",
                "Asks for a confirmation and checks its own requestState on the retry",
            ),
            |_, _, cx| confirm_with_state(cx),
        )
        .tool(
            Tool::new(
                "test_input_required_result_tampered_state",
                "Like the request-state fixture; a tampered requestState gets -32602",
            ),
            |_, _, cx| confirm_with_state(cx),
        )
        .tool(
            Tool::new(
                "test_input_required_result_multiple_inputs",
                "Asks for a name, a sampled greeting and the roots in one round",
            ),
            |_, _, cx| {
                // All three are asked before the first `?`, so one round lists them all.
                let name = cx.input(
                    "user_name",
                    "elicitation/create",
                    elicitation("What is your name?", "name", "string"),
                    ASK_TIMEOUT,
                );
                let greeting = cx.input(
                    "greeting",
                    "sampling/createMessage",
                    sampling("Generate a greeting", 50),
                    ASK_TIMEOUT,
                );
                let roots = cx.input("client_roots", "roots/list", Value::Null, ASK_TIMEOUT);
                let (name, greeting, roots) = (name?, greeting?, roots?);
                Ok(ToolResult::text(format!(
                    "name={}, greeting={}, roots={}",
                    elicited(&name, "name"),
                    sampled_text(&greeting),
                    root_uris(&roots)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_multi_round",
                "Asks for a name, then (next round) a favourite colour",
            ),
            |_, _, cx| {
                let name = cx.input(
                    "step1",
                    "elicitation/create",
                    elicitation("Step 1: What is your name?", "name", "string"),
                    ASK_TIMEOUT,
                )?;
                let color = cx.input(
                    "step2",
                    "elicitation/create",
                    elicitation("Step 2: What is your favorite color?", "color", "string"),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "{} likes {}",
                    elicited(&name, "name"),
                    elicited(&color, "color")
                )))
            },
        )
        .tool(
            Tool::new(
                "test_input_required_result_capabilities",
                "Asks only for what the client declared (sampling and/or elicitation)",
            ),
            |_, _, cx| {
                let sampled = cx.has_client_capability("sampling").then(|| {
                    cx.input(
                        "sampled",
                        "sampling/createMessage",
                        sampling("Say something", 20),
                        ASK_TIMEOUT,
                    )
                });
                let elicited_answer = cx.has_client_capability("elicitation").then(|| {
                    cx.input(
                        "elicited",
                        "elicitation/create",
                        elicitation("Say something", "text", "string"),
                        ASK_TIMEOUT,
                    )
                });
                let mut parts = Vec::new();
                if let Some(answer) = sampled {
                    parts.push(format!("sampling: {}", sampled_text(&answer?)));
                }
                if let Some(answer) = elicited_answer {
                    parts.push(format!("elicitation: {}", elicited(&answer?, "text")));
                }
                if parts.is_empty() {
                    parts.push("the client declared neither sampling nor elicitation".to_owned());
                }
                Ok(ToolResult::text(parts.join("; ")))
            },
        )
}

/// Asks for a confirmation (key `confirm`); under 2026-07-28 the first round saves a value in
/// the call's round state, and the retry reports `state-ok` once it finds it (the layer has
/// verified the `requestState` that carried it).
fn confirm_with_state(cx: &mut McpContext<'_>) -> Result<ToolResult, ToolError> {
    if cx.is_modern() && cx.round_state().is_none() {
        cx.set_round_state(json!({ "asked": "confirm" }));
    }
    let answer = cx.input(
        "confirm",
        "elicitation/create",
        elicitation("Please confirm", "ok", "boolean"),
        ASK_TIMEOUT,
    )?;
    let state = match cx.round_state() {
        Some(saved) if saved["asked"] == "confirm" => "state-ok",
        Some(_) => "state-unexpected",
        // The handshake era has one round and no requestState to check.
        None if !cx.is_modern() => "state-ok (one round, no requestState needed)",
        None => "state-missing",
    };
    Ok(ToolResult::text(format!(
        "{state}: confirmed={}",
        elicited(&answer, "ok")
    )))
}

fn resources(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
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

fn prompts(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
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

/// Completion values for the arguments of `test_prompt_with_arguments` (and any other).
const SUGGESTIONS: [&str; 4] = ["test", "testValue1", "testValue2", "other"];

/// The conformance profile: every fixture of both suite lines.
pub(crate) fn server() -> McpServer<Fixtures> {
    let server = McpServer::new(
        "mcpipe-conformance",
        env!("CARGO_PKG_VERSION"),
        Fixtures::default(),
    )
    .instructions("The fixtures of the official MCP conformance suite (mcpipe demo --conformance).")
    .change_notifications()
    .completion(|_, _reference, _argument, value, _| {
        Ok(SUGGESTIONS
            .iter()
            .filter(|s| s.starts_with(value))
            .map(|s| (*s).to_owned())
            .collect())
    });
    prompts(resources(modern_tools(tools(server))))
}
