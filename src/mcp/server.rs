//! The MCP server: registration of tools, resources, prompts and completions, and the
//! [`Handler`] that answers the protocol in both eras: the handshake era (2024-11-05 to
//! 2025-11-25: lifecycle, listing with pagination, calls, reads, logging, subscriptions) and
//! MCP 2026-07-28 (stateless requests with a per-request `_meta`, `server/discover`,
//! `resultType` and caching hints, `input_required`, `subscriptions/listen`).
//!
//! # Which era serves a request
//! - Once `initialize` succeeded, the process is a handshake session for good: every later
//!   request is served under the negotiated version, as before this layer knew 2026-07-28.
//!   Per-request `_meta` keys are then ignored like any other `_meta`, and the 2026-only
//!   methods (`server/discover`, `subscriptions/listen`) are `-32601`. A stdio process has one
//!   client, and a client that ran the handshake speaks the handshake era.
//! - Before that, a request whose `_meta` holds `io.modelcontextprotocol/protocolVersion` is
//!   a 2026-07-28 request, served statelessly from its own `_meta`; any number of them may
//!   come first, and `initialize` is still accepted afterwards (how dual-era clients fall back).
//! - Before that, a request with no such claim: `ping` is answered, `initialize` starts the
//!   handshake, an unknown method is `-32601`, and any other method is `-32602` (it lacks
//!   both the per-request `_meta` of 2026-07-28 and the handshake of the earlier revisions).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::error::{Error, Outcome};
use crate::handler::{Context, Handler};
use crate::mcp::arguments::Arguments;
use crate::mcp::context::McpContext;
use crate::mcp::era;
use crate::mcp::input::Rounds;
use crate::mcp::logging::LogLevel;
use crate::mcp::prompt::{Prompt, PromptMessage};
use crate::mcp::resource::{Resource, ResourceContents, ResourceTemplate};
use crate::mcp::tasks::{TaskEvent, TaskStore};
use crate::mcp::tool::{Tool, ToolError, ToolResult};
use crate::mcp::MODERN_PROTOCOL_VERSIONS;
use crate::message::{ErrorObject, Notification, ParamsApart, Request, RequestId};
use crate::server::Server;
use crate::worker_pool::WorkerPool;

/// The default most threads of the worker pool (see [`McpServer::workers`]).
const DEFAULT_WORKERS: usize = 32;

/// How long an idle thread of the worker pool stays by default (see
/// [`McpServer::worker_keep_alive`]): tokio's blocking pool keeps one as long. Long enough
/// that a burst of calls, or a model's next step, finds threads ready; short enough that an
/// idle server gives back a burst's threads within seconds. Starting a thread again costs
/// tens of microseconds, nothing beside a call slow enough to be concurrent.
const DEFAULT_WORKER_KEEP_ALIVE: Duration = Duration::from_secs(10);

mod calls;
mod handshake;
mod methods;
mod tasks;

#[cfg(feature = "internals")]
pub(crate) use calls::TOOL_CALL_APART;
use calls::{child_context, Announced};
use handshake::Listener;
pub(crate) use handshake::Session;
use methods::method_exists;
pub(crate) use methods::modern_result;

type ToolFn<S> =
    Box<dyn FnMut(&mut S, &mut Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>>;
/// A tool function that runs on a worker thread, over state it shares (it captures it).
type ConcurrentToolFn =
    Arc<dyn Fn(&mut Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError> + Send + Sync>;

/// Where a tool runs.
enum ToolRunner<S> {
    /// On the loop's thread, with the server's state: quick tools (no thread hop).
    OnLoop(ToolFn<S>),
    /// On the worker pool: slow tools, which must not hold up other requests.
    Concurrent(ConcurrentToolFn),
}
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
/// A resource reader that runs on the worker pool (it gets the URI and the template's
/// variables, and shares what it captures).
type ConcurrentReadFn = Arc<
    dyn Fn(&str, &Arguments, &mut McpContext<'_>) -> Result<Vec<ResourceContents>, ErrorObject>
        + Send
        + Sync,
>;
/// A prompt function that runs on the worker pool.
type ConcurrentPromptFn = Arc<
    dyn Fn(&Arguments, &mut McpContext<'_>) -> Result<Vec<PromptMessage>, ErrorObject>
        + Send
        + Sync,
>;

/// Where a resource reader or a prompt function runs, as for tools: on the loop's thread
/// (with `&mut S`) or on the worker pool.
enum Runner<L, C> {
    OnLoop(L),
    Concurrent(C),
}

type CompleteFn<S> = Box<
    dyn FnMut(&mut S, &Value, &str, &str, &mut McpContext<'_>) -> Result<Vec<String>, ErrorObject>,
>;
type IdleFn<S> = Box<dyn FnMut(&mut S, &mut McpContext<'_>)>;

/// An MCP server over a state `S` of yours: register tools, resources and prompts, then serve.
///
/// It implements [`Handler`], so [`Server`] runs it (its answers are meant for the loop: a
/// tool's result goes to the loop as JSON text, and `handle_request` then returns `Null`, as
/// it does for a concurrent tool, whose answer comes later), and it serves clients of both
/// eras:
/// - handshake era: `initialize` (answering the client's protocol version when it is one of
///   [`PROTOCOL_VERSIONS`](crate::PROTOCOL_VERSIONS), else the latest), `ping`, the list methods (paginated with opaque
///   cursors), `tools/call`, `resources/read`, `prompts/get`, `completion/complete`,
///   `logging/setLevel`, `resources/subscribe`, cancellation (`notifications/cancelled`) and
///   batches (only under 2025-03-26);
/// - MCP 2026-07-28 ([`MODERN_PROTOCOL_VERSIONS`](crate::MODERN_PROTOCOL_VERSIONS)): the same features per request, with the
///   client's version, capabilities and log level in each request's `_meta`, `server/discover`,
///   `resultType` and caching hints on results, `input_required` results for tools, prompts and
///   resources that need input from the client (see [`McpContext::input`]), and
///   `subscriptions/listen`;
/// - in both: tasks, for tools that allow them ([`Tool::task_support`]; see
///   [`McpServer::task_limits`] for how a task runs and how many are kept).
///
/// The module docs of `mcp::server` (and `docs/revisions.md`) say which era serves a request.
/// Capabilities list only what was registered (and `logging`).
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
    tools: Vec<(Tool, ToolRunner<S>)>,
    resources: Vec<(Resource, Runner<ReadFn<S>, ConcurrentReadFn>)>,
    templates: Vec<(ResourceTemplate, Runner<ReadFn<S>, ConcurrentReadFn>)>,
    prompts: Vec<(Prompt, Runner<PromptFn<S>, ConcurrentPromptFn>)>,
    completion: Option<CompleteFn<S>>,
    on_idle: Option<IdleFn<S>>,
    page_size: usize,
    change_notifications: bool,
    cache_ttl_ms: u64,
    cache_public: bool,
    session: Session,
    listeners: Vec<Listener>,
    /// Threads for concurrent tools; started with the first such call.
    pool: Option<WorkerPool>,
    /// The most threads `pool` may have.
    workers: usize,
    /// How long a thread of `pool` waits for a job before it ends.
    worker_keep_alive: Duration,
    /// Tasks (of tools that allow them), owned by the loop's thread.
    tasks: TaskStore<tasks::Resume>,
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
            .field("completion", &self.completion.is_some())
            .field("change_notifications", &self.change_notifications)
            .field("session", &self.session)
            .field("listeners", &self.listeners)
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
            completion: None,
            on_idle: None,
            page_size: 100,
            change_notifications: false,
            cache_ttl_ms: 0,
            cache_public: false,
            session: Session {
                version: None,
                client_capabilities: json!({}),
                client_info: Value::Null,
                ready: false,
                log_level: LogLevel::Info,
                subscribed: BTreeSet::new(),
                scope_cache: None,
            },
            listeners: Vec::new(),
            pool: None,
            workers: DEFAULT_WORKERS,
            worker_keep_alive: DEFAULT_WORKER_KEEP_ALIVE,
            tasks: TaskStore::new(),
        }
    }

    /// Sets the `instructions` returned by `initialize` and `server/discover` (a hint for the
    /// model).
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
    /// Under MCP 2026-07-28 an input still missing ([`McpContext::input`]) makes the result
    /// `input_required`, and a capability the client lacks makes it `-32021`.
    pub fn tool(
        self,
        tool: Tool,
        mut run: impl FnMut(&mut S, &Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>
            + 'static,
    ) -> McpServer<S> {
        self.tool_mut(tool, move |state, args, cx| run(state, args, cx))
    }

    /// [`McpServer::tool`] whose function gets the arguments mutably, so that it can move
    /// values out of them ([`Arguments::take`], [`Arguments::take_string`]) instead of copying
    /// them: the way to echo or store a large argument without a copy of it. The arguments
    /// belong to this one call; what the function leaves in them is dropped afterwards.
    ///
    /// # Example
    /// ```no_run
    /// use mcpipe::{McpServer, Tool, ToolResult};
    ///
    /// let mut server = McpServer::new("echo", "1.0.0", ()).tool_mut(
    ///     Tool::new("echo", "Returns its text").arg("text", "string", "The text"),
    ///     |_, args, _cx| Ok(ToolResult::text(args.take_string("text")?)),
    /// );
    /// server.serve_stdio()?;
    /// # Ok::<(), mcpipe::Error>(())
    /// ```
    pub fn tool_mut(
        mut self,
        tool: Tool,
        run: impl FnMut(&mut S, &mut Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>
            + 'static,
    ) -> McpServer<S> {
        self.tools.retain(|(t, _)| t.name() != tool.name());
        self.tools.push((tool, ToolRunner::OnLoop(Box::new(run))));
        self
    }

    /// Registers a tool that runs on the server's worker pool, so that it never holds up other
    /// requests: the loop keeps answering everything else (fast tools, pings, lists, other
    /// concurrent calls) while it runs. The function gets no `&mut S`: it shares whatever
    /// state it captures (an `Arc` of something `Sync`), which is why it must be
    /// `Send + Sync`.
    ///
    /// Its [`McpContext`] works as on the loop's thread: cancellation (a flag the loop sets;
    /// [`McpContext::sleep`] wakes at once), progress, logging, requests to the client
    /// (routed through the loop), [`McpContext::run_command`] (its process group is stopped
    /// within a second of a cancellation). A panic gives an `isError` result and the thread goes
    /// on. Announced changes are delivered before the answer.
    ///
    /// Use it for anything that waits: sleeps, commands, network or disk I/O, questions to the
    /// client. Keep [`McpServer::tool`] for quick tools, which run on the loop's thread with no
    /// thread hop (and `&mut S`). See [`McpServer::workers`] for the pool's size.
    ///
    /// # Example
    /// ```no_run
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
    /// use std::time::Duration;
    /// use mcpipe::{McpServer, Tool, ToolResult};
    ///
    /// let done = Arc::new(AtomicU64::new(0));
    /// let mut server = McpServer::new("slow", "1.0.0", ()).concurrent_tool(
    ///     Tool::new("wait", "Waits a second"),
    ///     move |_args, cx| {
    ///         cx.sleep(Duration::from_secs(1))?; // wakes at once when cancelled
    ///         let n = done.fetch_add(1, Ordering::Relaxed) + 1;
    ///         Ok(ToolResult::text(format!("waited ({n} so far)")))
    ///     },
    /// );
    /// server.serve_stdio()?;
    /// # Ok::<(), mcpipe::Error>(())
    /// ```
    pub fn concurrent_tool(
        mut self,
        tool: Tool,
        run: impl Fn(&mut Arguments, &mut McpContext<'_>) -> Result<ToolResult, ToolError>
            + Send
            + Sync
            + 'static,
    ) -> McpServer<S> {
        self.tools.retain(|(t, _)| t.name() != tool.name());
        self.tools
            .push((tool, ToolRunner::Concurrent(Arc::new(run))));
        self
    }

    /// The most threads the pool of [`concurrent_tool`](McpServer::concurrent_tool)s may start
    /// (32 by default; at least 1): a ceiling, not a floor. Threads start on demand and end
    /// after [`McpServer::worker_keep_alive`] without a job. Calls beyond the count wait for a
    /// free thread; how many may wait is bounded by the loop
    /// ([`Server::max_in_flight`](crate::Server::max_in_flight)).
    pub fn workers(mut self, threads: usize) -> McpServer<S> {
        self.workers = threads.max(1);
        self
    }

    /// How long a worker thread waits for a job before it ends (10 s by default), so that a
    /// long-lived server does not keep a burst's threads (their stacks and malloc arenas)
    /// for ever; the next concurrent call starts one again. `Duration::ZERO` ends a thread as
    /// soon as it has no job; `Duration::MAX` keeps every thread started, as the pool did before.
    pub fn worker_keep_alive(mut self, keep_alive: Duration) -> McpServer<S> {
        self.worker_keep_alive = keep_alive;
        self
    }

    /// Bounds the tasks this server keeps (see [`TaskSupport`](crate::TaskSupport)): at most
    /// `max_kept` at once (1000 by default; at least 1), and a finished one for `ttl` after it
    /// finished (10 minutes by default; also the most a 2025-11-25 client may ask for). A new
    /// task evicts the oldest finished one when the store is full; when every kept task is
    /// still running, the call is refused (`-32603`). Memory thus stays bounded under a client
    /// that never fetches its results.
    ///
    /// # How a task runs
    /// A task of a [`concurrent_tool`](McpServer::concurrent_tool) is created when the call
    /// arrives (the answer is the task's handle) and runs on the worker pool; `tasks/cancel`
    /// reaches its [`McpContext`] (cancellation, [`McpContext::sleep`],
    /// [`McpContext::run_command`]'s process group). Its inputs: a 2025-11-25 request to the
    /// client is sent live (the task is `input_required` meanwhile); under 2026-07-28 the task
    /// turns `input_required` with the `inputRequests`, and runs again from the start once
    /// `tasks/update` brought every answer. A task of a [`tool`](McpServer::tool) (which runs
    /// on the loop's thread) is created when the tool returns: under 2026-07-28 its inputs are
    /// asked first in plain `input_required` rounds, and the task is made on the last round.
    pub fn task_limits(mut self, max_kept: usize, ttl: Duration) -> McpServer<S> {
        self.tasks.max_kept = max_kept.max(1);
        self.tasks.ttl = ttl;
        self
    }

    /// Registers a resource and its reader, which gets the URI. Its `Err` is the JSON-RPC
    /// error of the read (see [`Resource::not_found`], whose `-32002` becomes `-32602` under
    /// MCP 2026-07-28).
    pub fn resource(
        mut self,
        resource: Resource,
        mut read: impl FnMut(&mut S, &str, &mut McpContext<'_>) -> Result<Vec<ResourceContents>, ErrorObject>
            + 'static,
    ) -> McpServer<S> {
        self.resources.retain(|(r, _)| r.uri() != resource.uri());
        self.resources.push((
            resource,
            Runner::OnLoop(Box::new(move |state, uri, _vars, cx| read(state, uri, cx))),
        ));
        self
    }

    /// [`McpServer::resource`] whose reader runs on the worker pool (see
    /// [`McpServer::concurrent_tool`]): for reads that wait on disk, network or a process.
    pub fn concurrent_resource(
        mut self,
        resource: Resource,
        read: impl Fn(&str, &mut McpContext<'_>) -> Result<Vec<ResourceContents>, ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> McpServer<S> {
        self.resources.retain(|(r, _)| r.uri() != resource.uri());
        let read: ConcurrentReadFn = Arc::new(move |uri, _vars, cx| read(uri, cx));
        self.resources.push((resource, Runner::Concurrent(read)));
        self
    }

    /// [`McpServer::resource_template`] whose reader runs on the worker pool.
    pub fn concurrent_resource_template(
        mut self,
        template: ResourceTemplate,
        read: impl Fn(&str, &Arguments, &mut McpContext<'_>) -> Result<Vec<ResourceContents>, ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> McpServer<S> {
        self.templates
            .push((template, Runner::Concurrent(Arc::new(read))));
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
        self.templates
            .push((template, Runner::OnLoop(Box::new(read))));
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
        self.prompts.push((prompt, Runner::OnLoop(Box::new(get))));
        self
    }

    /// [`McpServer::prompt`] whose function runs on the worker pool (see
    /// [`McpServer::concurrent_tool`]).
    pub fn concurrent_prompt(
        mut self,
        prompt: Prompt,
        get: impl Fn(&Arguments, &mut McpContext<'_>) -> Result<Vec<PromptMessage>, ErrorObject>
            + Send
            + Sync
            + 'static,
    ) -> McpServer<S> {
        self.prompts.retain(|(p, _)| p.name() != prompt.name());
        self.prompts
            .push((prompt, Runner::Concurrent(Arc::new(get))));
        self
    }

    /// Serves `completion/complete` (and declares the `completions` capability) with this
    /// function. It gets the request's `ref` (`{"type":"ref/prompt","name":..}` or
    /// `{"type":"ref/resource","uri":..}`), the argument's name and the partial value, and
    /// returns the suggestions; the layer sends at most 100 (with `hasMore` when it cut) and
    /// `total`.
    ///
    /// # Example
    /// ```
    /// use mcpipe::McpServer;
    /// let server = McpServer::new("s", "1", ()).completion(|_, _reference, _name, value, _cx| {
    ///     Ok(["apple", "apricot", "banana"]
    ///         .iter()
    ///         .filter(|v| v.starts_with(value))
    ///         .map(|v| v.to_string())
    ///         .collect())
    /// });
    /// # drop(server);
    /// ```
    pub fn completion(
        mut self,
        complete: impl FnMut(
                &mut S,
                &Value,
                &str,
                &str,
                &mut McpContext<'_>,
            ) -> Result<Vec<String>, ErrorObject>
            + 'static,
    ) -> McpServer<S> {
        self.completion = Some(Box::new(complete));
        self
    }

    /// Turns on change notifications: declares `listChanged` for tools, resources and prompts
    /// and `resources.subscribe`, serves `resources/subscribe` and `resources/unsubscribe`
    /// (handshake era) and `subscriptions/listen` (MCP 2026-07-28), and delivers what handlers
    /// announce ([`McpContext::tools_changed`], [`McpContext::resource_updated`], ...).
    pub fn change_notifications(mut self) -> McpServer<S> {
        self.change_notifications = true;
        self
    }

    /// The caching hints put on MCP 2026-07-28 list, read and discover results: how long a
    /// client may reuse one (`ttlMs`, 0 by default: re-fetch each time) and whether shared
    /// caches may keep it (`cacheScope` `"public"`; `"private"` by default).
    pub fn cache_hints(mut self, ttl: Duration, public: bool) -> McpServer<S> {
        self.cache_ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.cache_public = public;
        self
    }

    /// How many items a list response holds at most before it gives a `nextCursor` (100 by
    /// default; at least 1).
    pub fn page_size(mut self, size: usize) -> McpServer<S> {
        self.page_size = size.max(1);
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

    /// The state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state, mutably.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// The protocol version negotiated with a handshake-era client, once `initialize` was
    /// answered (`None` while the process serves 2026-07-28 requests, which carry their own).
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

    fn has_resources(&self) -> bool {
        !self.resources.is_empty() || !self.templates.is_empty()
    }
}

impl<S: 'static> Handler for McpServer<S> {
    fn handle_request(
        &mut self,
        request: Request,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        // Owned, so that the handlers can move values (a tool's arguments) out of the params
        // instead of copying them.
        let Request { id, method, params } = request;
        let method = method.as_str();
        // A `tools/call` read the common way comes with its name and arguments apart (see
        // `params_apart`); its `params` hold the other members.
        let apart = cx.take_params_apart();
        let mut params = match params {
            None => Map::new(),
            Some(Value::Object(map)) => map,
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: MCP params must be an object",
                ))
            }
        };
        if self.session.version.is_some() {
            return self.handle_legacy(&id, method, &mut params, apart, cx);
        }
        if era::claims_modern(&params) || era::has_envelope_keys(&params) {
            let envelope = era::parse(&params)?;
            return self.handle_modern(&id, method, &mut params, apart, envelope, cx);
        }
        match method {
            "ping" => Ok(json!({})),
            "initialize" => self.initialize(&params, cx),
            _ if !method_exists(method, None) => Err(ErrorObject::method_not_found(method)),
            _ => Err(ErrorObject::invalid_params(format!(
                "invalid params: {method} needs the per-request _meta \
                 \"io.modelcontextprotocol/protocolVersion\" and \
                 \"io.modelcontextprotocol/clientCapabilities\" (MCP 2026-07-28), or, for earlier \
                 revisions, initialize first (only ping is answered before it)"
            ))
            .with_data(json!({ "supported": MODERN_PROTOCOL_VERSIONS }))),
        }
    }

    fn handle_notification(&mut self, notification: Notification, _cx: &mut Context<'_>) {
        match notification.method.as_str() {
            "notifications/initialized" => self.session.ready = true,
            // Cancellations that reach here name no running or queued request: an open
            // `subscriptions/listen` stream (closed without a response, as cancellation asks),
            // or an unknown or finished request (ignored, as MCP asks).
            "notifications/cancelled" => {
                let id = notification
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value);
                if let Some(id) = id {
                    self.listeners.retain(|l| l.id != id);
                }
            }
            // Unknown notifications are ignored.
            _ => {}
        }
    }

    fn handle_post(&mut self, data: Box<dyn std::any::Any + Send>, cx: &mut Context<'_>) {
        let data = match data.downcast::<Announced>() {
            Ok(announced) => return self.deliver(announced.0, cx),
            Err(data) => data,
        };
        if let Ok(event) = data.downcast::<TaskEvent>() {
            self.task_event(*event, cx);
        }
    }

    fn handle_cancelled(&mut self, request: RequestId, _cx: &mut Context<'_>) {
        // A cancelled `tasks/result` stops waiting (its answer would not be sent anyway).
        self.forget_waiter(&request);
    }

    fn on_idle(&mut self, cx: &mut Context<'_>) {
        if let Some(hook) = &mut self.on_idle {
            let scope = self.session.scope();
            let mut mcx = McpContext::new(child_context(cx), &scope, None, Rounds::default());
            hook(&mut self.state, &mut mcx);
            let (_, changes) = mcx.into_parts();
            self.deliver(changes, cx);
        }
    }

    fn on_ending(&mut self, _cx: &mut Context<'_>) {
        // Whoever waits in `tasks/result` is told the task was stopped, before the loop fails
        // what is still owed.
        self.stop_tasks();
    }

    fn on_shutdown(&mut self, _outcome: &Outcome, cx: &mut Context<'_>) {
        self.stop_tasks();
        self.end_listeners(cx);
    }

    fn accepts_batches(&self) -> bool {
        // 2025-03-26 is the one revision that has batches.
        self.session.version.as_deref() == Some("2025-03-26")
    }

    fn cancel_method(&self) -> Option<&str> {
        Some("notifications/cancelled")
    }

    fn methods_answered_at_once(&self) -> &'static [&'static str] {
        &["ping"]
    }

    fn is_cancellable(&self, request: &Request) -> bool {
        // MCP: `initialize` must never be cancelled.
        request.method != "initialize"
    }

    fn params_apart(&self) -> Option<ParamsApart> {
        Some(calls::TOOL_CALL_APART)
    }
}
