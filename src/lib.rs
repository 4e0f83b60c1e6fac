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
//!     // `stderr_line`, not `eprintln!`: on a stderr nobody reads, `eprintln!` blocks for
//!     // good; the exit waits for `stderr_line`'s text 50 ms at most.
//!     mcpipe::stderr_line(&format!("done: {outcome}"));
//!     Ok(())
//! }
//! ```
//!
//! The same loop serves any pair of fds, which is how tests drive it. This example runs:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::os::fd::AsFd;
//! use mcpipe::{Context, ErrorObject, Handler, Outcome, Request, Server};
//! use serde_json::{json, Value};
//!
//! struct Add;
//! impl Handler for Add {
//!     fn handle_request(&mut self, req: Request, _cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
//!         let p = req.params.unwrap_or(json!({}));
//!         match (p["a"].as_i64(), p["b"].as_i64()) {
//!             (Some(a), Some(b)) => Ok(json!(a + b)),
//!             _ => Err(ErrorObject::invalid_params("add takes integers a and b")),
//!         }
//!     }
//! }
//!
//! let (input, mut to_server) = std::io::pipe()?;
//! let (mut from_server, output) = std::io::pipe()?;
//! to_server.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"add\",\"params\":{\"a\":2,\"b\":3}}\n")?;
//! drop(to_server); // end of input: the loop answers, then returns
//! let outcome = Server::new()
//!     .handle_signals(false)
//!     .serve(input.as_fd(), output.as_fd(), &mut Add)?;
//! assert_eq!(outcome, Outcome::Eof);
//! drop(output);
//! let mut answer = String::new();
//! from_server.read_to_string(&mut answer)?;
//! assert_eq!(answer, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":5}\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # MCP servers
//! [`McpServer`] implements [`Handler`] for the Model Context Protocol: register tools,
//! resources, templates and prompts with closures over a state of yours, and the layer answers
//! the lifecycle (version negotiation), listing with pagination, calls, reads, logging levels,
//! cancellation and batches. It serves handshake-era clients ([`PROTOCOL_VERSIONS`]) and
//! stateless MCP 2026-07-28 clients ([`MODERN_PROTOCOL_VERSIONS`]: per-request `_meta`,
//! `server/discover`, `input_required` results) from the same registrations. Handlers get an
//! [`McpContext`] for progress, logging, input from the client ([`McpContext::input`], which
//! covers both eras) and cancellable child processes.
//!
//! ```no_run
//! use mcpipe::{McpServer, Tool, ToolResult};
//!
//! let mut server = McpServer::new("hello", "1.0.0", ())
//!     .tool(Tool::new("hello", "Greets").arg("name", "string", "Who"), |_, args, _cx| {
//!         Ok(ToolResult::text(format!("Hello, {}!", args.string("name")?)))
//!     });
//! server.serve_stdio()?;
//! # Ok::<(), mcpipe::Error>(())
//! ```
//!
//! # MCP clients
//! [`Client`] spawns an MCP server, supervises it (deadlines on every wait, a dead server fails
//! what waits, a bounded close), and speaks both eras ([`Era`]): it probes with
//! `server/discover` (MCP 2026-07-28) and falls back to the `initialize` handshake. The era,
//! the protocol version and the server's discover or initialize result are cached for the life
//! of the server process; see [`Client`] for what a restart keeps. [`SharedClient`] is the
//! same client for many threads and many requests in flight (an IO thread owns the server; each
//! request keeps its own deadline, progress and cancellation). See `docs/client.md`.
//!
//! # Threads: one loop, slow work elsewhere
//! One thread, the loop's, owns stdin, stdout and the session state, and runs the handler's
//! methods one at a time, so a handler keeps its state in `&mut self` without locks. Work that
//! may be slow must not run there, or every other request waits behind it:
//! - a raw [`Handler`] takes the request's [`Responder`] ([`Context::responder`]) and moves it
//!   to any thread; the loop keeps serving and writes the answer when it comes (a dropped
//!   responder answers `-32603`; a cancelled request's answer is not sent; [`CancelToken`]
//!   shows the cancellation to the holder);
//! - the MCP layer runs [`McpServer::concurrent_tool`]s on a bounded worker pool, with the
//!   whole [`McpContext`] (cancellation, progress, logging, questions to the client, child
//!   processes) working from the worker; quick tools registered with [`McpServer::tool`] stay
//!   on the loop's thread.
//!
//! Nothing reaches stdout except through the loop, and nothing on the serving path can block
//! on stderr: diagnostics go through a bounded, non-blocking sink ([`stderr_line`]).
//!
//! A handler that does wait on the loop's thread is still safe, only slow for others:
//! [`Context::is_cancelled`] and [`Context::checkpoint`] peek at the input without blocking,
//! [`Context::sleep`] waits on the input with a deadline, and [`Context::call`] and
//! [`Context::run_command`] keep reading while they wait. Messages read this way stay queued
//! (bounded in bytes: [`Server::max_read_ahead_bytes`]) in arrival order. With a cancel method
//! ([`Handler::cancel_method`]), a cancelled request that has not started is dropped, and a
//! running one's response is suppressed.
//!
//! # Non-goals
//! - No async runtime: handlers are synchronous; concurrency is threads and responders.
//! - No HTTP transport: stdio (and any pair of fds) only.
//! - No Windows support: the target is Unix (Linux and macOS).
//! - No JSON Schema validation.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod batch_answers;
mod cancel_spotter;
mod child;
mod client;
mod connection;
mod deadline;
mod diagnostics;
mod endpoint;
mod error;
mod handler;
mod id_map;
#[cfg(feature = "internals")]
pub mod internals;
mod json_read;
mod json_text;
mod large_blocks;
mod line_buffer;
mod lock;
mod mcp;
mod message;
mod process_tree;
mod protocol;
mod readiness;
mod relayed;
mod request_id;
mod responder;
mod server;
mod session;
mod stats;
mod stdio_guard;
mod subreaper;
mod sys;
#[cfg(test)]
mod test_watchdog;
mod worker_pool;
mod wrap;
mod write_queue;

/// The README's examples, compiled as doctests so that they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// docs/mcp-server.md's examples, compiled as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../docs/mcp-server.md")]
struct McpServerDocDoctests;

/// docs/client.md's examples, compiled as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../docs/client.md")]
struct ClientDocDoctests;

pub use child::ChildOutput;
pub use client::{
    Call, Canceller, Client, ClientBuilder, ClientStats, Era, Progress, RequestOptions,
    RetryPolicy, SharedClient, Shutdown, ShutdownStage, TaskOptions, TaskStart, WeakClient,
};
pub use diagnostics::stderr_line;
pub use error::{Error, Outcome};
pub use handler::{Context, Handler};
pub use large_blocks::LargeBlockAllocator;
pub use mcp::arguments::Arguments;
pub use mcp::context::McpContext;
pub use mcp::logging::LogLevel;
pub use mcp::prompt::{Prompt, PromptMessage};
pub use mcp::resource::{base64, Resource, ResourceContents, ResourceTemplate};
pub use mcp::server::McpServer;
pub use mcp::tool::{Content, TaskSupport, Tool, ToolError, ToolResult};
pub use message::{ErrorCode, ErrorObject, Message, Notification, Request, RequestId, Response};
pub use protocol::{LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS};
pub use responder::{CancelToken, LoopHandle, Responder};
pub use server::Server;
pub use stats::Stats;
pub use subreaper::Subreaper;
pub use wrap::{WrapOutcome, Wrapper};
