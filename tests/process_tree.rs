//! No process left behind: `Client::close`, `Drop` and `mcpipe probe` end every descendant of
//! the server, also one that left its process group and session (`setsid`), which a signal to
//! the group cannot reach. Linux only (/proc); elsewhere only the process group is ended.
#![cfg(target_os = "linux")]

mod util;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use util::client::{fixture, fixture_path, mcpipe_bin, process_alive, wait_dead, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// A fresh file for the fixture to append its grandchildren's pids to, removed when dropped
/// (a failed test's too).
fn pid_file(name: &str) -> util::Scratch {
    util::Scratch::new(&format!("mcpipe-setsid-{name}"))
}

/// The pids the fixture wrote.
fn pids(path: &PathBuf) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The session and process group of a live process (fields 5 and 6 of /proc/PID/stat).
fn session_and_group(pid: u32) -> (u32, u32) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    (fields[3].parse().unwrap(), fields[2].parse().unwrap())
}

/// How many of `pids` are still alive, after giving each up to 2 s to die (SIGKILL is
/// delivered asynchronously).
fn survivors(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|&&p| !wait_dead(p, Duration::from_secs(2)))
        .count()
}

/// Starts the fixture, pings it, and returns the client and its grandchild, checked to be
/// alive and outside the server's group and session (so the group kill alone cannot end it).
fn start(path: &PathBuf) -> (mcpipe::Client, u32) {
    let mut client = fixture("setsid_grandchild.py").arg(path).spawn().unwrap();
    client.ping().unwrap();
    let grandchild = pids(path)[0];
    assert!(process_alive(grandchild));
    let server = client.pid().unwrap();
    let (session, group) = session_and_group(grandchild);
    assert_ne!(
        group, server,
        "the grandchild is still in the server's group"
    );
    assert_eq!(
        session, grandchild,
        "the grandchild did not start its own session"
    );
    // The client scans the tree while it waits on the server: give it one more exchange after
    // the tree's scan interval.
    std::thread::sleep(Duration::from_millis(150));
    client.ping().unwrap();
    (client, grandchild)
}

#[test]
fn close_ends_a_grandchild_in_its_own_session() {
    watchdog(LIMIT, || {
        let path = pid_file("close");
        let (mut client, grandchild) = start(&path);
        client.close();
        assert_eq!(survivors(&[grandchild]), 0, "{grandchild} survived close");
    });
}

#[test]
fn drop_ends_a_grandchild_in_its_own_session() {
    watchdog(LIMIT, || {
        let path = pid_file("drop");
        let (client, grandchild) = start(&path);
        drop(client);
        assert_eq!(survivors(&[grandchild]), 0, "{grandchild} survived drop");
    });
}

/// The server exits by itself first: its grandchild is orphaned (reparented), and still ended
/// at close because it was seen while the server lived.
#[test]
fn close_ends_the_orphan_of_a_server_that_already_exited() {
    watchdog(LIMIT, || {
        let path = pid_file("orphan");
        let (mut client, grandchild) = start(&path);
        let server = client.pid().unwrap();
        // Any tools/call makes the fixture exit at once.
        assert!(client.call_tool("anything", serde_json::json!({})).is_err());
        assert!(wait_dead(server, Duration::from_secs(5)));
        assert!(
            process_alive(grandchild),
            "nothing should have killed it yet"
        );
        client.close();
        assert_eq!(survivors(&[grandchild]), 0, "{grandchild} survived close");
    });
}

#[test]
fn the_probe_leaves_no_process_behind() {
    watchdog(Duration::from_secs(120), || {
        let path = pid_file("probe");
        let fixture = fixture_path("setsid_grandchild.py");
        let output = Command::new(mcpipe_bin())
            .args(["probe", "--json", "--", "python3"])
            .arg(&fixture)
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let started = pids(&path);
        // One server (and grandchild) per check at least: the count is meaningful.
        assert!(
            started.len() >= 15,
            "{} grandchildren: {report:#}",
            started.len()
        );
        assert_eq!(survivors(&started), 0, "of {started:?}");
    });
}

/// Live processes whose command line has `word` as an argument.
fn running_with(word: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == word.as_bytes()))
        })
        .filter(|&pid| process_alive(pid))
        .collect()
}

/// Field test: a server that daemonises (a double fork into a session of its own, done before
/// the client's first scan of its tree) left one orphan per server the probe started, and the
/// probe said PASS. The probe is a subreaper: it ends them and says so in each check.
#[test]
fn the_probe_ends_and_reports_daemonised_grandchildren() {
    watchdog(Duration::from_secs(120), || {
        let path = pid_file("daemonize");
        let output = Command::new(mcpipe_bin())
            .args(["probe", "--json", "--only", "handshake,ping-burst,eof-exit"])
            .args(["--", "python3"])
            .arg(fixture_path("field_hazards.py"))
            .arg("daemonize")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let word = path.to_str().unwrap();
        let mut left = running_with(word);
        for _ in 0..200 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            left = running_with(word);
        }
        let started = pids(&path);
        // Ends them before asserting, so a failure leaves nothing behind either.
        for pid in &left {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        // One server (and daemon) per check.
        assert_eq!(started.len(), 3, "{report:#}");
        assert_eq!(left, Vec::<u32>::new(), "left behind: {report:#}");
        for check in report["checks"].as_array().unwrap() {
            assert_eq!(check["status"], "WARN", "{report:#}");
            let detail = check["detail"].as_str().unwrap();
            assert!(
                detail.starts_with("1 process outlived the server"),
                "{detail}"
            );
        }
        assert_eq!(output.status.code(), Some(0), "{report:#}");
    });
}
