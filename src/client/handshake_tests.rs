//! The connection step on plain bytes and instants: the server's lines go into a session, its
//! events into the handshake; no process, no clock.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::*;
use crate::client::session::Event;
use crate::mcp::logging::LogLevel;
use crate::protocol::PROTOCOL_VERSION_KEY;

const DISCOVER: Duration = Duration::from_millis(200);
const INIT: Duration = Duration::from_millis(1000);
const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

/// A session, the handshake on it, and a clock that moves only when told.
struct Bench {
    session: Session,
    handshake: Handshake,
    now: Instant,
    t0: Instant,
    step: Option<Step>,
    /// What the session said on stderr.
    reports: Vec<String>,
}

impl Bench {
    fn new(era: Option<Era>, previous: Option<Era>) -> Bench {
        Bench::build(era, previous, MODERN, None)
    }

    fn with_modern(version: &str) -> Bench {
        Bench::build(None, None, version, None)
    }

    fn with_log_level(era: Option<Era>, level: LogLevel) -> Bench {
        Bench::build(era, None, MODERN, Some(level))
    }

    fn build(
        era: Option<Era>,
        previous: Option<Era>,
        modern: &str,
        log_level: Option<LogLevel>,
    ) -> Bench {
        let mut session = Session::new(
            json!({}),
            json!({"name": "t", "version": "0"}),
            None,
            Vec::new(),
            None,
            true,
        );
        if let Some(previous) = previous {
            session.connected(previous, String::from("x"));
        }
        let previous = session.new_connection();
        let plan = Plan {
            era,
            legacy_version: String::from(LEGACY),
            modern_version: modern.to_owned(),
            discover_timeout: DISCOVER,
            init_timeout: INIT,
            log_level,
        };
        let mut handshake = Handshake::new(plan, previous);
        let t0 = Instant::now();
        let step = handshake.start(&mut session, t0);
        Bench {
            session,
            handshake,
            now: t0,
            t0,
            step: Some(step),
            reports: Vec::new(),
        }
    }

    /// What the client wrote since the last look.
    fn sent(&mut self) -> Vec<Value> {
        let mut lines = Vec::new();
        while self.session.write_outbound(&mut lines) {}
        lines
            .split_inclusive(|&b| b == b'\n')
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect()
    }

    /// The one request the client sent since the last look: its method and id.
    fn request(&mut self) -> (String, Value) {
        let sent = self.sent();
        assert_eq!(sent.len(), 1, "{sent:?}");
        let method = sent[0]["method"].as_str().unwrap().to_owned();
        (method, sent[0]["id"].clone())
    }

    fn awaited(&self) -> Value {
        match &self.step {
            Some(Step::Await(id)) => id.to_value(),
            other => panic!("not waiting: {other:?}"),
        }
    }

    /// One line from the server.
    fn line(&mut self, text: &str) {
        self.session.receive_line(text.as_bytes(), self.now);
        self.route();
    }

    /// An answer to the request the handshake waits for.
    fn answer(&mut self, body: Value) {
        let mut message = json!({"jsonrpc": "2.0", "id": self.awaited()});
        for (k, v) in body.as_object().unwrap() {
            message[k] = v.clone();
        }
        self.line(&message.to_string());
    }

    /// Time passes.
    fn pass(&mut self, by: Duration) {
        self.now += by;
        self.session.expire(self.now);
        self.route();
    }

    /// The server dies: what was pending fails with it.
    fn die(&mut self) {
        for id in self.session.fail_all() {
            let dead = Error::ServerExited {
                status: None,
                stderr_tail: String::new(),
            };
            if let Some(step) =
                self.handshake
                    .on_outcome(&mut self.session, &id, Err(dead), self.now)
            {
                self.step = Some(step);
            }
        }
    }

    /// The shell's part: ended requests go to the handshake.
    fn route(&mut self) {
        while let Some(event) = self.session.next_event() {
            let (id, outcome) = match event {
                Event::Answered { id, result } => (id, result.map_err(Error::Rpc)),
                Event::TimedOut {
                    id,
                    method,
                    elapsed,
                } => (
                    id,
                    Err(Error::Timeout {
                        method,
                        elapsed,
                        stderr_tail: None,
                    }),
                ),
                Event::Report(text) => {
                    self.reports.push(text);
                    continue;
                }
                _ => continue,
            };
            if let Some(step) = self
                .handshake
                .on_outcome(&mut self.session, &id, outcome, self.now)
            {
                self.step = Some(step);
            }
        }
    }

    fn connected(&mut self) -> Connected {
        match self.step.take() {
            Some(Step::Connected(c)) => c,
            other => panic!("not connected: {other:?}"),
        }
    }

    fn failed(&mut self) -> Error {
        match self.step.take() {
            Some(Step::Failed(e)) => e,
            other => panic!("not failed: {other:?}"),
        }
    }
}

fn discover_result(versions: &[&str]) -> Value {
    json!({"result": {"supportedVersions": versions, "capabilities": {}}})
}

fn initialize_result(version: &str) -> Value {
    json!({"result": {"protocolVersion": version, "capabilities": {},
                      "serverInfo": {"name": "s", "version": "1"}}})
}

fn unsupported(supported: &[&str]) -> Value {
    json!({"error": {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": supported, "requested": "x"}}})
}

#[test]
fn a_modern_server_answers_the_probe_and_gets_nothing_else() {
    let mut b = Bench::new(None, None);
    let sent = b.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "server/discover");
    assert_eq!(sent[0]["params"]["_meta"][PROTOCOL_VERSION_KEY], MODERN);
    b.answer(discover_result(&[MODERN]));
    let c = b.connected();
    assert_eq!(c.era, Era::Modern);
    assert_eq!(c.result["supportedVersions"][0], MODERN);
    assert_eq!(
        (b.session.era(), b.session.protocol_version()),
        (Some(Era::Modern), MODERN)
    );
    assert!(b.sent().is_empty(), "no initialize, no initialized");
}

#[test]
fn a_handshake_only_server_rejects_the_probe_and_gets_initialize() {
    let mut b = Bench::new(None, None);
    assert_eq!(b.request().0, "server/discover");
    b.answer(json!({"error": {"code": -32601, "message": "Method not found"}}));
    let (method, _) = b.request();
    assert_eq!(method, "initialize");
    b.answer(initialize_result("2025-06-18"));
    let c = b.connected();
    assert_eq!(c.era, Era::Legacy);
    assert_eq!(c.result["serverInfo"]["name"], "s");
    assert_eq!(b.session.protocol_version(), "2025-06-18");
    let sent = b.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["method"], "notifications/initialized");
    assert!(sent[0].get("id").is_none());
}

#[test]
fn a_silent_server_passes_the_discover_deadline_then_initialize_decides() {
    let mut b = Bench::new(None, None);
    let (_, probe) = b.request();
    b.pass(DISCOVER - Duration::from_millis(1));
    assert!(matches!(b.step, Some(Step::Await(_))));
    assert!(b.sent().is_empty());
    b.pass(Duration::from_millis(1));
    // The probe is never cancelled: a handshake-era server gets only it before initialize.
    let (method, _) = b.request();
    assert_eq!(method, "initialize");
    // initialize's own deadline: a silent server fails the step, uncancelled, in time.
    b.pass(INIT);
    let e = b.failed();
    assert!(
        matches!(&e, Error::Timeout { method, .. } if method == "initialize"),
        "{e}"
    );
    assert!(b.sent().is_empty(), "initialize is never cancelled");
    assert_eq!(b.now - b.t0, DISCOVER + INIT);
    // A late answer to the probe after the step is only a late answer.
    b.line(&json!({"jsonrpc": "2.0", "id": probe, "result": {}}).to_string());
    assert_eq!(b.session.stats().late_responses, 1);
}

#[test]
fn a_probe_answer_after_its_deadline_still_makes_the_server_modern_if_initialize_fails() {
    let mut b = Bench::new(None, None);
    let (_, probe) = b.request();
    b.pass(DISCOVER);
    assert_eq!(b.request().0, "initialize");
    let late = json!({"jsonrpc": "2.0", "id": probe,
                      "result": {"supportedVersions": [MODERN], "capabilities": {}}});
    b.line(&late.to_string());
    assert!(
        matches!(b.step, Some(Step::Await(_))),
        "initialize still decides first"
    );
    b.answer(json!({"error": {"code": -32601, "message": "no initialize here"}}));
    assert_eq!(b.connected().era, Era::Modern);
    assert_eq!(b.session.protocol_version(), MODERN);
}

#[test]
fn unsupported_version_naming_a_shared_one_earns_one_more_probe_with_it() {
    // The client prefers a version this server does not speak.
    let mut b = Bench::with_modern("2099-01-01");
    let sent = b.sent();
    assert_eq!(
        sent[0]["params"]["_meta"][PROTOCOL_VERSION_KEY],
        "2099-01-01"
    );
    b.answer(unsupported(&["2027-01-01", MODERN]));
    let sent = b.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["method"], "server/discover");
    assert_eq!(sent[0]["params"]["_meta"][PROTOCOL_VERSION_KEY], MODERN);
    b.answer(discover_result(&[MODERN]));
    assert_eq!(b.connected().era, Era::Modern);
    assert_eq!(b.session.protocol_version(), MODERN);
}

#[test]
fn a_server_going_round_in_circles_gets_no_third_probe() {
    let mut b = Bench::with_modern("2099-01-01");
    b.sent();
    b.answer(unsupported(&[MODERN]));
    assert_eq!(b.request().0, "server/discover");
    // It rejects the version it named, naming the first one again: initialize.
    b.answer(unsupported(&["2099-01-01"]));
    assert_eq!(b.request().0, "initialize");
    b.answer(initialize_result(LEGACY));
    assert_eq!(b.connected().era, Era::Legacy);
}

#[test]
fn unsupported_version_without_a_shared_version_fails_or_falls_back() {
    // Only modern versions the client does not speak: incompatible, nothing more is sent.
    let mut b = Bench::new(None, None);
    b.sent();
    b.answer(unsupported(&["2027-01-01"]));
    let e = b.failed();
    assert!(
        matches!(&e, Error::Protocol { reason, .. } if reason.contains("2027-01-01")),
        "{e}"
    );
    assert!(b.sent().is_empty());
    assert_eq!(b.session.era(), None);
    // A handshake-era version among them: initialize.
    let mut b = Bench::new(None, None);
    b.sent();
    b.answer(unsupported(&["2027-01-01", LEGACY]));
    assert_eq!(b.request().0, "initialize");
}

#[test]
fn an_error_to_initialize_ends_the_step_with_that_error() {
    let mut b = Bench::new(None, None);
    b.sent();
    b.answer(json!({"error": {"code": -32601, "message": "Method not found"}}));
    b.sent();
    b.answer(json!({"error": {"code": -32603, "message": "boom"}}));
    let e = b.failed();
    assert!(matches!(&e, Error::Rpc(o) if o.message == "boom"), "{e}");
    assert_eq!(b.session.era(), None);
}

#[test]
fn garbage_answers_are_never_taken_for_an_era() {
    let mut b = Bench::new(None, None);
    b.sent();
    // Not a message at all: counted, and the probe still waits.
    b.line("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\"");
    b.line("hello");
    assert_eq!(b.session.stats().bad_lines, 2);
    assert!(matches!(b.step, Some(Step::Await(_))));
    // A discover result without versions: handshake era.
    b.answer(json!({"result": {"hello": "world"}}));
    assert_eq!(b.request().0, "initialize");
    // An initialize result without a version, then one with a version nobody speaks.
    b.answer(json!({"result": {"capabilities": {}}}));
    let e = b.failed();
    assert!(
        matches!(&e, Error::Protocol { reason, .. } if reason.contains("no protocolVersion")),
        "{e}"
    );
    let mut b = Bench::new(Some(Era::Legacy), None);
    b.sent();
    b.answer(initialize_result("1999-01-01"));
    let e = b.failed();
    assert!(
        matches!(&e, Error::Protocol { reason, .. } if reason.contains("1999-01-01")),
        "{e}"
    );
    assert_eq!(b.session.era(), None);
}

#[test]
fn the_server_dying_mid_step_fails_it_with_the_death() {
    for answered_probe in [false, true] {
        let mut b = Bench::new(None, None);
        b.sent();
        if answered_probe {
            b.answer(json!({"error": {"code": -32601, "message": "no"}}));
            assert_eq!(b.request().0, "initialize");
        }
        b.die();
        let e = b.failed();
        assert!(matches!(e, Error::ServerExited { .. }), "{e}");
        assert!(b.sent().is_empty(), "nothing more is sent to a dead server");
        assert_eq!(b.session.era(), None);
    }
}

#[test]
fn a_forced_era_skips_the_probe_or_insists_on_it() {
    let mut b = Bench::new(Some(Era::Legacy), None);
    assert_eq!(b.request().0, "initialize");
    b.answer(initialize_result(LEGACY));
    assert_eq!(b.connected().era, Era::Legacy);
    // Modern insisted on: the probe waits the init timeout, and its failure is final.
    let mut b = Bench::new(Some(Era::Modern), None);
    assert_eq!(b.request().0, "server/discover");
    b.pass(DISCOVER);
    assert!(matches!(b.step, Some(Step::Await(_))));
    b.pass(INIT - DISCOVER);
    assert!(matches!(b.failed(), Error::Timeout { .. }));
    assert!(
        b.sent().is_empty(),
        "the probe is not cancelled, nor followed by initialize"
    );
    let mut b = Bench::new(Some(Era::Modern), None);
    b.sent();
    b.answer(json!({"error": {"code": -32601, "message": "no"}}));
    assert!(matches!(b.failed(), Error::Rpc(_)));
    let mut b = Bench::new(Some(Era::Modern), None);
    b.sent();
    b.answer(discover_result(&[LEGACY]));
    assert!(matches!(b.failed(), Error::Protocol { .. }));
}

#[test]
fn a_server_that_was_handshake_era_gets_initialize_first_and_is_probed_on_32022() {
    let mut b = Bench::new(None, Some(Era::Legacy));
    assert_eq!(b.request().0, "initialize");
    b.answer(initialize_result(LEGACY));
    assert_eq!(b.connected().era, Era::Legacy);
    // Replaced by a modern server: -32022 to initialize, then the probe.
    let mut b = Bench::new(None, Some(Era::Legacy));
    b.sent();
    b.answer(unsupported(&[MODERN]));
    assert_eq!(b.request().0, "server/discover");
    b.answer(discover_result(&[MODERN]));
    assert_eq!(b.connected().era, Era::Modern);
    // Any other error is final.
    let mut b = Bench::new(None, Some(Era::Legacy));
    b.sent();
    b.answer(json!({"error": {"code": -32603, "message": "boom"}}));
    assert!(matches!(b.failed(), Error::Rpc(_)));
}

#[test]
fn unsupported_version_to_initialize_after_the_probe_earns_a_strict_probe() {
    let mut b = Bench::new(None, None);
    b.sent();
    b.pass(DISCOVER);
    assert_eq!(b.request().0, "initialize");
    b.answer(unsupported(&[MODERN]));
    let sent = b.sent();
    assert_eq!(sent[0]["method"], "server/discover");
    b.answer(discover_result(&[MODERN]));
    assert_eq!(b.connected().era, Era::Modern);
    // The same, with a probe that fails: initialize's error stands.
    let mut b = Bench::new(None, None);
    b.sent();
    b.pass(DISCOVER);
    b.sent();
    b.answer(unsupported(&[MODERN]));
    b.sent();
    b.pass(INIT);
    let e = b.failed();
    assert!(
        matches!(&e, Error::Rpc(o) if o.code == UNSUPPORTED_PROTOCOL_VERSION),
        "{e}"
    );
}

#[test]
fn answers_to_other_requests_are_not_the_steps() {
    let mut b = Bench::new(None, None);
    b.sent();
    let other = RequestId::from(999);
    let stray = b
        .handshake
        .on_outcome(&mut b.session, &other, Ok(json!({})), b.now);
    assert!(stray.is_none());
    assert!(matches!(b.step, Some(Step::Await(_))));
}

#[test]
fn a_late_answer_counts_only_for_the_steps_own_probe() {
    let mut b = Bench::new(None, None);
    b.sent();
    b.pass(DISCOVER);
    assert_eq!(b.request().0, "initialize");
    // Another discover marked as the probe (no shell does this while connecting), answered
    // after its deadline with a modern result: not evidence about the step's probe.
    let timing = Timing::new(b.now, DISCOVER, None, false);
    let other = b.session.start("server/discover", None, false, timing);
    b.session.mark_probe(&other);
    b.pass(DISCOVER);
    let late = json!({"jsonrpc": "2.0", "id": other.to_value(),
                      "result": {"supportedVersions": [MODERN]}});
    b.line(&late.to_string());
    b.answer(json!({"error": {"code": -32601, "message": "no initialize here"}}));
    assert!(matches!(b.failed(), Error::Rpc(_)));
    assert_eq!(b.session.era(), None);
}

fn initialize_result_with_logging(version: &str) -> Value {
    json!({"result": {"protocolVersion": version, "capabilities": {"logging": {}},
                      "serverInfo": {"name": "s", "version": "1"}}})
}

#[test]
fn a_handshake_era_server_with_logging_is_asked_for_the_level_after_initialized() {
    let mut b = Bench::with_log_level(Some(Era::Legacy), LogLevel::Warning);
    assert_eq!(b.request().0, "initialize");
    b.answer(initialize_result_with_logging(LEGACY));
    let sent = b.sent();
    let methods: Vec<_> = sent.iter().map(|m| m["method"].clone()).collect();
    assert_eq!(methods, ["notifications/initialized", "logging/setLevel"]);
    assert_eq!(sent[1]["params"], json!({"level": "warning"}));
    assert_eq!(sent[1]["id"], b.awaited(), "the step waits for setLevel");
    b.answer(json!({"result": {}}));
    let c = b.connected();
    assert_eq!(
        (c.era, &c.result["serverInfo"]["name"]),
        (Era::Legacy, &json!("s"))
    );
    assert!(b.reports.is_empty(), "{:?}", b.reports);
}

#[test]
fn no_level_is_set_on_a_server_without_logging_nor_unless_asked() {
    let mut b = Bench::with_log_level(Some(Era::Legacy), LogLevel::Debug);
    b.request();
    b.answer(initialize_result(LEGACY));
    assert_eq!(b.connected().era, Era::Legacy);
    let sent = b.sent();
    assert_eq!(sent.len(), 1, "only notifications/initialized: {sent:?}");
    let mut b = Bench::new(Some(Era::Legacy), None);
    b.request();
    b.answer(initialize_result_with_logging(LEGACY));
    assert_eq!(b.connected().era, Era::Legacy);
    assert_eq!(b.sent().len(), 1);
}

#[test]
fn a_refused_or_unanswered_set_level_is_reported_and_the_connection_stands() {
    let mut b = Bench::with_log_level(Some(Era::Legacy), LogLevel::Info);
    b.request();
    b.answer(initialize_result_with_logging(LEGACY));
    b.sent();
    b.answer(json!({"error": {"code": -32602, "message": "no such level"}}));
    assert_eq!(b.connected().era, Era::Legacy);
    assert_eq!(b.reports.len(), 1);
    assert!(b.reports[0].contains("logging/setLevel"), "{:?}", b.reports);
    assert!(b.reports[0].contains("no such level"), "{:?}", b.reports);

    let mut b = Bench::with_log_level(None, LogLevel::Info);
    b.answer(json!({"error": {"code": -32601, "message": "Method not found"}}));
    b.answer(initialize_result_with_logging(LEGACY));
    b.pass(INIT + Duration::from_millis(1));
    assert_eq!(b.connected().era, Era::Legacy);
    assert!(b.reports[0].contains("did not answer"), "{:?}", b.reports);
}
