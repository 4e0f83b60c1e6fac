//! `mcpipe probe [OPTIONS] [-- COMMAND ARGS...]`: runs a battery of checks against a stdio MCP
//! server (by default `mcpipe demo`, started from this executable) and prints a table.
//!
//! Every check has deadlines and every server it starts is shut down (in a bounded time) before
//! the next check, so the probe cannot hang. The exit code is 0 only when no check failed.

mod checks;

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use checks::{Status, Target, CHECKS};

const HELP: &str = "usage: mcpipe probe [--json] [--only NAME,...] [--list] [-- COMMAND ARGS...]

Checks a stdio MCP server for hangs, crashes and leaks. Without a command, probes `mcpipe demo`.

options:
  --json          print the results as JSON
  --only NAMES    run only these checks (comma-separated; see --list)
  --list          list the checks and exit
  -h, --help      show this help

exit status: 0 when no check failed, 1 when one did, 2 on a usage error";

/// What the command line asked for.
#[derive(Debug)]
struct Options {
    json: bool,
    list: bool,
    only: Option<Vec<String>>,
    command: Option<Vec<OsString>>,
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let mut options = Options {
        json: false,
        list: false,
        only: None,
        command: None,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => options.json = true,
            "--list" => options.list = true,
            "--only" => {
                let names = args.next().ok_or("--only needs a list of check names")?;
                options.only = Some(parse_only(&names)?);
            }
            "--" => {
                let command: Vec<OsString> = args.by_ref().map(OsString::from).collect();
                if command.is_empty() {
                    return Err(String::from("-- must be followed by a command"));
                }
                options.command = Some(command);
            }
            other => {
                if let Some(names) = other.strip_prefix("--only=") {
                    options.only = Some(parse_only(names)?);
                } else {
                    return Err(format!("unknown argument {other:?}"));
                }
            }
        }
    }
    Ok(options)
}

fn parse_only(names: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    for name in &names {
        if !CHECKS.iter().any(|c| c.name == name) {
            return Err(format!("no check is called {name:?} (see --list)"));
        }
    }
    if names.is_empty() {
        return Err(String::from("--only needs at least one check name"));
    }
    Ok(names)
}

/// Runs `mcpipe probe` with the arguments after the subcommand.
pub(crate) fn run(args: Vec<String>) -> ExitCode {
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
    {
        eprintln!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let options = match parse_args(args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("mcpipe probe: {why}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    let mut out = io::stdout().lock();
    if options.list {
        for check in CHECKS {
            let _ = writeln!(out, "{:<16} {}", check.name, check.about);
        }
        return ExitCode::SUCCESS;
    }
    let target = match options.command {
        Some(command) => Target::new(command),
        None => match std::env::current_exe() {
            Ok(exe) => Target::new(vec![exe.into_os_string(), OsString::from("demo")]),
            Err(e) => {
                eprintln!("mcpipe probe: cannot find the mcpipe executable to run the demo: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let colour =
        !options.json && io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    if !options.json {
        let _ = writeln!(out, "probing: {}", target.display());
        let _ = writeln!(out);
        let _ = writeln!(out, "{:<16} {:<6} {:>9}  DETAIL", "CHECK", "RESULT", "TIME");
        let _ = out.flush();
    }
    let started = Instant::now();
    let mut results = Vec::new();
    let mut handshake_failed = false;
    for check in CHECKS {
        if let Some(only) = &options.only {
            if !only.iter().any(|n| n == check.name) {
                continue;
            }
        }
        let t0 = Instant::now();
        let (status, detail) = if handshake_failed && check.needs_handshake {
            (Status::Skip, String::from("the handshake failed"))
        } else {
            let outcome = (check.run)(&target);
            (outcome.status, one_line(&outcome.detail))
        };
        let elapsed = t0.elapsed();
        if check.name == "handshake" && status == Status::Fail {
            handshake_failed = true;
        }
        if !options.json {
            let _ = writeln!(
                out,
                "{:<16} {} {:>9}  {}",
                check.name,
                paint(status, colour),
                format_duration(elapsed),
                detail
            );
            let _ = out.flush();
        }
        results.push((check.name, status, elapsed, detail));
    }
    let count = |s: Status| results.iter().filter(|r| r.1 == s).count();
    let (passed, failed, skipped) = (
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Skip),
    );
    if options.json {
        let checks: Vec<Value> = results
            .iter()
            .map(|(name, status, elapsed, detail)| {
                json!({
                    "name": name,
                    "status": status.label(),
                    "ms": (elapsed.as_secs_f64() * 1e6).round() / 1e3,
                    "detail": detail,
                })
            })
            .collect();
        let report = json!({
            "target": target.display(),
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "ms": started.elapsed().as_millis() as u64,
            "checks": checks,
        });
        let _ = writeln!(out, "{report}");
    } else {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{passed} passed, {failed} failed, {skipped} skipped in {}",
            format_duration(started.elapsed())
        );
    }
    let _ = out.flush();
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn paint(status: Status, colour: bool) -> String {
    let label = format!("{:<6}", status.label());
    if !colour {
        return label;
    }
    let code = match status {
        Status::Pass => "32",
        Status::Fail => "31",
        Status::Skip => "33",
    };
    format!("\x1b[{code}m{label}\x1b[0m")
}

fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 10_000.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// A reason on one line, at most 200 characters.
fn one_line(text: &str) -> String {
    let joined: String = text
        .split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    if joined.chars().count() <= 200 {
        return joined;
    }
    let mut cut: String = joined.chars().take(197).collect();
    cut.push_str("...");
    cut
}
