//! Sixteen bytes at a time with SSE2, which every x86_64 CPU has (it is the target's
//! baseline): a JSON string tested for the bytes that end a clean run (`"`, `\`, control
//! characters), the string scan of `json_text::clean_len` (read and written once per string of
//! every message); and a line told to be ASCII, so UTF-8, before it is read. Part of `sys`:
//! every `unsafe` block has its `// SAFETY:`.

use std::arch::x86_64::{
    _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    _mm_setzero_si128,
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

/// `bytes` as a `str` when every byte is ASCII (so UTF-8); `None` when one is not (the caller
/// then checks it as UTF-8). The top bits of all sixteen-byte blocks are gathered, then tested
/// once: a third of `str::from_utf8`'s instructions on a request line.
pub(crate) fn ascii_str(bytes: &[u8]) -> Option<&str> {
    let mut rest = bytes;
    // SAFETY: SSE2 is enabled on every x86_64 target; nothing is read.
    let mut gathered = unsafe { _mm_setzero_si128() };
    while let Some((block, after)) = rest.split_first_chunk::<16>() {
        // SAFETY: SSE2 as above; the unaligned load reads exactly the 16 bytes `block` borrows.
        gathered = unsafe { _mm_or_si128(gathered, _mm_loadu_si128(block.as_ptr().cast())) };
        rest = after;
    }
    // SAFETY: SSE2 as above; the mask has a bit per byte's top bit.
    let high = unsafe { _mm_movemask_epi8(gathered) };
    if high != 0 || !rest.is_ascii() {
        return None;
    }
    // SAFETY: every byte is below 0x80, and ASCII text is UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}
