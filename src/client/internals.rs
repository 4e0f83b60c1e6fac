//! The client session's fuzz property, for the `client_session` fuzz target and the unit tests
//! (unstable, behind the `internals` feature: not part of the crate's API).
// Without the feature only the unit tests reach it.
#![cfg_attr(not(feature = "internals"), allow(unreachable_pub))]

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::era::Era;
use super::handshake::{Handshake, Plan, Step};
use super::session::{Event, Pulse, Session, Timing};
use crate::error::Error;
use crate::mcp::logging::LogLevel;
use crate::message::RequestId;
use crate::protocol::{MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS};

/// The connection step's deadlines under the property (time moves by up to 255 ms a step).
const DISCOVER_TIMEOUT: Duration = Duration::from_millis(30);
const INIT_TIMEOUT: Duration = Duration::from_millis(80);

/// The most requests one connection step may send: probe, probe again after `-32022`,
/// `initialize`, and (after a `-32022` to it) probe, probe again, `initialize`, probe.
const MAX_STEP_REQUESTS: usize = 7;

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
/// sent twice, that nothing is overdue after `Session::expire`, and that nothing panics.
///
/// The input is a program: each byte picks an operation (start a request, answer one, send
/// progress, cancel one, let time pass, write an arbitrary line, a server request or
/// notification, the heartbeat's turn or the server's death), and the bytes after it are its
/// operands.
///
/// When bit 1 of the first byte is set, the session starts unconnected and the connection
/// step (`Handshake`) runs on the same program (bits 2-3: the era the caller insists on;
/// bits 4-5: the era of the previous process). It must never wait for a request that is no
/// longer pending nor past that request's deadline, must send at most
/// `MAX_STEP_REQUESTS` requests, and may only report an era the server's answers justify:
/// modern after a `server/discover` result listing the version, handshake-era after an
/// `initialize` result naming it (then `notifications/initialized` is sent, once).
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
    let mode = data.first().copied().unwrap_or(0);
    let mut oracle = Oracle::default();
    if mode & 2 == 2 {
        oracle.step = Some(Connecting::start(&mut session, mode, now));
        oracle.step_moved(&session);
    } else if mode & 1 == 1 {
        session.connected(Era::Modern, String::from("2026-07-28"));
    } else {
        session.connected(Era::Legacy, String::from("2025-11-25"));
    }
    oracle.drain(&mut session, now);
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
                    let body = answer_body(arg);
                    oracle
                        .answers
                        .entry(id.clone())
                        .or_default()
                        .push(body.clone());
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
                    // A shell never cancels the connection step's requests.
                    if oracle.awaited() == Some(&id) {
                        continue;
                    }
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
                let dies = oracle.step.is_some() && arg == 0xFF;
                if dies || matches!(session.heartbeat(now, last_inbound), Pulse::Silent(_)) {
                    // The shell kills the server: everything pending fails with it.
                    for id in session.fail_all() {
                        oracle.ended(&id, "fail_all");
                        oracle.died(&mut session, &id, now);
                    }
                    last_inbound = now;
                }
            }
        }
        oracle.drain(&mut session, now);
        oracle.check_step(&session, now);
    }
    for id in session.fail_all() {
        oracle.ended(&id, "fail_all at the end");
        oracle.died(&mut session, &id, now);
    }
    oracle.drain(&mut session, now);
    oracle.check_all_ended();
}

/// What the server answers (by `arg`): empty results and errors, and the answers that
/// decide an era, right and wrong.
fn answer_body(arg: u8) -> Value {
    let version = PROTOCOL_VERSIONS[usize::from(arg >> 4) % PROTOCOL_VERSIONS.len()];
    match (arg >> 1) % 8 {
        0 => json!({"result": {}}),
        1 => json!({"error": {"code": -32603, "message": "failed"}}),
        2 => json!({"result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}),
        // With `logging` (odd `arg`), a step asked for a log level sends `logging/setLevel`.
        3 if arg & 1 == 1 => {
            json!({"result": {"protocolVersion": version, "capabilities": {"logging": {}}}})
        }
        3 => json!({"result": {"protocolVersion": version, "capabilities": {}}}),
        4 => json!({"error": {"code": -32022, "message": "unsupported",
                              "data": {"supported": ["2026-07-28"]}}}),
        5 => json!({"error": {"code": -32022, "message": "unsupported",
                              "data": {"supported": [version, "2027-01-01"]}}}),
        6 => json!({"result": {"protocolVersion": "1999-01-01"}}),
        _ => json!({"result": {"supportedVersions": [version, "2027-01-01"]}}),
    }
}

/// The connection step under the property, and what it has done.
#[derive(Debug)]
struct Connecting {
    handshake: Handshake,
    /// The request it waits for, and when it was sent.
    awaiting: Option<(RequestId, Instant)>,
    /// Every request it sent.
    requests: Vec<RequestId>,
    /// How it ended: `Some(era)` connected, `None` failed.
    ended: Option<Option<Era>>,
    /// `notifications/initialized` written so far.
    initialized: usize,
}

impl Connecting {
    fn start(session: &mut Session, mode: u8, now: Instant) -> Connecting {
        let era = |bits: u8| match bits & 3 {
            1 => Some(Era::Legacy),
            2 => Some(Era::Modern),
            _ => None,
        };
        if let Some(previous) = era(mode >> 4) {
            session.connected(previous, String::from("x"));
        }
        let previous = session.new_connection();
        let plan = Plan {
            era: era(mode >> 2),
            legacy_version: String::from("2025-11-25"),
            modern_version: String::from("2026-07-28"),
            discover_timeout: DISCOVER_TIMEOUT,
            init_timeout: INIT_TIMEOUT,
            log_level: (mode & 0x40 != 0).then_some(LogLevel::Warning),
        };
        let mut handshake = Handshake::new(plan, previous);
        let step = handshake.start(session, now);
        let mut connecting = Connecting {
            handshake,
            awaiting: None,
            requests: Vec::new(),
            ended: None,
            initialized: 0,
        };
        connecting.took(session, step, now);
        connecting
    }

    /// The step moved on to `step`.
    fn took(&mut self, session: &Session, step: Step, now: Instant) {
        assert!(
            self.ended.is_none(),
            "the connection step went on after it ended"
        );
        self.awaiting = None;
        match step {
            Step::Await(id) => {
                assert!(
                    session.is_pending(&id),
                    "the step waits for a request never sent"
                );
                assert!(
                    self.requests.len() < MAX_STEP_REQUESTS,
                    "the connection step sent more than {MAX_STEP_REQUESTS} requests"
                );
                self.awaiting = Some((id, now));
            }
            Step::Connected(connected) => {
                assert_eq!(
                    session.era(),
                    Some(connected.era),
                    "the session's era differs"
                );
                self.ended = Some(Some(connected.era));
            }
            Step::Failed(error) => {
                assert!(!error.to_string().is_empty(), "an error without a message");
                assert_eq!(session.era(), None, "failed, yet the session has an era");
                self.ended = Some(None);
            }
        }
    }
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
    /// The connection step, when the program runs one.
    step: Option<Connecting>,
    /// The bodies of the answers the program wrote, by id.
    answers: HashMap<RequestId, Vec<Value>>,
    /// The method of every request the session wrote, by id.
    methods: HashMap<RequestId, String>,
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

    /// The request the connection step waits for.
    fn awaited(&self) -> Option<&RequestId> {
        self.step.as_ref()?.awaiting.as_ref().map(|(id, _)| id)
    }

    /// Request `id` ended with `outcome`: to the connection step, if it is the one it waits
    /// for.
    fn route_to_step(
        &mut self,
        session: &mut Session,
        id: &RequestId,
        outcome: Result<Value, Error>,
        now: Instant,
    ) {
        let Some(connecting) = self.step.as_mut() else {
            return;
        };
        if let Some(step) = connecting.handshake.on_outcome(session, id, outcome, now) {
            connecting.took(session, step, now);
            self.step_moved(session);
        }
    }

    /// The connection step sent a new request, or ended: check what it claims.
    fn step_moved(&mut self, session: &Session) {
        let Some(connecting) = self.step.as_mut() else {
            return;
        };
        if let Some((id, _)) = &connecting.awaiting {
            let id = id.clone();
            connecting.requests.push(id.clone());
            self.started(&id);
            return;
        }
        let Some(Some(era)) = connecting.ended else {
            return;
        };
        // Only answers the program wrote (op 1) can justify an era: the arbitrary lines are
        // too short to hold one, and the canned ones hold none.
        let version = session.protocol_version();
        let (method, justifies): (&str, &dyn Fn(&Value) -> bool) = match era {
            Era::Modern => {
                assert!(
                    MODERN_PROTOCOL_VERSIONS.contains(&version),
                    "modern {version:?}"
                );
                ("server/discover", &|body: &Value| {
                    body["result"]["supportedVersions"]
                        .as_array()
                        .is_some_and(|vs| vs.iter().any(|v| v == version))
                })
            }
            Era::Legacy => {
                assert!(
                    PROTOCOL_VERSIONS.contains(&version),
                    "handshake-era {version:?}"
                );
                ("initialize", &|body: &Value| {
                    body["result"]["protocolVersion"] == version
                })
            }
        };
        let justified = connecting.requests.iter().any(|id| {
            self.methods.get(id).is_some_and(|m| m == method)
                && self
                    .answers
                    .get(id)
                    .is_some_and(|bodies| bodies.iter().any(justifies))
        });
        assert!(
            justified,
            "{era:?} {version} without an answer that says so"
        );
    }

    /// After each operation: the step waits only for a pending request within its deadline;
    /// `notifications/initialized` only after a handshake-era connection.
    fn check_step(&self, session: &Session, now: Instant) {
        let Some(connecting) = &self.step else {
            return;
        };
        if let Some((id, sent)) = &connecting.awaiting {
            assert!(
                session.is_pending(id),
                "the step waits for {id:?}, which has ended"
            );
            assert!(
                now < *sent + INIT_TIMEOUT,
                "the step waits past its deadline"
            );
        }
        // Sent once the session is in the handshake era: at the end, or before the step's
        // `logging/setLevel`.
        let expected = usize::from(session.era() == Some(Era::Legacy));
        assert!(
            connecting.initialized <= expected,
            "notifications/initialized sent {} times",
            connecting.initialized
        );
    }

    /// The server died while request `id` was pending.
    fn died(&mut self, session: &mut Session, id: &RequestId, now: Instant) {
        let dead = Error::ServerExited {
            status: None,
            stderr_tail: String::new(),
        };
        self.route_to_step(session, id, Err(dead), now);
    }

    fn drain(&mut self, session: &mut Session, now: Instant) {
        while let Some(event) = session.next_event() {
            match event {
                Event::Answered { id, result } => {
                    self.ended(&id, "answered");
                    self.route_to_step(session, &id, result.map_err(Error::Rpc), now);
                }
                Event::Unreadable { id, reason, line } => {
                    self.ended(&id, "answered unreadably");
                    let error = super::wait::unreadable(reason, line);
                    self.route_to_step(session, &id, Err(error), now);
                }
                Event::TimedOut {
                    id,
                    method,
                    elapsed,
                } => {
                    self.ended(&id, "timed out");
                    self.route_to_step(
                        session,
                        &id,
                        Err(Error::Timeout {
                            method,
                            elapsed,
                            stderr_tail: None,
                        }),
                        now,
                    );
                }
                Event::Progress { id, .. } => {
                    assert!(self.order.contains(&id), "progress for unknown {id:?}");
                    assert!(!self.ended.contains_key(&id), "progress after {id:?} ended");
                }
                Event::Callback(request) => session.respond(request.id, Ok(json!({}))),
                Event::Notification(_) | Event::Stray(_) | Event::Report(_) => {}
            }
        }
        let mut written = Vec::new();
        while session.write_outbound(&mut written) {
            let line: Value = serde_json::from_slice(&written)
                .unwrap_or_else(|e| panic!("the session wrote an unreadable message: {e}"));
            written.clear();
            let method = line
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !method.is_empty() {
                if let Some(id) = line.get("id") {
                    assert!(
                        self.sent.insert(id.to_string()),
                        "request id {id} sent twice"
                    );
                    if let Some(id) = RequestId::from_value(id) {
                        self.methods.insert(id, method.to_owned());
                    }
                }
            }
            if method == "notifications/initialized" {
                if let Some(connecting) = self.step.as_mut() {
                    connecting.initialized += 1;
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
