//! Newline-delimited JSON-RPC 2.0 over stdio that never hangs, crashes, or leaks a process.
//!
//! `mcpipe` is a small synchronous transport for MCP (Model Context Protocol) servers and the
//! programs that launch them. A single-threaded [mio] loop reads the input fd into a
//! [line buffer](Server::max_message_bytes) of its own, turns each line into a [`Message`],
//! hands it to your [`Handler`], and queues the response for the output fd.
//!
//! Bytes flow like this: input fd → line buffer (incremental `\n` search, size limit) →
//! [`Message`] (request, notification, response, or an error response for bad input) →
//! [`Handler`] (through a [`Context`] that can also send to the peer) → write queue (coalesced,
//! bounded, never blocking) → output fd.
//!
//! The loop never sleeps while a complete line waits in its buffer or unread data may sit in the
//! kernel (the *buffered-reader hang*), keeps reading while the peer is not reading its output
//! (no pipe deadlock), catches handler panics, ends cleanly on end of input, SIGTERM, SIGINT,
//! SIGHUP or a vanished peer, and leaves the fds' flags as it found them.
//!
//! # Example
//! ```no_run
//! use mcpipe::{Context, ErrorObject, Handler, Request, Server};
//! use serde_json::{json, Value};
//!
//! struct Counter { calls: u64 }
//!
//! impl Handler for Counter {
//!     fn handle_request(&mut self, req: Request, _cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
//!         self.calls += 1;
//!         match req.method.as_str() {
//!             "count" => Ok(json!({ "calls": self.calls })),
//!             other => Err(ErrorObject::method_not_found(other)),
//!         }
//!     }
//! }
//!
//! fn main() -> Result<(), mcpipe::Error> {
//!     let outcome = Server::new().serve_stdio(&mut Counter { calls: 0 })?;
//!     eprintln!("done: {outcome}");
//!     Ok(())
//! }
//! ```
//!
//! # Non-goals
//! - No async runtime and no threads in the loop: handlers are synchronous.
//! - No HTTP transport: stdio (and any pair of fds) only.
//! - No Windows support: the target is Unix (Linux and macOS).
//! - No JSON Schema validation.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod connection;
mod diagnostics;
mod endpoint;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod line_buffer;
mod message;
mod server;
mod stdio_guard;
mod sys;
mod write_queue;

pub use error::{Error, Outcome};
pub use handler::{Context, Handler, Stats};
pub use message::{ErrorCode, ErrorObject, Message, Notification, Request, RequestId, Response};
pub use server::Server;
