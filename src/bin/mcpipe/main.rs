//! The `mcpipe` command: `mcpipe demo` serves the demo MCP server on stdio,
//! `mcpipe probe [-- COMMAND ARGS...]` checks any stdio MCP server (by default the demo), and
//! `mcpipe wrap -- COMMAND ARGS...` runs any stdio MCP server behind mcpipe.
//!
//! Run: `cargo run --release -- probe`, or `cargo run --release -- help demo`.
//!
//! Help and the version go to stdout with exit status 0 (so `mcpipe --help | less` works);
//! usage errors go to stderr with exit status 2.
//!
//! The arguments are parsed by hand: three commands and a handful of flags. A parsing crate would
//! have to be an optional dependency behind a default feature, which every user of the library
//! would then compile unless they turned default features off.

use std::ffi::OsString;
use std::io::{self, Write};
use std::process::ExitCode;

mod conformance;
mod demo;
mod probe;
mod wrap;

const USAGE: &str = "usage: mcpipe <command> [options]

MCP (Model Context Protocol) over stdio: a demo server, and a probe and a wrapper for any
stdio MCP server.

commands:
  demo     serve the demo MCP server on stdin/stdout
  probe    check a stdio MCP server for hangs, crashes and leaks (by default the demo)
  wrap     run any stdio MCP server behind mcpipe, so that it behaves
  help     show this help, or a command's: mcpipe help <command>

options:
  -h, --help       show this help
  -V, --version    show the version

`mcpipe <command> --help` shows a command's options.";

/// Large messages (a 10 MB text echoed) reuse memory already resident instead of piling up in
/// glibc's heap (peak RSS 5.7 times the message; 2.4 with this) or being faulted in afresh a
/// page at a time (see `mcpipe::LargeBlockAllocator`). A program's choice, not the library's.
#[global_allocator]
static ALLOCATOR: mcpipe::LargeBlockAllocator = mcpipe::LargeBlockAllocator::new();

/// The exit status of a usage error, as for most Unix commands.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    // `args_os`, not `args`: `args` panics on an argument that is not UTF-8, and the command a
    // probe or the wrapper runs may well have one (a file name). Those two keep their command's
    // words as they are; options, and the other commands' arguments, are text, and a usage
    // error says so.
    let mut args = std::env::args_os().skip(1);
    let command = args.next();
    let rest_os: Vec<OsString> = args.collect();
    let command = match command.map(OsString::into_string) {
        None => None,
        Some(Ok(command)) => Some(command),
        Some(Err(bad)) => return usage_error(&format!("unknown command {bad:?}")),
    };
    match command.as_deref() {
        Some("probe") => return probe::run(rest_os),
        Some("wrap") => return wrap::run(rest_os),
        _ => {}
    }
    let rest = match text_args(rest_os) {
        Ok(rest) => rest,
        Err(why) => return usage_error(&why),
    };
    match command.as_deref() {
        Some("demo") => demo::run(rest),
        Some("-h" | "--help") if rest.is_empty() => print_out(USAGE),
        Some("help") => help(&rest),
        Some("-V" | "--version") if rest.is_empty() => {
            print_out(concat!("mcpipe ", env!("CARGO_PKG_VERSION")))
        }
        Some(flag @ ("-h" | "--help" | "-V" | "--version")) => {
            usage_error(&format!("{flag} takes no arguments"))
        }
        Some(other) => usage_error(&format!("unknown command {other:?}")),
        None => usage_error("no command given"),
    }
}

/// The arguments as text, or which one is not UTF-8.
fn text_args(args: Vec<OsString>) -> Result<Vec<String>, String> {
    args.into_iter().map(text_arg).collect()
}

/// One argument as text (options are; the command `probe` and `wrap` run after `--` need not
/// be), or a usage error naming it.
pub(crate) fn text_arg(arg: OsString) -> Result<String, String> {
    arg.into_string()
        .map_err(|bad| format!("argument {bad:?} is not valid UTF-8"))
}

/// `mcpipe help [COMMAND]`.
fn help(rest: &[String]) -> ExitCode {
    match rest {
        [] => print_out(USAGE),
        [command] if command == "demo" => print_out(demo::USAGE),
        // The probe owns its help text and where it goes: ask it, as `mcpipe probe --help` does.
        [command] if command == "probe" => probe::run(vec![OsString::from("--help")]),
        [command] if command == "wrap" => print_out(wrap::USAGE),
        [command] if command == "help" => print_out(USAGE),
        [command] => usage_error(&format!(
            "no help for {command:?}: there is no such command"
        )),
        _ => usage_error("help takes at most one command"),
    }
}

/// Prints `text` on stdout and exits 0. A closed stdout (`mcpipe --help | head -1`) is not an
/// error worth reporting: the reader has what it wanted.
pub(crate) fn print_out(text: &str) -> ExitCode {
    let _ = writeln!(io::stdout().lock(), "{text}");
    ExitCode::SUCCESS
}

/// Reports a usage error on stderr, with the usage, and exits 2.
fn usage_error(why: &str) -> ExitCode {
    eprintln!("mcpipe: {why}\n\n{USAGE}");
    ExitCode::from(USAGE_ERROR)
}
