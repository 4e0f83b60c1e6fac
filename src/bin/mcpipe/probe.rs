//! `mcpipe probe [OPTIONS] [-- COMMAND ARGS...]`: runs a battery of checks against a stdio MCP
//! server (by default `mcpipe demo`, started from this executable) and prints a table.
//!
//! Every check has deadlines and every server it starts is shut down (in a bounded time) before
//! the next check, so the probe cannot hang. Each check is graded by the specification's key
//! words: the exit code is 1 only when a MUST failed (`--strict`: or a SHOULD).

mod checks;
mod errors;
mod format;
mod grading;
mod handshake;
mod listing;
mod report;
mod survey;
mod target;
mod tasks;
mod tools;
mod wire;

use std::ffi::OsString;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::Value;

use checks::CHECKS;
use grading::Status;
use report::{Options as ReportOptions, Row};
use target::{NamedCall, Target};

const HELP: &str = "usage: mcpipe probe [OPTIONS] [-- COMMAND ARGS...]

Checks a stdio MCP server for hangs, crashes, leaks and protocol mistakes, graded like the
specification: a failed MUST fails the run, a missed SHOULD is a warning. Without a command,
probes `mcpipe demo`. Only tools annotated readOnlyHint: true (and not destructiveHint: true)
are called unless named with --call.

options:
  --json              print the results as one JSON object (schema mcpipe-probe/1)
  --github            add GitHub Actions annotations (::error / ::warning) after the table
  --junit FILE        also write the results as JUnit XML to FILE
  --strict            fail on a missed SHOULD too
  --time-scale F      multiply every deadline by F (0.1 to 100; e.g. 3 on a slow CI runner)
  --call NAME         also call this tool, whatever its annotations (repeatable)
  --cancel NAME       cancel this tool in the cancellation check
  --args JSON         arguments for the --call or --cancel before it (default {})
  --only NAMES        run only these checks (comma-separated; see --list)
  --list              list the checks with their level and exit
  -h, --help          show this help

exit status: 0 when no MUST failed (with --strict: no SHOULD either), 1 when one did,
2 on a usage error";

/// What the command line asked for.
#[derive(Debug, Default)]
struct Options {
    json: bool,
    github: bool,
    junit: Option<String>,
    strict: bool,
    scale: Option<f64>,
    list: bool,
    only: Option<Vec<String>>,
    calls: Vec<NamedCall>,
    cancel: Option<NamedCall>,
    command: Option<Vec<OsString>>,
}

/// Which of `--call` and `--cancel` an `--args` belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LastNamed {
    None,
    Call,
    Cancel,
}

fn parse_args(args: Vec<OsString>) -> Result<Options, String> {
    let mut options = Options::default();
    let mut last = LastNamed::None;
    let mut words = args.into_iter();
    // The options are text; the command after `--` is kept as it is (a file name need not be
    // UTF-8).
    while let Some(arg) = words.next() {
        let arg = crate::text_arg(arg)?;
        if arg == "--" {
            let command: Vec<OsString> = words.by_ref().collect();
            if command.is_empty() {
                return Err(String::from("-- must be followed by a command"));
            }
            options.command = Some(command);
            break;
        }
        let mut args = words.by_ref().map(crate::text_arg);
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args.next().unwrap_or(Err(format!("{flag} needs {what}"))),
            }
        };
        match flag.as_str() {
            "--json" => options.json = true,
            "--github" => options.github = true,
            "--strict" => options.strict = true,
            "--list" => options.list = true,
            "--junit" => options.junit = Some(value("a file name")?),
            "--time-scale" => {
                let text = value("a number")?;
                match text.parse::<f64>() {
                    Ok(f) if (0.1..=100.0).contains(&f) => options.scale = Some(f),
                    _ => {
                        return Err(format!(
                            "--time-scale takes a number from 0.1 to 100, not {text:?}"
                        ))
                    }
                }
            }
            "--only" => options.only = Some(parse_only(&value("a list of check names")?)?),
            "--call" => {
                let name = value("a tool name")?;
                options.calls.push(NamedCall {
                    name,
                    arguments: serde_json::json!({}),
                });
                last = LastNamed::Call;
            }
            "--cancel" => {
                let name = value("a tool name")?;
                options.cancel = Some(NamedCall {
                    name,
                    arguments: serde_json::json!({}),
                });
                last = LastNamed::Cancel;
            }
            "--args" => {
                let text = value("a JSON object")?;
                let arguments: Value = serde_json::from_str(&text)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or(format!("--args takes a JSON object, not {text:?}"))?;
                let slot = match last {
                    LastNamed::Call => options.calls.last_mut(),
                    LastNamed::Cancel => options.cancel.as_mut(),
                    LastNamed::None => None,
                };
                let Some(slot) = slot else {
                    return Err(String::from(
                        "--args must follow --call NAME or --cancel NAME",
                    ));
                };
                slot.arguments = arguments;
                last = LastNamed::None;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.json && options.github {
        return Err(String::from(
            "--github adds to the table; it cannot be used with --json",
        ));
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
pub(crate) fn run(args: Vec<OsString>) -> ExitCode {
    let mut out = io::stdout().lock();
    if args
        .iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
    {
        let _ = writeln!(out, "{HELP}");
        return ExitCode::SUCCESS;
    }
    let options = match parse_args(args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("mcpipe probe: {why}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    if options.list {
        for check in CHECKS {
            let _ = writeln!(
                out,
                "{:<16} {:<6}  {}",
                check.name,
                check.level.label(),
                check.about
            );
        }
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &options.junit {
        // Found out now, not after the whole run: the report is written there at the end. Until
        // then the file says the run did not finish, so a CI job cancelled or killed midway
        // leaves a report that says so, not an empty file no JUnit reader can parse.
        if let Err(e) = report::write_file(path, &report::junit_unfinished()) {
            eprintln!("mcpipe probe: cannot write {path}: {e}\n\n{HELP}");
            return ExitCode::from(2);
        }
    }
    let default = options.command.is_none();
    let command = match options.command {
        Some(command) => command,
        None => match std::env::current_exe() {
            Ok(exe) => vec![exe.into_os_string(), OsString::from("demo")],
            Err(e) => {
                eprintln!("mcpipe probe: cannot find the mcpipe executable to run the demo: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let mut target = Target::new(command);
    if default {
        target.label = Some(String::from("mcpipe demo"));
    }
    target.scale = options.scale.unwrap_or(1.0);
    target.calls = options.calls;
    target.cancel = options.cancel;
    let report = ReportOptions {
        json: options.json,
        github: options.github,
        strict: options.strict,
        colour: !options.json
            && io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none(),
    };
    report::header(&mut out, &report, &target);
    // Orphans of the servers' trees (a daemonised grandchild) become the probe's children, so
    // each check ends and counts what its servers left behind. Linux only: docs/probe.md.
    let reaper = mcpipe::Subreaper::new().ok();
    let started = Instant::now();
    let mut rows = Vec::new();
    // Why the checks that need the handshake are skipped, once it failed.
    let mut blocked: Option<String> = None;
    for check in CHECKS {
        if let Some(only) = &options.only {
            if !only.iter().any(|n| n == check.name) {
                continue;
            }
        }
        let t0 = Instant::now();
        let outcome = match &blocked {
            Some(why) if check.needs_handshake => grading::skip(why.clone()),
            _ => (check.run)(&target),
        };
        if check.name == "handshake" && outcome.status == Status::Short {
            blocked = Some(
                outcome
                    .skip_rest
                    .clone()
                    .unwrap_or_else(|| String::from("the handshake failed")),
            );
        }
        // Every client of the check is closed: what still runs below the probe (given a moment
        // to finish dying, if a client signalled it) outlived them.
        let left = reaper.as_ref().map_or(0, |r| {
            r.end_descendants(target.t(Duration::from_millis(200)))
        });
        let outcome = if left > 0 {
            outcome.left_behind(left)
        } else {
            outcome
        };
        let row = Row::new(check, outcome, t0.elapsed(), options.strict);
        report::row(&mut out, &report, &row);
        rows.push(row);
    }
    let failed = report::finish(&mut out, &report, &target, &rows, started.elapsed());
    if let Some(path) = &options.junit {
        if let Err(e) = report::write_file(path, &report::junit(&target, &rows, started.elapsed()))
        {
            eprintln!("mcpipe probe: cannot write {path}: {e}");
            return ExitCode::from(2);
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
