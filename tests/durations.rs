//! Every duration a caller can set, at `Duration::MAX`: a wait without end, never a panic
//! (`Instant + Duration` panics when the sum does not fit).

mod util;

use std::time::Duration;

use mcpipe::{Outcome, RequestOptions, ShutdownStage};
use serde_json::json;
use util::client::{fixture, watchdog};
use util::{request, test_server, Peer};

const LIMIT: Duration = Duration::from_secs(60);
const MAX: Duration = Duration::MAX;

fn endless() -> mcpipe::ClientBuilder {
    fixture("good_server.py")
        .timeout(MAX)
        .init_timeout(MAX)
        .max_total(MAX)
        .heartbeat(MAX, MAX)
        .close_timeouts(MAX, MAX)
}

#[test]
fn a_client_takes_the_longest_durations() {
    watchdog(LIMIT, || {
        let mut client = endless().spawn().unwrap();
        let options = RequestOptions::new().timeout(MAX).max_total(MAX);
        let echoed = client
            .call_tool_with("echo", json!({"text": "far"}), options)
            .unwrap();
        assert_eq!(echoed["content"][0]["text"], "far");
        client.call_tool("notify", json!({"count": 1})).unwrap();
        assert!(client.next_notification(MAX).unwrap().is_some());
        client.pump(Duration::ZERO).unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        let mut client = endless().spawn().unwrap();
        let shutdown = client.terminate(MAX);
        assert_eq!(shutdown.stage, ShutdownStage::Terminated, "{shutdown:?}");
    });
}

#[test]
fn a_shared_client_takes_the_longest_durations() {
    watchdog(LIMIT, || {
        let client = endless().spawn_shared().unwrap();
        let options = RequestOptions::new().timeout(MAX).max_total(MAX);
        let echoed = client
            .request(
                "tools/call",
                Some(json!({"name": "echo", "arguments": {"text": "far"}})),
                options,
            )
            .unwrap();
        assert_eq!(echoed["content"][0]["text"], "far");
        let waiter = {
            let client = client.clone();
            std::thread::spawn(move || client.next_notification(MAX))
        };
        std::thread::sleep(Duration::from_millis(100));
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(waiter.join().unwrap().is_none(), "closing ends the wait");
    });
}

#[test]
fn a_server_takes_the_longest_durations() {
    let mut peer = Peer::start(
        test_server()
            .idle_timeout(Some(MAX))
            .shutdown_grace(MAX)
            .orphan_check(Some(MAX)),
    );
    peer.send(&request(1, "echo", json!({"far": true})));
    assert_eq!(peer.recv()["result"]["far"], true);
    peer.close_input();
    let (outcome, _) = peer.finish();
    assert!(matches!(outcome, Ok(Outcome::Eof)), "{outcome:?}");
}
