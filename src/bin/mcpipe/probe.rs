//! `mcpipe probe`: being built (see the issue tracker).

use std::process::ExitCode;

/// Runs `mcpipe probe` with the arguments after the subcommand.
pub(crate) fn run(_args: Vec<String>) -> ExitCode {
    eprintln!("mcpipe probe: not built yet");
    ExitCode::from(2)
}
