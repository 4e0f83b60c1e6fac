//! The client against `mcpipe demo` (issue 3's contract): every helper, timeouts with
//! cancellation, progress, the hard maximum, and the close sequence. These tests need the demo
//! server; until it is merged they fail.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{Error, ErrorCode, RequestOptions, ShutdownStage};
use serde_json::json;
use util::client::{demo, first_text, process_alive, watchdog};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn every_helper_works_against_the_demo() {
    watchdog(LIMIT, || {
        let mut client = demo().spawn().unwrap();
        assert!(!client.protocol_version().is_empty());
        client.ping().unwrap();
        let tools = client.list_tools().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        for name in ["echo", "fail", "panic", "sleep", "stats"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
        let echo = client
            .call_tool("echo", json!({"text": "hi demo"}))
            .unwrap();
        assert_eq!(first_text(&echo), "hi demo");
        let fail = client
            .call_tool("fail", json!({"message": "boom"}))
            .unwrap();
        assert_eq!(fail["isError"], true);
        // `panic` must not take the server down, however it answers.
        let _ = client.call_tool("panic", json!({}));
        client.call_tool("stats", json!({})).unwrap();
        let resources = client.list_resources().unwrap();
        assert!(resources.iter().any(|r| r["uri"] == "mcpipe://demo/readme"));
        let readme = client.read_resource("mcpipe://demo/readme").unwrap();
        assert!(readme["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()));
        let prompts = client.list_prompts().unwrap();
        assert!(prompts.iter().any(|p| p["name"] == "greet"));
        let greeting = client.get_prompt("greet", json!({"name": "Ada"})).unwrap();
        assert!(greeting["messages"]
            .as_array()
            .is_some_and(|m| !m.is_empty()));
        let err = client
            .request("no/such/method", None, RequestOptions::new())
            .unwrap_err();
        assert!(matches!(&err, Error::Rpc(e) if e.code == ErrorCode::METHOD_NOT_FOUND));
        client.ping().unwrap();
    });
}

#[test]
fn resource_templates_are_listed_by_both_clients() {
    watchdog(LIMIT, || {
        let template = |list: Vec<serde_json::Value>| {
            let uris: Vec<&str> = list
                .iter()
                .filter_map(|t| t["uriTemplate"].as_str())
                .collect();
            assert_eq!(uris, ["mcpipe://demo/echo/{text}"], "{list:?}");
        };
        let mut client = demo().spawn().unwrap();
        template(client.list_resource_templates().unwrap());
        let shared = client.into_shared().unwrap();
        template(shared.list_resource_templates().unwrap());
        shared.close();
    });
}

#[test]
fn a_timed_out_sleep_is_cancelled_and_its_answer_never_arrives() {
    watchdog(LIMIT, || {
        let mut client = demo().spawn().unwrap();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 2000}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(300))
                    .reset_on_progress(false),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        client.pump(Duration::from_millis(2300)).unwrap();
        assert_eq!(client.stats().late_responses, 0);
        assert!(client.stats().late_progress <= 1);
        client.ping().unwrap();
    });
}

#[test]
fn progress_from_the_demo_resets_the_timeout() {
    watchdog(LIMIT, || {
        let mut client = demo().spawn().unwrap();
        let mut count = 0;
        let mut on_progress = |_: &mcpipe::Progress| count += 1;
        client
            .call_tool_with(
                "sleep",
                json!({"ms": 1000}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(350))
                    .on_progress(&mut on_progress),
            )
            .unwrap();
        assert!(count >= 5, "{count} progress notifications");
    });
}

#[test]
fn the_hard_maximum_ends_a_demo_sleep_despite_progress() {
    watchdog(LIMIT, || {
        let mut client = demo().spawn().unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 10000}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(350))
                    .max_total(Duration::from_millis(1000)),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(1000) && took < Duration::from_secs(5),
            "{took:?}"
        );
    });
}

#[test]
fn the_demo_closes_at_stdin_eof_and_by_sigterm() {
    watchdog(LIMIT, || {
        let mut client = demo().spawn().unwrap();
        let pid = client.pid().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed);
        assert!(
            shutdown.elapsed < Duration::from_secs(1),
            "{:?}",
            shutdown.elapsed
        );
        assert!(!process_alive(pid));

        let mut client = demo().spawn().unwrap();
        let shutdown = client.terminate(Duration::from_secs(2));
        assert_eq!(shutdown.stage, ShutdownStage::Terminated);
        assert!(
            shutdown.elapsed < Duration::from_secs(1),
            "{:?}",
            shutdown.elapsed
        );
    });
}
