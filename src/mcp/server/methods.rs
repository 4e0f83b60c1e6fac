//! The one method table of both eras and the dispatch through it: which methods exist in
//! which era, how a handshake-era and a 2026-07-28 request reach [`McpServer::serve_method`],
//! and what completes a 2026-07-28 result; list pagination.

use serde_json::{json, Map, Value};

use super::calls::subscription_uri;
use super::McpServer;
use crate::handler::Context;
use crate::mcp::context::Scope;
use crate::mcp::era::{self, Envelope};
use crate::mcp::resource::RESOURCE_NOT_FOUND;
use crate::message::{Apart, ErrorCode, ErrorObject, RequestId};

/// In which era a method exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eras {
    /// The handshake era only (2024-11-05 to 2025-11-25).
    Legacy,
    /// MCP 2026-07-28 only.
    Modern,
    Both,
}

/// Every method this layer serves, once for both eras, and the eras it is in: a method not
/// here, or not of the request's era, is `-32601`. Whether it is served also depends on what
/// was registered (a server without tools has no `tools/call`); see
/// [`McpServer::serve_method`]. (A `match`, not a table scan: it is asked once per request.)
fn method_eras(method: &str) -> Option<Eras> {
    Some(match method {
        "initialize"
        | "ping"
        | "logging/setLevel"
        | "resources/subscribe"
        | "resources/unsubscribe" => Eras::Legacy,
        "server/discover" | "subscriptions/listen" => Eras::Modern,
        "tools/list"
        | "tools/call"
        | "resources/list"
        | "resources/read"
        | "resources/templates/list"
        | "prompts/list"
        | "prompts/get"
        | "completion/complete" => Eras::Both,
        // Tasks: 2025-11-25 has all but `tasks/update`; the 2026-07-28 extension dropped
        // `tasks/result` and `tasks/list` and added `tasks/update`.
        "tasks/get" | "tasks/cancel" => Eras::Both,
        "tasks/result" | "tasks/list" => Eras::Legacy,
        "tasks/update" => Eras::Modern,
        _ => return None,
    })
}

/// Whether `method` exists in the era (`modern`), or in either (`None`).
pub(super) fn method_exists(method: &str, modern: Option<bool>) -> bool {
    match (method_eras(method), modern) {
        (None, _) => false,
        (Some(_), None) | (Some(Eras::Both), _) => true,
        (Some(Eras::Legacy), Some(modern)) => !modern,
        (Some(Eras::Modern), Some(modern)) => modern,
    }
}

/// The results MCP 2026-07-28 lets a client cache (they carry `ttlMs` and `cacheScope`).
fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
            | "prompts/list"
    )
}

/// One page of `items` from `cursor` on, and the cursor of the next page if there is one.
/// Completes a 2026-07-28 result: `resultType` (`complete` unless the handler set one),
/// caching hints when `cache` holds them (`ttlMs`, public or not), and the server's info in
/// `_meta`.
pub(crate) fn modern_result(result: &mut Value, info: &Value, cache: Option<(u64, bool)>) {
    let Value::Object(map) = result else { return };
    let complete = !map.contains_key("resultType");
    if complete {
        map.insert("resultType".into(), json!("complete"));
    }
    if let (Some((ttl_ms, public)), true) = (cache, complete) {
        map.insert("ttlMs".into(), json!(ttl_ms));
        let scope = if public { "public" } else { "private" };
        map.insert("cacheScope".into(), json!(scope));
    }
    let meta = map.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(era::SERVER_INFO_KEY.into(), info.clone());
    }
}

/// Where the page named by `cursor` starts, for a cursor this server hands out only: `mcpipe:`
/// and, in plain decimal, a later page's start inside the list. Anything else (a sign, leading
/// zeros, a start in the middle of a page) is refused rather than read as something close.
fn parse_cursor(cursor: &str, size: usize, total: usize) -> Option<usize> {
    let digits = cursor.strip_prefix("mcpipe:")?;
    let start: usize = digits.parse().ok()?;
    let canonical = start.to_string() == digits;
    (canonical && start > 0 && start < total && start.is_multiple_of(size)).then_some(start)
}

pub(super) fn page(
    items: Vec<Value>,
    params: &Map<String, Value>,
    key: &str,
    size: usize,
) -> Result<Value, ErrorObject> {
    let bad = || ErrorObject::invalid_params("invalid params: invalid cursor");
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => parse_cursor(cursor, size, items.len()).ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    let total = items.len();
    let end = start.saturating_add(size).min(total);
    let mut result = Map::new();
    result.insert(
        key.to_owned(),
        Value::Array(items.into_iter().skip(start).take(end - start).collect()),
    );
    if end < total {
        result.insert("nextCursor".into(), Value::String(format!("mcpipe:{end}")));
    }
    Ok(Value::Object(result))
}

impl<S: 'static> McpServer<S> {
    /// A request of a handshake session (after `initialize`).
    pub(super) fn handle_legacy(
        &mut self,
        id: &RequestId,
        method: &str,
        params: &mut Map<String, Value>,
        apart: Option<Box<Apart>>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        if !method_exists(method, Some(false)) {
            return Err(ErrorObject::method_not_found(method));
        }
        let scope = self.session.take_scope();
        let result = self.serve_method(id, method, params, apart, &scope, cx);
        self.session.return_scope(scope);
        result
    }

    /// A request that claims MCP 2026-07-28, its envelope already checked: served like any
    /// other, then completed with `resultType`, caching hints and the server's info.
    pub(super) fn handle_modern(
        &mut self,
        id: &RequestId,
        method: &str,
        params: &mut Map<String, Value>,
        apart: Option<Box<Apart>>,
        envelope: Envelope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        // `initialize`, `ping`, `logging/setLevel`, `resources/subscribe` and
        // `resources/unsubscribe` are gone in 2026-07-28.
        if !method_exists(method, Some(true)) {
            return Err(ErrorObject::method_not_found(method));
        }
        let scope = Scope {
            modern: true,
            version: envelope.version,
            client_capabilities: envelope.client_capabilities,
            client_info: envelope.client_info,
            log_level: envelope.log_level,
        };
        let mut result = self.serve_method(id, method, params, apart, &scope, cx)?;
        // An open stream's acknowledgement is not a result. (The `Null` of a call answered on a
        // worker is left as it is: `modern_result` completes objects only, and the worker
        // completes its own answer.)
        if method != "subscriptions/listen" {
            let cache = cacheable(method).then_some((self.cache_ttl_ms, self.cache_public));
            modern_result(&mut result, &self.info, cache);
        }
        Ok(result)
    }

    /// The one method table of both eras, once the era's checks are done: what each method
    /// does, given what was registered. A method of a capability this server did not declare
    /// is `-32601`. `apart`: a `tools/call`'s name and arguments, read apart from `params`.
    pub(super) fn serve_method(
        &mut self,
        id: &RequestId,
        method: &str,
        params: &mut Map<String, Value>,
        apart: Option<Box<Apart>>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let size = self.page_size;
        let tools = !self.tools.is_empty();
        let resources = self.has_resources();
        let prompts = !self.prompts.is_empty();
        let subscriptions = resources && self.change_notifications;
        match method {
            "ping" => Ok(json!({})),
            "initialize" => self.initialize(params, cx),
            "server/discover" => Ok(self.discover()),
            "logging/setLevel" => self.set_level(params),
            "tools/list" if tools => {
                let items = self
                    .tools
                    .iter()
                    .filter(|(t, _)| Self::offered(t.task_support_level(), scope))
                    .map(|(t, _)| t.to_value())
                    .collect();
                page(items, params, "tools", size)
            }
            "tools/call" if tools => self.call_tool(params, apart, scope, cx),
            "resources/list" if resources => {
                let items = self.resources.iter().map(|(r, _)| r.to_value()).collect();
                page(items, params, "resources", size)
            }
            "resources/templates/list" if resources => {
                let items = self.templates.iter().map(|(t, _)| t.to_value()).collect();
                page(items, params, "resourceTemplates", size)
            }
            "resources/read" if resources => {
                self.read_resource(params, scope, cx).map_err(|e| {
                    // 2026-07-28: a missing resource is invalid params, never -32002.
                    if scope.modern && e.code == RESOURCE_NOT_FOUND {
                        ErrorObject {
                            code: ErrorCode::INVALID_PARAMS,
                            ..e
                        }
                    } else {
                        e
                    }
                })
            }
            "resources/subscribe" if subscriptions => {
                let uri = subscription_uri(params, method)?;
                self.session.subscribed.insert(uri);
                Ok(json!({}))
            }
            "resources/unsubscribe" if subscriptions => {
                let uri = subscription_uri(params, method)?;
                self.session.subscribed.remove(&uri);
                Ok(json!({}))
            }
            "prompts/list" if prompts => {
                let items = self.prompts.iter().map(|(p, _)| p.to_value()).collect();
                page(items, params, "prompts", size)
            }
            "prompts/get" if prompts => self.get_prompt(params, scope, cx),
            "completion/complete" if self.completion.is_some() => self.complete(params, scope, cx),
            "subscriptions/listen" if self.change_notifications => self.listen(id, params, cx),
            _ if method.starts_with("tasks/") && self.has_task_tools() => {
                self.serve_task_method(method, params, scope, cx)
            }
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<Value> {
        (0..n).map(|i| json!(i)).collect()
    }

    fn walk(n: usize, size: usize) -> Vec<Value> {
        let mut all = Vec::new();
        let mut params = Map::new();
        loop {
            let page = page(items(n), &params, "x", size).unwrap();
            all.extend(page["x"].as_array().unwrap().iter().cloned());
            match page.get("nextCursor") {
                Some(c) => {
                    params.insert("cursor".into(), c.clone());
                }
                None => return all,
            }
        }
    }

    #[test]
    fn pages_cover_every_item_once_whatever_the_size() {
        for n in [0, 1, 2, 5, 10, 11] {
            for size in [1, 2, 3, 5, 10, 100] {
                assert_eq!(walk(n, size), items(n), "n={n} size={size}");
            }
        }
    }

    #[test]
    fn bad_cursors_are_invalid_params() {
        for cursor in [
            json!("nope"),
            json!(7),
            json!("mcpipe:0"),
            json!("mcpipe:99"),
            // Numbers the server never writes: a sign, leading zeros, spaces, a page's middle.
            json!("mcpipe:+3"),
            json!("mcpipe:03"),
            json!("mcpipe: 3"),
            json!("mcpipe:3 "),
            json!("mcpipe:-3"),
            json!("mcpipe:2"),
            json!("mcpipe:"),
            json!("MCPIPE:3"),
        ] {
            let mut params = Map::new();
            params.insert("cursor".into(), cursor);
            let err = page(items(10), &params, "x", 3).unwrap_err();
            assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{params:?}");
        }
        // What the server hands out is accepted.
        for cursor in ["mcpipe:3", "mcpipe:6", "mcpipe:9"] {
            let mut params = Map::new();
            params.insert("cursor".into(), json!(cursor));
            assert!(page(items(10), &params, "x", 3).is_ok(), "{cursor}");
        }
    }
}
