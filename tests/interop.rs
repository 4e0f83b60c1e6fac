//! Real clients against `mcpipe demo`: the official Python SDK (`interop/py_client.py`) and
//! the official TypeScript SDK (`interop/ts_client.mjs`). Both must be installed by
//! `scripts/setup-interop.sh`; without them these tests fail (they never skip).
//!
//! Each client script prints `ok NAME` / `FAIL NAME: why` per check and exits non-zero on any
//! failure; it has watchdogs of its own, and this test kills it after a bound as well.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const SETUP: &str = "run `bash scripts/setup-interop.sh` to install the MCP SDKs";

/// The longest a client run may take before it is killed.
const BOUND: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a client script; returns (success, combined output). Killed after [`BOUND`].
fn run_client(mut command: Command) -> (bool, String) {
    command
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}; {SETUP}"));
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
    let deadline = Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let text = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default()
    );
    match status {
        Some(status) => (status.success(), text),
        None => (false, format!("killed after {BOUND:?}\n{text}")),
    }
}

fn require(path: &Path, what: &str) {
    assert!(
        path.exists(),
        "{what} is not installed ({} missing); {SETUP}",
        path.display()
    );
}

#[test]
fn python_sdk_client_passes_against_the_demo() {
    let python = root().join("interop/.venv/bin/python");
    require(&python, "the MCP Python SDK");
    let mut command = Command::new(python);
    command
        .arg("interop/py_client.py")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_mcpipe"))
        .arg("demo");
    let (ok, output) = run_client(command);
    assert!(ok, "the Python SDK client failed:\n{output}");
    assert!(output.contains(" 0 failed"), "{output}");
}

#[test]
fn typescript_sdk_client_passes_against_the_demo() {
    require(
        &root().join("interop/node_modules/@modelcontextprotocol/sdk"),
        "the MCP TypeScript SDK",
    );
    let mut command = Command::new("node");
    command
        .arg("interop/ts_client.mjs")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_mcpipe"))
        .arg("demo");
    let (ok, output) = run_client(command);
    assert!(ok, "the TypeScript SDK client failed:\n{output}");
    assert!(output.contains(" 0 failed"), "{output}");
}
