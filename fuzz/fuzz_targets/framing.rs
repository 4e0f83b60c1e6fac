//! Arbitrary bytes in arbitrary pieces give exactly the lines of a naive split of the whole
//! input: same lines, same order, oversize lines reported the same way.
//!
//! Input: byte 0 is the line limit, bytes 1..4 the piece sizes, the rest the stream.
//! Run: `cargo +nightly fuzz run framing`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::framing(data));
