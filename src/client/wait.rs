//! The shell over the [`Session`](super::session::Session) that both clients share: sending
//! what the session queues, feeding it the server's lines, delivering its events (to the one
//! waiting caller, or to the shared client's calls), and the one waiting loop of the
//! one-thread [`Client`]. Also the dead-server, heartbeat and shutdown paths.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::era::Asked;
use super::options::{Progress, RequestOptions};
use super::process::{Shutdown, ShutdownStage};
use super::session::{Event, Pulse, Timing};
use super::{dead_error, server_has_exited, Client, Dead};
use crate::deadline;
use crate::error::{Error, UNREADABLE_ANSWER};
use crate::line_buffer::Line;
use crate::message::{ErrorObject, Request, RequestId};

/// After the server closed its stdout (or stopped reading), how long the client waits for it to
/// exit so the error can carry its exit status.
const EXIT_GRACE: Duration = Duration::from_millis(250);

/// Responses that matched no request, kept for [`Client::next_stray_response`].
const MAX_STRAY_RESPONSES: usize = 10_000;

/// What a wait is for: it ends when this holds, when its deadline passes, or when the server
/// dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// The awaited request ended (answered or timed out).
    Response,
    /// A notification is queued.
    Notification,
    /// A stray response is queued.
    Stray,
    /// Only the deadline ends it.
    Deadline,
}

/// The request the caller of the one-thread client is waiting for.
pub(super) struct Waiting<'a, 'b> {
    id: RequestId,
    progress: Option<&'a mut (dyn FnMut(&Progress) + 'b)>,
    /// Its answer, or its timeout.
    outcome: Option<Result<Value, Error>>,
}

impl Client {
    /// One attempt: send, and wait for the answer or the deadline (the session then cancels
    /// it).
    pub(super) fn request_once(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
    ) -> Result<Value, Error> {
        self.check_usable()?;
        let timing = self.timing(options, Instant::now());
        let wants_progress = options.progress.is_some();
        let id = self.session.start(method, params, wants_progress, timing);
        self.flush_outbox();
        self.await_outcome(&id, options.progress.as_deref_mut())
    }

    /// Waits for request `id` (already started) to end: its answer, its timeout, or why the
    /// server can no longer answer (the request then ends here).
    pub(super) fn await_outcome<'a, 'b>(
        &mut self,
        id: &RequestId,
        progress: Option<&'a mut (dyn FnMut(&Progress) + 'b)>,
    ) -> Result<Value, Error> {
        if let Err(e) = self.check_usable() {
            self.session.forget(id);
            return Err(e);
        }
        let mut waiting = Waiting {
            id: id.clone(),
            progress,
            outcome: None,
        };
        let ran = self.run(None, Some(&mut waiting), Until::Response);
        if let Some(outcome) = waiting.outcome {
            return outcome;
        }
        // The server died or the client closed: the request ends here, unanswered.
        self.session.forget(id);
        ran.and(Err(Error::Closed))
    }

    /// The deadlines of a request sent at `now`, from its options and the client's defaults.
    pub(super) fn timing(&self, options: &RequestOptions<'_>, now: Instant) -> Timing {
        Timing::new(
            now,
            options.timeout.unwrap_or(self.settings.timeout),
            options.max_total.or(self.settings.max_total),
            options.reset_on_progress.unwrap_or(true),
        )
    }

    /// Writes what the session queued (requests, answers, cancellations) to the server.
    pub(super) fn flush_outbox(&mut self) {
        let Client {
            process, session, ..
        } = self;
        match process.as_mut() {
            Some(process) => {
                while session.write_outbound(process.outgoing()) {}
                process.flush();
            }
            // No server to write to: what was queued for it is moot.
            None => session.drop_outbound(),
        }
    }

    /// The client's one waiting loop. Returns `Ok` when `until` holds or `deadline` passes;
    /// `Err` when the server is closed, exited or silent.
    pub(super) fn run(
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
            let now = Instant::now();
            let heartbeat_due = self.heartbeat_step(now)?;
            let expiry = self.session.expire(now);
            self.dispatch(&mut waiting);
            self.flush_outbox();
            if self.holds(until, &waiting) {
                return Ok(());
            }
            if deadline.is_some_and(|d| now >= d) {
                return Ok(());
            }
            let wake = [deadline, expiry, heartbeat_due]
                .into_iter()
                .flatten()
                .min();
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
            Until::Response => waiting.as_ref().is_some_and(|w| w.outcome.is_some()),
            Until::Notification => !self.notifications.is_empty(),
            Until::Stray => !self.strays.is_empty(),
            Until::Deadline => false,
        }
    }

    /// Feeds every line already in the buffer to the session and delivers its events; stops
    /// early once the waiting caller's request has ended (the caller gets its answer first).
    pub(super) fn handle_buffered(&mut self, waiting: &mut Option<&mut Waiting<'_, '_>>) {
        loop {
            let Client {
                process, session, ..
            } = &mut *self;
            let Some(process) = process.as_mut() else {
                break;
            };
            let limit = process.max_message_bytes();
            match process.next_line() {
                None => break,
                Some(Line::Complete(line)) => session.receive_line(line, Instant::now()),
                Some(Line::Oversize) => session.receive_oversize(limit),
            }
            self.dispatch(waiting);
            if waiting.as_ref().is_some_and(|w| w.outcome.is_some()) {
                break;
            }
        }
        self.flush_outbox();
    }

    /// Delivers the session's events: an ended request to whoever waits for it, progress to
    /// its callback, notifications and stray responses to their queues (or the notification
    /// callback), the server's requests to the callbacks that answer them.
    pub(super) fn dispatch(&mut self, waiting: &mut Option<&mut Waiting<'_, '_>>) {
        while let Some(event) = self.session.next_event() {
            match event {
                Event::Answered { id, result } => {
                    self.ended(waiting, &id, result.map_err(Error::Rpc));
                }
                Event::TimedOut {
                    id,
                    method,
                    elapsed,
                } => self.ended(
                    waiting,
                    &id,
                    Err(Error::Timeout {
                        method,
                        elapsed,
                        stderr_tail: None,
                    }),
                ),
                Event::Unreadable { id, reason, line } => {
                    self.ended(waiting, &id, Err(unreadable(reason, line)));
                }
                Event::Progress { id, progress } => match waiting.as_deref_mut() {
                    Some(w) if w.id == id => {
                        if let Some(callback) = w.progress.as_mut() {
                            callback(&progress);
                        }
                    }
                    _ => {
                        if let Some(call) = self.detached.get(&id) {
                            call.progress(progress);
                        }
                    }
                },
                Event::Notification(notification) => {
                    if let Some(callback) = &mut self.on_notification {
                        callback(notification);
                        continue;
                    }
                    if self.notifications.len() >= self.settings.max_queued_notifications {
                        self.notifications.pop_front();
                        self.notifications_dropped(1);
                    }
                    self.notifications.push_back(notification);
                }
                Event::Stray(response) => {
                    if self.strays.len() == MAX_STRAY_RESPONSES {
                        self.strays.pop_front();
                    }
                    self.strays.push_back(response);
                }
                Event::Callback(request) => {
                    let result = self.call_back(&request);
                    self.session.respond(request.id, result);
                }
                Event::Report(text) => self.diagnostics.report(|| text),
            }
        }
    }

    /// `count` notifications were dropped from the full queue (oldest first): counted, and the
    /// first drop is said on stderr, once per client, so that nobody has to poll the stats to
    /// learn that the queue overflows (every drop would flood stderr).
    pub(super) fn notifications_dropped(&mut self, count: u64) {
        let stats = self.session.stats_mut();
        let first = stats.notifications_dropped == 0 && count > 0;
        stats.notifications_dropped += count;
        if first {
            self.diagnostics.notice(&format!(
                "the server's notifications are not being taken and the queue is full ({} \
                 waiting): the oldest are dropped from now on, counted in \
                 ClientStats::notifications_dropped (said once)",
                self.settings.max_queued_notifications
            ));
        }
    }

    /// Request `id` ended with `outcome`: to the waiting caller, or to its shared call.
    fn ended(
        &mut self,
        waiting: &mut Option<&mut Waiting<'_, '_>>,
        id: &RequestId,
        outcome: Result<Value, Error>,
    ) {
        match waiting.as_deref_mut() {
            Some(w) if w.id == *id => w.outcome = Some(outcome),
            _ => {
                if let Some(call) = self.detached.remove(id) {
                    call.answer(outcome);
                }
            }
        }
    }

    /// Answers a server request only a callback can answer (elicitation, sampling).
    fn call_back(&mut self, request: &Request) -> Result<Value, ErrorObject> {
        let params = request.params.clone().unwrap_or_else(|| json!({}));
        let callback = match request.method.as_str() {
            "elicitation/create" => self.on_elicitation.as_mut(),
            "sampling/createMessage" => self.on_sampling.as_mut(),
            _ => None,
        };
        match callback {
            Some(callback) => callback(&params),
            None => Err(ErrorObject::method_not_found(&request.method)),
        }
    }

    /// The heartbeat's turn: a ping when due; a server silent past the timeout is killed and
    /// declared dead. Returns when the heartbeat next needs a look.
    pub(super) fn heartbeat_step(&mut self, now: Instant) -> Result<Option<Instant>, Error> {
        let Some(process) = self.process.as_mut() else {
            return Ok(None);
        };
        match self.session.heartbeat(now, process.last_inbound) {
            Pulse::Next(at) => {
                self.flush_outbox();
                Ok(at)
            }
            Pulse::Silent(silence) => {
                process.kill();
                let dead = Dead::Unresponsive { silence };
                let error = dead_error(&dead);
                self.dead = Some(dead);
                Err(error)
            }
        }
    }

    /// The server exited, closed its stdout, or stopped reading: take what it wrote before it
    /// went, give it a moment to exit (for the status), and mark it dead.
    pub(super) fn settle_death(
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
            let exited = process.has_exited();
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

    /// The answer to one input of an `input_required` result, or why there is none.
    pub(super) fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
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
    pub(super) fn restart_if_dead(&mut self, retrying: bool) -> Result<(), Error> {
        if !retrying || self.closed {
            return Ok(());
        }
        let exited = self.process.as_mut().is_none_or(server_has_exited);
        if self.dead.is_none() && exited && self.process.is_some() {
            // Not noticed yet (a shared client's retry can come first): take what the server
            // wrote before it went, answers to other calls among it, and mark it dead.
            let _ = self.settle_death(&mut None, Until::Deadline);
        }
        if self.dead.is_some() || exited {
            // The shared client's other calls learn of the death (retryable) before the
            // restart forgets their requests.
            self.fail_detached();
            self.restart()?;
        }
        Ok(())
    }

    /// Waits `delay` between attempts, still serving the connection if there is one.
    pub(super) fn pause(&mut self, delay: Duration) {
        if self.dead.is_none() && self.process.is_some() {
            // An error here (the server died) shows at the next attempt.
            let _ = self.run(Some(deadline::from_now(delay)), None, Until::Deadline);
        } else {
            std::thread::sleep(delay);
        }
    }

    /// The error for a client that cannot send now, if any.
    pub(super) fn check_usable(&self) -> Result<(), Error> {
        if self.closed || self.process.is_none() {
            return Err(Error::Closed);
        }
        match &self.dead {
            Some(dead) => Err(dead_error(dead)),
            None => Ok(()),
        }
    }

    /// Shuts the server down (see [`Client::close`]); the client is closed from here on.
    pub(super) fn shut_down(
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
        self.last_stderr_tail = process.stderr_tail();
        drop(process);
        self.last_shutdown = Some(shutdown);
        shutdown
    }
}

/// The error of a request the server answered with a line that could not be read.
pub(super) fn unreadable(reason: String, line: String) -> Error {
    Error::Protocol {
        reason: format!("{UNREADABLE_ANSWER}{reason}"),
        line,
    }
}
