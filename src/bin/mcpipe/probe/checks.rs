//! The probe's checks: what each one is graded by (its level and the rule it rests on), the
//! server command under test, and the helpers the checks share. Each check starts a fresh
//! server, bounds every wait, and shuts the server down (bounded) when it returns.

use std::cell::RefCell;
use std::collections::HashSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use mcpipe::{Client, ClientBuilder, Era, Error, RequestOptions, Response};
use serde_json::{json, Value};

use super::errors;
use super::tools::{self, Survey};
use super::wire;

/// How much a check weighs, after the specification's key words (RFC 2119).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// A failure breaks a MUST: the probe exits 1.
    Must,
    /// A failure misses a SHOULD: a warning (a failure under `--strict`).
    Should,
    /// A measurement or an allowed choice: at most a warning, never a failure.
    Info,
}

impl Level {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::Info => "INFO",
        }
    }
}

/// What a check found, before its level is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Pass,
    /// The server fell short; how much that weighs is the outcome's level.
    Short,
    Skip,
}

/// A check's finding with its one-line reason.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) status: Status,
    /// Overrides the check's level (a check may find a MUST and a SHOULD shortfall).
    pub(crate) level: Option<Level>,
    /// Overrides the check's rule, for the same reason.
    pub(crate) rule: Option<&'static str>,
    pub(crate) detail: String,
    /// Per-item findings for the table and the JSON report (the tools called and skipped).
    pub(crate) items: Vec<Item>,
}

/// One line under a check's row: a tool and what happened to it.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub(crate) name: String,
    /// `called`, `skipped` or `failed`.
    pub(crate) action: &'static str,
    pub(crate) detail: String,
}

impl Outcome {
    fn new(status: Status, detail: impl Into<String>) -> Outcome {
        Outcome {
            status,
            level: None,
            rule: None,
            detail: detail.into(),
            items: Vec::new(),
        }
    }

    /// Sets the level and rule this finding rests on, instead of the check's.
    pub(crate) fn by(mut self, level: Level, rule: &'static str) -> Outcome {
        self.level = Some(level);
        self.rule = Some(rule);
        self
    }
}

pub(crate) fn pass(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Pass, detail)
}

/// A shortfall at the check's own level.
pub(crate) fn short(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Short, detail)
}

/// A shortfall that breaks a MUST whatever the check's level: the server died or hung.
pub(crate) fn broken(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Short, detail).by(Level::Must, rules::ALIVE)
}

pub(crate) fn skip(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Skip, detail)
}

/// The rules the checks rest on, cited by section so a reader can look them up.
pub(crate) mod rules {
    pub(crate) const ALIVE: &str =
        "MCP basic/lifecycle: the server serves until the client ends the session";
    pub(crate) const HANDSHAKE: &str =
        "MCP basic/lifecycle: initialize MUST be answered; the version is negotiated";
    pub(crate) const STDOUT: &str =
        "MCP basic/transports (stdio): the server MUST NOT write non-MCP data to stdout";
    pub(crate) const FRAMING: &str =
        "MCP basic/transports (stdio): messages are newline-delimited JSON-RPC";
    pub(crate) const PING: &str =
        "MCP basic/utilities/ping: the receiver MUST respond promptly; JSON-RPC 2.0 §4";
    pub(crate) const PROMPT: &str =
        "MCP basic/lifecycle (Timeouts): requests are answered in reasonable time (mcpipe bound)";
    pub(crate) const PARSE_ERROR: &str =
        "JSON-RPC 2.0 §5.1 (-32700, id null); MCP stdio lets a server log and skip the line";
    pub(crate) const INVALID_REQUEST: &str =
        "JSON-RPC 2.0 §5 and §5.1 (-32600, the request's id or null)";
    pub(crate) const ERROR_ID: &str =
        "JSON-RPC 2.0 §5: the error's id is the request's, or null if it could not be read";
    pub(crate) const METHOD_NOT_FOUND: &str = "JSON-RPC 2.0 §5.1: -32601 Method not found";
    pub(crate) const UNKNOWN_TOOL: &str =
        "MCP server/tools (Error Handling): an unknown tool is a protocol error, -32602";
    pub(crate) const TOOL_ERROR: &str =
        "MCP server/tools (Error Handling): tool failures SHOULD be results with isError";
    pub(crate) const TOOL_RESULT: &str =
        "MCP server/tools: a CallToolResult has a content array (schema.ts)";
    pub(crate) const NOTIFICATION: &str =
        "JSON-RPC 2.0 §4.1: the receiver MUST NOT reply to a notification";
    pub(crate) const CAPABILITIES: &str =
        "MCP basic/lifecycle (Operation): use only negotiated capabilities; logging MUST be declared";
    pub(crate) const SERVER_REQUESTS: &str =
        "MCP basic/lifecycle (Operation): no request for a capability the client did not declare";
    pub(crate) const EOF: &str =
        "MCP basic/lifecycle (Shutdown, stdio): the server SHOULD exit when stdin closes";
    pub(crate) const SIGTERM: &str =
        "MCP basic/lifecycle (Shutdown, stdio): the client SHOULD send SIGTERM, then SIGKILL";
    pub(crate) const CANCEL: &str =
        "MCP basic/utilities/cancellation: the receiver SHOULD stop and not respond";
    pub(crate) const LARGE: &str =
        "MCP basic/transports (stdio): no message size limit (SDKs read 10 MB lines)";
    pub(crate) const MEASURE: &str = "a measurement: no rule, reported for comparison";
}

/// One check of the battery.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) about: &'static str,
    pub(crate) level: Level,
    pub(crate) rule: &'static str,
    /// Skipped when the handshake check failed (nothing else can work then).
    pub(crate) needs_handshake: bool,
    pub(crate) run: fn(&Target) -> Outcome,
}

/// Every check, in the order they run.
pub(crate) const CHECKS: &[Check] = &[
    Check {
        name: "handshake",
        about: "initialize, a supported protocol version, notifications/initialized",
        level: Level::Must,
        rule: rules::HANDSHAKE,
        needs_handshake: false,
        run: wire::handshake,
    },
    Check {
        name: "stdout-clean",
        about: "nothing but JSON-RPC messages on stdout (no banners, no logs)",
        level: Level::Must,
        rule: rules::STDOUT,
        needs_handshake: true,
        run: wire::stdout_clean,
    },
    Check {
        name: "init-burst",
        about: "initialize, initialized and tools/list in one write: answered within 1 s",
        level: Level::Should,
        rule: rules::PROMPT,
        needs_handshake: true,
        run: wire::init_burst,
    },
    Check {
        name: "ping-burst",
        about: "1,000 pings in one write: each answered exactly once",
        level: Level::Must,
        rule: rules::PING,
        needs_handshake: true,
        run: wire::ping_burst,
    },
    Check {
        name: "split-message",
        about: "a request arriving in many small writes is answered",
        level: Level::Must,
        rule: rules::FRAMING,
        needs_handshake: true,
        run: wire::split_message,
    },
    Check {
        name: "malformed-json",
        about: "a line that is not JSON: -32700 or skipped (both allowed); dying fails",
        level: Level::Should,
        rule: rules::PARSE_ERROR,
        needs_handshake: true,
        run: errors::malformed_json,
    },
    Check {
        name: "invalid-request",
        about: "valid JSON that is not a request: -32600 (id null allowed); dying fails",
        level: Level::Should,
        rule: rules::INVALID_REQUEST,
        needs_handshake: true,
        run: errors::invalid_request,
    },
    Check {
        name: "unknown-method",
        about: "an unknown method gets -32601",
        level: Level::Must,
        rule: rules::METHOD_NOT_FOUND,
        needs_handshake: true,
        run: errors::unknown_method,
    },
    Check {
        name: "unknown-tool",
        about: "tools/call of a tool that does not exist gets -32602 (or an isError result)",
        level: Level::Should,
        rule: rules::UNKNOWN_TOOL,
        needs_handshake: true,
        run: tools::unknown_tool,
    },
    Check {
        name: "tools",
        about: "read-only tools (readOnlyHint, not destructive) and --call tools answer",
        level: Level::Must,
        rule: rules::TOOL_RESULT,
        needs_handshake: true,
        run: tools::tools,
    },
    Check {
        name: "tool-error",
        about: "a safe tool given bad arguments answers with isError; the server survives",
        level: Level::Should,
        rule: rules::TOOL_ERROR,
        needs_handshake: true,
        run: tools::tool_error,
    },
    Check {
        name: "notifications",
        about: "notifications (unknown, cancel of an unknown id, stray progress) get no response",
        level: Level::Must,
        rule: rules::NOTIFICATION,
        needs_handshake: true,
        run: errors::notifications,
    },
    Check {
        name: "capabilities",
        about: "no log, list_changed or request the session did not negotiate",
        level: Level::Must,
        rule: rules::CAPABILITIES,
        needs_handshake: true,
        run: errors::capabilities,
    },
    Check {
        name: "eof-exit",
        about: "the server exits within 1 s of stdin closing",
        level: Level::Should,
        rule: rules::EOF,
        needs_handshake: true,
        run: wire::eof_exit,
    },
    Check {
        name: "sigterm-exit",
        about: "the server exits within 1 s of SIGTERM",
        level: Level::Should,
        rule: rules::SIGTERM,
        needs_handshake: true,
        run: wire::sigterm_exit,
    },
    Check {
        name: "cancellation",
        about: "a cancelled slow read-only tool stops: no late answer, no more progress",
        level: Level::Should,
        rule: rules::CANCEL,
        needs_handshake: true,
        run: tools::cancellation,
    },
    Check {
        name: "large-message",
        about: "a 1 MiB request is answered (echoed when the server has a read-only `echo`)",
        level: Level::Should,
        rule: rules::LARGE,
        needs_handshake: true,
        run: wire::large_message,
    },
    Check {
        name: "latency",
        about: "ping round-trip latency over 200 sequential pings (p50/p99)",
        level: Level::Info,
        rule: rules::MEASURE,
        needs_handshake: true,
        run: wire::latency,
    },
    Check {
        name: "throughput",
        about: "pings answered per second, 10,000 pipelined",
        level: Level::Info,
        rule: rules::MEASURE,
        needs_handshake: true,
        run: wire::throughput,
    },
];

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
        self.builder()
            .spawn()
            .map_err(|e| broken(format!("could not connect: {e}")))
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

pub(crate) fn raw_request(id: &str, method: &str, params: Value) -> Vec<u8> {
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    line.into_bytes()
}

/// Whether the server still answers a ping; a MUST failure when it does not.
pub(crate) fn survives(client: &mut Client, target: &Target, after: &str) -> Result<(), Outcome> {
    match client.request(
        "ping",
        None,
        RequestOptions::new().timeout(target.t(Duration::from_secs(2))),
    ) {
        Ok(_) => Ok(()),
        // Any answer means the server is alive.
        Err(Error::Rpc(_)) => Ok(()),
        Err(e) => Err(broken(format!("the server did not survive {after}: {e}"))),
    }
}
