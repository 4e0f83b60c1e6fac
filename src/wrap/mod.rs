//! [`Wrapper`]: any stdio MCP server behind mcpipe's own loop, so that it behaves.
//!
//! The client talks to the loop ([`Server`] with the [`relay`] handler): bad input is answered
//! there (malformed JSON, invalid requests, oversize lines, batches the negotiated revision
//! forbids) and never reaches the server; everything else is relayed unchanged, ids included
//! (but for ids in the wrapper's own namespace: [`ids`]).
//! The wrapped server runs under a supervisor ([`child`]): its stdout is read line by line
//! (only JSON-RPC messages reach the client, anything else goes to stderr under the server's
//! name), its stderr is forwarded without ever blocking it, lines reach its stdin one at a time
//! (paced: the next only once it took the last out of the pipe), a crash answers every request
//! it was sent with an error and restarts it with the client's own handshake (the requests not
//! yet sent go to the restarted server: [`restart`]), and the end leaves no process of its tree
//! behind.

mod child;
mod from_server;
mod ids;
mod pacing;
mod relay;
mod restart;
mod shared;
mod signals;
mod to_server;

use std::ffi::OsString;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Outcome};
use crate::server::Server;
use crate::subreaper::{self, Subreaper};

/// How many of the client's requests may wait for the server's answers at once. The server's
/// pipes hold more small requests than the loop's default bound (256), and at that bound a
/// pipelining client's requests wait in the loop's read-ahead instead: 44 MiB, and half the
/// throughput of the server alone, where this bound gives 8 MiB and 0.6× (BENCHMARKS.md).
/// What bounds memory in front of a server that reads slowly is the bytes waiting for its
/// stdin (`shared::HOLD_BYTES`), not this count.
const IN_FLIGHT: usize = 4096;

/// How much the loop reads ahead while it starts nothing (the client's input held, or
/// [`IN_FLIGHT`] requests waiting): a relay needs to see cancellations early, not to buffer a
/// flood.
const READ_AHEAD_BYTES: usize = 4 << 20;

/// How long a restarted server may take to answer the replayed `initialize` by default
/// ([`Wrapper::replay_timeout`]).
const REPLAY_TIMEOUT: Duration = Duration::from_secs(10);

/// How a wrap ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WrapOutcome {
    /// The client closed its input (or went away); the server was stopped. Its last exit
    /// status, when it was seen.
    Finished(Option<ExitStatus>),
    /// The server exited more often than the restart budget allows (or could not be started);
    /// requests were answered with errors until the client closed its input.
    GaveUp {
        /// Times it was started in all.
        starts: u32,
    },
    /// SIGTERM, SIGINT or SIGHUP (the number) ended the wrap; the server was stopped.
    Signal(i32),
}

impl WrapOutcome {
    /// The exit status a wrapper process should end with: 0 when the client finished, 3 when
    /// the server could not be kept running, 128 + N after signal N.
    pub fn exit_code(&self) -> u8 {
        match self {
            WrapOutcome::Finished(_) => 0,
            WrapOutcome::GaveUp { .. } => 3,
            WrapOutcome::Signal(n) => u8::try_from(128 + n).unwrap_or(255),
        }
    }
}

/// Runs a stdio MCP server that was not written with this crate behind mcpipe's loop, on this
/// process's stdin and stdout (`mcpipe wrap -- CMD ARGS`).
///
/// # Example
/// ```no_run
/// use std::time::Duration;
/// let outcome = mcpipe::Wrapper::new("npx", ["-y", "@modelcontextprotocol/server-everything"])
///     .request_timeout(Some(Duration::from_secs(120)))
///     .run()?;
/// std::process::exit(i32::from(outcome.exit_code()));
/// # Ok::<(), mcpipe::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Wrapper {
    program: OsString,
    args: Vec<OsString>,
    name: String,
    pacing: bool,
    request_timeout: Option<Duration>,
    replay_timeout: Duration,
    max_restarts: u32,
    restart_window: Duration,
    grace: Duration,
}

impl Wrapper {
    /// Wraps `program` with `args`. Defaults: pacing on, no request timeout, 10 s for a restarted
    /// server to answer the replayed `initialize`, at most 5 restarts within 60 s, 2 s between
    /// closing the server's stdin and SIGTERM at the end.
    pub fn new<I, S>(program: impl Into<OsString>, args: I) -> Wrapper
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let program = program.into();
        let name = std::path::Path::new(&program)
            .file_name()
            .map_or_else(|| "server".to_owned(), |n| n.to_string_lossy().into_owned());
        Wrapper {
            program,
            args: args.into_iter().map(Into::into).collect(),
            name,
            pacing: true,
            request_timeout: None,
            replay_timeout: REPLAY_TIMEOUT,
            max_restarts: 5,
            restart_window: Duration::from_secs(60),
            grace: Duration::from_secs(2),
        }
    }

    /// The name that prefixes the server's stderr lines and its stray stdout lines (the
    /// program's file name by default).
    pub fn name(mut self, name: impl Into<String>) -> Wrapper {
        self.name = name.into();
        self
    }

    /// Whether lines reach a new server one at a time, the next only once the server took the
    /// last out of its stdin pipe, until a probe (two requests in one write, both answered)
    /// shows it handles lines that arrive together (on by default). Pacing is what keeps a
    /// server whose buffered reader over-reads from sleeping on a request it already holds;
    /// once the probe passed it costs nothing (BENCHMARKS.md).
    pub fn pacing(mut self, on: bool) -> Wrapper {
        self.pacing = on;
        self
    }

    /// A deadline for every request: an overdue one is answered with an error and the server
    /// gets `notifications/cancelled` for it, or, when its line still waited for the server's
    /// stdin, it is taken out of the queue (the server never gets it). None by default.
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Wrapper {
        self.request_timeout = timeout;
        self
    }

    /// How long a restarted server may take to answer the replayed `initialize` (10 s by
    /// default). Nothing else is written to it meanwhile, so past that it counts as failed: it
    /// is ended (a line on stderr says so) and restarted, within the restart budget. Give a
    /// server that is slow to start (one that loads or indexes much at start-up) more; the
    /// request timeout does not apply here, as a start is not a request of the client's.
    pub fn replay_timeout(mut self, timeout: Duration) -> Wrapper {
        self.replay_timeout = timeout;
        self
    }

    /// How many restarts after crashes are allowed within `window` before the wrapper gives up
    /// (then every request is answered with an error until the client closes its input). The
    /// pause before a restart starts at 100 ms and doubles up to 5 s; a server that ran for a
    /// whole `window` is restarted after 100 ms again.
    pub fn restarts(mut self, max: u32, window: Duration) -> Wrapper {
        self.max_restarts = max;
        self.restart_window = window;
        self
    }

    /// How long the server gets to exit after its stdin is closed at the end, before SIGTERM
    /// (SIGKILL follows one second later). A signal to the wrapper shortens all of it, so
    /// that the wrapper ends within a second.
    pub fn shutdown_grace(mut self, grace: Duration) -> Wrapper {
        self.grace = grace;
        self
    }

    /// Starts the server at once (not at the client's first message), serves stdin and stdout
    /// until the client closes its input or a signal arrives, then stops the server and every
    /// process it started.
    ///
    /// On Linux the wrapper becomes a child subreaper, so descendants that leave the server's
    /// process group or session are found and ended too. Elsewhere (macOS) the server's
    /// process group is ended, and a descendant that called `setsid` is not found.
    ///
    /// # Errors
    /// As [`Server::serve_stdio`] (an output that refuses writes among them), once the server
    /// and its processes are stopped.
    pub fn run(&self) -> Result<WrapOutcome, Error> {
        // Unsupported outside Linux: documented above.
        let _ = Subreaper::new();
        let shared = Arc::new(shared::Shared::new(self.clone()));
        // Before the loop's own, so that no signal finds the default action between the two.
        let mut late = signals::LateSignals::new();
        let mut relay = relay::Relay::new(Arc::clone(&shared));
        let served = Server::new()
            .max_in_flight(IN_FLIGHT)
            .max_read_ahead_bytes(READ_AHEAD_BYTES)
            .relay_lines(relay::needs_params)
            .shutdown_grace(self.request_timeout.unwrap_or(Duration::from_secs(10)))
            .serve_stdio(&mut relay);
        // The server is stopped whatever ended the loop: an error (an output that refuses
        // writes) ends it as quickly as a vanished client does.
        let ended = served.as_ref().map_or(Outcome::PeerGone, Clone::clone);
        let signal = relay.finish(&ended, late.as_mut());
        // The wrapper is a subreaper on Linux, so orphans of the server's tree are its
        // children now.
        subreaper::end_descendants(Duration::ZERO);
        drop(late);
        let outcome = served?;
        Ok(match (outcome, signal) {
            (Outcome::Signal(n), _) | (_, Some(n)) => WrapOutcome::Signal(n),
            _ if shared.gave_up() => WrapOutcome::GaveUp {
                starts: shared.starts(),
            },
            _ => WrapOutcome::Finished(shared.last_exit()),
        })
    }
}
