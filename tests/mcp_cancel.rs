//! Cancellation and progress against `mcpipe demo`: queued requests, a running `sleep`, a
//! running child process group, ignored cancellations, `initialize`, and shutdown by signal.

mod util;

use std::time::{Duration, Instant};

use serde_json::json;
use util::mcp::{live_in_group, text, Proc};

fn ready(args: &[&str]) -> Proc {
    let mut demo = Proc::demo(args);
    demo.initialize();
    demo
}

/// Nothing at all arrives within `quiet` (and the server is still there afterwards).
fn assert_silent(demo: &mut Proc, quiet: Duration) {
    if let Some(msg) = demo.next_within(quiet) {
        panic!("expected no message, got {msg}");
    }
}

#[test]
fn a_queued_request_cancelled_in_the_same_read_is_never_run_or_answered() {
    let mut demo = ready(&[]);
    // Both requests and the cancellation reach the server in one write.
    let lines = [
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"first"}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"second"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stats","arguments":{}}}),
    ];
    let mut bytes = Vec::new();
    for line in &lines {
        bytes.extend(serde_json::to_vec(line).unwrap());
        bytes.push(b'\n');
    }
    demo.write_raw(&bytes);
    assert_eq!(demo.next()["id"], 1);
    let next = demo.next();
    assert_eq!(next["id"], 3, "request 2 must get no response: {next}");
    // Only the first echo reached the cache: the cancelled one never ran.
    assert_eq!(next["result"]["structuredContent"]["cache_entries"], 1);
}

#[test]
fn an_echo_behind_a_running_sleep_is_not_queued_so_a_late_cancel_is_ignored() {
    // `sleep` runs on the worker pool: the echo behind it is answered at once, and a
    // cancellation that names it afterwards names a finished request (ignored, as MCP asks).
    // (A request queued behind a handler that holds the loop is covered in tests/responder.rs.)
    let mut demo = ready(&[]);
    demo.call(1, "sleep", json!({ "ms": 300 }));
    demo.call(2, "echo", json!({ "text": "not queued" }));
    assert_eq!(text(&demo.result(2)), "not queued");
    demo.cancel(2);
    demo.request(3, "ping", json!({}));
    assert_eq!(demo.next()["id"], 3);
    assert_eq!(text(&demo.result(1)), "slept 300 ms");
    demo.call(4, "stats", json!({}));
    assert_eq!(demo.result(4)["structuredContent"]["cache_entries"], 1);
}

#[test]
fn a_cancelled_running_sleep_gets_no_response_and_the_next_request_is_prompt() {
    let mut demo = ready(&[]);
    demo.call(1, "sleep", json!({ "ms": 60_000 }));
    std::thread::sleep(Duration::from_millis(100));
    demo.cancel(1);
    let start = Instant::now();
    demo.request(2, "ping", json!({}));
    let next = demo.next();
    assert_eq!(
        next["id"], 2,
        "the cancelled sleep must get no response: {next}"
    );
    // Generous: this only catches a sleep that did not stop.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_silent(&mut demo, Duration::from_millis(200));
}

#[test]
fn cancelling_unknown_finished_or_twice_is_ignored() {
    let mut demo = ready(&[]);
    demo.call(1, "echo", json!({ "text": "done" }));
    demo.result(1);
    demo.cancel(1); // finished
    demo.cancel(999); // unknown
    demo.notify("notifications/cancelled", json!({})); // malformed
    demo.notify("notifications/cancelled", json!({ "requestId": null }));
    demo.call(2, "sleep", json!({ "ms": 60_000 }));
    demo.cancel(2);
    demo.cancel(2); // twice
    demo.request(3, "ping", json!({}));
    let next = demo.next();
    assert_eq!(next["id"], 3, "{next}");
    assert_silent(&mut demo, Duration::from_millis(100));
}

#[test]
fn initialize_is_never_cancelled() {
    let mut demo = Proc::demo(&[]);
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}});
    let mut bytes = serde_json::to_vec(&init).unwrap();
    bytes.push(b'\n');
    bytes.extend(serde_json::to_vec(&cancel).unwrap());
    bytes.push(b'\n');
    demo.write_raw(&bytes);
    assert_eq!(demo.result(0)["protocolVersion"], "2025-11-25");
}

#[test]
fn progress_arrives_before_the_result_and_increases() {
    let mut demo = ready(&[]);
    demo.request(
        1,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 450 }, "_meta": { "progressToken": "tok" } }),
    );
    let (before, response) = demo.until_response(1);
    assert_eq!(text(&response["result"]), "slept 450 ms");
    let progress: Vec<f64> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            assert_eq!(m["params"]["progressToken"], "tok");
            assert_eq!(m["params"]["total"], 450.0);
            m["params"]["progress"].as_f64().unwrap()
        })
        .collect();
    assert!(progress.len() >= 3, "{before:?}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
    // None after the result.
    assert_silent(&mut demo, Duration::from_millis(250));
}

#[test]
fn progress_is_sent_only_when_asked_for() {
    let mut demo = ready(&[]);
    demo.call(1, "sleep", json!({ "ms": 250 }));
    let (before, _) = demo.until_response(1);
    assert!(before.is_empty(), "{before:?}");
    // An integer token works too.
    demo.request(
        2,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 150 }, "_meta": { "progressToken": 7 } }),
    );
    let (before, _) = demo.until_response(2);
    assert!(
        before.iter().all(|m| m["params"]["progressToken"] == 7),
        "{before:?}"
    );
    assert!(!before.is_empty());
}

#[test]
fn a_cancelled_run_stops_the_whole_process_group_within_a_second() {
    let mut demo = ready(&["--allow-run"]);
    demo.call(
        1,
        "run",
        json!({ "argv": ["sh", "-c", "sleep 120 & sleep 120"] }),
    );
    // Wait until both sleeps run: the group is led by the `sh` child of the server.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pgid = loop {
        let found = children_of(demo.pid());
        if let Some(&sh) = found.first() {
            if live_in_group(sh).len() >= 3 {
                break sh;
            }
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let start = Instant::now();
    demo.cancel(1);
    demo.request(2, "ping", json!({}));
    let next = demo.next();
    assert_eq!(
        next["id"], 2,
        "the cancelled run must get no response: {next}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_in_group(pgid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes survived: {:?}",
            live_in_group(pgid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The direct child is reaped: no zombie child of the server. Its group can be gone a
    // moment before the reap (the server looks every few milliseconds), so this waits too.
    while !zombie_children_of(demo.pid()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "zombies left: {:?}",
            zombie_children_of(demo.pid())
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_during_a_running_child_stops_it_and_ends_the_server() {
    let mut demo = ready(&["--allow-run"]);
    demo.call(1, "run", json!({ "argv": ["sleep", "120"] }));
    let deadline = Instant::now() + Duration::from_secs(10);
    let child = loop {
        if let Some(&pid) = children_of(demo.pid()).first() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let start = Instant::now();
    demo.signal("TERM");
    assert_eq!(demo.wait_exit(), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(live_in_group(child).is_empty());
}

#[test]
fn sigterm_during_a_long_sleep_ends_the_server_promptly() {
    let mut demo = ready(&[]);
    demo.call(1, "sleep", json!({ "ms": 60_000 }));
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    demo.signal("TERM");
    assert_eq!(demo.wait_exit(), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// Pids of the live children of `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    proc_children(parent, |state| state != "Z")
}

fn zombie_children_of(parent: u32) -> Vec<u32> {
    proc_children(parent, |state| state == "Z")
}

fn proc_children(parent: u32, keep: impl Fn(&str) -> bool) -> Vec<u32> {
    util::mcp::processes_where(|state, ppid, _pgrp| ppid == parent && keep(state))
}
