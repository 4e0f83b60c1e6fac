//! The fixtures of the 2025-11-25 tool scenarios (`tools-call-*`), which serve the
//! 2026-07-28 suite too.

use mcpipe::{base64, Content, McpServer, ResourceContents, Tool, ToolError, ToolResult};
use serde_json::json;

use super::*;

pub(super) fn tools(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
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
