//! The small-block half of `LargeBlockAllocator` (`large_blocks.rs` has the classes and why):
//! each thread keeps the small blocks it frees, a list per class linked through the blocks'
//! first word, and hands them out again last-freed first. Every block comes from `System` with
//! its class's layout, whichever thread frees it, so a block can always go back there: when the
//! thread keeps `CACHED_BYTES` already, when its cache is gone (the thread is ending), and for
//! all of them when the thread ends. Part of `sys`: every `unsafe` block has its `// SAFETY:`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr;

use crate::large_blocks::{class_size, CACHED_BYTES, CLASSES, SMALL_ALIGN};

/// One thread's freed small blocks.
struct Cache {
    /// The last block freed of each class (null: none); each block's first word holds the
    /// next one.
    heads: [Cell<*mut u8>; CLASSES],
    /// The bytes of all the blocks kept.
    bytes: Cell<usize>,
}

// On the thread's way out, every block kept goes back to the system allocator; a block freed
// after this (by another thread-local's destructor) goes there directly (`try_with` fails).
impl Drop for Cache {
    fn drop(&mut self) {
        for (class, head) in self.heads.iter().enumerate() {
            let mut block = head.replace(ptr::null_mut());
            while !block.is_null() {
                // SAFETY: a kept block is free memory of at least 16 bytes, aligned to 16,
                // whose first word was written by `dealloc` with the next block (or null).
                let next = unsafe { block.cast::<*mut u8>().read() };
                // SAFETY: the block came from `System` with this layout and nothing uses it.
                unsafe { System.dealloc(block, class_layout(class)) };
                block = next;
            }
        }
        self.bytes.set(0);
    }
}

thread_local! {
    // Constant-initialised: no lazy set-up, and no allocation on first use (the destructor is
    // registered with the C library's own thread-exit list).
    static CACHE: Cache = const {
        Cache {
            heads: [const { Cell::new(ptr::null_mut()) }; CLASSES],
            bytes: Cell::new(0),
        }
    };
}

/// The layout every block of `class` has with `System`.
#[inline]
fn class_layout(class: usize) -> Layout {
    // SAFETY: the size is a non-zero multiple of the alignment, a power of two, and far from
    // overflowing.
    unsafe { Layout::from_size_align_unchecked(class_size(class), SMALL_ALIGN) }
}

/// A block of `class`: the last one this thread freed, or a new one from `System` (null when
/// that fails). Out of line, as `dealloc`: inlined at every allocation site, the two made the
/// binary's code 18 % larger (2.0 → 2.37 MB) for no time that could be measured.
#[inline(never)]
pub(crate) fn alloc(class: usize) -> *mut u8 {
    let kept = CACHE.try_with(|cache| {
        let block = cache.heads[class].get();
        if !block.is_null() {
            // SAFETY: as in `drop`: a kept block's first word is the next kept block.
            cache.heads[class].set(unsafe { block.cast::<*mut u8>().read() });
            cache.bytes.set(cache.bytes.get() - class_size(class));
        }
        block
    });
    match kept {
        Ok(block) if !block.is_null() => block,
        // SAFETY: the class's layout has a non-zero size.
        _ => unsafe { System.alloc(class_layout(class)) },
    }
}

/// Frees a block of `class`: kept for this thread's next allocation of the class, or given back
/// to `System`.
///
/// # Safety
/// `block` came from [`alloc`] with this class, on any thread, and is not used any more.
#[inline(never)]
pub(crate) unsafe fn dealloc(block: *mut u8, class: usize) {
    let kept = CACHE.try_with(|cache| {
        let bytes = cache.bytes.get() + class_size(class);
        if bytes > CACHED_BYTES {
            return false;
        }
        // SAFETY: the block is free (the caller's promise), at least 16 bytes long and aligned
        // to 16: its first word is ours to write, and holds the list's next block.
        unsafe { block.cast::<*mut u8>().write(cache.heads[class].get()) };
        cache.heads[class].set(block);
        cache.bytes.set(bytes);
        true
    });
    if kept != Ok(true) {
        // SAFETY: every block of the class came from `System` with this layout.
        unsafe { System.dealloc(block, class_layout(class)) };
    }
}

/// The bytes of freed small blocks this thread keeps (for tests).
#[cfg(feature = "internals")]
pub(crate) fn cached_bytes() -> usize {
    CACHE.try_with(|cache| cache.bytes.get()).unwrap_or(0)
}
