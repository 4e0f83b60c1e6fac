//! The MCP server: registration of tools, resources and prompts, and the [`Handler`] that
//! answers the protocol (lifecycle, listing with pagination, calls, reads, logging).

use std::fmt;

use serde_json::{json, Map, Value};

use crate::error::{Error, Outcome};
use crate::handler::{catch_panic, Context, Handler};
use crate::mcp::arguments::Arguments;
use crate::mcp::context::McpContext;
use crate::mcp::logging::LogLevel;
use crate::mcp::prompt::{Prompt, PromptMessage};
use crate::mcp::resource::{Resource, ResourceContents, ResourceTemplate};
use crate::mcp::tool::{Tool, ToolError, ToolResult};
use crate::mcp::{LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS};
use crate::message::{ErrorCode, ErrorObject, Notification, Request};
use crate::server::Server;

type ToolFn<S> =
    Box<dyn FnMut(&mut S, &Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>>;
type ReadFn<S> = Box<
    dyn FnMut(
        &mut S,
        &str,
        &Arguments,
        &mut McpContext<'_>,
    ) -> Result<Vec<ResourceContents>, ErrorObject>,
>;
type PromptFn<S> = Box<
    dyn FnMut(&mut S, &Arguments, &mut McpContext<'_>) -> Result<Vec<PromptMessage>, ErrorObject>,
>;
type IdleFn<S> = Box<dyn FnMut(&mut S, &mut McpContext<'_>)>;

/// What the server knows about the session: set by `initialize` and `logging/setLevel`.
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
}

/// The methods this layer answers; any other gets `-32601`.
const KNOWN_METHODS: [&str; 11] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "logging/setLevel",
    "completion/complete",
];

/// An MCP server over a state `S` of yours: register tools, resources and prompts, then serve.
///
/// It implements [`Handler`], so [`Server`] runs it: `initialize` (answering the client's
/// protocol version when it is one of [`PROTOCOL_VERSIONS`], else the latest), `ping`, the
/// list methods (paginated with opaque cursors), `tools/call`, `resources/read`,
/// `prompts/get`, `logging/setLevel`, cancellation (`notifications/cancelled`) and batches
/// (only under 2025-03-26). Capabilities list only what was registered (and `logging`).
///
/// Handlers are synchronous, run one at a time and get `&mut S`. A tool that fails or panics
/// gives an `isError` result; the server goes on.
///
/// # Example
/// ```no_run
/// use mcpipe::{McpServer, Tool, ToolResult};
///
/// let mut server = McpServer::new("counter", "1.0.0", 0u64)
///     .instructions("Counts calls.")
///     .tool(Tool::new("count", "Counts and returns the count"), |count, _args, _cx| {
///         *count += 1;
///         Ok(ToolResult::text(count.to_string()))
///     });
/// server.serve_stdio()?;
/// # Ok::<(), mcpipe::Error>(())
/// ```
pub struct McpServer<S = ()> {
    state: S,
    info: Value,
    instructions: Option<String>,
    tools: Vec<(Tool, ToolFn<S>)>,
    resources: Vec<(Resource, ReadFn<S>)>,
    templates: Vec<(ResourceTemplate, ReadFn<S>)>,
    prompts: Vec<(Prompt, PromptFn<S>)>,
    on_idle: Option<IdleFn<S>>,
    page_size: usize,
    session: Session,
}

impl<S: fmt::Debug> fmt::Debug for McpServer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("state", &self.state)
            .field("info", &self.info)
            .field(
                "tools",
                &self.tools.iter().map(|t| t.0.name()).collect::<Vec<_>>(),
            )
            .field("resources", &self.resources.len())
            .field("templates", &self.templates.len())
            .field("prompts", &self.prompts.len())
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl<S: 'static> McpServer<S> {
    /// A server named `name` (its `serverInfo`) at `version`, over `state`.
    pub fn new(name: impl Into<String>, version: impl Into<String>, state: S) -> McpServer<S> {
        McpServer {
            state,
            info: json!({ "name": name.into(), "version": version.into() }),
            instructions: None,
            tools: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            prompts: Vec::new(),
            on_idle: None,
            page_size: 100,
            session: Session {
                version: None,
                client_capabilities: json!({}),
                client_info: Value::Null,
                ready: false,
                log_level: LogLevel::Info,
            },
        }
    }

    /// Sets the `instructions` returned by `initialize` (a hint for the model).
    pub fn instructions(mut self, text: impl Into<String>) -> McpServer<S> {
        self.instructions = Some(text.into());
        self
    }

    /// Sets another `serverInfo` field (`title`, `description`, `websiteUrl`, `icons`).
    pub fn info_field(mut self, key: &str, value: Value) -> McpServer<S> {
        if let Value::Object(info) = &mut self.info {
            if key != "name" && key != "version" {
                info.insert(key.to_owned(), value);
            }
        }
        self
    }

    /// Registers a tool and the function that runs it. A tool registered under a name that is
    /// already taken replaces the earlier one.
    ///
    /// The function's `Err` becomes an `isError` result with the message (or, for
    /// [`ToolError::protocol`], a JSON-RPC error); a panic becomes an `isError` result too.
    pub fn tool(
        mut self,
        tool: Tool,
        run: impl FnMut(&mut S, &Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>
            + 'static,
    ) -> McpServer<S> {
        self.tools.retain(|(t, _)| t.name() != tool.name());
        self.tools.push((tool, Box::new(run)));
        self
    }

    /// Registers a resource and its reader, which gets the URI. Its `Err` is the JSON-RPC
    /// error of the read (see [`Resource::not_found`]).
    pub fn resource(
        mut self,
        resource: Resource,
        mut read: impl FnMut(&mut S, &str, &mut McpContext<'_>) -> Result<Vec<ResourceContents>, ErrorObject>
            + 'static,
    ) -> McpServer<S> {
        self.resources.retain(|(r, _)| r.uri() != resource.uri());
        self.resources.push((
            resource,
            Box::new(move |state, uri, _vars, cx| read(state, uri, cx)),
        ));
        self
    }

    /// Registers a resource template and its reader, which gets the URI and the template's
    /// variables. Reads of URIs that no listed resource has go to the first template that
    /// matches.
    pub fn resource_template(
        mut self,
        template: ResourceTemplate,
        read: impl FnMut(
                &mut S,
                &str,
                &Arguments,
                &mut McpContext<'_>,
            ) -> Result<Vec<ResourceContents>, ErrorObject>
            + 'static,
    ) -> McpServer<S> {
        self.templates.push((template, Box::new(read)));
        self
    }

    /// Registers a prompt and the function that makes its messages. Required arguments are
    /// checked before it runs (a missing one gets `-32602`).
    pub fn prompt(
        mut self,
        prompt: Prompt,
        get: impl FnMut(
                &mut S,
                &Arguments,
                &mut McpContext<'_>,
            ) -> Result<Vec<PromptMessage>, ErrorObject>
            + 'static,
    ) -> McpServer<S> {
        self.prompts.retain(|(p, _)| p.name() != prompt.name());
        self.prompts.push((prompt, Box::new(get)));
        self
    }

    /// Sets the idle hook: it runs once after each quiet period of the loop's idle timeout
    /// ([`Server::idle_timeout`]), the place to evict caches.
    pub fn on_idle(
        mut self,
        hook: impl FnMut(&mut S, &mut McpContext<'_>) + 'static,
    ) -> McpServer<S> {
        self.on_idle = Some(Box::new(hook));
        self
    }

    /// How many items a list response holds at most before it gives a `nextCursor` (100 by
    /// default; at least 1).
    pub fn page_size(mut self, size: usize) -> McpServer<S> {
        self.page_size = size.max(1);
        self
    }

    /// The state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state, mutably.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// The protocol version negotiated with the client, once `initialize` was answered.
    pub fn protocol_version(&self) -> Option<&str> {
        self.session.version.as_deref()
    }

    /// Serves on stdin and stdout with the default [`Server`] settings; use
    /// [`Server::serve_stdio`] with this server as the handler for others.
    ///
    /// # Errors
    /// As [`Server::serve_stdio`].
    pub fn serve_stdio(&mut self) -> Result<Outcome, Error> {
        Server::new().serve_stdio(self)
    }

    fn capabilities(&self) -> Value {
        let mut caps = Map::new();
        if !self.tools.is_empty() {
            caps.insert("tools".into(), json!({ "listChanged": false }));
        }
        if !self.resources.is_empty() || !self.templates.is_empty() {
            caps.insert(
                "resources".into(),
                json!({ "subscribe": false, "listChanged": false }),
            );
        }
        if !self.prompts.is_empty() {
            caps.insert("prompts".into(), json!({ "listChanged": false }));
        }
        caps.insert("logging".into(), json!({}));
        Value::Object(caps)
    }

    fn initialize(&mut self, params: &Map<String, Value>) -> Result<Value, ErrorObject> {
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
        self.session.client_capabilities = match params.get("capabilities") {
            Some(caps @ Value::Object(_)) => caps.clone(),
            _ => json!({}),
        };
        self.session.client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
        let mut result = Map::new();
        result.insert("protocolVersion".into(), Value::String(version.to_owned()));
        result.insert("capabilities".into(), self.capabilities());
        result.insert("serverInfo".into(), self.info.clone());
        if let Some(text) = &self.instructions {
            result.insert("instructions".into(), Value::String(text.clone()));
        }
        Ok(Value::Object(result))
    }

    fn call_tool(
        &mut self,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: tools/call needs a string \"name\"",
            ));
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Arguments::default(),
            Some(Value::Object(map)) => Arguments::from_map(map.clone()),
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: tools/call \"arguments\" must be an object",
                ))
            }
        };
        let Some((_, run)) = self.tools.iter_mut().find(|(t, _)| t.name() == name) else {
            return Err(ErrorObject::invalid_params(format!("unknown tool: {name}"))
                .with_data(json!({ "name": name })));
        };
        let token = progress_token(params);
        let state = &mut self.state;
        let mut mcx = McpContext::new(child_context(cx), &self.session, token);
        match catch_panic(|| run(state, &arguments, &mut mcx)) {
            Ok(Ok(result)) => Ok(result.into_value()),
            Ok(Err(error)) => error.into_response(),
            Err(panic) => {
                eprintln!("mcpipe: the tool {name} panicked: {panic}");
                Ok(
                    ToolResult::error(format!("internal error: the tool {name} panicked: {panic}"))
                        .into_value(),
                )
            }
        }
    }

    fn read_resource(
        &mut self,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: resources/read needs a string \"uri\"",
            ));
        };
        let vars;
        let read = if let Some((_, read)) = self.resources.iter_mut().find(|(r, _)| r.uri() == uri)
        {
            vars = Arguments::default();
            read
        } else {
            let found = self
                .templates
                .iter_mut()
                .find_map(|(t, read)| t.matches(uri).map(|v| (v, read)));
            let Some((matched, read)) = found else {
                return Err(Resource::not_found(uri));
            };
            vars = Arguments::from_map(matched);
            read
        };
        let mut mcx = McpContext::new(child_context(cx), &self.session, progress_token(params));
        let contents = read(&mut self.state, uri, &vars, &mut mcx)?;
        Ok(
            json!({ "contents": contents.iter().map(ResourceContents::to_value).collect::<Vec<_>>() }),
        )
    }

    fn get_prompt(
        &mut self,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: prompts/get needs a string \"name\"",
            ));
        };
        let Some((prompt, get)) = self.prompts.iter_mut().find(|(p, _)| p.name() == name) else {
            return Err(
                ErrorObject::invalid_params(format!("unknown prompt: {name}"))
                    .with_data(json!({ "name": name })),
            );
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Arguments::default(),
            Some(Value::Object(map)) => Arguments::from_map(map.clone()),
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: prompts/get \"arguments\" must be an object",
                ))
            }
        };
        if let Some(missing) = prompt
            .required_arguments()
            .find(|a| arguments.get(a).is_none())
        {
            return Err(ErrorObject::invalid_params(format!(
                "invalid params: prompt {name} needs the argument \"{missing}\""
            )));
        }
        let description = prompt.description_value().cloned();
        let mut mcx = McpContext::new(child_context(cx), &self.session, progress_token(params));
        let messages = get(&mut self.state, &arguments, &mut mcx)?;
        let mut result = Map::new();
        if let Some(description) = description {
            result.insert("description".into(), description);
        }
        result.insert(
            "messages".into(),
            Value::Array(messages.iter().map(PromptMessage::to_value).collect()),
        );
        Ok(Value::Object(result))
    }

    fn set_level(&mut self, params: &Map<String, Value>) -> Result<Value, ErrorObject> {
        let level = params.get("level").and_then(Value::as_str);
        match level.and_then(LogLevel::from_name) {
            Some(level) => {
                self.session.log_level = level;
                Ok(json!({}))
            }
            None => Err(ErrorObject::invalid_params(format!(
                "invalid params: unknown log level {}; expected one of debug, info, notice, \
                 warning, error, critical, alert, emergency",
                params.get("level").unwrap_or(&Value::Null)
            ))),
        }
    }
}

/// A fresh context for the same request, so an [`McpContext`] can own one.
fn child_context<'b>(cx: &'b mut Context<'_>) -> Context<'b> {
    cx.reborrow()
}

fn progress_token(params: &Map<String, Value>) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// One page of `items` from `cursor` on, and the cursor of the next page if there is one.
fn page(
    items: Vec<Value>,
    params: &Map<String, Value>,
    key: &str,
    size: usize,
) -> Result<Value, ErrorObject> {
    let bad = || ErrorObject::invalid_params("invalid params: invalid cursor");
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(Value::String(cursor)) => cursor
            .strip_prefix("mcpipe:")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0 && *n < items.len())
            .ok_or_else(bad)?,
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

impl<S: 'static> Handler for McpServer<S> {
    fn handle_request(
        &mut self,
        request: Request,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let method = request.method.as_str();
        let empty = Map::new();
        let params = match &request.params {
            None => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: MCP params must be an object",
                ))
            }
        };
        if method == "ping" {
            return Ok(json!({}));
        }
        if !KNOWN_METHODS.contains(&method) {
            return Err(ErrorObject::method_not_found(method));
        }
        if method == "initialize" {
            return self.initialize(params);
        }
        if self.session.version.is_none() {
            return Err(ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "invalid request: {method} before initialize; send initialize first \
                     (only ping is answered before it)"
                ),
            ));
        }
        let size = self.page_size;
        let tools = !self.tools.is_empty();
        let resources = !self.resources.is_empty() || !self.templates.is_empty();
        let prompts = !self.prompts.is_empty();
        match method {
            "tools/list" if tools => {
                let items = self.tools.iter().map(|(t, _)| t.to_value()).collect();
                page(items, params, "tools", size)
            }
            "tools/call" if tools => self.call_tool(params, cx),
            "resources/list" if resources => {
                let items = self.resources.iter().map(|(r, _)| r.to_value()).collect();
                page(items, params, "resources", size)
            }
            "resources/templates/list" if resources => {
                let items = self.templates.iter().map(|(t, _)| t.to_value()).collect();
                page(items, params, "resourceTemplates", size)
            }
            "resources/read" if resources => self.read_resource(params, cx),
            "prompts/list" if prompts => {
                let items = self.prompts.iter().map(|(p, _)| p.to_value()).collect();
                page(items, params, "prompts", size)
            }
            "prompts/get" if prompts => self.get_prompt(params, cx),
            "logging/setLevel" => self.set_level(params),
            // A method of a capability this server did not declare.
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }

    fn handle_notification(&mut self, notification: Notification, _cx: &mut Context<'_>) {
        // `notifications/cancelled` that reach here name unknown or finished requests: ignored,
        // as MCP asks. Unknown notifications are ignored too.
        if notification.method == "notifications/initialized" {
            self.session.ready = true;
        }
    }

    fn on_idle(&mut self, cx: &mut Context<'_>) {
        if let Some(hook) = &mut self.on_idle {
            let mut mcx = McpContext::new(child_context(cx), &self.session, None);
            hook(&mut self.state, &mut mcx);
        }
    }

    fn accepts_batches(&self) -> bool {
        // 2025-03-26 is the one revision that has batches.
        self.session.version.as_deref() == Some("2025-03-26")
    }

    fn cancel_method(&self) -> Option<&str> {
        Some("notifications/cancelled")
    }

    fn is_cancellable(&self, request: &Request) -> bool {
        // MCP: `initialize` must never be cancelled.
        request.method != "initialize"
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
        ] {
            let mut params = Map::new();
            params.insert("cursor".into(), cursor);
            let err = page(items(10), &params, "x", 3).unwrap_err();
            assert_eq!(err.code, ErrorCode::INVALID_PARAMS);
        }
    }
}
