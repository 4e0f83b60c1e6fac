//! Tasks where the eras meet, against `mcpipe demo` over pipes: a tool that runs only as a task
//! offered to a handshake client whose revision has no tasks (before 2025-11-25), and a
//! 2026-07-28 task still running, and an open `subscriptions/listen` stream, when the client
//! switches the process to the handshake era with `initialize`. Every wait is bounded (`util::mcp`), and each test has a watchdog.

mod util;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::mcp::{live_in_group, processes_where, Proc};
use util::watchdog;

const LIMIT: Duration = Duration::from_secs(60);
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` of a 2026-07-28 request from a client that declared the tasks extension.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "extensions": { EXTENSION: {} } },
        "io.modelcontextprotocol/clientInfo": { "name": "mcpipe-tests", "version": "0" }
    })
}

/// The names `tools/list` shows (one page: the demo has fewer than 100 tools).
fn tool_names(p: &mut Proc, id: i64) -> Vec<String> {
    p.request(id, "tools/list", json!({}));
    let result = p.result(id);
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_tool_that_runs_only_as_a_task_is_not_offered_before_2025_11_25() {
    let _w = watchdog("required_before_tasks", LIMIT);
    // The conformance fixtures have two tools that require a task (`failing_job` on the pool,
    // `test_tool_with_task` on the loop's thread) and optional ones (`slow_compute`).
    for version in ["2024-11-05", "2025-03-26", "2025-06-18"] {
        let mut p = Proc::demo(&["--conformance"]);
        let caps = p.initialize_with(version, json!({}))["capabilities"].clone();
        assert!(caps.get("tasks").is_none(), "{version}: {caps}");
        let names = tool_names(&mut p, 1);
        for required in ["failing_job", "test_tool_with_task"] {
            assert!(
                !names.iter().any(|n| n == required),
                "{version}: {required} runs only as a task, which this revision lacks, yet \
                 tools/list offers it: {names:?}"
            );
        }
        assert!(names.iter().any(|n| n == "slow_compute"), "{names:?}");
        // Called anyway (by name, from an old listing): an unknown tool for this session, with
        // a message that says why; the tool does not run.
        for (id, required) in [(2, "failing_job"), (3, "test_tool_with_task")] {
            p.call(id, required, json!({}));
            let answer = p.response(id);
            assert_eq!(answer["error"]["code"], -32602, "{version}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(required) && message.contains("task"),
                "{version}: {answer}"
            );
            assert_eq!(answer["error"]["data"]["name"], required, "{answer}");
        }
        // An optional tool runs as a plain call.
        p.call(4, "slow_compute", json!({ "seconds": 0 }));
        let result = p.result(4);
        assert!(result.get("task").is_none(), "{result}");
    }
    // At 2025-11-25 the same tools are listed, and a call without a task is -32601 (the
    // spec's rule for `required`), as before.
    let mut p = Proc::demo(&["--conformance"]);
    p.initialize_with("2025-11-25", json!({}));
    let names = tool_names(&mut p, 1);
    assert!(names.iter().any(|n| n == "failing_job"), "{names:?}");
    assert!(
        names.iter().any(|n| n == "test_tool_with_task"),
        "{names:?}"
    );
    p.call(2, "failing_job", json!({}));
    assert_eq!(p.error_code(2), -32601);
}

/// The `run` tool's command, which leads its own process group; dropping it kills the group,
/// so that a failing test (whose server is killed, leaving the command behind) leaks nothing.
struct Command(u32);

impl Command {
    /// Waits until the server has a live child.
    fn of(server: u32) -> Command {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let children = processes_where(|state, ppid, _| ppid == server && state != "Z");
            if let Some(&pid) = children.first() {
                return Command(pid);
            }
            assert!(Instant::now() < deadline, "the command did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Command {
    fn drop(&mut self) {
        if !live_in_group(self.0).is_empty() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0)])
                .status();
        }
    }
}

#[test]
fn a_2026_task_ends_when_initialize_makes_the_process_a_handshake_session() {
    let _w = watchdog("task_across_initialize", LIMIT);
    let mut p = Proc::demo(&["--allow-run"]);
    let server = p.pid();
    p.request(
        1,
        "tools/call",
        json!({ "name": "run", "arguments": { "argv": ["sleep", "120"] },
                "_meta": modern_meta() }),
    );
    let created = p.result(1);
    assert_eq!(created["resultType"], "task", "{created}");
    let task = created["taskId"].as_str().unwrap().to_owned();
    let command = Command::of(server);
    // The client switches eras. No 2026-07-28 request is served after this, so nobody can
    // poll that task again (`tasks/get` of the extension) or answer its inputs
    // (`tasks/update`).
    p.initialize_with("2025-11-25", json!({}));
    // It is not this session's task: not listed, not found.
    p.request(2, "tasks/list", json!({}));
    let listed = p.result(2);
    assert!(
        listed["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["taskId"] != json!(task))),
        "the 2026-07-28 task is listed to the handshake session: {listed}"
    );
    p.request(3, "tasks/get", json!({ "taskId": task }));
    let got = p.response(3);
    assert_eq!(got["error"]["code"], -32602, "{got}");
    // And its work was stopped, the command's process group with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_in_group(command.0).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the 2026-07-28 task's command still runs after initialize: {:?}",
            live_in_group(command.0)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_2026_task_says_nothing_to_a_handshake_session_without_tasks() {
    let _w = watchdog("task_status_before_tasks", LIMIT);
    let mut p = Proc::demo(&[]);
    p.request(
        1,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 300 }, "_meta": modern_meta() }),
    );
    let created = p.result(1);
    assert_eq!(created["resultType"], "task", "{created}");
    // 2025-06-18 has no tasks: no notification about one may reach this client.
    p.initialize_with("2025-06-18", json!({}));
    std::thread::sleep(Duration::from_millis(800)); // The sleep would have ended by now.
    p.request(2, "ping", json!({}));
    let (seen, _) = p.until_response(2);
    assert!(
        seen.iter()
            .all(|m| m["method"] != "notifications/tasks/status"),
        "a task notification reached a 2025-06-18 session: {seen:?}"
    );
}

#[test]
fn a_listen_stream_ends_when_initialize_makes_the_process_a_handshake_session() {
    let _w = watchdog("listen_then_initialize", LIMIT);
    let mut p = Proc::demo(&["--conformance"]);
    let mut params = json!({ "notifications": { "toolsListChanged": true } });
    params["_meta"] = modern_meta();
    p.request(1, "subscriptions/listen", params);
    let ack = p.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    // The handshake: the open stream gets its one response, at the latest with the
    // `initialize` result.
    p.request(
        0,
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "mcpipe-tests", "version": "0" }
        }),
    );
    let (before, init) = p.until_response(0);
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let ended: Vec<&Value> = before.iter().filter(|m| m["id"] == 1).collect();
    assert_eq!(
        ended.len(),
        1,
        "the 2026-07-28 stream is not ended by initialize: {before:?}"
    );
    assert_eq!(ended[0]["result"]["resultType"], "complete", "{before:?}");
    p.notify("notifications/initialized", json!({}));
    // A change now reaches the handshake client as the plain notification only, never tagged
    // for the stream that ended.
    p.call(2, "test_trigger_tool_change", json!({}));
    let (before, _) = p.until_response(2);
    let tagged: Vec<&Value> = before
        .iter()
        .filter(|m| !m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_null())
        .collect();
    assert!(tagged.is_empty(), "tagged for an ended stream: {before:?}");
    // And the stream is not answered a second time at the end.
    p.close_stdin();
    while let Some(message) = p.next_within(Duration::from_secs(5)) {
        assert_ne!(message["id"], 1, "answered twice: {message}");
    }
    assert_eq!(p.wait_exit(), Some(0));
}
