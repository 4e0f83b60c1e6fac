//! Tools of `mcpipe demo`: listing, every tool, argument errors, protocol errors, and a server
//! that survives a long run of failing and panicking tools.

mod util;

use serde_json::json;
use util::mcp::{text, Proc};

fn ready() -> Proc {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo
}

#[test]
fn tools_list_names_every_demo_tool_with_an_object_schema() {
    let mut demo = ready();
    demo.request(1, "tools/list", json!({}));
    let result = demo.result(1);
    let tools = result["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["echo", "fail", "panic", "sleep", "stats"]);
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(tool["description"].is_string());
    }
    assert!(result.get("nextCursor").is_none());
}

#[test]
fn echo_returns_its_text() {
    let mut demo = ready();
    let tricky = "héllo 🦀\nline two\t\"quoted\" \\ \u{2028}";
    demo.call(1, "echo", json!({ "text": tricky }));
    let result = demo.result(1);
    assert_eq!(
        result["content"],
        json!([{ "type": "text", "text": tricky }])
    );
    assert!(result.get("isError").is_none());
}

#[test]
fn fail_is_an_error_result_with_the_message() {
    let mut demo = ready();
    demo.call(1, "fail", json!({ "message": "boom ünïcode" }));
    let result = demo.result(1);
    assert_eq!(result["isError"], true);
    assert!(text(&result).contains("boom ünïcode"), "{result}");
}

#[test]
fn panic_is_an_error_result_and_the_server_goes_on() {
    let mut demo = ready();
    demo.call(1, "panic", json!({}));
    let result = demo.result(1);
    assert_eq!(result["isError"], true);
    assert!(text(&result).contains("panicked"), "{result}");
    demo.call(2, "echo", json!({ "text": "alive" }));
    assert_eq!(text(&demo.result(2)), "alive");
}

#[test]
fn sleep_waits_and_reports() {
    let mut demo = ready();
    let start = std::time::Instant::now();
    demo.call(1, "sleep", json!({ "ms": 120 }));
    let result = demo.result(1);
    assert!(start.elapsed() >= std::time::Duration::from_millis(120));
    assert_eq!(text(&result), "slept 120 ms");
}

#[test]
fn stats_are_structured_and_count() {
    let mut demo = ready();
    demo.call(1, "echo", json!({ "text": "a" }));
    demo.result(1);
    demo.call(2, "stats", json!({}));
    let result = demo.result(2);
    let stats = &result["structuredContent"];
    assert!(stats["requests"].as_u64().unwrap() >= 2, "{stats}");
    assert_eq!(stats["idle_evictions"], 0);
    assert_eq!(stats["cache_entries"], 1);
    // Mirrored as JSON text for older clients.
    let mirrored: serde_json::Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(&mirrored, stats);
}

#[test]
fn the_echo_cache_keeps_small_texts_only() {
    // The demo's cache is there for the idle hook to evict; a 100 KB text is echoed but not
    // kept (the cache holds 64 KiB in all), so large messages cost the demo no memory of its
    // own beyond the transport's.
    let mut demo = ready();
    let big = "b".repeat(100_000);
    demo.call(1, "echo", json!({ "text": big }));
    assert_eq!(text(&demo.result(1)), big);
    demo.call(2, "echo", json!({ "text": "small" }));
    demo.result(2);
    demo.call(3, "stats", json!({}));
    assert_eq!(demo.result(3)["structuredContent"]["cache_entries"], 1);
}

#[test]
fn missing_or_wrong_arguments_are_error_results_naming_them() {
    let mut demo = ready();
    demo.call(1, "echo", json!({}));
    let result = demo.result(1);
    assert_eq!(result["isError"], true);
    assert_eq!(
        text(&result),
        "missing argument \"text\": expected a string"
    );
    demo.call(2, "sleep", json!({ "ms": "long" }));
    let result = demo.result(2);
    assert_eq!(result["isError"], true);
    assert_eq!(
        text(&result),
        "argument \"ms\" must be an integer, got a string"
    );
    demo.call(3, "sleep", json!({ "ms": -5 }));
    assert_eq!(demo.result(3)["isError"], true);
}

#[test]
fn unknown_tools_and_malformed_calls_are_invalid_params() {
    let mut demo = ready();
    demo.call(1, "no-such-tool", json!({}));
    assert_eq!(demo.error_code(1), -32602);
    demo.request(2, "tools/call", json!({ "arguments": {} }));
    assert_eq!(demo.error_code(2), -32602);
    demo.request(3, "tools/call", json!({ "name": 7 }));
    assert_eq!(demo.error_code(3), -32602);
    demo.request(4, "tools/call", json!({ "name": "echo", "arguments": [1] }));
    assert_eq!(demo.error_code(4), -32602);
    // A call without `arguments` runs with none.
    demo.request(5, "tools/call", json!({ "name": "stats" }));
    assert!(demo.result(5)["structuredContent"].is_object());
}

#[test]
fn a_call_read_apart_is_answered_as_one_read_whole() {
    // The loop reads a plainly written `tools/call`'s name and arguments apart from its params;
    // with the method after the params it reads them whole. The answers must not differ.
    let mut demo = ready();
    let params = [
        json!({ "name": "echo", "arguments": { "text": "a \"quoted\" \u{e9}" } }),
        json!({ "arguments": { "text": "first" }, "name": "echo", "_meta": { "progressToken": 1 } }),
        json!({ "name": "echo", "arguments": { "text": 5 } }),
        json!({ "name": "echo", "arguments": [1] }),
        json!({ "name": "echo", "arguments": null }),
        json!({ "name": ["echo"] }),
        json!({ "arguments": {} }),
        json!({}),
        json!({ "name": "fail", "arguments": { "message": "m" }, "task": { "ttl": 1000 } }),
        json!({ "name": "no-such-tool" }),
    ];
    for (n, params) in (0i64..).zip(params) {
        let apart = 100 + 2 * n;
        let whole = apart + 1;
        demo.request(apart, "tools/call", params.clone());
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{whole},"params":{params},"method":"tools/call"}}"#);
        demo.write_raw(format!("{line}\n").as_bytes());
        let mut first = demo.response(apart);
        let mut second = demo.response(whole);
        first["id"] = json!(0);
        second["id"] = json!(0);
        assert_eq!(first, second, "{params}");
    }
}

#[test]
fn a_hundred_tool_errors_and_panics_leave_the_server_alive() {
    let mut demo = ready();
    for i in 0..100 {
        let id = 1 + 2 * i;
        demo.call(id, "fail", json!({ "message": format!("failure {i}") }));
        demo.call(id + 1, "panic", json!({}));
    }
    for i in 0..100 {
        let id = 1 + 2 * i;
        let failed = demo.result(id);
        assert_eq!(failed["isError"], true);
        assert!(text(&failed).contains(&format!("failure {i}")));
        assert_eq!(demo.result(id + 1)["isError"], true);
    }
    demo.call(1000, "echo", json!({ "text": "still here" }));
    assert_eq!(text(&demo.result(1000)), "still here");
}

#[test]
fn run_is_absent_without_allow_run() {
    let mut demo = ready();
    demo.call(1, "run", json!({ "argv": ["true"] }));
    assert_eq!(demo.error_code(1), -32602);
}

#[test]
fn run_returns_exit_code_and_output() {
    let mut demo = Proc::demo(&["--allow-run"]);
    demo.initialize();
    demo.request(1, "tools/list", json!({}));
    let tools = demo.result(1);
    assert!(tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "run"));
    demo.call(
        2,
        "run",
        json!({ "argv": ["sh", "-c", "echo out; echo err >&2; exit 3"] }),
    );
    let result = demo.result(2);
    let out = &result["structuredContent"];
    assert_eq!(out["exit_code"], 3, "{result}");
    assert_eq!(out["stdout"], "out\n");
    assert_eq!(out["stderr"], "err\n");
    assert_eq!(out["timed_out"], false);
}

#[test]
fn run_stops_a_command_at_its_timeout() {
    let mut demo = Proc::demo(&["--allow-run"]);
    demo.initialize();
    let start = std::time::Instant::now();
    demo.call(
        1,
        "run",
        json!({ "argv": ["sleep", "30"], "timeout_ms": 100 }),
    );
    let result = demo.result(1);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    assert_eq!(result["structuredContent"]["signal"], 15);
}

/// A command that is stopped (here it stops itself) acts on SIGTERM only once it runs again:
/// the SIGTERM at its timeout is followed by SIGCONT, so it ends on the SIGTERM (its trap exits
/// 0) rather than by SIGKILL after the grace.
#[test]
fn run_continues_a_stopped_command_so_that_it_ends_on_sigterm() {
    let mut demo = Proc::demo(&["--allow-run"]);
    demo.initialize();
    let script = "trap 'exit 0' TERM; kill -STOP $$; sleep 30";
    demo.call(
        1,
        "run",
        json!({ "argv": ["sh", "-c", script], "timeout_ms": 300 }),
    );
    let result = demo.result(1);
    let out = &result["structuredContent"];
    assert_eq!(out["timed_out"], true, "{result}");
    assert_eq!(out["exit_code"], 0, "{result}");
    assert!(out["signal"].is_null(), "{result}");
}

#[test]
fn run_of_a_missing_program_is_an_error_result() {
    let mut demo = Proc::demo(&["--allow-run"]);
    demo.initialize();
    demo.call(1, "run", json!({ "argv": ["/no/such/program"] }));
    assert_eq!(demo.result(1)["isError"], true);
    demo.call(2, "run", json!({ "argv": [] }));
    assert_eq!(demo.result(2)["isError"], true);
}
