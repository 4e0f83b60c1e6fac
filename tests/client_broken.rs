//! The client against deliberately broken servers, and the retry policy.

mod util;

use std::time::{Duration, Instant};

use mcpipe::{Error, RequestOptions, RetryPolicy};
use serde_json::json;
use util::client::{fixture, watchdog};

const LIMIT: Duration = Duration::from_secs(40);

#[test]
fn garbage_on_stdout_is_counted_and_never_answered() {
    watchdog(LIMIT, || {
        let mut client = fixture("garbage.py").spawn().unwrap();
        let tools = client.list_tools().unwrap();
        assert_eq!(tools[0]["name"], "echo");
        client.call_tool("echo", json!({})).unwrap();
        let stats = client.stats().clone();
        // Six garbage lines per message the fixture read; some are not JSON, some are JSON
        // that is not a message. None is answered: the fixture would print more garbage for
        // every line we sent, and it has printed only six per message we sent.
        assert!(stats.bad_lines >= 18, "{stats:?}");
        assert_eq!(stats.bad_lines % 6, 0, "{stats:?}");
        assert_eq!(stats.unmatched_responses, 0);
    });
}

#[test]
fn a_server_that_only_prints_garbage_fails_the_handshake_by_its_deadline() {
    watchdog(LIMIT, || {
        let started = Instant::now();
        let err = fixture("garbage.py")
            .arg("--only")
            .init_timeout(Duration::from_millis(500))
            .spawn()
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(4));
    });
}

#[test]
fn a_server_that_exits_mid_request_fails_it_at_once_with_status_and_stderr() {
    watchdog(LIMIT, || {
        let mut client = fixture("exits_mid_request.py").spawn().unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_with(
                "echo",
                json!({}),
                RequestOptions::new().timeout(Duration::from_secs(60)),
            )
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        match &err {
            Error::ServerExited {
                status,
                stderr_tail,
            } => {
                assert_eq!(status.unwrap().code(), Some(3));
                assert!(stderr_tail.contains("out of cheese"), "{stderr_tail}");
            }
            other => panic!("expected ServerExited, got {other}"),
        }
        let text = err.to_string();
        assert!(
            text.starts_with("the server exited (exit status: 3)"),
            "{text}"
        );
        assert!(
            text.contains("out of cheese while handling tools/call"),
            "{text}"
        );
        // Later requests fail at once too.
        let started = Instant::now();
        assert!(matches!(client.ping(), Err(Error::ServerExited { .. })));
        assert!(started.elapsed() < Duration::from_secs(1));
    });
}

/// Only the exit itself tells: a grandchild holds all three pipes, so none closes. The waiting
/// loops learn it from the pidfd's readiness (they ask `waitpid` only then, or a millisecond
/// after they last asked), on both clients.
#[test]
fn a_server_that_exits_while_a_grandchild_holds_its_pipes_fails_the_request_at_once() {
    watchdog(LIMIT, || {
        let options = || RequestOptions::new().timeout(Duration::from_secs(60));
        let mut client = fixture("exits_with_grandchild.py").spawn().unwrap();
        let started = Instant::now();
        let err = client
            .call_tool_with("echo", json!({}), options())
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{err}");
        match &err {
            Error::ServerExited { status, .. } => assert_eq!(status.unwrap().code(), Some(3)),
            other => panic!("expected ServerExited, got {other}"),
        }
        client.close();

        let shared = fixture("exits_with_grandchild.py").spawn_shared().unwrap();
        let started = Instant::now();
        let err = shared
            .call_tool_with("echo", json!({}), options())
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{err}");
        assert!(matches!(err, Error::ServerExited { .. }), "{err}");
        shared.close();
    });
}

#[test]
fn a_server_flooding_stderr_never_blocks_and_only_the_tail_is_kept() {
    watchdog(LIMIT, || {
        let mut client = fixture("stderr_flood.py").spawn().unwrap();
        for _ in 0..3 {
            client.ping().unwrap();
        }
        client.list_tools().unwrap();
        let tail = client.stderr_tail();
        assert!(tail.len() <= 64 * 1024, "{}", tail.len());
        assert!(tail.len() >= 60 * 1024, "{}", tail.len());
        assert!(
            tail.ends_with("end of flood\n"),
            "{:?}",
            &tail[tail.len() - 40..]
        );
        client.close();
        // The tail outlives the close: what a server said before it went is still there to read.
        let after = client.stderr_tail();
        assert!(
            after.ends_with("end of flood\n"),
            "after the close: {after:?}"
        );
    });
}

#[test]
fn retries_restart_a_dead_server_and_give_up_after_the_attempts() {
    watchdog(LIMIT, || {
        let mut client = fixture("exits_mid_request.py")
            .retry(RetryPolicy {
                initial_backoff: Duration::from_millis(50),
                ..RetryPolicy::default()
            })
            .spawn()
            .unwrap();
        let err = client.list_tools().unwrap_err();
        match &err {
            Error::RetriesExhausted { attempts, last } => {
                assert_eq!(*attempts, 3);
                assert!(matches!(**last, Error::ServerExited { .. }), "{last}");
            }
            other => panic!("expected RetriesExhausted, got {other}"),
        }
        assert!(err
            .to_string()
            .starts_with("gave up after 3 attempts: the server exited"));
        assert_eq!(client.stats().restarts, 2);
    });
}

#[test]
fn a_retry_succeeds_after_a_restart() {
    watchdog(LIMIT, || {
        let marker = std::env::temp_dir().join(format!("mcpipe-die-once-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let mut client = fixture("good_server.py")
            .arg("--die-once")
            .arg(&marker)
            .retry(RetryPolicy::default())
            .spawn()
            .unwrap();
        let first_pid = client.pid().unwrap();
        let started = Instant::now();
        let tools = client.list_tools().unwrap();
        let _ = std::fs::remove_file(&marker);
        assert!(!tools.is_empty());
        assert_eq!(client.stats().restarts, 1);
        assert_ne!(client.pid().unwrap(), first_pid);
        // One backoff of 500 ms ± 20 %.
        assert!(
            started.elapsed() >= Duration::from_millis(400),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn non_idempotent_calls_and_rpc_errors_are_not_retried() {
    watchdog(LIMIT, || {
        let mut client = fixture("exits_mid_request.py")
            .retry(RetryPolicy::default())
            .spawn()
            .unwrap();
        let err = client.call_tool("echo", json!({})).unwrap_err();
        assert!(matches!(err, Error::ServerExited { .. }), "{err}");
        assert_eq!(client.stats().restarts, 0);

        let mut client = fixture("good_server.py")
            .retry(RetryPolicy::default())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let err = client
            .request("no/such/method", None, RequestOptions::new())
            .unwrap_err();
        assert!(matches!(err, Error::Rpc(_)), "{err}");
        assert!(started.elapsed() < Duration::from_millis(400));
    });
}

#[test]
fn a_tool_call_marked_idempotent_is_retried() {
    watchdog(LIMIT, || {
        let mut client = fixture("exits_mid_request.py").spawn().unwrap();
        let policy = RetryPolicy {
            attempts: 2,
            initial_backoff: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let err = client
            .call_tool_with(
                "echo",
                json!({}),
                RequestOptions::new().idempotent(true).retry(policy),
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::RetriesExhausted { attempts: 2, .. }),
            "{err}"
        );
        assert_eq!(client.stats().restarts, 1);
    });
}

#[test]
fn a_timeout_is_retried_without_a_restart() {
    watchdog(LIMIT, || {
        let mut client = fixture("never_answers.py")
            .initialize(false)
            .spawn()
            .unwrap();
        let policy = RetryPolicy {
            attempts: 2,
            initial_backoff: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        let err = client
            .request(
                "ping",
                None,
                RequestOptions::new()
                    .timeout(Duration::from_millis(100))
                    .retry(policy),
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::RetriesExhausted { attempts: 2, .. }),
            "{err}"
        );
        assert_eq!(client.stats().restarts, 0);
    });
}

/// Field test: a server answering `tools/call` at once with `10**400` written out (valid JSON
/// serde_json cannot read) left the call waiting for its whole timeout. It fails at once with
/// the reason, and the line is still counted as bad.
#[test]
fn an_answer_that_cannot_be_read_fails_its_call_at_once() {
    watchdog(LIMIT, || {
        let mut client = fixture("field_hazards.py")
            .arg("huge-number")
            .spawn()
            .unwrap();
        let started = Instant::now();
        let options = RequestOptions::new().timeout(Duration::from_secs(20));
        let result = client.call_tool_with("echo", json!({}), options);
        let took = started.elapsed();
        match result {
            Err(e @ Error::Protocol { .. }) => {
                let text = e.to_string();
                assert!(text.contains("answer could not be read"), "{text}");
                assert!(text.contains("number out of range"), "{text}");
                let why = e.unreadable_answer().unwrap_or_default();
                assert!(why.starts_with("parse error: number out of range"), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
        assert!(took < Duration::from_secs(10), "took {took:?}");
        assert_eq!(client.stats().bad_lines, 1);
        // The session goes on.
        client.ping().unwrap();
    });
}
