//! The client session's fuzz property, for the `client_session` fuzz target and the unit tests
//! (unstable, behind the `internals` feature: not part of the crate's API).
// Without the feature only the unit tests reach it.
#![cfg_attr(not(feature = "internals"), allow(unreachable_pub))]

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::era::Era;
use super::session::{Event, Pulse, Session, Timing};
use crate::message::RequestId;

/// Methods the property starts requests with (`initialize` and the probe are never cancelled
/// on the wire; the rest are).
const METHODS: [&str; 4] = ["tools/call", "ping", "initialize", "server/discover"];

/// Lines a server might write that are not answers to our requests.
const LINES: [&str; 8] = [
    r#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":"s2","method":"sampling/createMessage","params":{}}"#,
    r#"{"jsonrpc":"2.0","id":"s3","method":"elicitation/create"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#,
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#,
    r#"{"jsonrpc":"2.0","id":"mcpipe-heartbeat-1","result":{}}"#,
    r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
    "[]",
];

/// Checks, for one fuzz input, that every request the session started ends exactly once
/// (answered, timed out, cancelled by the shell, or failed with the connection), that
/// progress and answers name only requests that are still pending, that no request id is
/// sent twice, that nothing is overdue after [`Session::expire`], and that nothing panics.
///
/// The input is a program: each byte picks an operation (start a request, answer one, send
/// progress, cancel one, let time pass, write an arbitrary line, a server request or
/// notification, the heartbeat's turn), and the bytes after it are its operands.
///
/// # Panics
/// When the property does not hold: that is the failure the fuzzer looks for.
pub fn check_session(data: &[u8]) {
    let t0 = Instant::now();
    let mut now = t0;
    let mut last_inbound = t0;
    let mut session = Session::new(
        json!({"sampling": {}}),
        json!({"name": "fuzz", "version": "0"}),
        Some(vec![json!({"uri": "file:///"})]),
        vec!["sampling/createMessage"],
        Some((Duration::from_millis(40), Duration::from_millis(20))),
        true,
    );
    if data.first().is_some_and(|b| b & 1 == 1) {
        session.connected(Era::Modern, String::from("2026-07-28"));
    } else {
        session.connected(Era::Legacy, String::from("2025-11-25"));
    }
    let mut oracle = Oracle::default();
    let mut bytes = data.iter().copied().skip(1);
    while let Some(op) = bytes.next() {
        let arg = bytes.next().unwrap_or(0);
        match op % 8 {
            0 => {
                let method = METHODS[usize::from(arg) % METHODS.len()];
                let timeout = Duration::from_millis(u64::from(arg % 64) + 1);
                let max = (arg & 0x80 != 0).then(|| timeout * 2);
                let timing = Timing::new(now, timeout, max, arg & 0x40 == 0);
                let id = session.start(method, None, arg & 0x20 != 0, timing);
                if method == "server/discover" && arg & 0x10 != 0 {
                    session.mark_probe(&id);
                }
                oracle.started(&id);
            }
            1 | 2 => {
                let Some(id) = oracle.pick(arg) else { continue };
                let line = if op % 8 == 1 {
                    let body = if arg & 1 == 0 {
                        json!({"result": {}})
                    } else {
                        json!({"error": {"code": -32603, "message": "failed"}})
                    };
                    let mut m = json!({"jsonrpc": "2.0", "id": id.to_value()});
                    m.as_object_mut()
                        .into_iter()
                        .for_each(|o| o.extend(body.as_object().cloned().unwrap_or_default()));
                    m
                } else {
                    json!({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": id.to_value(), "progress": arg}})
                };
                last_inbound = now;
                session.receive_line(line.to_string().as_bytes(), now);
            }
            3 => {
                if let Some(id) = oracle.pick(arg) {
                    if session.cancel(&id, "fuzz") {
                        oracle.ended(&id, "cancel");
                    }
                }
            }
            4 => {
                now += Duration::from_millis(u64::from(arg));
                session.expire(now);
                if let Some(due) = session.next_due() {
                    assert!(due > now, "a request is overdue right after expire");
                }
            }
            5 => {
                let len = usize::from(arg % 48);
                let line: Vec<u8> = bytes.by_ref().take(len).collect();
                last_inbound = now;
                session.receive_line(&line, now);
            }
            6 => {
                last_inbound = now;
                session.receive_line(LINES[usize::from(arg) % LINES.len()].as_bytes(), now);
            }
            _ => {
                if let Pulse::Silent(_) = session.heartbeat(now, last_inbound) {
                    // The shell kills the server: everything pending fails with it.
                    for id in session.fail_all() {
                        oracle.ended(&id, "fail_all");
                    }
                    last_inbound = now;
                }
            }
        }
        oracle.drain(&mut session);
    }
    for id in session.fail_all() {
        oracle.ended(&id, "fail_all at the end");
    }
    oracle.drain(&mut session);
    oracle.check_all_ended();
}

/// What the property knows about the requests it started.
#[derive(Debug, Default)]
struct Oracle {
    /// Every id started, in order.
    order: Vec<RequestId>,
    /// How each ended, if it did.
    ended: HashMap<RequestId, &'static str>,
    /// Every request id the session wrote.
    sent: HashSet<String>,
}

impl Oracle {
    fn started(&mut self, id: &RequestId) {
        assert!(!self.order.contains(id), "id {id:?} given out twice");
        self.order.push(id.clone());
    }

    fn pick(&self, arg: u8) -> Option<RequestId> {
        if self.order.is_empty() {
            return None;
        }
        Some(self.order[usize::from(arg) % self.order.len()].clone())
    }

    fn ended(&mut self, id: &RequestId, how: &'static str) {
        assert!(self.order.contains(id), "{how}: {id:?} was never started");
        if let Some(before) = self.ended.insert(id.clone(), how) {
            panic!("{id:?} ended twice: {before}, then {how}");
        }
    }

    fn drain(&mut self, session: &mut Session) {
        while let Some(event) = session.next_event() {
            match event {
                Event::Answered { id, .. } => self.ended(&id, "answered"),
                Event::TimedOut { id, .. } => self.ended(&id, "timed out"),
                Event::Progress { id, .. } => {
                    assert!(self.order.contains(&id), "progress for unknown {id:?}");
                    assert!(!self.ended.contains_key(&id), "progress after {id:?} ended");
                }
                Event::Callback(request) => session.respond(request.id, Ok(json!({}))),
                Event::Notification(_) | Event::Stray(_) | Event::Report(_) => {}
            }
        }
        while let Some(message) = session.next_outbound() {
            let line: Value = serde_json::from_slice(&message.to_line())
                .unwrap_or_else(|e| panic!("the session wrote an unreadable message: {e}"));
            if line.get("method").is_some() {
                if let Some(id) = line.get("id") {
                    assert!(
                        self.sent.insert(id.to_string()),
                        "request id {id} sent twice"
                    );
                }
            }
        }
    }

    fn check_all_ended(&self) {
        for id in &self.order {
            assert!(self.ended.contains_key(id), "{id:?} never ended");
        }
    }
}
