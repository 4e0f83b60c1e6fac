//! One test of this test binary run again in a child process whose `SIGCHLD` is ignored.
//!
//! A signal's disposition is the whole process's, so a test of a program that ignores `SIGCHLD`
//! runs itself again: Python sets the disposition and `exec`s this binary (an ignored signal
//! stays ignored across `exec`), with [`INNER`] set so that the test knows it is the re-run.

use std::process::Command;

/// Set in the re-run's environment.
pub const INNER: &str = "MCPIPE_TEST_SIGCHLD_IGNORED";

/// Whether this process is the re-run, with `SIGCHLD` ignored.
pub fn is_rerun() -> bool {
    std::env::var_os(INNER).is_some()
}

/// Runs the test `name` of this binary again, alone, with `SIGCHLD` ignored, and fails unless
/// it passed. The caller's watchdog bounds the wait; the re-run needs one of its own, as the
/// caller's cannot end it.
pub fn rerun_with_sigchld_ignored(name: &str) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, signal, sys\n\
             signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n\
             os.execv(sys.argv[1], sys.argv[1:])",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INNER, "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the run with SIGCHLD ignored failed:\n{text}"
    );
    assert!(text.contains("1 passed"), "{text}");
}

/// Fails unless `SIGCHLD` is ignored in this process: the re-run's set-up worked. Linux reads
/// it from `/proc` (elsewhere an ignored signal stays ignored across `exec` all the same, as
/// POSIX requires, and the check is skipped).
pub fn assert_sigchld_ignored() {
    if cfg!(target_os = "linux") {
        // SigIgn is a hex mask; SIGCHLD is signal 17 on Linux (bit 16).
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
            .unwrap();
        assert_ne!(
            mask & (1 << 16),
            0,
            "SIGCHLD is not ignored: the set-up failed"
        );
    }
}
