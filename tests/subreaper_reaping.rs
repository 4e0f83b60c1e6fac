//! Under `mcpipe::Subreaper`, a server's grandchild orphaned at close becomes this process's
//! child; the client kills it and must reap it too, or it stays a zombie until the embedder
//! calls `end_descendants` (so must it one that died by itself, unreaped by the server). Only those: a child the embedder started itself keeps its exit
//! status for the embedder. A test binary of its own, because the subreaper setting is for the
//! whole process. Linux only.
#![cfg(target_os = "linux")]

mod util;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use util::client::{fixture, process_alive, watchdog};

const LIMIT: Duration = Duration::from_secs(60);

/// The state letter and parent pid of a process, from /proc/PID/stat.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// Whether `pid` is a zombie child of this process (exited, never reaped).
fn our_zombie(pid: u32) -> bool {
    state_and_parent(pid) == Some(('Z', std::process::id()))
}

#[test]
fn closed_clients_leave_no_zombie_under_a_subreaper() {
    watchdog(LIMIT, || {
        let reaper = mcpipe::Subreaper::new().unwrap();
        // The embedder's own child, exited before the clients close: its status stays its own.
        let mut own = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let path: PathBuf =
            std::env::temp_dir().join(format!("mcpipe-subreaper-reaping-{}", std::process::id()));
        let mut zombies = Vec::new();
        // Rounds 0-2: the grandchild runs until close kills it. Round 3: it dies by itself
        // first, never reaped by its parent (a process below the server), and becomes ours
        // once that parent dies at close.
        for round in 0..4 {
            let _ = std::fs::remove_file(&path);
            let server = match round {
                3 => "zombie_grandchild.py",
                _ => "setsid_grandchild.py",
            };
            let mut client = fixture(server).arg(&path).spawn().unwrap();
            client.ping().unwrap();
            // The client learns the tree while it waits on the server: one more exchange
            // after the tree's scan interval.
            std::thread::sleep(Duration::from_millis(150));
            client.ping().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            let pids: Vec<u32> = text
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
            let grandchild = pids[0];
            assert!(process_alive(grandchild));
            if round == 3 {
                let pid = grandchild.to_string();
                let killed = Command::new("kill").args(["-KILL", &pid]).status();
                assert!(killed.unwrap().success());
                let end = Instant::now() + Duration::from_secs(5);
                while state_and_parent(grandchild).map(|s| s.0) != Some('Z') {
                    assert!(Instant::now() < end, "{grandchild} did not die");
                    std::thread::sleep(Duration::from_millis(10));
                }
                // One more exchange: the client sees it dead (its parent's, not ours yet).
                std::thread::sleep(Duration::from_millis(50));
                client.ping().unwrap();
            }
            client.close();
            // Killed at close; SIGKILL is asynchronous, so give it a moment either way.
            let end = Instant::now() + Duration::from_secs(2);
            let settled = || pids.iter().all(|&p| !process_alive(p) && !our_zombie(p));
            while !settled() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(10));
            }
            for &pid in &pids {
                assert!(!process_alive(pid), "round {round}: {pid} lives");
                if our_zombie(pid) {
                    zombies.push(pid);
                }
            }
        }
        let _ = std::fs::remove_file(&path);
        let status = own.wait().unwrap();
        // Whatever the assertions say, nothing is left behind.
        let ended = reaper.end_descendants(Duration::from_millis(100));
        assert_eq!(zombies, Vec::<u32>::new(), "zombies left by close");
        assert_eq!(
            status.code(),
            Some(7),
            "the embedder's child lost its status"
        );
        assert_eq!(ended, 0);
    });
}
