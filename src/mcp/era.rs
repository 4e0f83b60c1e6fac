//! The two eras of MCP and how a request says which one it belongs to.
//!
//! Handshake era (2024-11-05 to 2025-11-25): `initialize` fixes the version and the client's
//! capabilities for the whole process. Modern era (2026-07-28): no handshake; every request
//! carries them in `params._meta` (the per-request *envelope*), and the server keeps no state
//! between requests.
//!
//! A request *claims* the modern era when its `_meta` holds the key
//! `io.modelcontextprotocol/protocolVersion`, whatever its value (the rule the official SDKs
//! use). A claim is then checked: a bad envelope is `-32602`, an unknown version `-32022`.

use serde_json::{json, Map, Value};

use crate::mcp::logging::LogLevel;
use crate::message::ErrorObject;
// The keys and codes are the protocol module's; the server layer reaches them through here.
pub(crate) use crate::protocol::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, MISSING_CLIENT_CAPABILITY,
    MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSION_KEY, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
};

/// What a modern request says about its client, from its `_meta`.
#[derive(Debug, Clone)]
pub(crate) struct Envelope {
    pub(crate) version: String,
    pub(crate) client_capabilities: Value,
    pub(crate) client_info: Value,
    /// `None`: the request did not ask for log messages, so none may be sent.
    pub(crate) log_level: Option<LogLevel>,
}

/// The request's `_meta`, if it is an object.
pub(crate) fn meta(params: &Map<String, Value>) -> Option<&Map<String, Value>> {
    params.get("_meta").and_then(Value::as_object)
}

/// Whether the request claims the modern era.
pub(crate) fn claims_modern(params: &Map<String, Value>) -> bool {
    meta(params).is_some_and(|m| m.contains_key(PROTOCOL_VERSION_KEY))
}

/// Whether `_meta` carries any of the reserved per-request keys (a modern client that forgot
/// the version, say).
pub(crate) fn has_envelope_keys(params: &Map<String, Value>) -> bool {
    meta(params).is_some_and(|m| {
        [
            PROTOCOL_VERSION_KEY,
            CLIENT_CAPABILITIES_KEY,
            CLIENT_INFO_KEY,
            LOG_LEVEL_KEY,
        ]
        .iter()
        .any(|k| m.contains_key(*k))
    })
}

/// Checks the envelope of a request that claims the modern era.
///
/// # Errors
/// `-32602` when a required field is missing or malformed, `-32022` (with `data.supported`
/// and `data.requested`) when the version is not one this layer speaks.
pub(crate) fn parse(params: &Map<String, Value>) -> Result<Envelope, ErrorObject> {
    let empty = Map::new();
    let meta = meta(params).unwrap_or(&empty);
    let version = match meta.get(PROTOCOL_VERSION_KEY) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => return Err(missing(PROTOCOL_VERSION_KEY, "must be a string")),
        None => return Err(missing(PROTOCOL_VERSION_KEY, "is missing")),
    };
    if !MODERN_PROTOCOL_VERSIONS.contains(&version.as_str()) {
        return Err(unsupported_version(&version));
    }
    let client_capabilities = match meta.get(CLIENT_CAPABILITIES_KEY) {
        Some(caps @ Value::Object(_)) => caps.clone(),
        Some(_) => return Err(missing(CLIENT_CAPABILITIES_KEY, "must be an object")),
        None => return Err(missing(CLIENT_CAPABILITIES_KEY, "is missing")),
    };
    // clientInfo is a SHOULD: absent is fine, but a present one must be an object.
    let client_info = match meta.get(CLIENT_INFO_KEY) {
        None | Some(Value::Null) => Value::Null,
        Some(info @ Value::Object(_)) => info.clone(),
        Some(_) => return Err(missing(CLIENT_INFO_KEY, "must be an object")),
    };
    let log_level = match meta.get(LOG_LEVEL_KEY) {
        None | Some(Value::Null) => None,
        Some(level) => Some(
            level
                .as_str()
                .and_then(LogLevel::from_name)
                .ok_or_else(|| {
                    missing(
                LOG_LEVEL_KEY,
                "must be one of debug, info, notice, warning, error, critical, alert, emergency",
            )
                })?,
        ),
    };
    Ok(Envelope {
        version,
        client_capabilities,
        client_info,
        log_level,
    })
}

fn missing(key: &str, problem: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("invalid params: _meta \"{key}\" {problem}"))
        .with_data(json!({ "meta": key }))
}

/// `-32022` naming the versions this layer speaks per request.
pub(crate) fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version {requested:?}; supported: {}",
            MODERN_PROTOCOL_VERSIONS.join(", ")
        ),
    )
    .with_data(json!({ "supported": MODERN_PROTOCOL_VERSIONS, "requested": requested }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ErrorCode;

    fn params(meta: Value) -> Map<String, Value> {
        let mut p = Map::new();
        p.insert("_meta".into(), meta);
        p
    }

    #[test]
    fn a_claim_is_the_version_key_whatever_its_value() {
        assert!(claims_modern(&params(json!({ PROTOCOL_VERSION_KEY: 7 }))));
        assert!(!claims_modern(&params(
            json!({ CLIENT_CAPABILITIES_KEY: {} })
        )));
        assert!(has_envelope_keys(&params(
            json!({ CLIENT_CAPABILITIES_KEY: {} })
        )));
        assert!(!claims_modern(&Map::new()));
    }

    #[test]
    fn envelopes_are_checked_field_by_field() {
        let ok = parse(&params(json!({
            PROTOCOL_VERSION_KEY: "2026-07-28",
            CLIENT_CAPABILITIES_KEY: { "sampling": {} },
            LOG_LEVEL_KEY: "debug"
        })))
        .unwrap();
        assert_eq!(ok.log_level, Some(LogLevel::Debug));
        assert!(ok.client_info.is_null());
        let no_caps = parse(&params(json!({ PROTOCOL_VERSION_KEY: "2026-07-28" }))).unwrap_err();
        assert_eq!(no_caps.code, ErrorCode::INVALID_PARAMS);
        let old = parse(&params(json!({
            PROTOCOL_VERSION_KEY: "2025-11-25",
            CLIENT_CAPABILITIES_KEY: {}
        })))
        .unwrap_err();
        assert_eq!(old.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(old.data.unwrap()["requested"], "2025-11-25");
        let bad_level = parse(&params(json!({
            PROTOCOL_VERSION_KEY: "2026-07-28",
            CLIENT_CAPABILITIES_KEY: {},
            LOG_LEVEL_KEY: "loud"
        })))
        .unwrap_err();
        assert_eq!(bad_level.code, ErrorCode::INVALID_PARAMS);
    }
}
