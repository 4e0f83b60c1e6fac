//! The descendants of a spawned server, tracked while it lives so that closing the client ends
//! every one of them: also those that left the server's process group or session (`setsid`),
//! which a signal to the group misses. A handler's command (`child.rs`) is tracked the same way.
//!
//! Once a process's parent dies, the kernel hands it to init (or a subreaper) and the link to
//! the server is gone, so the tree is learned *while the links exist*: the client scans it
//! whenever it waits on the server (at most every [`SCAN_INTERVAL`]) and once more before it
//! shuts the server down. Each process is remembered with its start time, and with a pidfd
//! where the kernel has them, so a pid the kernel reused for a stranger is never signalled.
//!
//! Under a [`Subreaper`](crate::Subreaper) the orphans among them become this process's
//! children: those are reaped once dead (killed, or dead by themselves), each by its own pidfd
//! or pid, never with `waitpid(-1)`, which would take the statuses of the embedder's children.
//!
//! What each platform gets:
//! - Linux: the tree is read from `/proc/PID/task/TID/children` (or, on kernels without it,
//!   from every `/proc/PID/stat`), and every tracked process still alive gets SIGKILL at
//!   close and Drop. A process that was started *and* orphaned between two scans (a double
//!   fork that finishes within [`SCAN_INTERVAL`]) is not seen.
//! - Other systems (macOS, the BSDs): nothing is tracked; close and Drop end the server's
//!   process group only, so a descendant that called `setsid` survives there.

use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::thread;
use std::time::{Duration, Instant};

use crate::sys;

/// How often, at most, the tree is scanned while the client waits on the server.
pub(crate) const SCAN_INTERVAL: Duration = Duration::from_millis(10);

/// How long [`ProcessTree::kill_all`] waits for the processes it killed to die, so that it can
/// reap those that are this process's own children (SIGKILL is delivered asynchronously).
const REAP_WAIT: Duration = Duration::from_millis(500);

/// At most this many descendants are tracked (a fork bomb must not exhaust our fds); the
/// process group kill still reaches those that stayed in the group.
const MAX_TRACKED: usize = 256;

/// One descendant: its pid, and what proves a later process with that pid is the same one.
#[derive(Debug)]
struct Tracked {
    pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22).
    start: u64,
    /// Signals exactly this process, whatever happens to its pid (Linux 5.3 and later).
    pidfd: Option<OwnedFd>,
}

/// The server's descendants seen so far.
#[derive(Debug)]
pub(crate) struct ProcessTree {
    /// `None` once the root was reaped: its pid may then name a stranger.
    root: Option<u32>,
    /// Invariant: no two entries share a pid, and `known.len() <= MAX_TRACKED`.
    known: Vec<Tracked>,
    /// Descendants that died unreaped, as another process's children: when that parent dies
    /// too, they become ours under a subreaper and are reaped then. At most `MAX_TRACKED`.
    dead: Vec<Tracked>,
    last_scan: Option<Instant>,
}

impl ProcessTree {
    /// Tracks the descendants of `root` (the server, which the client signals itself).
    pub(crate) fn new(root: u32) -> ProcessTree {
        ProcessTree {
            root: Some(root),
            known: Vec::new(),
            dead: Vec::new(),
            last_scan: None,
        }
    }

    /// How many descendants are tracked now (alive at the last scan).
    pub(crate) fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether no descendant was alive at the last scan.
    pub(crate) fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// The root was reaped (its pid may be reused): later scans start from the descendants
    /// already tracked, which are still the ones to end.
    pub(crate) fn forget_root(&mut self) {
        self.root = None;
    }

    /// Scans unless the last scan was less than [`SCAN_INTERVAL`] ago.
    pub(crate) fn scan_if_due(&mut self) {
        if self.last_scan.is_none_or(|t| t.elapsed() >= SCAN_INTERVAL) {
            self.scan();
        }
    }

    /// Learns every live descendant of the server and of the processes already tracked (which
    /// may have lost their link to the server), and forgets those that died.
    pub(crate) fn scan(&mut self) {
        self.last_scan = Some(Instant::now());
        if !cfg!(target_os = "linux") {
            return;
        }
        // The dead are no longer tracked as alive; those that died as our children (orphans
        // adopted as a subreaper) are reaped, or they would stay zombies.
        let mut dead = std::mem::take(&mut self.dead);
        for tracked in std::mem::take(&mut self.known) {
            match fate(&tracked) {
                Fate::Alive => self.known.push(tracked),
                _ => dead.push(tracked),
            }
        }
        dead.retain(reap_if_ours);
        dead.truncate(MAX_TRACKED);
        self.dead = dead;
        let mut seen: HashSet<u32> = self.known.iter().map(|t| t.pid).collect();
        let mut stack: Vec<u32> = self.root.into_iter().chain(seen.iter().copied()).collect();
        let mut table = None;
        while let Some(parent) = stack.pop() {
            let children = match children_of(parent) {
                Some(children) => children,
                // No `children` files in this kernel: one read of every process instead.
                None => table
                    .get_or_insert_with(parent_table)
                    .iter()
                    .filter(|&&(_, ppid)| ppid == parent)
                    .map(|&(pid, _)| pid)
                    .collect(),
            };
            for pid in children {
                if Some(pid) == self.root || !seen.insert(pid) || self.known.len() >= MAX_TRACKED {
                    continue;
                }
                if let Some(tracked) = track(pid) {
                    self.known.push(tracked);
                    stack.push(pid);
                }
            }
        }
    }

    /// Sends SIGKILL to every tracked descendant that is still the process it was, and forgets
    /// them all. Those that are our children (orphans adopted by a [`Subreaper`]) are reaped:
    /// waits up to [`REAP_WAIT`] for them to die. The others' parents (init) reap them.
    ///
    /// [`Subreaper`]: crate::Subreaper
    pub(crate) fn kill_all(&mut self) {
        let mut pending: Vec<Tracked> = self.known.drain(..).collect();
        for tracked in &pending {
            signal(tracked, libc::SIGKILL);
        }
        pending.append(&mut self.dead);
        reap_killed(pending, REAP_WAIT);
    }

    /// Asks every tracked descendant that is still the process it was to end in order before
    /// [`ProcessTree::kill_all`]: SIGTERM, then SIGCONT for one that is stopped (see
    /// `sys::terminate_group`).
    pub(crate) fn terminate_all(&self) {
        for signal_number in [libc::SIGTERM, libc::SIGCONT] {
            for tracked in &self.known {
                signal(tracked, signal_number);
            }
        }
    }

    /// Whether a tracked descendant is still alive (not a zombie) and still the process it was.
    pub(crate) fn any_alive(&self) -> bool {
        self.known
            .iter()
            .any(|t| start_time(t.pid) == Some(t.start))
    }
}

/// Sends `signal_number` to a tracked process unless it is gone (or, known by pid only, dead).
fn signal(tracked: &Tracked, signal_number: libc::c_int) {
    match &tracked.pidfd {
        Some(fd) => {
            let _ = sys::pidfd_signal(fd.as_fd(), signal_number);
        }
        None => {
            if start_time(tracked.pid) == Some(tracked.start) {
                if let Ok(pid) = libc::pid_t::try_from(tracked.pid) {
                    let _ = sys::signal_process(pid, signal_number);
                }
            }
        }
    }
}

/// Reaps the killed processes that die as our children, waiting until none of them is alive
/// (or `wait` passed). A process is handed to a new parent when its parent dies, so only once
/// all of them are dead is it known which ones ended up ours.
fn reap_killed(mut pending: Vec<Tracked>, wait: Duration) {
    let until = Instant::now() + wait;
    loop {
        let mut alive = false;
        pending.retain(|t| {
            let running = matches!(fate(t), Fate::Alive);
            alive |= running;
            running || reap_if_ours(t)
        });
        if !alive || Instant::now() >= until {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// Where a tracked process stands.
enum Fate {
    Alive,
    /// Exited, not yet reaped; `ours` when this process is its parent.
    Dead {
        ours: bool,
    },
    /// Reaped (its pid free, or another process's now).
    Gone,
}

fn fate(tracked: &Tracked) -> Fate {
    let Some(fields) = stat_fields(tracked.pid) else {
        return Fate::Gone;
    };
    // fields[0] is the state (field 3), fields[1] the parent (field 4), fields[19] the start.
    if fields.get(19).and_then(|s| s.parse().ok()) != Some(tracked.start) {
        return Fate::Gone;
    }
    match fields.first().map(String::as_str) {
        Some("Z") => Fate::Dead {
            ours: fields.get(1).and_then(|s| s.parse().ok()) == Some(std::process::id()),
        },
        Some("X") | None => Fate::Gone,
        Some(_) => Fate::Alive,
    }
}

/// For a dead process: reaps it if it is our child. Whether to keep it: it is someone else's
/// zombie, whose parent may still die and hand it to us.
fn reap_if_ours(tracked: &Tracked) -> bool {
    match fate(tracked) {
        Fate::Dead { ours: true } => {
            reap(tracked);
            false
        }
        Fate::Dead { ours: false } => true,
        Fate::Alive | Fate::Gone => false,
    }
}

/// Reaps a dead child of ours: exactly that process (its pidfd, or its pid), never any other
/// child, whose status belongs to whoever started it.
fn reap(tracked: &Tracked) {
    if let Some(fd) = &tracked.pidfd {
        match sys::reap_pidfd(fd.as_fd()) {
            // A kernel without `P_PIDFD` (before 5.4): by pid, below.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            _ => return,
        }
    }
    // The pid was ours and dead a moment ago with the start time recorded: only a reap by
    // someone else and a new child of ours given the same pid in between could mislead it.
    if let Ok(pid) = libc::pid_t::try_from(tracked.pid) {
        let _ = sys::reap_pid(pid);
    }
}

/// A live process to track: its start time, and a pidfd opened *before* the start time is
/// read again, so the pidfd is known to name the process whose start time was recorded.
fn track(pid: u32) -> Option<Tracked> {
    let start = start_time(pid)?;
    let pidfd = libc::pid_t::try_from(pid)
        .ok()
        .and_then(|p| sys::pidfd_open(p).ok());
    if pidfd.is_some() && start_time(pid) != Some(start) {
        return None;
    }
    Some(Tracked { pid, start, pidfd })
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and `)`).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.rfind(')')?;
    Some(
        stat.get(close + 1..)?
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// The start time of a live (not zombie) process.
fn start_time(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    // fields[0] is the state (field 3); the start time is field 22.
    if matches!(fields.first().map(String::as_str), Some("Z" | "X") | None) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// The children of every thread of `pid`, from `/proc/PID/task/TID/children`; `None` when the
/// kernel does not have those files (the process itself may be gone: then no children).
fn children_of(pid: u32) -> Option<Vec<u32>> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Some(Vec::new());
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The thread may have just exited; the file missing for a live thread means
                // the kernel lacks it.
                if task.path().exists() {
                    return None;
                }
            }
            Err(_) => {}
        }
    }
    Some(children)
}

/// Every process's pid and parent pid, from `/proc/PID/stat`.
fn parent_table() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let ppid = stat_fields(pid)?.get(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Runs `f` on a thread and fails the test if it takes more than 20 s: nothing here can
    /// hang the suite (the pipes are read only after the shell wrote its line).
    fn bounded(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            f();
            let _ = tx.send(());
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("the test hung"),
            _ => {
                if let Err(panic) = handle.join() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }

    fn alive(pid: u32) -> bool {
        start_time(pid).is_some()
    }

    fn wait_dead(pid: u32) -> bool {
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// Runs `script` under `sh -c`; it prints the pid of a process it started, which is read.
    fn spawn_printing_pid(script: &str) -> (std::process::Child, u32) {
        let mut parent = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(parent.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        (parent, line.trim().parse().unwrap())
    }

    #[test]
    fn a_grandchild_in_its_own_session_is_tracked_and_killed() {
        bounded(|| {
            // sh starts a `setsid` sleep, prints its pid, and waits: a grandchild of this test
            // that left the group and the session of its parent.
            let (mut parent, grandchild) = spawn_printing_pid("setsid sleep 30 & echo $!; wait");
            let mut tree = ProcessTree::new(parent.id());
            // setsid may fork once more (when it leads a group already): the sleep is a
            // descendant either way.
            let end = Instant::now() + Duration::from_secs(5);
            while tree.is_empty() && Instant::now() < end {
                tree.scan();
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(tree.known.iter().any(|t| t.pid == grandchild), "{tree:?}");
            tree.kill_all();
            assert!(
                wait_dead(grandchild),
                "the grandchild {grandchild} survived"
            );
            assert_eq!(tree.len(), 0);
            let _ = parent.kill();
            let _ = parent.wait();
        });
    }

    #[test]
    fn an_orphan_stays_tracked_after_its_parent_dies() {
        bounded(|| {
            // The middle process exits; its child (reparented to init) is still in the tree
            // because it was seen while the link existed.
            let (mut parent, orphan) =
                spawn_printing_pid("sh -c 'sleep 30 & echo $!; sleep 0.3' ; wait");
            let mut tree = ProcessTree::new(parent.id());
            tree.scan();
            assert!(tree.known.iter().any(|t| t.pid == orphan), "{tree:?}");
            // Let the middle process die, then scan again: the orphan is still known.
            std::thread::sleep(Duration::from_millis(600));
            tree.scan();
            assert!(tree.known.iter().any(|t| t.pid == orphan), "{tree:?}");
            tree.kill_all();
            assert!(wait_dead(orphan), "the orphan {orphan} survived");
            let _ = parent.kill();
            let _ = parent.wait();
        });
    }

    #[test]
    fn a_dead_process_is_forgotten_and_never_signalled() {
        bounded(|| {
            let mut child = Command::new("sh").args(["-c", "exit 0"]).spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            assert_eq!(start_time(pid), None);
            assert!(track(pid).is_none());
        });
    }
}
