//! A small pool of threads for work that may be slow (tools that wait, run commands or ask the
//! client), so that the loop's thread stays free to answer everything else.
//!
//! Threads start on demand, up to the pool's size (a ceiling, not a floor), and a thread that
//! had no job for the pool's keep-alive ends, so that a long-lived server does not hold the
//! stacks of a burst for ever; a later job starts one again. A job that panics is caught (the
//! job itself reports it): the thread goes on. Jobs wait in an unbounded queue; what bounds it
//! is the loop, which starts no new request while
//! [`Server::max_in_flight`](crate::Server::max_in_flight) answers are owed.
//!
//! Every decision (start a thread, rely on an idle one, end one) is taken under one lock, and
//! [`WorkerPool::make_room`] leaves a reservation that a thread must respect before it ends:
//! a thread that times out between `make_room` and [`WorkerPool::submit`] stays, so no job is
//! ever queued with no thread to take it.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::diagnostics;
use crate::handler::catch_panic;
use crate::lock::lock;

/// One piece of work.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long dropping the pool waits for its threads to finish their jobs.
const JOIN_GRACE: Duration = Duration::from_secs(2);

/// The least a thread waits when a reservation keeps it from ending (the job comes within
/// microseconds: [`WorkerPool::submit`] follows [`WorkerPool::make_room`]).
const HELD_WAIT: Duration = Duration::from_millis(1);

/// Threads that take jobs from one queue.
#[derive(Debug)]
pub(crate) struct WorkerPool {
    size: usize,
    /// How long a thread waits for a job before it ends.
    keep_alive: Duration,
    shared: Arc<Shared>,
    /// Each started thread's number (in its name) and handle; a thread that ended stays here
    /// until the next [`WorkerPool::make_room`] or the drop joins it.
    threads: Vec<(usize, JoinHandle<()>)>,
    /// The stack of new threads (`None`: the default); set by tests to make starts fail.
    stack_size: Option<usize>,
    /// The last thread the pool tried to start could not start (said once on stderr).
    start_failed: bool,
}

/// What the pool and its threads share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the pool closes.
    job_ready: Condvar,
    /// Signalled when a thread ends.
    ended: Condvar,
}

/// The counts every decision is taken from, under [`Shared::state`].
#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads started (or starting) that have not decided to end. Invariant: at most the
    /// pool's size.
    live: usize,
    /// Threads waiting for a job. Invariant: `idle <= live`.
    idle: usize,
    /// Jobs promised by [`WorkerPool::make_room`] and not yet submitted. A thread ends only
    /// while the idle threads left cover `jobs.len() + reserved`.
    reserved: usize,
    /// Set by the drop: threads end once the queue is empty.
    closed: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("jobs", &self.jobs.len())
            .field("live", &self.live)
            .field("idle", &self.idle)
            .field("reserved", &self.reserved)
            .field("closed", &self.closed)
            .finish()
    }
}

/// A promise from [`WorkerPool::make_room`] that a thread will take the next job: hand it to
/// [`WorkerPool::submit`] with the job.
#[must_use = "a reservation keeps a thread from ending until it is submitted"]
#[derive(Debug)]
pub(crate) struct Room(());

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

impl WorkerPool {
    /// A pool of at most `size` threads (at least one), each ending after `keep_alive` without
    /// a job; none starts before the first job.
    pub(crate) fn new(size: usize, keep_alive: Duration) -> WorkerPool {
        WorkerPool {
            size: size.max(1),
            keep_alive,
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                job_ready: Condvar::new(),
                ended: Condvar::new(),
            }),
            threads: Vec::new(),
            stack_size: None,
            start_failed: false,
        }
    }

    /// How many threads live (started and not ended).
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.shared.state().live
    }

    /// Makes sure a thread will take the next job: starts one when more jobs would wait than
    /// threads are idle and the pool is not full, and reserves the job's place so that no
    /// thread ends before [`WorkerPool::submit`] queues it.
    ///
    /// (Counting the waiting jobs matters: in a burst, one idle thread must not be taken as
    /// room for every job of the burst.)
    ///
    /// # Errors
    ///
    /// When the pool has no live thread and none can start (`EAGAIN` at a thread or process
    /// limit): a job queued then would wait forever, so the caller answers it instead. With
    /// threads running, one that cannot start only means the job waits for them (said on
    /// stderr).
    pub(crate) fn make_room(&mut self) -> io::Result<Room> {
        self.join_ended();
        let mut state = self.shared.state();
        let waiting = state.jobs.len() + state.reserved + 1;
        if waiting <= state.idle || state.live >= self.size {
            state.reserved += 1;
            return Ok(Room(()));
        }
        // Counted, and the job's place reserved, before the thread runs: otherwise it could
        // find nothing promised and end before the job comes.
        state.live += 1;
        state.reserved += 1;
        drop(state);
        let started = self.start_thread();
        match started {
            Ok(()) => self.start_failed = false,
            Err(e) => {
                let mut state = self.shared.state();
                state.live -= 1;
                if state.live == 0 {
                    state.reserved -= 1;
                    return Err(e);
                }
                if !self.start_failed {
                    diagnostics::line(&format!(
                        "mcpipe: could not start another worker thread ({} run; jobs wait for them): {e}",
                        state.live
                    ));
                }
                self.start_failed = true;
            }
        }
        Ok(Room(()))
    }

    /// Queues `job` for the pool's threads, in the place [`WorkerPool::make_room`] reserved.
    pub(crate) fn submit(&mut self, room: Room, job: Job) {
        let Room(()) = room;
        let mut state = self.shared.state();
        state.reserved -= 1;
        state.jobs.push_back(job);
        drop(state);
        self.shared.job_ready.notify_one();
    }

    /// Joins the threads that ended (at once: they are past their last lock), so that their
    /// handles and numbers do not pile up.
    fn join_ended(&mut self) {
        let mut i = 0;
        while i < self.threads.len() {
            if self.threads[i].1.is_finished() {
                let (_, handle) = self.threads.swap_remove(i);
                let _ = handle.join();
            } else {
                i += 1;
            }
        }
    }

    /// Starts a thread, already counted in `live`, named after the lowest number free.
    fn start_thread(&mut self) -> io::Result<()> {
        let number = (1..)
            .find(|n| self.threads.iter().all(|(taken, _)| taken != n))
            .unwrap_or(0);
        let mut builder = std::thread::Builder::new().name(format!("mcpipe-worker-{number}"));
        if let Some(bytes) = self.stack_size {
            builder = builder.stack_size(bytes);
        }
        let shared = Arc::clone(&self.shared);
        let keep_alive = self.keep_alive;
        let handle = builder.spawn(move || work(&shared, keep_alive))?;
        self.threads.push((number, handle));
        Ok(())
    }
}

/// A thread's life: jobs while there are any, then a wait of at most `keep_alive` for the
/// next; it ends when the wait is over and the other idle threads cover every job queued or
/// reserved, or when the pool closed and the queue is empty.
fn work(shared: &Shared, keep_alive: Duration) {
    let mut state = shared.state();
    let mut idle_since = Instant::now();
    loop {
        if let Some(job) = state.jobs.pop_front() {
            drop(state);
            // The job answers for itself, panics included; the thread goes on.
            let _ = catch_panic(job);
            state = shared.state();
            idle_since = Instant::now();
            continue;
        }
        if state.closed {
            break;
        }
        let mut left = keep_alive.saturating_sub(idle_since.elapsed());
        if left.is_zero() {
            if state.reserved <= state.idle {
                break;
            }
            // A job is promised that the other idle threads do not cover: wait for it, another
            // keep-alive (at least a moment, so that a keep-alive of zero does not spin).
            idle_since = Instant::now();
            left = keep_alive.max(HELD_WAIT);
        }
        state.idle += 1;
        state = match shared.job_ready.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(poisoned) => poisoned.into_inner().0,
        };
        state.idle -= 1;
    }
    state.live -= 1;
    drop(state);
    shared.ended.notify_all();
}

impl Drop for WorkerPool {
    /// Closes the queue and joins the threads once their jobs end, waiting at most
    /// [`JOIN_GRACE`]: a job that ignores cancellation cannot hold the caller forever (its thread
    /// is left to end with the process, and said so on stderr). Threads that already ended
    /// for want of jobs are not waited for.
    fn drop(&mut self) {
        let deadline = Instant::now() + JOIN_GRACE;
        let mut state = self.shared.state();
        state.closed = true;
        self.shared.job_ready.notify_all();
        while state.live > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = match self.shared.ended.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        let busy = state.live;
        drop(state);
        if busy > 0 {
            diagnostics::line(&format!(
                "mcpipe: {busy} worker threads were still busy after {JOIN_GRACE:?}; not waiting for them"
            ));
            return;
        }
        for (_, handle) in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
#[path = "worker_pool_tests.rs"]
mod tests;
