//! Sixteen bytes of a JSON string tested at once for the bytes that end a clean run (`"`, `\`,
//! control characters), with SSE2, which every x86_64 CPU has (it is the target's baseline):
//! the string scan of `json_text::clean_len` (read and written once per string of every
//! message). Part of `sys`: its one `unsafe` block has its `// SAFETY:`.

use std::arch::x86_64::{
    _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
};

/// Bit `i` set when `block[i]` is `"`, `\` or below 0x20; 0 when none is.
#[inline]
pub(crate) fn escape_mask(block: &[u8; 16]) -> u32 {
    // SAFETY: SSE2 is enabled on every x86_64 target (the intrinsics need nothing else), and
    // the unaligned load reads exactly the 16 bytes `block` borrows.
    let mask = unsafe {
        let bytes = _mm_loadu_si128(block.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\\' as i8));
        // Unsigned: a byte is below 0x20 when the smaller of it and 0x1f is itself.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(bytes, _mm_set1_epi8(0x1f)), bytes);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
    };
    // The mask has 16 bits: never negative.
    mask as u32
}
