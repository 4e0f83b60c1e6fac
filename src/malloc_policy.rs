//! An explicit, process-wide opt-in to an allocator policy that keeps peak memory near the live
//! set when messages are megabytes long.
//!
//! glibc raises its mmap threshold to the size of the first large block freed, so later
//! blocks of that size come from the heap, where a freed 10 MB block stays resident and the
//! next ones rarely fit into it: a server echoing 10 MB messages peaks at about four and a half
//! times the message instead of two. A library must not change its user's malloc behind their
//! back, so nothing in this crate calls this; a program (such as the `mcpipe` binary) may.

/// Makes the C allocator serve every allocation of `threshold` bytes or more from its own
/// mapping, so that freeing it gives the memory back to the kernel at once, and keeps the
/// threshold fixed. Call it once, early in `main`, before serving; it affects the whole process.
///
/// What it costs: each large block is faulted in afresh (one page fault per 4 KiB page it
/// touches), which slows a stream of 10 MB messages by about a third on a 2-core VM (see
/// BENCHMARKS.md, "Issue 13: large messages"); messages well under `threshold` are unaffected.
/// 1 MiB is a good value for servers that see both small and very large messages.
///
/// Returns whether the policy was applied: `false` on C libraries other than glibc (macOS,
/// musl) and for a threshold glibc refuses (over 32 MiB on 64-bit systems).
///
/// # Example
/// ```
/// // In a server program's `main`: large messages no longer pile up in the heap.
/// let applied = mcpipe::map_large_allocations(1 << 20);
/// # let _ = applied;
/// ```
pub fn map_large_allocations(threshold: usize) -> bool {
    crate::sys::set_mmap_threshold(threshold)
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_takes_a_threshold_within_its_limit_and_refuses_one_beyond() {
        // Run in its own test process state: the setting is process-wide, but harmless to
        // other tests (it only changes where large blocks come from).
        assert!(super::map_large_allocations(1 << 20));
        assert!(!super::map_large_allocations(1 << 40));
    }
}
