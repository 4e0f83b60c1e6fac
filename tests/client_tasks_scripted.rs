//! The task loop of `Client` and `SharedClient` against a scripted 2025-11-25 server
//! (`tests/fixtures/task_server.py`), for what `mcpipe demo` never does: a task whose question
//! is queued until the client calls `tasks/result` (as the official SDK's servers do), a
//! `tasks/result` that never answers, a server that never answers `tasks/*` or the call
//! itself (the deadline must bound every request inside and cancel the task), and a deadline
//! too far to add to the clock. Each test runs under a watchdog.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{ClientBuilder, Error, ErrorObject, TaskOptions};
use serde_json::{json, Value};
use util::client::{demo, first_text, fixture, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// The scripted server in `mode`, with an elicitation callback that picks "technical".
fn scripted(mode: &str) -> ClientBuilder {
    fixture("task_server.py").arg(mode).on_elicitation(
        |_params: &Value| -> Result<Value, ErrorObject> {
            Ok(json!({ "action": "accept", "content": { "pick": "technical" } }))
        },
    )
}

/// What the fixture's `seen` tool answers: the methods it received, in order.
fn seen(result: Result<Value, Error>) -> Vec<String> {
    let result = result.unwrap();
    first_text(&result).lines().map(str::to_owned).collect()
}

const ANSWER: &str = r#"answer: {"action": "accept", "content": {"pick": "technical"}}"#;

/// Field test: server-everything's `simulate-research-query` (ambiguous) queues its
/// elicitation until `tasks/result`; the client only polled `tasks/get`, never saw the
/// question, and timed out. `input`: the waiting `tasks/result` brings the question and then
/// the outcome. `input-poll`: it brings the question but never answers; the client's timeout
/// (1 s) ends it, and the client goes back to polling. `input-live`: the question comes live
/// and `tasks/result` refuses a task that has not ended: the client polls.
#[test]
fn a_task_that_needs_input_gets_its_question_through_tasks_result() {
    watchdog(LIMIT, || {
        for mode in ["input", "input-poll", "input-live"] {
            let options = TaskOptions::new().deadline(Duration::from_secs(10));
            let mut client = scripted(mode)
                .timeout(Duration::from_secs(1))
                .spawn()
                .unwrap();
            let result = client.call_tool_as_task("research", json!({}), options.clone());
            let result = result.unwrap_or_else(|e| panic!("{mode}: {e}"));
            assert_eq!(first_text(&result), ANSWER, "{mode}");
            let methods = seen(client.call_tool("seen", json!({})));
            assert!(!methods.iter().any(|m| m == "tasks/cancel"), "{methods:?}");
            let answered = methods.iter().position(|m| m == "answer");
            let asked = methods.iter().position(|m| m == "tasks/result");
            assert!(asked.is_some() && answered.is_some(), "{mode}: {methods:?}");
            if mode != "input-live" {
                assert!(asked < answered, "{mode}: {methods:?}");
            }
            if mode != "input" {
                let after: Vec<&String> = methods[answered.unwrap()..].iter().collect();
                assert!(after.contains(&&String::from("tasks/get")), "{methods:?}");
                assert!(
                    after.contains(&&String::from("tasks/result")),
                    "{methods:?}"
                );
            }
            client.close();
            let shared = scripted(mode)
                .timeout(Duration::from_secs(1))
                .spawn_shared()
                .unwrap();
            let result = shared.call_tool_as_task("research", json!({}), options);
            let result = result.unwrap_or_else(|e| panic!("shared {mode}: {e}"));
            assert_eq!(first_text(&result), ANSWER, "shared {mode}");
            shared.close();
        }
    });
}

/// Asserts `err` is the deadline's timeout, and that it came in time: past the deadline, but
/// not by more than the bounded `tasks/cancel` (2 s) and some slack.
fn assert_deadline_error(err: &Error, took: Duration, deadline: Duration) {
    match err {
        Error::Timeout { method, .. } => {
            assert!(method.contains("deadline"), "{err}");
        }
        other => panic!("not the deadline's timeout: {other}"),
    }
    assert!(took >= deadline, "{took:?}");
    assert!(took < deadline + Duration::from_secs(4), "{took:?}: {err}");
}

/// Field test: with a server that never answers `tasks/get`, a 1 s deadline returned after the
/// client's full timeout (30 s), naming `tasks/get`, and sent no `tasks/cancel`.
#[test]
fn the_deadline_bounds_every_request_inside_the_call_and_cancels_the_task() {
    watchdog(LIMIT, || {
        let deadline = Duration::from_secs(1);
        // The client's own timeout is long: the deadline must win.
        let mut client = scripted("hang")
            .timeout(Duration::from_secs(10))
            .spawn()
            .unwrap();
        let started = Instant::now();
        let options = TaskOptions::new().deadline(deadline);
        let err = client
            .call_tool_as_task("sleep", json!({}), options.clone())
            .unwrap_err();
        assert_deadline_error(&err, started.elapsed(), deadline);
        let methods = seen(client.call_tool("seen", json!({})));
        assert!(methods.iter().any(|m| m == "tasks/cancel"), "{methods:?}");
        client.close();

        let shared = scripted("hang")
            .timeout(Duration::from_secs(10))
            .spawn_shared()
            .unwrap();
        let started = Instant::now();
        let err = shared
            .call_tool_as_task("sleep", json!({}), options.clone())
            .unwrap_err();
        assert_deadline_error(&err, started.elapsed(), deadline);
        let methods = seen(shared.call_tool("seen", json!({})));
        assert!(methods.iter().any(|m| m == "tasks/cancel"), "{methods:?}");
        shared.close();

        // The call itself is never answered: no task to cancel, the same error in time.
        let mut client = scripted("hang-start")
            .timeout(Duration::from_secs(10))
            .spawn()
            .unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_as_task("sleep", json!({}), options)
            .unwrap_err();
        assert_deadline_error(&err, started.elapsed(), deadline);
        client.close();
    });
}

/// `TaskOptions::deadline(Duration::MAX)` panicked ("overflow when adding duration to
/// instant"): a deadline too far for the clock is no deadline.
#[test]
fn a_deadline_too_far_for_the_clock_means_none() {
    watchdog(LIMIT, || {
        let options = TaskOptions::new()
            .deadline(Duration::MAX)
            .max_poll_interval(Duration::MAX);
        let mut client = demo().spawn().unwrap();
        let result = client
            .call_tool_as_task("sleep", json!({ "ms": 300 }), options.clone())
            .unwrap();
        assert_eq!(first_text(&result), "slept 300 ms", "{result}");
        client.close();
        let shared = demo().spawn_shared().unwrap();
        let result = shared
            .call_tool_as_task("sleep", json!({ "ms": 300 }), options)
            .unwrap();
        assert_eq!(first_text(&result), "slept 300 ms", "{result}");
        shared.close();
    });
}
