//! The I/O core a loop and its handlers share: the two endpoints, the line buffer, the write
//! queue, the poller, and the signal pipe.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::diagnostics::{excerpt, Diagnostics};
use crate::endpoint::Endpoint;
use crate::error::Error;
use crate::handler::Stats;
use crate::line_buffer::{Line, LineBuffer};
use crate::message::{parse_line, ErrorCode, ErrorObject, Message, Parsed, Response};
use crate::sys::{NonBlockingGuard, SignalSubscription, SigpipeIgnored};
use crate::write_queue::WriteQueue;

const INPUT: Token = Token(0);
const OUTPUT: Token = Token(1);
const SIGNALS: Token = Token(2);

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
    /// Messages read ahead (by a handler waiting for something) and not yet handled, in
    /// arrival order. They are handled before any new line.
    pub(crate) deferred: VecDeque<Parsed>,
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
    next_request_id: i64,
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
            input_ready: true,
            output_writable: true,
            peer_gone: false,
            signal: None,
            last_input: Instant::now(),
            next_request_id: 1,
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
        if let Some(parsed) = self.deferred.pop_front() {
            return Some(parsed);
        }
        let line = if self.input_eof {
            self.lines.finish()
        } else {
            self.lines.next_line()
        }?;
        let parsed = match line {
            Line::Complete(bytes) => {
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
        Some(parsed)
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
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
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
