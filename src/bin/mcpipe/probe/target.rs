//! The server command under test, what the user said about it, and the helpers every check
//! uses to start, watch and talk to it.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use mcpipe::{Client, ClientBuilder, Era, Error, RequestOptions, Response};
use serde_json::{json, Value};

use super::format::ms;
use super::grading::{
    broken, connect_failure, rules, short, unread_note, unread_since, Level, Outcome,
};
use super::survey::Survey;

/// A tool the user asked to call (`--call NAME --args JSON`), whatever its annotations.
#[derive(Debug, Clone)]
pub(crate) struct NamedCall {
    pub(crate) name: String,
    pub(crate) arguments: Value,
}

/// The server command under test and what the user said about it.
#[derive(Debug)]
pub(crate) struct Target {
    command: Vec<OsString>,
    /// How to show the command, when not as itself: the default `mcpipe demo` is shown so,
    /// not as the path of this build.
    pub(crate) label: Option<String>,
    /// Every deadline is multiplied by this (`--time-scale`), for slow runners.
    pub(crate) scale: f64,
    /// Tools the user named with `--call`.
    pub(crate) calls: Vec<NamedCall>,
    /// The tool the user named with `--cancel` for the cancellation check.
    pub(crate) cancel: Option<NamedCall>,
    /// What calling the safe tools showed, made once by the first check that needs it.
    pub(crate) survey: RefCell<Option<Survey>>,
}

impl Target {
    pub(crate) fn new(command: Vec<OsString>) -> Target {
        Target {
            command,
            label: None,
            scale: 1.0,
            calls: Vec::new(),
            cancel: None,
            survey: RefCell::new(None),
        }
    }

    pub(crate) fn command(&self) -> &[OsString] {
        &self.command
    }

    /// The command line as the report shows it: shell-quoted, or the label.
    pub(crate) fn display(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| super::format::shell_quote(&self.command))
    }

    /// A deadline scaled by `--time-scale`.
    pub(crate) fn t(&self, d: Duration) -> Duration {
        d.mul_f64(self.scale)
    }

    /// A builder with the probe's deadlines: every wait is bounded, and closing takes at most
    /// about 2 s (scaled). The checks are about the handshake era (`initialize`, `ping`), so
    /// the client skips the `server/discover` probe and its timeout.
    pub(crate) fn builder(&self) -> ClientBuilder {
        Client::builder(&self.command[0])
            .args(&self.command[1..])
            .era(Era::Legacy)
            .client_info("mcpipe-probe", env!("CARGO_PKG_VERSION"))
            .init_timeout(self.t(Duration::from_secs(5)))
            .timeout(self.t(Duration::from_secs(5)))
            .max_total(self.t(Duration::from_secs(30)))
            .close_timeouts(
                self.t(Duration::from_secs(1)),
                self.t(Duration::from_secs(1)),
            )
            .log_bad_lines(false)
    }

    /// A fresh server, after the handshake.
    pub(crate) fn connect(&self) -> Result<Client, Outcome> {
        self.builder().spawn().map_err(|e| connect_failure(&e))
    }
}

/// Waits for responses to the given ids among the stray responses, until all arrived or the
/// deadline passed. Returns the responses that arrived, by id, and how many arrived twice.
pub(crate) fn collect(
    client: &mut Client,
    ids: &HashSet<String>,
    deadline: Instant,
) -> Result<(Vec<Response>, usize), Error> {
    let mut got = Vec::new();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    while seen.len() < ids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some(response) = client.next_stray_response(left)? else {
            break;
        };
        let Some(id) = response.id.as_ref().and_then(|id| id.as_str()) else {
            continue;
        };
        if !ids.contains(id) {
            continue;
        }
        if !seen.insert(id.to_owned()) {
            duplicates += 1;
            continue;
        }
        got.push(response);
    }
    Ok((got, duplicates))
}

/// An `initialize` request as a raw line, as the probe's client would send it.
pub(crate) fn raw_initialize(id: &str) -> Vec<u8> {
    raw_request(
        id,
        "initialize",
        json!({
            "protocolVersion": mcpipe::LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcpipe-probe", "version": env!("CARGO_PKG_VERSION")},
        }),
    )
}

pub(crate) fn raw_request(id: &str, method: &str, params: Value) -> Vec<u8> {
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    line.into_bytes()
}

/// Whether the server still answers a ping; a MUST failure when it does not: of the liveness
/// rule when it died, of ping's when it is silent.
pub(crate) fn survives(client: &mut Client, target: &Target, after: &str) -> Result<(), Outcome> {
    let mark = client.stats().bad_lines;
    match client.request(
        "ping",
        None,
        RequestOptions::new().timeout(target.t(Duration::from_secs(2))),
    ) {
        Ok(_) => Ok(()),
        // Any answer means the server is alive.
        Err(Error::Rpc(_)) => Ok(()),
        Err(Error::Timeout { elapsed, .. }) => Err(short(format!(
            "no answer to ping within {} after {after}{}",
            ms(elapsed),
            unread_note(unread_since(client, mark))
        ))
        .by(Level::Must, rules::PING)),
        Err(e) => Err(broken(format!("the server did not survive {after}: {e}"))),
    }
}
