//! The connection step: which era a freshly started server speaks (the `server/discover`
//! probe, the fallback to `initialize`), and its handshake. The decisions themselves are
//! plain data in `era.rs`; this is their sequence.

use std::time::Duration;

use serde_json::{json, Value};

use super::era::{self, Era, Verdict};
use super::exchange::excerpt_of;
use super::options::RequestOptions;
use super::Client;
use crate::error::Error;
use crate::message::ErrorObject;
use crate::protocol::{MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION};

impl Client {
    /// Decides the era of a freshly started server and performs its handshake. The era found
    /// for the previous process, if any, is a hint (see "What is cached" on [`Client`]).
    pub(super) fn connect(&mut self) -> Result<(), Error> {
        let previous = self.session.new_connection();
        self.initialize_result = Value::Null;
        self.discover_result = Value::Null;
        match (self.settings.era, previous) {
            (Some(Era::Legacy), _) => self.handshake(),
            (Some(Era::Modern), _) => self.negotiate(true),
            (None, Some(Era::Legacy)) => match self.handshake() {
                Err(Error::Rpc(e)) if e.code == UNSUPPORTED_PROTOCOL_VERSION => {
                    self.negotiate(false)
                }
                other => other,
            },
            (None, _) => self.negotiate(false),
        }
    }

    /// The modern versions the client accepts, most preferred first.
    fn known_modern_versions(&self) -> Vec<String> {
        let mut known = vec![self.settings.modern_version.clone()];
        // Newest first: the crate's list is oldest first.
        for v in MODERN_PROTOCOL_VERSIONS.iter().rev() {
            if !known.iter().any(|k| k == v) {
                known.push((*v).to_owned());
            }
        }
        known
    }

    /// Probes with `server/discover` and becomes modern, or (unless `strict`) falls back to
    /// `initialize`. A `-32022` naming a common version earns one more probe with it.
    fn negotiate(&mut self, strict: bool) -> Result<(), Error> {
        let known = self.known_modern_versions();
        let timeout = if strict {
            self.settings.init_timeout
        } else {
            self.settings
                .discover_timeout
                .min(self.settings.init_timeout)
        };
        let mut asked = self.settings.modern_version.clone();
        for attempt in 0..2 {
            let answer = self.probe(&asked, timeout, strict)?;
            let verdict = match &answer {
                Some(answer) => era::judge_discover(answer, &asked, &known),
                None => Verdict::Legacy,
            };
            match (verdict, answer) {
                (Verdict::Modern { version }, Some(Ok(result))) => {
                    self.adopt_modern(version, result);
                    return Ok(());
                }
                (Verdict::Retry { version }, _) if attempt == 0 => asked = version,
                (Verdict::Incompatible { supported }, _) => {
                    return Err(Error::Protocol {
                        reason: format!(
                            "the server speaks only protocol versions {supported:?}, none of \
                             which the client speaks"
                        ),
                        line: String::new(),
                    })
                }
                (_, answer) if strict => {
                    return Err(match answer {
                        Some(Err(e)) => Error::Rpc(e),
                        Some(Ok(result)) => Error::Protocol {
                            reason: String::from(
                                "the server/discover result names no protocol version the \
                                 client speaks",
                            ),
                            line: excerpt_of(&result),
                        },
                        // A strict probe's timeout is returned by `probe` itself.
                        None => Error::Closed,
                    });
                }
                _ => return self.fall_back(&asked, &known),
            }
        }
        Err(Error::Protocol {
            reason: String::from(
                "the server rejected the protocol version it had itself named in -32022",
            ),
            line: String::new(),
        })
    }

    /// Sends one `server/discover` asking for `version`. `Ok(None)`: no answer in time (only
    /// when not `strict`; the probe's id is kept so a late answer can still be used).
    fn probe(
        &mut self,
        version: &str,
        timeout: Duration,
        strict: bool,
    ) -> Result<Option<Result<Value, ErrorObject>>, Error> {
        let params = era::discover_params(
            version,
            self.session.capabilities(),
            self.session.client_info(),
        );
        let mut options = RequestOptions::new()
            .timeout(timeout)
            .max_total(timeout)
            .reset_on_progress(false);
        let answer = self.request_once("server/discover", Some(params), &mut options, true);
        match answer {
            Ok(result) => {
                self.session.forget_probe();
                Ok(Some(Ok(result)))
            }
            Err(Error::Rpc(e)) => {
                self.session.forget_probe();
                Ok(Some(Err(e)))
            }
            Err(Error::Timeout { .. }) if !strict => Ok(None),
            Err(e) => {
                self.session.forget_probe();
                Err(e)
            }
        }
    }

    /// The probe said legacy: `initialize`. If that fails, modern evidence that came too late
    /// for the probe still counts: the probe's late answer, or `-32022` to `initialize`.
    fn fall_back(&mut self, asked: &str, known: &[String]) -> Result<(), Error> {
        let error = match self.handshake() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if let Some(Ok(late)) = self.session.take_late_probe() {
            let verdict = era::judge_discover(&Ok(late.clone()), asked, known);
            if let Verdict::Modern { version } = verdict {
                self.adopt_modern(version, late);
                return Ok(());
            }
        }
        if let Error::Rpc(e) = &error {
            if e.code == UNSUPPORTED_PROTOCOL_VERSION {
                // Asked about a handshake-era version, so any modern one it names is news.
                let verdict = era::judge_discover(&Err(e.clone()), "", known);
                if let Verdict::Retry { version } = verdict {
                    let timeout = self.settings.init_timeout;
                    if let Ok(Some(Ok(result))) = self.probe(&version, timeout, true) {
                        if let Verdict::Modern { version } =
                            era::judge_discover(&Ok(result.clone()), &version, known)
                        {
                            self.adopt_modern(version, result);
                            return Ok(());
                        }
                    }
                }
            }
        }
        Err(error)
    }

    fn adopt_modern(&mut self, version: String, discover_result: Value) {
        self.session.connected(Era::Modern, version);
        self.discover_result = discover_result;
    }

    fn handshake(&mut self) -> Result<(), Error> {
        let params = json!({
            "protocolVersion": self.settings.protocol_version,
            "capabilities": self.session.capabilities(),
            "clientInfo": self.session.client_info(),
        });
        let timeout = self.settings.init_timeout;
        let mut options = RequestOptions::new()
            .timeout(timeout)
            .max_total(timeout)
            .reset_on_progress(false);
        let result = self.request_once("initialize", Some(params), &mut options, false)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Protocol {
                reason: String::from("the initialize result has no protocolVersion"),
                line: excerpt_of(&result),
            })?;
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(Error::Protocol {
                reason: format!(
                    "the server chose protocol version {version:?}, which the client does not support"
                ),
                line: excerpt_of(&result),
            });
        }
        self.session.connected(Era::Legacy, version.to_owned());
        self.initialize_result = result;
        self.notify("notifications/initialized", None)
    }
}
