//! An embedder that ignores `SIGCHLD` (or reaps in its own handler): the kernel, or the
//! embedder, reaps the server, and the client must take "no such child" as "exited" rather
//! than escalate to signals and wait out every grace.
//!
//! A signal's disposition is the whole process's, so the test runs itself again in a child
//! process with `SIGCHLD` ignored (set by Python, which then `exec`s: an ignored signal stays
//! ignored across `exec`), and only that child spawns servers.

mod util;

use std::process::Command;
use std::time::{Duration, Instant};

use mcpipe::ShutdownStage;
use serde_json::json;
use util::client::{fixture, watchdog};

const INNER: &str = "MCPIPE_TEST_SIGCHLD_IGNORED";

#[test]
fn close_is_prompt_when_the_embedder_ignores_sigchld() {
    if std::env::var_os(INNER).is_some() {
        // Its own watchdog: the outer one cannot end this process.
        return watchdog(Duration::from_secs(50), with_sigchld_ignored);
    }
    watchdog(Duration::from_secs(60), || {
        let exe = std::env::current_exe().unwrap();
        let out = Command::new("python3")
            .args([
                "-c",
                "import os, signal, sys\n\
                 signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n\
                 os.execv(sys.argv[1], sys.argv[1:])",
            ])
            .arg(&exe)
            .args([
                "close_is_prompt_when_the_embedder_ignores_sigchld",
                "--exact",
            ])
            .args(["--nocapture", "--test-threads", "1"])
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
    });
}

fn with_sigchld_ignored() {
    // The set-up's check reads /proc: Linux only (elsewhere an ignored signal stays ignored
    // across `exec` all the same, as POSIX requires).
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
    for _ in 0..2 {
        let mut client = fixture("good_server.py").spawn().unwrap();
        client.call_tool("echo", json!({"text": "x"})).unwrap();
        let started = Instant::now();
        let shutdown = client.close();
        // The server exits at the end of its input; the kernel reaps it at once.
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(
            shutdown.status.is_none(),
            "nobody can know the status: {shutdown:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}
