//! The server, the wrapper and the diagnostics sink in a hostile environment: no thread can be
//! started (a process or thread limit: here every new thread's stack is refused with
//! `RUST_MIN_STACK`), no fd can be had (`RLIMIT_NOFILE` reached). Every test under a watchdog.

mod util;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use util::mcp::{text, Proc};
use util::watchdog;

const LIMIT: Duration = Duration::from_secs(60);

/// A stack no thread can be given: every thread the process starts after its main one fails
/// with `EAGAIN`/`ENOMEM`, as it does at a process or thread limit.
const NO_THREADS: (&str, &str) = ("RUST_MIN_STACK", "100000000000000");

fn demo_without_threads() -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.arg("demo").env(NO_THREADS.0, NO_THREADS.1);
    Proc::spawn(cmd)
}

#[test]
fn a_concurrent_call_without_a_worker_thread_is_answered_with_an_error_at_once() {
    let _w = watchdog("concurrent_call_without_a_worker_thread", LIMIT);
    let mut p = demo_without_threads();
    p.initialize();
    p.call(1, "sleep", json!({ "ms": 10 }));
    p.call(2, "echo", json!({ "text": "on the loop" }));
    // The echo runs on the loop's thread, the sleep would need a worker: its answer comes
    // first, not after the end of input's grace.
    let first = p
        .next_within(Duration::from_secs(5))
        .expect("an answer within 5 s");
    assert_eq!(first["id"], 1, "{first}");
    let message = first["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no worker thread could be started"),
        "{first}"
    );
    assert_eq!(text(&p.result(2)), "on the loop");
    assert!(p
        .stderr_with("no worker thread")
        .contains("no worker thread could be started"));
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

#[test]
fn a_task_without_a_worker_thread_fails_instead_of_staying_working() {
    let _w = watchdog("task_without_a_worker_thread", LIMIT);
    let mut p = demo_without_threads();
    p.initialize();
    p.request(
        1,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 10 }, "task": { "ttl": 60000 } }),
    );
    let task = p.result(1);
    let id = task["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    p.request(2, "tasks/result", json!({ "taskId": id }));
    let (_, answer) = p.until_response(2);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no worker thread could be started"),
        "{answer}"
    );
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}
