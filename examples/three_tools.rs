//! A complete MCP server with three tools, for MCP clients to launch over stdio.
//!
//! Run: `cargo run --example three_tools` (then speak MCP on stdin), or register
//! `cargo run --quiet --example three_tools` (or the built binary) with an MCP client.
//!
//! Tools: `add` {a, b} adds two integers; `shout` {text, times?} repeats text in capitals;
//! `count_to` {n} counts slowly, with progress, and stops at once when cancelled.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpipe::{LogLevel, McpServer, Server, Tool, ToolResult};
use serde_json::json;

/// The server's state: handlers get it as `&mut`, no locks needed.
#[derive(Default)]
struct Notes {
    calls: u64,
}

fn run() -> Result<(), mcpipe::Error> {
    // The slow tool runs on the worker pool, so it shares its counter instead of `&mut` state.
    let counted = Arc::new(AtomicU64::new(0));
    let counted_by_tool = Arc::clone(&counted);
    let mut server = McpServer::new("three-tools", "1.0.0", Notes::default())
        .instructions("Adds numbers, shouts text, and counts slowly.")
        .tool(
            Tool::new("add", "Adds two integers")
                .arg("a", "integer", "The first term")
                .arg("b", "integer", "The second term"),
            |notes, args, _cx| {
                notes.calls += 1;
                // A missing or non-integer argument becomes an isError result naming it.
                let (a, b) = (args.integer("a")?, args.integer("b")?);
                let sum = a.checked_add(b).ok_or("the sum does not fit in 64 bits")?;
                Ok(ToolResult::structured(json!({ "sum": sum })))
            },
        )
        .tool(
            Tool::new("shout", "Repeats text in capitals")
                .arg("text", "string", "What to shout")
                .optional_arg("times", "integer", "How often (default 1)"),
            |notes, args, _cx| {
                notes.calls += 1;
                let text = args.string("text")?.to_uppercase();
                let times = args.integer_or("times", 1)?.clamp(1, 10) as usize;
                Ok(ToolResult::text(vec![text; times].join(" ")))
            },
        )
        // A slow tool: on the worker pool, so that `add` and `shout` are answered while it
        // counts.
        .concurrent_tool(
            Tool::new(
                "count_to",
                "Counts to n, one number per 100 ms, with progress",
            )
            .arg("n", "integer", "Where to stop (at most 100)"),
            move |args, cx| {
                counted_by_tool.fetch_add(1, Ordering::Relaxed);
                let n = args.integer("n")?.clamp(0, 100);
                for i in 1..=n {
                    // Wakes at once when the client cancels (the call then gets no response).
                    cx.sleep(Duration::from_millis(100))?;
                    cx.progress(i as f64, Some(n as f64), Some(&format!("counted to {i}")))?;
                }
                cx.log(
                    LogLevel::Info,
                    Some("count_to"),
                    json!(format!("counted to {n}")),
                )?;
                Ok(ToolResult::text(format!("counted to {n}")))
            },
        );
    let outcome = Server::new()
        .idle_timeout(Some(Duration::from_secs(300)))
        .serve_stdio(&mut server)?;
    // Not `eprintln!`: it would block the exit on a stderr nobody reads.
    mcpipe::stderr_line(&format!(
        "three-tools: {outcome} after {} tool calls",
        server.state().calls + counted.load(Ordering::Relaxed)
    ));
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            mcpipe::stderr_line(&format!("three-tools: {e}"));
            ExitCode::FAILURE
        }
    }
}
