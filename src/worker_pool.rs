//! A small pool of threads for work that may be slow (tools that wait, run commands or ask the
//! client), so that the loop's thread stays free to answer everything else.
//!
//! Threads start on demand, up to the pool's size, and stay for the pool's life. A job that
//! panics is caught (the job itself reports it): the thread goes on, so the pool keeps its size.
//! Jobs wait in an unbounded queue; what bounds it is the loop, which starts no new request
//! while [`Server::max_in_flight`](crate::Server::max_in_flight) answers are owed.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::diagnostics;
use crate::handler::catch_panic;

/// One piece of work.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// How long dropping the pool waits for its threads to finish their jobs.
const JOIN_GRACE: Duration = Duration::from_secs(2);

/// Threads that take jobs from one queue.
#[derive(Debug)]
pub(crate) struct WorkerPool {
    size: usize,
    jobs: Option<Sender<Job>>,
    queue: Arc<Mutex<Receiver<Job>>>,
    threads: Vec<JoinHandle<()>>,
    /// Threads waiting for a job.
    idle: Arc<AtomicUsize>,
    /// Jobs queued and not yet taken by a thread.
    queued: Arc<AtomicUsize>,
    /// Each thread says here that it ended.
    ended_tx: Sender<()>,
    ended: Receiver<()>,
    /// The last thread the pool tried to start could not start (said once on stderr).
    start_failed: bool,
}

impl WorkerPool {
    /// A pool of at most `size` threads (at least one); none starts before the first job.
    pub(crate) fn new(size: usize) -> WorkerPool {
        let (jobs, queue) = mpsc::channel();
        let (ended_tx, ended) = mpsc::channel();
        WorkerPool {
            size: size.max(1),
            jobs: Some(jobs),
            queue: Arc::new(Mutex::new(queue)),
            threads: Vec::new(),
            idle: Arc::new(AtomicUsize::new(0)),
            queued: Arc::new(AtomicUsize::new(0)),
            ended_tx,
            ended,
            start_failed: false,
        }
    }

    /// How many threads have started.
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Makes sure a thread will take the next job: starts one when more jobs would wait than
    /// threads are idle and the pool is not full. Call it before [`WorkerPool::submit`].
    ///
    /// (Counting the waiting jobs matters: in a burst, one idle thread must not be taken as
    /// room for every job of the burst.)
    ///
    /// # Errors
    ///
    /// When the pool has no thread and none can start (`EAGAIN` at a thread or process limit):
    /// a job queued then would wait forever, so the caller answers it instead. With threads
    /// running, one that cannot start only means the job waits for them (said on stderr).
    pub(crate) fn make_room(&mut self) -> io::Result<()> {
        let waiting = self.queued.load(Ordering::Acquire) + 1;
        if waiting <= self.idle.load(Ordering::Acquire) || self.threads.len() >= self.size {
            return Ok(());
        }
        match self.start_thread() {
            Err(e) if self.threads.is_empty() => Err(e),
            Err(e) => {
                if !self.start_failed {
                    diagnostics::line(&format!(
                        "mcpipe: could not start another worker thread ({} run; jobs wait for them): {e}",
                        self.threads.len()
                    ));
                }
                self.start_failed = true;
                Ok(())
            }
            Ok(()) => {
                self.start_failed = false;
                Ok(())
            }
        }
    }

    /// Queues `job` for the pool's threads, after [`WorkerPool::make_room`] said one will take it.
    pub(crate) fn submit(&mut self, job: Job) {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if let Some(jobs) = &self.jobs {
            if let Err(mpsc::SendError(job)) = jobs.send(job) {
                // Every thread is gone (they never end while the pool lives; be safe anyway):
                // run it here rather than lose it.
                self.queued.fetch_sub(1, Ordering::AcqRel);
                let _ = catch_panic(job);
            }
        }
    }

    fn start_thread(&mut self) -> io::Result<()> {
        let queue = Arc::clone(&self.queue);
        let idle = Arc::clone(&self.idle);
        let queued = Arc::clone(&self.queued);
        let ended = self.ended_tx.clone();
        let name = format!("mcpipe-worker-{}", self.threads.len() + 1);
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            loop {
                idle.fetch_add(1, Ordering::AcqRel);
                let job = {
                    let queue = queue.lock().unwrap_or_else(|p| p.into_inner());
                    queue.recv()
                };
                idle.fetch_sub(1, Ordering::AcqRel);
                let Ok(job) = job else { break };
                queued.fetch_sub(1, Ordering::AcqRel);
                // The job answers for itself, panics included; the thread goes on.
                let _ = catch_panic(job);
            }
            let _ = ended.send(());
        })?;
        self.threads.push(handle);
        Ok(())
    }
}

impl Drop for WorkerPool {
    /// Closes the queue and joins the threads once their jobs end, waiting at most
    /// [`JOIN_GRACE`]: a job that ignores cancellation cannot hold the caller forever (its thread
    /// is left to end with the process, and said so on stderr).
    fn drop(&mut self) {
        drop(self.jobs.take());
        let deadline = Instant::now() + JOIN_GRACE;
        let mut ended = 0;
        while ended < self.threads.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.ended.recv_timeout(left) {
                Ok(()) => ended += 1,
                Err(_) => break,
            }
        }
        if ended < self.threads.len() {
            diagnostics::line(&format!(
                "mcpipe: {} worker threads were still busy after {JOIN_GRACE:?}; not waiting for them",
                self.threads.len() - ended
            ));
            return;
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the MCP layer does with a job: room first, then the job.
    fn start(pool: &mut WorkerPool, job: Job) {
        pool.make_room().expect("a worker thread starts");
        pool.submit(job);
    }

    #[test]
    fn jobs_run_concurrently_and_a_panic_keeps_the_pool_alive() {
        let mut pool = WorkerPool::new(4);
        let (tx, rx) = mpsc::channel();
        start(&mut pool, Box::new(|| panic!("a job panics on purpose")));
        let started = Instant::now();
        for i in 0..4 {
            let tx = tx.clone();
            start(
                &mut pool,
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(500));
                    tx.send(i).unwrap();
                }),
            );
        }
        let mut got: Vec<i32> = (0..4)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2, 3]);
        // Four 500 ms jobs on four threads (one of which first caught a panic): well under the
        // 2 s they would take one after another (a generous bound).
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
        assert!(pool.threads() <= 4);
    }

    #[test]
    fn a_burst_behind_one_idle_thread_still_gets_a_thread_per_job() {
        let mut pool = WorkerPool::new(8);
        // One thread, idle once its first job is done.
        let (tx, rx) = mpsc::channel();
        let first = tx.clone();
        start(&mut pool, Box::new(move || first.send(()).unwrap()));
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let started = Instant::now();
        for _ in 0..8 {
            let tx = tx.clone();
            start(
                &mut pool,
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(500));
                    tx.send(()).unwrap();
                }),
            );
        }
        for _ in 0..8 {
            rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        assert_eq!(pool.threads(), 8);
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn dropping_the_pool_joins_its_threads() {
        let mut pool = WorkerPool::new(2);
        let flag = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&flag);
        start(
            &mut pool,
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(50));
                seen.store(1, Ordering::Release);
            }),
        );
        drop(pool);
        assert_eq!(flag.load(Ordering::Acquire), 1);
    }
}
