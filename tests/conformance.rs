//! The official MCP conformance suite against `mcpipe demo --conformance`, through
//! `scripts/conformance-all.sh`: the stable suite at 2025-11-25 and the alpha suite at
//! 2026-07-28, each behind supergateway on 127.0.0.1 and against its baseline
//! (`interop/conformance-baseline-*.yml`, bridge limitations only), and every `tasks-*`
//! scenario of the alpha suite by name, behind `interop/one_process_bridge.mjs` (one stdio
//! process for all requests, as tasks need), with no baseline. Fails on any unexpected
//! failure or stale baseline entry, and when the tooling is missing (never skips: run
//! `bash scripts/setup-interop.sh`).
//!
//! Bounded: the script bounds each suite run; this test SIGTERMs the script's process group
//! (whose traps stop the bridge and every stdio child) after [`BOUND`], and SIGKILLs it 15 s
//! later if it is still there.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(280);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg("--")
        .arg(format!("-{pgid}"))
        .status();
}

#[test]
fn both_revisions_pass_the_conformance_suite_except_for_bridge_limitations() {
    for tool in [
        "interop/node_modules/node/bin/node",
        "interop/node_modules/supergateway/dist/index.js",
        "interop/node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "interop/node_modules/conformance-alpha/dist/index.js",
    ] {
        assert!(
            root().join(tool).exists(),
            "{tool} is missing: run `bash scripts/setup-interop.sh`"
        );
    }
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance-results");
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut child = Command::new("bash")
        .arg(root().join("scripts/conformance-all.sh"))
        .arg("--mcpipe")
        .arg(env!("CARGO_BIN_EXE_mcpipe"))
        .arg("--output-dir")
        .arg(&out_dir)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash runs scripts/conformance-all.sh");
    let pgid = child.id();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let mut termed = None;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        match termed {
            None if start.elapsed() > BOUND => {
                signal_group(pgid, "TERM");
                termed = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(15) => {
                signal_group(pgid, "KILL");
                let _ = child.wait();
                break None;
            }
            _ => {}
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let report = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    let status = status.unwrap_or_else(|| panic!("stopped after {BOUND:?}\n{report}"));
    assert!(status.success(), "conformance failed ({status}):\n{report}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("conformance: PASS"), "{report}");
    for revision in ["2025-11-25", "2026-07-28", "2026-07-28-tasks"] {
        assert!(
            stdout.contains(&format!("conformance {revision}: ok")),
            "{revision} did not run:\n{report}"
        );
    }
}
