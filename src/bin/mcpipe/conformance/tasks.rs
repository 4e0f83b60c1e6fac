//! The fixtures of the `tasks-*` scenarios (the 2026-07-28 tasks extension, SEP-2663); a
//! 2025-11-25 client may call the same tools as tasks (`params.task`).
//!
//! - `greet`: a plain tool (no tasks), `Hello, {name}!`.
//! - `slow_compute`: tasks optional; sleeps `seconds` (cancellable), then reports.
//! - `failing_job`: tasks required; a tool error (`isError`) after about a second, so the
//!   task ends `completed` with `result.isError`.
//! - `protocol_error_job`: tasks optional; a JSON-RPC error, so the task ends `failed`.
//! - `confirm_delete`: tasks optional; asks for one confirmation (`input_required` inside the
//!   task under 2026-07-28).
//! - `multi_input`: tasks optional; asks for two inputs in the same round.
//! - `test_tool_with_task`: tasks required, a quick tool: under 2026-07-28 it asks for
//!   `user_name` in a plain `input_required` round, and the task is made on the last round.

use std::time::Duration;

use mcpipe::{ErrorObject, McpServer, TaskSupport, Tool, ToolError, ToolResult};
use serde_json::{json, Value};

use super::*;

/// How long `failing_job` works before it fails.
const FAILING_AFTER: Duration = Duration::from_secs(1);

/// The most `slow_compute` sleeps (the suite asks for up to 60 s).
const MAX_SECONDS: f64 = 600.0;

fn confirmation(message: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "confirm": { "type": "boolean", "description": "Go ahead?" } },
            "required": ["confirm"]
        }
    })
}

fn confirmed(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["confirm"] == json!(true)
}

pub(super) fn tools(server: McpServer<Fixtures>) -> McpServer<Fixtures> {
    server
        .tool(
            Tool::new("greet", "Greets someone (never a task)").arg("name", "string", "Who"),
            |_, args, _| {
                Ok(ToolResult::text(format!(
                    "Hello, {}!",
                    args.string("name")?
                )))
            },
        )
        .concurrent_tool(
            Tool::new(
                "slow_compute",
                "Sleeps `seconds` seconds (cancellable), then reports; may run as a task",
            )
            .arg("seconds", "number", "How long to work")
            .optional_arg("label", "string", "A label echoed in the result")
            .task_support(TaskSupport::Optional),
            |args, cx| {
                let seconds = args.number("seconds")?;
                if !(0.0..=MAX_SECONDS).contains(&seconds) {
                    return Err(ToolError::new(format!(
                        "argument \"seconds\" must be between 0 and {MAX_SECONDS}"
                    )));
                }
                let label = args
                    .optional_string("label")?
                    .unwrap_or_default()
                    .to_owned();
                cx.sleep(Duration::from_secs_f64(seconds))?;
                Ok(ToolResult::text(format!(
                    "computed {label:?} after {seconds} s"
                )))
            },
        )
        .concurrent_tool(
            Tool::new(
                "failing_job",
                "Fails with a tool error after about a second (a task)",
            )
            .task_support(TaskSupport::Required),
            |_, cx| {
                cx.sleep(FAILING_AFTER)?;
                Err(ToolError::new("failing_job failed on purpose"))
            },
        )
        .concurrent_tool(
            Tool::new(
                "protocol_error_job",
                "Fails with a JSON-RPC error (the task ends failed)",
            )
            .task_support(TaskSupport::Optional),
            |_, _| {
                Err(ToolError::protocol(ErrorObject::internal(
                    "internal error: protocol_error_job failed on purpose",
                )))
            },
        )
        .concurrent_tool(
            Tool::new(
                "confirm_delete",
                "Asks to confirm, then pretends to delete a file",
            )
            .arg("filename", "string", "The file")
            .task_support(TaskSupport::Optional),
            |args, cx| {
                let filename = args.string("filename")?;
                let answer = cx.input(
                    "confirm",
                    "elicitation/create",
                    confirmation(&format!("Delete {filename}?")),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(if confirmed(&answer) {
                    format!("deleted {filename}")
                } else {
                    format!("kept {filename}")
                }))
            },
        )
        .concurrent_tool(
            Tool::new("multi_input", "Asks for a name and a confirmation at once")
                .task_support(TaskSupport::Optional),
            |_, cx| {
                // Both asked before the first `?`, so that both are pending in one round.
                let name = cx.input(
                    "name",
                    "elicitation/create",
                    elicitation("Your name?", "name", "string"),
                    ASK_TIMEOUT,
                );
                let confirm = cx.input(
                    "confirm",
                    "elicitation/create",
                    confirmation("Go ahead?"),
                    ASK_TIMEOUT,
                );
                let (name, confirm) = (name?, confirm?);
                Ok(ToolResult::text(format!(
                    "name {}, confirmed {}",
                    elicited(&name, "name"),
                    confirmed(&confirm)
                )))
            },
        )
        .tool(
            Tool::new(
                "test_tool_with_task",
                "Asks for user_name, then runs as a task that greets them",
            )
            .task_support(TaskSupport::Required),
            |_, _, cx| {
                let answer = cx.input(
                    "user_name",
                    "elicitation/create",
                    elicitation("What is your name?", "name", "string"),
                    ASK_TIMEOUT,
                )?;
                Ok(ToolResult::text(format!(
                    "Hello, {}! (asked before the task)",
                    elicited(&answer, "name")
                )))
            },
        )
}
