//! The connection step as a sans-IO state machine: which era a freshly started server speaks
//! (the `server/discover` probe with its own short deadline, the fallback to `initialize`, a
//! `-32022` naming a shared version) and its handshake.
//!
//! No fds and no clock: it starts its requests on the [`Session`] (so they go out through the
//! session's outbox, with deadlines from the `Instant` it is given), and learns how each
//! ended from the shell ([`Handshake::on_outcome`]: an answer, a timeout, a dead server).
//! It says what to do next as a [`Step`]. The judgements themselves live in `era.rs`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::era::{self, excerpt_of, Era, Verdict};
use super::session::{Session, Timing};
use crate::error::Error;
use crate::mcp::logging::LogLevel;
use crate::message::RequestId;
use crate::protocol::{MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION};

/// What the connection step needs from the client's settings.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The era the caller insists on (no probe, or a probe that must succeed).
    pub(crate) era: Option<Era>,
    /// The handshake-era version `initialize` asks for.
    pub(crate) legacy_version: String,
    /// The modern version the probe asks for first.
    pub(crate) modern_version: String,
    /// How long an optional probe waits before the server counts as handshake-era.
    pub(crate) discover_timeout: Duration,
    /// How long `initialize` (and a probe that must succeed) waits.
    pub(crate) init_timeout: Duration,
    /// The log level a handshake-era server that declares `logging` is asked for.
    pub(crate) log_level: Option<LogLevel>,
}

impl Plan {
    /// The modern versions the client accepts, most preferred first.
    fn known_modern_versions(&self) -> Vec<String> {
        let mut known = vec![self.modern_version.clone()];
        // Newest first: the crate's list is oldest first.
        for v in MODERN_PROTOCOL_VERSIONS.iter().rev() {
            if !known.iter().any(|k| k == v) {
                known.push((*v).to_owned());
            }
        }
        known
    }
}

/// The connection is made: its era (also recorded in the session, with the version) and the
/// server's `initialize` result (handshake era) or `server/discover` result (modern).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Connected {
    pub(crate) era: Era,
    pub(crate) result: Value,
}

/// What the shell does next.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send what the session queued and wait for request `id` to end (answer, timeout, or the
    /// server's death), then report it with [`Handshake::on_outcome`].
    Await(RequestId),
    /// Done: the session is connected (a handshake-era `notifications/initialized` is queued).
    Connected(Connected),
    /// The connection step failed.
    Failed(Error),
}

/// What to do when `initialize` fails.
#[derive(Debug, Clone)]
enum Fallback {
    /// The caller asked for the handshake era: the error is final.
    Final,
    /// The server was handshake-era last time: a `-32022` means it was replaced by a modern
    /// one, so probe after all.
    Probe,
    /// The probe `probe` (asking for `asked`) found no modern server: modern evidence that came
    /// too late for it still counts (its late answer, `-32022` to `initialize`).
    LateEvidence { probe: RequestId, asked: String },
}

/// A `server/discover` asking for `asked`; `retried` after a `-32022`; `strict` when the
/// caller insists on the modern era.
#[derive(Debug)]
struct Probe {
    id: RequestId,
    asked: String,
    retried: bool,
    strict: bool,
}

/// Where the step is.
#[derive(Debug)]
enum Stage {
    Idle,
    Probing(Probe),
    Initializing {
        id: RequestId,
        fallback: Fallback,
    },
    /// `initialize` failed with `-32022` naming a modern `version`: one strict probe with it;
    /// `error` stands if that fails too.
    Reprobing {
        id: RequestId,
        version: String,
        error: Error,
    },
    /// Connected in the handshake era; `logging/setLevel` `id` asks for the log level.
    SettingLevel {
        id: RequestId,
        result: Value,
    },
    Over,
}

/// The connection step of one server process.
#[derive(Debug)]
pub(crate) struct Handshake {
    plan: Plan,
    known: Vec<String>,
    /// The era found for the previous process: a hint.
    previous: Option<Era>,
    stage: Stage,
}

impl Handshake {
    /// The connection step under `plan`; `previous` is the era of the last process, if any
    /// (see "What is cached" on [`Client`](super::Client)).
    pub(crate) fn new(plan: Plan, previous: Option<Era>) -> Handshake {
        let known = plan.known_modern_versions();
        Handshake {
            plan,
            known,
            previous,
            stage: Stage::Idle,
        }
    }

    /// Sends the first request. The session must have just begun a new connection.
    pub(crate) fn start(&mut self, session: &mut Session, now: Instant) -> Step {
        match (self.plan.era, self.previous) {
            (Some(Era::Legacy), _) => self.initialize(session, now, Fallback::Final),
            (Some(Era::Modern), _) => self.negotiate(session, now, true),
            (None, Some(Era::Legacy)) => self.initialize(session, now, Fallback::Probe),
            (None, _) => self.negotiate(session, now, false),
        }
    }

    /// The request the step waits for, if it waits.
    pub(crate) fn awaiting(&self) -> Option<&RequestId> {
        match &self.stage {
            Stage::Probing(Probe { id, .. })
            | Stage::Initializing { id, .. }
            | Stage::Reprobing { id, .. }
            | Stage::SettingLevel { id, .. } => Some(id),
            Stage::Idle | Stage::Over => None,
        }
    }

    /// How request `id` ended: its result, the server's error object as [`Error::Rpc`],
    /// [`Error::Timeout`], or why the server can no longer answer. `None` when `id` is not
    /// the request the step waits for (the shell routes it elsewhere).
    pub(crate) fn on_outcome(
        &mut self,
        session: &mut Session,
        id: &RequestId,
        outcome: Result<Value, Error>,
        now: Instant,
    ) -> Option<Step> {
        if self.awaiting() != Some(id) {
            return None;
        }
        let step = match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Probing(probe) => self.probed(session, now, probe, outcome),
            Stage::Initializing { fallback, .. } => {
                self.initialized(session, now, outcome, fallback)
            }
            Stage::Reprobing { version, error, .. } => {
                self.reprobed(session, outcome, &version, error)
            }
            Stage::SettingLevel { result, .. } => level_set(session, outcome, result),
            Stage::Idle | Stage::Over => return None,
        };
        if !matches!(step, Step::Await(_)) {
            // Decided: a late probe answer from now on is only a late answer.
            session.forget_probe();
            session.take_late_probe();
        }
        Some(step)
    }

    /// The probe: `server/discover`, with the short discover deadline unless `strict`.
    fn negotiate(&mut self, session: &mut Session, now: Instant, strict: bool) -> Step {
        let asked = self.plan.modern_version.clone();
        self.probe(session, now, asked, false, strict)
    }

    fn probe(
        &mut self,
        session: &mut Session,
        now: Instant,
        asked: String,
        retried: bool,
        strict: bool,
    ) -> Step {
        let timeout = if strict {
            self.plan.init_timeout
        } else {
            self.plan.discover_timeout.min(self.plan.init_timeout)
        };
        let id = send_probe(session, now, &asked, timeout);
        self.stage = Stage::Probing(Probe {
            id: id.clone(),
            asked,
            retried,
            strict,
        });
        Step::Await(id)
    }

    /// The probe ended: modern, one more probe (`-32022` naming a shared version), an error
    /// (incompatible, or any failure of a strict probe), or the fallback to `initialize`.
    fn probed(
        &mut self,
        session: &mut Session,
        now: Instant,
        probe: Probe,
        outcome: Result<Value, Error>,
    ) -> Step {
        let Probe {
            id: probe,
            asked,
            retried,
            strict,
        } = probe;
        let answer = match outcome {
            Ok(result) => Some(Ok(result)),
            Err(Error::Rpc(e)) => Some(Err(e)),
            // No answer in time: keep the probe's id, so a late answer can still be used.
            Err(Error::Timeout { .. }) if !strict => None,
            Err(e) => return Step::Failed(e),
        };
        if answer.is_some() {
            session.forget_probe();
        }
        let verdict = match &answer {
            Some(answer) => era::judge_discover(answer, &asked, &self.known),
            None => Verdict::Legacy,
        };
        match (verdict, answer) {
            (Verdict::Modern { version }, Some(Ok(result))) => modern(session, version, result),
            (Verdict::Retry { version }, _) if !retried => {
                self.probe(session, now, version, true, strict)
            }
            (Verdict::Incompatible { supported }, _) => Step::Failed(Error::Protocol {
                reason: format!(
                    "the server speaks only protocol versions {supported:?}, none of which \
                     the client speaks"
                ),
                line: String::new(),
            }),
            (_, answer) if strict => Step::Failed(match answer {
                Some(Err(e)) => Error::Rpc(e),
                Some(Ok(result)) => Error::Protocol {
                    reason: String::from(
                        "the server/discover result names no protocol version the client speaks",
                    ),
                    line: excerpt_of(&result),
                },
                // A strict probe's timeout failed above.
                None => Error::Closed,
            }),
            _ => self.initialize(session, now, Fallback::LateEvidence { probe, asked }),
        }
    }

    fn initialize(&mut self, session: &mut Session, now: Instant, fallback: Fallback) -> Step {
        let params = json!({
            "protocolVersion": self.plan.legacy_version,
            "capabilities": session.capabilities(),
            "clientInfo": session.client_info(),
        });
        let id = session.start(
            "initialize",
            Some(params),
            false,
            timing(now, self.plan.init_timeout),
        );
        self.stage = Stage::Initializing {
            id: id.clone(),
            fallback,
        };
        Step::Await(id)
    }

    /// `initialize` ended: connected, or (by `fallback`) one more chance for the modern era.
    fn initialized(
        &mut self,
        session: &mut Session,
        now: Instant,
        outcome: Result<Value, Error>,
        fallback: Fallback,
    ) -> Step {
        let error = match outcome.and_then(legacy_version) {
            Ok((version, result)) => {
                session.connected(Era::Legacy, version);
                session.notify("notifications/initialized", None);
                let logging = result["capabilities"]["logging"].is_object();
                if let Some(level) = self.plan.log_level.filter(|_| logging) {
                    let params = json!({ "level": level.as_str() });
                    let timing = timing(now, self.plan.init_timeout);
                    let id = session.start("logging/setLevel", Some(params), false, timing);
                    self.stage = Stage::SettingLevel {
                        id: id.clone(),
                        result,
                    };
                    return Step::Await(id);
                }
                return Step::Connected(Connected {
                    era: Era::Legacy,
                    result,
                });
            }
            Err(e) => e,
        };
        let unsupported = match &error {
            Error::Rpc(e) if e.code == UNSUPPORTED_PROTOCOL_VERSION => Some(e.clone()),
            _ => None,
        };
        match fallback {
            Fallback::Final => Step::Failed(error),
            Fallback::Probe if unsupported.is_some() => self.negotiate(session, now, false),
            Fallback::Probe => Step::Failed(error),
            Fallback::LateEvidence { probe, asked } => {
                let late = session.take_late_probe().filter(|(id, _)| *id == probe);
                if let Some((_, Ok(late))) = late {
                    let verdict = era::judge_discover(&Ok(late.clone()), &asked, &self.known);
                    if let Verdict::Modern { version } = verdict {
                        return modern(session, version, late);
                    }
                }
                let Some(e) = unsupported else {
                    return Step::Failed(error);
                };
                // Asked about a handshake-era version, so any modern one it names is news.
                match era::judge_discover(&Err(e), "", &self.known) {
                    Verdict::Retry { version } => {
                        let id = send_probe(session, now, &version, self.plan.init_timeout);
                        self.stage = Stage::Reprobing {
                            id: id.clone(),
                            version,
                            error,
                        };
                        Step::Await(id)
                    }
                    _ => Step::Failed(error),
                }
            }
        }
    }

    /// The probe after `-32022` to `initialize` ended: modern, or `error` stands.
    fn reprobed(
        &mut self,
        session: &mut Session,
        outcome: Result<Value, Error>,
        version: &str,
        error: Error,
    ) -> Step {
        if let Ok(result) = outcome {
            let verdict = era::judge_discover(&Ok(result.clone()), version, &self.known);
            if let Verdict::Modern { version } = verdict {
                return modern(session, version, result);
            }
        }
        Step::Failed(error)
    }
}

/// The deadlines of a connection-step request: `timeout`, progress or not.
fn timing(now: Instant, timeout: Duration) -> Timing {
    Timing::new(now, timeout, Some(timeout), false)
}

/// Starts a `server/discover` asking for `version`, marked as the probe.
fn send_probe(session: &mut Session, now: Instant, version: &str, timeout: Duration) -> RequestId {
    let params = era::discover_params(version, session.capabilities(), session.client_info());
    let id = session.start("server/discover", Some(params), false, timing(now, timeout));
    session.mark_probe(&id);
    id
}

/// `logging/setLevel` ended: connected either way (logs are not worth failing the connection
/// over); a refusal is said on stderr.
fn level_set(session: &mut Session, outcome: Result<Value, Error>, result: Value) -> Step {
    if let Err(e) = outcome {
        session.report(format!(
            "the server did not take logging/setLevel ({e}): its log messages may not be \
             those asked for"
        ));
    }
    Step::Connected(Connected {
        era: Era::Legacy,
        result,
    })
}

fn modern(session: &mut Session, version: String, result: Value) -> Step {
    session.connected(Era::Modern, version);
    Step::Connected(Connected {
        era: Era::Modern,
        result,
    })
}

/// The version of an `initialize` result, when it is one the client speaks.
fn legacy_version(result: Value) -> Result<(String, Value), Error> {
    let Some(version) = result.get("protocolVersion").and_then(Value::as_str) else {
        return Err(Error::Protocol {
            reason: String::from("the initialize result has no protocolVersion"),
            line: excerpt_of(&result),
        });
    };
    if !PROTOCOL_VERSIONS.contains(&version) {
        return Err(Error::Protocol {
            reason: format!(
                "the server chose protocol version {version:?}, which the client does not support"
            ),
            line: excerpt_of(&result),
        });
    }
    Ok((version.to_owned(), result))
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
