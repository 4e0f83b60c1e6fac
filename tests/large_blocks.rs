//! `LargeBlockAllocator` as this test binary's global allocator: contents survive every kind of
//! resize, a freed large block is reused, zeroed memory is zero, and threads can share it.

mod util;

use std::sync::Mutex;
use std::thread;

use mcpipe::LargeBlockAllocator;

#[global_allocator]
static ALLOCATOR: LargeBlockAllocator = LargeBlockAllocator::new();

/// The tests run in parallel threads of one process, and the spare block is process-wide:
/// those that look at which block is reused take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const MB: usize = 1_000_000;

/// A byte that depends on its position, so that a misplaced or lost page shows.
fn pattern(i: usize) -> u8 {
    (i % 251) as u8 ^ (i / 4096) as u8
}

/// Checks every 97th byte (a prime, so every page is seen at several offsets): enough to catch
/// a page lost or misplaced, and fast in a debug build.
fn check(v: &[u8]) {
    if let Some(i) = (0..v.len()).step_by(97).find(|&i| v[i] != pattern(i)) {
        panic!("byte {i} of {} is {}, not {}", v.len(), v[i], pattern(i));
    }
}

fn fill_to(v: &mut Vec<u8>, len: usize) {
    let from = v.len();
    v.extend((from..len).map(pattern));
}

#[test]
fn contents_survive_growing_and_shrinking_across_the_large_size() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _dog = util::watchdog("contents_survive", util::BOUND);
    let mut v = Vec::new();
    // Small, then across the large size (256 KiB), then by doubling (moved or grown in place)
    // to 12 MB.
    for len in [1000, 100_000, 1 << 20, 3 * MB, 12 * MB] {
        fill_to(&mut v, len);
        check(&v);
    }
    // Back under 256 KiB: into the system allocator, the mapping freed.
    v.truncate(100_000);
    v.shrink_to_fit();
    check(&v);
    // And up again: this time into the spare mapping, then past its end.
    fill_to(&mut v, 2 * MB);
    check(&v);
    fill_to(&mut v, 20 * MB);
    check(&v);
    v.truncate(5 * MB);
    v.shrink_to_fit();
    check(&v);
}

#[test]
#[cfg(target_os = "linux")] // elsewhere it is the system allocator
fn a_freed_large_block_is_reused_by_the_next_one_that_fits() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _dog = util::watchdog("reused", util::BOUND);
    let first: Vec<u8> = Vec::with_capacity(10 * MB);
    let at = first.as_ptr();
    drop(first);
    let mut second: Vec<u8> = Vec::with_capacity(4 * MB);
    assert_eq!(second.as_ptr(), at, "the freed 10 MB block was not reused");
    // It keeps the whole mapping: growing within it does not move it.
    fill_to(&mut second, 9 * MB);
    assert_eq!(second.as_ptr(), at);
    check(&second);
}

#[test]
fn zeroed_memory_is_zero_even_when_a_used_block_is_spare() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _dog = util::watchdog("zeroed", util::BOUND);
    drop(vec![0xA5u8; 8 * MB]);
    let zeroed = vec![0u8; 8 * MB];
    assert!(zeroed.iter().all(|&b| b == 0));
}

#[test]
fn threads_allocate_resize_and_free_large_blocks_at_once() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _dog = util::watchdog("threads", util::BOUND);
    let workers: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                for round in 0..8 {
                    let mut v = Vec::new();
                    fill_to(&mut v, (1 + (t + round) % 5) * MB);
                    check(&v);
                    v.truncate(MB / 10);
                    v.shrink_to_fit();
                    fill_to(&mut v, 3 * MB);
                    check(&v);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("a worker panicked");
    }
}
