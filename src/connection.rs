//! The loop's IO shell: the two endpoints, the poller, the signal pipe and the event channel
//! from other threads, around the sans-IO [`Session`] that holds the protocol state. Handlers
//! that wait on the loop's thread (sleep, call, run a command) wait through it.

use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};

use crate::child::{self, Waiter};
use crate::deadline;
use crate::diagnostics;
use crate::endpoint::{self, Endpoint};
use crate::error::Error;
use crate::message::{self, Message, RequestId, Response};
use crate::readiness;
pub(crate) use crate::readiness::Fill;
use crate::responder::{self, CancelToken, Event, Inbox, Outbox};
use crate::session::{Limits, Session};
use crate::sys::{NonBlockingGuard, SignalIgnored, SignalSubscription};

const INPUT: Token = Token(0);
const OUTPUT: Token = Token(1);
const SIGNALS: Token = Token(2);
/// Tokens of a child's stdout and stderr while [`crate::Context::run_command`] waits for it.
const CHILD_OUT: Token = Token(3);
const CHILD_ERR: Token = Token(4);
/// Another thread put an event on the channel ([`crate::Responder`] and friends).
const WAKER: Token = Token(5);
/// Tokens from here up are fds a handler asked the loop to watch ([`Connection::watch`]):
/// the token is this plus the handler's key.
const WATCHED: usize = 16;

/// The shortest time between two peeks at the input by [`Connection::peek`]: a handler that
/// checks for cancellation in a tight loop costs at most a couple of syscalls per millisecond.
const PEEK_INTERVAL: Duration = Duration::from_millis(1);

/// Responses are written once this much has queued up, even mid-burst.
const FLUSH_AT: usize = 64 * 1024;

/// A result text longer than this is not kept for the next request once sent: it would stay
/// resident beside the next large message's line and text, a third copy of a large message.
const KEEP_ANSWER_TEXT: usize = 1 << 20;

/// Flag changes to undo, in reverse order of making them (two endpoints may share one open
/// file description, so the first guard holds the true original).
#[derive(Debug, Default)]
struct FlagGuards(Vec<NonBlockingGuard>);

impl Drop for FlagGuards {
    fn drop(&mut self) {
        while let Some(guard) = self.0.pop() {
            drop(guard);
        }
    }
}

/// Settings the connection needs from the server's configuration.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionConfig {
    pub(crate) max_message_bytes: usize,
    pub(crate) max_output_bytes: usize,
    pub(crate) max_read_ahead_bytes: usize,
    pub(crate) handle_signals: bool,
    pub(crate) log_bad_input: bool,
}

/// The I/O state of one served connection.
#[derive(Debug)]
pub(crate) struct Connection {
    // Field order is drop order: the flag guards restore flags while the fds are still open, and
    // the signal subscription ends before its pipe closes.
    /// Read only by its `Drop`, which restores the fds' flags.
    _guards: FlagGuards,
    /// Read only by its `Drop`, which ends the subscription.
    _signals: Option<SignalSubscription>,
    signal_pipe: Option<(mio::unix::pipe::Sender, mio::unix::pipe::Receiver)>,
    /// SIGPIPE and SIGXFSZ ignored while the loop writes: a reader gone, or an output file past
    /// `RLIMIT_FSIZE`, is then a write error the loop reports, not the process killed.
    _write_signals: [SignalIgnored; 2],
    input: Endpoint,
    output: Endpoint,
    poll: Poll,
    events: Events,
    /// Whether the input may hold unread bytes (a short read of a pipe may stand in for the
    /// `EAGAIN` read; see [`readiness::Input`]).
    input_readiness: readiness::Input,
    /// Whether the output takes more bytes now.
    output_readiness: readiness::Output,
    /// When the last input bytes arrived.
    pub(crate) last_input: Instant,
    /// Once the input ended, since when a handler on the loop's thread may go on waiting for
    /// the shutdown grace: the end of input, or the start of the message handled since.
    pub(crate) grace_from: Option<Instant>,
    /// How long work may go on after the end of input (`Server::shutdown_grace`; without a
    /// server, for ever).
    pub(crate) shutdown_grace: Duration,
    /// Events from other threads.
    inbox: Inbox,
    /// A sender of events, cloned into every responder.
    outbox: Outbox,
    /// When a handler last peeked at the input (see `PEEK_INTERVAL`).
    last_peek: Option<Instant>,
    /// Keys of watched fds that became readable, not yet handed to the handler.
    ready_watches: Vec<usize>,
    /// The last wait reported the input.
    input_event: bool,
    /// How many fds a handler watches.
    watching: usize,
    /// The watched fds put in non-blocking mode (by key), put back when unwatched.
    watched_flags: Vec<(usize, NonBlockingGuard)>,
    /// The running request's answer line, its result written as JSON text by the handler
    /// ([`Connection::answer_text`]) after the line's opening; kept between requests so its
    /// memory is reused, and handed to the output queue whole when nothing waits there.
    answer_line: Vec<u8>,
    /// Where the result starts in `answer_line`, while it holds the running request's answer.
    answer_start: Option<usize>,
    /// The write error other than EPIPE that ended the output (a full disk): the loop ends as
    /// for a peer gone, and its caller gets this error instead of an outcome.
    write_error: Option<io::Error>,
    /// The protocol state: everything that is not about fds.
    pub(crate) session: Session,
}

impl Connection {
    /// Sets up both endpoints, the poller and (optionally) the signal pipe.
    pub(crate) fn new(
        input: BorrowedFd<'_>,
        output: BorrowedFd<'_>,
        config: &ConnectionConfig,
    ) -> Result<Connection, Error> {
        let poll = Poll::new().map_err(|e| Error::io("creating the poller", e))?;
        let mut guards = Vec::new();
        let input_end = Endpoint::open(input, false, poll.registry(), INPUT, &mut guards)
            .map_err(|e| Error::io("preparing the input fd", e))?;
        let output_end = Endpoint::open(output, true, poll.registry(), OUTPUT, &mut guards)
            .map_err(|e| Error::io("preparing the output fd", e))?;
        let guards = FlagGuards(guards);
        let waker = mio::Waker::new(poll.registry(), WAKER)
            .map_err(|e| Error::io("creating the waker", e))?;
        let next_request_id = Arc::new(AtomicI64::new(1));
        let (outbox, inbox) = responder::channel(waker, Arc::clone(&next_request_id));
        let write_signals = [
            SignalIgnored::sigpipe().map_err(|e| Error::io("ignoring SIGPIPE", e))?,
            SignalIgnored::sigxfsz().map_err(|e| Error::io("ignoring SIGXFSZ", e))?,
        ];
        let (signals, signal_pipe) = if config.handle_signals {
            let (tx, mut rx) =
                mio::unix::pipe::new().map_err(|e| Error::io("creating the signal pipe", e))?;
            poll.registry()
                .register(&mut rx, SIGNALS, Interest::READABLE)
                .map_err(|e| Error::io("registering the signal pipe", e))?;
            let subscription = SignalSubscription::new(tx.as_fd())
                .map_err(|e| Error::io("installing signal handlers", e))?;
            (Some(subscription), Some((tx, rx)))
        } else {
            (None, None)
        };
        let limits = Limits {
            max_message_bytes: config.max_message_bytes,
            max_output_bytes: config.max_output_bytes,
            max_read_ahead_bytes: config.max_read_ahead_bytes,
            log_bad_input: config.log_bad_input,
        };
        let input_drains = input_end.short_read_drains();
        let mut session = Session::new(&limits, next_request_id);
        session.input_eof = input_end.is_closed();
        let grace_from = session.input_eof.then(Instant::now);
        Ok(Connection {
            _guards: guards,
            _signals: signals,
            signal_pipe,
            _write_signals: write_signals,
            input: input_end,
            output: output_end,
            poll,
            events: Events::with_capacity(16),
            input_readiness: readiness::Input::new(input_drains),
            output_readiness: readiness::Output::new(),
            last_input: Instant::now(),
            grace_from,
            shutdown_grace: Duration::MAX,
            inbox,
            outbox,
            last_peek: None,
            ready_watches: Vec::new(),
            input_event: false,
            watching: 0,
            watched_flags: Vec::new(),
            answer_line: Vec::new(),
            answer_start: None,
            write_error: None,
            session,
        })
    }

    /// Whether the input reached end of file.
    pub(crate) fn input_eof(&self) -> bool {
        self.session.input_eof
    }

    /// An event said the input's writer hung up (bytes may still be unread).
    pub(crate) fn input_hung_up(&self) -> bool {
        self.input_readiness.hung_up()
    }

    /// Whether the kernel may hold input we have not read.
    pub(crate) fn input_ready(&self) -> bool {
        self.input_readiness.ready() && !self.session.input_eof
    }

    /// One read into the line buffer, never blocking.
    ///
    /// A short read of a pipe (see [`Endpoint::short_read_drains`]) may clear the readiness
    /// itself, sparing the read that would only say `EAGAIN` (see [`readiness::Input`]).
    pub(crate) fn fill(&mut self) -> Result<Fill, Error> {
        if self.session.input_eof {
            return Ok(Fill::Eof);
        }
        let space = self.session.input_space();
        let asked = space.len();
        let result = self.input.read(space);
        let (fill, late) = self
            .input_readiness
            .after_read(result, asked)
            .map_err(|e| Error::io("reading input", e))?;
        if late && !self.input_event_pending() {
            self.session.stats.late_input += 1;
        }
        match fill {
            Fill::Eof => {
                self.session.input_eof = true;
                self.grace_from = Some(Instant::now());
            }
            Fill::Bytes(n) => {
                self.session.received(n);
                self.last_input = Instant::now();
                if n >= endpoint::DEFAULT_PIPE {
                    self.input.widen_pipe();
                }
            }
            Fill::WouldBlock => {}
        }
        Ok(fill)
    }

    /// A sender of events to this loop, for a responder or a worker.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// The peer's input ended and every line of it was handled: requests to the peer from
    /// other threads, waiting or new, fail with [`Error::InputEnded`].
    pub(crate) fn input_handled(&mut self) {
        self.inbox.set_input_ended();
        self.session.end_outbound();
    }

    /// Takes every event other threads sent (see [`Session::take_event`]).
    pub(crate) fn take_events(&mut self) {
        while let Some(event) = self.inbox.try_next() {
            self.session.take_event(event);
            self.flush_if_large();
        }
        self.session.stats.stderr_lines_dropped = diagnostics::dropped();
    }

    /// Takes one event made on the loop's own thread, without the channel and its wake-up.
    pub(crate) fn take_event_here(&mut self, event: Event) {
        self.session.take_event(event);
        self.flush_if_large();
    }

    /// Answers the owed request `id` with `result`, JSON text already checked by the caller,
    /// copied as it is: what [`Event::Answer`] does, without building and writing a `Value`
    /// (a relay forwarding its upstream's answers).
    pub(crate) fn answer_raw(&mut self, id: &RequestId, result: &str, token: &CancelToken) {
        let Some(write) = self.session.settle_owed(id, Some(token)) else {
            return;
        };
        if !self.session.batches.is_empty() {
            // It may belong to a batch, whose answers are written together: as a value.
            let response = write.then(|| {
                let result = serde_json::from_str(result).unwrap_or_default();
                Response::ok(id.clone(), result)
            });
            self.session.answer_owed(id, response);
            self.flush_if_large();
            return;
        }
        if !write {
            return;
        }
        let out = self.session.queue.buffer();
        message::write_result_opening(out, id);
        out.extend_from_slice(result.as_bytes());
        out.extend_from_slice(b"}\n");
        self.flush_if_large();
    }

    /// Where the handler of the owed request `id` writes its result as JSON text (empty): the
    /// loop sends it in place of the value the handler returns (see [`Connection::queue_answer`]).
    /// The text is written after the answer line's opening, so that a large result goes to
    /// the output queue without another copy.
    pub(crate) fn answer_text(&mut self, id: &RequestId) -> &mut Vec<u8> {
        let line = &mut self.answer_line;
        line.clear();
        message::write_result_opening(line, id);
        self.answer_start = Some(line.len());
        line
    }

    /// Forgets a result text a request left (one that was cancelled while it ran).
    pub(crate) fn forget_answer_text(&mut self) {
        self.answer_start = None;
    }

    /// Queues the response of a request: a success whose handler wrote its result as text goes
    /// out with that text, without a `Value` in between; anything else as it is.
    pub(crate) fn queue_answer(&mut self, response: Response) {
        // The text is the running request's, written under its id: `response` is that
        // request's answer (the loop calls this as the handler returns).
        if let (
            Some(_),
            Response {
                id: Some(_),
                result: Ok(_),
            },
        ) = (self.answer_start.take(), &response)
        {
            let line = &mut self.answer_line;
            line.extend_from_slice(b"}\n");
            self.session.queue.push_line(line);
            self.release_large_answer_line();
            self.flush_if_large();
            return;
        }
        self.release_large_answer_line();
        self.enqueue(&Message::Response(response));
    }

    /// Lets a large answer line's memory go once it has been used.
    fn release_large_answer_line(&mut self) {
        if self.answer_line.capacity() > KEEP_ANSWER_TEXT {
            self.answer_line = Vec::new();
        }
    }

    /// The response of a request inside a batch (written by the caller into the batch's
    /// array): a result its handler wrote as text is read back into the response's value.
    pub(crate) fn answer_value(&mut self, mut response: Response) -> Response {
        if let Some(start) = self.answer_start.take() {
            if let Ok(result) = &mut response.result {
                // The text is JSON from the crate's own writer; `Null` is not reached.
                *result = serde_json::from_slice(&self.answer_line[start..]).unwrap_or_default();
            }
        }
        self.release_large_answer_line();
        response
    }

    /// A cheap, non-blocking look at the input for a handler at work: at most once per
    /// `PEEK_INTERVAL` (unless `force`), asks the poller what is ready without sleeping, takes
    /// one read of input if there is some, and reads ahead the complete lines. Also writes
    /// queued output the peer can take.
    pub(crate) fn peek(&mut self, force: bool) {
        let now = Instant::now();
        if !force
            && self
                .last_peek
                .is_some_and(|t| now.duration_since(t) < PEEK_INTERVAL)
        {
            return;
        }
        self.last_peek = Some(now);
        if self.wait(Some(Duration::ZERO)).is_err() {
            return;
        }
        self.take_input();
    }

    /// Whether a handler on the loop's thread must stop: the peer cancelled its request, the
    /// loop must end (a shutdown signal, the peer gone), or the input ended longer than the
    /// shutdown grace ago (counted from the handler's start if later), as work on other
    /// threads gets at the end of input.
    pub(crate) fn interrupted(&self) -> bool {
        self.session.interrupted() || self.grace_end().is_some_and(|end| Instant::now() >= end)
    }

    /// When a handler on the loop's thread must stop waiting, once the input ended.
    fn grace_end(&self) -> Option<Instant> {
        self.grace_from?.checked_add(self.shutdown_grace)
    }

    /// Waits until the output is under its bound again (the peer read some), for a handler
    /// that sends while the peer is not reading; input is left unread meanwhile.
    ///
    /// # Errors
    /// When the handler is interrupted (see [`Connection::interrupted`]), or polling fails.
    pub(crate) fn wait_for_room(&mut self) -> Result<(), Error> {
        loop {
            self.flush();
            if !self.output_full() {
                return Ok(());
            }
            if self.interrupted() {
                return Err(self.session.interruption_error());
            }
            let left = self
                .grace_end()
                .map(|end| end.saturating_duration_since(Instant::now()));
            self.wait(left)?;
        }
    }

    /// Sleeps until input, a signal, writable output or `deadline` (at the latest the end of
    /// the shutdown grace), then takes what arrived. Returns early, without sleeping, when the
    /// handler is already interrupted.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> Result<(), Error> {
        if self.interrupted() {
            return Ok(());
        }
        let deadline = self.grace_end().map_or(deadline, |end| end.min(deadline));
        let left = deadline.saturating_duration_since(Instant::now());
        // A plain input (a regular file) cannot be polled but is always ready.
        if !self.input_ready() || self.session.waiting_read_ahead_full() {
            self.wait(Some(left))?;
        }
        self.take_input();
        Ok(())
    }

    /// Reads what the kernel holds (one read) and reads ahead its complete lines, takes what
    /// other threads sent (answers, progress, their questions to the peer: a handler waiting on
    /// the loop's thread must not hold them back), then writes queued output.
    fn take_input(&mut self) {
        if self.input_ready() {
            if self.session.waiting_read_ahead_full() {
                self.session.stats.read_ahead_full += 1;
            } else {
                // An error here is met again, and reported, by the loop's own read.
                let _ = self.fill();
            }
        }
        self.session.read_ahead_buffered();
        self.take_events();
        self.flush();
    }

    /// Queues a message for the peer; written at the next flush.
    pub(crate) fn enqueue(&mut self, message: &Message) {
        self.session.enqueue(message);
        self.flush_if_large();
    }

    /// Writes now if a burst has queued up a lot.
    pub(crate) fn flush_if_large(&mut self) {
        if self.session.queue.pending() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes queued output until it is all written or the fd would block. Marks the peer gone
    /// on EPIPE (or any other write error: the output is unusable either way; that one is said
    /// on stderr and kept for the loop's caller, since no peer went: a full disk, a file size
    /// limit, a hung-up terminal).
    pub(crate) fn flush(&mut self) {
        let session = &mut self.session;
        if session.peer_gone {
            return;
        }
        let before = session.queue.pending();
        let output = &mut self.output;
        let mut result = self
            .output_readiness
            .flush(&mut session.queue, |bytes| output.write(bytes));
        if result.is_ok() && !self.output_readiness.writable && output.widen_pipe() {
            // Found full and widened: there is room again, which no event may report.
            self.output_readiness.writable = true;
            result = self
                .output_readiness
                .flush(&mut session.queue, |bytes| output.write(bytes));
        }
        if let Err(e) = result {
            if !matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) {
                diagnostics::line(&format!(
                    "mcpipe: the output cannot be written ({e}); ending as if the peer had gone"
                ));
                self.write_error = Some(e);
            }
            session.peer_gone = true;
        }
        session.stats.bytes_out += (before - session.queue.pending()) as u64;
    }

    /// Like [`Connection::flush`], but tries even when the last write would have blocked.
    ///
    /// While input keeps arriving the loop never polls, so it would not hear that the peer has
    /// read again, and output would pile up to its bound while the peer waits for it. Called
    /// once per pass of the loop (at most one `EAGAIN` per read), never per message.
    pub(crate) fn flush_retry(&mut self) {
        if self.session.queue.pending() > 0 {
            self.output_readiness.writable = true;
        }
        self.flush();
    }

    /// Whether more than `bytes` of output wait and the last write would have blocked.
    pub(crate) fn output_lagging(&self, bytes: usize) -> bool {
        !self.output_readiness.writable && self.session.queue.pending() > bytes
    }

    /// Whether the last write left room in the output (no `EAGAIN` since).
    pub(crate) fn output_writable(&self) -> bool {
        self.output_readiness.writable
    }

    /// Output bytes not yet written.
    pub(crate) fn output_pending(&self) -> usize {
        self.session.queue.pending()
    }

    /// Whether the output queue is at its bound (stop taking input until it drains).
    pub(crate) fn output_full(&self) -> bool {
        self.session.queue.is_full()
    }

    /// The write error other than EPIPE that ended the output, as the loop's caller gets it.
    pub(crate) fn take_write_error(&mut self) -> Option<Error> {
        let e = self.write_error.take()?;
        Some(Error::io("writing the output", e))
    }

    /// Writes queued output until it is all written, the peer is gone, a signal arrives (during
    /// an unbounded drain), or `deadline` passes.
    pub(crate) fn drain_output(&mut self, deadline: Option<Instant>) {
        loop {
            self.flush();
            if self.output_pending() == 0 || self.session.peer_gone {
                return;
            }
            let timeout = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    Some(left)
                }
                None if self.session.signal.is_some() => return,
                None => None,
            };
            if self.wait(timeout).is_err() {
                return;
            }
        }
    }

    /// Sleeps until an fd is ready, a signal arrives, or `timeout` passes, then records what
    /// happened. A plain (unpollable) input counts as always ready, so the caller never sleeps
    /// on it.
    ///
    /// After a short read stood in for `EAGAIN`, the sleep lasts `CONFIRM_AFTER` at most, and
    /// a wait without an input event ends with the input ready, so the input is read once
    /// more: should a short read ever leave bytes behind (a writer that sends packets), they
    /// are late by milliseconds, never stuck.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        let timeout = self.input_readiness.wait_limit(timeout);
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(Error::io("polling for events", e)),
        }
        self.input_readiness.after_wait(!self.events.is_empty());
        let mut drain_signals = false;
        for event in self.events.iter() {
            match event.token() {
                INPUT => {
                    self.input_event = true;
                    self.input_readiness
                        .on_event(event.is_read_closed() || event.is_error());
                }
                OUTPUT => {
                    self.output_readiness.writable = true;
                    if event.is_write_closed() || event.is_error() {
                        // Nobody reads our output any more. Anything queued cannot be delivered.
                        if self.session.queue.pending() == 0 {
                            self.session.peer_gone = true;
                        }
                    }
                }
                SIGNALS => drain_signals = true,
                Token(t) if t >= WATCHED && !self.ready_watches.contains(&(t - WATCHED)) => {
                    self.ready_watches.push(t - WATCHED);
                }
                // Events are taken by the loop on its next pass (`take_events`).
                _ => {}
            }
        }
        if drain_signals {
            self.drain_signal_pipe();
        }
        Ok(())
    }

    /// After a confirming read found input: whether the poller holds an event for it (taken
    /// now, as any wait takes events). Then the bytes came after the quiet wait, not before it,
    /// and were not late: a short read had emptied the pipe. Rare (a writer that pauses about
    /// `CONFIRM_AFTER` between writes), so the extra poll costs nothing on the usual path.
    #[cold]
    fn input_event_pending(&mut self) -> bool {
        self.input_event = false;
        let _ = self.wait(Some(Duration::ZERO));
        self.input_event
    }

    /// Has the poller report `fd` readable under `key` (edge-triggered: whoever handles it
    /// reads until `WouldBlock`). Reported once now as well, in case input is already there.
    /// The fd is put in non-blocking mode until it is unwatched: the handler reads "until
    /// `WouldBlock`", and a blocking read there would stall the loop.
    pub(crate) fn watch(&mut self, fd: BorrowedFd<'_>, key: usize) -> io::Result<()> {
        let token = key
            .checked_add(WATCHED)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "watch key too large"))?;
        let raw = fd.as_raw_fd();
        self.poll
            .registry()
            .register(&mut SourceFd(&raw), Token(token), Interest::READABLE)?;
        match NonBlockingGuard::new(fd) {
            Ok(guard) => self.watched_flags.push((key, guard)),
            Err(e) => {
                let _ = self.poll.registry().deregister(&mut SourceFd(&raw));
                return Err(e);
            }
        }
        self.watching += 1;
        if !self.ready_watches.contains(&key) {
            self.ready_watches.push(key);
        }
        Ok(())
    }

    /// Stops watching `fd` (registered with [`Connection::watch`] under `key`).
    pub(crate) fn unwatch(&mut self, fd: RawFd, key: usize) {
        if self.poll.registry().deregister(&mut SourceFd(&fd)).is_ok() {
            self.watching = self.watching.saturating_sub(1);
        }
        self.ready_watches.retain(|k| *k != key);
        // Dropping the guard puts the fd's flags back.
        self.watched_flags.retain(|(k, _)| *k != key);
    }

    /// Whether a handler watches fds of its own: then the loop looks at them once per pass even
    /// while input keeps it from sleeping (a relay's upstream answers must not wait for the
    /// client to pause).
    pub(crate) fn watches(&self) -> bool {
        self.watching > 0
    }

    /// The next watched fd that became readable.
    pub(crate) fn next_ready_watch(&mut self) -> Option<usize> {
        if self.ready_watches.is_empty() {
            None
        } else {
            Some(self.ready_watches.remove(0))
        }
    }

    /// Sleeps until the output is writable, a signal arrives, the peer is gone, or `limit`
    /// passes; input events on the way are recorded as usual but do not end the wait.
    pub(crate) fn wait_writable(&mut self, limit: Duration) -> Result<(), Error> {
        let deadline = deadline::from_now(limit);
        while !self.output_readiness.writable
            && self.session.signal.is_none()
            && !self.session.peer_gone
        {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.wait(Some(left))?;
        }
        Ok(())
    }

    fn drain_signal_pipe(&mut self) {
        let Some((_, rx)) = &mut self.signal_pipe else {
            return;
        };
        let mut buf = [0u8; 64];
        loop {
            match rx.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if self.session.signal.is_none() {
                        self.session.signal = Some(i32::from(buf[0]));
                    }
                    if n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
    }
}

/// A command run from a handler on the loop's thread waits through the loop, which keeps
/// reading input (and noticing a cancellation) meanwhile.
impl Waiter for Connection {
    fn register(&mut self, pipe: &mut mio::unix::pipe::Receiver, stderr: bool) -> io::Result<()> {
        let token = if stderr { CHILD_ERR } else { CHILD_OUT };
        self.poll
            .registry()
            .register(pipe, token, Interest::READABLE)
    }

    fn deregister(&mut self, pipe: &mut mio::unix::pipe::Receiver) {
        let _ = self.poll.registry().deregister(pipe);
    }

    fn wait_until(&mut self, deadline: Instant) -> Result<(), Error> {
        Connection::wait_until(self, deadline)
    }

    fn interruption(&self) -> Option<Error> {
        self.interrupted()
            .then(|| self.session.interruption_error())
    }
}

impl Connection {
    /// Runs a command for a handler on the loop's thread (see [`child::run`]).
    pub(crate) fn run_command(
        &mut self,
        command: std::process::Command,
        max_output: usize,
        timeout: Option<Duration>,
    ) -> Result<child::ChildOutput, Error> {
        child::run(self, command, max_output, timeout)
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
