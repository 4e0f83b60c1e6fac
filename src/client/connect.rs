//! The connection step's shell: runs the sans-IO [`Handshake`] (which decides the era and
//! makes the handshake) on the client's one waiting loop. The same code connects the
//! one-thread [`Client`] and, on its IO thread, the [`SharedClient`](super::SharedClient).

use std::time::Instant;

use serde_json::Value;

use super::era::Era;
use super::handshake::{Handshake, Plan, Step};
use super::Client;
use crate::error::Error;

impl Client {
    /// Decides the era of a freshly started server and performs its handshake. The era found
    /// for the previous process, if any, is a hint (see "What is cached" on [`Client`]).
    pub(super) fn connect(&mut self) -> Result<(), Error> {
        let previous = self.session.new_connection();
        self.initialize_result = Value::Null;
        self.discover_result = Value::Null;
        let plan = Plan {
            era: self.settings.era,
            legacy_version: self.settings.protocol_version.clone(),
            modern_version: self.settings.modern_version.clone(),
            discover_timeout: self.settings.discover_timeout,
            init_timeout: self.settings.init_timeout,
            log_level: self.settings.log_level,
        };
        let mut handshake = Handshake::new(plan, previous);
        let started = Instant::now();
        let mut step = handshake.start(&mut self.session, started);
        loop {
            match step {
                Step::Await(id) => {
                    self.flush_outbox();
                    let outcome = self.await_outcome(&id, None);
                    step = handshake
                        .on_outcome(&mut self.session, &id, outcome, Instant::now())
                        .unwrap_or(Step::Failed(Error::Closed));
                }
                Step::Connected(connected) => {
                    match connected.era {
                        Era::Legacy => self.initialize_result = connected.result,
                        Era::Modern => self.discover_result = connected.result,
                    }
                    // The handshake era's `notifications/initialized`, when queued.
                    self.check_usable()?;
                    self.flush_outbox();
                    return Ok(());
                }
                Step::Failed(error) => return Err(self.with_stderr_tail(error, started)),
            }
        }
    }

    /// A connection step that timed out carries what the server wrote on stderr meanwhile (a
    /// server that says "missing API key" and waits): the client shuts it down next, so
    /// nobody could ask for it later. Its `elapsed` is the whole step since `started` (a
    /// `server/discover` probe waited for before `initialize`), which is what the caller
    /// waited. Other failures are returned as they are.
    fn with_stderr_tail(&mut self, error: Error, started: Instant) -> Error {
        let method = match error {
            Error::Timeout {
                method,
                stderr_tail: None,
                ..
            } => method,
            other => return other,
        };
        let elapsed = started.elapsed();
        let Client {
            process, on_stderr, ..
        } = self;
        let stderr_tail = process.as_mut().map(|process| {
            // What came since the last read, its readiness event not collected yet.
            process.assume_readable();
            process.read_available(&mut |line: &[u8]| {
                if let Some(callback) = on_stderr {
                    callback(line);
                }
            });
            process.stderr_tail()
        });
        Error::Timeout {
            method,
            elapsed,
            stderr_tail: Some(stderr_tail.unwrap_or_default()),
        }
    }
}
