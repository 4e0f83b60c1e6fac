//! A spawned server under test: its pipes, what /proc says about it, and how it ends.
//!
//! Every blocking step runs under a deadline; a server that misses one is killed, so a hung
//! server fails the benchmark instead of stalling it.

use std::fs::File;
use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A command to benchmark, with its display name.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) name: String,
    pub(crate) argv: Vec<String>,
}

/// A running server.
#[derive(Debug)]
pub(crate) struct Session {
    /// `None` once `close_and_wait` has taken it.
    child: Option<Child>,
    pub(crate) pid: u32,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) stdout: Option<BufReader<ChildStdout>>,
    /// When `spawn` was called.
    pub(crate) spawned_at: Instant,
}

/// How much the driver reads at once from a server.
pub(crate) const READ_BUFFER: usize = 1 << 20;

impl Session {
    /// Spawns `subject`, pinned to CPU 0 with `taskset -c 0` when `pin` is set; its stderr goes
    /// to `log`.
    pub(crate) fn spawn(subject: &Subject, pin: bool, log: &File) -> Result<Session, String> {
        let mut argv: Vec<&str> = Vec::new();
        if pin {
            argv.extend(["taskset", "-c", "0"]);
        }
        argv.extend(subject.argv.iter().map(String::as_str));
        let spawned_at = Instant::now();
        let stderr = log.try_clone().map_err(|e| format!("log file: {e}"))?;
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", argv.join(" ")))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(|s| BufReader::with_capacity(READ_BUFFER, s));
        Ok(Session {
            pid: child.id(),
            child: Some(child),
            stdin,
            stdout,
            spawned_at,
        })
    }

    /// Runs `work` on a thread; kills the server if it takes longer than `limit`.
    ///
    /// # Errors
    /// The work's error, or a timeout.
    pub(crate) fn within<T: Send + 'static>(
        &mut self,
        limit: Duration,
        work: impl FnOnce() -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = mpsc::channel();
        let worker = thread::spawn(move || {
            let _ = tx.send(work());
        });
        match rx.recv_timeout(limit) {
            Ok(result) => {
                let _ = worker.join();
                result
            }
            Err(_) => {
                if let Some(child) = &mut self.child {
                    let _ = child.kill();
                }
                let _ = worker.join();
                Err(format!(
                    "timed out after {limit:?}; the server (pid {}) was killed",
                    self.pid
                ))
            }
        }
    }

    /// A `VmXXX:` line of /proc/<pid>/status, in bytes.
    pub(crate) fn status_bytes(&self, key: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with(key))?;
        let kib: f64 = line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024.0)
    }

    /// CPU time so far of all the server's live threads, from the scheduler's own count
    /// (`/proc/PID/task/*/schedstat`, nanoseconds: fine enough for one round trip, where
    /// `cpu_seconds`'s ticks are 10 ms).
    pub(crate) fn cpu_nanos(pid: u32) -> Option<u64> {
        let mut total = 0;
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let schedstat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
            total += schedstat.split(' ').next()?.parse::<u64>().ok()?;
        }
        Some(total)
    }

    /// User plus system CPU time so far, in seconds.
    pub(crate) fn cpu_seconds(&self, ticks_per_second: f64) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The command name (field 2) may hold spaces; the fields after its `)` are fixed.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split(' ').collect();
        // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) / ticks_per_second)
    }

    /// Closes the server's stdin and waits for it to exit: the time from the close to the exit.
    ///
    /// # Errors
    /// A server that does not exit within `limit` (it is killed) or fails.
    pub(crate) fn close_and_wait(mut self, limit: Duration) -> Result<Duration, String> {
        let pid = self.pid;
        let Some(mut child) = self.child.take() else {
            return Err("the server was already waited for".to_owned());
        };
        let (tx, rx) = mpsc::channel();
        let waiter = thread::spawn(move || {
            let status = child.wait();
            let _ = tx.send((Instant::now(), status));
        });
        // Let the waiter reach `wait` before the clock starts.
        thread::sleep(Duration::from_millis(2));
        let closed_at = Instant::now();
        drop(self.stdin.take());
        let outcome = match rx.recv_timeout(limit) {
            Ok((exited_at, Ok(status))) if status.success() => Ok(exited_at - closed_at),
            Ok((_, Ok(status))) => Err(format!("the server (pid {pid}) ended with {status}")),
            Ok((_, Err(e))) => Err(format!("waiting for the server: {e}")),
            Err(_) => {
                kill(pid);
                Err(format!(
                    "the server (pid {pid}) did not exit within {limit:?} of stdin EOF; killed"
                ))
            }
        };
        let _ = waiter.join();
        drop(self.stdout.take());
        outcome
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The child is still here only after an early return on an error.
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Kills a process by pid (when its `Child` has moved to a waiting thread).
fn kill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// Pins the calling thread to CPU 0 (with `taskset -p`; the thread ends with its work).
///
/// # Errors
/// When the thread id or taskset is unavailable.
pub(crate) fn pin_this_thread() -> Result<(), String> {
    let link = std::fs::read_link("/proc/thread-self").map_err(|e| format!("thread id: {e}"))?;
    let tid = link
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("thread id: unreadable /proc/thread-self")?
        .to_owned();
    let status = Command::new("taskset")
        .args(["-p", "-c", "0", &tid])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("taskset: {e}"))?;
    if !status.success() {
        return Err(format!("taskset -p -c 0 {tid}: {status}"));
    }
    Ok(())
}

/// Writes all of `bytes`.
///
/// # Errors
/// The write error, as text.
pub(crate) fn send(stdin: &mut ChildStdin, bytes: &[u8]) -> Result<(), String> {
    stdin
        .write_all(bytes)
        .map_err(|e| format!("writing to the server: {e}"))
}
