//! The fixtures of the 2026-07-28 scenarios (`server-stateless`, `input-required-result-*`).

use mcpipe::{McpContext, McpServer, Tool, ToolError, ToolResult};
use serde_json::json;

use super::*;

/// The fixtures of the 2026-07-28 scenarios (`server-stateless`, `input-required-result-*`).
/// They work in the handshake era too: inputs are then asked for live.
pub(super) fn tools(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
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
