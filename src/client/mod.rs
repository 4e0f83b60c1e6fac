//! A synchronous MCP client that spawns a stdio server and supervises it: every wait has a
//! deadline, a dead server fails what waits at once, and closing always ends the server.
//!
//! [`Client`] uses one thread, no background work: it does its I/O (answering the server's
//! requests, draining its stderr, the heartbeat) while the caller waits in a request, or in
//! [`Client::pump`]. [`SharedClient`] hands the same work to an IO thread so that many threads
//! can have many requests in flight. Both are shells over one sans-IO session (`session.rs`).
//!
//! It speaks both generations of MCP ([`Era`]): it probes with `server/discover` and falls back
//! to the `initialize` handshake. What it finds is cached: see [`Client`] for what and how long.

mod builder;
mod call_events;
mod connect;
mod era;
mod exchange;
mod handshake;
#[cfg(any(test, feature = "internals"))]
mod internals;
mod io_thread;
mod link;
mod options;
mod process;
mod retry;
mod rounds;
mod session;
mod shared;
mod spawner;
mod tasks;
mod wait;

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fmt;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::deadline;
use crate::diagnostics::Diagnostics;
use crate::error::Error;
use crate::id_map::IdMap;
use crate::message::{Notification, Response};

pub use builder::ClientBuilder;
pub use era::Era;
#[cfg(feature = "internals")]
pub use internals::check_session;
pub use link::{Call, Canceller};
pub use options::{Progress, RequestOptions};
pub use process::{Shutdown, ShutdownStage};
pub use retry::RetryPolicy;
pub use session::ClientStats;
pub use shared::{SharedClient, WeakClient};
pub use tasks::{TaskOptions, TaskStart};

use builder::{InputCallback, NotificationCallback, Settings, StderrCallback};
use era::Asked;
use exchange::Exchange;
use link::Detached;
use process::{ServerProcess, Spawn};
use session::Session;
use wait::Until;

/// Why the current server process can no longer serve.
#[derive(Debug, Clone)]
enum Dead {
    Exited {
        status: Option<std::process::ExitStatus>,
        stderr_tail: String,
    },
    Unresponsive {
        silence: Duration,
    },
}

/// A client of one MCP server that it spawns and supervises over stdio.
///
/// # Two eras, one client
/// By default the client first sends `server/discover` asking for MCP 2026-07-28 (the modern
/// era, [`Era::Modern`]). A discover result, or a `-32022` error naming a version both sides
/// speak, makes the connection modern: no `initialize`, and every request carries the
/// protocol version, client capabilities and client info in `params._meta`. Any other error,
/// or no answer within the [discover timeout](ClientBuilder::discover_timeout) (2 s), makes it
/// a handshake-era one ([`Era::Legacy`]): `initialize` and `notifications/initialized`, exactly
/// as a handshake-era client. [`ClientBuilder::era`] skips the probe.
///
/// Under 2026-07-28, results are read by `resultType` (a missing one means `complete`), and an
/// `input_required` result is fulfilled and retried automatically (roots from
/// [`ClientBuilder::root`], elicitation and sampling through the callbacks
/// [`ClientBuilder::on_elicitation`] and [`ClientBuilder::on_sampling`]), each retry with a new
/// id and the `requestState` echoed verbatim, at most
/// [`max_input_rounds`](ClientBuilder::max_input_rounds) times; what the client cannot
/// fulfil ends the request with [`Error::InputUnanswered`]. There is no `ping` under
/// 2026-07-28: [`Client::ping`] and the heartbeat send `server/discover` instead.
///
/// # What is cached
/// The era, the negotiated protocol version and the server's `initialize` or `server/discover`
/// result are cached for the life of the server process: the client never probes again while
/// it runs. When the server is started again ([`Client::restart`], or a retry after it died),
/// a server found to be handshake-era gets `initialize` straight away (no probe, so no probe
/// timeout again), and is probed anew only if it answers that with `-32022` (it was replaced by
/// a modern one); a server found to be modern is sent `server/discover` again, which under
/// 2026-07-28 is the whole connection step, so its version and capabilities are refreshed.
///
/// # Example
/// ```no_run
/// use mcpipe::Client;
/// use serde_json::json;
///
/// let mut client = Client::builder("mcpipe").arg("demo").spawn()?;
/// for tool in client.list_tools()? {
///     eprintln!("tool: {}", tool["name"]);
/// }
/// let result = client.call_tool("echo", json!({"text": "hello"}))?;
/// eprintln!("{}", result["content"][0]["text"]);
/// let shutdown = client.close(); // stdin closed, SIGTERM, SIGKILL: bounded
/// eprintln!("server ended: {:?}", shutdown.status);
/// # Ok::<(), mcpipe::Error>(())
/// ```
pub struct Client {
    spawn: Spawn,
    settings: Settings,
    on_stderr: Option<StderrCallback>,
    on_notification: Option<NotificationCallback>,
    on_elicitation: Option<InputCallback>,
    on_sampling: Option<InputCallback>,
    process: Option<ServerProcess>,
    dead: Option<Dead>,
    closed: bool,
    last_shutdown: Option<Shutdown>,
    /// The stderr tail of the last server shut down, for [`Client::stderr_tail`] after a close.
    last_stderr_tail: String,
    /// The protocol state: ids, pending requests, routing, heartbeat, era, counters.
    session: Session,
    initialize_result: Value,
    discover_result: Value,
    /// Requests of the [`SharedClient`], by id, and who waits for each (always empty
    /// otherwise).
    detached: IdMap<Detached>,
    notifications: VecDeque<Notification>,
    strays: VecDeque<Response>,
    diagnostics: Diagnostics,
    seed: u64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("spawn", &self.spawn)
            .field("pid", &self.pid())
            .field("era", &self.session.era())
            .field("protocol_version", &self.session.protocol_version())
            .field("closed", &self.closed)
            .field("stats", self.session.stats())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts configuring a client of the server `program`.
    pub fn builder(program: impl AsRef<OsStr>) -> ClientBuilder {
        ClientBuilder::new(program.as_ref())
    }

    /// Spawns `program` with `args` with the default settings and performs the handshake.
    ///
    /// A server that takes no arguments: `Client::builder(program).spawn()` (a bare `[]`
    /// leaves the item type unknown, so `Client::spawn(program, [])` does not compile;
    /// `[] as [&str; 0]` would).
    ///
    /// # Errors
    /// As [`ClientBuilder::spawn`].
    pub fn spawn<I, S>(program: impl AsRef<OsStr>, args: I) -> Result<Client, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Client::builder(program).args(args).spawn()
    }

    pub(crate) fn start(builder: ClientBuilder) -> Result<Client, Error> {
        let log = builder.settings.log_bad_lines;
        let mut capabilities = Map::new();
        if builder.settings.roots.is_some() {
            capabilities.insert("roots".into(), json!({ "listChanged": false }));
        }
        if builder.on_sampling.is_some() {
            capabilities.insert("sampling".into(), json!({}));
        }
        if builder.on_elicitation.is_some() {
            // `{}` means form mode in every revision that has elicitation.
            capabilities.insert("elicitation".into(), json!({}));
        }
        let client_info = json!({
            "name": builder.settings.client_name,
            "version": builder.settings.client_version,
        });
        let mut callbacks = Vec::new();
        if builder.on_elicitation.is_some() {
            callbacks.push("elicitation/create");
        }
        if builder.on_sampling.is_some() {
            callbacks.push("sampling/createMessage");
        }
        let mut session = Session::new(
            Value::Object(capabilities),
            client_info,
            builder.settings.roots.clone(),
            callbacks,
            builder.settings.heartbeat,
            builder.settings.initialize,
        );
        session.set_log_level(builder.settings.log_level);
        let mut client = Client {
            spawn: builder.spawn,
            settings: builder.settings,
            on_stderr: builder.on_stderr,
            on_notification: builder.on_notification,
            on_elicitation: builder.on_elicitation,
            on_sampling: builder.on_sampling,
            process: None,
            dead: None,
            closed: false,
            last_shutdown: None,
            last_stderr_tail: String::new(),
            session,
            initialize_result: Value::Null,
            discover_result: Value::Null,
            detached: IdMap::default(),
            notifications: VecDeque::new(),
            strays: VecDeque::new(),
            diagnostics: Diagnostics::new(log),
            seed: retry::seed(),
        };
        client.launch()?;
        Ok(client)
    }

    /// Spawns the server and, when configured, connects. On failure the new process is shut
    /// down before the error is returned.
    fn launch(&mut self) -> Result<(), Error> {
        let process = ServerProcess::spawn(&self.spawn, self.settings.max_message_bytes)?;
        self.diagnostics.set_label(self.spawn.label(process.pid()));
        self.process = Some(process);
        self.dead = None;
        self.closed = false;
        if !self.settings.initialize {
            self.session.new_connection();
            return Ok(());
        }
        // `connect` starts the session's new connection itself: the old era is its hint.
        if let Err(e) = self.connect() {
            self.close();
            return Err(e);
        }
        Ok(())
    }

    /// Sends a request and waits for its result.
    ///
    /// `params`, when given, should be an object (MCP params always are). A `progressToken` is
    /// added to `params._meta` for `tools/call` and whenever a progress callback is set, so the
    /// server can report progress that resets the timeout. Under MCP 2026-07-28 the required
    /// `_meta` fields are added too (those the caller set are kept), the result is read by its
    /// `resultType`, and `input_required` results are fulfilled and retried (see [`Client`]):
    /// what is returned is the final, complete result.
    ///
    /// # Errors
    /// - [`Error::Rpc`]: the server answered with an error object.
    /// - [`Error::Timeout`]: no answer in time; `notifications/cancelled` was sent and a late
    ///   answer will be dropped.
    /// - [`Error::ServerExited`] / [`Error::Unresponsive`]: the server died or went silent.
    /// - [`Error::Closed`]: the client was closed.
    /// - [`Error::RetriesExhausted`]: a retry policy applied and ran out.
    /// - [`Error::InputUnanswered`]: under 2026-07-28, the server asked for input the client
    ///   did not give, or for more rounds than allowed.
    /// - [`Error::Protocol`]: under 2026-07-28, a `resultType` the client does not know.
    pub fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        mut options: RequestOptions<'_>,
    ) -> Result<Value, Error> {
        exchange::request(self, method, params, &mut options)
    }

    /// Goes on with a request that ended with an `input_required` result the client did not
    /// fulfil by itself (see [`Error::InputUnanswered`]): sends `method` again with `params`
    /// (those of the first request), the caller's `responses` as `inputResponses` (by the keys
    /// of the result's `inputRequests`), and the result's `requestState` verbatim, under a new
    /// id. Later rounds are handled as by [`Client::request`].
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(client: &mut mcpipe::Client) -> Result<(), mcpipe::Error> {
    /// use mcpipe::{Error, RequestOptions};
    /// use serde_json::{json, Map};
    ///
    /// let params = json!({"name": "deploy", "arguments": {}});
    /// let result = match client.request("tools/call", Some(params.clone()), RequestOptions::new()) {
    ///     Err(Error::InputUnanswered { result, .. }) => {
    ///         let mut answers = Map::new();
    ///         for key in result["inputRequests"].as_object().into_iter().flatten().map(|(k, _)| k) {
    ///             answers.insert(key.clone(), json!({"action": "decline"}));
    ///         }
    ///         client.continue_request("tools/call", Some(params), &result, answers, RequestOptions::new())?
    ///     }
    ///     other => other?,
    /// };
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn continue_request(
        &mut self,
        method: &str,
        params: Option<Value>,
        input_required: &Value,
        responses: Map<String, Value>,
        options: RequestOptions<'_>,
    ) -> Result<Value, Error> {
        let next = era::next_round_params(&params, responses, input_required);
        self.request(method, next, options)
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`Error::Closed`], or the error that made the server unusable.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.check_usable()?;
        self.session.notify(method, params);
        self.flush_outbox();
        Ok(())
    }

    /// Writes bytes to the server's stdin exactly as given: for testing servers with malformed
    /// or split input. Answers to requests sent this way arrive through
    /// [`Client::next_stray_response`].
    ///
    /// # Errors
    /// [`Error::Closed`], or the error that made the server unusable.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.check_usable()?;
        // After what the session queued, so the bytes go out in the order they were given.
        self.flush_outbox();
        if let Some(process) = &mut self.process {
            process.send_raw(bytes);
        }
        Ok(())
    }

    /// Serves the connection for `duration`: writes what is queued, answers the server's
    /// requests, delivers notifications, runs the heartbeat, drains stderr.
    ///
    /// # Errors
    /// [`Error::Closed`], or why the server became unusable (it exited, went silent).
    pub fn pump(&mut self, duration: Duration) -> Result<(), Error> {
        self.run(Some(deadline::from_now(duration)), None, Until::Deadline)
    }

    /// The next notification from the server, waiting up to `timeout` for one (when no
    /// notification callback is set; with one, this only waits).
    ///
    /// # Errors
    /// As [`Client::pump`]; queued notifications are returned first even from a dead server.
    pub fn next_notification(&mut self, timeout: Duration) -> Result<Option<Notification>, Error> {
        if let Some(n) = self.notifications.pop_front() {
            return Ok(Some(n));
        }
        self.run(Some(deadline::from_now(timeout)), None, Until::Notification)?;
        Ok(self.notifications.pop_front())
    }

    /// Every queued notification, oldest first (none when a notification callback is set).
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        self.notifications.drain(..).collect()
    }

    /// The next response that matched no request the client is waiting for (answers to
    /// [`send_raw`](Client::send_raw) requests, errors with a null id), waiting up to `timeout`.
    ///
    /// # Errors
    /// As [`Client::pump`]; queued responses are returned first even from a dead server.
    pub fn next_stray_response(&mut self, timeout: Duration) -> Result<Option<Response>, Error> {
        if let Some(r) = self.strays.pop_front() {
            return Ok(Some(r));
        }
        self.run(Some(deadline::from_now(timeout)), None, Until::Stray)?;
        Ok(self.strays.pop_front())
    }

    /// Checks that the server answers: sends `ping` and waits for the empty result. MCP
    /// 2026-07-28 has no `ping`, so under it this sends `server/discover` (which every modern
    /// server must answer) and discards the result.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn ping(&mut self) -> Result<(), Error> {
        let method = match self.session.era() {
            Some(Era::Modern) => "server/discover",
            _ => "ping",
        };
        self.request(method, None, RequestOptions::new()).map(drop)
    }

    /// Every tool the server offers, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`Client::request`]; [`Error::Protocol`] when a page has no `tools` array or the
    /// cursors never end.
    pub fn list_tools(&mut self) -> Result<Vec<Value>, Error> {
        exchange::list_all(self, "tools/list", "tools")
    }

    /// Calls a tool and returns its `CallToolResult`. A tool that failed answers with
    /// `"isError": true` in an `Ok` result: that is the tool's failure, not the protocol's.
    ///
    /// `arguments` is sent as given unless it is `null`. Not retried unless the caller says
    /// the call is idempotent (see [`Client::call_tool_with`]).
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
        self.call_tool_with(name, arguments, RequestOptions::new())
    }

    /// [`Client::call_tool`] with options (timeout, progress, retry).
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn call_tool_with(
        &mut self,
        name: &str,
        arguments: Value,
        options: RequestOptions<'_>,
    ) -> Result<Value, Error> {
        let params = exchange::named_params(name, arguments);
        self.request("tools/call", Some(params), options)
    }

    /// Every resource the server lists, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resources(&mut self) -> Result<Vec<Value>, Error> {
        exchange::list_all(self, "resources/list", "resources")
    }

    /// Every resource template the server lists (`resources/templates/list`), following
    /// `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resource_templates(&mut self) -> Result<Vec<Value>, Error> {
        exchange::list_all(self, "resources/templates/list", "resourceTemplates")
    }

    /// Reads a resource: the `ReadResourceResult` (`{"contents": [...]}`).
    ///
    /// # Errors
    /// As [`Client::request`]. A missing resource is [`Error::Rpc`] with code `-32002`
    /// (handshake era) or `-32602` (2026-07-28): [`Error::is_resource_not_found`] accepts
    /// both.
    pub fn read_resource(&mut self, uri: &str) -> Result<Value, Error> {
        self.request(
            "resources/read",
            Some(json!({ "uri": uri })),
            RequestOptions::new(),
        )
    }

    /// Every prompt the server lists, following `nextCursor` to the last page.
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_prompts(&mut self) -> Result<Vec<Value>, Error> {
        exchange::list_all(self, "prompts/list", "prompts")
    }

    /// Gets a prompt with its arguments (`null` for none): the `GetPromptResult`.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn get_prompt(&mut self, name: &str, arguments: Value) -> Result<Value, Error> {
        let params = exchange::named_params(name, arguments);
        self.request("prompts/get", Some(params), RequestOptions::new())
    }

    /// The server's `initialize` result (`null` under MCP 2026-07-28, which has no
    /// `initialize`, and when the handshake was turned off).
    pub fn initialize_result(&self) -> &Value {
        &self.initialize_result
    }

    /// The server's `server/discover` result under MCP 2026-07-28 (`supportedVersions`,
    /// `capabilities`, `_meta.serverInfo`, ...); `null` in the handshake era and when the
    /// handshake was turned off.
    pub fn discover_result(&self) -> &Value {
        &self.discover_result
    }

    /// The era of the connection; `None` when the handshake was turned off.
    pub fn era(&self) -> Option<Era> {
        self.session.era()
    }

    /// The negotiated protocol version, in either era (empty when the handshake was turned
    /// off).
    pub fn protocol_version(&self) -> &str {
        self.session.protocol_version()
    }

    /// The server's process id while it runs (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// The last 64 KiB the server wrote on stderr, as text; after [`Client::close`], what the
    /// server that was closed wrote (its last words included), until a restart.
    pub fn stderr_tail(&self) -> String {
        match &self.process {
            Some(process) => process.stderr_tail(),
            None => self.last_stderr_tail.clone(),
        }
    }

    /// Counters of what the client has seen.
    pub fn stats(&self) -> &ClientStats {
        self.session.stats()
    }

    /// Shuts the current server down (as [`Client::close`] does) and starts it again, with a
    /// fresh handshake (the era found before is reused as described on [`Client`]). Works after
    /// [`Client::close`] too.
    ///
    /// # Errors
    /// As [`ClientBuilder::spawn`].
    pub fn restart(&mut self) -> Result<(), Error> {
        self.close();
        self.session.stats_mut().restarts += 1;
        self.launch()
    }

    /// Ends the server in order: close its stdin, wait (default 2 s); SIGTERM its process
    /// group (then SIGCONT, so a stopped server acts on it), wait (default 2 s); SIGKILL the
    /// group; reap. It waits on the process, not on
    /// its pipes (a grandchild may hold them), drains the pipes meanwhile, and kills whatever
    /// is left in the group afterwards. Takes no longer than the two waits (plus at most
    /// 0.5 s to reap after SIGKILL). Closing twice is harmless: the second call returns the
    /// first one's result. [`Drop`] does the same.
    pub fn close(&mut self) -> Shutdown {
        let (stdin_grace, term_grace) = (self.settings.stdin_grace, self.settings.term_grace);
        self.shut_down(true, stdin_grace, term_grace)
    }

    /// Ends the server without the end-of-input step: SIGTERM to its process group, wait
    /// `grace`, SIGKILL, reap. Closes the client like [`Client::close`].
    pub fn terminate(&mut self, grace: Duration) -> Shutdown {
        self.shut_down(false, Duration::ZERO, grace)
    }
}

impl Exchange for Client {
    fn attempt(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
        retrying: bool,
    ) -> Result<Value, Error> {
        self.restart_if_dead(retrying)?;
        self.request_once(method, params, options)
    }

    fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
        Client::fulfil(self, input)
    }

    fn pause(&mut self, delay: Duration) {
        Client::pause(self, delay);
    }

    fn default_retry(&self) -> RetryPolicy {
        self.settings.retry.clone()
    }

    fn max_input_rounds(&self) -> u32 {
        self.settings.max_input_rounds
    }

    fn is_modern(&self) -> bool {
        self.session.era() == Some(Era::Modern)
    }

    fn seed(&mut self) -> &mut u64 {
        &mut self.seed
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.close();
    }
}

/// Whether the server exited, closed its stdout, or stopped reading its stdin.
fn server_has_exited(process: &mut ServerProcess) -> bool {
    process.exit_seen() || process.stdout_eof() || process.stdin_broken()
}

fn dead_error(dead: &Dead) -> Error {
    match dead {
        Dead::Exited {
            status,
            stderr_tail,
        } => Error::ServerExited {
            status: *status,
            stderr_tail: stderr_tail.clone(),
        },
        Dead::Unresponsive { silence } => Error::Unresponsive { silence: *silence },
    }
}
