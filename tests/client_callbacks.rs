//! A `SharedClient`'s callbacks using or breaking their own client: a panic on the IO thread,
//! a callback waiting for a notification, a callback closing the client, a callback holding a
//! handle to it; and what a close tells the server about work still in flight.

mod util;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcpipe::{Error, RequestOptions, ShutdownStage, WeakClient};
use serde_json::json;
use util::client::{demo, fixture, wait_dead, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// A cell a callback reads its own client from, filled once the client exists.
type Me = Arc<OnceLock<WeakClient>>;

#[test]
fn a_callback_that_panics_fails_every_call_with_its_panic() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py")
            .on_notification(|n| panic!("the callback broke on {}", n.method))
            .spawn_shared()
            .unwrap();
        let pid = client.pid().unwrap();
        // The tool's notification reaches the callback before the tool's answer.
        let err = client
            .call_tool("notify", json!({"count": 1}))
            .expect_err("the call cannot end well");
        match &err {
            Error::CallbackPanicked(text) => assert!(
                text.contains("the callback broke on notifications/message"),
                "{text}"
            ),
            other => panic!("expected the callback's panic, got {other:?}"),
        }
        assert!(err.to_string().contains("callbacks panicked"), "{err}");
        let later = client.call_tool("echo", json!({"text": "x"}));
        assert!(
            matches!(later, Err(Error::CallbackPanicked(_))),
            "{later:?}"
        );
        // Nothing more will come: a wait for a notification ends at once.
        let started = Instant::now();
        assert!(client.next_notification(Duration::from_secs(30)).is_none());
        assert!(started.elapsed() < Duration::from_secs(5));
        // The server was shut down in order (it exits when its stdin closes).
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(shutdown.status.is_some_and(|s| s.success()), "{shutdown:?}");
        assert!(wait_dead(pid, Duration::from_secs(10)));
    });
}

#[test]
fn a_callback_waiting_for_a_notification_does_not_stall_the_client() {
    watchdog(LIMIT, || {
        let me = Me::default();
        let cell = Arc::clone(&me);
        let waited = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&waited);
        let client = fixture("good_server.py")
            .on_notification(move |_| {
                let client = cell.get().and_then(WeakClient::upgrade).unwrap();
                let started = Instant::now();
                let got = client.next_notification(Duration::from_secs(3));
                record
                    .lock()
                    .unwrap()
                    .push((got.is_some(), started.elapsed()));
            })
            .spawn_shared()
            .unwrap();
        let _ = me.set(client.downgrade());
        let started = Instant::now();
        client.call_tool("notify", json!({"count": 2})).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let waited = waited.lock().unwrap().clone();
        assert_eq!(waited.len(), 2);
        for (got, took) in waited {
            assert!(!got, "notifications go to the callback, never to the queue");
            assert!(
                took < Duration::from_millis(500),
                "the callback waited {took:?}"
            );
        }
        client.close();
    });
}

#[test]
fn a_callback_holding_a_weak_client_lets_the_last_handle_close_it() {
    watchdog(LIMIT, || {
        let me = Me::default();
        let cell = Arc::clone(&me);
        let client = fixture("good_server.py")
            .on_notification(move |_| {
                assert!(cell.get().and_then(WeakClient::upgrade).is_some());
            })
            .spawn_shared()
            .unwrap();
        let _ = me.set(client.downgrade());
        let pid = client.pid().unwrap();
        client.call_tool("notify", json!({"count": 1})).unwrap();
        drop(client);
        assert!(
            wait_dead(pid, Duration::from_secs(10)),
            "the server outlived the client"
        );
        assert!(me.get().unwrap().upgrade().is_none());
    });
}

#[test]
fn a_close_after_a_callback_closed_the_client_reports_the_real_shutdown() {
    watchdog(LIMIT, || {
        let me = Me::default();
        let cell = Arc::clone(&me);
        let client = fixture("good_server.py")
            .on_notification(move |_| {
                if let Some(client) = cell.get().and_then(WeakClient::upgrade) {
                    client.close();
                }
            })
            .spawn_shared()
            .unwrap();
        let _ = me.set(client.downgrade());
        let pid = client.pid().unwrap();
        let _ = client.call_tool("notify", json!({"count": 1}));
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(shutdown.status.is_some_and(|s| s.success()), "{shutdown:?}");
        assert!(wait_dead(pid, Duration::from_secs(10)));
    });
}

#[test]
fn closing_with_calls_in_flight_cancels_them_on_the_wire_first() {
    watchdog(LIMIT, || {
        let client = demo().spawn_shared().unwrap();
        let call = client
            .start(
                "tools/call",
                Some(json!({"name": "sleep", "arguments": {"ms": 20_000}})),
                &RequestOptions::new(),
            )
            .unwrap();
        // The sleep has started on the server once a later request is answered.
        client.call_tool("echo", json!({"text": "x"})).unwrap();
        let started = Instant::now();
        let shutdown = client.close();
        // The demo ends the cancelled sleep, then exits at the end of its input; without the
        // cancellation it waits for the sleep and is terminated after the stdin grace (2 s).
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{shutdown:?}"
        );
        assert!(matches!(call.wait(), Err(Error::Closed)));
    });
}
