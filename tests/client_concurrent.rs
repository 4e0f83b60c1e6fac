//! Many requests in flight on one connection: `SharedClient` from several threads, `Call`s
//! started now and waited for later, each with its own deadline, progress and cancellation.
//!
//! The fixture server (tests/fixtures/good_server.py) runs every tool call on its own thread,
//! so what these tests time is the client.

mod util;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpipe::{ClientBuilder, Error, Progress, RequestOptions, SharedClient};
use serde_json::{json, Value};
use util::client::{demo, first_text, fixture, process_alive, wait_dead, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

fn sleep_params(ms: u64) -> Option<Value> {
    Some(json!({"name": "sleep", "arguments": {"ms": ms}}))
}

fn server_stats(client: &SharedClient) -> Value {
    let result = client.call_tool("stats", json!({})).unwrap();
    serde_json::from_str(first_text(&result)).unwrap()
}

/// `threads` threads each make `per_thread` blocking `sleep ms` calls at once on one
/// connection; returns how long the slowest took, and checks every answer.
fn sleeps_from_threads(
    client: &SharedClient,
    threads: usize,
    per_thread: usize,
    ms: u64,
) -> Duration {
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    // Each thread starts its calls, then waits for them in turn: every call
                    // is in flight at once.
                    let calls: Vec<_> = (0..per_thread)
                        .map(|_| {
                            client
                                .start("tools/call", sleep_params(ms), &RequestOptions::new())
                                .unwrap()
                        })
                        .collect();
                    for call in calls {
                        let result = call.wait().unwrap();
                        assert_eq!(first_text(&result), format!("slept {ms} ms"));
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    started.elapsed()
}

#[test]
fn twenty_one_second_sleeps_from_four_threads_all_answered_within_3_s() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let took = sleeps_from_threads(&client, 4, 5, 1000);
        assert!(took < Duration::from_secs(3), "{took:?}");
        client.close();
    });
}

#[test]
fn twenty_blocking_calls_from_twenty_threads_all_answered_within_3_s() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let started = Instant::now();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..20)
                .map(|i| {
                    let client = client.clone();
                    scope.spawn(move || {
                        let result = client.call_tool("sleep", json!({"ms": 1000 + i})).unwrap();
                        assert_eq!(first_text(&result), format!("slept {} ms", 1000 + i));
                    })
                })
                .collect();
            for worker in workers {
                worker.join().unwrap();
            }
        });
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert_eq!(client.stats().unmatched_responses, 0);
    });
}

/// The acceptance run against `mcpipe demo`, whose slow tools run concurrently.
#[test]
fn twenty_one_second_demo_sleeps_from_four_threads_all_answered_within_3_s() {
    watchdog(LIMIT, || {
        let client = demo().spawn_shared().unwrap();
        let took = sleeps_from_threads(&client, 4, 5, 1000);
        assert!(took < Duration::from_secs(3), "{took:?}");
        client.close();
    });
}

#[test]
fn an_echo_behind_a_slow_call_is_not_delayed() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let slow = client
            .start("tools/call", sleep_params(1500), &RequestOptions::new())
            .unwrap();
        let started = Instant::now();
        let echo = client.call_tool("echo", json!({"text": "quick"})).unwrap();
        let took = started.elapsed();
        assert_eq!(first_text(&echo), "quick");
        assert!(took < Duration::from_millis(700), "{took:?}");
        assert_eq!(first_text(&slow.wait().unwrap()), "slept 1500 ms");
    });
}

#[test]
fn a_cancelled_call_returns_promptly_while_the_others_complete() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let calls: Vec<_> = (0..5)
            .map(|_| {
                client
                    .start("tools/call", sleep_params(1500), &RequestOptions::new())
                    .unwrap()
            })
            .collect();
        let mut calls = calls.into_iter();
        let doomed = calls.next().unwrap();
        let canceller = doomed.canceller();
        std::thread::sleep(Duration::from_millis(200));
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            (doomed.wait(), started.elapsed())
        });
        let cancelled_at = Instant::now();
        canceller.cancel();
        let (outcome, _) = waiter.join().unwrap();
        let returned_after = cancelled_at.elapsed();
        assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
        assert!(
            returned_after < Duration::from_millis(500),
            "{returned_after:?}"
        );
        for call in calls {
            assert_eq!(first_text(&call.wait().unwrap()), "slept 1500 ms");
        }
        // The server was told, and stopped that one call.
        let stats = server_stats(&client);
        assert_eq!(stats["cancelled"], 1, "{stats}");
        assert_eq!(client.stats().late_responses, 0);
    });
}

#[test]
fn each_call_has_its_own_deadline_and_a_late_answer_is_dropped() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let long = client
            .start("tools/call", sleep_params(800), &RequestOptions::new())
            .unwrap();
        let short = RequestOptions::new()
            .timeout(Duration::from_millis(200))
            .reset_on_progress(false);
        let params = json!({"name": "sleep", "arguments": {"ms": 500, "ignore_cancel": true}});
        let started = Instant::now();
        let doomed = client.start("tools/call", Some(params), &short).unwrap();
        let outcome = doomed.wait();
        let waited = started.elapsed();
        match outcome {
            Err(Error::Timeout {
                method,
                elapsed,
                stderr_tail,
            }) => {
                assert_eq!(method, "tools/call");
                assert_eq!(stderr_tail, None, "only a connection step's timeout has it");
                assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(waited < Duration::from_millis(600), "{waited:?}");
        assert_eq!(first_text(&long.wait().unwrap()), "slept 800 ms");
        // The timed-out call's answer (it ignored the cancellation) came and was dropped.
        let end = Instant::now() + Duration::from_secs(5);
        while client.stats().late_responses == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(client.stats().late_responses, 1);
        assert_eq!(client.stats().unmatched_responses, 0);
    });
}

#[test]
fn progress_goes_to_the_call_it_belongs_to_and_resets_only_its_timeout() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let seen: Arc<Mutex<Vec<(usize, Progress)>>> = Arc::default();
        std::thread::scope(|scope| {
            for (i, ms) in [(0usize, 700u64), (1, 400)] {
                let client = &client;
                let seen = Arc::clone(&seen);
                scope.spawn(move || {
                    let mut on_progress = |p: &Progress| seen.lock().unwrap().push((i, p.clone()));
                    // A 250 ms timeout that progress every 100 ms keeps resetting.
                    let options = RequestOptions::new()
                        .timeout(Duration::from_millis(250))
                        .on_progress(&mut on_progress);
                    let result = client
                        .call_tool_with("sleep", json!({ "ms": ms }), options)
                        .unwrap();
                    assert_eq!(first_text(&result), format!("slept {ms} ms"));
                });
            }
        });
        let seen = seen.lock().unwrap();
        for (i, ms) in [(0usize, 700f64), (1, 400.0)] {
            let mine: Vec<_> = seen.iter().filter(|(k, _)| *k == i).collect();
            assert!(mine.len() >= 2, "call {i}: {seen:?}");
            // Each call's total is its own (the fixture reports ms / 100 steps).
            assert!(
                mine.iter().all(|(_, p)| p.total == Some(ms / 100.0)),
                "call {i}: {mine:?}"
            );
        }
    });
}

#[test]
fn close_fails_the_calls_in_flight_and_ends_the_server() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
            .spawn_shared()
            .unwrap();
        let pid = client.pid().unwrap();
        let calls: Vec<_> = (0..3)
            .map(|_| {
                client
                    .start("tools/call", sleep_params(10_000), &RequestOptions::new())
                    .unwrap()
            })
            .collect();
        let waiters: Vec<_> = calls
            .into_iter()
            .map(|call| std::thread::spawn(move || call.wait()))
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let shutdown = client.close();
        assert!(started.elapsed() < Duration::from_secs(3), "{shutdown:?}");
        for waiter in waiters {
            let outcome = waiter.join().unwrap();
            assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
        }
        assert!(
            wait_dead(pid, Duration::from_secs(2)),
            "the server outlived close"
        );
        // Closed for every clone, and for good.
        let again = client.clone();
        assert!(matches!(
            again.start("ping", None, &RequestOptions::new()),
            Err(Error::Closed)
        ));
        assert_eq!(client.close(), shutdown);
    });
}

#[test]
fn a_server_that_dies_fails_every_call_at_once() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        let calls: Vec<_> = (0..4)
            .map(|_| {
                client
                    .start("tools/call", sleep_params(10_000), &RequestOptions::new())
                    .unwrap()
            })
            .collect();
        let started = Instant::now();
        let exit = client.call_tool("exit", json!({"code": 3}));
        assert!(matches!(exit, Err(Error::ServerExited { .. })), "{exit:?}");
        for call in calls {
            match call.wait() {
                Err(Error::ServerExited {
                    status,
                    stderr_tail,
                }) => {
                    assert_eq!(status.and_then(|s| s.code()), Some(3));
                    assert!(stderr_tail.contains("exiting on request"), "{stderr_tail}");
                }
                other => panic!("expected ServerExited, got {other:?}"),
            }
        }
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(matches!(client.ping(), Err(Error::ServerExited { .. })));
    });
}

#[test]
fn restart_brings_a_dead_server_back_and_ends_the_calls_in_flight() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
            .spawn_shared()
            .unwrap();
        let first = client.pid().unwrap();
        // Dead, and no retry policy: every call fails until a restart.
        let exit = client.call_tool("exit", json!({"code": 3}));
        assert!(matches!(exit, Err(Error::ServerExited { .. })), "{exit:?}");
        assert!(matches!(client.ping(), Err(Error::ServerExited { .. })));
        client.restart().unwrap();
        let second = client.pid().unwrap();
        assert_ne!(second, first);
        assert_eq!(client.stats().restarts, 1);
        let echo = client.call_tool("echo", json!({"text": "back"})).unwrap();
        assert_eq!(first_text(&echo), "back");
        // A restart while a call runs: the call ends, the old server goes, the new one serves.
        let call = client
            .start("tools/call", sleep_params(10_000), &RequestOptions::new())
            .unwrap();
        let waiter = std::thread::spawn(move || call.wait());
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        client.restart().unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        let outcome = waiter.join().unwrap();
        assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
        assert!(
            wait_dead(second, Duration::from_secs(2)),
            "the old server lives on"
        );
        assert_ne!(client.pid(), Some(second));
        assert_eq!(client.stats().restarts, 2);
        client.ping().unwrap();
        // Closed is for good.
        let third = client.pid().unwrap();
        client.close();
        assert!(matches!(client.restart(), Err(Error::Closed)));
        assert!(!process_alive(third));
    });
}

#[test]
fn a_retry_restarts_a_dead_server_for_a_shared_client() {
    watchdog(LIMIT, || {
        let marker = std::env::temp_dir().join(format!("mcpipe-shared-die-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let client = fixture("good_server.py")
            .arg("--die-once")
            .arg(&marker)
            .retry(mcpipe::RetryPolicy {
                initial_backoff: Duration::from_millis(50),
                ..mcpipe::RetryPolicy::default()
            })
            .spawn_shared()
            .unwrap();
        let first_pid = client.pid().unwrap();
        // A call in flight on the server that dies: it fails with the death (retryable),
        // whichever of the two calls the IO thread hears about first.
        let other = client
            .start("tools/call", sleep_params(10_000), &RequestOptions::new())
            .unwrap();
        let tools = client.list_tools().unwrap();
        let _ = std::fs::remove_file(&marker);
        let outcome = other.wait();
        assert!(
            matches!(outcome, Err(Error::ServerExited { .. })),
            "{outcome:?}"
        );
        assert!(tools.iter().any(|t| t["name"] == "sleep"));
        assert_ne!(client.pid(), Some(first_pid));
        assert_eq!(client.stats().restarts, 1);
        assert!(!process_alive(first_pid));
        let echo = client.call_tool("echo", json!({"text": "again"})).unwrap();
        assert_eq!(first_text(&echo), "again");
    });
}

#[test]
fn dropping_the_last_handle_closes_the_client() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
            .spawn_shared()
            .unwrap();
        let pid = client.pid().unwrap();
        let call = client
            .start("tools/call", sleep_params(10_000), &RequestOptions::new())
            .unwrap();
        let other = client.clone();
        drop(client);
        assert!(process_alive(pid), "a clone still holds the connection");
        drop(other);
        assert!(wait_dead(pid, Duration::from_secs(2)));
        assert!(matches!(call.wait(), Err(Error::Closed)));
    });
}

#[test]
fn notifications_reach_the_shared_queue() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn_shared().unwrap();
        client.call_tool("notify", json!({"count": 3})).unwrap();
        let mut got = Vec::new();
        while got.len() < 3 {
            match client.next_notification(Duration::from_secs(5)) {
                Some(n) => got.push(n),
                None => break,
            }
        }
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().all(|n| n.method == "notifications/message"));
        assert!(client
            .next_notification(Duration::from_millis(50))
            .is_none());
    });
}

#[test]
fn a_shared_client_is_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<SharedClient>();
    fn check_send<T: Send>() {}
    check_send::<mcpipe::Call>();
    check::<mcpipe::Canceller>();
    let _: fn(ClientBuilder) -> Result<SharedClient, Error> = ClientBuilder::spawn_shared;
}

#[test]
fn the_server_outlives_the_thread_that_started_the_shared_client() {
    watchdog(LIMIT, || {
        let client = std::thread::spawn(|| fixture("good_server.py").spawn_shared().unwrap())
            .join()
            .unwrap();
        // That thread has ended; on Linux its children would get SIGKILL had it spawned them.
        std::thread::sleep(Duration::from_millis(200));
        let echo = client
            .call_tool("echo", json!({"text": "still here"}))
            .unwrap();
        assert_eq!(first_text(&echo), "still here");
    });
}

#[test]
fn a_server_that_cannot_start_is_an_error_not_a_hang() {
    watchdog(LIMIT, || {
        let err = mcpipe::Client::builder("/nonexistent/mcpipe-no-such-server")
            .spawn_shared()
            .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
    });
}

#[test]
fn the_io_thread_answers_the_servers_requests_while_calls_wait() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .root("file:///tmp/shared", None)
            .on_sampling(|_| {
                Ok(json!({"role": "assistant", "model": "m",
                          "content": {"type": "text", "text": "sampled"}}))
            })
            .spawn_shared()
            .unwrap();
        let slow = client
            .start("tools/call", sleep_params(500), &RequestOptions::new())
            .unwrap();
        std::thread::scope(|scope| {
            let roots = scope.spawn(|| client.call_tool("ask_roots", json!({})).unwrap());
            let sampled = scope.spawn(|| client.call_tool("ask_unsupported", json!({})).unwrap());
            let roots: Value = serde_json::from_str(first_text(&roots.join().unwrap())).unwrap();
            assert_eq!(
                roots["result"]["roots"][0]["uri"], "file:///tmp/shared",
                "{roots}"
            );
            let sampled: Value =
                serde_json::from_str(first_text(&sampled.join().unwrap())).unwrap();
            assert_eq!(sampled["result"]["model"], "m", "{sampled}");
        });
        assert_eq!(first_text(&slow.wait().unwrap()), "slept 500 ms");
        assert_eq!(client.stats().server_requests, 2);
    });
}

#[test]
fn the_heartbeat_runs_on_the_io_thread_and_a_silent_server_fails_every_call() {
    watchdog(LIMIT, || {
        let client = util::client::fixture("never_answers.py")
            .initialize(false)
            .heartbeat(Duration::from_millis(100), Duration::from_millis(300))
            .spawn_shared()
            .unwrap();
        let pid = client.pid().unwrap();
        let started = Instant::now();
        let call = client
            .start(
                "ping",
                None,
                &RequestOptions::new().timeout(Duration::from_secs(5)),
            )
            .unwrap();
        let outcome = call.wait();
        assert!(
            matches!(outcome, Err(Error::Unresponsive { .. })),
            "{outcome:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(wait_dead(pid, Duration::from_secs(2)));
        assert!(client.stats().heartbeats >= 1);
        assert!(matches!(client.ping(), Err(Error::Unresponsive { .. })));
    });
}

#[test]
fn modern_input_required_rounds_work_from_several_threads() {
    watchdog(LIMIT, || {
        let client = fixture("modern_server.py")
            .init_timeout(Duration::from_secs(10))
            .discover_timeout(Duration::from_secs(10))
            .root("file:///tmp/project", Some("project"))
            .on_elicitation(|_| Ok(json!({"action": "accept", "content": {"name": "Ada"}})))
            .on_sampling(|_| {
                Ok(json!({"role": "assistant", "model": "test-model",
                          "content": {"type": "text", "text": "ok"}}))
            })
            .spawn_shared()
            .unwrap();
        assert_eq!(client.era(), Some(mcpipe::Era::Modern));
        std::thread::scope(|scope| {
            for _ in 0..3 {
                scope.spawn(|| {
                    // Each call takes its own three rounds (`rounds=` counts the wizard requests
                    // of all calls).
                    let result = client.call_tool("wizard", json!({})).unwrap();
                    let want = "name=Ada model=test-model roots=file:///tmp/project rounds=";
                    assert!(first_text(&result).starts_with(want), "{result}");
                });
            }
        });
    });
}

#[test]
fn a_callback_using_its_own_client_gets_an_error_not_a_deadlock() {
    watchdog(LIMIT, || {
        let slot: Arc<Mutex<Option<SharedClient>>> = Arc::default();
        let inside = Arc::clone(&slot);
        let client = fixture("good_server.py")
            // `ping` is idempotent: the deadlock must fail it before any retry could apply.
            .retry(mcpipe::RetryPolicy::default())
            .on_sampling(move |_| {
                let client = inside.lock().unwrap().clone();
                let err = client.map(|c| c.ping().unwrap_err());
                match err {
                    Some(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::Deadlock =>
                    {
                        Ok(json!({"role": "assistant", "model": "refused-deadlock",
                                  "content": {"type": "text", "text": ""}}))
                    }
                    other => Err(mcpipe::ErrorObject::internal(format!("{other:?}"))),
                }
            })
            .spawn_shared()
            .unwrap();
        *slot.lock().unwrap() = Some(client.clone());
        let result = client.call_tool("ask_unsupported", json!({})).unwrap();
        let answer: Value = serde_json::from_str(first_text(&result)).unwrap();
        assert_eq!(answer["result"]["model"], "refused-deadlock", "{answer}");
        // Break the cycle (the callback holds a clone) and close.
        slot.lock().unwrap().take();
        client.close();
    });
}
