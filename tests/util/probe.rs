//! `mcpipe probe` run as a user runs it: the binary with arguments, under a guard that kills it
//! if the test gives up, and its JSON report read back.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{fixture_path, mcpipe_bin};

/// Runs `mcpipe probe ARGS` and returns its output and how long it took. The probe bounds
/// itself; the watchdog around each test catches a probe that does not.
pub fn probe(args: &[&str]) -> (Output, Duration) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    probe_os(&args)
}

/// As [`probe`], with arguments that need not be UTF-8.
pub fn probe_os(args: &[&OsStr]) -> (Output, Duration) {
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
pub fn probe_json(fixture: &str, only: Option<&str>) -> (Value, i32, Duration) {
    probe_json_with(&[], fixture, &[], only)
}

/// As [`probe_json`], with probe options before the command and arguments for the fixture.
pub fn probe_json_with(
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

pub fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {report:#}"))
}

/// The names of the tools the `tools` check listed, in its order.
pub fn tool_names(report: &Value) -> Vec<&str> {
    check(report, "tools")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

pub fn status_of<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["status"].as_str().unwrap()
}

pub fn detail_of<'a>(report: &'a Value, name: &str) -> &'a str {
    check(report, name)["detail"].as_str().unwrap()
}

/// Reads a JUnit XML file with Python's `xml.etree` (a real XML parser, as strict about
/// well-formedness as the readers CI systems use) and returns what it found: the suite's
/// attributes as `suite`, and per `testcase` its attributes plus the `message` of its
/// `failure` and `skipped` elements and its `system-out` text. A file the parser rejects is a
/// test failure with the parser's message.
pub fn read_junit(path: &Path) -> Value {
    const READER: &str = r#"
import json, sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except ET.ParseError as e:
    print(json.dumps({"error": str(e)}))
    sys.exit(0)
cases = []
for case in root.iter("testcase"):
    c = dict(case.attrib)
    for kind in ("failure", "skipped", "error"):
        found = case.findall(kind)
        c[kind] = [dict(f.attrib) for f in found]
    out = case.find("system-out")
    c["system-out"] = None if out is None else out.text
    cases.append(c)
print(json.dumps({"root": root.tag, "suite": dict(root.attrib), "cases": cases}))
"#;
    let output = Command::new("python3")
        .args(["-c", READER])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the JUnit reader failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let read: Value = serde_json::from_slice(&output.stdout).unwrap();
    if let Some(e) = read.get("error") {
        panic!(
            "xml.etree cannot read the JUnit file: {e}\n{}",
            String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default())
        );
    }
    read
}
