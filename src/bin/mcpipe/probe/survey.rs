//! What listing and calling the safe tools showed: one survey per target, shared by the checks
//! that need tools.

use std::time::Duration;

use serde_json::Value;

use super::grading::Failure;
use super::listing;

/// What calling one tool showed.
#[derive(Debug, Clone)]
pub(crate) struct Called {
    pub(crate) arguments: Value,
    /// A valid answer (a result with `content`, or an error response): `Ok(summary)`.
    pub(crate) answer: Result<String, String>,
    pub(crate) took: Duration,
    pub(crate) progress: usize,
    /// The call outlasted its deadline (the client cancelled it): a slow tool.
    pub(crate) timed_out: bool,
}

/// One listed tool and what the probe did with it.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) tool: Value,
    /// Why the tool was not called, when it was not.
    pub(crate) skipped: Option<String>,
    /// Named by the user with `--call`.
    pub(crate) named: bool,
    pub(crate) called: Option<Called>,
    /// What is wrong with its definition ("no name", "no inputSchema"), each with the rule it
    /// breaks: findings of the `tools` check.
    pub(crate) flaws: Vec<(String, &'static str)>,
}

impl Entry {
    /// Its name; empty when it has none the probe can call (it is never called then).
    pub(crate) fn name(&self) -> &str {
        listing::name(&self.tool).unwrap_or("")
    }

    /// Its name as the report shows it, also when it has none.
    pub(crate) fn label(&self) -> String {
        listing::label(&self.tool)
    }
}

/// What listing and calling the safe tools showed, shared by the checks that need tools.
#[derive(Debug, Clone, Default)]
pub(crate) struct Survey {
    /// Why the survey could not be made or ended early (the server died, tools/list failed),
    /// with the rule that broke.
    pub(crate) failure: Option<Failure>,
    /// The server declares no `tools` capability.
    pub(crate) no_tools: bool,
    pub(crate) entries: Vec<Entry>,
    /// Tools named with `--call` that the server does not list (the user's mistake).
    pub(crate) unlisted: Vec<String>,
    /// Where the tool names do not follow MCP 2025-11-25's advice (SHOULD), when that or a
    /// later version was negotiated.
    pub(crate) name_advice: Vec<String>,
    /// Notifications the server had no right to send during the calls.
    pub(crate) undeclared: Vec<String>,
    pub(crate) notifications: usize,
    /// Requests the server sent other than `ping` (always allowed).
    pub(crate) server_requests: u64,
}
