//! An allocator a program may choose, so that megabyte messages cost about two copies of
//! memory without a page fault per 4 KiB of every copy.
//!
//! Echoing a 10 MB message takes four large blocks in turn: the request's line, the text parsed
//! out of it, the text's copy in the answer, and the serialised answer; at most two are alive at
//! once. glibc serves them from its heap once the first one is freed (its mmap threshold rises
//! to that size), where freed blocks stay resident and the next ones rarely fit into them: the
//! process peaks at about 4.5 times the message. Giving every large block back to the kernel
//! (a fixed mmap threshold) brings the peak to two copies, but every block is then faulted in
//! afresh, a page at a time, which halved the throughput. This allocator maps large blocks
//! itself and keeps the last one freed for the next large allocation: the peak stays near two
//! copies, and only about one copy per message is new memory.
//!
//! A library must not change its user's allocator, so nothing in this crate installs it; a
//! program does, with `#[global_allocator]` (the `mcpipe` binary does). The bookkeeping is
//! here, as plain numbers; the calls to the kernel are in `sys/large_alloc.rs`.

// Elsewhere than Linux the allocator is `System` (no `mremap`), and the bookkeeping is unused.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::sync::{Mutex, MutexGuard};

/// Allocations from this size up get their own mapping; smaller ones go to the system
/// allocator. Low enough that a long line's buffer takes the spare early in its growth (the
/// system allocator's part of it is copied across once, and is resident beside the spare until
/// then), high enough that small messages never come here.
pub(crate) const LARGE: usize = 256 * 1024;

/// The granularity of a mapping (and the largest alignment a mapping serves).
pub(crate) const PAGE: usize = 4096;

/// How many live blocks may sit in a mapping longer than they need (a reused spare).
const TRACKED: usize = 32;

/// A global allocator for programs that handle messages of megabytes: blocks of 256 KiB and more
/// are mappings of their own, and the last one freed is kept for the next large allocation
/// instead of being given back, so that a stream of large messages reuses memory that is
/// already resident. Small blocks (1 KiB and less) freed by a thread are kept, by size class,
/// for that thread's next allocations, which then cost a few instructions instead of a call
/// into the system allocator (a small request's ten allocations took a tenth of its time).
/// Everything else goes to the system allocator. On systems without `mremap` (other than
/// Linux) it is the system allocator.
///
/// What it costs: up to one freed large block (the largest recent one) stays resident while
/// the program runs, and up to 64 KiB of freed small blocks per thread until the thread ends.
///
/// # Example
/// ```
/// #[global_allocator]
/// static ALLOCATOR: mcpipe::LargeBlockAllocator = mcpipe::LargeBlockAllocator::new();
///
/// let big = vec![1u8; 10 << 20];
/// assert_eq!(big.iter().map(|&b| usize::from(b)).sum::<usize>(), 10 << 20);
/// ```
#[derive(Debug, Default)]
pub struct LargeBlockAllocator {
    blocks: Mutex<Blocks>,
}

impl LargeBlockAllocator {
    /// The allocator, for a `static` marked `#[global_allocator]`.
    pub const fn new() -> LargeBlockAllocator {
        LargeBlockAllocator {
            blocks: Mutex::new(Blocks::new()),
        }
    }

    /// The bookkeeping, locked. Nothing panics while it is held, so a poisoned lock still
    /// holds consistent numbers.
    pub(crate) fn blocks(&self) -> MutexGuard<'_, Blocks> {
        self.blocks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Blocks up to this size, aligned to at most [`SMALL_ALIGN`], are small: a freed one is kept
/// for the same thread's next allocation of its class (`sys/small_cache.rs`), where glibc's own
/// free and malloc cost about 125 instructions a pair (a small request makes ten such pairs).
pub(crate) const SMALL: usize = 1024;

/// The classes of small blocks are this many bytes apart (and blocks are aligned to it).
pub(crate) const SMALL_ALIGN: usize = 16;

/// How many classes of small blocks there are.
pub(crate) const CLASSES: usize = SMALL / SMALL_ALIGN;

/// The most bytes of freed small blocks one thread keeps; past it they go back to the system.
pub(crate) const CACHED_BYTES: usize = 64 * 1024;

/// The class of a small allocation (`None`: not small): every block of a class is
/// [`class_size`] bytes long, so that any block kept for the class fits any allocation of it.
#[inline]
pub(crate) fn small_class(size: usize, align: usize) -> Option<usize> {
    (size <= SMALL && align <= SMALL_ALIGN).then(|| size.saturating_sub(1) / SMALL_ALIGN)
}

/// The length of every block of a small class.
#[inline]
pub(crate) const fn class_size(class: usize) -> usize {
    (class + 1) * SMALL_ALIGN
}

/// Whether an allocation of `size` bytes aligned to `align` gets its own mapping.
#[inline]
pub(crate) fn is_large(size: usize, align: usize) -> bool {
    size >= LARGE && align <= PAGE
}

/// The length of the mapping that holds `size` bytes exactly: whole pages.
pub(crate) fn pages(size: usize) -> usize {
    size.div_ceil(PAGE) * PAGE
}

/// The large blocks this allocator knows about, as addresses and lengths.
#[derive(Debug, Default)]
pub(crate) struct Blocks {
    /// Live blocks whose mapping is longer than `pages(size)`, as (address, mapping length);
    /// address 0 marks a free slot. Every other live block's mapping is exactly
    /// `pages(size)` long.
    longer: [(usize, usize); TRACKED],
    /// The freed mapping kept for the next large allocation, as (address, length); 0: none.
    spare: (usize, usize),
    /// How many large blocks are live.
    live: usize,
}

impl Blocks {
    const fn new() -> Blocks {
        Blocks {
            longer: [(0, 0); TRACKED],
            spare: (0, 0),
            live: 0,
        }
    }

    /// For a new block of `size` bytes: the spare mapping's address, if it is long enough
    /// (it is then live, recorded with its length); `None` means "map `pages(size)` afresh".
    pub(crate) fn take_spare(&mut self, size: usize) -> Option<usize> {
        let (addr, len) = self.spare;
        if addr == 0 || len < pages(size) {
            self.live += 1;
            return None;
        }
        if len > pages(size) {
            let Some(slot) = self.longer.iter_mut().find(|(a, _)| *a == 0) else {
                self.live += 1;
                return None;
            };
            *slot = (addr, len);
        }
        self.spare = (0, 0);
        self.live += 1;
        Some(addr)
    }

    /// A new block is mapped afresh (zeroed memory never comes from the spare).
    pub(crate) fn mapped(&mut self) {
        self.live += 1;
    }

    /// Mapping the block `take_spare` counted failed: it is not live.
    pub(crate) fn unmapped(&mut self) {
        self.live -= 1;
    }

    /// The length of the mapping of the live block at `addr`, now `size` bytes long.
    pub(crate) fn mapping_len(&self, addr: usize, size: usize) -> usize {
        self.longer
            .iter()
            .find(|(a, _)| *a == addr)
            .map_or(pages(size), |&(_, len)| len)
    }

    /// The live block at `addr` now has a mapping of exactly `pages` of its size (it was
    /// moved or resized): forgets its longer length.
    pub(crate) fn forget(&mut self, addr: usize) {
        if let Some(slot) = self.longer.iter_mut().find(|(a, _)| *a == addr) {
            *slot = (0, 0);
        }
    }

    /// The block at `addr`, `size` bytes long, is freed: it becomes the spare unless the spare
    /// is longer, or two other large blocks are live (then the spare would be a third copy
    /// resident: messages overlap, and memory goes back to the kernel instead). Returns the
    /// mapping to give back to the kernel, if any.
    pub(crate) fn free(&mut self, addr: usize, size: usize) -> Option<(usize, usize)> {
        let len = self.mapping_len(addr, size);
        self.forget(addr);
        self.live = self.live.saturating_sub(1);
        if self.live >= 2 {
            return Some((addr, len));
        }
        if self.spare.0 == 0 {
            self.spare = (addr, len);
            return None;
        }
        if len > self.spare.1 {
            return Some(std::mem::replace(&mut self.spare, (addr, len)));
        }
        Some((addr, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1_000_000;

    #[test]
    fn a_freed_block_is_reused_by_the_next_large_allocation_that_fits() {
        let mut blocks = Blocks::new();
        assert_eq!(blocks.take_spare(10 * MB), None);
        assert_eq!(blocks.free(0x1000_0000, 10 * MB), None);
        // Too large for the spare: mapped afresh (at 0x2000_0000), the spare stays.
        assert_eq!(blocks.take_spare(11 * MB), None);
        assert_eq!(blocks.take_spare(2 * MB), Some(0x1000_0000));
        // No spare left: mapped afresh (at 0x3000_0000).
        assert_eq!(blocks.take_spare(2 * MB), None);
        // The reused mapping keeps its full length, so it can grow in place and is unmapped
        // whole.
        assert_eq!(blocks.mapping_len(0x1000_0000, 2 * MB), pages(10 * MB));
        assert_eq!(
            blocks.free(0x3000_0000, 2 * MB),
            Some((0x3000_0000, pages(2 * MB)))
        );
        assert_eq!(blocks.free(0x2000_0000, 11 * MB), None);
        assert_eq!(
            blocks.free(0x1000_0000, 2 * MB),
            Some((0x1000_0000, pages(10 * MB)))
        );
        assert_eq!(blocks.spare, (0x2000_0000, pages(11 * MB)));
    }

    #[test]
    fn only_the_longest_freed_block_is_kept() {
        let mut blocks = Blocks::new();
        assert_eq!(blocks.free(0x1000_0000, 4 * MB), None);
        assert_eq!(
            blocks.free(0x2000_0000, 10 * MB),
            Some((0x1000_0000, pages(4 * MB)))
        );
        assert_eq!(
            blocks.free(0x3000_0000, 2 * MB),
            Some((0x3000_0000, pages(2 * MB)))
        );
        assert_eq!(blocks.spare, (0x2000_0000, pages(10 * MB)));
    }

    #[test]
    fn a_moved_block_is_forgotten_and_unmapped_at_its_exact_length() {
        let mut blocks = Blocks::new();
        blocks.free(0x1000_0000, 10 * MB);
        assert_eq!(blocks.take_spare(LARGE), Some(0x1000_0000));
        blocks.forget(0x1000_0000);
        assert_eq!(blocks.mapping_len(0x1000_0000, 12 * MB), pages(12 * MB));
        blocks.free(0x5000_0000, 20 * MB);
        assert_eq!(
            blocks.free(0x1000_0000, 12 * MB),
            Some((0x1000_0000, pages(12 * MB)))
        );
    }

    #[test]
    fn the_spare_is_not_reused_when_no_slot_can_record_its_length() {
        let mut blocks = Blocks::new();
        for i in 0..TRACKED {
            blocks.free(0x1000_0000 * (i + 1), 10 * MB);
            assert!(blocks.take_spare(LARGE).is_some());
        }
        blocks.free(0x7000_0000_0000, 10 * MB);
        assert_eq!(blocks.take_spare(LARGE), None);
        // One that needs the whole mapping needs no slot.
        assert_eq!(blocks.take_spare(10 * MB), Some(0x7000_0000_0000));
    }

    #[test]
    fn no_block_is_kept_while_two_others_are_live() {
        let mut blocks = Blocks::new();
        for _ in 0..3 {
            assert_eq!(blocks.take_spare(10 * MB), None);
        }
        assert_eq!(
            blocks.free(0x1000_0000, 10 * MB),
            Some((0x1000_0000, pages(10 * MB)))
        );
        assert_eq!(blocks.free(0x2000_0000, 10 * MB), None);
        assert_eq!(blocks.spare, (0x2000_0000, pages(10 * MB)));
    }

    #[test]
    fn each_small_size_has_a_class_whose_blocks_fit_it() {
        assert_eq!(small_class(1, 1), Some(0));
        assert_eq!(small_class(16, 16), Some(0));
        assert_eq!(small_class(17, 8), Some(1));
        assert_eq!(small_class(SMALL, 16), Some(CLASSES - 1));
        assert_eq!(small_class(SMALL + 1, 8), None);
        assert_eq!(small_class(64, 32), None, "over-aligned");
        for size in 1..=SMALL {
            let class = small_class(size, 1).unwrap();
            assert!(class < CLASSES);
            assert!(class_size(class) >= size && class_size(class) < size + SMALL_ALIGN);
        }
    }

    #[test]
    fn only_large_allocations_aligned_to_a_page_or_less_get_a_mapping() {
        assert!(!is_large(LARGE - 1, 8));
        assert!(is_large(LARGE, PAGE));
        assert!(!is_large(LARGE, 2 * PAGE));
    }
}
