//! The client calling tools as tasks (`Client::call_tool_as_task`, `start_task`, `get_task`,
//! `cancel_task`) against `mcpipe demo` and `mcpipe demo --conformance`, in both eras: the
//! round trip, the poll cadence (never faster than the server's interval), the deadline that
//! cancels the task, inputs inside a task (live at 2025-11-25, `tasks/update` at 2026-07-28),
//! failed tasks and servers that answer without a task. Each test runs under a watchdog.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{Client, Era, Error, ErrorCode, ErrorObject, TaskOptions, TaskStart};
use serde_json::{json, Value};
use util::client::{demo, first_text, mcpipe_bin, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn conformance(era: Era) -> Client {
    Client::builder(mcpipe_bin())
        .args(["demo", "--conformance"])
        .log_bad_lines(false)
        .era(era)
        .on_elicitation(|params: &Value| -> Result<Value, ErrorObject> {
            // Confirm anything; give a name when one is asked for.
            let wants_name = params["requestedSchema"]["properties"]
                .get("name")
                .is_some();
            let content = if wants_name {
                json!({ "name": "Ada" })
            } else {
                json!({ "confirm": true })
            };
            Ok(json!({ "action": "accept", "content": content }))
        })
        .spawn()
        .unwrap()
}

/// Requests the demo served so far (its `stats` tool; the call itself counts).
fn served(client: &mut Client) -> u64 {
    let stats = client.call_tool("stats", json!({})).unwrap();
    stats["structuredContent"]["requests"].as_u64().unwrap()
}

#[test]
fn a_task_round_trip_in_both_eras() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let mut client = demo().era(era).spawn().unwrap();
            let result = client
                .call_tool_as_task("sleep", json!({ "ms": 200 }), TaskOptions::new())
                .unwrap();
            assert_eq!(first_text(&result), "slept 200 ms", "{era:?}: {result}");
            // The pieces: start, status, cancel, status.
            let TaskStart::Task(task) = client
                .start_task("sleep", json!({ "ms": 30000 }), None)
                .unwrap()
            else {
                panic!("{era:?}: no task made");
            };
            let id = task["taskId"].as_str().unwrap().to_owned();
            assert_eq!(client.get_task(&id).unwrap()["status"], "working");
            client.cancel_task(&id).unwrap();
            assert_eq!(client.get_task(&id).unwrap()["status"], "cancelled");
            let err = client.get_task("no-such-task").unwrap_err();
            assert!(
                matches!(&err, Error::Rpc(e) if e.code == ErrorCode::INVALID_PARAMS),
                "{era:?}: {err}"
            );
        }
    });
}

#[test]
fn polls_never_come_faster_than_the_server_asks_and_the_deadline_cancels_the_task() {
    watchdog(LIMIT, || {
        let mut client = demo().era(Era::Legacy).spawn().unwrap();
        let before = served(&mut client);
        let started = Instant::now();
        client
            .call_tool_as_task("sleep", json!({ "ms": 1200 }), TaskOptions::new())
            .unwrap();
        let took = started.elapsed();
        let requests = served(&mut client) - before - 1;
        // The demo asks for 250 ms between polls: over ~1.2 s that is at most ~6 polls, plus
        // the call and the result.
        let most = 2 + took.as_millis() as u64 / 250 + 1;
        assert!(
            requests <= most,
            "{requests} requests in {took:?}, at most {most}"
        );
        // The deadline: the call fails with a timeout and the task is cancelled.
        let started = Instant::now();
        let err = client
            .call_tool_as_task(
                "sleep",
                json!({ "ms": 60000 }),
                TaskOptions::new().deadline(Duration::from_millis(600)),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        let tasks = client
            .request("tasks/list", None, mcpipe::RequestOptions::new())
            .unwrap();
        let last = tasks["tasks"].as_array().unwrap().last().cloned().unwrap();
        assert_eq!(last["status"], "cancelled", "{tasks}");
    });
}

#[test]
fn inputs_inside_a_task_are_answered_in_both_eras() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let mut client = conformance(era);
            let result = client
                .call_tool_as_task(
                    "confirm_delete",
                    json!({ "filename": "f.txt" }),
                    TaskOptions::new(),
                )
                .unwrap();
            assert_eq!(first_text(&result), "deleted f.txt", "{era:?}: {result}");
            let result = client
                .call_tool_as_task("multi_input", json!({}), TaskOptions::new())
                .unwrap();
            assert_eq!(
                first_text(&result),
                "name Ada, confirmed true",
                "{era:?}: {result}"
            );
        }
        // Under 2026-07-28 a quick tool asks first in plain rounds, then makes the task.
        let mut client = conformance(Era::Modern);
        let result = client
            .call_tool_as_task("test_tool_with_task", json!({}), TaskOptions::new())
            .unwrap();
        assert!(first_text(&result).contains("Ada"), "{result}");
    });
}

#[test]
fn failed_tasks_refused_calls_and_answers_without_a_task() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let mut client = conformance(era);
            let err = client
                .call_tool_as_task("protocol_error_job", json!({}), TaskOptions::new())
                .unwrap_err();
            assert!(
                matches!(&err, Error::Rpc(e) if e.code == ErrorCode::INTERNAL_ERROR),
                "{era:?}: {err}"
            );
            let result = client
                .call_tool_as_task("failing_job", json!({}), TaskOptions::new())
                .unwrap();
            assert_eq!(result["isError"], true, "{era:?}: {result}");
        }
        // A tool that takes no tasks: refused at 2025-11-25, a plain answer under 2026-07-28.
        let mut legacy = conformance(Era::Legacy);
        let err = legacy
            .call_tool_as_task("greet", json!({ "name": "x" }), TaskOptions::new())
            .unwrap_err();
        assert!(
            matches!(&err, Error::Rpc(e) if e.code == ErrorCode::METHOD_NOT_FOUND),
            "{err}"
        );
        let mut modern = conformance(Era::Modern);
        let start = modern
            .start_task("greet", json!({ "name": "x" }), None)
            .unwrap();
        assert!(
            matches!(&start, TaskStart::Done(r) if first_text(r) == "Hello, x!"),
            "{start:?}"
        );
    });
}
