//! The MCP server layer on top of [`Handler`](crate::Handler): a server type configured with
//! builder methods, its context, and the values tools, resources and prompts deal in.
//!
//! One file per concept: `server` (registration and the protocol), `context` (what a handler
//! works through), `era` (which revision a request speaks), `input` (multi-round-trip requests
//! and their `requestState`), `tasks` (the task store), `tool`, `arguments`, `resource`,
//! `prompt`, `logging`.

pub(crate) mod arguments;
pub(crate) mod context;
pub(crate) mod era;
pub(crate) mod input;
pub(crate) mod logging;
pub(crate) mod prompt;
pub(crate) mod resource;
pub(crate) mod server;
pub(crate) mod tasks;
pub(crate) mod tool;

/// Every handshake-era MCP protocol version this layer speaks (negotiated by `initialize`),
/// oldest first. The stateless revisions are in [`MODERN_PROTOCOL_VERSIONS`].
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version `initialize` offers to a client that asks for one this layer does not speak
/// (the last handshake-era revision).
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// The stateless MCP revisions this layer speaks, oldest first: a request names one in its
/// `_meta["io.modelcontextprotocol/protocolVersion"]`, and `server/discover` lists them.
pub const MODERN_PROTOCOL_VERSIONS: [&str; 1] = ["2026-07-28"];
