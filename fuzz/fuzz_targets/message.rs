//! Any line classifies without panicking and as JSON-RPC 2.0 says; every error response is a
//! valid JSON-RPC error whose id is the request's (or null); accepted messages survive
//! write, parse, write unchanged.
//!
//! Input: one line. Run: `cargo +nightly fuzz run message`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::message(data));
