//! Timeouts, cancellation, progress, the hard maximum, late answers and the heartbeat.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{Error, RequestOptions};
use serde_json::{json, Value};
use util::client::{first_text, fixture, watchdog};

const LIMIT: Duration = Duration::from_secs(30);

fn server_stats(client: &mut mcpipe::Client) -> Value {
    let result = client.call_tool("stats", json!({})).unwrap();
    serde_json::from_str(first_text(&result)).unwrap()
}

#[test]
fn timeout_sends_cancellation_and_the_server_stops() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 5000}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(300))
                    .reset_on_progress(false),
            )
            .unwrap_err();
        let waited = started.elapsed();
        match &err {
            Error::Timeout {
                method,
                elapsed,
                stderr_tail,
            } => {
                assert_eq!(method, "tools/call");
                assert_eq!(
                    *stderr_tail, None,
                    "only a connection step's timeout has it"
                );
                assert!(*elapsed >= Duration::from_millis(300), "{elapsed:?}");
            }
            other => panic!("expected a timeout, got {other}"),
        }
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert!(err.is_retryable());
        assert!(err
            .to_string()
            .starts_with("the peer did not answer tools/call within 0.3"));
        // The server saw the cancellation and stopped the work.
        let mut stats = server_stats(&mut client);
        let end = Instant::now() + Duration::from_secs(5);
        while stats["cancelled"] != 1 && Instant::now() < end {
            client.pump(Duration::from_millis(50)).unwrap();
            stats = server_stats(&mut client);
        }
        assert_eq!(stats["cancelled"], 1, "{stats}");
    });
}

#[test]
fn a_late_answer_is_dropped() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 500, "ignore_cancel": true}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(150))
                    .reset_on_progress(false),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let end = Instant::now() + Duration::from_secs(10);
        while client.stats().late_responses == 0 && Instant::now() < end {
            client.pump(Duration::from_millis(50)).unwrap();
        }
        assert_eq!(client.stats().late_responses, 1);
        assert!(client.stats().late_progress >= 1);
        assert_eq!(client.stats().unmatched_responses, 0);
        // The next request is not confused by the late answer.
        let echo = client.call_tool("echo", json!({"text": "after"})).unwrap();
        assert_eq!(first_text(&echo), "after");
    });
}

#[test]
fn progress_resets_the_timeout() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let mut seen = Vec::new();
        let mut on_progress = |p: &mcpipe::Progress| seen.push(p.clone());
        let result = client
            .call_tool_with(
                "sleep",
                json!({"ms": 1200}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(400))
                    .on_progress(&mut on_progress),
            )
            .unwrap();
        assert_eq!(first_text(&result), "slept 1200 ms");
        assert!(seen.len() >= 5, "{} progress notifications", seen.len());
        assert!(seen.windows(2).all(|w| w[0].progress < w[1].progress));
        assert_eq!(seen[0].total, Some(12.0));
        assert_eq!(seen[0].message.as_deref(), Some("step 1"));
    });
}

#[test]
fn the_hard_maximum_applies_whatever_the_progress() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 10000}),
                RequestOptions::new()
                    .timeout(Duration::from_millis(400))
                    .max_total(Duration::from_millis(1000)),
            )
            .unwrap_err();
        let waited = started.elapsed();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(waited >= Duration::from_millis(1000), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
    });
}

#[test]
fn a_request_to_a_server_that_never_answers_times_out() {
    watchdog(LIMIT, || {
        let mut client = fixture("never_answers.py")
            .initialize(false)
            .spawn()
            .unwrap();
        let started = Instant::now();
        let err = client
            .request(
                "ping",
                None,
                RequestOptions::new().timeout(Duration::from_millis(300)),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(3));
    });
}

#[test]
fn the_handshake_has_a_deadline() {
    watchdog(LIMIT, || {
        let started = Instant::now();
        let err = fixture("never_answers.py")
            .init_timeout(Duration::from_millis(500))
            .spawn()
            .unwrap_err();
        assert!(
            matches!(&err, Error::Timeout { method, .. } if method == "initialize"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn a_handshake_timeout_says_the_whole_time_the_connection_waited() {
    watchdog(LIMIT, || {
        // The probe waits its 400 ms, then `initialize` its 600 ms: the user waited a second,
        // and the error says so, not only the last wait.
        let started = Instant::now();
        let err = fixture("never_answers.py")
            .discover_timeout(Duration::from_millis(400))
            .init_timeout(Duration::from_millis(600))
            .spawn()
            .unwrap_err();
        let waited = started.elapsed();
        let Error::Timeout {
            method, elapsed, ..
        } = &err
        else {
            panic!("expected a timeout, got {err}");
        };
        assert_eq!(method, "initialize");
        assert!(
            *elapsed >= Duration::from_millis(1000) && *elapsed <= waited,
            "{elapsed:?} of {waited:?} waited: {err}"
        );
        let text = err.to_string();
        let said = format!("within {:.3} s of connecting", elapsed.as_secs_f64());
        assert!(text.contains(&said), "{text}");
    });
}

#[test]
fn a_handshake_timeout_shows_what_the_server_said_on_stderr() {
    watchdog(LIMIT, || {
        // A server that says why it cannot serve, then waits (and its stderr ends without a
        // newline). One that says nothing is told apart from one whose stderr went unread.
        let said = ["--stderr", "error: missing API key"];
        for (args, shared) in [(&said[..], false), (&said[..], true), (&[][..], false)] {
            let builder = fixture("never_answers.py")
                .args(args)
                .init_timeout(Duration::from_millis(500));
            let err = if shared {
                builder.spawn_shared().map(drop).unwrap_err()
            } else {
                builder.spawn().map(drop).unwrap_err()
            };
            let Error::Timeout {
                method,
                stderr_tail,
                ..
            } = &err
            else {
                panic!("expected a timeout, got {err}");
            };
            assert_eq!(method, "initialize");
            let text = err.to_string();
            // The probe's 500 ms, then `initialize`'s.
            assert!(
                text.starts_with("the peer did not answer initialize within 1.")
                    && text.contains(" s of connecting;"),
                "{text}"
            );
            if args.is_empty() {
                assert_eq!(stderr_tail.as_deref(), Some(""));
                assert!(text.ends_with("; its stderr was empty"), "{text}");
            } else {
                assert_eq!(stderr_tail.as_deref(), Some("error: missing API key"));
                assert!(
                    text.ends_with("; its stderr ended with: error: missing API key"),
                    "{text}"
                );
            }
        }
    });
}

#[test]
fn heartbeat_keeps_a_live_server_and_any_answer_counts() {
    watchdog(LIMIT, || {
        for args in [&[][..], &["--no-ping"][..]] {
            let mut client = fixture("good_server.py")
                .args(args)
                .heartbeat(Duration::from_millis(50), Duration::from_millis(1000))
                .spawn()
                .unwrap();
            client.pump(Duration::from_millis(600)).unwrap();
            assert!(client.stats().heartbeats >= 2, "{:?}", client.stats());
            client
                .ping()
                .map_err(|e| e.to_string())
                .unwrap_or_else(|e| {
                    // With --no-ping the explicit ping is an RPC error, but the server is alive.
                    assert!(e.contains("-32601"), "{e}");
                });
            assert_eq!(client.stats().unmatched_responses, 0);
        }
    });
}

#[test]
fn heartbeat_declares_a_silent_server_dead() {
    watchdog(LIMIT, || {
        let mut client = fixture("never_answers.py")
            .initialize(false)
            .heartbeat(Duration::from_millis(100), Duration::from_millis(300))
            .spawn()
            .unwrap();
        let pid = client.pid().unwrap();
        let started = Instant::now();
        let err = client.pump(Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, Error::Unresponsive { .. }), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
        assert!(util::client::wait_dead(pid, Duration::from_secs(2)));
        // Every later request fails at once with the same news.
        let err = client.ping().unwrap_err();
        assert!(matches!(err, Error::Unresponsive { .. }), "{err}");
    });
}
