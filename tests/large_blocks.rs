//! `LargeBlockAllocator` as this test binary's global allocator: contents survive every kind of
//! resize, a freed large block is reused, zeroed memory is zero, and threads can share it; a
//! freed small block is kept for its thread's next allocation of its class, within a bound.

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

/// A byte pattern for a small block, different for each block (`seed`).
fn small_pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7) as u8).collect()
}

#[test]
fn small_blocks_keep_their_contents_through_every_class_and_into_the_system_sizes() {
    let _dog = util::watchdog("small_contents", util::BOUND);
    // Grown a byte at a time from 1 to 3000: every class boundary (16 bytes apart up to
    // 1 KiB), then out of the small blocks and back in by shrinking.
    let mut v: Vec<u8> = Vec::new();
    for len in 1..3000 {
        v.push((len % 251) as u8);
        v.shrink_to_fit();
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((i + 1) % 251) as u8));
    }
    while v.len() > 1 {
        v.truncate(v.len() - 7.min(v.len() - 1));
        v.shrink_to_fit();
        assert!(v
            .iter()
            .enumerate()
            .all(|(i, &b)| b == ((i + 1) % 251) as u8));
    }
    // Many live small blocks at once, freed in another order than made.
    let blocks: Vec<Vec<u8>> = (0..5000).map(|i| small_pattern(i, 1 + i % 1100)).collect();
    for (i, block) in blocks.iter().enumerate().rev().step_by(2) {
        assert_eq!(block, &small_pattern(i, 1 + i % 1100));
    }
    let zeroed = vec![0u8; 700];
    assert!(zeroed.iter().all(|&b| b == 0), "a reused block is zeroed");
}

#[test]
#[cfg(target_os = "linux")] // elsewhere it is the system allocator
fn a_freed_small_block_is_the_next_one_of_its_class_and_a_thread_keeps_a_bounded_amount() {
    let _dog = util::watchdog("small_reuse", util::BOUND);
    // On a thread of its own, so that no other test's allocations come between.
    thread::spawn(|| {
        let first = vec![1u8; 100];
        let at = first.as_ptr();
        drop(first);
        // 97..=112 bytes: the same class.
        let second: Vec<u8> = std::iter::repeat_n(2u8, 112).collect();
        assert_eq!(second.as_ptr(), at, "the freed block was not reused");
        // Freeing many more than the bound keeps no more than the bound.
        let many: Vec<Vec<u8>> = (0..500).map(|_| vec![3u8; 1000]).collect();
        drop(many);
        let kept = mcpipe::internals::cached_small_bytes();
        assert!(kept > 0, "nothing kept");
        assert!(
            kept <= mcpipe::internals::CACHED_SMALL_BYTES,
            "{kept} bytes kept"
        );
    })
    .join()
    .expect("the thread panicked");
}

#[test]
fn small_blocks_freed_on_other_threads_and_by_ending_threads_stay_sound() {
    let _dog = util::watchdog("small_threads", util::BOUND);
    // Blocks made on one thread are freed on another (kept there, then reused), and threads end
    // with blocks kept (given back as they end), many times over.
    for round in 0..20 {
        let (send, receive) = std::sync::mpsc::channel::<Vec<Vec<u8>>>();
        let makers: Vec<_> = (0..4)
            .map(|t| {
                let send = send.clone();
                thread::spawn(move || {
                    let seed = round * 10 + t;
                    let blocks: Vec<Vec<u8>> = (0..300)
                        .map(|i| small_pattern(seed + i, 1 + i * 3))
                        .collect();
                    send.send(blocks).expect("the receiver is gone");
                    // Some kept on this thread as it ends.
                    drop((0..50).map(|i| vec![0u8; 16 + i]).collect::<Vec<_>>());
                })
            })
            .collect();
        drop(send);
        let freer = thread::spawn(move || {
            for blocks in receive {
                drop(blocks);
                // Reused here: what was freed must be whole memory.
                let again: Vec<Vec<u8>> = (0..300).map(|i| small_pattern(i, 1 + i * 3)).collect();
                for (i, block) in again.iter().enumerate() {
                    assert_eq!(block, &small_pattern(i, 1 + i * 3));
                }
            }
        });
        for maker in makers {
            maker.join().expect("a maker panicked");
        }
        freer.join().expect("the freer panicked");
    }
}
