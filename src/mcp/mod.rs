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

// The version tables live in the protocol module, shared with the client.
pub(crate) use crate::protocol::{
    LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS,
};
