//! A synchronous MCP client that spawns a stdio server and supervises it: every wait has a
//! deadline, a dead server fails what waits at once, and closing always ends the server.
//!
//! One thread, no background work: the client does its I/O (answering the server's requests,
//! draining its stderr, the heartbeat) while the caller waits in a request, or in
//! [`Client::pump`].
//!
//! It speaks both generations of MCP ([`Era`]): it probes with `server/discover` and falls back
//! to the `initialize` handshake. What it finds is cached: see [`Client`] for what and how long.

mod builder;
mod era;
mod exchange;
mod options;
mod process;
mod retry;
mod shared;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::diagnostics::Diagnostics;
use crate::error::Error;
use crate::message::{ErrorObject, Message, Notification, Request, RequestId, Response};
use crate::protocol::{
    MODERN_PROTOCOL_VERSIONS, PROGRESS_TOKEN_KEY, PROTOCOL_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
};

pub use builder::ClientBuilder;
pub use era::Era;
pub use options::{Progress, RequestOptions};
pub use process::{Shutdown, ShutdownStage};
pub use retry::RetryPolicy;
pub use shared::{Call, Canceller, SharedClient};

use builder::{InputCallback, NotificationCallback, Settings, StderrCallback};
use era::{Asked, Verdict};
use exchange::{excerpt_of, Exchange};
use process::{Inbound, ServerProcess, Spawn};
use shared::Detached;

/// After the server closed its stdout (or stopped reading), how long the client waits for it to
/// exit so the error can carry its exit status.
const EXIT_GRACE: Duration = Duration::from_millis(250);

/// Ids of requests given up on, kept to recognise (and drop) their late answers.
const REMEMBERED_CANCELLATIONS: usize = 1024;

/// Responses that matched no request, kept for [`Client::next_stray_response`].
const MAX_STRAY_RESPONSES: usize = 10_000;

/// The id prefix of heartbeat pings: their answers are recognised by it.
const HEARTBEAT_PREFIX: &str = "mcpipe-heartbeat-";

/// Counters of what a client has seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Lines from the server that were not valid messages (counted, logged, never answered).
    pub bad_lines: u64,
    /// Responses whose id matched no request the client is waiting for.
    pub unmatched_responses: u64,
    /// Responses to requests the client had already given up on (dropped).
    pub late_responses: u64,
    /// Progress notifications for requests the client had already given up on (dropped).
    pub late_progress: u64,
    /// Requests the server sent (each answered).
    pub server_requests: u64,
    /// Notifications the server sent, progress included.
    pub notifications: u64,
    /// Notifications dropped because the queue was full.
    pub notifications_dropped: u64,
    /// Heartbeat pings sent.
    pub heartbeats: u64,
    /// Times the server was started again (by a retry or [`Client::restart`]).
    pub restarts: u64,
}

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

/// What a wait is for: it ends when this holds, when its deadline passes, or when the server
/// dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// The awaited response arrived.
    Response,
    /// A notification is queued.
    Notification,
    /// A stray response is queued.
    Stray,
    /// Only the deadline ends it.
    Deadline,
}

/// When a request times out.
#[derive(Debug, Clone, Copy)]
struct Timing {
    timeout: Duration,
    reset_on_progress: bool,
    started: Instant,
    /// Reset by progress (when `reset_on_progress`).
    deadline: Instant,
    hard_deadline: Option<Instant>,
}

impl Timing {
    /// When the wait ends, progress or not.
    fn due(&self) -> Instant {
        self.hard_deadline
            .map_or(self.deadline, |h| h.min(self.deadline))
    }

    /// Progress arrived: start the timeout over (never past the hard maximum, see `due`).
    fn progressed(&mut self, now: Instant) {
        if self.reset_on_progress {
            self.deadline = self.deadline.max(now + self.timeout);
        }
    }
}

/// The request the caller is waiting for.
struct Waiting<'a, 'b> {
    id: RequestId,
    /// The progress token sent with it (the id, as JSON), if any.
    token: Option<Value>,
    timing: Timing,
    progress: Option<&'a mut (dyn FnMut(&Progress) + 'b)>,
    response: Option<Result<Value, ErrorObject>>,
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
    /// The `ClientCapabilities` declared in `initialize` and in every modern request.
    capabilities: Value,
    /// The `clientInfo` (`Implementation`) sent the same ways.
    client_info: Value,
    process: Option<ServerProcess>,
    dead: Option<Dead>,
    closed: bool,
    last_shutdown: Option<Shutdown>,
    next_id: i64,
    initialize_result: Value,
    discover_result: Value,
    protocol_version: String,
    /// The era of the current server (kept across a restart as a hint; see `connect`).
    era: Option<Era>,
    /// The id of a `server/discover` probe that timed out, while its late answer may still
    /// decide the era (until the connection step ends).
    probe: Option<RequestId>,
    /// That late answer, when it came.
    late_probe: Option<Result<Value, ErrorObject>>,
    /// Ids given up on, newest last; at most `REMEMBERED_CANCELLATIONS`.
    cancelled: VecDeque<RequestId>,
    /// Requests of the [`SharedClient`] waiting for answers (always empty otherwise).
    detached: HashMap<RequestId, Detached>,
    /// The outstanding heartbeat ping and when it was sent.
    heartbeat: Option<(RequestId, Instant)>,
    heartbeat_count: u64,
    notifications: VecDeque<Notification>,
    strays: VecDeque<Response>,
    stats: ClientStats,
    diagnostics: Diagnostics,
    seed: u64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("spawn", &self.spawn)
            .field("pid", &self.pid())
            .field("era", &self.era)
            .field("protocol_version", &self.protocol_version)
            .field("closed", &self.closed)
            .field("stats", &self.stats)
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
        let mut client = Client {
            spawn: builder.spawn,
            settings: builder.settings,
            on_stderr: builder.on_stderr,
            on_notification: builder.on_notification,
            on_elicitation: builder.on_elicitation,
            on_sampling: builder.on_sampling,
            capabilities: Value::Object(capabilities),
            client_info,
            process: None,
            dead: None,
            closed: false,
            last_shutdown: None,
            next_id: 1,
            initialize_result: Value::Null,
            discover_result: Value::Null,
            protocol_version: String::new(),
            era: None,
            probe: None,
            late_probe: None,
            cancelled: VecDeque::new(),
            detached: HashMap::new(),
            heartbeat: None,
            heartbeat_count: 0,
            notifications: VecDeque::new(),
            strays: VecDeque::new(),
            stats: ClientStats::default(),
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
        self.process = Some(process);
        self.dead = None;
        self.closed = false;
        self.heartbeat = None;
        if self.settings.initialize {
            let connected = self.connect();
            self.probe = None;
            self.late_probe = None;
            if let Err(e) = connected {
                self.close();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Decides the era of a freshly started server and performs its handshake. The era found
    /// for the previous process, if any, is a hint (see "What is cached" on [`Client`]).
    fn connect(&mut self) -> Result<(), Error> {
        let previous = self.era.take();
        self.initialize_result = Value::Null;
        self.discover_result = Value::Null;
        self.protocol_version.clear();
        match (self.settings.era, previous) {
            (Some(Era::Legacy), _) => self.handshake(),
            (Some(Era::Modern), _) => self.negotiate(true),
            (None, Some(Era::Legacy)) => match self.handshake() {
                Err(Error::Rpc(e)) if e.code == UNSUPPORTED_PROTOCOL_VERSION => {
                    self.negotiate(false)
                }
                other => other,
            },
            (None, _) => self.negotiate(false),
        }
    }

    /// The modern versions the client accepts, most preferred first.
    fn known_modern_versions(&self) -> Vec<String> {
        let mut known = vec![self.settings.modern_version.clone()];
        // Newest first: the crate's list is oldest first.
        for v in MODERN_PROTOCOL_VERSIONS.iter().rev() {
            if !known.iter().any(|k| k == v) {
                known.push((*v).to_owned());
            }
        }
        known
    }

    /// Probes with `server/discover` and becomes modern, or (unless `strict`) falls back to
    /// `initialize`. A `-32022` naming a common version earns one more probe with it.
    fn negotiate(&mut self, strict: bool) -> Result<(), Error> {
        let known = self.known_modern_versions();
        let timeout = if strict {
            self.settings.init_timeout
        } else {
            self.settings
                .discover_timeout
                .min(self.settings.init_timeout)
        };
        let mut asked = self.settings.modern_version.clone();
        for attempt in 0..2 {
            let answer = self.probe(&asked, timeout, strict)?;
            let verdict = match &answer {
                Some(answer) => era::judge_discover(answer, &asked, &known),
                None => Verdict::Legacy,
            };
            match (verdict, answer) {
                (Verdict::Modern { version }, Some(Ok(result))) => {
                    self.adopt_modern(version, result);
                    return Ok(());
                }
                (Verdict::Retry { version }, _) if attempt == 0 => asked = version,
                (Verdict::Incompatible { supported }, _) => {
                    return Err(Error::Protocol {
                        reason: format!(
                            "the server speaks only protocol versions {supported:?}, none of \
                             which the client speaks"
                        ),
                        line: String::new(),
                    })
                }
                (_, answer) if strict => {
                    return Err(match answer {
                        Some(Err(e)) => Error::Rpc(e),
                        Some(Ok(result)) => Error::Protocol {
                            reason: String::from(
                                "the server/discover result names no protocol version the \
                                 client speaks",
                            ),
                            line: excerpt_of(&result),
                        },
                        // A strict probe's timeout is returned by `probe` itself.
                        None => Error::Closed,
                    });
                }
                _ => return self.fall_back(&asked, &known),
            }
        }
        Err(Error::Protocol {
            reason: String::from(
                "the server rejected the protocol version it had itself named in -32022",
            ),
            line: String::new(),
        })
    }

    /// Sends one `server/discover` asking for `version`. `Ok(None)`: no answer in time (only
    /// when not `strict`; the probe's id is kept so a late answer can still be used).
    fn probe(
        &mut self,
        version: &str,
        timeout: Duration,
        strict: bool,
    ) -> Result<Option<Result<Value, ErrorObject>>, Error> {
        let params = era::discover_params(version, &self.capabilities, &self.client_info);
        let mut options = RequestOptions::new()
            .timeout(timeout)
            .max_total(timeout)
            .reset_on_progress(false);
        self.probe = Some(RequestId::from(self.next_id));
        self.late_probe = None;
        let answer = self.request_once("server/discover", Some(params), &mut options);
        match answer {
            Ok(result) => {
                self.probe = None;
                Ok(Some(Ok(result)))
            }
            Err(Error::Rpc(e)) => {
                self.probe = None;
                Ok(Some(Err(e)))
            }
            Err(Error::Timeout { .. }) if !strict => Ok(None),
            Err(e) => {
                self.probe = None;
                Err(e)
            }
        }
    }

    /// The probe said legacy: `initialize`. If that fails, modern evidence that came too late
    /// for the probe still counts: the probe's late answer, or `-32022` to `initialize`.
    fn fall_back(&mut self, asked: &str, known: &[String]) -> Result<(), Error> {
        let error = match self.handshake() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if let Some(Ok(late)) = self.late_probe.take() {
            let verdict = era::judge_discover(&Ok(late.clone()), asked, known);
            if let Verdict::Modern { version } = verdict {
                self.adopt_modern(version, late);
                return Ok(());
            }
        }
        if let Error::Rpc(e) = &error {
            if e.code == UNSUPPORTED_PROTOCOL_VERSION {
                // Asked about a handshake-era version, so any modern one it names is news.
                let verdict = era::judge_discover(&Err(e.clone()), "", known);
                if let Verdict::Retry { version } = verdict {
                    let timeout = self.settings.init_timeout;
                    if let Ok(Some(Ok(result))) = self.probe(&version, timeout, true) {
                        if let Verdict::Modern { version } =
                            era::judge_discover(&Ok(result.clone()), &version, known)
                        {
                            self.adopt_modern(version, result);
                            return Ok(());
                        }
                    }
                }
            }
        }
        Err(error)
    }

    fn adopt_modern(&mut self, version: String, discover_result: Value) {
        self.era = Some(Era::Modern);
        self.protocol_version = version;
        self.discover_result = discover_result;
    }

    fn handshake(&mut self) -> Result<(), Error> {
        let params = json!({
            "protocolVersion": self.settings.protocol_version,
            "capabilities": self.capabilities,
            "clientInfo": self.client_info,
        });
        let timeout = self.settings.init_timeout;
        let mut options = RequestOptions::new()
            .timeout(timeout)
            .max_total(timeout)
            .reset_on_progress(false);
        let result = self.request_once("initialize", Some(params), &mut options)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Protocol {
                reason: String::from("the initialize result has no protocolVersion"),
                line: excerpt_of(&result),
            })?;
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(Error::Protocol {
                reason: format!(
                    "the server chose protocol version {version:?}, which the client does not support"
                ),
                line: excerpt_of(&result),
            });
        }
        self.protocol_version = version.to_owned();
        self.initialize_result = result;
        self.era = Some(Era::Legacy);
        self.notify("notifications/initialized", None)
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

    /// The answer to one input of an `input_required` result, or why there is none.
    fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
        let callback = match input.method.as_str() {
            "roots/list" => {
                return match &self.settings.roots {
                    Some(roots) => Ok(json!({ "roots": roots })),
                    None => Err(format!(
                        "it asks for roots/list ({:?}) and the client has no roots",
                        input.key
                    )),
                }
            }
            "elicitation/create" => self.on_elicitation.as_mut(),
            "sampling/createMessage" => self.on_sampling.as_mut(),
            other => {
                return Err(format!(
                    "it asks for {other} ({:?}), which no client can answer",
                    input.key
                ))
            }
        };
        match callback {
            Some(callback) => callback(&input.params)
                .map_err(|e| format!("the {} callback refused {:?}: {e}", input.method, input.key)),
            None => Err(format!(
                "it asks for {} ({:?}) and the client has no callback for it",
                input.method, input.key
            )),
        }
    }

    /// Before a retry: a server that died is started again (with a fresh handshake).
    fn restart_if_dead(&mut self, retrying: bool) -> Result<(), Error> {
        if !retrying || self.closed {
            return Ok(());
        }
        let dead = self.dead.is_some() || self.process.as_mut().is_none_or(server_has_exited);
        if dead {
            self.restart()?;
        }
        Ok(())
    }

    /// Waits `delay` between attempts, still serving the connection if there is one.
    fn pause(&mut self, delay: Duration) {
        if self.dead.is_none() && self.process.is_some() {
            // An error here (the server died) shows at the next attempt.
            let _ = self.run(Some(Instant::now() + delay), None, Until::Deadline);
        } else {
            std::thread::sleep(delay);
        }
    }

    /// One attempt: send, wait, and on timeout cancel.
    fn request_once(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
    ) -> Result<Value, Error> {
        self.check_usable()?;
        let wants_progress = options.progress.is_some();
        let (id, token) = self.send_request(method, params, wants_progress);
        let timing = self.timing(options, Instant::now());
        let mut waiting = Waiting {
            id: id.clone(),
            token,
            timing,
            progress: options.progress.as_deref_mut(),
            response: None,
        };
        let outcome = self.run(None, Some(&mut waiting), Until::Response);
        if let Some(response) = waiting.response {
            return response.map_err(Error::Rpc);
        }
        outcome?;
        let elapsed = timing.started.elapsed();
        self.give_up(
            id,
            method,
            &format!("timed out after {} ms", elapsed.as_millis()),
        );
        Err(Error::Timeout {
            method: method.to_owned(),
            elapsed,
        })
    }

    /// Sends a request under a new id, with the `_meta` its era needs and a `progressToken`
    /// (for `tools/call` and whenever the caller wants progress). Returns the id and the token
    /// sent, if any.
    fn send_request(
        &mut self,
        method: &str,
        mut params: Option<Value>,
        wants_progress: bool,
    ) -> (RequestId, Option<Value>) {
        let id = RequestId::from(self.next_id);
        let token = Value::from(self.next_id);
        self.next_id += 1;
        if self.era == Some(Era::Modern) {
            era::add_meta(
                &mut params,
                &self.protocol_version,
                &self.capabilities,
                &self.client_info,
            );
        }
        let mut sent_token = None;
        if wants_progress || method == "tools/call" {
            let params = params.get_or_insert_with(|| json!({}));
            if let Some(obj) = params.as_object_mut() {
                let meta = obj.entry("_meta").or_insert_with(|| json!({}));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(PROGRESS_TOKEN_KEY.into(), token.clone());
                    sent_token = Some(token);
                }
            }
        }
        let request = Message::Request(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        });
        if let Some(process) = &mut self.process {
            process.send(&request);
        }
        (id, sent_token)
    }

    /// The deadlines of a request sent at `started`, from its options and the defaults.
    fn timing(&self, options: &RequestOptions<'_>, started: Instant) -> Timing {
        let timeout = options.timeout.unwrap_or(self.settings.timeout);
        Timing {
            timeout,
            reset_on_progress: options.reset_on_progress.unwrap_or(true),
            started,
            deadline: started + timeout,
            hard_deadline: options
                .max_total
                .or(self.settings.max_total)
                .map(|max| started + max),
        }
    }

    /// Stops waiting for request `id`: tells the server (`notifications/cancelled` with
    /// `reason`) and remembers the id so a late answer is dropped.
    fn give_up(&mut self, id: RequestId, method: &str, reason: &str) {
        // `initialize` must never be cancelled; its late answer is dropped all the same.
        // Nor is the discover probe: a handshake-era server gets nothing before `initialize`
        // but the probe itself, and a late modern answer is still wanted (see `fall_back`).
        if method != "initialize" && self.probe.as_ref() != Some(&id) {
            let cancel = Notification {
                method: String::from("notifications/cancelled"),
                params: Some(json!({ "requestId": id.to_value(), "reason": reason })),
            };
            if let Some(process) = &mut self.process {
                process.send(&Message::Notification(cancel));
            }
        }
        self.remember_cancelled(id);
    }

    fn remember_cancelled(&mut self, id: RequestId) {
        if self.cancelled.len() == REMEMBERED_CANCELLATIONS {
            self.cancelled.pop_front();
        }
        self.cancelled.push_back(id);
    }

    /// The error for a client that cannot send now, if any.
    fn check_usable(&self) -> Result<(), Error> {
        if self.closed || self.process.is_none() {
            return Err(Error::Closed);
        }
        match &self.dead {
            Some(dead) => Err(dead_error(dead)),
            None => Ok(()),
        }
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`Error::Closed`], or the error that made the server unusable.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.check_usable()?;
        let message = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        });
        if let Some(process) = &mut self.process {
            process.send(&message);
        }
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
        self.run(Some(Instant::now() + duration), None, Until::Deadline)
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
        self.run(Some(Instant::now() + timeout), None, Until::Notification)?;
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
        self.run(Some(Instant::now() + timeout), None, Until::Stray)?;
        Ok(self.strays.pop_front())
    }

    /// Checks that the server answers: sends `ping` and waits for the empty result. MCP
    /// 2026-07-28 has no `ping`, so under it this sends `server/discover` (which every modern
    /// server must answer) and discards the result.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn ping(&mut self) -> Result<(), Error> {
        let method = match self.era {
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
        self.era
    }

    /// The negotiated protocol version, in either era (empty when the handshake was turned
    /// off).
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    /// The server's process id while it runs (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// The last 64 KiB the server wrote on stderr, as text.
    pub fn stderr_tail(&self) -> String {
        self.process
            .as_ref()
            .map(ServerProcess::stderr_tail)
            .unwrap_or_default()
    }

    /// Counters of what the client has seen.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// Shuts the current server down (as [`Client::close`] does) and starts it again, with a
    /// fresh handshake (the era found before is reused as described on [`Client`]). Works after
    /// [`Client::close`] too.
    ///
    /// # Errors
    /// As [`ClientBuilder::spawn`].
    pub fn restart(&mut self) -> Result<(), Error> {
        self.close();
        self.stats.restarts += 1;
        self.launch()
    }

    /// Ends the server in order: close its stdin, wait (default 2 s); SIGTERM its process
    /// group, wait (default 2 s); SIGKILL the group; reap. It waits on the process, not on
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

    fn shut_down(
        &mut self,
        close_stdin: bool,
        stdin_grace: Duration,
        term_grace: Duration,
    ) -> Shutdown {
        self.closed = true;
        let Some(mut process) = self.process.take() else {
            return self.last_shutdown.unwrap_or(Shutdown {
                status: None,
                stage: ShutdownStage::AlreadyExited,
                elapsed: Duration::ZERO,
            });
        };
        let on_stderr = &mut self.on_stderr;
        let mut sink = |line: &[u8]| {
            if let Some(callback) = on_stderr {
                callback(line);
            }
        };
        let shutdown = process.shut_down(close_stdin, stdin_grace, term_grace, &mut sink);
        drop(process);
        self.last_shutdown = Some(shutdown);
        shutdown
    }

    /// The client's one waiting loop. Returns `Ok` when `until` holds, when `deadline` passes,
    /// or when the awaited request's deadline passes (the caller tells these apart); `Err`
    /// when the server is closed, exited or silent.
    fn run(
        &mut self,
        deadline: Option<Instant>,
        mut waiting: Option<&mut Waiting<'_, '_>>,
        until: Until,
    ) -> Result<(), Error> {
        loop {
            self.handle_buffered(&mut waiting);
            if self.holds(until, &waiting) {
                return Ok(());
            }
            self.check_usable()?;
            let Some(process) = self.process.as_mut() else {
                return Err(Error::Closed);
            };
            process.flush();
            if server_has_exited(process) {
                return self.settle_death(&mut waiting, until);
            }
            let heartbeat_due = self.heartbeat_tick()?;
            let now = Instant::now();
            let mut wake = deadline;
            if let Some(w) = &waiting {
                let due = w.timing.due();
                if now >= due {
                    return Ok(());
                }
                wake = Some(wake.map_or(due, |d| d.min(due)));
            }
            if wake.is_some_and(|d| now >= d) {
                return Ok(());
            }
            if let Some(due) = heartbeat_due {
                wake = Some(wake.map_or(due, |d| d.min(due)));
            }
            let Client {
                process, on_stderr, ..
            } = self;
            let Some(process) = process.as_mut() else {
                return Err(Error::Closed);
            };
            let mut sink = |line: &[u8]| {
                if let Some(callback) = on_stderr {
                    callback(line);
                }
            };
            if process.read_available(&mut sink) || process.may_have_input() {
                continue;
            }
            // THE ONE PLACE THE CLIENT SLEEPS. Every complete line in the buffer has been
            // handled (`handle_buffered` above, and nothing was read since), and both pipes said
            // `WouldBlock` (edge-triggered readiness will tell us when more arrives), so
            // sleeping cannot leave an answer unread. The sleep ends at the first deadline.
            let timeout = wake.map(|d| d.saturating_duration_since(Instant::now()));
            process.wait(timeout)?;
        }
    }

    fn holds(&self, until: Until, waiting: &Option<&mut Waiting<'_, '_>>) -> bool {
        match until {
            Until::Response => waiting.as_ref().is_some_and(|w| w.response.is_some()),
            Until::Notification => !self.notifications.is_empty(),
            Until::Stray => !self.strays.is_empty(),
            Until::Deadline => false,
        }
    }

    /// The server exited, closed its stdout, or stopped reading: take what it wrote before it
    /// went, give it a moment to exit (for the status), and mark it dead.
    fn settle_death(
        &mut self,
        waiting: &mut Option<&mut Waiting<'_, '_>>,
        until: Until,
    ) -> Result<(), Error> {
        let grace_end = Instant::now() + EXIT_GRACE;
        loop {
            let Client {
                process, on_stderr, ..
            } = &mut *self;
            let Some(process) = process.as_mut() else {
                return Err(Error::Closed);
            };
            let mut sink = |line: &[u8]| {
                if let Some(callback) = on_stderr {
                    callback(line);
                }
            };
            process.assume_readable();
            let read = process.read_available(&mut sink);
            let exited = process.check_exit().is_some();
            let more = read || process.may_have_input();
            self.handle_buffered(waiting);
            if self.holds(until, waiting) {
                return Ok(());
            }
            let now = Instant::now();
            if (exited && !more) || now >= grace_end {
                break;
            }
            if !more {
                if let Some(process) = self.process.as_mut() {
                    process.wait(Some(grace_end - now))?;
                }
            }
        }
        let Some(process) = self.process.as_mut() else {
            return Err(Error::Closed);
        };
        let dead = Dead::Exited {
            status: process.check_exit(),
            stderr_tail: process.stderr_tail(),
        };
        let error = dead_error(&dead);
        self.dead = Some(dead);
        Err(error)
    }

    /// Sends a heartbeat ping when the server has been quiet for the interval; declares it dead
    /// when a ping met silence for the timeout. Returns when the heartbeat next needs a look.
    fn heartbeat_tick(&mut self) -> Result<Option<Instant>, Error> {
        let Some((interval, timeout)) = self.settings.heartbeat else {
            return Ok(None);
        };
        if self.settings.initialize && self.era.is_none() {
            // Connecting: the era (and so the heartbeat's method) is not known yet, and every
            // wait of the connection step has its own deadline.
            return Ok(None);
        }
        // MCP 2026-07-28 has no ping; server/discover is the cheapest request it must answer.
        let (method, params) = match self.era {
            Some(Era::Modern) => (
                "server/discover",
                Some(era::discover_params(
                    &self.protocol_version,
                    &self.capabilities,
                    &self.client_info,
                )),
            ),
            _ => ("ping", None),
        };
        let Some(process) = self.process.as_mut() else {
            return Ok(None);
        };
        let now = Instant::now();
        let last = process.last_inbound;
        if let Some((_, sent)) = &self.heartbeat {
            let sent = *sent;
            if last < sent {
                if now >= sent + timeout {
                    // Silence past the deadline: the server is dead to us.
                    process.kill();
                    let dead = Dead::Unresponsive {
                        silence: now - last,
                    };
                    let error = dead_error(&dead);
                    self.dead = Some(dead);
                    return Err(error);
                }
                return Ok(Some(sent + timeout));
            }
        }
        if now >= last + interval {
            self.heartbeat_count += 1;
            let id = RequestId::from(format!("{HEARTBEAT_PREFIX}{}", self.heartbeat_count));
            process.send(&Message::Request(Request {
                id: id.clone(),
                method: String::from(method),
                params,
            }));
            self.stats.heartbeats += 1;
            self.heartbeat = Some((id, now));
            return Ok(Some(now + timeout));
        }
        Ok(Some(last + interval))
    }

    /// Handles every message already in the line buffer.
    fn handle_buffered(&mut self, waiting: &mut Option<&mut Waiting<'_, '_>>) {
        loop {
            let Some(process) = self.process.as_mut() else {
                return;
            };
            let Some(inbound) = process.next_inbound() else {
                return;
            };
            self.handle(inbound, waiting);
            if waiting.as_ref().is_some_and(|w| w.response.is_some()) {
                // The caller gets its answer first; the rest waits in the buffer.
                return;
            }
        }
    }

    fn handle(&mut self, inbound: Inbound, waiting: &mut Option<&mut Waiting<'_, '_>>) {
        match inbound {
            Inbound::Bad { why, excerpt } => {
                // Never answered: two peers answering each other's garbage can storm.
                self.stats.bad_lines += 1;
                self.diagnostics.report(|| {
                    format!("the server wrote a line that is not a message ({why}): {excerpt}")
                });
            }
            Inbound::Message(Message::Response(response)) => {
                self.handle_response(response, waiting)
            }
            Inbound::Message(Message::Request(request)) => self.answer(request),
            Inbound::Message(Message::Notification(notification)) => {
                self.handle_notification(notification, waiting);
            }
        }
    }

    fn handle_response(&mut self, response: Response, waiting: &mut Option<&mut Waiting<'_, '_>>) {
        if let (Some(id), Some(w)) = (&response.id, waiting.as_mut()) {
            if *id == w.id {
                w.response = Some(response.result);
                return;
            }
        }
        if let Some(id) = &response.id {
            if id.as_str().is_some_and(|s| s.starts_with(HEARTBEAT_PREFIX)) {
                // Any answer, even an error, means the server is alive.
                if self.heartbeat.as_ref().is_some_and(|(hb, _)| hb == id) {
                    self.heartbeat = None;
                }
                return;
            }
            if let Some(call) = self.detached.remove(id) {
                call.answer(response.result.map_err(Error::Rpc));
                return;
            }
            if self.probe.as_ref() == Some(id) {
                // The answer to a discover probe that timed out: it may still decide the era.
                self.late_probe = Some(response.result);
                return;
            }
            if self.cancelled.contains(id) {
                self.stats.late_responses += 1;
                return;
            }
        }
        self.stats.unmatched_responses += 1;
        if self.strays.len() == MAX_STRAY_RESPONSES {
            self.strays.pop_front();
        }
        self.strays.push_back(response);
    }

    /// Answers a request from the server: `ping`, `roots/list` when roots are configured,
    /// elicitation and sampling when their callbacks are set, and `-32601` for anything else.
    /// Under MCP 2026-07-28 the server must not send requests and the client must not send
    /// responses: such a request is counted, reported, and left unanswered.
    fn answer(&mut self, request: Request) {
        self.stats.server_requests += 1;
        if self.era == Some(Era::Modern) {
            let method = request.method;
            self.diagnostics.report(|| {
                format!(
                    "the server sent a {method} request, which MCP 2026-07-28 does not allow; \
                     left unanswered"
                )
            });
            return;
        }
        let params = request.params.unwrap_or_else(|| json!({}));
        let result = match request.method.as_str() {
            "ping" => Ok(json!({})),
            "roots/list" => match &self.settings.roots {
                Some(roots) => Ok(json!({ "roots": roots })),
                None => Err(ErrorObject::method_not_found("roots/list")),
            },
            "elicitation/create" => match &mut self.on_elicitation {
                Some(callback) => callback(&params),
                None => Err(ErrorObject::method_not_found("elicitation/create")),
            },
            "sampling/createMessage" => match &mut self.on_sampling {
                Some(callback) => callback(&params),
                None => Err(ErrorObject::method_not_found("sampling/createMessage")),
            },
            method => Err(ErrorObject::method_not_found(method)),
        };
        let response = Message::Response(Response {
            id: Some(request.id),
            result,
        });
        if let Some(process) = &mut self.process {
            process.send(&response);
        }
    }

    fn handle_notification(
        &mut self,
        notification: Notification,
        waiting: &mut Option<&mut Waiting<'_, '_>>,
    ) {
        self.stats.notifications += 1;
        if notification.method == "notifications/progress" {
            let params = notification.params.as_ref().unwrap_or(&Value::Null);
            let token = params.get(PROGRESS_TOKEN_KEY);
            if let (Some(token), Some(w)) = (token, waiting.as_mut()) {
                if w.token.as_ref() == Some(token) {
                    w.timing.progressed(Instant::now());
                    if let (Some(callback), Some(progress)) =
                        (w.progress.as_mut(), Progress::from_params(params))
                    {
                        callback(&progress);
                    }
                    return;
                }
            }
            let id = token.and_then(RequestId::from_value);
            if let (Some(token), Some(call)) =
                (token, id.as_ref().and_then(|id| self.detached.get_mut(id)))
            {
                if call.token.as_ref() == Some(token) {
                    call.progress(params, Instant::now());
                    return;
                }
            }
            let late = id.is_some_and(|id| self.cancelled.contains(&id));
            if late {
                self.stats.late_progress += 1;
                return;
            }
        }
        if let Some(callback) = &mut self.on_notification {
            callback(notification);
            return;
        }
        if self.notifications.len() >= self.settings.max_queued_notifications {
            self.notifications.pop_front();
            self.stats.notifications_dropped += 1;
        }
        self.notifications.push_back(notification);
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
        self.era == Some(Era::Modern)
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
    process.check_exit().is_some() || process.stdout_eof() || process.stdin_broken()
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
