//! The official MCP conformance suite against `mcpipe demo --conformance`, through
//! `scripts/conformance-all.sh`: the stable suite at 2025-11-25 and the alpha suite at
//! 2026-07-28, each behind supergateway on 127.0.0.1 and against its baseline
//! (`interop/conformance-baseline-*.yml`, bridge limitations only), and every `tasks-*`
//! scenario of the alpha suite by name, behind `interop/one_process_bridge.mjs` (one stdio
//! process for all requests, as tasks need), with no baseline. Fails on any unexpected
//! failure or stale baseline entry, and when the tooling is missing (never skips: run
//! `bash scripts/setup-interop.sh`).
//!
//! And our client against the suites' *client* scenarios, through
//! `scripts/conformance-client.sh`: `examples/conformance_client.rs` drives `mcpipe::Client`
//! against each scenario's HTTP server through `interop/http_stdio_bridge.mjs`.
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

mod util;

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

/// The two runs take turns: each starts many Node processes, and timing checks of the suites
/// should not compete for the CPU with the other run.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `bash SCRIPT ARGS` from the repository root in its own process group, bounded by
/// [`BOUND`]; returns the exit status, stdout and stderr (fails the test when the bound hit).
fn run_script(
    script: &str,
    args: &[&std::ffi::OsStr],
) -> (std::process::ExitStatus, String, String) {
    // A poisoned lock only means the other run failed; this one can still run.
    let _turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut child = Command::new("bash")
        .arg(root().join(script))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("bash runs {script}: {e}"));
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
    let status = status.unwrap_or_else(|| {
        panic!("{script} stopped after {BOUND:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
    });
    (status, stdout, stderr)
}

fn assert_tools_installed() {
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
}

#[test]
fn both_revisions_pass_the_conformance_suite_except_for_bridge_limitations() {
    assert_tools_installed();
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance-results");
    let _ = std::fs::remove_dir_all(&out_dir);
    let (status, stdout, stderr) = run_script(
        "scripts/conformance-all.sh",
        &[
            "--mcpipe".as_ref(),
            env!("CARGO_BIN_EXE_mcpipe").as_ref(),
            "--output-dir".as_ref(),
            out_dir.as_os_str(),
        ],
    );
    let report = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
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

/// Our client (examples/conformance_client.rs) against every client scenario a stdio client
/// can take, through interop/http_stdio_bridge.mjs; the script fails on any failed check and
/// on any client scenario of the suites it neither runs nor names with a reason.
#[test]
fn our_client_passes_the_client_scenarios_a_stdio_client_can_take() {
    assert_tools_installed();
    let client = util::example_binary("conformance_client");
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("conformance-client-results");
    let _ = std::fs::remove_dir_all(&out_dir);
    let (status, stdout, stderr) = run_script(
        "scripts/conformance-client.sh",
        &[
            "--client".as_ref(),
            client.as_os_str(),
            "--output-dir".as_ref(),
            out_dir.as_os_str(),
        ],
    );
    let report = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(
        status.success(),
        "client conformance failed ({status}):\n{report}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("conformance-client: PASS (12 of 12"),
        "{report}"
    );
}
