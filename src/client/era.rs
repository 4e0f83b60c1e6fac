//! The two generations of MCP a client can speak, and the decisions between them: what a
//! `server/discover` answer says about the server, the per-request `_meta` of MCP 2026-07-28,
//! and how its results are read (`resultType`, `input_required`). No I/O here.

use serde_json::{json, Map, Value};

use crate::json_text;
use crate::message::{ErrorObject, Request};
use crate::protocol::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSIONS,
    PROTOCOL_VERSION_KEY, UNSUPPORTED_PROTOCOL_VERSION,
};

/// Which generation of MCP a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// The handshake era (2024-11-05 … 2025-11-25): `initialize`, then
    /// `notifications/initialized`, then requests; the server may send requests of its own.
    Legacy,
    /// MCP 2026-07-28 and later: no handshake; every request carries the protocol version,
    /// client capabilities and client info in `params._meta`; the server never sends requests
    /// and asks for input with `input_required` results instead.
    Modern,
}

/// What one answer to `server/discover` says about the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A modern server that speaks `version`.
    Modern { version: String },
    /// A modern server (`-32022`) that speaks `version` but not the one asked for: ask again.
    Retry { version: String },
    /// No evidence of a modern server: use the `initialize` handshake.
    Legacy,
    /// A modern server that speaks only versions the client does not (and no handshake-era one).
    Incompatible { supported: Vec<String> },
}

/// Judges the answer to a `server/discover` that asked for `asked`. `known` lists the modern
/// versions the client accepts, most preferred first.
///
/// Only positive evidence makes a server modern: a result whose `supportedVersions` shares a
/// version with the client, or `-32022` whose `data.supported` does. Every other answer (any
/// other error code, a malformed result, a `-32022` without a usable list) means legacy.
pub(crate) fn judge_discover(
    answer: &Result<Value, ErrorObject>,
    asked: &str,
    known: &[String],
) -> Verdict {
    match answer {
        Ok(result) => {
            let Some(versions) = strings(result.get("supportedVersions")) else {
                return Verdict::Legacy;
            };
            if versions.iter().any(|v| v == asked) && known.iter().any(|k| k == asked) {
                return Verdict::Modern {
                    version: asked.to_owned(),
                };
            }
            match best_common(known, &versions) {
                Some(version) => Verdict::Modern { version },
                // It answers discover but advertises handshake-era versions only.
                None => Verdict::Legacy,
            }
        }
        Err(error) if error.code == UNSUPPORTED_PROTOCOL_VERSION => {
            let data = error.data.as_ref().unwrap_or(&Value::Null);
            let Some(supported) = strings(data.get("supported")) else {
                return Verdict::Legacy;
            };
            let others: Vec<String> = known.iter().filter(|k| *k != asked).cloned().collect();
            if let Some(version) = best_common(&others, &supported) {
                return Verdict::Retry { version };
            }
            // A rejection that names the asked version as supported (a transient refusal, as
            // the conformance suite's request-metadata scenario sends): ask once more with it;
            // the caller retries only once, so this cannot loop.
            if supported.iter().any(|v| v == asked) && known.iter().any(|k| k == asked) {
                return Verdict::Retry {
                    version: asked.to_owned(),
                };
            }
            let speaks_legacy = supported
                .iter()
                .any(|v| PROTOCOL_VERSIONS.contains(&v.as_str()));
            if speaks_legacy {
                Verdict::Legacy
            } else {
                Verdict::Incompatible { supported }
            }
        }
        Err(_) => Verdict::Legacy,
    }
}

/// The first of `preferred` that `offered` contains.
fn best_common(preferred: &[String], offered: &[String]) -> Option<String> {
    preferred.iter().find(|p| offered.contains(p)).cloned()
}

/// A JSON array of strings (other elements skipped); `None` when it is not an array.
fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    let array = value?.as_array()?;
    Some(
        array
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// Adds the modern per-request fields to `params._meta`, creating both when missing. Fields
/// the caller already set are left alone (so a test can send a wrong version on purpose).
/// Params that are not an object (never valid MCP) are left as they are.
pub(crate) fn add_meta(
    params: &mut Option<Value>,
    version: &str,
    capabilities: &Value,
    client_info: &Value,
) {
    add_version_meta(params, version);
    if let Some(meta) = meta_mut(params) {
        meta.entry(CLIENT_CAPABILITIES_KEY)
            .or_insert_with(|| capabilities.clone());
        meta.entry(CLIENT_INFO_KEY)
            .or_insert_with(|| client_info.clone());
    }
}

/// Adds the protocol version to `params._meta` as [`add_meta`] does, and says whether the
/// client's capabilities and info are left to [`write_with_client_meta`]: when `_meta` is an
/// object that names neither (a caller that named one gets [`add_meta`] for the other).
pub(crate) fn add_version_meta(params: &mut Option<Value>, version: &str) -> bool {
    let Some(meta) = meta_mut(params) else {
        return false;
    };
    meta.entry(PROTOCOL_VERSION_KEY)
        .or_insert_with(|| Value::from(version));
    !meta.contains_key(CLIENT_CAPABILITIES_KEY) && !meta.contains_key(CLIENT_INFO_KEY)
}

/// `params._meta`, both made when missing; `None` when either is there but not an object.
fn meta_mut(params: &mut Option<Value>) -> Option<&mut Map<String, Value>> {
    params
        .get_or_insert_with(|| json!({}))
        .as_object_mut()?
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

/// The client's capabilities and info as members of a modern request's `_meta`
/// (`"…/clientCapabilities":{…},"…/clientInfo":{…}`), written once for the session. Cloned into
/// every request's params, then written and dropped, they cost 2.2 k instructions a call
/// (BENCHMARKS.md, "The client under load"); [`write_with_client_meta`] writes this text.
pub(crate) fn client_meta_text(capabilities: &Value, client_info: &Value) -> Box<[u8]> {
    let mut text = Vec::new();
    json_text::write_str(&mut text, CLIENT_CAPABILITIES_KEY);
    text.push(b':');
    json_text::write_value(&mut text, capabilities);
    text.push(b',');
    json_text::write_str(&mut text, CLIENT_INFO_KEY);
    text.push(b':');
    json_text::write_value(&mut text, client_info);
    text.into_boxed_slice()
}

/// Appends `request` as a line, as [`Request`]'s own writing does, with `client_meta` (from
/// [`client_meta_text`]) first among the members of its `params._meta`: the request
/// [`add_version_meta`] left to this. Where the params hold no `_meta` object (never, for
/// such a request) it is written as it is.
pub(crate) fn write_with_client_meta(out: &mut Vec<u8>, request: &Request, client_meta: &[u8]) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    request.id.write_json(out);
    out.extend_from_slice(b",\"method\":");
    json_text::write_str(out, &request.method);
    if let Some(params) = &request.params {
        out.extend_from_slice(b",\"params\":");
        match params {
            Value::Object(members) => {
                out.push(b'{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    json_text::write_str(out, key);
                    out.push(b':');
                    match value {
                        Value::Object(meta) if key == "_meta" => {
                            out.push(b'{');
                            out.extend_from_slice(client_meta);
                            for (key, value) in meta {
                                out.push(b',');
                                json_text::write_str(out, key);
                                out.push(b':');
                                json_text::write_value(out, value);
                            }
                            out.push(b'}');
                        }
                        value => json_text::write_value(out, value),
                    }
                }
                out.push(b'}');
            }
            other => json_text::write_value(out, other),
        }
    }
    out.extend_from_slice(b"}\n");
}

/// Names `level` in `params._meta` (made by [`add_meta`]) unless the caller named one.
pub(crate) fn add_log_level(params: &mut Option<Value>, level: &str) {
    let meta = params
        .as_mut()
        .and_then(|params| params.get_mut("_meta"))
        .and_then(Value::as_object_mut);
    if let Some(meta) = meta {
        meta.entry(LOG_LEVEL_KEY)
            .or_insert_with(|| Value::from(level));
    }
}

/// The params of a `server/discover` asking for `version`.
pub(crate) fn discover_params(version: &str, capabilities: &Value, client_info: &Value) -> Value {
    let mut params = None;
    add_meta(&mut params, version, capabilities, client_info);
    params.unwrap_or_default()
}

/// A JSON value as a short, printable excerpt for an error message.
pub(crate) fn excerpt_of(value: &Value) -> String {
    crate::diagnostics::excerpt(value.to_string().as_bytes())
}

/// How a modern result is to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResultType {
    /// The final result (also when `resultType` is missing, as the spec requires).
    Complete,
    /// The server needs input first: `inputRequests` and/or `requestState`.
    InputRequired,
    /// A type the client does not know.
    Other(String),
}

/// The `resultType` of a modern result.
pub(crate) fn result_type(result: &Value) -> ResultType {
    match result.get("resultType") {
        None | Some(Value::Null) => ResultType::Complete,
        Some(Value::String(t)) if t == "complete" => ResultType::Complete,
        Some(Value::String(t)) if t == "input_required" => ResultType::InputRequired,
        Some(Value::String(t)) => ResultType::Other(t.clone()),
        Some(other) => ResultType::Other(other.to_string()),
    }
}

/// One input an `input_required` result asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Asked {
    /// The server's name for it; the answer goes under this key in `inputResponses`.
    pub(crate) key: String,
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub(crate) method: String,
    /// Its params (`{}` when missing).
    pub(crate) params: Value,
}

/// The inputs an `input_required` result asks for, in the server's order. A result that has
/// only `requestState` asks for none.
///
/// # Errors
/// A phrase saying what is malformed.
pub(crate) fn input_requests(result: &Value) -> Result<Vec<Asked>, String> {
    let requests = match result.get("inputRequests") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(requests)) => requests,
        Some(_) => return Err(String::from("inputRequests is not an object")),
    };
    requests
        .iter()
        .map(|(key, request)| {
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("inputRequests[{key:?}] has no method"))?;
            let params = match request.get("params") {
                None | Some(Value::Null) => json!({}),
                Some(params) => params.clone(),
            };
            Ok(Asked {
                key: key.clone(),
                method: method.to_owned(),
                params,
            })
        })
        .collect()
}

/// The params of the next round: the original params plus `inputResponses` (when there are
/// any) and the `requestState` of the last result, copied verbatim (when it has one).
pub(crate) fn next_round_params(
    original: &Option<Value>,
    responses: Map<String, Value>,
    last: &Value,
) -> Option<Value> {
    let mut params = original.clone().unwrap_or_else(|| json!({}));
    if let Some(obj) = params.as_object_mut() {
        obj.remove("inputResponses");
        obj.remove("requestState");
        if !responses.is_empty() {
            obj.insert("inputResponses".into(), Value::Object(responses));
        }
        if let Some(state) = last.get("requestState") {
            obj.insert("requestState".into(), state.clone());
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ErrorCode, Message, RequestId};

    fn known() -> Vec<String> {
        vec![String::from("2026-07-28")]
    }

    fn unsupported(data: Value) -> Result<Value, ErrorObject> {
        Err(ErrorObject {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: String::from("Unsupported protocol version"),
            data: Some(data),
        })
    }

    #[test]
    fn a_discover_result_listing_the_asked_version_means_modern() {
        let answer = Ok(json!({"supportedVersions": ["2026-07-28"], "capabilities": {}}));
        assert_eq!(
            judge_discover(&answer, "2026-07-28", &known()),
            Verdict::Modern {
                version: String::from("2026-07-28")
            }
        );
    }

    #[test]
    fn a_discover_result_with_only_handshake_versions_means_legacy() {
        let answer = Ok(json!({"supportedVersions": ["2025-11-25"], "capabilities": {}}));
        assert_eq!(
            judge_discover(&answer, "2026-07-28", &known()),
            Verdict::Legacy
        );
        let malformed = Ok(json!({"capabilities": {}}));
        assert_eq!(
            judge_discover(&malformed, "2026-07-28", &known()),
            Verdict::Legacy
        );
    }

    #[test]
    fn unsupported_version_names_a_common_version_to_retry_with() {
        let known = vec![String::from("2099-01-01"), String::from("2026-07-28")];
        let answer = unsupported(
            json!({"supported": ["2027-06-01", "2026-07-28"], "requested": "2099-01-01"}),
        );
        assert_eq!(
            judge_discover(&answer, "2099-01-01", &known),
            Verdict::Retry {
                version: String::from("2026-07-28")
            }
        );
    }

    #[test]
    fn a_rejection_naming_the_asked_version_is_retried_with_it() {
        let answer = unsupported(json!({"supported": ["2026-07-28"], "requested": "2026-07-28"}));
        assert_eq!(
            judge_discover(&answer, "2026-07-28", &known()),
            Verdict::Retry {
                version: String::from("2026-07-28")
            }
        );
    }

    #[test]
    fn unsupported_version_with_nothing_in_common_is_incompatible_or_legacy() {
        let answer = unsupported(json!({"supported": ["2027-06-01"], "requested": "2026-07-28"}));
        assert_eq!(
            judge_discover(&answer, "2026-07-28", &known()),
            Verdict::Incompatible {
                supported: vec![String::from("2027-06-01")]
            }
        );
        let dual = unsupported(json!({"supported": ["2027-06-01", "2025-11-25"]}));
        assert_eq!(
            judge_discover(&dual, "2026-07-28", &known()),
            Verdict::Legacy
        );
        let no_data = unsupported(Value::Null);
        assert_eq!(
            judge_discover(&no_data, "2026-07-28", &known()),
            Verdict::Legacy
        );
    }

    #[test]
    fn any_other_error_means_legacy() {
        for code in [-32601, -32602, -32600, -32603, -32000, 0] {
            let answer = Err(ErrorObject::new(ErrorCode(code), "nope"));
            assert_eq!(
                judge_discover(&answer, "2026-07-28", &known()),
                Verdict::Legacy,
                "{code}"
            );
        }
    }

    #[test]
    fn meta_fields_are_added_without_overwriting_the_callers() {
        let mut params = Some(json!({"name": "x", "_meta": {"progressToken": 3,
            "io.modelcontextprotocol/protocolVersion": "1999-01-01"}}));
        add_meta(
            &mut params,
            "2026-07-28",
            &json!({"roots": {}}),
            &json!({"name": "c", "version": "1"}),
        );
        let meta = &params.as_ref().unwrap()["_meta"];
        assert_eq!(meta["progressToken"], 3);
        assert_eq!(meta[PROTOCOL_VERSION_KEY], "1999-01-01");
        assert_eq!(meta[CLIENT_CAPABILITIES_KEY], json!({"roots": {}}));
        assert_eq!(meta[CLIENT_INFO_KEY]["name"], "c");
        let mut none = None;
        add_meta(&mut none, "2026-07-28", &json!({}), &json!({}));
        assert_eq!(none.unwrap()["_meta"][PROTOCOL_VERSION_KEY], "2026-07-28");
    }

    #[test]
    fn the_client_meta_written_from_text_is_the_meta_add_meta_puts_in() {
        let capabilities = json!({"roots": {"listChanged": false}, "sampling": {}});
        let info = json!({"name": "c\"\u{e9}", "version": "1"});
        let text = client_meta_text(&capabilities, &info);
        let shapes = [
            None,
            Some(json!({"name": "echo", "arguments": {"text": "hi"}})),
            Some(json!({"_meta": {"progressToken": 3, "a": 1, "zz": [1, {"b": null}]}})),
            Some(json!({"x": 1, "_meta": {PROTOCOL_VERSION_KEY: "1999-01-01"}})),
        ];
        for (n, params) in shapes.into_iter().enumerate() {
            let mut cloned = params.clone();
            add_meta(&mut cloned, "2026-07-28", &capabilities, &info);
            let request = |params| Request {
                id: RequestId::from(n as i64),
                method: String::from("tools/call"),
                params,
            };
            let expected = Message::Request(request(cloned)).to_line();
            let mut shared = params;
            assert!(add_version_meta(&mut shared, "2026-07-28"), "{n}");
            let mut written = Vec::new();
            write_with_client_meta(&mut written, &request(shared), &text);
            assert_eq!(written.last(), Some(&b'\n'));
            let value = |line: &[u8]| serde_json::from_slice::<Value>(line).unwrap();
            assert_eq!(value(&written), value(&expected), "{n}");
            if n != 2 {
                // No key of the caller's sorts before the client's: the same bytes.
                assert_eq!(
                    String::from_utf8_lossy(&written),
                    String::from_utf8_lossy(&expected)
                );
            }
        }
    }

    #[test]
    fn a_caller_naming_the_client_info_or_no_meta_object_leaves_nothing_to_write() {
        let mut named = Some(json!({"_meta": {CLIENT_INFO_KEY: {"name": "mine"}}}));
        assert!(!add_version_meta(&mut named, "2026-07-28"));
        let mut odd = Some(json!({"_meta": 7}));
        assert!(!add_version_meta(&mut odd, "2026-07-28"));
        let mut array = Some(json!([1]));
        assert!(!add_version_meta(&mut array, "2026-07-28"));
        assert_eq!(array, Some(json!([1])), "not an object: left as it is");
    }

    #[test]
    fn a_missing_result_type_is_complete() {
        assert_eq!(result_type(&json!({})), ResultType::Complete);
        assert_eq!(
            result_type(&json!({"resultType": "complete"})),
            ResultType::Complete
        );
        assert_eq!(
            result_type(&json!({"resultType": "input_required"})),
            ResultType::InputRequired
        );
        assert_eq!(
            result_type(&json!({"resultType": "task"})),
            ResultType::Other(String::from("task"))
        );
    }

    #[test]
    fn input_requests_are_read_in_order_and_malformed_ones_rejected() {
        let result = json!({"resultType": "input_required", "inputRequests": {
            "b": {"method": "roots/list"},
            "a": {"method": "elicitation/create", "params": {"message": "hi"}}}});
        let asked = input_requests(&result).unwrap();
        assert_eq!(asked.len(), 2);
        assert!(asked
            .iter()
            .any(|a| a.key == "b" && a.method == "roots/list" && a.params == json!({})));
        assert!(input_requests(&json!({"requestState": "s"}))
            .unwrap()
            .is_empty());
        assert!(input_requests(&json!({"inputRequests": {"a": {}}})).is_err());
        assert!(input_requests(&json!({"inputRequests": []})).is_err());
    }

    #[test]
    fn the_next_round_echoes_request_state_verbatim_and_replaces_old_responses() {
        let original =
            Some(json!({"name": "t", "inputResponses": {"old": {}}, "requestState": "old"}));
        let mut responses = Map::new();
        responses.insert("k".into(), json!({"action": "accept"}));
        let last = json!({"resultType": "input_required", "requestState": "s \"é\" \u{2028}"});
        let next = next_round_params(&original, responses, &last).unwrap();
        assert_eq!(next["name"], "t");
        assert_eq!(next["requestState"], "s \"é\" \u{2028}");
        assert_eq!(next["inputResponses"], json!({"k": {"action": "accept"}}));
        let state_only =
            next_round_params(&original, Map::new(), &json!({"requestState": "x"})).unwrap();
        assert!(state_only.get("inputResponses").is_none());
    }
}
