//! The probe's checks: the battery, each with what it is graded by (its level and the rule it
//! rests on) and the function that runs it. Each check starts a fresh server, bounds every
//! wait, and shuts the server down (bounded) when it returns.

use super::errors;
use super::grading::{rules, Level, Outcome};
use super::handshake;
use super::target::Target;
use super::tasks;
use super::tools;
use super::wire;

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
        run: handshake::handshake,
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
        name: "tasks",
        about: "when tasks are advertised: a read-only tool as a task (start, status, result), and a cancelled one",
        level: Level::Must,
        rule: rules::TASKS,
        needs_handshake: true,
        run: tasks::tasks,
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
