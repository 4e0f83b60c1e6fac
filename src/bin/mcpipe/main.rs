//! The `mcpipe` command: `mcpipe demo` serves the demo MCP server on stdio, and
//! `mcpipe probe [-- COMMAND ARGS...]` checks any stdio MCP server (by default the demo).
//!
//! Run: `cargo run --release -- probe`, or `cargo run --release -- demo --help`.

use std::process::ExitCode;

mod conformance;
mod demo;
mod probe;

const USAGE: &str = "usage: mcpipe <command> [options]

commands:
  demo     serve the demo MCP server on stdin/stdout (see `mcpipe demo --help`)
  probe    check a stdio MCP server, by default the demo (see `mcpipe probe --help`)";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    match command.as_deref() {
        Some("demo") => demo::run(rest),
        Some("probe") => probe::run(rest),
        Some("-h" | "--help" | "help") => {
            eprintln!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("mcpipe: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
