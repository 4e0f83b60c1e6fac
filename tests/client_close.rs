//! The close sequence: stdin EOF, SIGTERM, SIGKILL, reaping, and no process left behind.

mod util;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use mcpipe::{Error, ShutdownStage};
use util::client::{fixture, process_alive, wait_dead, watchdog};

const LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_well_behaved_server_ends_at_stdin_eof() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let pid = client.pid().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed);
        assert!(shutdown.status.unwrap().success());
        assert!(
            shutdown.elapsed < Duration::from_secs(2),
            "{:?}",
            shutdown.elapsed
        );
        assert!(!process_alive(pid));
        assert!(client.pid().is_none());
    });
}

#[test]
fn closing_twice_is_harmless_and_requests_after_close_fail() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let first = client.close();
        let second = client.close();
        assert_eq!(first, second);
        let err = client.ping().unwrap_err();
        assert!(matches!(err, Error::Closed), "{err}");
        assert_eq!(err.to_string(), "the client is closed");
    });
}

#[test]
fn a_server_that_ignores_eof_and_sigterm_is_killed_within_the_bound() {
    watchdog(LIMIT, || {
        let mut client = fixture("stubborn.py")
            .close_timeouts(Duration::from_millis(300), Duration::from_millis(300))
            .spawn()
            .unwrap();
        client.ping().unwrap();
        let pid = client.pid().unwrap();
        let started = Instant::now();
        let shutdown = client.close();
        let took = started.elapsed();
        assert_eq!(shutdown.stage, ShutdownStage::Killed);
        assert_eq!(shutdown.status.unwrap().signal(), Some(libc::SIGKILL));
        assert!(took >= Duration::from_millis(600), "{took:?}");
        // The two waits plus the bounded reap, and generous slack for a loaded machine.
        assert!(took < Duration::from_millis(600 + 500 + 1500), "{took:?}");
        assert!(!process_alive(pid));
    });
}

#[test]
fn the_default_close_sequence_takes_no_longer_than_its_two_waits() {
    watchdog(LIMIT, || {
        let mut client = fixture("stubborn.py").spawn().unwrap();
        let started = Instant::now();
        let shutdown = client.close();
        let took = started.elapsed();
        assert_eq!(shutdown.stage, ShutdownStage::Killed);
        assert!(took >= Duration::from_secs(4), "{took:?}");
        assert!(took < Duration::from_millis(4000 + 500 + 1500), "{took:?}");
    });
}

/// A stopped server (SIGSTOP, a debugger) sees neither the end of its input nor a SIGTERM
/// until it runs again: the client follows its SIGTERM with SIGCONT, so the server ends on
/// the SIGTERM rather than sitting out the grace for SIGKILL.
#[test]
fn a_stopped_server_is_continued_so_that_it_ends_on_sigterm() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py")
            .close_timeouts(Duration::from_millis(200), Duration::from_secs(20))
            .spawn()
            .unwrap();
        client.ping().unwrap();
        let pid = client.pid().unwrap();
        let stopped = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(stopped.success());
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::Terminated, "{shutdown:?}");
        assert_eq!(shutdown.status.unwrap().signal(), Some(libc::SIGTERM));
        assert!(!process_alive(pid));
    });
}

#[test]
fn terminate_skips_the_eof_step() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py").spawn().unwrap();
        let shutdown = client.terminate(Duration::from_secs(2));
        assert_eq!(shutdown.stage, ShutdownStage::Terminated);
        assert_eq!(shutdown.status.unwrap().signal(), Some(libc::SIGTERM));

        let mut client = fixture("stubborn.py").spawn().unwrap();
        let shutdown = client.terminate(Duration::from_millis(200));
        assert_eq!(shutdown.stage, ShutdownStage::Killed);
    });
}

#[test]
fn a_grandchild_holding_the_pipes_does_not_delay_close_and_is_not_orphaned() {
    watchdog(LIMIT, || {
        let marker = std::env::temp_dir().join(format!("mcpipe-grandchild-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let mut client = fixture("grandchild.py").arg(&marker).spawn().unwrap();
        client.ping().unwrap();
        let grandchild: u32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let _ = std::fs::remove_file(&marker);
        assert!(process_alive(grandchild));
        let shutdown = client.close();
        // The server itself exits at EOF; the grandchild still holds its stdout and stderr, so
        // waiting for pipe EOF would hang. The client waits on the process instead.
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed);
        assert!(
            shutdown.elapsed < Duration::from_secs(2),
            "{:?}",
            shutdown.elapsed
        );
        assert!(
            wait_dead(grandchild, Duration::from_secs(2)),
            "grandchild {grandchild} survived"
        );
    });
}

#[test]
fn dropping_the_client_ends_the_server() {
    watchdog(LIMIT, || {
        let client = fixture("good_server.py").spawn().unwrap();
        let pid = client.pid().unwrap();
        drop(client);
        assert!(!process_alive(pid));
    });
}

#[test]
fn a_server_that_exits_by_itself_is_reaped_at_close() {
    watchdog(LIMIT, || {
        let mut client = fixture("exits_mid_request.py").spawn().unwrap();
        let err = client.ping().unwrap_err();
        assert!(matches!(err, Error::ServerExited { .. }), "{err}");
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::AlreadyExited);
        assert_eq!(shutdown.status.unwrap().code(), Some(3));
    });
}

#[test]
fn a_client_spawned_on_a_thread_that_ends_keeps_its_server() {
    // Linux kills a server when the thread that forked it ends (the parent-death signal that
    // keeps a crashed client from leaving servers behind): a pool's worker or a scoped thread
    // that spawns clients for others must not take their servers with it.
    watchdog(LIMIT, || {
        let (mut client, shared) = std::thread::scope(|scope| {
            let plain = scope.spawn(|| fixture("good_server.py").spawn().unwrap());
            let shared = scope.spawn(|| fixture("good_server.py").spawn_shared().unwrap());
            (plain.join().unwrap(), shared.join().unwrap())
        });
        // Both spawning threads have ended; a signal sent then would have landed by now.
        std::thread::sleep(Duration::from_millis(200));
        client.ping().unwrap();
        shared.ping().unwrap();
        assert_eq!(client.close().stage, ShutdownStage::StdinClosed);
        assert_eq!(shared.close().stage, ShutdownStage::StdinClosed);
    });
}
