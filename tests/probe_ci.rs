//! `mcpipe probe` as a CI job uses it: its JUnit XML read by a real XML parser, its JSON report
//! checked field by field against docs/probe.md, its GitHub annotations, each with hostile text
//! from the server (`tests/fixtures/ci_hazards.py`), and its exit status for commands that are
//! not UTF-8 or hold control characters, and the JUnit file a killed probe leaves (each
//! report replaces it in one step).

mod util;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use util::client::{fixture_path, mcpipe_bin, wait_dead, watchdog};
use util::probe::{check, probe, probe_json_with, probe_os, read_junit, tool_names};
use util::procs;

/// A scratch file for a JUnit report, removed first.
fn junit_path(name: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("mcpipe-probe-ci-{name}-{}.xml", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs the probe on `ci_hazards.py MODE` with `--github --junit` and returns the table, the
/// exit status and the JUnit file as Python's xml.etree read it.
fn hazards_with_junit(mode: &str, only: Option<&str>) -> (String, i32, Value) {
    let junit = junit_path(mode);
    let fixture = fixture_path("ci_hazards.py");
    let mut args = vec!["--github", "--junit", junit.to_str().unwrap()];
    if let Some(only) = only {
        args.extend(["--only", only]);
    }
    args.extend(["--", "python3", fixture.to_str().unwrap(), mode]);
    let (output, _) = probe(&args);
    let read = read_junit(&junit);
    let _ = std::fs::remove_file(&junit);
    let table = String::from_utf8(output.stdout).unwrap();
    (table, output.status.code().unwrap_or(-1), read)
}

/// The counts of a JUnit suite add up: `tests` is the number of test cases, `failures` and
/// `skipped` the number of cases with such an element, `errors` is there and 0.
fn assert_counts_add_up(read: &Value) {
    assert_eq!(read["root"], "testsuite", "{read:#}");
    let suite = &read["suite"];
    let cases = read["cases"].as_array().unwrap();
    let count = |kind: &str| {
        cases
            .iter()
            .filter(|c| !c[kind].as_array().unwrap().is_empty())
            .count()
            .to_string()
    };
    assert_eq!(suite["tests"], cases.len().to_string(), "{read:#}");
    assert_eq!(suite["failures"], count("failure"), "{read:#}");
    assert_eq!(suite["skipped"], count("skipped"), "{read:#}");
    assert_eq!(suite["errors"], "0", "{read:#}");
    assert_eq!(count("error"), "0", "{read:#}");
    for case in cases {
        assert_eq!(case["classname"], "mcpipe.probe", "{case}");
        assert!(
            case["time"].as_str().unwrap().parse::<f64>().is_ok(),
            "{case}"
        );
    }
}

/// Field test: a server's text with U+FFFE (or any character XML 1.0 cannot hold) made the
/// JUnit file unreadable: xml.etree said "not well-formed (invalid token)", and a CI system
/// shows no test results at all. Such characters are written as visible escapes; `]]>`, `<`,
/// `&` and quotes as entities; the annotations escape `%`.
#[test]
fn junit_from_a_hostile_server_is_well_formed_and_its_counts_add_up() {
    watchdog(Duration::from_secs(90), || {
        // A FAIL row (unknown-method) and a WARN row (tools) quoting a tool name of HOSTILE.
        let (table, code, read) =
            hazards_with_junit("error", Some("handshake,unknown-method,tools,latency"));
        assert_eq!(code, 1, "{table}");
        assert_counts_add_up(&read);
        assert_eq!(read["suite"]["failures"], "1", "{read:#}");
        let tools = read["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "tools")
            .unwrap();
        let out = tools["system-out"].as_str().unwrap();
        assert!(out.starts_with("WARN: "), "{out}");
        assert!(
            out.contains("bad\\u{fffe}\\u{ffff} ]]> <x a='1'> & \\\"q\\\" 100% a:b"),
            "{out}"
        );

        // A FAIL row quoting the server's stderr (controls, invalid UTF-8), 19 SKIP rows.
        let (table, code, read) = hazards_with_junit("stderr", None);
        assert_eq!(code, 1, "{table}");
        assert_counts_add_up(&read);
        assert_eq!(read["suite"]["skipped"], "19", "{read:#}");
        let handshake = &read["cases"][0];
        let message = handshake["failure"][0]["message"].as_str().unwrap();
        assert!(
            message.contains("bad\\u{fffe}\\u{ffff} ]]> <x a='1'> & \"q\" 100% a:b,c"),
            "{message}"
        );
        assert!(message.contains("\\u{1b}[2J\\u{0} end | next"), "{message}");
        assert!(
            message.contains("\u{fffd}\u{fffd}\u{fffd} raw"),
            "{message}"
        );

        // The annotations: one line each, `%` escaped, nothing of the server's starts a line.
        let annotations: Vec<&str> = table.lines().filter(|l| l.starts_with("::")).collect();
        assert_eq!(annotations.len(), 1, "{table}");
        assert!(
            annotations[0].starts_with("::error title=mcpipe probe handshake (MUST)::"),
            "{table}"
        );
        assert!(annotations[0].contains("100%25 a:b,c"), "{table}");
        assert!(!table.contains('\r'), "{table:?}");
    });
}

/// Checks a report against the schema `mcpipe-probe/1` of docs/probe.md, field by field, and
/// that its verdict and counts agree with the rows and the exit status.
fn assert_schema(report: &Value, code: i32, strict: bool) {
    let keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "schema",
        "target",
        "command",
        "strict",
        "time_scale",
        "verdict",
        "passed",
        "warned",
        "failed",
        "skipped",
        "ms",
        "checks",
    ] {
        assert!(keys.contains(&key), "{key} missing: {report:#}");
    }
    assert_eq!(report["schema"], "mcpipe-probe/1");
    assert!(report["target"].is_string());
    assert!(report["command"]
        .as_array()
        .unwrap()
        .iter()
        .all(Value::is_string));
    assert_eq!(report["strict"], strict);
    assert!(report["time_scale"].is_number());
    assert!(report["ms"].as_f64().unwrap() >= 0.0);
    let checks = report["checks"].as_array().unwrap();
    let count = |status: &str| checks.iter().filter(|c| c["status"] == status).count();
    for (field, status) in [
        ("passed", "PASS"),
        ("warned", "WARN"),
        ("failed", "FAIL"),
        ("skipped", "SKIP"),
    ] {
        assert_eq!(
            report[field].as_u64(),
            Some(count(status) as u64),
            "{field}"
        );
    }
    let verdict = if code == 1 { "FAIL" } else { "PASS" };
    assert_eq!(report["verdict"], verdict, "exit status {code}");
    assert_eq!(code == 1, count("FAIL") > 0);
    for c in checks {
        assert!(c["name"].is_string(), "{c}");
        assert!(["PASS", "WARN", "FAIL", "SKIP"].contains(&c["status"].as_str().unwrap()));
        assert!(["MUST", "SHOULD", "INFO"].contains(&c["level"].as_str().unwrap()));
        assert!(!c["rule"].as_str().unwrap().is_empty(), "{c}");
        assert!(c["ms"].as_f64().unwrap() >= 0.0, "{c}");
        let detail = c["detail"].as_str().unwrap();
        assert!(detail.chars().count() <= 200, "{detail}");
        assert!(!detail.chars().any(char::is_control), "{detail:?}");
        assert!(c["full_detail"].is_string(), "{c}");
        if let Some(tools) = c.get("tools") {
            assert_eq!(c["name"], "tools", "{c}");
            for t in tools.as_array().unwrap() {
                assert!(t["name"].is_string() && t["detail"].is_string(), "{t}");
                let action = t["action"].as_str().unwrap();
                assert!(["called", "skipped", "failed"].contains(&action), "{t}");
            }
        }
    }
}

/// The JSON report of runs with every status, with and without `--strict`, against the schema
/// docs/probe.md documents; the server's text kept whole in `full_detail`.
#[test]
fn the_json_report_follows_its_documented_schema_with_hostile_text() {
    watchdog(Duration::from_secs(90), || {
        let only = Some("handshake,unknown-method,tools,latency");
        let (report, code, _) = probe_json_with(&[], "ci_hazards.py", &["error"], only);
        assert_schema(&report, code, false);
        assert_eq!(check(&report, "tools")["status"], "WARN", "{report:#}");
        let names = tool_names(&report);
        assert!(names[1].starts_with("bad\u{fffe}\u{ffff} ]]>"), "{names:?}");
        assert!(
            names[1].contains("\u{1}\u{1b}[2J\0 end\r\nnext"),
            "{names:?}"
        );

        let (report, code, _) = probe_json_with(&["--strict"], "ci_hazards.py", &["error"], only);
        assert_schema(&report, code, true);
        assert_eq!(check(&report, "tools")["status"], "FAIL", "{report:#}");

        let (report, code, _) = probe_json_with(&[], "ci_hazards.py", &["stderr"], None);
        assert_schema(&report, code, false);
        let full = check(&report, "handshake")["full_detail"].as_str().unwrap();
        assert!(full.contains("\u{1}\u{1b}[2J\0 end\r\nnext"), "{full:?}");
    });
}

/// Field test: a command word that is not UTF-8 (a file name) made the probe panic before it
/// ran (`std::env::args`: exit 101 and a backtrace instead of a report). The command is run as
/// given; an option that is not UTF-8 is a usage error.
#[test]
fn a_command_that_is_not_utf8_is_probed_and_a_bad_option_is_a_usage_error() {
    watchdog(Duration::from_secs(60), || {
        let script = OsStr::from_bytes(b"/nonexistent/mcpipe-\xff.py");
        let args = ["--json", "--only", "handshake", "--", "python3"];
        let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        args.push(script);
        let (output, _) = probe_os(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_schema(&report, 1, false);
        assert_eq!(report["command"][1], "/nonexistent/mcpipe-\u{fffd}.py");

        let (output, _) = probe_os(&[OsStr::from_bytes(b"--only=\xff")]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is not valid UTF-8"), "{stderr}");
    });
}

/// Field test: a probe killed midway (a CI job cancelled, or timed out by the runner) left an
/// empty `--junit` file, which every JUnit reader rejects ("no element found"). The file says
/// the run did not finish until the report replaces it; the killed probe's server dies too.
#[test]
fn a_killed_probe_leaves_a_junit_file_that_says_so_and_no_server() {
    watchdog(Duration::from_secs(60), || {
        let junit = junit_path("killed");
        let fixture = fixture_path("never_answers.py");
        let mut child = Command::new(mcpipe_bin())
            .arg("probe")
            .arg("--junit")
            .arg(&junit)
            .args(["--", "python3"])
            .arg(&fixture)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let probe_pid = child.id();
        // Waits for the handshake check's server (the probe waits 5 s for its answer).
        let started = Instant::now();
        let server = loop {
            let children: Vec<u32> = procs::all()
                .into_iter()
                .filter(|p| p.ppid == probe_pid && p.live())
                .map(|p| p.pid)
                .collect();
            if let Some(&pid) = children.first() {
                break pid;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no server");
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            wait_dead(server, Duration::from_secs(5)),
            "server {server} lives on"
        );
        let read = read_junit(&junit);
        let _ = std::fs::remove_file(&junit);
        assert_eq!(read["suite"]["errors"], "1", "{read:#}");
        assert_eq!(read["suite"]["tests"], "1", "{read:#}");
        let message = read["cases"][0]["error"][0]["message"].as_str().unwrap();
        assert!(message.contains("did not finish"), "{message}");

        // `--list` runs nothing, so it leaves no report (none that says a run did not finish).
        let (output, _) = probe(&["--list", "--junit", junit.to_str().unwrap()]);
        assert!(output.status.success(), "{output:?}");
        assert!(!junit.exists(), "--list wrote {}", junit.display());
    });
}

/// A new, empty directory for one test's reports.
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpipe-probe-ci-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// The names in `dir`, sorted.
fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Starts a probe of a server that never answers, writing `junit` (its handshake check waits
/// 1 s), and returns once its first report ("did not finish") stands.
fn probe_a_silent_server(junit: &std::path::Path, stderr: Stdio) -> std::process::Child {
    let child = Command::new(mcpipe_bin())
        .args([
            "probe",
            "--time-scale",
            "0.2",
            "--only",
            "handshake",
            "--junit",
        ])
        .arg(junit)
        .args(["--", "python3"])
        .arg(fixture_path("never_answers.py"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !std::fs::read_to_string(junit).is_ok_and(|t| t.contains("did not finish")) {
        assert!(started.elapsed() < Duration::from_secs(10), "no report");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Review: the report was written over the `--junit` file in place, so a probe killed
/// during that write left a truncated file no JUnit reader can parse. Each report is now
/// written beside the file and renamed over it: a second name (a hard link) taken for the
/// file before the run keeps the old text, one taken while the run's "did not finish"
/// report stands keeps that, and nothing else is left in the directory.
#[test]
fn each_junit_report_replaces_the_file_in_one_step() {
    watchdog(Duration::from_secs(60), || {
        let dir = fresh_dir("atomic");
        let junit = dir.join("report.xml");
        std::fs::write(&junit, "old report").unwrap();
        std::fs::hard_link(&junit, dir.join("before.xml")).unwrap();
        let mut child = probe_a_silent_server(&junit, Stdio::null());
        std::fs::hard_link(&junit, dir.join("during.xml")).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(1), "the handshake fails");
        let read = read_junit(&junit);
        assert_eq!(read["suite"]["failures"], "1", "{read:#}");
        let before = std::fs::read_to_string(dir.join("before.xml")).unwrap();
        let during = std::fs::read_to_string(dir.join("during.xml")).unwrap();
        let names = names_in(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            before, "old report",
            "the first report was written into the old file"
        );
        assert!(
            during.contains("did not finish"),
            "the final report was written into the first: {during}"
        );
        assert_eq!(names, ["before.xml", "during.xml", "report.xml"]);
    });
}

/// Field review: each report goes to `FILE.PID.tmp` and is renamed over FILE; a write or a
/// rename that fails must not leave that temporary file behind. FILE a directory makes the
/// rename fail: before the run (the first report, a usage error) and at its end (FILE turned
/// into a directory while the probe ran). Either way the probe exits 2 and the directory holds
/// only FILE.
#[test]
fn a_junit_report_that_cannot_be_renamed_into_place_leaves_no_temporary_file() {
    watchdog(Duration::from_secs(60), || {
        let dir = fresh_dir("rename");
        let junit = dir.join("report.xml");

        std::fs::create_dir(&junit).unwrap();
        let fixture = fixture_path("never_answers.py");
        let (output, _) = probe(&[
            "--junit",
            junit.to_str().unwrap(),
            "--",
            "python3",
            fixture.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let before = names_in(&dir);

        std::fs::remove_dir(&junit).unwrap();
        let child = probe_a_silent_server(&junit, Stdio::piped());
        std::fs::remove_file(&junit).unwrap();
        std::fs::create_dir(&junit).unwrap();
        let ended = child.wait_with_output().unwrap();
        let at_end = names_in(&dir);
        let _ = std::fs::remove_dir_all(&dir);

        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("cannot write"), "{stderr}");
        assert_eq!(before, ["report.xml"], "left by the first report");
        let stderr = String::from_utf8_lossy(&ended.stderr);
        assert_eq!(ended.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("cannot write"), "{stderr}");
        assert_eq!(at_end, ["report.xml"], "left by the last report");
    });
}

/// Review: the `probing:` line printed the user's command raw, so an escape sequence in it
/// drove the terminal. A control character is printed escaped, in quotes a shell reads back.
#[test]
fn the_probed_command_is_printed_with_its_control_characters_escaped() {
    watchdog(Duration::from_secs(60), || {
        let (output, _) = probe(&[
            "--only",
            "handshake",
            "--",
            "python3",
            "/nonexistent/\u{1b}[2Jmcpipe\n.py",
        ]);
        let table = String::from_utf8(output.stdout).unwrap();
        let header = table.lines().next().unwrap();
        assert_eq!(
            header, "probing: python3 $'/nonexistent/\\x1b[2Jmcpipe\\n.py'",
            "{table}"
        );
        assert!(!table.contains('\u{1b}'), "{table:?}");
    });
}
