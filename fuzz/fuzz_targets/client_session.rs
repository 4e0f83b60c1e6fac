//! The client's sans-IO session against arbitrary server output, cancellations and clock
//! steps: every request it starts ends exactly once, and nothing panics. No process: fast.
//!
//! Input: a program of operations (see `check_session`). Run:
//! `cargo +nightly fuzz run client_session`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::client_session(data));
