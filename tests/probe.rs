//! `mcpipe probe`: the table, --json, --only, --list, exit codes, grading by MUST and SHOULD,
//! safe tool calls, and the right findings against broken servers, each run within its
//! deadlines.

mod util;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::client::{fixture_path, mcpipe_bin, watchdog};

/// Runs `mcpipe probe ARGS` and returns its output and how long it took. The probe bounds
/// itself; the watchdog around each test catches a probe that does not.
fn probe(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let child = Command::new(mcpipe_bin())
        .arg("probe")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Kills the probe (and so its servers, by parent-death signal) if the test gives up.
    struct KillOnDrop(u32, bool);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            if !self.1 {
                let _ = Command::new("kill")
                    .args(["-9", &self.0.to_string()])
                    .status();
            }
        }
    }
    let mut guard = KillOnDrop(pid, false);
    let output = child.wait_with_output().unwrap();
    guard.1 = true;
    (output, started.elapsed())
}

/// Runs the probe with `--json` against a fixture and returns the report.
fn probe_json(fixture: &str, only: Option<&str>) -> (Value, i32, Duration) {
    probe_json_with(&[], fixture, &[], only)
}

/// As [`probe_json`], with probe options before the command and arguments for the fixture.
fn probe_json_with(
    options: &[&str],
    fixture: &str,
    fixture_args: &[&str],
    only: Option<&str>,
) -> (Value, i32, Duration) {
    let path = fixture_path(fixture);
    let path = path.to_str().unwrap();
    let mut args = vec!["--json"];
    args.extend(options);
    if let Some(only) = only {
        args.extend(["--only", only]);
    }
    args.extend(["--", "python3", path]);
    args.extend(fixture_args);
    let (output, took) = probe(&args);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (report, output.status.code().unwrap_or(-1), took)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report:#}"))
}

fn status_of<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["status"].as_str().unwrap()
}

fn detail_of<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["detail"].as_str().unwrap()
}

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
            for key in ["name", "status", "level", "rule", "ms", "detail"] {
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
        for command in [
            vec![
                util::client::interop("node_modules/.bin/mcp-server-everything"),
                "stdio".into(),
            ],
            vec![util::client::interop(".venv/bin/mcp-server-time")],
        ] {
            let mut args = vec!["--json", "--time-scale", "3", "--only", &only, "--"];
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
    });
}

/// Field test: a server's names reached the terminal raw: a tool named `x\n::error ...` printed
/// a line GitHub Actions runs as a workflow command, and ESC and NUL went through. Every text
/// from the server is printed with its control characters as visible escapes.
#[test]
fn server_text_cannot_start_a_line_or_reach_the_terminal_raw() {
    watchdog(Duration::from_secs(60), || {
        let path = fixture_path("field_hazards.py");
        let (output, _) = probe(&[
            "--github",
            "--only",
            "handshake,tools",
            "--",
            "python3",
            path.to_str().unwrap(),
            "names",
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(output.status.success(), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("::")), "{text}");
        for raw in ['\x1b', '\0', '\u{9b}'] {
            assert!(!text.contains(raw), "{raw:?} in {text}");
        }
        assert!(
            text.contains("x\\n::error title=injected::this line"),
            "{text}"
        );
        assert!(text.contains("server evil\\u{1b}[2J\\u{0}name"), "{text}");
        assert!(text.contains("clear\\u{1b}[2J\\u{0}\\u{9b}"), "{text}");

        // The JSON report keeps the names as they are (JSON escapes them itself).
        let (report, _, _) =
            probe_json_with(&[], "field_hazards.py", &["names"], Some("handshake,tools"));
        let names: Vec<&str> = check(&report, "tools")["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names[0],
            "x\n::error title=injected::this line was written by the probed server"
        );
    });
}

/// Field test: a server that pings the client was warned of "requests to a client that
/// declared no capabilities (only ping is allowed)". Pings are not counted there.
#[test]
fn a_server_that_only_pings_the_client_passes_the_capabilities_check() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json_with(&[], "field_hazards.py", &["pings"], Some("capabilities"));
        assert_eq!(status_of(&report, "capabilities"), "PASS", "{report:#}");
        assert_eq!(code, 0);
    });
}

/// Field test: an answer serde_json cannot read (`"minimum": -1e400` in a tools/list schema)
/// was reported as no answer within the timeout. stdout-clean says the answer came and could
/// not be read, and claims no clean stdout.
#[test]
fn an_answer_that_cannot_be_read_is_reported_as_such() {
    watchdog(Duration::from_secs(60), || {
        let (report, _, _) = probe_json_with(
            &[],
            "field_hazards.py",
            &["tiny-minimum"],
            Some("handshake,stdout-clean"),
        );
        let detail = detail_of(&report, "stdout-clean");
        assert_eq!(status_of(&report, "stdout-clean"), "FAIL", "{report:#}");
        assert!(
            detail.starts_with("tools/list answered, but the answer could not be read: "),
            "{detail}"
        );
        assert!(detail.contains("number out of range"), "{detail}");
        assert!(!detail.contains("every stdout line"), "{detail}");
    });
}

/// The rule the liveness findings cite: "the server serves until the client ends the session".
const ALIVE_RULE: &str = "serves until the client ends the session";

/// Field test: a live server whose `tools/list` result has no `tools` array (or not an array)
/// was failed with the liveness rule. The finding cites the shape of the result; stdout is
/// clean (the answer is a message); the liveness rule stays for a server that really exits.
#[test]
fn a_malformed_tools_list_cites_its_shape_not_the_liveness_rule() {
    watchdog(Duration::from_secs(90), || {
        for mode in ["no-tools-array", "tools-not-array"] {
            let (report, code, _) = probe_json_with(
                &[],
                "odd_tools.py",
                &[mode],
                Some("handshake,stdout-clean,tools,capabilities"),
            );
            assert_eq!(code, 1, "{report:#}");
            let tools = check(&report, "tools");
            assert_eq!(tools["status"], "FAIL", "{report:#}");
            assert_eq!(tools["level"], "MUST", "{report:#}");
            let rule = tools["rule"].as_str().unwrap();
            assert!(rule.contains("tools/list result"), "{mode}: {rule}");
            assert!(
                detail_of(&report, "tools").contains("no tools array"),
                "{report:#}"
            );
            assert_eq!(status_of(&report, "stdout-clean"), "PASS", "{report:#}");
            assert_eq!(status_of(&report, "capabilities"), "PASS", "{report:#}");
            assert!(!report.to_string().contains(ALIVE_RULE), "{report:#}");
        }
        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["exits-on-list"], Some("tools"));
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert!(
            tools["rule"].as_str().unwrap().contains(ALIVE_RULE),
            "{report:#}"
        );
        assert!(
            detail_of(&report, "tools").contains("exit status: 3"),
            "{report:#}"
        );
    });
}

/// Field test: tools without a name (none, a number, an empty string) got no finding, and were
/// called with the name "". Each is a MUST failure (`Tool.name` is a required string) and is
/// not called; the named tool beside them still is.
#[test]
fn tools_without_a_name_fail_and_are_not_called() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["nameless"], Some("handshake,tools"));
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert_eq!(tools["level"], "MUST", "{report:#}");
        assert!(
            tools["rule"]
                .as_str()
                .unwrap()
                .contains("every tool has a name"),
            "{report:#}"
        );
        let detail = detail_of(&report, "tools");
        for flaw in [
            "a tool with no name",
            "a tool with a name that is not a string (42)",
            "a tool with an empty name",
        ] {
            assert!(detail.contains(flaw), "{flaw}: {detail}");
        }
        let items = tools["tools"].as_array().unwrap();
        assert_eq!(items.len(), 4, "{report:#}");
        for item in &items[..3] {
            assert_eq!(item["action"], "skipped", "{item}");
            assert!(
                item["detail"]
                    .as_str()
                    .unwrap()
                    .contains("cannot be called"),
                "{item}"
            );
        }
        assert_eq!(items[3]["name"], "ok");
        assert_eq!(items[3]["action"], "called");
    });
}

/// Field test: a tool whose `inputSchema` is not an object schema (`"string"`, `{"type":
/// "string"}`, none) got no finding and was called with the string "mcpipe-probe" as its
/// arguments; with a `properties` beside `"type": "string"`, the cancellation check panicked
/// on it. Each is a MUST failure; the tools are called with `{}` (tools/call arguments are an
/// object), and none is made a cancellation candidate from its properties.
#[test]
fn an_input_schema_that_is_not_an_object_schema_fails_and_gets_empty_arguments() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json_with(
            &[],
            "odd_tools.py",
            &["bad-schemas"],
            Some("handshake,tools,cancellation"),
        );
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert_eq!(tools["level"], "MUST", "{report:#}");
        let rule = tools["rule"].as_str().unwrap();
        assert!(
            rule.contains("inputSchema is a JSON Schema object"),
            "{rule}"
        );
        let detail = detail_of(&report, "tools");
        for flaw in [
            "plain: inputSchema \"string\" is not a JSON Schema object",
            "typed: inputSchema has type \"string\", not \"object\"",
            "absent: no inputSchema",
        ] {
            assert!(detail.contains(flaw), "{flaw}: {detail}");
        }
        assert!(!detail.contains("fine:"), "{detail}");
        for item in tools["tools"].as_array().unwrap() {
            assert_eq!(item["action"], "called", "{item}");
            let detail = item["detail"].as_str().unwrap();
            assert!(detail.starts_with("read-only, {} → a result"), "{item}");
        }
        assert_eq!(status_of(&report, "cancellation"), "SKIP", "{report:#}");
    });
}
