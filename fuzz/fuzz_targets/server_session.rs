//! The server loop's sans-IO session, driven directly: every request answered exactly once (at
//! most once when cancelled), no unknown id, answers as scripted, no panic.
//!
//! Input: a limit byte, two piece-size bytes, then the client's byte stream. Run:
//! `cargo +nightly fuzz run server_session`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::server_session(data));
