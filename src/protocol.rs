//! MCP facts both sides need, defined once: protocol versions, MCP-specific error codes and
//! reserved `_meta` keys. Used by the server layer (`mcp/`) and the client (`client/`), so
//! neither imports the other for its tables.

use crate::message::ErrorCode;

/// Every handshake-era MCP protocol version this crate speaks (negotiated by `initialize`),
/// oldest first. The stateless revisions are in [`MODERN_PROTOCOL_VERSIONS`].
pub const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The last handshake-era revision: what `initialize` offers a client that asks for a version
/// this crate does not speak, and what the client asks for by default.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// The stateless MCP revisions this crate speaks, oldest first: a request names one in its
/// `_meta["io.modelcontextprotocol/protocolVersion"]`, and `server/discover` lists them.
pub const MODERN_PROTOCOL_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The newest modern revision: what the client's `server/discover` probe asks for by default.
pub(crate) const LATEST_MODERN_VERSION: &str =
    MODERN_PROTOCOL_VERSIONS[MODERN_PROTOCOL_VERSIONS.len() - 1];

/// `-32002` (handshake era): the resource does not exist. MCP 2026-07-28 uses `-32602`.
pub(crate) const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
/// `-32021` (2026-07-28): the request needs a client capability the client did not declare.
pub(crate) const MISSING_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
/// `-32022` (2026-07-28): the request names a protocol version the server does not speak;
/// `data.supported` lists those it does.
pub(crate) const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);

/// `_meta` key of a request that asks for progress (all revisions).
pub(crate) const PROGRESS_TOKEN_KEY: &str = "progressToken";
/// `_meta` key (2026-07-28): the protocol version a request speaks.
pub(crate) const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key (2026-07-28): the client's capabilities, on every request.
pub(crate) const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key (2026-07-28): the client's `Implementation`, on every request.
pub(crate) const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key (2026-07-28): the least severe log level the request wants to receive.
pub(crate) const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key (2026-07-28): the server's `Implementation`, in `server/discover` results.
pub(crate) const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key (2026-07-28): which `subscriptions/listen` stream a notification belongs to.
pub(crate) const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_lists_are_oldest_first_and_end_with_the_latest() {
        assert!(PROTOCOL_VERSIONS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(PROTOCOL_VERSIONS.last(), Some(&LATEST_PROTOCOL_VERSION));
        assert!(MODERN_PROTOCOL_VERSIONS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            MODERN_PROTOCOL_VERSIONS.last(),
            Some(&LATEST_MODERN_VERSION)
        );
        // The eras do not overlap: every modern revision is newer than every handshake one.
        assert!(LATEST_PROTOCOL_VERSION < MODERN_PROTOCOL_VERSIONS[0]);
    }
}
