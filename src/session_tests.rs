//! Unit tests of the server session (the loop's sans-IO core).

use super::*;

fn session() -> Session {
    let limits = Limits {
        max_message_bytes: 1 << 20,
        max_output_bytes: 1 << 20,
        max_read_ahead_bytes: 1 << 20,
        log_bad_input: false,
    };
    let mut session = Session::new(&limits, Arc::new(AtomicI64::new(1)));
    session.set_cancel_method(Some("cancel".to_owned()));
    session
}

/// Feeds bytes as if one read brought them.
fn feed(session: &mut Session, bytes: &[u8]) {
    let space = session.input_space();
    space[..bytes.len()].copy_from_slice(bytes);
    session.received(bytes.len());
}

fn ids(session: &Session) -> Vec<String> {
    session
        .deferred
        .iter()
        .map(|d| match &d.parsed {
            Parsed::Single(Message::Request(r)) => r.id.to_string(),
            Parsed::Single(Message::Notification(n)) => n.method.clone(),
            _ => "other".to_owned(),
        })
        .collect()
}

fn written(session: &mut Session) -> String {
    let mut out = Vec::new();
    session
        .queue
        .write_to(|bytes| {
            out.extend_from_slice(bytes);
            Ok(bytes.len())
        })
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_cancellation_read_ahead_marks_the_queued_request_and_is_consumed() {
    let mut s = session();
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n\
          {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}\n\
          {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":2}}\n\
          {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":9}}\n\
          {\"jsonrpc\":\"2.0\",\"method\":\"other\"}\n",
    );
    s.read_ahead_buffered();
    // Order kept; the matching cancellation consumed; the unknown one kept for the handler.
    assert_eq!(ids(&s), ["1", "2", "cancel", "other"]);
    assert!(s.cancelled_queued.contains(&RequestId::from(2)));
    assert!(!s.cancelled_queued.contains(&RequestId::from(9)));
    // Request 2 is then dropped when its turn comes: never run, never answered.
    let Some(Parsed::Single(Message::Request(one))) = s.next_parsed() else {
        panic!()
    };
    assert_eq!(s.start_request(&one, true), Start::Run);
    let Some(Parsed::Single(Message::Request(two))) = s.next_parsed() else {
        panic!()
    };
    assert_eq!(s.start_request(&two, true), Start::Dropped);
    assert_eq!(s.stats.cancelled, 1);
}

#[test]
fn a_cancellation_of_the_running_request_suppresses_its_response() {
    let mut s = session();
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"slow\"}\n",
    );
    let Some(Parsed::Single(Message::Request(r))) = s.next_parsed() else {
        panic!()
    };
    assert_eq!(s.start_request(&r, true), Start::Run);
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":\"r\"}}\n",
    );
    s.read_ahead_buffered();
    assert!(s.interrupted());
    assert!(s.deferred.is_empty());
    assert_eq!(s.finish_request(r.id, Ok(Ok(Value::Null))), None);
}

#[test]
fn without_a_cancel_method_nothing_is_read_ahead() {
    let mut s = session();
    s.set_cancel_method(None);
    feed(&mut s, b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n");
    s.read_ahead_buffered();
    assert!(s.deferred.is_empty());
    assert!(matches!(s.next_parsed(), Some(Parsed::Single(_))));
}

#[test]
fn the_awaited_response_is_kept_aside_and_others_stay_queued() {
    let mut s = session();
    s.awaiting = Some(RequestId::from(7));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
          {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
    );
    s.read_ahead_buffered();
    assert_eq!(ids(&s), ["1"]);
    assert_eq!(s.arrived.as_ref().unwrap().id, Some(RequestId::from(7)));
}

#[test]
fn read_ahead_stops_at_its_byte_limit_and_resumes_when_drained() {
    let limits = Limits {
        max_message_bytes: 1 << 20,
        max_output_bytes: 1 << 20,
        max_read_ahead_bytes: 100,
        log_bad_input: false,
    };
    let mut s = Session::new(&limits, Arc::new(AtomicI64::new(1)));
    s.set_cancel_method(Some("cancel".to_owned()));
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":{}}\n";
    for _ in 0..9 {
        feed(&mut s, line);
    }
    // A cancellation at the end makes reading ahead worth it.
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":9}}\n",
    );
    s.read_ahead_buffered();
    // Two lines of 48 bytes stay under 100; the third reaches it, and parsing stops there.
    assert_eq!(s.deferred.len(), 3);
    assert!(s.read_ahead_full());
    s.next_parsed().unwrap();
    assert!(!s.read_ahead_full());
    s.read_ahead_buffered();
    assert_eq!(s.deferred.len(), 3);
}

#[test]
fn a_cancellation_of_an_owed_request_cancels_its_token_and_drops_its_answer() {
    let mut s = session();
    let token = CancelToken::new();
    s.owed.insert(RequestId::from(5), (token.clone(), true));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":5}}\n",
    );
    s.read_ahead_buffered();
    assert!(token.is_cancelled());
    assert!(s.deferred.is_empty());
    assert_eq!(s.stats.cancelled, 1);
    s.take_event(Event::Answer {
        id: RequestId::from(5),
        result: Ok(Value::Null),
        token: None,
    });
    assert!(s.owed.is_empty());
    assert_eq!(written(&mut s), "");
}

#[test]
fn an_owed_answer_is_written_once_and_a_late_duplicate_is_ignored() {
    let mut s = session();
    s.owed
        .insert(RequestId::from(3), (CancelToken::new(), true));
    for _ in 0..2 {
        s.take_event(Event::Answer {
            id: RequestId::from(3),
            result: Ok(serde_json::json!({ "ok": true })),
            token: None,
        });
    }
    assert_eq!(
        written(&mut s),
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"ok\":true}}\n"
    );
}

#[test]
fn a_response_to_a_thread_s_request_goes_to_that_thread_and_forgetting_cancels_it() {
    let mut s = session();
    let (reply, answer) = std::sync::mpsc::channel();
    let request = crate::message::Request {
        id: RequestId::from(40),
        method: "roots/list".to_owned(),
        params: None,
    };
    s.take_event(Event::Request { request, reply });
    assert!(written(&mut s).contains("\"method\":\"roots/list\""));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":40,\"result\":{\"roots\":[]}}\n",
    );
    s.read_ahead_buffered();
    assert!(s.deferred.is_empty(), "routed, not queued for the handler");
    assert!(answer.try_recv().unwrap().result.is_ok());
    // A second request, forgotten: the peer is told, and its late response is the
    // handler's (nobody waits for it any more).
    let (reply, _answer) = std::sync::mpsc::channel();
    let request = crate::message::Request {
        id: RequestId::from(41),
        method: "sampling/createMessage".to_owned(),
        params: None,
    };
    s.take_event(Event::Request { request, reply });
    s.take_event(Event::Forget {
        id: RequestId::from(41),
        reason: "timeout".to_owned(),
    });
    let out = written(&mut s);
    assert!(
        out.contains("\"method\":\"cancel\"") && out.contains("\"requestId\":41"),
        "{out}"
    );
}

#[test]
fn a_panicking_handler_with_a_taken_responder_is_answered_once() {
    let mut s = session();
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"boom\"}\n",
    );
    let Some(Parsed::Single(Message::Request(r))) = s.next_parsed() else {
        panic!()
    };
    s.start_request(&r, true);
    // The handler took a responder, then panicked.
    s.response_withheld = true;
    s.owed
        .insert(RequestId::from(8), (CancelToken::new(), true));
    let response = s.finish_request(r.id, Err("boom".to_owned())).unwrap();
    assert!(response.result.is_err());
    // The responder's drop during the unwinding sends an answer: no longer owed, ignored.
    s.take_event(Event::Answer {
        id: RequestId::from(8),
        result: Err(ErrorObject::internal("dropped")),
        token: None,
    });
    assert_eq!(written(&mut s), "");
    assert_eq!(s.stats.handler_panics, 1);
}

#[test]
fn lines_are_read_ahead_only_when_a_cancellation_may_be_among_them() {
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":{}}\n";
    // Lines read before the cancel method was known were not looked at for it: read ahead.
    let mut s = session();
    s.set_cancel_method(None);
    feed(&mut s, line);
    s.set_cancel_method(Some("cancel".to_owned()));
    s.read_ahead_buffered();
    assert_eq!(s.deferred.len(), 1);
    s.next_parsed().unwrap();
    // Reads without the cancel method or an escape: each line parsed when its turn comes.
    feed(&mut s, line);
    feed(&mut s, line);
    s.read_ahead_buffered();
    assert!(s.deferred.is_empty());
    // A read with the method: everything buffered is read ahead, and the cancellation of a
    // queued request drops it.
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":2}}\n",
    );
    s.read_ahead_buffered();
    assert_eq!(ids(&s), ["1", "1", "2"]);
    assert!(s.cancelled_queued.contains(&RequestId::from(2)));
    // Written with an escape, it is found as well.
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"\\u0063ancel\",\"params\":{\"requestId\":3}}\n",
    );
    s.read_ahead_buffered();
    assert_eq!(ids(&s), ["1", "1", "2", "3"]);
    assert!(s.cancelled_queued.contains(&RequestId::from(3)));
}

#[test]
fn an_awaited_response_is_read_ahead_with_no_cancellation_in_sight() {
    let mut s = session();
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
    );
    assert!(s.next_parsed().is_some());
    s.awaiting = Some(RequestId::from(7));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n\
          {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
    );
    s.read_ahead_buffered();
    assert_eq!(ids(&s), ["2"]);
    assert_eq!(s.arrived.as_ref().unwrap().id, Some(RequestId::from(7)));
}

#[test]
fn a_large_line_is_seen_waiting_only_when_complete_and_next() {
    let mut s = session();
    // A small request, read ahead for the cancellation (of another request) behind it.
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"a\"}\n\
          {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":9}}\n",
    );
    s.read_ahead_buffered();
    assert_eq!(ids(&s), ["0", "cancel"]);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":{{\"t\":\"{}\"}}}}",
        "x".repeat(2000)
    );
    feed(&mut s, &big.as_bytes()[..1000]);
    assert!(!s.large_line_next(100));
    feed(&mut s, &big.as_bytes()[1000..]);
    feed(&mut s, b"\n");
    // Complete, but the messages read ahead come first.
    assert!(!s.large_line_next(100));
    assert!(s.next_parsed().is_some());
    assert!(s.next_parsed().is_some());
    assert!(s.large_line_next(100));
    assert!(!s.large_line_next(big.len()));
    assert!(s.next_parsed().is_some());
    assert!(!s.large_line_next(100));
}

#[test]
fn params_are_read_apart_for_their_method_only_and_never_for_the_cancel_method() {
    const CALL: ParamsApart = ParamsApart {
        method: "call",
        names: ["name", "arguments"],
        object_text: None,
    };
    let mut s = session();
    s.set_params_apart(Some(CALL));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"call\",\"params\":{\"name\":\"a\",\"x\":1}}\n\
          {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"other\",\"params\":{\"name\":\"a\"}}\n",
    );
    let Some(Parsed::Single(Message::Request(r))) = s.next_parsed() else {
        panic!("a request");
    };
    assert_eq!(r.params, Some(serde_json::json!({"x": 1})));
    let apart = s.take_params_apart().expect("read apart");
    assert_eq!(
        apart[0],
        Some(crate::message::ApartMember::Value(serde_json::json!("a")))
    );
    assert!(s.take_params_apart().is_none(), "taken once");
    let Some(Parsed::Single(Message::Request(r))) = s.next_parsed() else {
        panic!("a request");
    };
    assert_eq!(r.params, Some(serde_json::json!({"name": "a"})));
    assert!(s.take_params_apart().is_none());

    // The cancel method's params are the loop's to read: never apart.
    let mut s = session();
    s.set_params_apart(Some(ParamsApart {
        method: "cancel",
        ..CALL
    }));
    feed(
        &mut s,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"cancel\",\"params\":{\"name\":\"a\"}}\n",
    );
    let Some(Parsed::Single(Message::Request(r))) = s.next_parsed() else {
        panic!("a request");
    };
    assert_eq!(r.params, Some(serde_json::json!({"name": "a"})));
    assert!(s.take_params_apart().is_none());
}
