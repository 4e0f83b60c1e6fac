//! The event loop: read lines, hand messages to the handler, write responses, sleep only when
//! there is nothing at all to do.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use crate::connection::{Connection, ConnectionConfig, Fill};
use crate::deadline;
use crate::diagnostics;
use crate::error::{Error, Outcome};
use crate::handler::{catch_panic, Context, Handler};
use crate::message::{ErrorCode, ErrorObject, Message, Parsed, Request, Response};
use crate::session::Start;
use crate::stdio_guard::StdioGuard;
use crate::sys;

/// How long a signal or orphan shutdown may spend writing what is queued.
const SHUTDOWN_FLUSH_GRACE: Duration = Duration::from_millis(50);

/// Output waiting past this, with the peer's pipe full, is lagging: before the next read the
/// loop gives the peer up to [`LAG_WAIT`] to take some.
const LAG_BYTES: usize = 256 << 10;

/// The longest the loop waits, once per read, for a lagging peer to read.
const LAG_WAIT: Duration = Duration::from_millis(1);

/// A line longer than this waits, unparsed, while more than this of answers wait to be
/// written: parsing it then would hold three large copies at once (the answers, the line, and
/// what is parsed from it); once the peer has read the answers, two.
const HOLD_BYTES: usize = 256 << 10;

/// The longest such a line waits (a peer that writes everything before it reads anything is
/// slowed down by this per large message, never deadlocked).
const HOLD_WAIT: Duration = Duration::from_millis(20);

/// After cancelling the work still in flight at shutdown, how long it gets to answer before
/// the loop answers for it (with an error) and ends. Keeps a signal's exit within a second.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// In a long burst of input, how many messages apart the loop looks at a handler's watched
/// fds (a zero-timeout poll).
const WATCH_EVERY: usize = 32;

/// The longest single sleep while waiting for owed answers at shutdown (answers wake it at once;
/// this only bounds how late a deadline is noticed).
const SHUTDOWN_TICK: Duration = Duration::from_millis(50);

/// A configured JSON-RPC loop. Build one with [`Server::new`] and the setters, then call
/// [`Server::serve_stdio`] or [`Server::serve`].
///
/// # Example
/// ```no_run
/// use mcpipe::{Context, ErrorObject, Handler, Request, Server};
/// use serde_json::{json, Value};
///
/// struct Echo;
/// impl Handler for Echo {
///     fn handle_request(&mut self, req: Request, _cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
///         match req.method.as_str() {
///             "echo" => Ok(req.params.unwrap_or(json!({}))),
///             other => Err(ErrorObject::method_not_found(other)),
///         }
///     }
/// }
///
/// let outcome = Server::new().serve_stdio(&mut Echo)?;
/// // Not `eprintln!`: it would block the exit on a stderr nobody reads.
/// mcpipe::stderr_line(&format!("server ended: {outcome}"));
/// # Ok::<(), mcpipe::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Server {
    idle_timeout: Option<Duration>,
    max_message_bytes: usize,
    max_output_bytes: usize,
    batches: bool,
    handle_signals: bool,
    guard_stdout: bool,
    orphan_check: Option<Duration>,
    log_bad_input: bool,
    max_read_ahead_bytes: usize,
    max_in_flight: usize,
    shutdown_grace: Duration,
    relay_lines: Option<fn(&str) -> bool>,
}

impl Default for Server {
    fn default() -> Server {
        Server::new()
    }
}

impl Server {
    /// A server with the defaults: idle hook after 60 s, 64 MiB message limit, 64 MiB output
    /// bound, batches accepted, signals handled, stdout guarded, no orphan check.
    pub fn new() -> Server {
        Server {
            idle_timeout: Some(Duration::from_secs(60)),
            max_message_bytes: 64 << 20,
            max_output_bytes: 64 << 20,
            batches: true,
            handle_signals: true,
            guard_stdout: true,
            orphan_check: None,
            log_bad_input: true,
            max_read_ahead_bytes: 32 << 20,
            max_in_flight: 256,
            shutdown_grace: Duration::from_secs(10),
            relay_lines: None,
        }
    }

    /// After this long with no input, [`Handler::on_idle`] runs once; `None` never runs it.
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Server {
        self.idle_timeout = timeout;
        self
    }

    /// The longest accepted message, in bytes (without its newline). A longer line is answered
    /// with `-32600` and its bytes are dropped as they arrive, never buffered.
    pub fn max_message_bytes(mut self, bytes: usize) -> Server {
        self.max_message_bytes = bytes.max(1);
        self
    }

    /// How much output may wait for a peer that is not reading before the loop stops reading
    /// input (backpressure).
    pub fn max_output_bytes(mut self, bytes: usize) -> Server {
        self.max_output_bytes = bytes.max(1);
        self
    }

    /// Whether JSON-RPC batches are accepted at all; [`Handler::accepts_batches`] can refuse
    /// them as well. A refused batch gets one `-32600` error.
    pub fn batches(mut self, accept: bool) -> Server {
        self.batches = accept;
        self
    }

    /// Whether SIGTERM, SIGINT and SIGHUP end the loop gracefully (the default). Embedders that
    /// own signal handling turn this off. The loop installs its handlers while it serves and
    /// puts back what it found when the last loop ends, except for a signal whose handler the
    /// embedder replaced meanwhile: that one stays.
    pub fn handle_signals(mut self, handle: bool) -> Server {
        self.handle_signals = handle;
        self
    }

    /// Whether [`Server::serve_stdio`] moves the protocol off fds 0 and 1 while it serves (the
    /// default), so that stray prints and children cannot corrupt it.
    pub fn guard_stdout(mut self, guard: bool) -> Server {
        self.guard_stdout = guard;
        self
    }

    /// Checks every `interval` whether the parent process is gone, and ends the loop with
    /// [`Outcome::Orphaned`] if so. Off by default (it is the one periodic wake-up).
    pub fn orphan_check(mut self, interval: Option<Duration>) -> Server {
        self.orphan_check = interval;
        self
    }

    /// Whether bad input is described on stderr (rate-limited; on by default). It is counted in
    /// [`Stats`](crate::Stats) either way.
    pub fn log_bad_input(mut self, log: bool) -> Server {
        self.log_bad_input = log;
        self
    }

    /// How many bytes of messages the loop reads ahead of the handler (32 MiB by default):
    /// while a handler on the loop's thread waits ([`Context::sleep`](crate::Context::sleep),
    /// [`Context::call`](crate::Context::call)) or too many requests are in flight
    /// ([`Server::max_in_flight`]), messages are read ahead so that cancellations and awaited
    /// responses are seen; past this bound the loop stops reading input until the queue drains
    /// (back-pressure: memory stays flat; a cancellation behind the bound is honoured when it
    /// is read).
    pub fn max_read_ahead_bytes(mut self, bytes: usize) -> Server {
        self.max_read_ahead_bytes = bytes.max(1);
        self
    }

    /// How many requests may wait for a [`Responder`](crate::Responder) at once (256 by
    /// default). At the bound the loop starts no new request until an answer frees a slot; it
    /// keeps reading ahead (and acting on cancellations and responses) meanwhile. This is what
    /// bounds a worker pool's queue: a full queue is back-pressure, never loss.
    pub fn max_in_flight(mut self, requests: usize) -> Server {
        self.max_in_flight = requests.max(1);
        self
    }

    /// How long answers still owed at end of input are awaited (10 s by default) before that
    /// work is cancelled. Every owed answer is written before the loop returns: the work's own,
    /// or, if it does not answer within half a second of the cancellation, a `-32603` error.
    /// A shutdown signal cancels at once. Requests read before the end but still waiting for a
    /// slot ([`Server::max_in_flight`]) keep starting as slots free; once none could start for
    /// this long, the loop ends all the same, and each request that never started is answered
    /// with a `-32603` error too.
    pub fn shutdown_grace(mut self, grace: Duration) -> Server {
        self.shutdown_grace = grace;
        self
    }

    /// For a relay, which forwards what it does not change as it came instead of writing it
    /// again: keeps each message's line for the handler ([`Context::take_raw_line`]), and
    /// builds the params of requests and notifications only for the methods `needs_params`
    /// names (the others arrive with `params: None`).
    pub(crate) fn relay_lines(mut self, needs_params: fn(&str) -> bool) -> Server {
        self.relay_lines = Some(needs_params);
        self
    }

    /// Serves on stdin and stdout until end of input, a signal, or the peer going away.
    ///
    /// # Errors
    /// As [`Server::serve`].
    pub fn serve_stdio<H: Handler>(&self, handler: &mut H) -> Result<Outcome, Error> {
        if self.guard_stdout {
            let guard = StdioGuard::new().map_err(|e| Error::io("guarding stdout", e))?;
            let outcome = self.serve(guard.input(), guard.output(), handler);
            drop(guard);
            outcome
        } else {
            self.serve(io::stdin().as_fd(), io::stdout().as_fd(), handler)
        }
    }

    /// Serves on any pair of fds (pipes, sockets, files; the same fd twice for a socket).
    ///
    /// The fds' flags are the same afterwards as before. On Linux a pipe found full (a read of
    /// 64 KiB, a write that would block) is widened once to 256 KiB (`F_SETPIPE_SZ`), which
    /// stays: large messages then cross in fewer reads, writes and wake-ups.
    ///
    /// # Errors
    /// [`Error::Io`] when the fds cannot be set up or polling fails; and, `doing` "writing the
    /// output", when a write failed with an error other than EPIPE (`ENOSPC` on a full disk,
    /// `EFBIG`, `EIO`): the loop then ended as for [`Outcome::PeerGone`], with its whole
    /// shutdown (the handler's hooks run, work in flight cancelled), but the output did not
    /// get everything, which a caller must not take for a normal end.
    pub fn serve<H: Handler>(
        &self,
        input: BorrowedFd<'_>,
        output: BorrowedFd<'_>,
        handler: &mut H,
    ) -> Result<Outcome, Error> {
        let config = ConnectionConfig {
            max_message_bytes: self.max_message_bytes,
            max_output_bytes: self.max_output_bytes,
            max_read_ahead_bytes: self.max_read_ahead_bytes,
            handle_signals: self.handle_signals,
            log_bad_input: self.log_bad_input,
        };
        let mut conn = Connection::new(input, output, &config)?;
        let outcome = self.run(&mut conn, handler)?;
        conn.take_write_error().map_or(Ok(outcome), Err)
    }

    fn run(&self, conn: &mut Connection, handler: &mut dyn Handler) -> Result<Outcome, Error> {
        let parent = self.orphan_check.map(|_| sys::parent_pid());
        let mut idle_fired = false;
        // Until when the large line waiting now may wait (`HOLD_WAIT`).
        let mut hold_until: Option<Instant> = None;
        // The end of the grace, once the input ended while messages waited for a slot (and
        // none could start since).
        let mut eof_deadline: Option<Instant> = None;
        conn.session
            .set_cancel_method(handler.cancel_method().map(str::to_owned));
        conn.session.relay_lines = self.relay_lines;
        conn.shutdown_grace = self.shutdown_grace;
        conn.session.quick_methods = handler.methods_answered_at_once();
        conn.session.set_params_apart(handler.params_apart());
        if let Err(panic) = catch_panic(|| handler.on_start(&mut Context::new(conn, None))) {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!(
                "mcpipe: the handler panicked as it started: {panic}"
            ));
        }
        loop {
            if conn.watches() {
                conn.wait(Some(Duration::ZERO))?;
            }
            take_events(conn, handler);
            if let Some(signo) = conn.session.signal {
                return Ok(self.shut_down(conn, handler, Outcome::Signal(signo), None));
            }
            if conn.session.peer_gone {
                return Ok(self.shut_down(conn, handler, Outcome::PeerGone, None));
            }
            if parent.is_some_and(|p| p != sys::parent_pid()) {
                return Ok(self.shut_down(conn, handler, Outcome::Orphaned, None));
            }

            // Handle every message that is already here, unless the output is at its bound or
            // too many requests are in flight.
            let mut stopped_by_backpressure = false;
            let mut saturated = false;
            let mut handled = false;
            let mut held = false;
            let mut burst = 0usize;
            loop {
                if conn.output_full() {
                    stopped_by_backpressure = true;
                    break;
                }
                if (conn.session.in_flight() >= self.max_in_flight || handler.holds_input())
                    && !conn.session.has_quick()
                {
                    saturated = true;
                    break;
                }
                if conn.output_pending() > HOLD_BYTES && conn.session.large_line_next(HOLD_BYTES) {
                    let now = Instant::now();
                    if now < *hold_until.get_or_insert(now + HOLD_WAIT) {
                        held = true;
                        break;
                    }
                }
                hold_until = None;
                // With cancellation on, everything already buffered is parsed first, so that a
                // cancellation arriving in the same read as its request drops the request.
                conn.session.read_ahead_buffered();
                let Some(parsed) = conn.session.next_parsed() else {
                    break;
                };
                self.dispatch(conn, handler, parsed);
                handled = true;
                burst += 1;
                // A handler's watched fds are looked at every few messages of a long burst:
                // a relay's upstream must not fill its pipe and stall while we read ours.
                if conn.watches() && burst.is_multiple_of(WATCH_EVERY) {
                    conn.wait(Some(Duration::ZERO))?;
                }
                // Answers from other threads flow while a burst is being handled.
                take_events(conn, handler);
                // A signal that arrived while a handler waited ends the loop now, before the
                // next message.
                if conn.session.peer_gone || conn.session.signal.is_some() {
                    break;
                }
            }
            if handled {
                conn.last_input = Instant::now();
                idle_fired = false;
                // Messages still start: the grace after the end of input is for a loop where
                // nothing moves, and starts again.
                eof_deadline = None;
                let result = catch_panic(|| handler.on_caught_up(&mut Context::new(conn, None)));
                if let Err(panic) = result {
                    conn.session.stats.handler_panics += 1;
                    diagnostics::line(&format!("mcpipe: the caught-up hook panicked: {panic}"));
                }
            }
            conn.flush_retry();
            if held && !conn.session.peer_gone && conn.session.signal.is_none() {
                // A large line waits for the answers before it to be read (bounded by
                // `HOLD_WAIT`; input is not read meanwhile, or the next large line would pile
                // up too). Any event ends the wait; the hold is looked at again at once.
                if conn.output_pending() > HOLD_BYTES && !conn.output_writable() {
                    let left = hold_until.map_or(Duration::ZERO, |until| {
                        until.saturating_duration_since(Instant::now())
                    });
                    conn.wait(Some(left))?;
                }
                continue;
            }
            // A signal noticed while a handler waited is acted on at the top, never slept on.
            if conn.session.peer_gone
                || conn.session.signal.is_some()
                || (stopped_by_backpressure && !conn.output_full())
            {
                continue;
            }
            if !stopped_by_backpressure && conn.output_lagging(LAG_BYTES) {
                // Pacing, not sleeping: input keeps coming faster than the peer reads (it shares
                // the CPUs with us), so give it a moment before taking more, or output would pile
                // up to its bound. Bounded (LAG_WAIT) and at most once per read, so a peer that
                // writes everything before reading is only slowed down, never deadlocked; and it
                // happens only while the peer has over LAG_BYTES of answers it has not read, so
                // no answer it is waiting for is held back by it.
                conn.wait_writable(LAG_WAIT)?;
                conn.flush_retry();
            }
            if saturated {
                // Too many requests in flight (or the handler holds its input): read ahead
                // (bounded), so that cancellations and responses the work in flight waits for
                // are acted on; start nothing new.
                conn.session.read_ahead_always();
                conn.session.promote_quick();
                if conn.session.has_quick() {
                    continue; // A request the handler answers at once (a ping) starts now.
                }
                if conn.input_ready() && !conn.session.read_ahead_full() {
                    if let Fill::Bytes(_) | Fill::Eof = conn.fill()? {
                        continue;
                    }
                }
                if conn.input_eof() || (conn.session.read_ahead_full() && conn.input_hung_up()) {
                    // The input ended while messages wait for a slot: they start as slots free,
                    // but once none has for the shutdown grace, the loop ends as at any end of
                    // input (work in flight cancelled, what never started answered).
                    let deadline = *eof_deadline
                        .get_or_insert_with(|| deadline::from_now(self.shutdown_grace));
                    if Instant::now() >= deadline {
                        return Ok(self.shut_down(conn, handler, Outcome::Eof, eof_deadline));
                    }
                }
            } else if !stopped_by_backpressure {
                if conn.input_eof() {
                    // `next_parsed` has also taken the last line without a newline.
                    return Ok(self.shut_down(conn, handler, Outcome::Eof, eof_deadline));
                }
                if conn.input_ready() {
                    match conn.fill()? {
                        Fill::Bytes(_) => {
                            idle_fired = false;
                            continue;
                        }
                        Fill::Eof => continue,
                        Fill::WouldBlock => {}
                    }
                }
            }

            if !conn.session.cancelled_owed.is_empty() {
                // A cancellation read ahead names a request a responder owes: the handler
                // hears of it now (`take_events`, at the top), not at the next event, which
                // may be long in coming (a relay would neither tell its silent server nor take
                // the request's line back meanwhile).
                continue;
            }

            // THE ONE PLACE THE LOOP SLEEPS. The buffer-before-poll rule: we get here only when
            // (a) no complete line waits in the line buffer or the read-ahead queue (`next_parsed`
            // said `None`) and the kernel has no unread input for us (the last read said
            // `WouldBlock`: the poller is edge-triggered, so we read until then; or, on a pipe
            // whose writer has not hung up, it was short, which empties a pipe: see
            // `Connection::fill`), or (b) the
            // output queue is at its bound, where taking more input would grow memory without
            // limit: then we sleep until the peer reads, or (c) too many requests are in flight
            // and every complete line has been read ahead (up to the read-ahead bound): then we
            // sleep until an answer frees a slot (the waker) or more input comes. Polling in any
            // other state could sleep while a request waits — the buffered-reader hang this
            // crate exists to prevent.
            // (The only other waits in this loop are the bounded pacing pause and the bounded
            // hold of a large line above.)
            let idle_deadline = match self.idle_timeout {
                Some(timeout) if !idle_fired => Some(deadline::after(conn.last_input, timeout)),
                _ => None,
            };
            let now = Instant::now();
            let timeout = [
                idle_deadline.map(|d| d.saturating_duration_since(now)),
                eof_deadline.map(|d| d.saturating_duration_since(now)),
                self.orphan_check,
            ]
            .into_iter()
            .flatten()
            .min();
            conn.wait(timeout)?;
            if let Some(deadline) = idle_deadline {
                if Instant::now() >= deadline
                    && !conn.input_ready()
                    && conn.session.signal.is_none()
                {
                    idle_fired = true;
                    conn.session.stats.idle_hooks += 1;
                    let result = catch_panic(|| handler.on_idle(&mut Context::new(conn, None)));
                    if let Err(panic) = result {
                        conn.session.stats.handler_panics += 1;
                        diagnostics::line(&format!("mcpipe: the idle hook panicked: {panic}"));
                    }
                    conn.flush();
                }
            }
        }
    }

    /// Hands one parsed line to the handler and queues whatever answers it.
    fn dispatch(&self, conn: &mut Connection, handler: &mut dyn Handler, parsed: Parsed) {
        if conn.grace_from.is_some() {
            // After the end of input, each message handled gets the whole grace.
            conn.grace_from = Some(Instant::now());
        }
        match parsed {
            Parsed::Single(message) => {
                if let Some(response) = handle_message(conn, handler, message) {
                    conn.queue_answer(response);
                }
            }
            Parsed::Invalid(response) => conn.enqueue(&Message::Response(response)),
            Parsed::Batch(items) => {
                if self.refuses_batches(conn, handler) {
                    return;
                }
                let mut responses = Vec::new();
                // Requests answered later by a responder: the batch's answers are written
                // together once theirs are in.
                let mut owed = Vec::new();
                for item in items {
                    match item {
                        Ok(message) => {
                            let id = match &message {
                                Message::Request(request) => Some(request.id.clone()),
                                _ => None,
                            };
                            match handle_message(conn, handler, message) {
                                Some(response) => responses.push(conn.answer_value(response)),
                                None => {
                                    owed.extend(id.filter(|id| conn.session.owed.contains_key(id)))
                                }
                            }
                        }
                        Err(response) => {
                            conn.session.stats.bad_messages += 1;
                            responses.push(response);
                        }
                    }
                }
                if owed.is_empty() {
                    conn.session.write_batch(responses);
                    conn.flush_if_large();
                } else {
                    conn.session.batches.open(responses, owed);
                }
            }
        }
    }

    /// Whether batches are refused here (the revision or the handler does not take them):
    /// then the batch is answered with the error that says so.
    fn refuses_batches(&self, conn: &mut Connection, handler: &dyn Handler) -> bool {
        if self.batches && handler.accepts_batches() {
            return false;
        }
        conn.session.stats.bad_messages += 1;
        conn.session
            .diagnostics
            .report(|| "a batch arrived where batches are not accepted".to_owned());
        let error = ErrorObject::new(
            ErrorCode::INVALID_REQUEST,
            "invalid request: batches are not accepted",
        );
        conn.enqueue(&Message::Response(Response::error(None, error)));
        true
    }

    /// At the end: every request that was read but never started (read ahead behind the
    /// in-flight bound, or complete in the buffer) is answered with an error, so that none is
    /// dropped without a word; one the peer cancelled while it waited stays unanswered, as it
    /// would have. Notifications and responses are let go. Nothing more is read.
    fn refuse_unstarted(&self, conn: &mut Connection, handler: &dyn Handler) {
        let refuse = |conn: &mut Connection, request: Request| {
            let cancellable = handler.is_cancellable(&request);
            conn.session.unstarted_answer(request.id, cancellable)
        };
        while let Some(parsed) = conn.session.next_unstarted() {
            match parsed {
                Parsed::Single(Message::Request(request)) => {
                    if let Some(response) = refuse(conn, request) {
                        conn.enqueue(&Message::Response(response));
                    }
                }
                Parsed::Single(_) => {}
                Parsed::Invalid(response) => conn.enqueue(&Message::Response(response)),
                Parsed::Batch(items) => {
                    if self.refuses_batches(conn, handler) {
                        continue;
                    }
                    let responses = items
                        .into_iter()
                        .filter_map(|item| match item {
                            Ok(Message::Request(request)) => refuse(conn, request),
                            Ok(_) => None,
                            Err(response) => Some(response),
                        })
                        .collect();
                    conn.session.write_batch(responses);
                    conn.flush_if_large();
                }
            }
        }
    }

    /// Ends the loop: writes what is queued (as far as the peer reads), runs the shutdown hook,
    /// writes what it sent.
    /// `grace_ends`: when the grace for work in flight ends, if it started already (the
    /// input ended while messages waited for a slot); else it starts now.
    fn shut_down(
        &self,
        conn: &mut Connection,
        handler: &mut dyn Handler,
        outcome: Outcome,
        grace_ends: Option<Instant>,
    ) -> Outcome {
        // Work in flight: at end of input its answers are awaited for the grace; then (or at
        // once, on a signal) it is cancelled, gets a moment to answer, and whatever is still
        // owed is answered with an error. Nothing owed is left unanswered, and no request
        // that was read and never started either.
        let mut outcome = outcome;
        if outcome == Outcome::Eof {
            conn.input_handled();
        }
        if matches!(outcome, Outcome::Eof | Outcome::Orphaned) {
            let deadline = grace_ends.unwrap_or_else(|| deadline::from_now(self.shutdown_grace));
            await_owed(conn, handler, deadline, true);
            if let (Outcome::Eof, Some(signo)) = (&outcome, conn.session.signal) {
                outcome = Outcome::Signal(signo);
            }
        }
        let result = catch_panic(|| handler.on_ending(&mut Context::new(conn, None)));
        if let Err(panic) = result {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!("mcpipe: the ending hook panicked: {panic}"));
        }
        // Answers the hook gave (through responders) are owed no more.
        take_events(conn, handler);
        if !conn.session.owed.is_empty() {
            conn.session.cancel_all_owed(outcome != Outcome::PeerGone);
            await_owed(conn, handler, Instant::now() + CANCEL_GRACE, false);
            conn.session
                .fail_owed("the server shut down before the request finished");
        }
        self.refuse_unstarted(conn, handler);
        if outcome == Outcome::Eof {
            // The input's writer is gone, but lines may wait unread behind the read-ahead
            // bound: they are read now (as much as that bound again at most) and answered too.
            let mut budget = self.max_read_ahead_bytes;
            while conn.input_hung_up() && !conn.input_eof() && budget > 0 {
                match conn.fill() {
                    Ok(Fill::Bytes(n)) => budget = budget.saturating_sub(n),
                    Ok(Fill::Eof) => {}
                    Ok(Fill::WouldBlock) | Err(_) => break,
                }
                self.refuse_unstarted(conn, handler);
            }
        }
        let grace = match outcome {
            Outcome::Eof => None,
            _ => Some(Instant::now() + SHUTDOWN_FLUSH_GRACE),
        };
        conn.drain_output(grace);
        let result = catch_panic(|| handler.on_shutdown(&outcome, &mut Context::new(conn, None)));
        if let Err(panic) = result {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!("mcpipe: the shutdown hook panicked: {panic}"));
        }
        diagnostics::flush();
        conn.drain_output(grace.map(|_| Instant::now() + SHUTDOWN_FLUSH_GRACE));
        outcome
    }
}

/// Takes the events other threads sent and hands the handler what they posted.
fn take_events(conn: &mut Connection, handler: &mut dyn Handler) {
    conn.take_events();
    while let Some(key) = conn.next_ready_watch() {
        let result = catch_panic(|| handler.handle_readable(key, &mut Context::new(conn, None)));
        if let Err(panic) = result {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!(
                "mcpipe: the handler panicked on a readable fd: {panic}"
            ));
        }
    }
    while let Some(id) = conn.session.cancelled_owed.pop_front() {
        let result = catch_panic(|| handler.handle_cancelled(id, &mut Context::new(conn, None)));
        if let Err(panic) = result {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!(
                "mcpipe: the handler panicked on a cancellation: {panic}"
            ));
        }
    }
    while let Some(data) = conn.session.posts.pop_front() {
        let result = catch_panic(|| handler.handle_post(data, &mut Context::new(conn, None)));
        if let Err(panic) = result {
            conn.session.stats.handler_panics += 1;
            diagnostics::line(&format!("mcpipe: the handler panicked on a post: {panic}"));
        }
    }
    diagnostics::flush();
}

/// Serves answers from other threads until none is owed, `deadline` passes, the peer is gone,
/// or (with `stop_on_signal`) a signal arrives. Input is not read (it ended, or the loop is
/// stopping).
fn await_owed(
    conn: &mut Connection,
    handler: &mut dyn Handler,
    deadline: Instant,
    stop_on_signal: bool,
) {
    loop {
        take_events(conn, handler);
        conn.flush();
        if conn.session.owed.is_empty()
            || conn.session.peer_gone
            || (stop_on_signal && conn.session.signal.is_some())
        {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        if conn.wait(Some(left.min(SHUTDOWN_TICK))).is_err() {
            return;
        }
    }
}

/// Calls the handler for one message, catching panics; returns the response to send, if any.
fn handle_message(
    conn: &mut Connection,
    handler: &mut dyn Handler,
    message: Message,
) -> Option<Response> {
    match message {
        Message::Request(request) => {
            // A result text a request cancelled while it ran left behind is not this one's.
            conn.forget_answer_text();
            let id = request.id.clone();
            let cancellable = handler.is_cancellable(&request);
            match conn.session.start_request(&request, cancellable) {
                Start::Run => {}
                Start::Dropped => return None,
                Start::Refused(response) => return Some(response),
            }
            let result =
                catch_panic(|| handler.handle_request(request, &mut Context::new(conn, Some(&id))));
            conn.session.finish_request(id, result)
        }
        Message::Notification(notification) => {
            conn.session.stats.notifications += 1;
            // A cancellation that was not read ahead (one inside a batch) is acted on here.
            if conn.session.take_cancellation(&notification) {
                return None;
            }
            let method = notification.method.clone();
            let result = catch_panic(|| {
                handler.handle_notification(notification, &mut Context::new(conn, None))
            });
            if let Err(panic) = result {
                conn.session.stats.handler_panics += 1;
                diagnostics::line(&format!(
                    "mcpipe: the handler panicked on notification {method}: {panic}"
                ));
            }
            None
        }
        Message::Response(response) => {
            conn.session.stats.responses += 1;
            // A response to a request another thread sent goes to that thread.
            let response = conn.session.route_response(response)?;
            let result =
                catch_panic(|| handler.handle_response(response, &mut Context::new(conn, None)));
            if let Err(panic) = result {
                conn.session.stats.handler_panics += 1;
                diagnostics::line(&format!(
                    "mcpipe: the handler panicked on a response: {panic}"
                ));
            }
            None
        }
    }
}
