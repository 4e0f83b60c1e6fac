//! Helpers shared by the client and probe tests: fixtures, a watchdog, process checks.
#![allow(dead_code)] // Each test file uses a different part of this.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use mcpipe::{Client, ClientBuilder};

/// The path of a fixture server under tests/fixtures.
pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

/// A client builder for a Python fixture server, quiet about bad lines.
pub(crate) fn fixture(name: &str) -> ClientBuilder {
    Client::builder("python3")
        .arg(fixture_path(name))
        .log_bad_lines(false)
}

/// The `mcpipe` binary built for the tests.
pub(crate) fn mcpipe_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpipe"))
}

/// A client builder for `mcpipe demo`.
pub(crate) fn demo() -> ClientBuilder {
    Client::builder(mcpipe_bin())
        .arg("demo")
        .log_bad_lines(false)
}

/// Runs `f` on its own thread and fails the test if it takes longer than `limit`, so no test
/// can hang. A timed-out test leaves its thread behind, but not its servers: a client's server
/// gets SIGKILL when the thread that spawned it dies, and the test process exits soon after.
pub(crate) fn watchdog<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(limit) {
        Ok(()) => match handle.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            // The test's thread never unwinds: its scratch files go now.
            super::remove_all_scratch();
            panic!("the test did not finish within {limit:?}")
        }
    }
}

/// Whether a process is alive: it exists and is not a zombie.
pub(crate) fn process_alive(pid: u32) -> bool {
    super::procs::alive(pid)
}

/// Waits up to `limit` for a process to die; returns whether it did.
pub(crate) fn wait_dead(pid: u32, limit: Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if !process_alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    !process_alive(pid)
}

/// The text of the first content block of a tool result.
pub(crate) fn first_text(result: &serde_json::Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

/// A file installed under interop/ by `scripts/setup-interop.sh`. Panics (the test fails, it
/// does not skip) when it is missing, saying how to install it.
pub(crate) fn interop(path: &str) -> PathBuf {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("interop")
        .join(path);
    assert!(
        full.exists(),
        "{} is not installed: run scripts/setup-interop.sh first",
        full.display()
    );
    full
}
