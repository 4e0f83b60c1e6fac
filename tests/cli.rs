//! The `mcpipe` command line itself: help and version on stdout with exit status 0, help per
//! command, usage errors on stderr with exit status 2. (`mcpipe demo`'s own options are in
//! tests/mcp_cli.rs, the probe's in tests/probe.rs.)

mod util;

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;

use util::BOUND;

/// What one run of `mcpipe` left: exit code, stdout, stderr.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `mcpipe ARGS` with stdin closed; the process is killed and the test fails if it has not
/// exited within [`BOUND`].
fn mcpipe(args: &[&str]) -> Run {
    let child = Command::new(env!("CARGO_BIN_EXE_mcpipe"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcpipe");
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let Ok(output) = finished.recv_timeout(BOUND) else {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("mcpipe {args:?} did not exit within {BOUND:?}");
    };
    let output = output.expect("collect mcpipe's output");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[test]
fn help_goes_to_stdout_and_exits_zero() {
    for args in [&["--help"][..], &["-h"], &["help"], &["help", "help"]] {
        let run = mcpipe(args);
        assert_eq!(run.code, Some(0), "{args:?}: {run:?}");
        assert!(run.stderr.is_empty(), "{args:?}: {run:?}");
        assert!(
            run.stdout.starts_with("usage: mcpipe <command>"),
            "{args:?}: {run:?}"
        );
        for word in ["demo", "probe", "wrap", "help", "--help", "--version"] {
            assert!(
                run.stdout.contains(word),
                "{args:?}: {word} missing: {run:?}"
            );
        }
        // The summary under the usage line names every command, not only the first ones.
        let summary = run.stdout.split("\n\n").nth(1).unwrap_or_default();
        for command in ["demo", "probe", "wrap"] {
            assert!(
                summary.contains(command),
                "{args:?}: the summary does not name {command}: {summary:?}"
            );
        }
    }
}

#[test]
fn version_is_the_name_and_the_package_version_on_stdout() {
    for flag in ["--version", "-V"] {
        let run = mcpipe(&[flag]);
        assert_eq!(
            run,
            Run {
                code: Some(0),
                stdout: format!("mcpipe {}\n", env!("CARGO_PKG_VERSION")),
                stderr: String::new(),
            },
            "{flag}"
        );
    }
}

#[test]
fn demo_help_is_the_same_three_ways_and_on_stdout() {
    let help = mcpipe(&["help", "demo"]);
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(help.stderr.is_empty(), "{help:?}");
    assert!(help.stdout.starts_with("usage: mcpipe demo"), "{help:?}");
    assert_eq!(mcpipe(&["demo", "--help"]), help);
    assert_eq!(mcpipe(&["demo", "-h"]), help);
}

/// The probe owns its help text; `mcpipe help probe` shows exactly what `mcpipe probe --help`
/// shows, on the same streams.
#[test]
fn help_probe_is_the_probes_own_help() {
    let help = mcpipe(&["help", "probe"]);
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(
        format!("{}{}", help.stdout, help.stderr).starts_with("usage: mcpipe probe"),
        "{help:?}"
    );
    assert_eq!(mcpipe(&["probe", "--help"]), help);
}

#[test]
fn wrap_help_is_the_same_three_ways_and_on_stdout() {
    let help = mcpipe(&["help", "wrap"]);
    assert_eq!(help.code, Some(0), "{help:?}");
    assert!(help.stderr.is_empty(), "{help:?}");
    assert!(help.stdout.starts_with("usage: mcpipe wrap"), "{help:?}");
    assert_eq!(mcpipe(&["wrap", "--help"]), help);
    assert_eq!(mcpipe(&["wrap", "-h"]), help);
}

#[test]
fn usage_errors_go_to_stderr_with_the_usage_and_exit_two() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["--frobnicate"],
        &["--help", "demo"],
        &["--version", "extra"],
        &["help", "frobnicate"],
        &["help", "demo", "probe"],
        &["demo", "--frobnicate"],
    ] {
        let run = mcpipe(args);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
        assert!(run.stderr.starts_with("mcpipe"), "{args:?}: {run:?}");
        assert!(run.stderr.contains("usage: mcpipe"), "{args:?}: {run:?}");
    }
}

#[test]
fn options_that_cannot_work_are_usage_errors_before_anything_runs() {
    for (args, why) in [
        (
            &["wrap", "--timeout-ms", "0", "--", "true"][..],
            "--timeout-ms must be at least 1",
        ),
        (
            &["wrap", "--replay-timeout-ms", "0", "--", "true"][..],
            "--replay-timeout-ms must be at least 1",
        ),
        // `--flag=value` too, as `demo` and `probe` take it.
        (
            &["wrap", "--timeout-ms=0", "--", "true"][..],
            "--timeout-ms must be at least 1",
        ),
        (
            &["wrap", "--grace-ms=soon", "--", "true"][..],
            "--grace-ms needs a non-negative integer, got \"soon\"",
        ),
        (
            &["wrap", "--no-pacing=yes", "--", "true"][..],
            "unknown option \"--no-pacing=yes\"",
        ),
        (
            &[
                "probe",
                "--junit",
                "/nonexistent/mcpipe-cli-test/report.xml",
            ],
            "cannot write /nonexistent/mcpipe-cli-test/report.xml",
        ),
    ] {
        let run = mcpipe(args);
        assert_eq!(run.code, Some(2), "{args:?}: {run:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {run:?}");
        assert!(run.stderr.contains(why), "{args:?}: {run:?}");
    }
}
