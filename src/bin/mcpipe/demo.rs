//! `mcpipe demo`: being built (see the issue tracker).

use std::process::ExitCode;

/// Runs `mcpipe demo` with the arguments after the subcommand.
pub(crate) fn run(_args: Vec<String>) -> ExitCode {
    eprintln!("mcpipe demo: not built yet");
    ExitCode::from(2)
}
