//! The large-block allocator's calls to the kernel (`large_blocks.rs` has the bookkeeping and
//! why), and the prefault of a buffer about to be written. Part of `sys`: every `unsafe` block
//! has its `// SAFETY:` line.

/// Asks the kernel to fault in, in one call, the whole pages inside `buf` (memory about to be
/// written), where the writes would otherwise take one page fault per 4 KiB page. A hint:
/// a kernel without `MADV_POPULATE_WRITE` (before Linux 5.14) or any failure changes nothing.
#[cfg(target_os = "linux")]
pub(crate) fn prefault(buf: &mut [std::mem::MaybeUninit<u8>]) {
    const PAGE: usize = 4096;
    let start = buf.as_mut_ptr() as usize;
    let first = start.next_multiple_of(PAGE);
    let end = (start + buf.len()) / PAGE * PAGE;
    if end > first {
        // SAFETY: [first, end) lies inside `buf`, memory this process owns and may write;
        // MADV_POPULATE_WRITE faults its pages in as a write would, without changing any byte.
        unsafe {
            libc::madvise(
                first as *mut libc::c_void,
                end - first,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
}

/// Elsewhere the writes fault the pages in themselves.
#[cfg(not(target_os = "linux"))]
pub(crate) fn prefault(_buf: &mut [std::mem::MaybeUninit<u8>]) {}

/// A fresh private anonymous mapping of `len` bytes (zero-filled), or null.
#[cfg(target_os = "linux")]
fn map_anonymous(len: usize) -> *mut u8 {
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: a new anonymous mapping at an address the kernel chooses touches no existing
    // memory; MAP_FAILED is turned into null below.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0) };
    if addr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        addr.cast()
    }
}

// The large-block allocator (`large_blocks.rs` has the bookkeeping and why). Every large block
// is a mapping whose address and length the bookkeeping knows; the lock is held across each
// call to the kernel, so that an address unmapped or moved cannot be recorded by another
// thread before its old record is gone. Other blocks take a size test and go to the thread's
// small-block lists (`small_cache.rs`) or to `System`; both the lists and the large paths are
// out of line (the large ones cold), so that what is inlined at each allocation stays short.
#[cfg(target_os = "linux")]
impl crate::large_blocks::LargeBlockAllocator {
    #[cold]
    #[inline(never)]
    fn alloc_large(&self, size: usize) -> *mut u8 {
        let mut blocks = self.blocks();
        match blocks.take_spare(size) {
            Some(addr) => addr as *mut u8,
            None => {
                let new = map_anonymous(crate::large_blocks::pages(size));
                if new.is_null() {
                    blocks.unmapped();
                }
                new
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn dealloc_large(&self, ptr: *mut u8, size: usize) {
        let mut blocks = self.blocks();
        if let Some((addr, len)) = blocks.free(ptr as usize, size) {
            // SAFETY: [addr, addr + len) is a whole mapping of ours that nothing uses any more.
            unsafe { libc::munmap(addr as *mut libc::c_void, len) };
        }
    }

    /// `realloc` of a large block to a large size: in place when the mapping is long enough,
    /// else `mremap`.
    #[cold]
    #[inline(never)]
    fn realloc_large(&self, ptr: *mut u8, size: usize, new_size: usize) -> *mut u8 {
        use crate::large_blocks::pages;
        let mut blocks = self.blocks();
        let len = blocks.mapping_len(ptr as usize, size);
        let wanted = pages(new_size);
        if wanted == len || (wanted < len && len != pages(size)) {
            // It fits the mapping it has (a reused spare keeps its whole length).
            return ptr;
        }
        // SAFETY: [ptr, ptr + len) is a whole mapping of ours; mremap moves or resizes it with
        // its contents, or fails and leaves it as it was.
        let new = unsafe { libc::mremap(ptr.cast(), len, wanted, libc::MREMAP_MAYMOVE) };
        if new == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        blocks.forget(ptr as usize);
        new.cast()
    }

    /// `realloc` between kinds of block (small, system, large): allocate, copy, free.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`.
    #[inline(never)]
    unsafe fn move_block(
        &self,
        ptr: *mut u8,
        layout: std::alloc::Layout,
        new_size: usize,
    ) -> *mut u8 {
        use std::alloc::GlobalAlloc;
        // SAFETY: GlobalAlloc's contract: `new_size`, rounded up to the alignment, does not
        // overflow, and is not zero.
        let new_layout =
            unsafe { std::alloc::Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `new_layout` is valid and non-zero.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live, distinct, and at least this long.
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
            // SAFETY: `ptr` is live with `layout`, and no longer used.
            unsafe { self.dealloc(ptr, layout) };
        }
        new
    }
}

#[cfg(target_os = "linux")]
// SAFETY: a small layout gets a block of its class (`small_cache`: `System`'s, at least that
// long and aligned to 16, kept or new); a large one a page-aligned mapping of at least
// `pages(size)` bytes (so `align <= PAGE` is met), live until `dealloc`; the rest goes to
// `System` unchanged. Every block is freed by the kind that made it, since a layout's kind
// depends only on its size and alignment. `realloc` keeps the contents (in place when the
// block is long enough, by `mremap`, which moves pages with their contents, or by copying
// `min(old, new)` bytes) and leaves the old block valid when it returns null.
unsafe impl std::alloc::GlobalAlloc for crate::large_blocks::LargeBlockAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use crate::large_blocks::{is_large, small_class};
        if let Some(class) = small_class(layout.size(), layout.align()) {
            return super::small_cache::alloc(class);
        }
        if is_large(layout.size(), layout.align()) {
            return self.alloc_large(layout.size());
        }
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use crate::large_blocks::{is_large, pages, small_class};
        if let Some(class) = small_class(layout.size(), layout.align()) {
            let block = super::small_cache::alloc(class);
            if !block.is_null() {
                // SAFETY: the block is at least `layout.size()` bytes long and ours.
                unsafe { std::ptr::write_bytes(block, 0, layout.size()) };
            }
            return block;
        }
        if is_large(layout.size(), layout.align()) {
            // Fresh pages are zero and cost nothing until touched; the spare would need zeroing.
            let new = map_anonymous(pages(layout.size()));
            if !new.is_null() {
                self.blocks().mapped();
            }
            return new;
        }
        // SAFETY: the caller's layout, as GlobalAlloc requires.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        use crate::large_blocks::{is_large, small_class};
        if let Some(class) = small_class(layout.size(), layout.align()) {
            // SAFETY: a small layout's block came from `small_cache::alloc` with this class.
            return unsafe { super::small_cache::dealloc(ptr, class) };
        }
        if is_large(layout.size(), layout.align()) {
            return self.dealloc_large(ptr, layout.size());
        }
        // SAFETY: `ptr` came from `System` with this layout (neither small nor large).
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use crate::large_blocks::{is_large, small_class};
        let align = layout.align();
        match (
            small_class(layout.size(), align),
            small_class(new_size, align),
        ) {
            // The block is its class's length: it holds the new size too.
            (Some(old), Some(new)) if old == new => return ptr,
            (None, None) => {}
            // SAFETY: the caller's contract, passed on.
            _ => return unsafe { self.move_block(ptr, layout, new_size) },
        }
        match (is_large(layout.size(), align), is_large(new_size, align)) {
            // SAFETY: a block neither small nor large is `System`'s, with this layout.
            (false, false) => unsafe { std::alloc::System.realloc(ptr, layout, new_size) },
            (true, true) => self.realloc_large(ptr, layout.size(), new_size),
            // SAFETY: the caller's contract, passed on.
            _ => unsafe { self.move_block(ptr, layout, new_size) },
        }
    }
}

// Elsewhere (no `mremap`), the system allocator as it is.
#[cfg(not(target_os = "linux"))]
// SAFETY: every call is passed to `System` unchanged.
unsafe impl std::alloc::GlobalAlloc for crate::large_blocks::LargeBlockAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}
