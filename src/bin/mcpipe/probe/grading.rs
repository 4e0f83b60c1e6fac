//! How a check is graded: its level (after RFC 2119's key words), its outcome, the rules the
//! checks rest on, what a failed request shows (a dead server, a silent one, an answer of the
//! wrong shape), and what the capability discipline forbids.

use mcpipe::{Client, Error, Notification};
use serde_json::Value;

use super::format::ms;

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
    /// Overrides the check's rule, for the same reason (several rules, when the check found
    /// shortfalls of several).
    pub(crate) rule: Option<String>,
    pub(crate) detail: String,
    /// Per-item findings for the table and the JSON report (the tools called and skipped).
    pub(crate) items: Vec<Item>,
    /// Why the checks that need the handshake cannot run, when this finding says so more
    /// precisely than "the handshake failed" (a server of another era).
    pub(crate) skip_rest: Option<String>,
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
            skip_rest: None,
        }
    }

    /// Says why the checks that need the handshake are skipped after this one.
    pub(crate) fn skipping_the_rest(mut self, why: impl Into<String>) -> Outcome {
        self.skip_rest = Some(why.into());
        self
    }

    /// Sets the level and rule this finding rests on, instead of the check's.
    pub(crate) fn by(mut self, level: Level, rule: impl Into<String>) -> Outcome {
        self.level = Some(level);
        self.rule = Some(rule.into());
        self
    }

    /// Adds that `n` processes the check's servers started outlived them (the probe ended
    /// them): a SHOULD shortfall, or a note on a shortfall the check found already.
    pub(crate) fn left_behind(mut self, n: usize) -> Outcome {
        let what = match n {
            1 => String::from("1 process outlived the server (ended by the probe)"),
            n => format!("{n} processes outlived the server (ended by the probe)"),
        };
        if self.status == Status::Short {
            self.detail = format!("{}; {what}", self.detail);
            return self;
        }
        Outcome::new(Status::Short, format!("{what}; {}", self.detail))
            .by(Level::Should, rules::LEFT_BEHIND)
    }
}

pub(crate) fn pass(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Pass, detail)
}

/// A shortfall at the check's own level.
pub(crate) fn short(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Short, detail)
}

/// A shortfall that breaks a MUST whatever the check's level: the server died or closed its
/// end. Only for that: a server that is alive but silent, or answers wrongly, breaks another
/// rule ([`failure`]).
pub(crate) fn broken(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Short, detail).by(Level::Must, rules::ALIVE)
}

/// A request that got no usable answer, as a MUST finding with the rule it breaks.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) detail: String,
    pub(crate) rule: String,
}

impl Failure {
    pub(crate) fn outcome(self) -> Outcome {
        short(self.detail).by(Level::Must, self.rule)
    }

    /// The finding of a check's helper that fell short ([`connect_failure`], `survives`).
    pub(crate) fn of(outcome: Outcome) -> Failure {
        Failure {
            detail: outcome.detail,
            rule: outcome.rule.unwrap_or_else(|| rules::ALIVE.to_owned()),
        }
    }
}

/// What `error`, the end of a `method` request, shows about the server, so that the finding
/// cites the rule it broke: the liveness rule only when the server died or closed its end; no
/// answer in time breaks JSON-RPC's "a request gets a response" (ping's own rule for a ping);
/// an answer the client could not read is not an MCP message on stdout; a result of the wrong
/// shape breaks the method's schema. `unread`: the lines the client could not read while it
/// waited ([`unread_since`]), noted on a timeout, since the answer may be among them.
pub(crate) fn failure(method: &str, error: &Error, unread: u64) -> Failure {
    let (detail, rule) = match error {
        Error::RetriesExhausted { last, .. } => return failure(method, last, unread),
        Error::Timeout { elapsed, .. } => (
            format!(
                "no answer to {method} within {}{}",
                ms(*elapsed),
                unread_note(unread)
            ),
            if method == "ping" {
                rules::PING
            } else {
                rules::ANSWER
            },
        ),
        Error::Protocol { .. } if error.unreadable_answer().is_some() => (
            format!(
                "{method} answered, but the answer could not be read: {}",
                error.unreadable_answer().unwrap_or_default()
            ),
            rules::STDOUT,
        ),
        Error::Protocol { reason, line } if line.is_empty() => {
            (reason.clone(), result_rule(method))
        }
        Error::Protocol { reason, line } => (format!("{reason}: {line}"), result_rule(method)),
        Error::Rpc(e) => (
            format!("{method} answered with error {}: {}", e.code, e.message),
            result_rule(method),
        ),
        other => (format!("{method} failed: {other}"), rules::ALIVE),
    };
    Failure {
        detail,
        rule: rule.to_owned(),
    }
}

/// The lines `client` could not read (not JSON-RPC messages) since it had counted `mark`
/// (its `bad_lines` before a wait).
pub(crate) fn unread_since(client: &Client, mark: u64) -> u64 {
    client.stats().bad_lines.saturating_sub(mark)
}

/// " (N lines could not be read)", or nothing for none: added to a finding that waited in vain,
/// so the author sees why (a log line on stdout, a pretty-printed answer).
pub(crate) fn unread_note(unread: u64) -> String {
    match unread {
        0 => String::new(),
        1 => String::from(" (1 line could not be read)"),
        n => format!(" ({n} lines could not be read)"),
    }
}

/// The rule a malformed answer to `method` breaks.
fn result_rule(method: &str) -> &'static str {
    match method {
        "tools/list" => rules::TOOLS_LIST,
        "initialize" => rules::HANDSHAKE,
        _ => rules::RESULT,
    }
}

/// A fresh server that could not be connected to: it died (liveness), or `initialize` was
/// not answered or answered wrongly (the handshake's rule).
pub(crate) fn connect_failure(error: &Error) -> Outcome {
    let rule = match error {
        Error::Timeout { .. } | Error::Rpc(_) | Error::Protocol { .. } => rules::HANDSHAKE,
        _ => rules::ALIVE,
    };
    short(format!("could not connect: {error}")).by(Level::Must, rule)
}

pub(crate) fn skip(detail: impl Into<String>) -> Outcome {
    Outcome::new(Status::Skip, detail)
}

/// The rules the checks rest on, cited by section so a reader can look them up.
pub(crate) mod rules {
    pub(crate) const ALIVE: &str =
        "MCP basic/lifecycle: the server serves until the client ends the session";
    pub(crate) const ANSWER: &str =
        "JSON-RPC 2.0 §4: the server MUST reply to every request (not a notification)";
    pub(crate) const RESULT: &str = "MCP schema.ts: a result has the shape its method defines";
    pub(crate) const TOOLS_LIST: &str =
        "MCP server/tools: a tools/list result has a tools array (ListToolsResult, schema.ts) and its nextCursor leads to a last page";
    pub(crate) const OTHER_ERA: &str =
        "MCP 2026-07-28 (basic/versioning): a server may speak only the stateless revisions, which have no initialize; mcpipe probe checks the handshake era (2024-11-05 to 2025-11-25)";
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
    pub(crate) const TOOL_NAME: &str =
        "MCP server/tools: every tool has a name, a non-empty string (Tool.name, required in schema.ts)";
    pub(crate) const TOOL_NAME_ADVICE: &str =
        "MCP server/tools (Tool names, 2025-11-25): a name SHOULD be 1 to 128 characters of A-Za-z0-9_-. and unique within the server";
    pub(crate) const INPUT_SCHEMA: &str =
        "MCP server/tools: inputSchema is a JSON Schema object with \"type\": \"object\" (Tool.inputSchema, required in schema.ts)";
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
    pub(crate) const LEFT_BEHIND: &str =
        "MCP basic/lifecycle (Shutdown, stdio): the session ends with the server process; nothing it started should outlive it";
    pub(crate) const SIGTERM: &str =
        "MCP basic/lifecycle (Shutdown, stdio): the client SHOULD send SIGTERM, then SIGKILL";
    pub(crate) const TASKS: &str =
        "MCP 2025-11-25 basic/utilities/tasks: an advertised task runs to a result, reports a known status, and can be cancelled";
    pub(crate) const CANCEL: &str =
        "MCP basic/utilities/cancellation: the receiver SHOULD stop and not respond";
    pub(crate) const LARGE: &str =
        "MCP basic/transports (stdio): no message size limit (SDKs read 10 MB lines)";
    pub(crate) const MEASURE: &str = "a measurement: no rule, reported for comparison";
}

/// What in `notifications` the server had no right to send, given the capabilities it
/// declared. The probe never sends a progress token outside a call, never subscribes, and
/// never sets a log level.
pub(crate) fn undeclared(capabilities: &Value, notifications: &[Notification]) -> Vec<String> {
    let mut found = Vec::new();
    for n in notifications {
        let needs: Option<(&str, bool)> = match n.method.as_str() {
            "notifications/message" => Some(("logging", capabilities.get("logging").is_some())),
            "notifications/tools/list_changed" => Some((
                "tools.listChanged",
                capabilities["tools"]["listChanged"] == true,
            )),
            "notifications/prompts/list_changed" => Some((
                "prompts.listChanged",
                capabilities["prompts"]["listChanged"] == true,
            )),
            "notifications/resources/list_changed" => Some((
                "resources.listChanged",
                capabilities["resources"]["listChanged"] == true,
            )),
            "notifications/resources/updated" => Some(("a resources/subscribe", false)),
            "notifications/progress" => Some(("a progress token of an active request", false)),
            _ => None,
        };
        if let Some((what, false)) = needs {
            let text = format!("{} without {what}", n.method);
            if !found.contains(&text) {
                found.push(text);
            }
        }
    }
    found
}
