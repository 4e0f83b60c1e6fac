//! The thread the client's servers are forked on.
//!
//! On Linux a server gets SIGKILL when the *thread* that forked it ends (`PR_SET_PDEATHSIG`,
//! see `sys::kill_child_with_parent`), so that a client that crashes leaves no server behind.
//! Forked on the caller's thread, a server would die with whatever thread happened to spawn
//! it: a pool's worker, a scoped thread, a request handler's thread. So every server is forked
//! on one spawner thread instead, which lives while a server it forked may still run: each
//! spawn hands back a [`Lease`], kept with the child until it is reaped, and the last lease to
//! go ends the thread (and joins it), so no thread outlives the clients. Elsewhere (no
//! `PR_SET_PDEATHSIG`) the caller's thread forks, and the lease is empty.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::child::spawn_error;

/// A spawn for the thread: the command, and where its outcome goes.
type Job = (Command, Sender<io::Result<Child>>);

/// The spawner thread, while any lease is held.
struct Spawner {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Leases held: servers forked there that may still run, and spawns under way.
    leases: usize,
}

static SPAWNER: Mutex<Spawner> = Mutex::new(Spawner {
    jobs: None,
    thread: None,
    leases: 0,
});

fn spawner() -> MutexGuard<'static, Spawner> {
    // Every update is one step: a holder's panic leaves the state consistent.
    SPAWNER
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Keeps the spawner thread, and so the parent-death signal of the server it forked, alive.
/// Drop it once the server is reaped (or known dead): the last one ends the thread.
#[derive(Debug)]
pub(crate) struct Lease {
    /// False for the empty lease of a system without a parent-death signal.
    held: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let thread = {
            let mut spawner = spawner();
            spawner.leases -= 1;
            if spawner.leases > 0 {
                return;
            }
            // Closing the job channel ends the thread's loop; it is idle (no spawn is under
            // way: each holds a lease).
            spawner.jobs = None;
            spawner.thread.take()
        };
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// Forks `command` on the spawner thread (Linux; the caller's elsewhere).
pub(crate) fn spawn(command: Command) -> io::Result<(Child, Lease)> {
    if !cfg!(target_os = "linux") {
        let mut command = command;
        return command
            .spawn()
            .map(|child| (child, Lease { held: false }))
            .map_err(|e| spawn_error(&command, e));
    }
    let (reply, outcome) = mpsc::channel();
    // Taken before the job is sent, so that the thread cannot end under it.
    let lease = take_lease()?;
    let sent = spawner()
        .jobs
        .as_ref()
        .map(|jobs| jobs.send((command, reply)).is_ok());
    if sent != Some(true) {
        return Err(io::Error::other("the spawner thread is gone"));
    }
    let child = outcome
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))??;
    Ok((child, lease))
}

/// A lease on the spawner thread, starting it if none runs.
fn take_lease() -> io::Result<Lease> {
    let mut spawner = spawner();
    if spawner.jobs.is_none() {
        let (jobs, incoming) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("mcpipe-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in incoming {
                    let _ = reply.send(command.spawn().map_err(|e| spawn_error(&command, e)));
                }
            })
            .map_err(|e| {
                // Not the program's fault: say so (at a thread or process limit).
                io::Error::new(
                    e.kind(),
                    format!("no thread could be started to fork it: {e}"),
                )
            })?;
        spawner.jobs = Some(jobs);
        spawner.thread = Some(thread);
    }
    spawner.leases += 1;
    Ok(Lease { held: true })
}
