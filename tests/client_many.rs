//! Many clients in one process, as a host that supervises many servers embeds them: what one
//! client says on the process's shared stderr names the server it is about.

mod util;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use util::client::{fixture, watchdog};

const ALONE: &str = "MCPIPE_TEST_MANY_CLIENTS_ALONE";

/// Runs `name` of this binary again, alone, in a child process, and returns its stderr: the
/// clients' diagnostics go to this process's stderr, shared with every test.
fn run_alone(name: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(ALONE, "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the run alone failed:\n{stdout}{stderr}"
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
    stderr
}

#[test]
fn each_clients_stderr_lines_name_its_server() {
    if std::env::var_os(ALONE).is_some() {
        // Its own watchdog: the outer one cannot end this process.
        return watchdog(Duration::from_secs(50), || {
            // Two servers that both write garbage: a plain client and a shared one.
            let mut plain = fixture("garbage.py").log_bad_lines(true).spawn().unwrap();
            let shared = fixture("garbage.py")
                .log_bad_lines(true)
                .spawn_shared()
                .unwrap();
            plain.call_tool("echo", json!({"text": "a"})).unwrap();
            shared.call_tool("echo", json!({"text": "b"})).unwrap();
            mcpipe::stderr_line(&format!(
                "PIDS {} {}",
                plain.pid().unwrap(),
                shared.pid().unwrap()
            ));
            plain.close();
            shared.close();
        });
    }
    watchdog(Duration::from_secs(60), || {
        let stderr = run_alone("each_clients_stderr_lines_name_its_server");
        let pids: Vec<&str> = stderr
            .lines()
            .find_map(|l| l.split_once("PIDS ").map(|(_, pids)| pids))
            .unwrap_or_else(|| panic!("no pids in the child's stderr:\n{stderr}"))
            .split(' ')
            .collect();
        let bad: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("is not a message"))
            .collect();
        assert!(!bad.is_empty(), "no bad-line diagnostics:\n{stderr}");
        for pid in &pids {
            let named = bad
                .iter()
                .filter(|l| {
                    l.starts_with("mcpipe: server python3 ")
                        && l.contains(&format!("garbage.py (pid {pid}): "))
                })
                .count();
            assert!(
                named > 0,
                "no diagnostic names the server with pid {pid}:\n{stderr}"
            );
        }
        let unnamed: Vec<&&str> = bad
            .iter()
            .filter(|l| !pids.iter().any(|p| l.contains(&format!("(pid {p}): "))))
            .collect();
        assert!(
            unnamed.is_empty(),
            "diagnostics that name no server: {unnamed:#?}"
        );
    });
}
