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

/// Runs `interop/py_client.py` with these options against `mcpipe demo` plus `demo_args`;
/// checks it passed and negotiated `protocol`.
fn python(options: &[&str], demo_args: &[&str], protocol: &str) {
    python_via(options, demo_args, protocol, false);
}

/// The demo's command line, behind `mcpipe wrap` when `wrapped`.
fn demo_command(command: &mut Command, demo_args: &[&str], wrapped: bool) {
    let mcpipe = env!("CARGO_BIN_EXE_mcpipe");
    if wrapped {
        command.arg(mcpipe).args(["wrap", "--name", "demo", "--"]);
    }
    command.arg(mcpipe).arg("demo").args(demo_args);
}

/// [`python`], with the demo behind `mcpipe wrap` when `wrapped`.
fn python_via(options: &[&str], demo_args: &[&str], protocol: &str, wrapped: bool) {
    let python = root().join("interop/.venv/bin/python");
    require(&python, "the MCP Python SDK");
    let mut command = Command::new(python);
    command.arg("interop/py_client.py").args(options).arg("--");
    demo_command(&mut command, demo_args, wrapped);
    let (ok, output) = run_client(command);
    assert!(ok, "the Python SDK client failed:\n{output}");
    assert!(output.contains(" 0 failed"), "{output}");
    assert!(
        output.contains(&format!("protocol {protocol}")),
        "expected protocol {protocol}:\n{output}"
    );
}

/// Runs `interop/ts_client.mjs` with these options against `mcpipe demo` plus `demo_args`.
fn typescript(options: &[&str], demo_args: &[&str]) {
    typescript_via(options, demo_args, false);
}

/// [`typescript`], with the demo behind `mcpipe wrap` when `wrapped`.
fn typescript_via(options: &[&str], demo_args: &[&str], wrapped: bool) {
    require(
        &root().join("interop/node_modules/@modelcontextprotocol/sdk"),
        "the MCP TypeScript SDK",
    );
    let mut command = Command::new("node");
    command.arg("interop/ts_client.mjs").args(options).arg("--");
    demo_command(&mut command, demo_args, wrapped);
    let (ok, output) = run_client(command);
    assert!(ok, "the TypeScript SDK client failed:\n{output}");
    assert!(output.contains(" 0 failed"), "{output}");
}

/// The Python SDK 2.3.0 probes `server/discover` first and so speaks 2026-07-28 to the demo.
#[test]
fn python_sdk_client_passes_against_the_demo() {
    python(&[], &[], "2026-07-28");
}

/// The same checks with the SDK forced to the handshake (`initialize`) era.
#[test]
fn python_sdk_client_in_the_handshake_era_passes_against_the_demo() {
    python(&["--connect", "legacy"], &[], "2025-11-25");
}

/// Tools and a prompt that need input from the client: `input_required` results that the SDK
/// resolves with its callbacks and retries (2026-07-28).
#[test]
fn python_sdk_answers_input_required_results() {
    python(&["--mode", "inputs"], &["--conformance"], "2026-07-28");
}

/// The same tools in the handshake era: the server asks with requests while the call waits.
#[test]
fn python_sdk_answers_server_requests_in_the_handshake_era() {
    python(
        &["--mode", "inputs", "--connect", "legacy"],
        &["--conformance"],
        "2025-11-25",
    );
}

#[test]
fn typescript_sdk_client_passes_against_the_demo() {
    typescript(&[], &[]);
}

/// The TypeScript SDK 1.32.2 speaks the handshake era only: inputs are server requests.
#[test]
fn typescript_sdk_answers_server_requests() {
    typescript(&["--mode", "inputs"], &["--conformance"]);
}

/// The official clients through `mcpipe wrap` (the demo behind it): the wrapper is transparent
/// to both eras, to server-to-client requests and to the close sequence.
#[test]
fn python_sdk_client_passes_through_mcpipe_wrap() {
    python_via(&[], &[], "2026-07-28", true);
    python_via(&["--connect", "legacy"], &[], "2025-11-25", true);
}

#[test]
fn python_sdk_answers_server_requests_through_mcpipe_wrap() {
    python_via(
        &["--mode", "inputs", "--connect", "legacy"],
        &["--conformance"],
        "2025-11-25",
        true,
    );
}

#[test]
fn typescript_sdk_client_passes_through_mcpipe_wrap() {
    typescript_via(&[], &[], true);
    typescript_via(&["--mode", "inputs"], &["--conformance"], true);
}
