//! The client against a server whose stdout is arbitrary bytes: it never panics, never waits
//! past its deadlines, reports a handshake only when one happened, and leaves no process.
//!
//! Input: a mode byte, then the server's output. Run: `cargo +nightly fuzz run client_responses`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::client_responses(data));
