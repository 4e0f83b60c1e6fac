//! The whole loop over real pipes: it ends at end of input without panicking, every output
//! line is JSON, every well-formed request gets exactly one response (notifications none),
//! every bad line one error.
//!
//! Input: the byte stream the peer writes. Run: `cargo +nightly fuzz run server_loop`
//!
//! The handler is `properties::EchoHandler`; to fuzz another (the MCP demo handler), call
//! `properties::server_loop_with` with it and a function that checks its replies.
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::server_loop(data));
