use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};

use super::*;
use crate::test_watchdog::watchdog;

/// A keep-alive no test reaches: threads stay.
const STAY: Duration = Duration::from_secs(600);

/// The longest any single wait of these tests may take before it fails.
const BOUND: Duration = Duration::from_secs(10);

/// A stack no thread can be given: every start fails, as at a thread or process limit.
const NO_STACK: usize = 100_000_000_000_000;

/// What the MCP layer does with a job: room first, then the job.
fn start(pool: &mut WorkerPool, job: Job) {
    let room = pool.make_room().expect("a worker thread starts");
    pool.submit(room, job);
}

/// A job that says on `done` that it ran.
fn signal(done: &Sender<()>) -> Job {
    let done = done.clone();
    Box::new(move || done.send(()).unwrap())
}

/// A job that runs until the sender returned with it says so, then says on `done` that it
/// ended.
fn held(done: &Sender<()>) -> (Sender<()>, Job) {
    let (release, held) = mpsc::channel::<()>();
    let done = done.clone();
    let job = Box::new(move || {
        held.recv_timeout(BOUND).unwrap();
        done.send(()).unwrap();
    });
    (release, job)
}

/// Waits (at most [`BOUND`]) until `done` holds for the pool's counts.
fn wait_for(pool: &WorkerPool, what: &str, done: impl Fn(&State) -> bool) {
    let until = Instant::now() + BOUND;
    loop {
        let state = pool.shared.state();
        if done(&state) {
            return;
        }
        assert!(
            Instant::now() < until,
            "not {what} after {BOUND:?}: {state:?}"
        );
        drop(state);
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until the pool has `want` live threads.
fn wait_for_threads(pool: &WorkerPool, want: usize) {
    wait_for(pool, &format!("{want} threads"), |s| s.live == want);
}

/// Waits until every live thread waits for a job.
fn wait_for_idle(pool: &WorkerPool) {
    wait_for(pool, "all idle", |s| s.idle == s.live);
}

#[test]
fn jobs_run_concurrently_and_a_panic_keeps_the_pool_alive() {
    watchdog(|| {
        let mut pool = WorkerPool::new(4, STAY);
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
        let mut got: Vec<i32> = (0..4).map(|_| rx.recv_timeout(BOUND).unwrap()).collect();
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
    });
}

#[test]
fn a_burst_behind_one_idle_thread_still_gets_a_thread_per_job() {
    watchdog(|| {
        let mut pool = WorkerPool::new(8, STAY);
        // One thread, idle once its first job is done.
        let (tx, rx) = mpsc::channel();
        start(&mut pool, signal(&tx));
        rx.recv_timeout(BOUND).unwrap();
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
            rx.recv_timeout(BOUND).unwrap();
        }
        assert_eq!(pool.threads(), 8);
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn dropping_the_pool_joins_its_threads() {
    watchdog(|| {
        let mut pool = WorkerPool::new(2, STAY);
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
    });
}

#[test]
fn idle_threads_end_after_the_keep_alive_and_a_busy_one_does_not() {
    watchdog(|| {
        let mut pool = WorkerPool::new(8, Duration::from_millis(50));
        let (tx, rx) = mpsc::channel();
        let (release, busy) = held(&tx);
        start(&mut pool, busy);
        for _ in 0..3 {
            start(&mut pool, signal(&tx));
        }
        assert!(pool.threads() >= 2, "{} threads", pool.threads());
        for _ in 0..3 {
            rx.recv_timeout(BOUND).unwrap();
        }
        wait_for_threads(&pool, 1);
        // Ten keep-alives later the busy thread is still there, its job still running.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(pool.threads(), 1);
        assert!(rx.try_recv().is_err(), "the held job ended early");
        release.send(()).unwrap();
        rx.recv_timeout(BOUND).unwrap();
        wait_for_threads(&pool, 0);
    });
}

#[test]
fn a_job_after_every_thread_ended_starts_one_again() {
    watchdog(|| {
        let mut pool = WorkerPool::new(2, Duration::from_millis(20));
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            start(&mut pool, signal(&tx));
            rx.recv_timeout(BOUND).unwrap();
            wait_for_threads(&pool, 0);
        }
        // The ended threads were joined, not kept: one handle at most (the last thread's).
        start(&mut pool, signal(&tx));
        rx.recv_timeout(BOUND).unwrap();
        assert!(
            pool.threads.len() <= 2,
            "{} handles kept",
            pool.threads.len()
        );
    });
}

#[test]
fn a_reservation_keeps_the_idle_thread_it_counts_on_from_ending() {
    watchdog(|| {
        let keep_alive = Duration::from_millis(20);
        let mut pool = WorkerPool::new(4, keep_alive);
        let (tx, rx) = mpsc::channel();
        start(&mut pool, signal(&tx));
        rx.recv_timeout(BOUND).unwrap();
        wait_for_idle(&pool);
        // One idle thread: the room relies on it, and the job comes ten keep-alives later (what
        // a thread ending between `make_room` and `submit` would strand).
        let room = pool.make_room().unwrap();
        assert_eq!(pool.threads(), 1);
        std::thread::sleep(keep_alive * 10);
        assert_eq!(pool.threads(), 1, "the thread counted on ended");
        pool.submit(room, signal(&tx));
        rx.recv_timeout(BOUND).expect("the reserved job runs");
        wait_for_threads(&pool, 0);
    });
}

#[test]
fn jobs_submitted_just_as_threads_time_out_are_never_stranded() {
    watchdog(|| {
        // Each round lets the threads idle for about one keep-alive (a little less, as much, a
        // little more) and spreads `make_room` and `submit` over a moment, so that threads time
        // out before, between and after the two; with a keep-alive of zero every round starts
        // threads that find no job yet.
        for keep_alive in [Duration::ZERO, Duration::from_millis(2)] {
            let mut pool = WorkerPool::new(3, keep_alive);
            let (tx, rx) = mpsc::channel();
            for round in 0..600u32 {
                let burst = 1 + round % 3;
                let rooms: Vec<Room> = (0..burst)
                    .map(|_| pool.make_room().expect("a worker thread starts"))
                    .collect();
                std::thread::sleep(Duration::from_micros(u64::from(round % 7) * 100));
                for room in rooms {
                    pool.submit(room, signal(&tx));
                }
                for _ in 0..burst {
                    rx.recv_timeout(BOUND).unwrap_or_else(|_| {
                        panic!(
                            "keep-alive {keep_alive:?}, round {round}: a job was left in the queue: {:?}",
                            pool.shared.state()
                        )
                    });
                }
                let idle = keep_alive + Duration::from_micros(u64::from(round % 11) * 100);
                std::thread::sleep(idle.saturating_sub(Duration::from_micros(500)));
            }
        }
    });
}

#[test]
fn dropping_the_pool_waits_only_for_live_threads() {
    watchdog(|| {
        let mut pool = WorkerPool::new(8, Duration::from_millis(20));
        let (release, held) = mpsc::channel::<()>();
        let flag = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&flag);
        start(
            &mut pool,
            Box::new(move || {
                held.recv_timeout(BOUND).unwrap();
                std::thread::sleep(Duration::from_millis(100));
                seen.store(1, Ordering::Release);
            }),
        );
        let (tx, rx) = mpsc::channel();
        for _ in 0..4 {
            start(&mut pool, signal(&tx));
        }
        for _ in 0..4 {
            rx.recv_timeout(BOUND).unwrap();
        }
        // Every thread but the held one ended, after the last `make_room`: their handles are
        // still in the pool.
        wait_for_threads(&pool, 1);
        release.send(()).unwrap();
        let started = Instant::now();
        drop(pool);
        let took = started.elapsed();
        assert_eq!(
            flag.load(Ordering::Acquire),
            1,
            "the live job was not waited for"
        );
        // The ended threads are not waited for: well under the 2 s grace.
        assert!(took < Duration::from_secs(1), "the drop took {took:?}");
    });
}

#[test]
fn a_pool_whose_threads_ended_and_none_can_start_says_so() {
    watchdog(|| {
        let mut pool = WorkerPool::new(4, Duration::from_millis(20));
        let (tx, rx) = mpsc::channel();
        let (release, busy) = held(&tx);
        start(&mut pool, busy);
        pool.stack_size = Some(NO_STACK);
        // A thread runs: the job waits for it.
        start(&mut pool, signal(&tx));
        assert_eq!(pool.threads(), 1);
        release.send(()).unwrap();
        rx.recv_timeout(BOUND).unwrap();
        rx.recv_timeout(BOUND).unwrap();
        // Once it ended, none is left to wait for: an error, not a job queued for ever.
        wait_for_threads(&pool, 0);
        assert!(pool.make_room().is_err());
        pool.stack_size = None;
        start(&mut pool, signal(&tx));
        rx.recv_timeout(BOUND).unwrap();
    });
}

#[test]
fn a_keep_alive_of_zero_ends_threads_at_once_and_one_of_max_never() {
    watchdog(|| {
        let (tx, rx) = mpsc::channel();
        let mut brief = WorkerPool::new(2, Duration::ZERO);
        let mut lasting = WorkerPool::new(2, Duration::MAX);
        for pool in [&mut brief, &mut lasting] {
            for _ in 0..3 {
                start(pool, signal(&tx));
                rx.recv_timeout(BOUND).expect("the job runs");
                wait_for_idle(pool);
            }
        }
        wait_for_threads(&brief, 0);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(lasting.threads(), 1);
    });
}
