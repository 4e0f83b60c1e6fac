//! The handshake era's session (what `initialize` and `logging/setLevel` set), the server's
//! capabilities and identity (`initialize`, `server/discover`), and the open
//! `subscriptions/listen` streams of MCP 2026-07-28.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::McpServer;
use crate::handler::Context;
use crate::mcp::context::Scope;
use crate::mcp::era;
use crate::mcp::logging::LogLevel;
use crate::mcp::{LATEST_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS};
use crate::message::{ErrorCode, ErrorObject, Message, RequestId, Response};

/// What the server knows about a handshake-era session: set by `initialize` and
/// `logging/setLevel`.
#[derive(Debug)]
pub(crate) struct Session {
    /// The negotiated protocol version; `Some` once `initialize` was answered.
    pub(crate) version: Option<String>,
    pub(crate) client_capabilities: Value,
    pub(crate) client_info: Value,
    /// `notifications/initialized` arrived.
    pub(crate) ready: bool,
    /// Log messages below this level are not sent.
    pub(crate) log_level: LogLevel,
    /// URIs the client subscribed to with `resources/subscribe`.
    pub(crate) subscribed: BTreeSet<String>,
    /// [`Session::scope`], kept between requests so that a request does not copy the
    /// client's capabilities and info; `None` until first needed (and after `initialize`).
    pub(super) scope_cache: Option<Scope>,
}

impl Session {
    /// The scope of a handshake-session request, from the cache when it is there. Give it
    /// back with [`Session::return_scope`]. (A request that panics loses it: it is rebuilt.)
    pub(super) fn take_scope(&mut self) -> Scope {
        self.scope_cache.take().unwrap_or_else(|| self.scope())
    }

    /// Puts a scope from [`Session::take_scope`] back, with the log level brought up to date
    /// (`logging/setLevel` may have changed it; nothing else changes after `initialize`).
    pub(super) fn return_scope(&mut self, mut scope: Scope) {
        scope.log_level = self.version.is_some().then_some(self.log_level);
        self.scope_cache = Some(scope);
    }

    pub(super) fn scope(&self) -> Scope {
        Scope {
            modern: false,
            version: self.version.clone().unwrap_or_default(),
            client_capabilities: self.client_capabilities.clone(),
            client_info: self.client_info.clone(),
            log_level: self.version.is_some().then_some(self.log_level),
        }
    }
}

/// An open `subscriptions/listen` stream (2026-07-28): its request id and what it asked for,
/// narrowed to what this server can send.
#[derive(Debug, Clone)]
pub(super) struct Listener {
    pub(super) id: RequestId,
    pub(super) tools: bool,
    pub(super) prompts: bool,
    pub(super) resources: bool,
    pub(super) uris: Vec<String>,
}

impl<S: 'static> McpServer<S> {
    /// The capabilities of both eras (`initialize`, `server/discover`). `resources.subscribe`
    /// belongs to both: the 2026-07-28 schema keeps it in `ServerCapabilities` ("supports
    /// subscribing to resource updates"), which that revision does with `resourceSubscriptions`
    /// on `subscriptions/listen` instead of `resources/subscribe`; both are served exactly
    /// when it is `true` (with [`McpServer::change_notifications`]).
    pub(super) fn capabilities(&self) -> Value {
        let changes = self.change_notifications;
        let mut caps = Map::new();
        if !self.tools.is_empty() {
            caps.insert("tools".into(), json!({ "listChanged": changes }));
        }
        if self.has_resources() {
            caps.insert(
                "resources".into(),
                json!({ "subscribe": changes, "listChanged": changes }),
            );
        }
        if !self.prompts.is_empty() {
            caps.insert("prompts".into(), json!({ "listChanged": changes }));
        }
        if self.completion.is_some() {
            caps.insert("completions".into(), json!({}));
        }
        caps.insert("logging".into(), json!({}));
        Value::Object(caps)
    }

    pub(super) fn initialize(
        &mut self,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        if self.session.version.is_some() {
            return Err(ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                "invalid request: the session is already initialized",
            ));
        }
        let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: initialize needs a string \"protocolVersion\"",
            ));
        };
        let version = if PROTOCOL_VERSIONS.contains(&requested) {
            requested
        } else {
            LATEST_PROTOCOL_VERSION
        };
        self.session.version = Some(version.to_owned());
        self.session.scope_cache = None;
        self.forget_modern_tasks();
        // A 2026-07-28 stream would go on tagging notifications the handshake client never
        // asked for, and answer at shutdown a request it may not know: it ends now, gracefully.
        self.end_listeners(cx);
        self.session.client_capabilities = match params.get("capabilities") {
            Some(caps @ Value::Object(_)) => caps.clone(),
            _ => json!({}),
        };
        self.session.client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
        let mut result = Map::new();
        result.insert("protocolVersion".into(), Value::String(version.to_owned()));
        let mut capabilities = self.capabilities();
        self.declare_tasks(&mut capabilities, Some(version));
        result.insert("capabilities".into(), capabilities);
        result.insert("serverInfo".into(), self.info.clone());
        if let Some(text) = &self.instructions {
            result.insert("instructions".into(), Value::String(text.clone()));
        }
        Ok(Value::Object(result))
    }

    /// `server/discover` (2026-07-28).
    pub(super) fn discover(&self) -> Value {
        let mut result = Map::new();
        result.insert("supportedVersions".into(), json!(MODERN_PROTOCOL_VERSIONS));
        let mut capabilities = self.capabilities();
        self.declare_tasks(&mut capabilities, None);
        result.insert("capabilities".into(), capabilities);
        if let Some(text) = &self.instructions {
            result.insert("instructions".into(), Value::String(text.clone()));
        }
        Value::Object(result)
    }

    /// `subscriptions/listen` (2026-07-28): acknowledges at once and keeps the stream open; its
    /// response is sent only when the server shuts down (a cancelled stream gets none).
    pub(super) fn listen(
        &mut self,
        id: &RequestId,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let Some(wanted) = params.get("notifications").and_then(Value::as_object) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: subscriptions/listen needs a \"notifications\" object",
            ));
        };
        let flag = |key: &str| wanted.get(key).and_then(Value::as_bool) == Some(true);
        let resources = self.has_resources();
        let uris: Vec<String> = if resources {
            wanted
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str().map(str::to_owned))
                .collect()
        } else {
            Vec::new()
        };
        let listener = Listener {
            id: id.clone(),
            tools: flag("toolsListChanged") && !self.tools.is_empty(),
            prompts: flag("promptsListChanged") && !self.prompts.is_empty(),
            resources: flag("resourcesListChanged") && resources,
            uris,
        };
        let mut honored = Map::new();
        for (key, on) in [
            ("toolsListChanged", listener.tools),
            ("promptsListChanged", listener.prompts),
            ("resourcesListChanged", listener.resources),
        ] {
            if on {
                honored.insert(key.into(), json!(true));
            }
        }
        if wanted.contains_key("resourceSubscriptions") && resources {
            honored.insert("resourceSubscriptions".into(), json!(listener.uris));
        }
        self.listeners.retain(|l| l.id != listener.id);
        self.listeners.push(listener);
        cx.withhold_response();
        let ack = json!({
            "notifications": honored,
            "_meta": { era::SUBSCRIPTION_ID_KEY: id.to_value() },
        });
        // A client gone now is noticed by the loop; nothing to answer either way.
        let _ = cx.notify("notifications/subscriptions/acknowledged", Some(ack));
        Ok(Value::Null)
    }

    /// Ends every open `subscriptions/listen` stream gracefully: its one response is sent now.
    pub(super) fn end_listeners(&mut self, cx: &mut Context<'_>) {
        for listener in std::mem::take(&mut self.listeners) {
            let result = json!({
                "resultType": "complete",
                "_meta": {
                    era::SERVER_INFO_KEY: self.info.clone(),
                    era::SUBSCRIPTION_ID_KEY: listener.id.to_value(),
                },
            });
            // A client gone now is noticed by the loop; nothing to answer either way.
            let _ = cx.send(&Message::Response(Response::ok(listener.id, result)));
        }
    }
}
