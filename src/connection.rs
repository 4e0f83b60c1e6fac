//! The I/O core a loop and its handlers share: the two endpoints, the line buffer, the write
//! queue, the poller, the signal pipe, and the event channel from other threads.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::child::{self, Waiter};
use crate::diagnostics::{self, excerpt, Diagnostics};
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::line_buffer::{Line, LineBuffer};
use crate::message::{
    parse_line, ErrorCode, ErrorObject, Message, Notification, Parsed, RequestId, Response,
};
use crate::responder::{self, answer_message, CancelToken, Event, Inbox, Outbox};
use crate::stats::Stats;
use crate::sys::{NonBlockingGuard, SignalSubscription, SigpipeIgnored};
use crate::write_queue::WriteQueue;

const INPUT: Token = Token(0);
const OUTPUT: Token = Token(1);
const SIGNALS: Token = Token(2);
/// Tokens of a child's stdout and stderr while [`crate::Context::run_command`] waits for it.
const CHILD_OUT: Token = Token(3);
const CHILD_ERR: Token = Token(4);
/// Another thread put an event on the channel ([`crate::Responder`] and friends).
const WAKER: Token = Token(5);

/// The read-ahead queue also stops at this many messages, whatever their size (small messages
/// cost more than their bytes).
const READ_AHEAD_MESSAGES: usize = 100_000;

/// The shortest time between two peeks at the input by [`Connection::peek`]: a handler that
/// checks for cancellation in a tight loop costs at most a couple of syscalls per millisecond.
const PEEK_INTERVAL: Duration = Duration::from_millis(1);

/// Responses are written once this much has queued up, even mid-burst.
const FLUSH_AT: usize = 64 * 1024;

/// What one read brought.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Some bytes.
    Bytes(usize),
    /// Nothing now; wait for readiness.
    WouldBlock,
    /// End of file (now or earlier).
    Eof,
}

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
    _sigpipe: SigpipeIgnored,
    input: Endpoint,
    output: Endpoint,
    poll: Poll,
    events: Events,
    /// Unread input, split into lines.
    pub(crate) lines: LineBuffer,
    /// Output waiting for the peer to read.
    pub(crate) queue: WriteQueue,
    /// Messages read ahead (by a handler waiting for something, or while too many requests
    /// are in flight) and not yet handled, in arrival order, each with its line's length.
    /// They are handled before any new line.
    pub(crate) deferred: VecDeque<(Parsed, usize)>,
    /// The line lengths in `deferred`, added up. Invariant: at most `max_read_ahead_bytes`
    /// plus one message.
    deferred_bytes: usize,
    max_read_ahead_bytes: usize,
    /// The kernel may hold unread input: set by a readiness event, cleared only by `WouldBlock`
    /// (the poller is edge-triggered, so it will not say so again).
    input_ready: bool,
    input_eof: bool,
    /// The kernel may take more output: set by a readiness event, cleared by `WouldBlock`.
    output_writable: bool,
    /// The peer closed our output: nothing more can be delivered.
    pub(crate) peer_gone: bool,
    /// A shutdown signal that arrived.
    pub(crate) signal: Option<i32>,
    /// When the last input bytes arrived.
    pub(crate) last_input: Instant,
    /// Ids of requests to the peer, shared with other threads' outboxes.
    next_request_id: Arc<AtomicI64>,
    /// Events from other threads.
    inbox: Inbox,
    /// A sender of events, cloned into every responder.
    outbox: Outbox,
    /// Requests whose answer a [`crate::Responder`] owes, with their cancellation and whether
    /// the peer may cancel them.
    pub(crate) owed: HashMap<RequestId, (CancelToken, bool)>,
    /// Requests other threads sent to the peer, and where their responses go.
    outbound: HashMap<RequestId, Sender<Response>>,
    /// Data posted for the handler, handed to it on the loop's thread after the current call.
    pub(crate) posts: VecDeque<Box<dyn std::any::Any + Send>>,
    /// The method of the notification that cancels a request (`notifications/cancelled` in
    /// MCP), from [`crate::Handler::cancel_method`]; `None` turns cancellation off.
    pub(crate) cancel_method: Option<String>,
    /// The request whose handler is running, if it may be cancelled.
    pub(crate) running: Option<RequestId>,
    /// The peer cancelled the running request.
    pub(crate) running_cancelled: bool,
    /// The running handler will answer its request later itself (a long-lived MCP
    /// `subscriptions/listen`): the loop sends no response when it returns.
    pub(crate) response_withheld: bool,
    /// Ids of requests waiting in `deferred` that the peer cancelled before they started.
    /// Invariant: every id here named a request in `deferred` when it was added, so the set is
    /// never larger than the queue was.
    pub(crate) cancelled_queued: HashSet<RequestId>,
    /// The id of a request we sent and whose response a handler is waiting for.
    pub(crate) awaiting: Option<RequestId>,
    /// That response, once it arrived.
    pub(crate) arrived: Option<Response>,
    /// When a handler last peeked at the input (see `PEEK_INTERVAL`).
    last_peek: Option<Instant>,
    /// The method of the request being handled, for a panic report; reused across requests.
    pub(crate) method_scratch: String,
    pub(crate) stats: Stats,
    pub(crate) diagnostics: Diagnostics,
    max_message_bytes: usize,
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
        let sigpipe = SigpipeIgnored::new().map_err(|e| Error::io("ignoring SIGPIPE", e))?;
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
        Ok(Connection {
            _guards: guards,
            _signals: signals,
            signal_pipe,
            _sigpipe: sigpipe,
            input_eof: input_end.is_closed(),
            input: input_end,
            output: output_end,
            poll,
            events: Events::with_capacity(16),
            lines: LineBuffer::new(config.max_message_bytes),
            queue: WriteQueue::new(config.max_output_bytes),
            deferred: VecDeque::new(),
            deferred_bytes: 0,
            max_read_ahead_bytes: config.max_read_ahead_bytes,
            input_ready: true,
            output_writable: true,
            peer_gone: false,
            signal: None,
            last_input: Instant::now(),
            next_request_id,
            inbox,
            outbox,
            owed: HashMap::new(),
            outbound: HashMap::new(),
            posts: VecDeque::new(),
            cancel_method: None,
            running: None,
            running_cancelled: false,
            response_withheld: false,
            cancelled_queued: HashSet::new(),
            awaiting: None,
            arrived: None,
            last_peek: None,
            method_scratch: String::new(),
            stats: Stats::default(),
            diagnostics: Diagnostics::new(config.log_bad_input),
            max_message_bytes: config.max_message_bytes,
        })
    }

    /// Whether the input reached end of file.
    pub(crate) fn input_eof(&self) -> bool {
        self.input_eof
    }

    /// Whether the kernel may hold input we have not read.
    pub(crate) fn input_ready(&self) -> bool {
        self.input_ready && !self.input_eof
    }

    /// One read into the line buffer, never blocking.
    pub(crate) fn fill(&mut self) -> Result<Fill, Error> {
        if self.input_eof {
            return Ok(Fill::Eof);
        }
        let spare = self.lines.spare();
        match self.input.read(spare) {
            Ok(0) => {
                self.input_eof = true;
                Ok(Fill::Eof)
            }
            Ok(n) => {
                self.lines.commit(n);
                self.stats.bytes_in += n as u64;
                self.last_input = Instant::now();
                Ok(Fill::Bytes(n))
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.input_ready = false;
                Ok(Fill::WouldBlock)
            }
            // A tty whose session ended, a socket reset: the input is over.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::ECONNRESET)) => {
                self.input_eof = true;
                Ok(Fill::Eof)
            }
            Err(e) => Err(Error::io("reading input", e)),
        }
    }

    /// The next message to handle: read-ahead first, then complete lines in the buffer; at end
    /// of file also the last line without a newline. `None` when more input is needed.
    pub(crate) fn next_parsed(&mut self) -> Option<Parsed> {
        if let Some((parsed, bytes)) = self.deferred.pop_front() {
            self.deferred_bytes -= bytes;
            return Some(parsed);
        }
        self.parse_next_line().map(|(parsed, _)| parsed)
    }

    /// Whether the read-ahead queue holds its limit: no more input is taken until it drains.
    pub(crate) fn read_ahead_full(&self) -> bool {
        self.deferred_bytes >= self.max_read_ahead_bytes
            || self.deferred.len() >= READ_AHEAD_MESSAGES
    }

    /// Parses every complete line already in the line buffer into the read-ahead queue (no
    /// syscall), so that cancellations among them take effect before the requests they name
    /// start. Does nothing unless cancellation is on.
    pub(crate) fn read_ahead_buffered(&mut self) {
        if self.cancel_method.is_none() && self.outbound.is_empty() {
            return;
        }
        while !self.read_ahead_full() {
            let Some((parsed, bytes)) = self.parse_next_line() else {
                break;
            };
            self.defer(parsed, bytes);
        }
    }

    /// Like [`Connection::read_ahead_buffered`], but also without a cancel method: used while
    /// too many requests are in flight, so that the line buffer never grows past one read.
    pub(crate) fn read_ahead_always(&mut self) {
        while !self.read_ahead_full() {
            let Some((parsed, bytes)) = self.parse_next_line() else {
                break;
            };
            self.defer(parsed, bytes);
        }
    }

    /// Puts a message read ahead into the queue, unless it is the news a waiting handler needs:
    /// a cancellation that names the running request or a queued one (recorded and consumed),
    /// or the response a handler is waiting for (kept aside). Everything else keeps its place in
    /// arrival order.
    fn defer(&mut self, parsed: Parsed, bytes: usize) {
        match &parsed {
            Parsed::Single(Message::Notification(n))
                if Some(n.method.as_str()) == self.cancel_method.as_deref() =>
            {
                let target = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value);
                if let Some(id) = target {
                    if self.running.as_ref() == Some(&id) {
                        self.running_cancelled = true;
                        return;
                    }
                    if self.cancel_owed(&id) {
                        return;
                    }
                    let queued = self.deferred.iter().any(
                        |(p, _)| matches!(p, Parsed::Single(Message::Request(r)) if r.id == id),
                    );
                    if queued {
                        self.cancelled_queued.insert(id);
                        return;
                    }
                }
                // Unknown, finished or malformed: the handler sees it in order (and may
                // ignore it, as MCP says to).
            }
            Parsed::Single(Message::Response(r))
                if r.id.is_some() && r.id == self.awaiting && self.arrived.is_none() =>
            {
                if let Parsed::Single(Message::Response(r)) = parsed {
                    self.arrived = Some(r);
                }
                return;
            }
            Parsed::Single(Message::Response(r))
                if r.id
                    .as_ref()
                    .is_some_and(|id| self.outbound.contains_key(id)) =>
            {
                if let Parsed::Single(Message::Response(r)) = parsed {
                    self.route_response(r);
                }
                return;
            }
            _ => {}
        }
        self.deferred_bytes += bytes;
        self.deferred.push_back((parsed, bytes));
    }

    /// Cancels a request whose answer a responder owes, if `id` names one the peer may cancel;
    /// its answer will not be sent.
    pub(crate) fn cancel_owed(&mut self, id: &RequestId) -> bool {
        match self.owed.get(id) {
            Some((token, true)) => {
                if !token.is_cancelled() {
                    token.cancel_by_peer();
                    self.stats.cancelled += 1;
                }
                true
            }
            _ => false,
        }
    }

    /// Hands a response to the thread that sent the request, if one did; `Err` gives it back.
    pub(crate) fn route_response(&mut self, response: Response) -> Option<Response> {
        let Some(reply) = response.id.as_ref().and_then(|id| self.outbound.remove(id)) else {
            return Some(response);
        };
        // The sender may have given up meanwhile; then the answer is simply late.
        let _ = reply.send(response);
        None
    }

    /// A sender of events to this loop, for a responder or a worker.
    pub(crate) fn outbox(&self) -> &Outbox {
        &self.outbox
    }

    /// Takes every event other threads sent: answers are written (unless cancelled),
    /// notifications and requests queued for the peer, posts kept for the handler.
    pub(crate) fn take_events(&mut self) {
        while let Some(event) = self.inbox.try_next() {
            match event {
                Event::Answer { id, result } => {
                    let Some((token, _)) = self.owed.remove(&id) else {
                        continue;
                    };
                    // A request the peer cancelled gets no answer; one stopped by a shutdown
                    // still does (whatever the handler made of it).
                    if !token.cancelled_by_peer() && !self.peer_gone {
                        self.enqueue(&answer_message(id, result));
                    }
                }
                Event::Notify(notification) => {
                    if !self.peer_gone {
                        self.enqueue(&Message::Notification(notification));
                    }
                }
                Event::Request { request, reply } => {
                    if self.peer_gone {
                        continue; // dropping `reply` tells the sender
                    }
                    self.outbound.insert(request.id.clone(), reply);
                    self.enqueue(&Message::Request(request));
                }
                Event::Forget { id, reason } => {
                    if self.outbound.remove(&id).is_some() {
                        if let Some(cancel) = self.cancel_method.clone() {
                            let params = serde_json::json!({
                                "requestId": id.to_value(),
                                "reason": reason,
                            });
                            self.enqueue(&Message::Notification(Notification {
                                method: cancel,
                                params: Some(params),
                            }));
                        }
                    }
                }
                Event::Post(data) => self.posts.push_back(data),
            }
        }
        self.stats.stderr_lines_dropped = diagnostics::dropped();
    }

    /// Cancels every request a responder still owes, for the reason given.
    pub(crate) fn cancel_all_owed(&mut self, shutdown: bool) {
        for (token, _) in self.owed.values() {
            if shutdown {
                token.cancel_for_shutdown();
            } else {
                token.cancel_peer_gone();
            }
        }
    }

    /// Answers every request still owed with an error (the server is ending) and forgets them.
    pub(crate) fn fail_owed(&mut self, why: &str) {
        let owed: Vec<RequestId> = self.owed.drain().map(|(id, _)| id).collect();
        for id in owed {
            let error = ErrorObject::internal(format!("internal error: {why}"));
            self.enqueue(&answer_message(id, Err(error)));
        }
    }

    /// Whether the peer has cancelled the running request, or the loop must end (a shutdown
    /// signal, the peer gone).
    pub(crate) fn interrupted(&self) -> bool {
        self.running_cancelled || self.signal.is_some() || self.peer_gone
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

    /// Sleeps until input, a signal, writable output or `deadline`, then takes what arrived.
    /// Returns early, without sleeping, when the handler is already interrupted.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> Result<(), Error> {
        if self.interrupted() {
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        // A plain input (a regular file) cannot be polled but is always ready.
        if !self.input_ready() || self.read_ahead_full() {
            self.wait(Some(left))?;
        }
        self.take_input();
        Ok(())
    }

    /// Reads what the kernel holds (one read) and reads ahead its complete lines, then writes
    /// queued output.
    fn take_input(&mut self) {
        if self.input_ready() {
            if self.read_ahead_full() {
                self.stats.read_ahead_full += 1;
            } else {
                // An error here is met again, and reported, by the loop's own read.
                let _ = self.fill();
            }
        }
        self.read_ahead_buffered();
        self.flush();
    }

    /// Parses the next complete line of the buffer (at end of file also the last line without
    /// a newline), with the line's length.
    fn parse_next_line(&mut self) -> Option<(Parsed, usize)> {
        let line = if self.input_eof {
            self.lines.finish()
        } else {
            self.lines.next_line()
        }?;
        let mut length = self.max_message_bytes;
        let parsed = match line {
            Line::Complete(bytes) => {
                length = bytes.len();
                let parsed = parse_line(bytes);
                if let Parsed::Invalid(response) = &parsed {
                    self.stats.bad_messages += 1;
                    let why = response.result.as_ref().err().map(|e| e.message.clone());
                    let shown = excerpt(bytes);
                    self.diagnostics.report(|| {
                        format!(
                            "bad input answered with an error: {}: {shown}",
                            why.unwrap_or_default()
                        )
                    });
                }
                parsed
            }
            Line::Oversize => {
                self.stats.bad_messages += 1;
                self.stats.oversize_messages += 1;
                let limit = self.max_message_bytes;
                self.diagnostics
                    .report(|| format!("a message longer than {limit} bytes was dropped"));
                Parsed::Invalid(Response::error(
                    None,
                    ErrorObject::new(
                        ErrorCode::INVALID_REQUEST,
                        format!("invalid request: the message is longer than the limit of {limit} bytes"),
                    )
                    .with_data(serde_json::json!({ "maxMessageBytes": limit })),
                ))
            }
        };
        self.lines.give_back();
        Some((parsed, length))
    }

    /// Queues a message for the peer; written at the next flush.
    pub(crate) fn enqueue(&mut self, message: &Message) {
        self.queue.push(message);
        self.flush_if_large();
    }

    /// Writes now if a burst has queued up a lot.
    pub(crate) fn flush_if_large(&mut self) {
        if self.queue.pending() >= FLUSH_AT {
            self.flush();
        }
    }

    /// A fresh id for a request we send to the peer.
    pub(crate) fn next_request_id(&mut self) -> i64 {
        self.next_request_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Writes queued output until it is all written or the fd would block. Marks the peer gone
    /// on EPIPE (or any other write error: the output is unusable either way).
    pub(crate) fn flush(&mut self) {
        if self.peer_gone || !self.output_writable || self.queue.pending() == 0 {
            return;
        }
        let before = self.queue.pending();
        let output = &self.output;
        match self.queue.write_to(|bytes| output.write(bytes)) {
            Ok(true) => {}
            Ok(false) => self.output_writable = false,
            Err(_) => self.peer_gone = true,
        }
        self.stats.bytes_out += (before - self.queue.pending()) as u64;
    }

    /// Like [`Connection::flush`], but tries even when the last write would have blocked.
    ///
    /// While input keeps arriving the loop never polls, so it would not hear that the peer has
    /// read again, and output would pile up to its bound while the peer waits for it. Called
    /// once per pass of the loop (at most one `EAGAIN` per read), never per message.
    pub(crate) fn flush_retry(&mut self) {
        if self.queue.pending() > 0 {
            self.output_writable = true;
        }
        self.flush();
    }

    /// Whether more than `bytes` of output wait and the last write would have blocked.
    pub(crate) fn output_lagging(&self, bytes: usize) -> bool {
        !self.output_writable && self.queue.pending() > bytes
    }

    /// Output bytes not yet written.
    pub(crate) fn output_pending(&self) -> usize {
        self.queue.pending()
    }

    /// Whether the output queue is at its bound (stop taking input until it drains).
    pub(crate) fn output_full(&self) -> bool {
        self.queue.is_full()
    }

    /// Sleeps until an fd is ready, a signal arrives, or `timeout` passes, then records what
    /// happened. A plain (unpollable) input counts as always ready, so the caller never sleeps
    /// on it.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(Error::io("polling for events", e)),
        }
        let mut drain_signals = false;
        for event in self.events.iter() {
            match event.token() {
                INPUT => self.input_ready = true,
                OUTPUT => {
                    self.output_writable = true;
                    if event.is_write_closed() || event.is_error() {
                        // Nobody reads our output any more. Anything queued cannot be delivered.
                        if self.queue.pending() == 0 {
                            self.peer_gone = true;
                        }
                    }
                }
                SIGNALS => drain_signals = true,
                // Events are taken by the loop on its next pass (`take_events`).
                _ => {}
            }
        }
        if drain_signals {
            self.drain_signal_pipe();
        }
        Ok(())
    }

    /// Sleeps until the output is writable, a signal arrives, the peer is gone, or `limit`
    /// passes; input events on the way are recorded as usual but do not end the wait.
    pub(crate) fn wait_writable(&mut self, limit: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + limit;
        while !self.output_writable && self.signal.is_none() && !self.peer_gone {
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
                    if self.signal.is_none() {
                        self.signal = Some(i32::from(buf[0]));
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
        self.interrupted().then(|| self.interruption_error())
    }
}

impl Connection {
    /// Why the running handler was interrupted, as an error.
    pub(crate) fn interruption_error(&self) -> Error {
        if self.running_cancelled {
            Error::Cancelled
        } else if self.peer_gone {
            Error::PeerGone
        } else {
            Error::Shutdown
        }
    }

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
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn connection(fd: &UnixStream) -> Connection {
        let config = ConnectionConfig {
            max_message_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_read_ahead_bytes: 1 << 20,
            handle_signals: false,
            log_bad_input: false,
        };
        let mut conn = Connection::new(fd.as_fd(), fd.as_fd(), &config).unwrap();
        conn.cancel_method = Some("cancel".to_owned());
        conn
    }

    fn ids(conn: &Connection) -> Vec<String> {
        conn.deferred
            .iter()
            .map(|(p, _)| match p {
                Parsed::Single(Message::Request(r)) => r.id.to_string(),
                Parsed::Single(Message::Notification(n)) => n.method.clone(),
                _ => "other".to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_cancellation_read_ahead_marks_the_queued_request_and_is_consumed() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let mut conn = connection(&ours);
        peer.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"b\"}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":2}}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":9}}\n\
              {\"jsonrpc\":\"2.0\",\"method\":\"other\"}\n",
        )
        .unwrap();
        conn.fill().unwrap();
        conn.read_ahead_buffered();
        // Order kept; the matching cancellation consumed; the unknown one kept for the handler.
        assert_eq!(ids(&conn), ["1", "2", "cancel", "other"]);
        assert!(conn.cancelled_queued.contains(&RequestId::from(2)));
        assert!(!conn.cancelled_queued.contains(&RequestId::from(9)));
    }

    #[test]
    fn a_cancellation_of_the_running_request_flags_it() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let mut conn = connection(&ours);
        conn.running = Some(RequestId::from("r"));
        peer.write_all(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":\"r\"}}\n",
        )
        .unwrap();
        assert!(!conn.interrupted());
        conn.peek(true);
        assert!(conn.interrupted());
        assert!(conn.deferred.is_empty());
    }

    #[test]
    fn without_a_cancel_method_nothing_is_read_ahead() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let mut conn = connection(&ours);
        conn.cancel_method = None;
        peer.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n")
            .unwrap();
        conn.fill().unwrap();
        conn.read_ahead_buffered();
        assert!(conn.deferred.is_empty());
        assert!(matches!(conn.next_parsed(), Some(Parsed::Single(_))));
    }

    #[test]
    fn the_awaited_response_is_kept_aside_and_others_stay_queued() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let mut conn = connection(&ours);
        conn.awaiting = Some(RequestId::from(7));
        peer.write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
              {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
        )
        .unwrap();
        conn.peek(true);
        assert_eq!(ids(&conn), ["1"]);
        assert_eq!(conn.arrived.as_ref().unwrap().id, Some(RequestId::from(7)));
    }

    #[test]
    fn read_ahead_stops_at_its_byte_limit_and_resumes_when_drained() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let config = ConnectionConfig {
            max_message_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
            max_read_ahead_bytes: 100,
            handle_signals: false,
            log_bad_input: false,
        };
        let mut conn = Connection::new(ours.as_fd(), ours.as_fd(), &config).unwrap();
        conn.cancel_method = Some("cancel".to_owned());
        let line = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":{}}\n";
        for _ in 0..10 {
            peer.write_all(line).unwrap();
        }
        conn.fill().unwrap();
        conn.read_ahead_buffered();
        // Two lines of 48 bytes stay under 100; the third reaches it, and parsing stops there.
        assert_eq!(conn.deferred.len(), 3);
        assert!(conn.read_ahead_full());
        conn.next_parsed().unwrap();
        assert!(!conn.read_ahead_full());
        conn.read_ahead_buffered();
        assert_eq!(conn.deferred.len(), 3);
    }

    #[test]
    fn a_cancellation_of_an_owed_request_cancels_its_token_and_is_consumed() {
        let (mut peer, ours) = UnixStream::pair().unwrap();
        let mut conn = connection(&ours);
        let token = CancelToken::new();
        conn.owed.insert(RequestId::from(5), (token.clone(), true));
        peer.write_all(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":5}}\n",
        )
        .unwrap();
        conn.peek(true);
        assert!(token.is_cancelled());
        assert!(conn.deferred.is_empty());
        assert_eq!(conn.stats.cancelled, 1);
    }
}
