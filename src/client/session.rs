//! The client's protocol state as plain data: lines and instants in, messages and events out.
//!
//! No fds and no clock: the shell (the one-thread [`Client`](super::Client) or the IO thread of
//! the [`SharedClient`](super::SharedClient)) passes every line the server wrote and the
//! current `Instant`, sends what [`Session::write_outbound`] writes, and acts on what
//! [`Session::next_event`] says. Here live the request ids, the pending requests and their
//! deadlines, routing of answers and progress, the answers to the server's requests, the
//! heartbeat's bookkeeping and the counters, so all of it is unit-tested and fuzzed on bytes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::era::{self, Era};
use super::options::Progress;
use crate::deadline;
use crate::diagnostics::excerpt;
use crate::id_map::IdMap;
use crate::mcp::logging::LogLevel;
use crate::message::{
    parse_line, ErrorObject, Message, Notification, Parsed, Request, RequestId, Response,
};
use crate::protocol::PROGRESS_TOKEN_KEY;

/// Ids of requests given up on, kept to recognise (and drop) their late answers.
const REMEMBERED_CANCELLATIONS: usize = 1024;

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
    /// Of [`server_requests`](Self::server_requests), the `ping`s: a server may always ping,
    /// whatever the client declared.
    pub server_pings: u64,
    /// Notifications the server sent, progress included.
    pub notifications: u64,
    /// Notifications dropped, oldest first, because the queue was full (10,000 waiting). The
    /// first drop is also said once on stderr (unless
    /// [`log_bad_lines`](crate::ClientBuilder::log_bad_lines) is off).
    pub notifications_dropped: u64,
    /// Heartbeat pings sent.
    pub heartbeats: u64,
    /// Times the server was started again (by a retry or
    /// [`Client::restart`](super::Client::restart)).
    pub restarts: u64,
}

/// When a request times out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    pub(crate) timeout: Duration,
    pub(crate) reset_on_progress: bool,
    pub(crate) started: Instant,
    /// Reset by progress (when `reset_on_progress`).
    deadline: Instant,
    hard_deadline: Option<Instant>,
}

impl Timing {
    /// Deadlines of a request sent at `started`.
    pub(crate) fn new(
        started: Instant,
        timeout: Duration,
        max_total: Option<Duration>,
        reset_on_progress: bool,
    ) -> Timing {
        Timing {
            timeout,
            reset_on_progress,
            started,
            deadline: deadline::after(started, timeout),
            hard_deadline: max_total.map(|max| deadline::after(started, max)),
        }
    }

    /// When the wait ends, progress or not.
    pub(crate) fn due(&self) -> Instant {
        self.hard_deadline
            .map_or(self.deadline, |h| h.min(self.deadline))
    }

    /// Progress arrived: start the timeout over (never past the hard maximum, see `due`).
    fn progressed(&mut self, now: Instant) {
        if self.reset_on_progress {
            self.deadline = self.deadline.max(deadline::after(now, self.timeout));
        }
    }
}

/// A request sent and not yet ended.
#[derive(Debug)]
struct Pending {
    method: String,
    /// The progress token sent with it, if any.
    token: Option<Value>,
    timing: Timing,
}

/// What the shell must act on. Every request the session started ends with exactly one
/// `Answered`, `Unreadable` or `TimedOut`, unless the shell ended it itself ([`Session::cancel`],
/// [`Session::fail_all`]).
#[derive(Debug)]
pub(crate) enum Event {
    /// The server answered request `id` (a result or its error object).
    Answered {
        id: RequestId,
        result: Result<Value, ErrorObject>,
    },
    /// The server answered request `id` with a line serde_json cannot read (valid JSON past
    /// its limits, or broken after the id): `reason` says why, `line` is an excerpt.
    Unreadable {
        id: RequestId,
        reason: String,
        line: String,
    },
    /// A progress notification for request `id` (its timeout was started over).
    Progress { id: RequestId, progress: Progress },
    /// Request `id` passed its deadline: the server was told (`notifications/cancelled`,
    /// except for `initialize` and the discover probe) and a late answer will be dropped.
    TimedOut {
        id: RequestId,
        method: String,
        elapsed: Duration,
    },
    /// A notification for whoever listens (progress of no pending request included).
    Notification(Notification),
    /// A response that matched no request (answers to raw sends, errors with a null id).
    Stray(Response),
    /// A server request only a callback can answer (elicitation, sampling): answer it with
    /// [`Session::respond`].
    Callback(Request),
    /// Something worth a line on stderr (rate-limited by the shell).
    Report(String),
}

/// What the heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pulse {
    /// Look again at this instant (`None`: no heartbeat now).
    Next(Option<Instant>),
    /// A ping met silence for the heartbeat's timeout: the server is dead to us.
    Silent(Duration),
}

/// The client's side of one MCP connection, as data.
#[derive(Debug)]
pub(crate) struct Session {
    next_id: i64,
    /// Keyed by the client's own ids, so the cheap hasher is safe (see `id_map`).
    pending: IdMap<Pending>,
    /// Ids given up on, newest last; at most `REMEMBERED_CANCELLATIONS`.
    cancelled: VecDeque<RequestId>,
    /// The id of a `server/discover` probe whose late answer may still decide the era.
    probe: Option<RequestId>,
    /// That late answer, with the probe's id, when it came.
    late_probe: Option<(RequestId, Result<Value, ErrorObject>)>,
    /// `(interval, timeout)` of the heartbeat, when on.
    heartbeat: Option<(Duration, Duration)>,
    /// The outstanding heartbeat ping and when it was sent.
    ping: Option<(RequestId, Instant)>,
    pings_sent: u64,
    /// Whether the shell connects (era and handshake) before anything else.
    connects: bool,
    era: Option<Era>,
    protocol_version: String,
    /// The `ClientCapabilities` and `clientInfo` every modern request carries.
    capabilities: Value,
    client_info: Value,
    /// The two as `_meta` members, written once ([`era::client_meta_text`]) and copied into
    /// every modern request as it is written.
    client_meta: Box<[u8]>,
    /// The log level every modern request names ([`ClientBuilder::log_level`]).
    ///
    /// [`ClientBuilder::log_level`]: super::ClientBuilder::log_level
    log_level: Option<&'static str>,
    roots: Option<Vec<Value>>,
    /// Methods of server requests the shell has callbacks for.
    callbacks: Vec<&'static str>,
    outbox: VecDeque<Outbound>,
    events: VecDeque<Event>,
    stats: ClientStats,
}

/// A message queued for the server.
#[derive(Debug)]
struct Outbound {
    message: Message,
    /// A modern request whose `params._meta` gets the client's capabilities and info as it is
    /// written (see [`era::add_version_meta`]).
    client_meta: bool,
}

impl From<Message> for Outbound {
    fn from(message: Message) -> Outbound {
        Outbound {
            message,
            client_meta: false,
        }
    }
}

impl Session {
    /// A session that declares `capabilities` and `client_info`, answers `roots/list` from
    /// `roots`, and leaves the server requests in `callbacks` to the shell.
    pub(crate) fn new(
        capabilities: Value,
        client_info: Value,
        roots: Option<Vec<Value>>,
        callbacks: Vec<&'static str>,
        heartbeat: Option<(Duration, Duration)>,
        connects: bool,
    ) -> Session {
        let client_meta = era::client_meta_text(&capabilities, &client_info);
        Session {
            next_id: 1,
            pending: IdMap::default(),
            cancelled: VecDeque::new(),
            probe: None,
            late_probe: None,
            heartbeat,
            ping: None,
            pings_sent: 0,
            connects,
            era: None,
            protocol_version: String::new(),
            capabilities,
            client_info,
            client_meta,
            log_level: None,
            roots,
            callbacks,
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            stats: ClientStats::default(),
        }
    }

    /// A new server process: the era is decided again (the old one is returned as a hint),
    /// nothing is outstanding. Ids, remembered cancellations and counters carry on.
    pub(crate) fn new_connection(&mut self) -> Option<Era> {
        self.ping = None;
        self.probe = None;
        self.late_probe = None;
        self.protocol_version.clear();
        self.pending.clear();
        self.era.take()
    }

    /// Names `level` in every modern request's `_meta` from now on.
    pub(crate) fn set_log_level(&mut self, level: Option<LogLevel>) {
        self.log_level = level.map(LogLevel::as_str);
    }

    /// Says `text` on stderr, through the shell's rate-limited reporter.
    pub(crate) fn report(&mut self, text: String) {
        self.events.push_back(Event::Report(text));
    }

    /// The connection step decided: `era` with `protocol_version`.
    pub(crate) fn connected(&mut self, era: Era, protocol_version: String) {
        self.era = Some(era);
        self.protocol_version = protocol_version;
    }

    pub(crate) fn era(&self) -> Option<Era> {
        self.era
    }

    pub(crate) fn protocol_version(&self) -> &str {
        &self.protocol_version
    }

    pub(crate) fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    pub(crate) fn client_info(&self) -> &Value {
        &self.client_info
    }

    pub(crate) fn stats(&self) -> &ClientStats {
        &self.stats
    }

    pub(crate) fn stats_mut(&mut self) -> &mut ClientStats {
        &mut self.stats
    }

    /// How many requests are waiting for an answer.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether request `id` waits for an answer.
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn is_pending(&self, id: &RequestId) -> bool {
        self.pending.contains_key(id)
    }

    /// When the next pending request times out, if any is pending.
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.pending.values().map(|p| p.timing.due()).min()
    }

    /// Starts a request: queues it under a new id with the `_meta` its era needs and a
    /// `progressToken` (for `tools/call`, and whenever `wants_progress`). Returns its id.
    pub(crate) fn start(
        &mut self,
        method: &str,
        mut params: Option<Value>,
        wants_progress: bool,
        timing: Timing,
    ) -> RequestId {
        let id = RequestId::from(self.next_id);
        let token = Value::from(self.next_id);
        self.next_id += 1;
        let mut client_meta = false;
        if self.era == Some(Era::Modern) {
            client_meta = era::add_version_meta(&mut params, &self.protocol_version);
            if !client_meta {
                // The caller named one of them: the other goes in as a value.
                era::add_meta(
                    &mut params,
                    &self.protocol_version,
                    &self.capabilities,
                    &self.client_info,
                );
            }
            if let Some(level) = self.log_level {
                era::add_log_level(&mut params, level);
            }
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
        self.outbox.push_back(Outbound {
            message: Message::Request(Request {
                id: id.clone(),
                method: method.to_owned(),
                params,
            }),
            client_meta,
        });
        let pending = Pending {
            method: method.to_owned(),
            token: sent_token,
            timing,
        };
        self.pending.insert(id.clone(), pending);
        id
    }

    /// Marks request `id` as the discover probe: never cancelled, and an answer after its
    /// timeout is kept (see [`Session::take_late_probe`]) instead of dropped.
    pub(crate) fn mark_probe(&mut self, id: &RequestId) {
        self.probe = Some(id.clone());
        self.late_probe = None;
    }

    /// The probe is decided: forget it.
    pub(crate) fn forget_probe(&mut self) {
        self.probe = None;
    }

    /// The answer to the probe that came after its timeout, if any, with the probe's id.
    pub(crate) fn take_late_probe(&mut self) -> Option<(RequestId, Result<Value, ErrorObject>)> {
        self.late_probe.take()
    }

    /// Queues a notification.
    pub(crate) fn notify(&mut self, method: &str, params: Option<Value>) {
        self.outbox.push_back(
            Message::Notification(Notification {
                method: method.to_owned(),
                params,
            })
            .into(),
        );
    }

    /// Gives up on request `id` (it is no longer pending): tells the server with `reason`,
    /// and drops a late answer. Returns whether it was pending.
    pub(crate) fn cancel(&mut self, id: &RequestId, reason: &str) -> bool {
        let Some(pending) = self.pending.remove(id) else {
            return false;
        };
        self.give_up(id.clone(), &pending.method, reason);
        true
    }

    /// Ends request `id` without a word to the server (it died, or the client closed).
    pub(crate) fn forget(&mut self, id: &RequestId) -> bool {
        self.pending.remove(id).is_some()
    }

    /// Ends every pending request without a word to the server (it is dead, or going): their
    /// ids, for the shell to fail.
    pub(crate) fn fail_all(&mut self) -> Vec<RequestId> {
        self.pending.drain().map(|(id, _)| id).collect()
    }

    /// Times out every request whose deadline has passed at `now` ([`Event::TimedOut`]);
    /// returns the next deadline.
    pub(crate) fn expire(&mut self, now: Instant) -> Option<Instant> {
        // The waiting loops ask at every pass: one look at the deadlines, nothing allocated,
        // unless one has passed (then the list in deadline order, below).
        let mut next: Option<Instant> = None;
        let mut passed = false;
        for pending in self.pending.values() {
            let at = pending.timing.due();
            if at > now {
                next = Some(next.map_or(at, |n| n.min(at)));
            } else {
                passed = true;
            }
        }
        if !passed {
            return next;
        }
        let mut due: Vec<(RequestId, Instant)> = self
            .pending
            .iter()
            .map(|(id, p)| (id.clone(), p.timing.due()))
            .collect();
        due.sort_by_key(|(_, at)| *at);
        let mut next = None;
        for (id, at) in due {
            if at > now {
                next = Some(next.map_or(at, |n: Instant| n.min(at)));
                continue;
            }
            let Some(pending) = self.pending.remove(&id) else {
                continue;
            };
            let elapsed = now.saturating_duration_since(pending.timing.started);
            let reason = format!("timed out after {} ms", elapsed.as_millis());
            self.give_up(id.clone(), &pending.method, &reason);
            self.events.push_back(Event::TimedOut {
                id,
                method: pending.method,
                elapsed,
            });
        }
        next
    }

    fn give_up(&mut self, id: RequestId, method: &str, reason: &str) {
        // `initialize` must never be cancelled; its late answer is dropped all the same.
        // Nor is the discover probe: a handshake-era server gets nothing before `initialize`
        // but the probe itself, and a late modern answer is still wanted.
        if method != "initialize" && self.probe.as_ref() != Some(&id) {
            self.notify(
                "notifications/cancelled",
                Some(json!({ "requestId": id.to_value(), "reason": reason })),
            );
        }
        if self.cancelled.len() == REMEMBERED_CANCELLATIONS {
            self.cancelled.pop_front();
        }
        self.cancelled.push_back(id);
    }

    /// The heartbeat at `now`, the server's last output having come at `last_inbound`: sends a
    /// ping when the server has been quiet for the interval.
    pub(crate) fn heartbeat(&mut self, now: Instant, last_inbound: Instant) -> Pulse {
        let Some((interval, timeout)) = self.heartbeat else {
            return Pulse::Next(None);
        };
        if self.connects && self.era.is_none() {
            // Connecting: the era (and so the heartbeat's method) is not known yet, and every
            // wait of the connection step has its own deadline.
            return Pulse::Next(None);
        }
        if let Some((_, sent)) = &self.ping {
            let sent = *sent;
            if last_inbound < sent {
                if now >= deadline::after(sent, timeout) {
                    return Pulse::Silent(now.saturating_duration_since(last_inbound));
                }
                return Pulse::Next(Some(deadline::after(sent, timeout)));
            }
        }
        let next = deadline::after(last_inbound, interval);
        if now < next {
            return Pulse::Next(Some(next));
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
        self.pings_sent += 1;
        let id = RequestId::from(format!("{HEARTBEAT_PREFIX}{}", self.pings_sent));
        self.outbox.push_back(
            Message::Request(Request {
                id: id.clone(),
                method: String::from(method),
                params,
            })
            .into(),
        );
        self.stats.heartbeats += 1;
        self.ping = Some((id, now));
        Pulse::Next(Some(deadline::after(now, timeout)))
    }

    /// One line the server wrote on its stdout (without its newline).
    pub(crate) fn receive_line(&mut self, line: &[u8], now: Instant) {
        match parse_line(line) {
            Parsed::Single(message) => self.receive(message, now),
            Parsed::Invalid(response) => {
                let why = match response.result {
                    Err(error) => error.message,
                    Ok(_) => String::from("not a valid message"),
                };
                self.bad_line(&why, &excerpt(line));
                self.unreadable_answer(line, why);
            }
            Parsed::Batch(items) => {
                for item in items {
                    match item {
                        Ok(message) => self.receive(message, now),
                        Err(_) => self.bad_line("a batch element is not a valid message", ""),
                    }
                }
            }
        }
    }

    /// A line longer than the shell's limit (dropped as it arrived).
    pub(crate) fn receive_oversize(&mut self, limit: usize) {
        self.bad_line(
            &format!("a line longer than the limit of {limit} bytes"),
            "",
        );
    }

    /// A line that is no message but whose top level, read by the JSON grammar alone, is an
    /// answer (an `id`, no `method`) to a pending request: the request ends now with `why`,
    /// instead of waiting for its deadline for an answer that already came.
    fn unreadable_answer(&mut self, line: &[u8], why: String) {
        let Some(members) = crate::json_read::top_level_spans(line) else {
            return;
        };
        if members.get("method").is_some() {
            return;
        }
        let Some(id) = members.get("id").and_then(crate::relayed::plain_id) else {
            return;
        };
        if self.pending.remove(&id).is_some() {
            self.events.push_back(Event::Unreadable {
                id,
                reason: why,
                line: excerpt(line),
            });
        }
    }

    fn bad_line(&mut self, why: &str, excerpt: &str) {
        // Never answered: two peers answering each other's garbage can storm.
        self.stats.bad_lines += 1;
        self.events.push_back(Event::Report(format!(
            "the server wrote a line that is not a message ({why}): {excerpt}"
        )));
    }

    /// One message from the server.
    pub(crate) fn receive(&mut self, message: Message, now: Instant) {
        match message {
            Message::Response(response) => self.receive_response(response),
            Message::Request(request) => self.receive_request(request),
            Message::Notification(notification) => self.receive_notification(notification, now),
        }
    }

    fn receive_response(&mut self, response: Response) {
        if let Some(id) = &response.id {
            if self.pending.remove(id).is_some() {
                let id = id.clone();
                self.events.push_back(Event::Answered {
                    id,
                    result: response.result,
                });
                return;
            }
            if id.as_str().is_some_and(|s| s.starts_with(HEARTBEAT_PREFIX)) {
                // Any answer, even an error, means the server is alive.
                if self.ping.as_ref().is_some_and(|(ping, _)| ping == id) {
                    self.ping = None;
                }
                return;
            }
            if self.probe.as_ref() == Some(id) {
                // The answer to a discover probe that timed out: it may still decide the era.
                self.late_probe = Some((id.clone(), response.result));
                return;
            }
            if self.cancelled.contains(id) {
                self.stats.late_responses += 1;
                return;
            }
        }
        self.stats.unmatched_responses += 1;
        self.events.push_back(Event::Stray(response));
    }

    /// Answers a request from the server: `ping`, `roots/list` when roots are configured,
    /// the methods the shell has callbacks for through it, and `-32601` for anything else.
    /// Under MCP 2026-07-28 the server must not send requests and the client must not send
    /// responses: such a request is counted, reported, and left unanswered.
    fn receive_request(&mut self, request: Request) {
        self.stats.server_requests += 1;
        if request.method == "ping" {
            self.stats.server_pings += 1;
        }
        if self.era == Some(Era::Modern) {
            let method = request.method;
            self.events.push_back(Event::Report(format!(
                "the server sent a {method} request, which MCP 2026-07-28 does not allow; \
                 left unanswered"
            )));
            return;
        }
        let result = match request.method.as_str() {
            "ping" => Ok(json!({})),
            "roots/list" => match &self.roots {
                Some(roots) => Ok(json!({ "roots": roots })),
                None => Err(ErrorObject::method_not_found("roots/list")),
            },
            method if self.callbacks.contains(&method) => {
                self.events.push_back(Event::Callback(request));
                return;
            }
            method => Err(ErrorObject::method_not_found(method)),
        };
        self.respond(request.id, result);
    }

    /// Answers the server's request `id` (one the shell got as [`Event::Callback`]).
    pub(crate) fn respond(&mut self, id: RequestId, result: Result<Value, ErrorObject>) {
        self.outbox.push_back(
            Message::Response(Response {
                id: Some(id),
                result,
            })
            .into(),
        );
    }

    fn receive_notification(&mut self, notification: Notification, now: Instant) {
        self.stats.notifications += 1;
        if notification.method == "notifications/progress" {
            let params = notification.params.as_ref().unwrap_or(&Value::Null);
            let token = params.get(PROGRESS_TOKEN_KEY);
            let id = token.and_then(RequestId::from_value);
            if let (Some(token), Some(id)) = (token, &id) {
                if let Some(pending) = self.pending.get_mut(id) {
                    if pending.token.as_ref() == Some(token) {
                        pending.timing.progressed(now);
                        if let Some(progress) = Progress::from_params(params) {
                            let id = id.clone();
                            self.events.push_back(Event::Progress { id, progress });
                        }
                        return;
                    }
                }
            }
            if id.is_some_and(|id| self.cancelled.contains(&id)) {
                self.stats.late_progress += 1;
                return;
            }
        }
        self.events.push_back(Event::Notification(notification));
    }

    /// Appends the next message for the server to `out`, as a line; `false` when none waits.
    pub(crate) fn write_outbound(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(outbound) = self.outbox.pop_front() else {
            return false;
        };
        match &outbound.message {
            Message::Request(request) if outbound.client_meta => {
                era::write_with_client_meta(out, request, &self.client_meta);
            }
            message => message.write_line(out),
        }
        true
    }

    /// Drops the messages waiting for the server (there is none to write to).
    pub(crate) fn drop_outbound(&mut self) {
        self.outbox.clear();
    }

    /// The next thing the shell must act on.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
