//! What an MCP tool, resource or prompt handler works through: cancellation, progress,
//! logging, requests to the client, child processes.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::child::{self, ChildOutput, TokenWaiter};
use crate::deadline;
use crate::error::Error;
use crate::handler::Context;
use crate::mcp::input::Rounds;
use crate::mcp::logging::LogLevel;
use crate::mcp::tasks::{self, TaskEvent};
use crate::responder::{CancelToken, Outbox, Responder};
use crate::stats::Stats;

/// Who is asking, as the layer knows it for one request: from `initialize` (handshake era) or
/// from the request's own `_meta` (2026-07-28).
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// The request came with the 2026-07-28 per-request envelope.
    pub(crate) modern: bool,
    pub(crate) version: String,
    pub(crate) client_capabilities: Value,
    pub(crate) client_info: Value,
    /// Log messages below this level are not sent; `None`: none are.
    pub(crate) log_level: Option<LogLevel>,
}

/// A change a handler announced, delivered by the layer when the handler returns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Tools,
    Prompts,
    Resources,
    ResourceUpdated(String),
}

/// The context of one MCP request: the loop's [`Context`] plus who is asking (protocol
/// version, client capabilities, log level), the request's progress token, and, under MCP
/// 2026-07-28, the answers the client gave to earlier questions of this call.
///
/// Everything it sends goes out at once, not when the handler returns.
///
/// # One API for both eras
/// [`McpContext::input`] (and [`elicit`](McpContext::elicit),
/// [`create_message`](McpContext::create_message), [`list_roots`](McpContext::list_roots))
/// asks the client something. With a handshake-era client it sends the request and waits for
/// the answer. With a 2026-07-28 client, which takes no requests from servers, it returns the
/// answer the client already gave in this call, or [`Error::InputRequired`]: the handler
/// returns (with `?`), the layer answers `input_required`, and runs the handler again, from
/// the start, when the client retries with the answers. Code before an input may therefore
/// run once per round: keep side effects after the inputs, or make them idempotent.
#[derive(Debug)]
pub struct McpContext<'a> {
    link: Link<'a>,
    scope: &'a Scope,
    progress_token: Option<Value>,
    /// The last progress value sent: the next one must be greater.
    last_progress: Option<f64>,
    rounds: Rounds,
    changes: Vec<Change>,
}

/// How a handler reaches the client: through the loop it runs on, or, on a worker thread,
/// through its request's [`Responder`] (which hands everything to the loop).
#[derive(Debug)]
enum Link<'a> {
    Loop(Context<'a>),
    Worker {
        responder: Responder,
        /// The loop's counters when the call started.
        stats: Stats,
    },
    /// A task's work on a worker thread. Its request was answered already (with the task's
    /// handle), so it reaches the client through the loop's outbox, and the task's own token
    /// (`tasks/cancel`, shutdown) stops it.
    Task {
        outbox: Outbox,
        cancel: CancelToken,
        stats: Stats,
        task_id: String,
    },
}

impl<'a> McpContext<'a> {
    pub(crate) fn new(
        cx: Context<'a>,
        scope: &'a Scope,
        progress_token: Option<Value>,
        rounds: Rounds,
    ) -> McpContext<'a> {
        McpContext::with_link(Link::Loop(cx), scope, progress_token, rounds)
    }

    /// The context of a call running on a worker thread.
    pub(crate) fn on_worker(
        responder: Responder,
        stats: Stats,
        scope: &'a Scope,
        progress_token: Option<Value>,
        rounds: Rounds,
    ) -> McpContext<'a> {
        let link = Link::Worker { responder, stats };
        McpContext::with_link(link, scope, progress_token, rounds)
    }

    fn with_link(
        link: Link<'a>,
        scope: &'a Scope,
        progress_token: Option<Value>,
        rounds: Rounds,
    ) -> McpContext<'a> {
        McpContext {
            link,
            scope,
            progress_token,
            last_progress: None,
            rounds,
            changes: Vec::new(),
        }
    }

    /// What the handler left for the layer: the inputs of this round and the changes it
    /// announced.
    pub(crate) fn into_parts(self) -> (Rounds, Vec<Change>) {
        (self.rounds, self.changes)
    }

    /// The context of a task's work on a worker thread.
    pub(crate) fn for_task(
        outbox: Outbox,
        cancel: CancelToken,
        stats: Stats,
        task_id: String,
        scope: &'a Scope,
        progress_token: Option<Value>,
        rounds: Rounds,
    ) -> McpContext<'a> {
        let link = Link::Task {
            outbox,
            cancel,
            stats,
            task_id,
        };
        McpContext::with_link(link, scope, progress_token, rounds)
    }

    /// [`McpContext::into_parts`] of a worker's context, with its responder.
    pub(crate) fn into_worker_parts(self) -> Option<(Rounds, Vec<Change>, Responder)> {
        match self.link {
            Link::Worker { responder, .. } => Some((self.rounds, self.changes, responder)),
            Link::Loop(_) | Link::Task { .. } => None,
        }
    }

    /// Whether the client cancelled this request (or the server must stop). Cheap: see
    /// [`Context::is_cancelled`]; on a worker thread it reads a flag the loop sets.
    pub fn is_cancelled(&mut self) -> bool {
        match &mut self.link {
            Link::Loop(cx) => cx.is_cancelled(),
            Link::Worker { responder, .. } => responder.is_cancelled(),
            Link::Task { cancel, .. } => cancel.is_cancelled(),
        }
    }

    /// `Err` once the request is cancelled or the server must stop; see
    /// [`Context::checkpoint`].
    ///
    /// # Errors
    /// [`Error::Cancelled`], [`Error::Shutdown`] or [`Error::PeerGone`]; on a worker thread
    /// also [`Error::HandlerPanicked`], when the handler that handed the call to the worker
    /// panicked afterwards (the loop answered the request itself: the call should stop).
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        match &mut self.link {
            Link::Loop(cx) => cx.checkpoint(),
            Link::Worker { responder, .. } => match responder.cancel_token().reason() {
                Some(why) => Err(why),
                None => Ok(()),
            },
            Link::Task { cancel, .. } => match cancel.reason() {
                Some(why) => Err(why),
                None => Ok(()),
            },
        }
    }

    /// Sleeps, waking at once on cancellation or shutdown; see [`Context::sleep`].
    ///
    /// # Errors
    /// As [`McpContext::checkpoint`].
    pub fn sleep(&mut self, duration: Duration) -> Result<(), Error> {
        match &mut self.link {
            Link::Loop(cx) => cx.sleep(duration),
            Link::Worker { responder, .. } => responder
                .cancel_token()
                .sleep_until(deadline::from_now(duration)),
            Link::Task { cancel, .. } => cancel.sleep_until(deadline::from_now(duration)),
        }
    }

    /// Sends a notification through whichever way this call reaches the client.
    fn send_notification(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        match &mut self.link {
            Link::Loop(cx) => cx.notify(method, params),
            Link::Worker { responder, .. } => responder.notify(method, params),
            Link::Task { outbox, .. } => outbox.notify(method, params),
        }
    }

    /// Sends a request to the client and waits for its result (see [`Context::call`]).
    fn call(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        match &mut self.link {
            Link::Loop(cx) => cx.call(method, params, timeout),
            Link::Worker { responder, .. } => responder.call(method, params, timeout),
            Link::Task {
                outbox,
                cancel,
                task_id,
                ..
            } => {
                // MCP 2025-11-25: a request made for a task names it, and the task is
                // `input_required` while the answer is awaited.
                let params = tasks::with_related_task(params, task_id);
                let _ = outbox.post(Box::new(TaskEvent::waiting(task_id, true)));
                let answer = outbox.call(method, Some(params), deadline::from_now(timeout), cancel);
                let _ = outbox.post(Box::new(TaskEvent::waiting(task_id, false)));
                answer
            }
        }
    }

    /// The request's `_meta.progressToken`, when the client asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress_token.as_ref()
    }

    /// Sends `notifications/progress` now, when the client asked for progress (otherwise does
    /// nothing). `progress` must increase from one call to the next: a value not greater than
    /// the last one sent is not sent. Nothing is sent once the request is cancelled.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        let Some(token) = &self.progress_token else {
            return Ok(());
        };
        let stopped = match &mut self.link {
            Link::Loop(cx) => cx.connection().interrupted(),
            Link::Worker { responder, .. } => responder.is_cancelled(),
            Link::Task { cancel, .. } => cancel.is_cancelled(),
        };
        if !progress.is_finite()
            || self.last_progress.is_some_and(|last| progress <= last)
            || stopped
        {
            return Ok(());
        }
        let mut params = Map::new();
        params.insert("progressToken".into(), token.clone());
        params.insert("progress".into(), json!(progress));
        if let Some(total) = total.filter(|t| t.is_finite()) {
            params.insert("total".into(), json!(total));
        }
        // `message` arrived with 2025-03-26; older clients ignore unknown fields anyway.
        if let Some(message) = message {
            params.insert("message".into(), Value::String(message.to_owned()));
        }
        self.last_progress = Some(progress);
        self.send_notification("notifications/progress", Some(Value::Object(params)))
    }

    /// Sends a log message (`notifications/message`) now, when `level` is at least the level
    /// the client asked for: with `logging/setLevel` in the handshake era (`info` until it sets
    /// one), in the request's `_meta` under 2026-07-28 (no messages at all when the request does
    /// not carry `io.modelcontextprotocol/logLevel`).
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn log(&mut self, level: LogLevel, logger: Option<&str>, data: Value) -> Result<(), Error> {
        match self.scope.log_level {
            Some(min) if level >= min => {}
            _ => return Ok(()),
        }
        let mut params = Map::new();
        params.insert("level".into(), Value::String(level.as_str().into()));
        if let Some(logger) = logger {
            params.insert("logger".into(), Value::String(logger.into()));
        }
        params.insert("data".into(), data);
        self.send_notification("notifications/message", Some(Value::Object(params)))
    }

    /// Sends any notification now.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.send_notification(method, params)
    }

    /// Asks the client for input under the name `key`: a `sampling/createMessage`,
    /// `elicitation/create` or `roots/list` request with these `params` (`Value::Null` for
    /// none). Returns the client's result for it (a `CreateMessageResult`, `ElicitResult` or
    /// `ListRootsResult` object).
    ///
    /// - Handshake era: sends the request now and waits up to `timeout`, reading input
    ///   meanwhile (see [`Context::call`]); `key` is not used.
    /// - MCP 2026-07-28: returns the answer the client gave for `key` in this call (in this
    ///   retry's `inputResponses` or an earlier round's, kept in `requestState`), or records the
    ///   request and returns [`Error::InputRequired`]; `timeout` is not used. Return that error
    ///   (`?`): the call is then answered with an `input_required` result listing every input
    ///   still missing, so to ask for several in one round, call `input` for each before the
    ///   first `?`. Any missing input ends the round, whatever the handler returns.
    ///
    /// Keys must be unique within one call; the same key always means the same question.
    ///
    /// # Errors
    /// [`Error::Unsupported`] (nothing asked) when the client did not declare the capability
    /// the method needs (`sampling`, `elicitation` (`elicitation.url` for URL mode), `roots`),
    /// or for any other method under 2026-07-28. A handler that returns this error gets
    /// `-32021` with `data.requiredCapabilities` under 2026-07-28 (an `isError` result in the
    /// handshake era, as before). [`Error::InputRequired`] as above; [`Error::Rpc`],
    /// [`Error::Timeout`], [`Error::InputEnded`], [`Error::Cancelled`], [`Error::Shutdown`],
    /// [`Error::PeerGone`] as in [`Context::call`], and [`Error::HandlerPanicked`] as in
    /// [`McpContext::checkpoint`].
    ///
    /// # Example
    /// ```no_run
    /// # fn tool(cx: &mut mcpipe::McpContext<'_>) -> Result<mcpipe::ToolResult, mcpipe::ToolError> {
    /// use std::time::Duration;
    /// use serde_json::json;
    /// let answer = cx.input(
    ///     "user_name",
    ///     "elicitation/create",
    ///     json!({
    ///         "message": "What is your name?",
    ///         "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } }
    ///     }),
    ///     Duration::from_secs(60),
    /// )?;
    /// let name = answer["content"]["name"].as_str().unwrap_or("stranger");
    /// Ok(mcpipe::ToolResult::text(format!("Hello, {name}!")))
    /// # }
    /// ```
    pub fn input(
        &mut self,
        key: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let Some(capability) = capability_for(method) else {
            if self.scope.modern {
                return Err(Error::Unsupported(format!(
                    "{method} cannot be asked of a client: MCP 2026-07-28 has no \
                     server-to-client requests except sampling, elicitation and roots as inputs"
                )));
            }
            return self.call(method, non_null(params), timeout);
        };
        self.check_capability(method, capability, &params)?;
        if !self.scope.modern {
            return self.call(method, non_null(params), timeout);
        }
        if let Some(answer) = self.rounds.answers.get(key) {
            return Ok(answer.clone());
        }
        let params = if params.is_null() { json!({}) } else { params };
        self.rounds.pending.insert(
            key.to_owned(),
            json!({ "method": method, "params": params }),
        );
        Err(Error::InputRequired)
    }

    fn check_capability(
        &mut self,
        method: &str,
        capability: &str,
        params: &Value,
    ) -> Result<(), Error> {
        let declared = self.scope.client_capabilities.get(capability);
        let url_mode = method == "elicitation/create"
            && params.get("mode").and_then(Value::as_str) == Some("url");
        let (missing, required) = match declared {
            None => (true, json!({ capability: {} })),
            Some(d) if url_mode && d.get("url").is_none() => {
                (true, json!({ "elicitation": { "url": {} } }))
            }
            Some(_) => (false, Value::Null),
        };
        if !missing {
            return Ok(());
        }
        self.rounds.missing_capability = Some(required);
        Err(Error::Unsupported(if url_mode && declared.is_some() {
            "the client did not declare URL-mode elicitation".to_owned()
        } else {
            format!("the client did not declare the {capability:?} capability needed for {method}")
        }))
    }

    /// Sends a request to the client and waits up to `timeout` for its result, reading input
    /// meanwhile (see [`Context::call`]). `sampling/createMessage`, `elicitation/create` and
    /// `roots/list` go through [`McpContext::input`] with a key made up from the method and a
    /// counter (`elicitation-1`, `elicitation-2`, ...), so they work in both eras; they are
    /// only asked when the client declared the capability.
    ///
    /// # Errors
    /// As [`McpContext::input`]; under MCP 2026-07-28 any other method is
    /// [`Error::Unsupported`] (the revision has no server-to-client requests).
    pub fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let key = match method {
            "sampling/createMessage" => self.rounds.next_key("sampling"),
            "elicitation/create" => self.rounds.next_key("elicitation"),
            "roots/list" => self.rounds.next_key("roots"),
            _ => String::new(),
        };
        self.input(&key, method, params.unwrap_or(Value::Null), timeout)
    }

    /// Asks the client's model for a completion (`sampling/createMessage`); needs the client's
    /// `sampling` capability. Works in both eras (see [`McpContext::input`]).
    ///
    /// # Errors
    /// As [`McpContext::input`].
    pub fn create_message(&mut self, params: Value, timeout: Duration) -> Result<Value, Error> {
        self.request("sampling/createMessage", Some(params), timeout)
    }

    /// Asks the user for input (`elicitation/create`); needs the client's `elicitation`
    /// capability. Works in both eras (see [`McpContext::input`]).
    ///
    /// # Errors
    /// As [`McpContext::input`].
    pub fn elicit(&mut self, params: Value, timeout: Duration) -> Result<Value, Error> {
        self.request("elicitation/create", Some(params), timeout)
    }

    /// Asks the client for its roots (`roots/list`); needs the client's `roots` capability.
    /// Works in both eras (see [`McpContext::input`]).
    ///
    /// # Errors
    /// As [`McpContext::input`].
    pub fn list_roots(&mut self, timeout: Duration) -> Result<Value, Error> {
        self.request("roots/list", None, timeout)
    }

    /// Under MCP 2026-07-28, the value the handler saved with
    /// [`set_round_state`](McpContext::set_round_state) in an earlier round of this call
    /// (it travels, integrity-protected, in `requestState`). `None` in the first round and
    /// always in the handshake era, where a call has only one round.
    pub fn round_state(&self) -> Option<&Value> {
        self.rounds.saved.as_ref()
    }

    /// Saves a value for the next rounds of this call (MCP 2026-07-28; see
    /// [`round_state`](McpContext::round_state)). The client can read it but not alter it:
    /// keep secrets out. Does nothing useful in the handshake era.
    pub fn set_round_state(&mut self, value: Value) {
        self.rounds.to_save = Some(value);
    }

    /// Whether the client declared the capability `name` (`"sampling"`, `"elicitation"`,
    /// `"roots"`, ...): in `initialize`, or in this request's `_meta` under 2026-07-28.
    pub fn has_client_capability(&self, name: &str) -> bool {
        self.scope.client_capabilities.get(name).is_some()
    }

    /// Whether this request came from an MCP 2026-07-28 client (per-request `_meta`, no
    /// handshake, no server-to-client requests).
    pub fn is_modern(&self) -> bool {
        self.scope.modern
    }

    /// Announces that the list of tools changed: clients that asked to hear of it get
    /// `notifications/tools/list_changed` when the handler returns (needs
    /// [`McpServer::change_notifications`](crate::McpServer::change_notifications); handshake
    /// era: sent to the client; 2026-07-28: sent on each `subscriptions/listen` stream that asked
    /// for it).
    pub fn tools_changed(&mut self) {
        self.announce(Change::Tools);
    }

    /// Announces that the list of prompts changed; see [`McpContext::tools_changed`].
    pub fn prompts_changed(&mut self) {
        self.announce(Change::Prompts);
    }

    /// Announces that the list of resources changed; see [`McpContext::tools_changed`].
    pub fn resources_changed(&mut self) {
        self.announce(Change::Resources);
    }

    /// Announces that the resource `uri` changed: `notifications/resources/updated` goes to
    /// clients subscribed to it (`resources/subscribe` in the handshake era, a
    /// `subscriptions/listen` naming it under 2026-07-28).
    pub fn resource_updated(&mut self, uri: &str) {
        self.announce(Change::ResourceUpdated(uri.to_owned()));
    }

    fn announce(&mut self, change: Change) {
        if !self.changes.contains(&change) {
            self.changes.push(change);
        }
    }

    /// Runs a command, cancellably, leaving no process behind; see [`Context::run_command`].
    ///
    /// # Errors
    /// As [`Context::run_command`]; on a worker thread also [`Error::HandlerPanicked`] as in
    /// [`McpContext::checkpoint`], and [`Error::Io`] when no poller can be made for the wait.
    pub fn run_command(
        &mut self,
        command: Command,
        max_output: usize,
        timeout: Option<Duration>,
    ) -> Result<ChildOutput, Error> {
        match &mut self.link {
            Link::Loop(cx) => cx.run_command(command, max_output, timeout),
            Link::Worker { responder, .. } => {
                let mut waiter = TokenWaiter::new(responder.cancel_token())
                    .map_err(|e| Error::io("creating a poller for a command", e))?;
                child::run(&mut waiter, command, max_output, timeout)
            }
            Link::Task { cancel, .. } => {
                let mut waiter = TokenWaiter::new(cancel.clone())
                    .map_err(|e| Error::io("creating a poller for a command", e))?;
                child::run(&mut waiter, command, max_output, timeout)
            }
        }
    }

    /// The protocol version: negotiated by `initialize`, or named by this request's `_meta`
    /// under 2026-07-28.
    pub fn protocol_version(&self) -> &str {
        &self.scope.version
    }

    /// The capabilities the client declared: in `initialize`, or in this request's `_meta`
    /// under 2026-07-28.
    pub fn client_capabilities(&self) -> &Value {
        &self.scope.client_capabilities
    }

    /// The client's `clientInfo`: from `initialize`, or from this request's `_meta` under
    /// 2026-07-28 (`Null` when it sent none).
    pub fn client_info(&self) -> &Value {
        &self.scope.client_info
    }

    /// The loop's counters (on a worker thread: as they were when the call started).
    pub fn stats(&self) -> &Stats {
        match &self.link {
            Link::Loop(cx) => cx.stats(),
            Link::Worker { stats, .. } | Link::Task { stats, .. } => stats,
        }
    }

    /// The loop's context, for anything not wrapped here; `None` on a worker thread (see
    /// [`McpServer::concurrent_tool`](crate::McpServer::concurrent_tool)), where the loop is
    /// reached only through this context's methods.
    pub fn context(&mut self) -> Option<&mut Context<'a>> {
        match &mut self.link {
            Link::Loop(cx) => Some(cx),
            Link::Worker { .. } | Link::Task { .. } => None,
        }
    }

    /// Whether this call runs on a worker thread (a concurrent tool) rather than the loop's.
    pub fn on_worker_thread(&self) -> bool {
        matches!(self.link, Link::Worker { .. } | Link::Task { .. })
    }
}

/// The client capability a server-to-client request needs, for the three that are inputs.
fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

fn non_null(params: Value) -> Option<Value> {
    (!params.is_null()).then_some(params)
}
