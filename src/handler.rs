//! The handler trait a server implements, and the context a handler works through.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::panic::{self, AssertUnwindSafe};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::child::ChildOutput;
use crate::connection::Connection;
use crate::deadline;
use crate::error::{Error, Outcome};
use crate::message::{ErrorObject, Message, Notification, Request, RequestId, Response};
use crate::responder::{CancelToken, LoopHandle, Responder};
use crate::stats::Stats;

/// What a server does with the messages it receives.
///
/// Only [`handle_request`](Handler::handle_request) is required; every other method has a
/// default that does nothing. Methods run on the loop's thread, one at a time, so a handler can
/// keep state in `&mut self` without locks.
///
/// # Threads
/// While a method runs, the loop serves nobody else, so methods should be quick. Slow work goes
/// elsewhere: take the request's [`Responder`] ([`Context::responder`]), move it to another
/// thread (or a pool), and return; the loop keeps serving and writes the answer when the
/// responder gives it. What that thread learns for the handler's state comes back through
/// [`Responder::post`] to [`handle_post`](Handler::handle_post), on the loop's thread.
pub trait Handler {
    /// Answers a request. `Ok` becomes a result response and `Err` an error response, each with
    /// the request's id. A panic is caught and answered with `-32603`; the loop goes on.
    fn handle_request(
        &mut self,
        request: Request,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject>;

    /// Handles a notification. It never gets a response, whatever happens here.
    fn handle_notification(&mut self, notification: Notification, cx: &mut Context<'_>) {
        let _ = (notification, cx);
    }

    /// Handles a response to a request this side sent with [`Context::send_request`], or an
    /// error response the peer sent about something it could not read (`id` is `None` then).
    fn handle_response(&mut self, response: Response, cx: &mut Context<'_>) {
        let _ = (response, cx);
    }

    /// Handles data another thread posted ([`Responder::post`]), on the loop's thread: the
    /// place where results of work done elsewhere update the handler's state. Posts of one
    /// responder arrive in order, and before its answer is written.
    fn handle_post(&mut self, data: Box<dyn Any + Send>, cx: &mut Context<'_>) {
        let _ = (data, cx);
    }

    /// Told, on the loop's thread, that an fd watched with [`Context::watch`] under `key` may
    /// have input. The watch is edge-triggered: read until the read would block, or it is not
    /// reported again.
    fn handle_readable(&mut self, key: usize, cx: &mut Context<'_>) {
        let _ = (key, cx);
    }

    /// Told, on the loop's thread, that the peer cancelled `request`, whose answer a
    /// [`Responder`] owes (its holder sees it too, and its answer will not be sent): the place
    /// to stop work the handler keeps track of itself, or to pass the cancellation on.
    fn handle_cancelled(&mut self, request: RequestId, cx: &mut Context<'_>) {
        let _ = (request, cx);
    }

    /// Runs once, on the loop's thread, before the loop first reads its input: the place to
    /// watch fds of the handler's own ([`Context::watch`]), hand a [`Context::loop_handle`] to
    /// threads, or send a first notification, without waiting for the peer's first message.
    fn on_start(&mut self, cx: &mut Context<'_>) {
        let _ = cx;
    }

    /// Runs after each pass of messages the loop handled (every complete line it held, or as
    /// many as its output and in-flight bounds let it start), before it reads more or sleeps:
    /// a handler that gathers output of its own (a relay's lines for its upstream) sends it
    /// now, in one write rather than one per message.
    fn on_caught_up(&mut self, cx: &mut Context<'_>) {
        let _ = cx;
    }

    /// Runs once after each quiet period of the server's idle timeout: the place to evict
    /// caches and close idle stores.
    fn on_idle(&mut self, cx: &mut Context<'_>) {
        let _ = cx;
    }

    /// Runs once when the loop is about to end, before the work still owed an answer is
    /// cancelled (after the shutdown grace at end of input; at once on a signal): the place
    /// to stop long-lived work, so that whoever waits for it is answered in its own words
    /// rather than with the loop's "shut down before the request finished".
    fn on_ending(&mut self, cx: &mut Context<'_>) {
        let _ = cx;
    }

    /// Runs once when the loop ends, after every response was written (as far as the peer
    /// still reads), with the reason it ends.
    fn on_shutdown(&mut self, outcome: &Outcome, cx: &mut Context<'_>) {
        let _ = (outcome, cx);
    }

    /// Whether a JSON-RPC batch (a line holding an array) is accepted now. Asked for each batch;
    /// when `false`, the batch gets one `-32600` error. The default accepts them.
    fn accepts_batches(&self) -> bool {
        true
    }

    /// The method of the notification that cancels a request, or `None` (the default: raw
    /// JSON-RPC has no cancellation). The MCP layer answers `notifications/cancelled`.
    ///
    /// When set, the loop itself acts on these notifications, whose `params.requestId` names
    /// the request: a request still waiting to start is dropped (never run, never answered);
    /// the running one sees [`Context::is_cancelled`] turn true and its response is
    /// suppressed. Such a notification is consumed by the loop. One naming an unknown or
    /// finished request (or without a readable `requestId`) reaches
    /// [`handle_notification`](Handler::handle_notification) as usual. Cancellations are looked
    /// for in single-message lines only: requests inside a batch run to completion.
    fn cancel_method(&self) -> Option<&str> {
        None
    }

    /// Not for handlers outside this crate (they cannot name its type): the members of one
    /// method's params that the MCP layer takes apart as a line is read, instead of out of
    /// the built params (a `tools/call`'s `name` and `arguments`). Asked once, when the loop
    /// starts; every other handler gets its params whole.
    #[doc(hidden)]
    fn params_apart(&self) -> Option<crate::message::ParamsApart> {
        None
    }

    /// Whether the loop should start no new message for now: back-pressure from wherever the
    /// handler sends its work (a relay's upstream pipe, a queue of its own). Asked before each
    /// message, so it must be cheap. While it says yes, the loop does what it does at
    /// [`Server::max_in_flight`](crate::Server::max_in_flight): it starts nothing, reads ahead
    /// (bounded) so that cancellations and responses are still acted on, and asks again after
    /// every event; make sure one comes when the hold ends (an answer, or a
    /// [`LoopHandle::post`](crate::LoopHandle::post)). At the end of input the shutdown grace
    /// runs as usual. The default never holds.
    fn holds_input(&self) -> bool {
        false
    }

    /// The methods whose requests this handler answers at once, on the loop's thread, without
    /// a responder or a wait (MCP's `ping`). Asked once, when the loop starts. While too many
    /// requests are in flight ([`Server::max_in_flight`](crate::Server::max_in_flight)), such
    /// a request read ahead is still started, ahead of the requests waiting for a slot: a
    /// liveness check is answered promptly however busy the server is. The default names none.
    fn methods_answered_at_once(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether `request` may be cancelled; asked before it runs. The default says yes. (MCP
    /// never cancels `initialize`.)
    fn is_cancellable(&self, request: &Request) -> bool {
        let _ = request;
        true
    }
}

/// What a handler can do while it works: talk to the peer and see the loop's state.
///
/// A context lives only for one handler call.
#[derive(Debug)]
pub struct Context<'a> {
    conn: &'a mut Connection,
    /// Borrowed from the loop, which keeps the id for the response.
    request: Option<&'a RequestId>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(conn: &'a mut Connection, request: Option<&'a RequestId>) -> Context<'a> {
        Context { conn, request }
    }

    /// A shorter-lived context for the same call, so that a wrapper can own one.
    pub(crate) fn reborrow(&mut self) -> Context<'_> {
        Context {
            conn: &mut *self.conn,
            request: self.request,
        }
    }

    /// The id of the request being handled, if the call is for a request.
    pub fn request_id(&self) -> Option<&RequestId> {
        self.request
    }

    /// Sends a notification to the peer now (not when the handler returns).
    ///
    /// The write never blocks: when the peer is not reading, the message waits in the output
    /// queue and the loop writes it as soon as it can.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the peer closed the connection.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.send(&Message::Notification(Notification {
            method: method.to_owned(),
            params,
        }))
    }

    /// Sends a request to the peer and returns its id. The response arrives later through
    /// [`Handler::handle_response`].
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the peer closed the connection.
    pub fn send_request(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<RequestId, Error> {
        let id = RequestId::from(self.conn.session.next_request_id());
        self.send(&Message::Request(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        }))?;
        Ok(id)
    }

    /// Queues any message and writes it as far as the peer takes it without blocking. While
    /// handling a request, when the output is at its bound (`Server::max_output_bytes`: the
    /// peer is not reading), waits until the peer has read some of it: a handler that floods
    /// notifications is slowed down to the peer's pace, as one on a worker thread is, instead
    /// of growing memory without bound.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the peer closed the connection; while waiting for room, the
    /// errors of [`Context::checkpoint`] (the message stays queued).
    pub fn send(&mut self, message: &Message) -> Result<(), Error> {
        if self.conn.session.peer_gone {
            return Err(Error::PeerGone);
        }
        self.conn.session.queue.push(message);
        self.conn.flush();
        if self.request.is_some() && self.conn.output_full() {
            self.conn.wait_for_room()?;
        }
        if self.conn.session.peer_gone {
            return Err(Error::PeerGone);
        }
        Ok(())
    }

    /// The loop's counters so far.
    pub fn stats(&self) -> &Stats {
        &self.conn.session.stats
    }

    /// Whether the handler should stop: the peer cancelled the request being handled, a
    /// shutdown signal arrived, the peer went away, or the input ended longer than
    /// `Server::shutdown_grace` ago (counted from the request's start if later: a handler on
    /// the loop's thread gets the grace work on other threads gets).
    ///
    /// Non-blocking and cheap enough for a tight loop: at most once per millisecond it asks the
    /// kernel, without sleeping, whether input waits, reads it into the line buffer, and looks
    /// through the new complete lines for a cancellation. Every other message stays queued, in
    /// arrival order, for after the handler returns. (Cancellation needs
    /// [`Handler::cancel_method`]; signals and a vanished peer count always.)
    pub fn is_cancelled(&mut self) -> bool {
        if !self.conn.interrupted() {
            self.conn.peek(false);
        }
        self.conn.interrupted()
    }

    /// [`Context::is_cancelled`] as a `Result`, for `?` at the points where a handler can
    /// stop.
    ///
    /// # Errors
    /// [`Error::Cancelled`] when the peer cancelled this request, [`Error::Shutdown`] when a
    /// shutdown signal arrived or the grace after the end of input ran out,
    /// [`Error::PeerGone`] when the peer went away.
    ///
    /// # Example
    /// ```
    /// # fn work(cx: &mut mcpipe::Context<'_>) -> Result<u64, mcpipe::Error> {
    /// let mut sum = 0u64;
    /// for i in 0..10_000_000u64 {
    ///     cx.checkpoint()?; // cheap: reads the input at most once per millisecond
    ///     sum = sum.wrapping_add(i);
    /// }
    /// # Ok(sum) }
    /// ```
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        if self.is_cancelled() {
            Err(self.interruption())
        } else {
            Ok(())
        }
    }

    /// Sleeps for `duration`, waking at once when the request is cancelled, a shutdown signal
    /// arrives or the peer goes away. Input arriving meanwhile is read ahead and kept in order,
    /// and queued output keeps flowing.
    ///
    /// # Errors
    /// As [`Context::checkpoint`]; [`Error::Io`] when polling fails.
    pub fn sleep(&mut self, duration: Duration) -> Result<(), Error> {
        self.sleep_until(deadline::from_now(duration))
    }

    /// [`Context::sleep`] until `deadline`.
    ///
    /// # Errors
    /// As [`Context::sleep`].
    pub fn sleep_until(&mut self, deadline: Instant) -> Result<(), Error> {
        self.conn.peek(true);
        loop {
            if self.conn.interrupted() {
                return Err(self.interruption());
            }
            if Instant::now() >= deadline {
                return Ok(());
            }
            self.conn.wait_until(deadline)?;
        }
    }

    /// Sends a request to the peer and waits for its response, at most `timeout`.
    ///
    /// While waiting, input is read ahead: every message that is not this response stays
    /// queued in arrival order for after the handler returns. The wait ends early when the
    /// request being handled is cancelled, a signal arrives or the peer goes away. When the
    /// wait ends early that way, or the deadline passes, and the loop knows a cancel method
    /// ([`Handler::cancel_method`]), the peer is told this request is cancelled. A late
    /// response is dropped (as [`Responder::call`] drops one), never given to
    /// [`Handler::handle_response`].
    ///
    /// # Errors
    /// [`Error::Rpc`] when the peer answered with an error, [`Error::Timeout`] at the
    /// deadline, [`Error::InputEnded`] at once when the peer's input ended without the answer,
    /// and the errors of [`Context::checkpoint`] and [`Context::send`].
    pub fn call(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let started = Instant::now();
        let deadline = deadline::after(started, timeout);
        let id = self.send_request(method, params)?;
        self.conn.session.awaiting = Some(id.clone());
        self.conn.session.arrived = None;
        // Responses read ahead before this call cannot be ours: the id is new.
        let outcome = loop {
            self.conn.peek(true);
            if let Some(response) = self.conn.session.arrived.take() {
                break response.result.map_err(Error::Rpc);
            }
            if self.conn.interrupted() {
                // The question is moot: the peer is told, as at the deadline.
                self.give_up_question(&id, "the request that asked was cancelled");
                break Err(self.interruption());
            }
            if self.conn.session.input_eof {
                // Every line is read (up to the read-ahead bound, which nothing drains while
                // this handler waits): the answer cannot come.
                break Err(Error::InputEnded);
            }
            if Instant::now() >= deadline {
                self.give_up_question(&id, "no response before the deadline");
                break Err(Error::Timeout {
                    method: method.to_owned(),
                    elapsed: started.elapsed(),
                    stderr_tail: None,
                });
            }
            if let Err(e) = self.conn.wait_until(deadline) {
                self.give_up_question(&id, "the wait for a response failed");
                break Err(e);
            }
        };
        self.conn.session.awaiting = None;
        self.conn.session.arrived = None;
        outcome
    }

    /// Gives up on the question `id`: its late answer is dropped, and the peer is told it is
    /// cancelled when the loop knows a cancel method (and the peer is there to hear it).
    fn give_up_question(&mut self, id: &RequestId, reason: &str) {
        self.conn.session.given_up.note(id.clone());
        if let Some(cancel) = self.conn.session.cancel_method().map(str::to_owned) {
            let params = serde_json::json!({ "requestId": id.to_value(), "reason": reason });
            let _ = self.notify(&cancel, Some(params));
        }
    }

    /// Runs `command` to completion in a process group of its own, stdin from `/dev/null`,
    /// capturing up to `max_output` bytes of each of stdout and stderr (the rest is read and
    /// dropped, so the child never blocks on a full pipe).
    ///
    /// While it runs, the loop keeps reading input (kept in order for later) and watching for
    /// cancellation. On cancellation, a shutdown signal, the peer going away or the `timeout`:
    /// SIGTERM to the whole group and to the command's other descendants (then SIGCONT, so a
    /// stopped one acts on it), SIGKILL after a short grace (200 ms), then the child is reaped, so the call returns well within a second. When
    /// the command exits by itself, the processes it left running get the same treatment (after
    /// 100 ms in which they may finish writing).
    ///
    /// No process is left behind: besides the group, every descendant seen while the command
    /// ran is ended, also one that left the group or its session (`setsid`), which a signal to
    /// the group misses. On Linux the command's process tree is read from `/proc` about every
    /// 10 ms while it runs, so only a process started *and* orphaned between two looks (a
    /// double fork within 10 ms) escapes; other systems end the process group only.
    ///
    /// When the program ignores `SIGCHLD` (or reaps children itself), the kernel (or it) reaps
    /// the command, so its exit status is lost: the output comes back as usual, with
    /// [`ChildOutput::status`] `None`.
    ///
    /// # Errors
    /// [`Error::Spawn`] when the command cannot be started; [`Error::Cancelled`],
    /// [`Error::Shutdown`] or [`Error::PeerGone`] when it was stopped for those reasons;
    /// [`Error::Io`] when waiting for it fails (a poll error). A timeout is not an error:
    /// [`ChildOutput::timed_out`] says so.
    ///
    /// # Example
    /// ```no_run
    /// # fn tool(cx: &mut mcpipe::Context<'_>) -> Result<(), mcpipe::Error> {
    /// use std::time::Duration;
    /// let mut cmd = std::process::Command::new("ls");
    /// cmd.arg("-l");
    /// let out = cx.run_command(cmd, 1 << 20, Some(Duration::from_secs(30)))?;
    /// let said = String::from_utf8_lossy(&out.stdout);
    /// let code = out.status.and_then(|status| status.code());
    /// mcpipe::stderr_line(&format!("exit {code:?}: {said}"));
    /// # Ok(()) }
    /// ```
    pub fn run_command(
        &mut self,
        command: Command,
        max_output: usize,
        timeout: Option<Duration>,
    ) -> Result<ChildOutput, Error> {
        self.conn.run_command(command, max_output, timeout)
    }

    /// Takes the answer of the request being handled out of the loop's hands: the loop sends
    /// nothing when the handler returns (its return value is ignored, unless it panics), and
    /// the returned [`Responder`] answers later, from any thread, while the loop keeps serving.
    ///
    /// The responder sees the request's cancellation ([`Responder::is_cancelled`]); the answer
    /// of a request the peer cancelled is not sent. A responder dropped unanswered answers
    /// `-32603`. Returns `None` for a notification or a response, and when the answer was
    /// already taken.
    pub fn responder(&mut self) -> Option<Responder> {
        let id = self.request?;
        if self.conn.session.response_withheld {
            return None;
        }
        self.conn.session.response_withheld = true;
        let token = CancelToken::new();
        let cancellable = self.conn.session.running.is_some();
        if self.conn.session.running_cancelled {
            token.cancel_by_peer();
        }
        self.conn
            .session
            .owed
            .insert(id.clone(), (token.clone(), cancellable));
        self.conn.session.stats.answered_later += 1;
        Some(Responder::new(
            id.clone(),
            self.conn.outbox().clone(),
            token,
        ))
    }

    /// [`Context::responder`] for an answer that waits on something else rather than on work
    /// of its own (a long poll, MCP's `tasks/result` waiting for its task): it does not count
    /// toward [`Server::max_in_flight`](crate::Server::max_in_flight), so that any number of
    /// such waits cannot stop the loop from starting the requests they wait for.
    pub fn waiting_responder(&mut self) -> Option<Responder> {
        let responder = self.responder()?;
        self.conn.session.waiting.insert(responder.id().clone());
        Some(responder)
    }

    /// A handle to reach the peer from any thread, outside of any one request (see
    /// [`LoopHandle`]).
    pub fn loop_handle(&self) -> LoopHandle {
        LoopHandle::new(self.conn.outbox().clone())
    }

    /// Answers with `responder` from the loop's own thread: the same as
    /// [`Responder::respond`], without the hop through the loop's event channel (for a
    /// handler that got the answer on this thread, e.g. from a watched fd).
    pub fn respond(&mut self, responder: Responder, result: Result<Value, ErrorObject>) {
        let token = Some(responder.cancel_token());
        let id = responder.into_answered();
        self.conn
            .take_event_here(crate::responder::Event::Answer { id, result, token });
    }

    /// The members of the params of the message being handled that were read apart
    /// ([`Handler::params_apart`]); `None` when its params are whole.
    pub(crate) fn take_params_apart(&mut self) -> Option<Box<crate::message::Apart>> {
        self.conn.session.take_params_apart()
    }

    /// The line of the message being handled, as the peer sent it (without its newline),
    /// when the server keeps lines (a relay's); `None` for a batch's messages.
    pub(crate) fn take_raw_line(&mut self) -> Option<Vec<u8>> {
        self.conn.session.take_raw_line()
    }

    /// [`Context::respond`] with a result that is JSON text already (checked by the caller:
    /// a relay forwards its upstream's answer as it came, without a `Value` in between).
    pub(crate) fn respond_raw(&mut self, responder: Responder, result: &str) {
        let token = responder.cancel_token();
        let id = responder.into_answered();
        self.conn.answer_raw(&id, result, &token);
    }

    /// Where the handler may write the request's result as JSON text instead of returning it
    /// (crate-private: the MCP layer's quick tool answers): when the handler then returns
    /// `Ok`, its value is ignored and this text is the result. `None` outside a request.
    pub(crate) fn answer_text(&mut self) -> Option<&mut Vec<u8>> {
        let id = self.request?;
        Some(self.conn.answer_text(id))
    }

    /// Has the loop watch `fd` for input alongside its own, and call
    /// [`Handler::handle_readable`] with `key` whenever it may have some (once right away, too),
    /// so that one thread serves both: a relay reads its upstream's answers without a thread
    /// of its own. Stop with [`Context::unwatch`] before closing `fd`.
    ///
    /// While watched, `fd` is in non-blocking mode (set here if it was not, put back by
    /// [`Context::unwatch`]), so that the handler's reads end with `WouldBlock` instead of
    /// stalling the loop; a `ChildStdout` or `PipeReader` can be watched as it comes.
    ///
    /// # Errors
    /// [`Error::Io`] when the poller refuses the fd (one that cannot be polled, such as a
    /// regular file, or one already watched).
    pub fn watch(&mut self, fd: BorrowedFd<'_>, key: usize) -> Result<(), Error> {
        self.conn
            .watch(fd, key)
            .map_err(|e| Error::io("watching an fd", e))
    }

    /// Stops watching `fd`, which was watched under `key`.
    pub fn unwatch(&mut self, fd: BorrowedFd<'_>, key: usize) {
        self.conn.unwatch(fd.as_raw_fd(), key);
    }

    /// The loop sends no response when the handler of this request returns (whatever it
    /// returns, unless it panics): the handler keeps the id and answers later with
    /// [`Context::send`], or never. For long-lived requests such as MCP's
    /// `subscriptions/listen`.
    pub(crate) fn withhold_response(&mut self) {
        if self.request.is_some() {
            self.conn.session.response_withheld = true;
        }
    }

    /// Why the handler was interrupted, as an error.
    fn interruption(&self) -> Error {
        self.conn.session.interruption_error()
    }

    /// The connection, for crate-internal extensions of the context.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        self.conn
    }
}

// ---------------------------------------------------------------------------------------------
// Calling handler code with panics caught, reported once.
// ---------------------------------------------------------------------------------------------

thread_local! {
    /// Set while handler code runs on this thread: the panic hook then records instead of
    /// printing, so the loop can report the panic once, in its own words.
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(Cell::get) {
                let location = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let text = format!("{}{location}", payload_text(info.payload()));
                CAPTURED.with(|c| *c.borrow_mut() = Some(text));
            } else {
                previous(info);
            }
        }));
    });
}

fn payload_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// Runs `f`, catching a panic; `Err` holds the panic message and location.
///
/// With `panic = "abort"` nothing can be caught: the process ends, as the profile asks.
pub(crate) fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_panic_hook();
    let was = CAPTURING.with(|c| c.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    CAPTURING.with(|c| c.set(was));
    result.map_err(|payload| {
        CAPTURED
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| payload_text(payload.as_ref()))
    })
}
