//! The session on plain bytes and instants: no process, no clock.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;

const HEARTBEAT: (Duration, Duration) = (Duration::from_millis(100), Duration::from_millis(50));

fn session() -> Session {
    Session::new(
        json!({"roots": {}}),
        json!({"name": "t", "version": "0"}),
        Some(vec![json!({"uri": "file:///r"})]),
        vec!["sampling/createMessage"],
        Some(HEARTBEAT),
        true,
    )
}

fn legacy() -> Session {
    let mut s = session();
    s.connected(Era::Legacy, String::from("2025-11-25"));
    s
}

fn timing(at: Instant, timeout_ms: u64, max_ms: Option<u64>) -> Timing {
    let max = max_ms.map(Duration::from_millis);
    Timing::new(at, Duration::from_millis(timeout_ms), max, true)
}

fn outbound(s: &mut Session) -> Vec<Value> {
    let mut lines = Vec::new();
    while s.write_outbound(&mut lines) {}
    lines
        .split_inclusive(|&b| b == b'\n')
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect()
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.next_event()).collect()
}

fn line(s: &mut Session, text: &str, at: Instant) {
    s.receive_line(text.as_bytes(), at);
}

#[test]
fn requests_get_new_ids_and_tools_call_a_progress_token() {
    let t = Instant::now();
    let mut s = legacy();
    let a = s.start(
        "tools/call",
        Some(json!({"name": "x"})),
        false,
        timing(t, 100, None),
    );
    let b = s.start("ping", None, false, timing(t, 100, None));
    assert_ne!(a, b);
    let out = outbound(&mut s);
    assert_eq!(out[0]["id"], 1);
    assert_eq!(out[0]["params"]["_meta"]["progressToken"], 1);
    assert_eq!(out[1]["id"], 2);
    assert!(out[1].get("params").is_none(), "{}", out[1]);
    assert_eq!(s.pending(), 2);
}

#[test]
fn modern_requests_carry_the_envelope() {
    let t = Instant::now();
    let mut s = session();
    s.connected(Era::Modern, String::from("2026-07-28"));
    s.start("tools/list", None, false, timing(t, 100, None));
    let out = outbound(&mut s);
    let meta = &out[0]["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "t");
    assert!(
        meta.get("io.modelcontextprotocol/logLevel").is_none(),
        "{meta}"
    );
}

#[test]
fn a_modern_request_names_the_client_once_and_keeps_what_the_caller_named() {
    let t = Instant::now();
    let mut s = session();
    s.connected(Era::Modern, String::from("2026-07-28"));
    let own =
        json!({"name": "x", "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "mine"}}});
    s.start("tools/call", Some(own), false, timing(t, 100, None));
    s.start(
        "tools/call",
        Some(json!({"name": "y"})),
        false,
        timing(t, 100, None),
    );
    let mut lines = Vec::new();
    while s.write_outbound(&mut lines) {}
    let text = String::from_utf8(lines).unwrap();
    for (line, name) in text.lines().zip(["mine", "t"]) {
        assert_eq!(line.matches("clientInfo").count(), 1, "{line}");
        assert_eq!(line.matches("clientCapabilities").count(), 1, "{line}");
        let value: Value = serde_json::from_str(line).unwrap();
        let meta = &value["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], name);
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({"roots": {}})
        );
        assert_eq!(meta["progressToken"], value["id"]);
    }
}

#[test]
fn a_log_level_asked_for_is_named_by_every_modern_request_unless_the_caller_named_one() {
    let t = Instant::now();
    let mut s = session();
    s.set_log_level(Some(crate::LogLevel::Notice));
    s.start("tools/list", None, false, timing(t, 100, None));
    s.connected(Era::Modern, String::from("2026-07-28"));
    s.start("tools/list", None, false, timing(t, 100, None));
    let own = json!({"name": "x", "_meta": {"io.modelcontextprotocol/logLevel": "debug"}});
    s.start("tools/call", Some(own), false, timing(t, 100, None));
    let out = outbound(&mut s);
    assert!(out[0].get("params").is_none(), "no era yet: {}", out[0]);
    let level = |i: usize| out[i]["params"]["_meta"]["io.modelcontextprotocol/logLevel"].clone();
    assert_eq!(level(1), "notice");
    assert_eq!(level(2), "debug");
}

#[test]
fn an_answer_ends_its_request_once_and_a_second_is_a_stray() {
    let t = Instant::now();
    let mut s = legacy();
    let id = s.start("ping", None, false, timing(t, 100, None));
    line(&mut s, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t);
    match events(&mut s).as_slice() {
        [Event::Answered {
            id: got,
            result: Ok(_),
        }] => assert_eq!(*got, id),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.pending(), 0);
    line(&mut s, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t);
    assert!(matches!(events(&mut s).as_slice(), [Event::Stray(_)]));
    assert_eq!(s.stats().unmatched_responses, 1);
}

/// Field test: an answer with `10**400` in it (valid JSON serde_json cannot read) was only a
/// bad line, and its request waited for its deadline. It ends the request at once; a line
/// without an id, or a request, still ends nothing.
#[test]
fn an_answer_that_cannot_be_read_ends_its_request_at_once() {
    let t = Instant::now();
    let mut s = legacy();
    let id = s.start("tools/call", None, false, timing(t, 100, None));
    let huge = "1".to_owned() + &"0".repeat(400);
    line(
        &mut s,
        &format!(r#"{{"jsonrpc":"2.0","result":{huge}}}"#),
        t,
    );
    let deep = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":[{huge}]}}"#);
    line(&mut s, &deep, t);
    assert!(events(&mut s).iter().all(|e| matches!(e, Event::Report(_))));
    assert_eq!(s.pending(), 1);
    let answer = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"v":{huge}}}}}"#);
    line(&mut s, &answer, t);
    let ended: Vec<Event> = events(&mut s)
        .into_iter()
        .filter(|e| !matches!(e, Event::Report(_)))
        .collect();
    match ended.as_slice() {
        [Event::Unreadable {
            id: got, reason, ..
        }] => {
            assert_eq!(*got, id);
            assert!(reason.contains("number out of range"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.pending(), 0);
    assert_eq!(s.stats().bad_lines, 3);
}

#[test]
fn error_answers_and_batches_are_routed_by_id() {
    let t = Instant::now();
    let mut s = legacy();
    s.start("a", None, false, timing(t, 100, None));
    s.start("b", None, false, timing(t, 100, None));
    line(
        &mut s,
        r#"[{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}},{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        t,
    );
    let ended: Vec<_> = events(&mut s)
        .into_iter()
        .map(|e| match e {
            Event::Answered { id, result } => (id, result.is_ok()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        ended,
        vec![(RequestId::from(2), false), (RequestId::from(1), true)]
    );
}

#[test]
fn progress_resets_the_timeout_but_never_past_the_hard_maximum() {
    let t = Instant::now();
    let ms = Duration::from_millis;
    let mut s = legacy();
    let id = s.start("tools/call", None, false, timing(t, 100, Some(250)));
    outbound(&mut s);
    let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"total":4}}"#;
    line(&mut s, progress, t + ms(80));
    match events(&mut s).as_slice() {
        [Event::Progress { id: got, progress }] => {
            assert_eq!(*got, id);
            assert_eq!(progress.total, Some(4.0));
        }
        other => panic!("{other:?}"),
    }
    // Reset at 80 ms: due at 180 ms, not at 100.
    assert_eq!(s.expire(t + ms(150)), Some(t + ms(180)));
    line(&mut s, progress, t + ms(170));
    events(&mut s);
    // Reset again to 270 ms, but the hard maximum is 250.
    assert_eq!(s.expire(t + ms(200)), Some(t + ms(250)));
    s.expire(t + ms(250));
    assert!(matches!(
        events(&mut s).as_slice(),
        [Event::TimedOut { .. }]
    ));
}

#[test]
fn a_timed_out_request_is_cancelled_on_the_wire_and_its_late_answer_dropped() {
    let t = Instant::now();
    let mut s = legacy();
    s.start("tools/call", None, false, timing(t, 100, None));
    outbound(&mut s);
    assert_eq!(s.expire(t), Some(t + Duration::from_millis(100)));
    s.expire(t + Duration::from_millis(100));
    match events(&mut s).as_slice() {
        [Event::TimedOut {
            method, elapsed, ..
        }] => {
            assert_eq!(method, "tools/call");
            assert_eq!(*elapsed, Duration::from_millis(100));
        }
        other => panic!("{other:?}"),
    }
    let out = outbound(&mut s);
    assert_eq!(out[0]["method"], "notifications/cancelled");
    assert_eq!(out[0]["params"]["requestId"], 1);
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}"#,
        t,
    );
    line(&mut s, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, t);
    assert!(events(&mut s).is_empty());
    assert_eq!(s.stats().late_responses, 1);
    assert_eq!(s.stats().late_progress, 1);
}

#[test]
fn initialize_and_the_probe_are_never_cancelled() {
    let t = Instant::now();
    let later = t + Duration::from_millis(100);
    let mut s = session();
    s.start("initialize", None, false, timing(t, 100, None));
    let probe = s.start("server/discover", None, false, timing(t, 100, None));
    s.mark_probe(&probe);
    outbound(&mut s);
    s.expire(later);
    assert_eq!(events(&mut s).len(), 2);
    assert!(outbound(&mut s).is_empty(), "a cancellation was sent");
    // The probe's late answer is kept, not dropped.
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","id":2,"result":{"supportedVersions":["2026-07-28"]}}"#,
        later,
    );
    assert!(matches!(s.take_late_probe(), Some((_, Ok(_)))));
}

#[test]
fn cancel_ends_a_request_once_and_tells_the_server() {
    let t = Instant::now();
    let mut s = legacy();
    let id = s.start("tools/call", None, false, timing(t, 100, None));
    outbound(&mut s);
    assert!(s.cancel(&id, "cancelled by the client"));
    assert!(!s.cancel(&id, "again"));
    let out = outbound(&mut s);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["params"]["reason"], "cancelled by the client");
    s.expire(t + Duration::from_secs(1));
    assert!(
        events(&mut s).is_empty(),
        "a cancelled request timed out too"
    );
}

#[test]
fn server_requests_are_answered_or_handed_to_a_callback() {
    let t = Instant::now();
    let mut s = legacy();
    line(&mut s, r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#, t);
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","id":"b","method":"roots/list"}"#,
        t,
    );
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","id":"c","method":"elicitation/create"}"#,
        t,
    );
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","id":"d","method":"sampling/createMessage"}"#,
        t,
    );
    let out = outbound(&mut s);
    assert_eq!(out[0], json!({"jsonrpc": "2.0", "id": "a", "result": {}}));
    assert_eq!(out[1]["result"]["roots"][0]["uri"], "file:///r");
    assert_eq!(out[2]["error"]["code"], -32601);
    assert_eq!(out.len(), 3);
    match events(&mut s).as_slice() {
        [Event::Callback(request)] => {
            assert_eq!(request.method, "sampling/createMessage");
            s.respond(request.id.clone(), Ok(json!({"role": "assistant"})));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(outbound(&mut s)[0]["id"], "d");
    assert_eq!(s.stats().server_requests, 4);
    assert_eq!(s.stats().server_pings, 1);
}

#[test]
fn a_modern_server_request_is_reported_and_left_unanswered() {
    let t = Instant::now();
    let mut s = session();
    s.connected(Era::Modern, String::from("2026-07-28"));
    line(&mut s, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, t);
    assert!(outbound(&mut s).is_empty());
    assert!(matches!(events(&mut s).as_slice(), [Event::Report(_)]));
}

#[test]
fn bad_lines_are_counted_and_never_answered() {
    let t = Instant::now();
    let mut s = legacy();
    line(&mut s, "not json", t);
    line(&mut s, r#"{"jsonrpc":"1.0","id":1}"#, t);
    s.receive_oversize(16);
    assert!(outbound(&mut s).is_empty());
    assert_eq!(s.stats().bad_lines, 3);
    assert_eq!(events(&mut s).len(), 3);
}

#[test]
fn notifications_pass_through_and_unknown_progress_is_a_notification() {
    let t = Instant::now();
    let mut s = legacy();
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#,
        t,
    );
    line(
        &mut s,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}"#,
        t,
    );
    let got = events(&mut s);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|e| matches!(e, Event::Notification(_))));
    assert_eq!(s.stats().notifications, 2);
}

#[test]
fn the_heartbeat_pings_a_quiet_server_and_gives_up_on_a_silent_one() {
    let t = Instant::now();
    let ms = Duration::from_millis;
    let mut s = legacy();
    assert_eq!(s.heartbeat(t + ms(50), t), Pulse::Next(Some(t + ms(100))));
    assert!(outbound(&mut s).is_empty());
    assert_eq!(s.heartbeat(t + ms(100), t), Pulse::Next(Some(t + ms(150))));
    let ping = outbound(&mut s).remove(0);
    assert_eq!(ping["method"], "ping");
    // Any answer counts as alive; then the interval starts over from that answer.
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,"message":"no"}}}}"#,
        ping["id"]
    );
    line(&mut s, &answer, t + ms(110));
    assert!(events(&mut s).is_empty(), "a heartbeat answer is no stray");
    assert_eq!(
        s.heartbeat(t + ms(120), t + ms(110)),
        Pulse::Next(Some(t + ms(210)))
    );
    // Pinged at 210, nothing since: dead at 260.
    s.heartbeat(t + ms(210), t + ms(110));
    assert_eq!(
        s.heartbeat(t + ms(259), t + ms(110)),
        Pulse::Next(Some(t + ms(260)))
    );
    assert_eq!(
        s.heartbeat(t + ms(260), t + ms(110)),
        Pulse::Silent(ms(150))
    );
    assert_eq!(s.stats().heartbeats, 2);
}

#[test]
fn no_heartbeat_while_connecting_and_discover_under_2026() {
    let t = Instant::now();
    let mut s = session();
    let later = t + Duration::from_secs(1);
    assert_eq!(s.heartbeat(later, t), Pulse::Next(None));
    s.connected(Era::Modern, String::from("2026-07-28"));
    s.heartbeat(later, t);
    assert_eq!(outbound(&mut s)[0]["method"], "server/discover");
}

#[test]
fn a_new_connection_forgets_what_was_outstanding_but_keeps_counting_ids() {
    let t = Instant::now();
    let mut s = legacy();
    s.start("ping", None, false, timing(t, 100, None));
    assert_eq!(s.new_connection(), Some(Era::Legacy));
    assert_eq!(s.pending(), 0);
    assert_eq!(s.era(), None);
    outbound(&mut s);
    let id = s.start("ping", None, false, timing(t, 100, None));
    assert_eq!(id, RequestId::from(2));
}

/// Every request the session started ends exactly once, whatever the server writes and
/// whenever the shell cancels or looks at the clock (a deterministic sweep of the same
/// property the `client_session` fuzz target checks).
#[test]
fn every_request_ends_exactly_once_whatever_the_server_says() {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..300 {
        let bytes: Vec<u8> = (0..256)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        super::super::internals::check_session(&bytes);
    }
}
