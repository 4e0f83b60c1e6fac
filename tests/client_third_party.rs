//! The client against real third-party servers installed from their registries by
//! `scripts/setup-interop.sh`: the official reference server `@modelcontextprotocol/server-everything`
//! (npm) and `mcp-server-time` (PyPI). Handshake, list tools, call a tool, close cleanly; and
//! server-everything's task that asks for input (2025-11-25 `input_required`).
//!
//! These tests fail (they do not skip) when the servers are not installed: run
//! `scripts/setup-interop.sh` first.

mod util;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcpipe::{Client, ClientBuilder, ErrorObject, ShutdownStage, TaskOptions};
use serde_json::{json, Value};
use util::client::{first_text, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn interop(path: &str) -> PathBuf {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(path);
    assert!(
        full.exists(),
        "{} is not installed: run scripts/setup-interop.sh first",
        full.display()
    );
    full
}

fn everything() -> ClientBuilder {
    let script = interop("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    Client::builder("node")
        .arg(script)
        .arg("stdio")
        .init_timeout(Duration::from_secs(30))
        .log_bad_lines(false)
}

fn time_server() -> ClientBuilder {
    Client::builder(interop(".venv/bin/mcp-server-time"))
        .arg("--local-timezone")
        .arg("UTC")
        .init_timeout(Duration::from_secs(30))
        .log_bad_lines(false)
}

#[test]
fn server_everything_handshake_tools_call_and_close() {
    watchdog(LIMIT, || {
        let mut client = everything().spawn().unwrap();
        assert!(!client.protocol_version().is_empty());
        let tools = client.list_tools().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(names.contains(&"echo"), "{names:?}");
        let result = client
            .call_tool("echo", json!({"message": "hello from mcpipe"}))
            .unwrap();
        assert!(
            first_text(&result).contains("hello from mcpipe"),
            "{result}"
        );
        client.ping().unwrap();
        assert_eq!(client.stats().bad_lines, 0);
        let pid = client.pid().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(!util::client::process_alive(pid));
    });
}

/// Field test: `simulate-research-query` with `ambiguous` queues its `elicitation/create` in
/// the task's message queue and sends it only while a `tasks/result` waits; the client polled
/// `tasks/get` only, the callback was never called, and the call timed out.
#[test]
fn server_everything_task_that_needs_input_reaches_the_elicitation_callback() {
    watchdog(LIMIT, || {
        let asked = Arc::new(AtomicUsize::new(0));
        let answering = |asked: &Arc<AtomicUsize>| {
            let counter = Arc::clone(asked);
            everything().on_elicitation(move |_params: &Value| -> Result<Value, ErrorObject> {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(json!({ "action": "accept", "content": { "interpretation": "historical" } }))
            })
        };
        let arguments = json!({ "topic": "rust", "ambiguous": true });
        let options = TaskOptions::new().deadline(Duration::from_secs(25));
        let mut client = answering(&asked).spawn().unwrap();
        let result = client
            .call_tool_as_task(
                "simulate-research-query",
                arguments.clone(),
                options.clone(),
            )
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert!(
            first_text(&result).contains("rust (historical)"),
            "{result}"
        );
        client.close();
        // The shared client: the IO thread answers while the caller waits in tasks/result.
        let shared = answering(&asked).spawn_shared().unwrap();
        let result = shared
            .call_tool_as_task("simulate-research-query", arguments, options)
            .unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert!(
            first_text(&result).contains("rust (historical)"),
            "{result}"
        );
        shared.close();
    });
}

#[test]
fn mcp_server_time_handshake_tools_call_and_close() {
    watchdog(LIMIT, || {
        let mut client = time_server().spawn().unwrap();
        assert!(!client.protocol_version().is_empty());
        let tools = client.list_tools().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(names.contains(&"get_current_time"), "{names:?}");
        let result = client
            .call_tool("get_current_time", json!({"timezone": "UTC"}))
            .unwrap();
        assert_ne!(result["isError"], true, "{result}");
        assert!(first_text(&result).contains("UTC"), "{result}");
        assert_eq!(client.stats().bad_lines, 0);
        let pid = client.pid().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(!util::client::process_alive(pid));
    });
}
