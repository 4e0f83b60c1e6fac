//! The `mcpipe demo` command line: help, unknown flags, the message limit, a clean stdout.

mod util;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use util::mcp::Proc;

/// Runs `mcpipe demo ARGS` with stdin closed; returns (exit code, stdout, stderr). Killed
/// after a bound.
fn run_demo(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpipe"))
        .arg("demo")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mcpipe demo {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_goes_to_stdout_and_exits_zero() {
    let (code, stdout, stderr) = run_demo(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(stderr.is_empty(), "{stderr}");
    for flag in [
        "--idle-timeout-ms",
        "--max-message-bytes",
        "--shutdown-grace-ms",
        "--worker-keep-alive-ms",
        "--allow-run",
        "--help",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from {stdout}");
    }
}

#[test]
fn unknown_flags_print_usage_and_exit_two() {
    for args in [
        &["--frobnicate"][..],
        &["--idle-timeout-ms"],
        &["--idle-timeout-ms", "soon"],
        &["--shutdown-grace-ms", "-1"],
        &["--worker-keep-alive-ms", "soon"],
        &["extra"],
    ] {
        let (code, stdout, stderr) = run_demo(args);
        assert_eq!(code, Some(2), "{args:?}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("usage:"), "{stderr}");
    }
}

#[test]
fn end_of_input_at_once_exits_zero_with_nothing_on_stdout() {
    let (code, stdout, _) = run_demo(&[]);
    assert_eq!(code, Some(0));
    assert!(stdout.is_empty());
}

#[test]
fn the_message_limit_is_enforced_and_the_server_goes_on() {
    let mut demo = Proc::demo(&["--max-message-bytes", "300"]);
    demo.initialize();
    demo.call(1, "echo", json!({ "text": "x".repeat(1000) }));
    let response = demo.next();
    assert_eq!(response["error"]["code"], -32600, "{response}");
    demo.call(2, "echo", json!({ "text": "small" }));
    assert_eq!(demo.result(2)["content"][0]["text"], "small");
}

#[test]
fn tool_panics_are_logged_on_stderr_only() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo.call(1, "panic", json!({}));
    demo.result(1);
    demo.close_stdin();
    assert_eq!(demo.wait_exit(), Some(0));
    // Give the stderr reader a moment to drain the pipe after exit.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !demo.stderr.lock().unwrap().contains("panicked") {
        assert!(Instant::now() < deadline, "no panic report on stderr");
        std::thread::sleep(Duration::from_millis(10));
    }
}
