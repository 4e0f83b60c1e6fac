//! `mcpipe probe`: the table, --json, --only, --list, exit codes, grading by MUST and SHOULD,
//! safe tool calls, and the right findings against broken servers, each run within its
//! deadlines. The odd servers of field tests are in probe_field.rs.

mod util;

use std::time::Duration;

use serde_json::Value;
use util::client::{fixture_path, watchdog};
use util::probe::{check, detail_of, probe, probe_json, probe_json_with, status_of};

/// The checks, in the order they run (`mcpipe probe --list`).
const CHECK_NAMES: [&str; 20] = [
    "handshake",
    "stdout-clean",
    "init-burst",
    "ping-burst",
    "split-message",
    "malformed-json",
    "invalid-request",
    "unknown-method",
    "unknown-tool",
    "tools",
    "tool-error",
    "notifications",
    "capabilities",
    "eof-exit",
    "sigterm-exit",
    "cancellation",
    "tasks",
    "large-message",
    "latency",
    "throughput",
];

/// How many checks the probe runs.
const CHECKS: usize = CHECK_NAMES.len();

#[test]
fn every_check_passes_against_a_well_behaved_server() {
    watchdog(Duration::from_secs(120), || {
        let (report, code, _) = probe_json("good_server.py", None);
        assert_eq!(report["failed"], 0, "{report:#}");
        assert_eq!(report["warned"], 0, "{report:#}");
        // It does not advertise tasks: that check does not apply.
        assert_eq!(report["skipped"], 1, "{report:#}");
        assert_eq!(status_of(&report, "tasks"), "SKIP");
        assert_eq!(code, 0);
        assert_eq!(report["checks"].as_array().unwrap().len(), CHECKS);
    });
}

#[test]
fn the_table_has_a_row_per_check_and_no_colours_off_a_tty() {
    watchdog(Duration::from_secs(60), || {
        let path = fixture_path("good_server.py");
        let (output, _) = probe(&[
            "--only",
            "handshake,unknown-method",
            "--",
            "python3",
            path.to_str().unwrap(),
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(output.status.success(), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.contains("PASS")).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(rows[0].starts_with("handshake"), "{text}");
        assert!(rows[0].contains(" MUST "), "{text}");
        assert!(rows[1].contains("-32601"), "{text}");
        assert!(
            text.contains("2 passed, 0 warned, 0 failed, 0 skipped in"),
            "{text}"
        );
        assert_eq!(rows[2], "PASS", "{text}");
    });
}

/// Issue 14: durations all in milliseconds with the unit, counts and rates with thousands
/// separators, the command shell-quoted, and no PASS row whose detail says "fail:".
#[test]
fn the_table_uses_one_unit_separators_and_a_quoted_command_line() {
    watchdog(Duration::from_secs(90), || {
        let path = fixture_path("good_server.py");
        let (output, _) = probe(&[
            "--only",
            "handshake,ping-burst,tool-error,latency,throughput",
            "--",
            "python3",
            path.to_str().unwrap(),
            "an ignored argument",
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(output.status.success(), "{text}");
        let first = text.lines().next().unwrap();
        assert_eq!(
            first,
            format!("probing: python3 {} 'an ignored argument'", path.display()),
            "{text}"
        );
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" PASS ") || l.contains(" FAIL "))
            .collect();
        assert_eq!(rows.len(), 5, "{text}");
        for row in &rows {
            // The TIME column: a number and " ms".
            let time = row[31..41].trim();
            assert!(time.ends_with(" ms"), "{row}");
            assert!(!row.contains(" s ") && !row.contains("µs"), "{row}");
            assert!(!row.to_lowercase().contains("fail:"), "{row}");
        }
        assert!(
            text.contains("1,000 pings answered once each in "),
            "{text}"
        );
        assert!(text.contains("10,000 pings in "), "{text}");
        let rate = text
            .lines()
            .find(|l| l.starts_with("throughput"))
            .and_then(|l| l.split("  ").last())
            .unwrap();
        let number = rate.split(" requests/s").next().unwrap();
        assert!(number.len() < 4 || number.contains(','), "{rate}");
        for unit_text in text.lines().filter(|l| l.starts_with("latency")) {
            assert_eq!(unit_text.matches(" ms").count(), 3, "{unit_text}");
        }
    });
}

#[test]
fn a_server_that_never_answers_fails_the_handshake_and_the_rest_is_skipped() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, took) = probe_json("never_answers.py", None);
        assert_eq!(code, 1);
        assert_eq!(status_of(&report, "handshake"), "FAIL");
        assert_eq!(report["failed"], 1, "{report:#}");
        assert_eq!(report["skipped"], CHECKS - 1, "{report:#}");
        // The handshake deadline is 5 s; closing takes at most about 2 s more; the echo test
        // that follows a failed handshake 1 s and another close.
        assert!(took < Duration::from_secs(20), "{took:?}");
    });
}

#[test]
fn garbage_on_stdout_is_reported() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json(
            "garbage.py",
            Some("handshake,stdout-clean,malformed-json,unknown-method"),
        );
        assert_eq!(code, 1);
        assert_eq!(status_of(&report, "handshake"), "PASS");
        assert_eq!(status_of(&report, "stdout-clean"), "FAIL");
        assert_eq!(status_of(&report, "unknown-method"), "FAIL");
    });
}

#[test]
fn a_server_that_dies_on_its_first_request_is_reported_with_its_stderr() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, took) = probe_json("exits_mid_request.py", None);
        assert_eq!(code, 1);
        assert_eq!(status_of(&report, "handshake"), "FAIL");
        let detail = detail_of(&report, "handshake");
        assert!(detail.contains("exit status: 3"), "{detail}");
        assert!(detail.contains("out of cheese"), "{detail}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    });
}

/// Exiting on EOF and SIGTERM are SHOULDs: warnings by default, failures under --strict.
#[test]
fn a_server_that_ignores_eof_and_sigterm_is_warned_and_fails_only_under_strict() {
    watchdog(Duration::from_secs(90), || {
        let (report, code, took) = probe_json("stubborn.py", Some("eof-exit,sigterm-exit"));
        assert_eq!(code, 0, "{report:#}");
        assert_eq!(status_of(&report, "eof-exit"), "WARN");
        assert_eq!(status_of(&report, "sigterm-exit"), "WARN");
        assert_eq!(check(&report, "eof-exit")["level"], "SHOULD");
        assert!(check(&report, "eof-exit")["rule"]
            .as_str()
            .unwrap()
            .contains("Shutdown"));
        // Each check: startup, then at most 1 s + 1 s (+ reap) for eof-exit and 1 s for
        // sigterm-exit.
        assert!(took < Duration::from_secs(15), "{took:?}");
        let (report, code, _) = probe_json_with(
            &["--strict"],
            "stubborn.py",
            &[],
            Some("eof-exit,sigterm-exit"),
        );
        assert_eq!(code, 1, "{report:#}");
        assert_eq!(status_of(&report, "eof-exit"), "FAIL");
        assert_eq!(report["strict"], true);
    });
}

#[test]
fn a_server_flooding_stderr_still_passes() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json("stderr_flood.py", Some("handshake,unknown-method,eof-exit"));
        assert_eq!(report["passed"], 2, "{report:#}");
        assert_eq!(status_of(&report, "unknown-method"), "FAIL");
        assert_eq!(code, 1);
    });
}

#[test]
fn list_help_and_usage_errors() {
    watchdog(Duration::from_secs(30), || {
        let (output, _) = probe(&["--list"]);
        assert!(output.status.success());
        let text = String::from_utf8(output.stdout).unwrap();
        let listed: Vec<&str> = text
            .lines()
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(listed, CHECK_NAMES, "{text}");
        assert!(text
            .lines()
            .all(|l| l.contains(" MUST ") || l.contains(" SHOULD ") || l.contains(" INFO ")));
        // Help goes to stdout (it can be paged) with exit 0.
        let (output, _) = probe(&["--help"]);
        assert_eq!(output.status.code(), Some(0));
        let help = String::from_utf8(output.stdout).unwrap();
        assert!(help.starts_with("usage: mcpipe probe"), "{help}");
        assert!(output.stderr.is_empty());
        // Usage errors go to stderr with exit 2, and nothing to stdout.
        for args in [
            &["--only", "no-such-check"][..],
            &["--bogus"],
            &["--time-scale", "0"],
            &["--time-scale", "fast"],
            &["--args", "{}"],
            &["--call", "x", "--args", "[1]"],
            &["--json", "--github"],
            &["--"],
        ] {
            let (output, _) = probe(args);
            assert_eq!(output.status.code(), Some(2), "{args:?}");
            assert!(output.stdout.is_empty(), "{args:?}");
            let err = String::from_utf8(output.stderr).unwrap();
            assert!(err.starts_with("mcpipe probe: "), "{args:?}: {err}");
        }
    });
}

#[test]
fn every_check_passes_against_the_demo_without_warnings() {
    watchdog(Duration::from_secs(300), || {
        // The second task is cancelled at once, but a loaded machine (the whole suite running)
        // may let its short sleep end first, which the probe accepts: up to three runs, so that
        // the cancellation is seen taking effect.
        for run in 1..=3 {
            let (output, _) = probe(&["--json"]);
            let report: Value = serde_json::from_slice(&output.stdout).unwrap();
            // Shown as what a user would type, not as the path of this build.
            assert_eq!(report["target"], "mcpipe demo");
            assert_eq!(report["failed"], 0, "{report:#}");
            assert_eq!(report["warned"], 0, "{report:#}");
            assert_eq!(report["skipped"], 0, "{report:#}");
            assert!(output.status.success());
            // The demo advertises tasks: its `sleep` runs as one, and a second one is cancelled.
            assert_eq!(status_of(&report, "tasks"), "PASS");
            let detail = detail_of(&report, "tasks");
            if detail.contains("cancelled") {
                return;
            }
            assert!(
                run < 3,
                "the second task was never cancelled in time: {report:#}"
            );
        }
    });
}

/// The SDKs' liberties pass: a skipped unparseable line, a dropped request without a method
/// and an ignored cancellation are warnings at most, and the run exits 0.
#[test]
fn a_polite_server_that_skips_bad_lines_passes_with_warnings() {
    watchdog(Duration::from_secs(120), || {
        let (report, code, _) = probe_json("polite_server.py", None);
        assert_eq!(code, 0, "{report:#}");
        assert_eq!(report["failed"], 0, "{report:#}");
        assert_eq!(status_of(&report, "malformed-json"), "PASS");
        assert!(detail_of(&report, "malformed-json").contains("skipped"));
        assert_eq!(status_of(&report, "invalid-request"), "WARN");
        assert_eq!(status_of(&report, "cancellation"), "WARN");
        assert!(detail_of(&report, "cancellation").contains("answered anyway"));
        assert_eq!(report["warned"], 2, "{report:#}");
        assert_eq!(report["verdict"], "PASS");
    });
}

#[test]
fn a_server_that_dies_on_a_malformed_line_fails() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json("dies_on_bad_line.py", Some("handshake,malformed-json"));
        assert_eq!(code, 1, "{report:#}");
        assert_eq!(status_of(&report, "malformed-json"), "FAIL");
        assert_eq!(check(&report, "malformed-json")["level"], "MUST");
        assert!(detail_of(&report, "malformed-json").contains("died"));
    });
}

/// -32600 with id null is what JSON-RPC 2.0 answers when it gives up on the id: it passes.
/// The same server's -32602 for an unknown method and its log without `logging` fail.
#[test]
fn error_codes_and_capability_discipline_are_graded() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json(
            "sloppy.py",
            Some("handshake,invalid-request,unknown-method,capabilities"),
        );
        assert_eq!(code, 1, "{report:#}");
        assert_eq!(status_of(&report, "invalid-request"), "PASS");
        assert!(detail_of(&report, "invalid-request").contains("id null"));
        assert_eq!(status_of(&report, "unknown-method"), "FAIL");
        assert!(detail_of(&report, "unknown-method").contains("-32602"));
        assert_eq!(status_of(&report, "capabilities"), "FAIL");
        assert!(
            detail_of(&report, "capabilities").contains("notifications/message without logging")
        );
    });
}

#[test]
fn an_echoing_server_is_reported_as_echoing() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json("echo_back.py", Some("handshake"));
        assert_eq!(code, 1);
        assert_eq!(status_of(&report, "handshake"), "FAIL");
        let detail = detail_of(&report, "handshake");
        assert!(detail.contains("echoes its input"), "{detail}");
    });
}

/// A trap file, written by the fixture when a destructive or unannotated tool is called.
fn trap_path(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("mcpipe-probe-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn tools_that_may_change_things_are_never_called_unasked() {
    watchdog(Duration::from_secs(120), || {
        let trap = trap_path("trap");
        let (report, code, _) =
            probe_json_with(&[], "destructive_tools.py", &[trap.to_str().unwrap()], None);
        assert!(
            !trap.exists(),
            "a tool that may change things was called: {report:#}"
        );
        assert_eq!(code, 0, "{report:#}");
        let tools = check(&report, "tools")["tools"].as_array().unwrap();
        let action = |name: &str| {
            let t = tools.iter().find(|t| t["name"] == name).unwrap();
            (t["action"].as_str().unwrap(), t["detail"].as_str().unwrap())
        };
        assert_eq!(action("wipe").0, "skipped");
        assert!(action("wipe").1.contains("no annotations"));
        assert_eq!(action("purge").0, "skipped");
        assert!(action("purge").1.contains("destructiveHint"));
        assert_eq!(action("look").0, "called");
    });
}

#[test]
fn a_tool_named_with_call_is_called_with_its_arguments() {
    watchdog(Duration::from_secs(60), || {
        let trap = trap_path("call");
        let (report, code, _) = probe_json_with(
            &["--call", "wipe", "--args", "{\"all\":true}"],
            "destructive_tools.py",
            &[trap.to_str().unwrap()],
            Some("handshake,tools"),
        );
        assert_eq!(code, 0, "{report:#}");
        let written = std::fs::read_to_string(&trap).unwrap_or_default();
        let _ = std::fs::remove_file(&trap);
        assert_eq!(written, "wipe was called\n", "{report:#}");
        let tools = check(&report, "tools")["tools"].as_array().unwrap();
        let wipe = tools.iter().find(|t| t["name"] == "wipe").unwrap();
        assert_eq!(wipe["action"], "called");
        assert!(wipe["detail"].as_str().unwrap().contains("{\"all\":true}"));
    });
}

/// The JSON report's documented fields (docs/probe.md), and the CI formats.
#[test]
fn the_json_report_junit_and_github_annotations_have_their_documented_shape() {
    watchdog(Duration::from_secs(60), || {
        let junit = trap_path("junit.xml");
        let junit_arg = junit.to_str().unwrap().to_owned();
        let (report, code, _) = probe_json_with(
            &["--time-scale", "2", "--junit", &junit_arg],
            "sloppy.py",
            &[],
            Some("handshake,unknown-method,eof-exit"),
        );
        assert_eq!(code, 1);
        assert_eq!(report["schema"], "mcpipe-probe/1");
        assert_eq!(report["time_scale"], 2.0);
        assert_eq!(report["verdict"], "FAIL");
        for key in [
            "target", "command", "passed", "warned", "failed", "skipped", "ms",
        ] {
            assert!(report.get(key).is_some(), "{key}: {report:#}");
        }
        for c in report["checks"].as_array().unwrap() {
            for key in [
                "name",
                "status",
                "level",
                "rule",
                "ms",
                "detail",
                "full_detail",
            ] {
                assert!(c.get(key).is_some(), "{key}: {c}");
            }
        }
        let xml = std::fs::read_to_string(&junit).unwrap();
        let _ = std::fs::remove_file(&junit);
        assert!(xml.starts_with("<?xml"), "{xml}");
        assert!(xml.contains("tests=\"3\" failures=\"1\""), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert!(xml.contains("name=\"unknown-method\""), "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");

        let path = fixture_path("sloppy.py");
        let (output, _) = probe(&[
            "--github",
            "--only",
            "handshake,unknown-method",
            "--",
            "python3",
            path.to_str().unwrap(),
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("::error ")).collect();
        assert_eq!(errors.len(), 1, "{text}");
        assert!(
            errors[0].starts_with("::error title=mcpipe probe unknown-method (MUST)::"),
            "{text}"
        );
    });
}

/// The real servers the interop setup installs pass the gate: the official reference server
/// (TypeScript SDK) and `mcp-server-time` (Python SDK) skip a bad line and drop a request
/// without a method, which is allowed, and neither their non-read-only tools nor anything
/// else fails a MUST. The measurements are left out (they only report).
#[test]
fn the_interop_servers_pass_the_gate() {
    watchdog(Duration::from_secs(300), || {
        let only = CHECK_NAMES
            .iter()
            .filter(|n| !matches!(**n, "latency" | "throughput"))
            .copied()
            .collect::<Vec<_>>()
            .join(",");
        // The two servers are probed side by side: each probe spends most of its 30-40 s
        // waiting (a server started per check, answers that never come).
        let servers = [
            vec![
                util::client::interop("node_modules/.bin/mcp-server-everything"),
                "stdio".into(),
            ],
            vec![util::client::interop(".venv/bin/mcp-server-time")],
        ];
        std::thread::scope(|scope| {
            let probes: Vec<_> = servers
                .iter()
                .map(|command| scope.spawn(|| probe_the_gate(command, &only)))
                .collect();
            for handle in probes {
                if let Err(panic) = handle.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        });
    });
}

/// One interop server through the gate: no failure, exit 0, and only unsafe tools skipped.
fn probe_the_gate(command: &[std::path::PathBuf], only: &str) {
    let mut args = vec!["--json", "--time-scale", "3", "--only", only, "--"];
    let command: Vec<&str> = command.iter().map(|p| p.to_str().unwrap()).collect();
    args.extend(&command);
    let (output, _) = probe(&args);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(report["failed"], 0, "{report:#}");
    assert_eq!(output.status.code(), Some(0), "{report:#}");
    assert_eq!(status_of(&report, "malformed-json"), "PASS", "{report:#}");
    let tools = check(&report, "tools")["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["action"] == "called"), "{report:#}");
    for tool in tools.iter().filter(|t| t["action"] == "skipped") {
        assert!(
            tool["detail"].as_str().unwrap().contains("readOnlyHint")
                || tool["detail"].as_str().unwrap().contains("destructiveHint"),
            "{tool}"
        );
    }
}
