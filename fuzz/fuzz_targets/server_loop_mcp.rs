//! The whole loop with the MCP layer over real pipes: it ends at end of input without
//! panicking, every output line is JSON, every well-formed request gets exactly one response
//! (at most one when the stream cancels it), and no response carries an unknown id.
//!
//! Input: the byte stream the client writes. Run: `cargo +nightly fuzz run server_loop_mcp`
#![no_main]

#[path = "../properties.rs"]
mod properties;

libfuzzer_sys::fuzz_target!(|data: &[u8]| properties::server_loop_mcp(data));
