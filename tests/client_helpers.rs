//! The client's MCP helpers and message routing, against a well-behaved fixture server.

mod util;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpipe::{Client, ClientBuilder, Era, Error, ErrorCode, LogLevel, RequestOptions};
use serde_json::{json, Value};
use util::client::{first_text, fixture, watchdog};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn handshake_negotiates_a_supported_version() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        assert_eq!(client.protocol_version(), "2025-11-25");
        assert_eq!(
            client.initialize_result()["serverInfo"]["name"],
            "good-fixture"
        );
        assert!(client.pid().is_some());
        client.close();
    });
}

#[test]
fn an_older_version_is_accepted_when_the_server_echoes_it() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .protocol_version("2025-03-26")
            .spawn()
            .unwrap();
        assert_eq!(client.protocol_version(), "2025-03-26");
    });
}

#[test]
fn an_unknown_requested_version_gets_the_servers_latest() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .protocol_version("1999-01-01")
            .spawn()
            .unwrap();
        assert_eq!(client.protocol_version(), "2025-11-25");
    });
}

#[test]
fn a_version_the_client_does_not_support_fails_the_handshake() {
    watchdog(LIMIT, || {
        let err = fixture("good_server.py")
            .args(["--force-version", "2030-01-01"])
            .spawn()
            .unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err}");
        assert!(err.to_string().contains("2030-01-01"), "{err}");
    });
}

#[test]
fn ping_gets_an_empty_result() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        client.ping().unwrap();
        let result = client.request("ping", None, RequestOptions::new()).unwrap();
        assert_eq!(result, json!({}));
    });
}

#[test]
fn list_tools_follows_every_page() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py")
            .args(["--page-size", "2"])
            .spawn()
            .unwrap();
        let tools = client.list_tools().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names.len(), 9, "{names:?}");
        assert_eq!(names[0], "echo");
        assert!(names.contains(&"exit"));
    });
}

#[test]
fn call_tool_returns_results_and_tool_errors_as_results() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let echo = client.call_tool("echo", json!({"text": "hi"})).unwrap();
        assert_eq!(first_text(&echo), "hi");
        let fail = client
            .call_tool("fail", json!({"message": "boom"}))
            .unwrap();
        assert_eq!(fail["isError"], true);
        assert_eq!(first_text(&fail), "failed: boom");
        let unknown = client.call_tool("nope", Value::Null).unwrap_err();
        assert!(
            matches!(&unknown, Error::Rpc(e) if e.code == ErrorCode::INVALID_PARAMS),
            "{unknown}"
        );
        client.ping().unwrap();
    });
}

#[test]
fn resources_and_prompts() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let resources = client.list_resources().unwrap();
        assert_eq!(resources[0]["uri"], "mcpipe://demo/readme");
        let read = client.read_resource("mcpipe://demo/readme").unwrap();
        assert_eq!(read["contents"][0]["text"], "the readme\n");
        let missing = client.read_resource("mcpipe://nope").unwrap_err();
        assert!(matches!(&missing, Error::Rpc(e) if e.code == ErrorCode(-32002)));
        let prompts = client.list_prompts().unwrap();
        assert_eq!(prompts[0]["name"], "greet");
        let prompt = client.get_prompt("greet", json!({"name": "Ada"})).unwrap();
        assert_eq!(prompt["messages"][0]["content"]["text"], "Hello, Ada!");
    });
}

#[test]
fn unknown_method_is_an_rpc_error_with_a_sentence() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let err = client
            .request("no/such/method", Some(json!({})), RequestOptions::new())
            .unwrap_err();
        assert!(matches!(&err, Error::Rpc(e) if e.code == ErrorCode::METHOD_NOT_FOUND));
        assert!(!err.is_retryable());
        let text = err.to_string();
        assert!(
            text.starts_with("the peer answered with an error"),
            "{text}"
        );
    });
}

#[test]
fn roots_list_is_answered_from_configured_roots() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py")
            .root("file:///work", Some("work"))
            .spawn()
            .unwrap();
        let result = client.call_tool("ask_roots", json!({})).unwrap();
        let answer: Value = serde_json::from_str(first_text(&result)).unwrap();
        assert_eq!(answer["result"]["roots"][0]["uri"], "file:///work");
        assert_eq!(answer["result"]["roots"][0]["name"], "work");
        assert_eq!(client.stats().server_requests, 1);
    });
}

#[test]
fn roots_list_without_roots_and_unsupported_requests_get_method_not_found() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        for tool in ["ask_roots", "ask_unsupported"] {
            let result = client.call_tool(tool, json!({})).unwrap();
            let answer: Value = serde_json::from_str(first_text(&result)).unwrap();
            assert_eq!(answer["error"]["code"], -32601, "{tool}: {answer}");
        }
    });
}

#[test]
fn notifications_are_queued_in_order() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        client.call_tool("notify", json!({"count": 3})).unwrap();
        let notes = client.take_notifications();
        assert_eq!(notes.len(), 3);
        assert_eq!(notes[2].method, "notifications/message");
        assert_eq!(notes[2].params.as_ref().unwrap()["data"], "note 2");
        assert!(client
            .next_notification(Duration::from_millis(50))
            .unwrap()
            .is_none());
    });
}

const FULL_QUEUE: &str = "MCPIPE_TEST_FULL_NOTIFICATION_QUEUE";
const QUEUE_FULL_NOTICE: &str = "the server's notifications are not being taken and \
                                 the queue is full (10000 waiting)";

#[test]
fn a_full_notification_queue_is_said_once_on_stderr() {
    if std::env::var_os(FULL_QUEUE).is_some() {
        // Its own watchdog: the outer one cannot end this process.
        return watchdog(Duration::from_secs(100), overflow_both_queues);
    }
    watchdog(Duration::from_secs(120), || {
        // The notice goes to this process's stderr, shared with every other test: the test
        // runs again, alone, in a child process whose stderr it reads.
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "a_full_notification_queue_is_said_once_on_stderr",
                "--exact",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env(FULL_QUEUE, "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the run alone failed:\n{stdout}{stderr}"
        );
        assert!(stdout.contains("1 passed"), "{stdout}");
        let (plain, shared) = stderr
            .split_once("-- the shared client --")
            .unwrap_or_else(|| panic!("no marker in the child's stderr:\n{stderr}"));
        for (kind, said) in [("Client", plain), ("SharedClient", shared)] {
            assert_eq!(
                said.matches(QUEUE_FULL_NOTICE).count(),
                1,
                "{kind}: the first dropped notification is said once on stderr:\n{stderr}"
            );
        }
    });
}

/// Both clients, their queues overflowed twice: 30 notifications dropped, then 20 more.
fn overflow_both_queues() {
    let mut client = fixture("good_server.py")
        .log_bad_lines(true)
        .spawn()
        .unwrap();
    client
        .call_tool("notify", json!({"count": 10_030}))
        .unwrap();
    assert_eq!(client.stats().notifications_dropped, 30);
    client.call_tool("notify", json!({"count": 20})).unwrap();
    assert_eq!(client.stats().notifications_dropped, 50);
    assert_eq!(client.take_notifications().len(), 10_000);
    client.close();
    mcpipe::stderr_line("-- the shared client --");
    let client = fixture("good_server.py")
        .log_bad_lines(true)
        .spawn_shared()
        .unwrap();
    for (count, dropped) in [(10_030, 30), (20, 50)] {
        client
            .call_tool("notify", json!({ "count": count }))
            .unwrap();
        // The IO thread publishes the queue after it routes the answer.
        let end = Instant::now() + Duration::from_secs(20);
        while client.stats().notifications_dropped < dropped && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(client.stats().notifications_dropped, dropped);
    }
    client.close();
}

#[test]
fn notifications_reach_the_callback() {
    watchdog(LIMIT, || {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let mut client = fixture("good_server.py")
            .on_notification(move |n| sink.lock().unwrap().push(n.method))
            .spawn()
            .unwrap();
        client.call_tool("notify", json!({"count": 2})).unwrap();
        assert_eq!(seen.lock().unwrap().len(), 2);
        assert!(client.take_notifications().is_empty());
    });
}

#[test]
fn stderr_lines_reach_the_callback_and_the_tail() {
    watchdog(LIMIT, || {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let mut client = fixture("good_server.py")
            .on_stderr(move |l| {
                sink.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(l).into_owned())
            })
            .spawn()
            .unwrap();
        let err = client.call_tool("exit", json!({"code": 0})).unwrap_err();
        assert!(matches!(err, Error::ServerExited { .. }), "{err}");
        assert!(lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l == "exiting on request"));
        assert!(client.stderr_tail().contains("exiting on request"));
    });
}

#[test]
fn environment_is_inherited_or_restricted_to_an_allowlist() {
    watchdog(LIMIT, || {
        std::env::set_var("MCPIPE_TEST_SECRET", "s3cret");
        let script = "import os,sys; sys.stderr.write(repr(sorted(k for k in os.environ if k.startswith('MCPIPE_TEST')))); sys.stderr.flush()";
        let run = |builder: mcpipe::ClientBuilder| {
            let mut client = builder.initialize(false).spawn().unwrap();
            let _ = client.pump(Duration::from_secs(5));
            client.stderr_tail()
        };
        let all = run(mcpipe::Client::builder("python3").args(["-c", script]));
        assert!(all.contains("MCPIPE_TEST_SECRET"), "{all}");
        let some = run(mcpipe::Client::builder("python3")
            .args(["-c", script])
            .env_allowlist(["PATH"])
            .env("MCPIPE_TEST_GIVEN", "1"));
        assert!(!some.contains("MCPIPE_TEST_SECRET"), "{some}");
        assert!(some.contains("MCPIPE_TEST_GIVEN"), "{some}");
    });
}

#[test]
fn requests_sent_raw_are_answered_as_stray_responses() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        client
            .send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"raw-1\",\"method\":\"ping\"}\n{oops\n")
            .unwrap();
        let first = client
            .next_stray_response(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert_eq!(first.id, Some("raw-1".into()));
        let second = client
            .next_stray_response(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert_eq!(second.id, None);
        assert_eq!(second.result.unwrap_err().code, ErrorCode::PARSE_ERROR);
    });
}

#[test]
fn a_command_that_does_not_exist_is_a_spawn_error() {
    watchdog(LIMIT, || {
        let err = mcpipe::Client::builder("/nonexistent/mcpipe-server")
            .spawn()
            .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
        assert!(err.to_string().starts_with("could not run"));
        assert!(std::error::Error::source(&err).is_some());
    });
}

/// `ClientBuilder::log_level` against a server of this crate (examples/three_tools.rs, whose
/// `count_to` logs "counted to N" at `info`), in both eras.
#[test]
fn log_messages_come_at_the_level_asked_for_in_both_eras() {
    watchdog(LIMIT, || {
        let logs = |builder: ClientBuilder| -> Vec<Value> {
            let mut client = builder.spawn().unwrap();
            client.call_tool("count_to", json!({"n": 0})).unwrap();
            let logs = client
                .take_notifications()
                .into_iter()
                .filter(|n| n.method == "notifications/message")
                .map(|n| n.params.unwrap_or_default()["data"].clone())
                .collect();
            client.close();
            logs
        };
        let server = || Client::builder(util::example_binary("three_tools"));
        let none: Vec<Value> = Vec::new();
        let counted = [json!("counted to 0")];
        // MCP 2026-07-28 (what this server speaks): a request's logs only when it names a level.
        assert_eq!(logs(server()), none, "modern, no level");
        assert_eq!(logs(server().log_level(LogLevel::Info)), counted);
        assert_eq!(logs(server().log_level(LogLevel::Warning)), none);
        // The handshake era: the server's own choice (info and up) until `logging/setLevel`.
        let legacy = || server().era(Era::Legacy);
        assert_eq!(logs(legacy()), counted, "handshake era, no level");
        assert_eq!(logs(legacy().log_level(LogLevel::Warning)), none);
        assert_eq!(logs(legacy().log_level(LogLevel::Debug)), counted);
    });
}

/// A file in a fresh scratch directory of this test process, with `mode`.
fn scratch_file(name: &str, text: &str, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mcpipe-client-helpers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

#[test]
fn a_script_whose_interpreter_is_missing_is_a_spawn_error_that_names_it() {
    watchdog(LIMIT, || {
        // Saved with CRLF line ends: the kernel looks for "python3\r", and says ENOENT.
        let script = scratch_file("crlf.py", "#!/usr/bin/python3\r\nprint()\r\n", 0o755);
        let err = mcpipe::Client::builder(&script).spawn().unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("exists"), "{text}");
        assert!(text.contains(r#""/usr/bin/python3\r""#), "{text}");
    });
}

#[test]
fn a_working_directory_that_does_not_exist_is_named_in_the_spawn_error() {
    watchdog(LIMIT, || {
        let err = mcpipe::Client::builder("true")
            .current_dir("/nonexistent/mcpipe-dir")
            .spawn()
            .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(r#"the working directory "/nonexistent/mcpipe-dir" does not exist"#),
            "{text}"
        );
    });
}

#[test]
fn a_program_that_cannot_be_run_gets_the_os_error_as_it_is() {
    watchdog(LIMIT, || {
        // Not executable, a directory, no such file: the OS error alone is clear.
        let plain = scratch_file("plain.sh", "#!/bin/sh\n", 0o644);
        for (program, words) in [
            (plain.to_str().unwrap(), "Permission denied (os error 13)"),
            ("/tmp", "Permission denied (os error 13)"),
            (
                "/nonexistent/mcpipe-server",
                "No such file or directory (os error 2)",
            ),
        ] {
            let err = mcpipe::Client::builder(program).spawn().unwrap_err();
            assert!(matches!(err, Error::Spawn { .. }), "{err}");
            assert!(err.to_string().ends_with(words), "{program}: {err}");
        }
    });
}
