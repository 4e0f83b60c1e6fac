//! An embedder that ignores `SIGCHLD` (or reaps in its own handler): the kernel, or the
//! embedder, reaps the server, and the client must take "no such child" as "exited" rather
//! than escalate to signals and wait out every grace.
//!
//! A signal's disposition is the whole process's, so the test runs itself again in a child
//! process with `SIGCHLD` ignored (set by Python, which then `exec`s: an ignored signal stays
//! ignored across `exec`), and only that child spawns servers.

mod util;

use std::time::{Duration, Instant};

use mcpipe::ShutdownStage;
use serde_json::json;
use util::client::{fixture, watchdog};
use util::sigchld;

#[test]
fn close_is_prompt_when_the_embedder_ignores_sigchld() {
    if sigchld::is_rerun() {
        // Its own watchdog: the outer one cannot end this process.
        return watchdog(Duration::from_secs(50), with_sigchld_ignored);
    }
    watchdog(Duration::from_secs(60), || {
        sigchld::rerun_with_sigchld_ignored("close_is_prompt_when_the_embedder_ignores_sigchld")
    });
}

fn with_sigchld_ignored() {
    sigchld::assert_sigchld_ignored();
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
