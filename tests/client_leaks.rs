//! Nothing outlives a client (plain or shared): no fd, no thread, no child. One test in this file, so that no
//! other test opens fds or threads while it counts them.

mod util;

use std::time::Duration;

use mcpipe::{Error, RequestOptions};
use serde_json::json;
use util::client::{fixture, watchdog};

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// This process's open fds: `/proc/self/fd` on Linux, `/dev/fd` elsewhere (macOS).
const FDS: &str = if cfg!(target_os = "linux") {
    "/proc/self/fd"
} else {
    "/dev/fd"
};

/// This process's threads: Linux only (`/proc`); elsewhere the count is left unchecked. The
/// stderr sink's writer thread ("mcpipe-stderr") is not counted: it is the process's, not a
/// client's, and runs for a moment after a line whenever stderr is a tty (a run in a terminal).
fn threads() -> Option<usize> {
    cfg!(target_os = "linux").then(|| {
        std::fs::read_dir("/proc/self/task").map_or(0, |tasks| {
            tasks
                .flatten()
                .filter(|task| {
                    std::fs::read_to_string(task.path().join("comm"))
                        .map_or(true, |name| name.trim() != "mcpipe-stderr")
                })
                .count()
        })
    })
}

#[test]
fn no_fd_thread_or_child_outlives_a_client() {
    watchdog(Duration::from_secs(60), || {
        // Warm up: the first client may initialise process-wide state lazily. No thread is
        // part of it: the thread servers are forked on ends with the last of them.
        let threads_at_start = threads();
        drop(fixture("good_server.py").spawn().unwrap());
        assert_eq!(
            threads(),
            threads_at_start,
            "a thread outlives the first client"
        );
        let fds = count(FDS);
        assert!(fds > 2, "no fds listed in {FDS}");
        let threads_before = threads();
        let mut pids = Vec::new();
        for i in 0..10 {
            let mut client = fixture(if i % 2 == 0 {
                "good_server.py"
            } else {
                "grandchild.py"
            })
            .arg(std::env::temp_dir().join(format!("mcpipe-leak-{}-{i}", std::process::id())))
            .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
            .spawn()
            .unwrap();
            client.ping().unwrap();
            pids.push(client.pid().unwrap());
            if i % 3 == 0 {
                client.close();
            }
        }
        // Shared clients: an IO thread each, calls in flight when they end.
        for i in 0..6 {
            let client = fixture("good_server.py")
                .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
                .spawn_shared()
                .unwrap();
            client.ping().unwrap();
            pids.push(client.pid().unwrap());
            let params = json!({"name": "sleep", "arguments": {"ms": 10_000}});
            let call = client
                .start("tools/call", Some(params), &RequestOptions::new())
                .unwrap();
            match i % 3 {
                0 => drop(call),
                1 => {
                    client.close();
                    assert!(matches!(call.wait(), Err(Error::Closed)));
                }
                _ => {
                    let waiter = std::thread::spawn(move || call.wait());
                    drop(client);
                    assert!(matches!(waiter.join().unwrap(), Err(Error::Closed)));
                }
            }
        }
        closed_shared_clients_let_go_at_once(fds, &mut pids);
        for i in 0..10 {
            let _ = std::fs::remove_file(
                std::env::temp_dir().join(format!("mcpipe-leak-{}-{i}", std::process::id())),
            );
        }
        assert_eq!(count(FDS), fds);
        assert_eq!(threads(), threads_before);
        for pid in pids {
            assert!(
                !util::client::process_alive(pid),
                "server {pid} outlived its client"
            );
        }
        // Our children are all reaped: no thread of this process has a child left.
        if cfg!(target_os = "linux") {
            for task in std::fs::read_dir("/proc/self/task").unwrap() {
                let path = task.unwrap().path().join("children");
                let children = std::fs::read_to_string(path).unwrap_or_default();
                assert!(children.trim().is_empty(), "children left: {children}");
            }
        } else {
            let me = std::process::id();
            let children: Vec<_> = util::procs::all()
                .into_iter()
                .filter(|p| p.ppid == me)
                .collect();
            assert!(children.is_empty(), "children left: {children:?}");
        }
    });
}

/// A shared client closed while handles, a call and its canceller are still held (closed by
/// `close`, or by dropping the last handle) has let go of its fds (the IO thread's waker among
/// them) by the time the close returns; what is held then fails cleanly.
fn closed_shared_clients_let_go_at_once(fds: usize, pids: &mut Vec<u32>) {
    let sleep = || json!({"name": "sleep", "arguments": {"ms": 10_000}});
    for by_drop in [false, true] {
        let client = fixture("good_server.py")
            .close_timeouts(Duration::from_millis(500), Duration::from_millis(500))
            .spawn_shared()
            .unwrap();
        pids.push(client.pid().unwrap());
        let call = client
            .start("tools/call", Some(sleep()), &RequestOptions::new())
            .unwrap();
        let canceller = call.canceller();
        let weak = client.downgrade();
        let held = if by_drop {
            drop(client);
            Vec::new()
        } else {
            let clone = client.clone();
            client.close();
            vec![client, clone]
        };
        assert_eq!(
            count("/proc/self/fd"),
            fds,
            "fds still open after the close (by drop: {by_drop})"
        );
        assert!(matches!(call.wait(), Err(Error::Closed)));
        canceller.cancel();
        for other in &held {
            assert!(matches!(other.ping(), Err(Error::Closed)));
            let again = other.start("tools/call", Some(sleep()), &RequestOptions::new());
            assert!(matches!(again, Err(Error::Closed)));
            assert!(other.next_notification(Duration::from_millis(10)).is_none());
            other.close();
        }
        assert_eq!(weak.upgrade().is_some(), !by_drop);
        drop(held);
        assert_eq!(count("/proc/self/fd"), fds);
    }
}
