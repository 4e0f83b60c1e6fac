//! `SharedClient`'s task helpers (`call_tool_as_task`, `start_task`, `get_task`,
//! `cancel_task`) against `mcpipe demo` and `mcpipe demo --conformance` over pipes, in both
//! eras: the round trip, several threads polling their own tasks at once while plain calls go
//! on, the poll cadence, the deadline that cancels the task, and inputs inside a task
//! (answered by the IO thread's callbacks at 2025-11-25, by `tasks/update` at 2026-07-28).
//! Each test runs under a watchdog.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{Client, Era, Error, ErrorCode, ErrorObject, SharedClient, TaskOptions, TaskStart};
use serde_json::{json, Value};
use util::client::{demo, first_text, mcpipe_bin, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// Requests the demo served so far (its `stats` tool; the call itself counts).
fn served(client: &SharedClient) -> u64 {
    let stats = client.call_tool("stats", json!({})).unwrap();
    stats["structuredContent"]["requests"].as_u64().unwrap()
}

#[test]
fn a_shared_task_round_trip_in_both_eras() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let client = demo().era(era).spawn_shared().unwrap();
            let result = client
                .call_tool_as_task("sleep", json!({ "ms": 200 }), TaskOptions::new())
                .unwrap();
            assert_eq!(first_text(&result), "slept 200 ms", "{era:?}: {result}");
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
            client.close();
        }
    });
}

#[test]
fn several_threads_wait_for_their_own_tasks_at_once_while_plain_calls_go_on() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let client = demo().era(era).spawn_shared().unwrap();
            let started = Instant::now();
            let threads: Vec<_> = (0..4u64)
                .map(|i| {
                    let client = client.clone();
                    std::thread::spawn(move || {
                        let ms = 800 + 50 * i;
                        let result = client
                            .call_tool_as_task("sleep", json!({ "ms": ms }), TaskOptions::new())
                            .unwrap();
                        assert_eq!(first_text(&result), format!("slept {ms} ms"), "{result}");
                    })
                })
                .collect();
            // While four threads poll, a plain call on this thread is answered at once.
            std::thread::sleep(Duration::from_millis(100));
            let echo_started = Instant::now();
            let echo = client.call_tool("echo", json!({ "text": "hi" })).unwrap();
            let echo_took = echo_started.elapsed();
            for thread in threads {
                thread.join().unwrap();
            }
            let took = started.elapsed();
            assert!(first_text(&echo).contains("hi"), "{echo}");
            assert!(
                echo_took < Duration::from_millis(700),
                "{era:?}: echo {echo_took:?}"
            );
            // One after another the four would take at least 3.5 s.
            assert!(
                took < Duration::from_millis(2800),
                "{era:?}: four tasks took {took:?}"
            );
            client.close();
        }
    });
}

#[test]
fn shared_polls_never_come_faster_than_the_server_asks_and_the_deadline_cancels_the_task() {
    watchdog(LIMIT, || {
        let client = demo().era(Era::Legacy).spawn_shared().unwrap();
        let before = served(&client);
        let started = Instant::now();
        client
            .call_tool_as_task("sleep", json!({ "ms": 1200 }), TaskOptions::new())
            .unwrap();
        let took = started.elapsed();
        let requests = served(&client) - before - 1;
        // The demo asks for 250 ms between polls: over ~1.2 s at most ~6 polls, plus the call
        // and the result.
        let most = 2 + took.as_millis() as u64 / 250 + 1;
        assert!(
            requests <= most,
            "{requests} requests in {took:?}, at most {most}"
        );
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
        client.close();
    });
}

#[test]
fn shared_inputs_inside_a_task_are_answered_and_failures_reported_in_both_eras() {
    watchdog(LIMIT, || {
        for era in [Era::Legacy, Era::Modern] {
            let client = Client::builder(mcpipe_bin())
                .args(["demo", "--conformance"])
                .log_bad_lines(false)
                .era(era)
                .on_elicitation(|params: &Value| -> Result<Value, ErrorObject> {
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
                .spawn_shared()
                .unwrap();
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
            let err = client
                .call_tool_as_task("protocol_error_job", json!({}), TaskOptions::new())
                .unwrap_err();
            assert!(
                matches!(&err, Error::Rpc(e) if e.code == ErrorCode::INTERNAL_ERROR),
                "{era:?}: {err}"
            );
            client.close();
        }
    });
}
