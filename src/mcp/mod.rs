//! The MCP server layer on top of [`Handler`](crate::Handler): a server type configured with
//! builder methods, its context, and the values tools, resources and prompts deal in.
//!
//! One file per concept: `server` (registration and the protocol), `context` (what a handler
//! works through), `tool`, `arguments`, `resource`, `prompt`, `logging`.

pub(crate) mod arguments;
pub(crate) mod context;
pub(crate) mod logging;
pub(crate) mod prompt;
pub(crate) mod resource;
pub(crate) mod server;
pub(crate) mod tool;

/// Every MCP protocol version this layer speaks, oldest first.
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version offered to a client that asks for one this layer does not speak.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";
