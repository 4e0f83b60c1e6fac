//! The server side of a connection as plain data: bytes and events in, messages and answers
//! out, no file descriptor and no clock (sans-IO). The loop's IO shell
//! ([`Connection`](crate::connection::Connection)) reads input into [`Session::input_space`],
//! writes [`Session::queue`] to the output, and tells the session what happened (end of input,
//! a signal, the peer gone, events from other threads); everything the protocol decides lives
//! here: framing into messages, read-ahead (bounded in bytes), cancellation matching, the
//! answers owed by responders, requests other threads sent to the peer, and the counters.
//!
//! Because it needs no fds, it is unit-tested on plain bytes below and fuzzed directly.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use serde_json::Value;

use crate::batch_answers::PendingBatches;
use crate::cancel_spotter::CancelSpotter;
use crate::diagnostics::{excerpt, Diagnostics};
use crate::error::Error;
use crate::id_map::{GivenUp, IdMap, IdSet};
use crate::line_buffer::{Line, LineBuffer};
use crate::message::{
    parse_line_apart, Apart, ErrorCode, ErrorObject, Message, Notification, ParamsApart, Parsed,
    RequestId, Response,
};
use crate::relayed::parse_relayed;
use crate::responder::{answer_message, CancelToken, Event};
use crate::stats::Stats;
use crate::write_queue::WriteQueue;

/// The read-ahead queue also stops at this many messages, whatever their size (small messages
/// cost more than their bytes).
const READ_AHEAD_MESSAGES: usize = 100_000;

/// Limits a session works within, from the server's configuration.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub(crate) max_message_bytes: usize,
    pub(crate) max_output_bytes: usize,
    pub(crate) max_read_ahead_bytes: usize,
    pub(crate) log_bad_input: bool,
}

/// What happened to a request when the handler was asked to start it.
#[derive(Debug, PartialEq)]
pub(crate) enum Start {
    /// Run the handler.
    Run,
    /// The peer cancelled it before it started: never run, never answered.
    Dropped,
    /// Refused without running: its id is already taken by a request whose answer is still
    /// owed (two answers with one id would be ambiguous, and one would be lost).
    Refused(Response),
}

/// The protocol state of one served connection.
#[derive(Debug)]
pub(crate) struct Session {
    /// Unread input, split into lines.
    pub(crate) lines: LineBuffer,
    /// Output waiting for the peer to read.
    pub(crate) queue: WriteQueue,
    /// The input ended: the last line without a newline counts too.
    pub(crate) input_eof: bool,
    /// Messages read ahead (by a handler waiting for something, or while too many requests
    /// are in flight) and not yet handled, in arrival order, each with its line's length.
    /// They are handled before any new line.
    pub(crate) deferred: VecDeque<ReadAhead>,
    /// The line lengths in `deferred`, added up. Invariant: below `max_read_ahead_bytes` plus
    /// one message.
    deferred_bytes: usize,
    max_read_ahead_bytes: usize,
    /// The peer closed our output: nothing more can be delivered.
    pub(crate) peer_gone: bool,
    /// A shutdown signal that arrived.
    pub(crate) signal: Option<i32>,
    /// Ids of requests to the peer, shared with other threads' outboxes.
    next_request_id: Arc<AtomicI64>,
    /// Requests whose answer a [`crate::Responder`] owes, with their cancellation and whether
    /// the peer may cancel them.
    pub(crate) owed: IdMap<(CancelToken, bool)>,
    /// Owed requests the peer cancelled and then gave their id to a new request (which MCP
    /// 2026-07-28 allows: a cancelled request awaits no answer): their work may still run,
    /// and counts in flight until its (unwritten) answer comes.
    superseded: Vec<CancelToken>,
    /// The owed answers that wait on something else rather than on work (a `tasks/result`
    /// waiting for its task): they do not count toward the in-flight bound, or enough of them
    /// would stop the loop from starting the requests they wait for. A subset of `owed`'s keys.
    pub(crate) waiting: IdSet,
    /// Requests other threads sent to the peer, and where their responses go.
    outbound: IdMap<Sender<Response>>,
    /// Requests to the peer whose sender gave up (its deadline, or its request cancelled): a
    /// late answer to one is dropped, as `Responder::call` promises, instead of reaching
    /// `Handler::handle_response`; `Context::call` notes its own here too.
    pub(crate) given_up: GivenUp,
    /// The peer's input ended and every line of it was handled: requests to the peer are no
    /// longer sent (their senders learn it as the reply channel closes).
    outbound_ended: bool,
    /// Data posted for the handler, handed to it on the loop's thread after the current call.
    pub(crate) posts: VecDeque<Box<dyn std::any::Any + Send>>,
    /// Requests answered later whose cancellation by the peer the handler has not been told
    /// of yet ([`crate::Handler::handle_cancelled`]).
    pub(crate) cancelled_owed: VecDeque<RequestId>,
    /// The method of the notification that cancels a request (`notifications/cancelled` in
    /// MCP), from [`crate::Handler::cancel_method`]; `None` turns cancellation off.
    cancel_method: Option<String>,
    /// The request whose handler is running, if it may be cancelled.
    pub(crate) running: Option<RequestId>,
    /// The peer cancelled the running request.
    pub(crate) running_cancelled: bool,
    /// The running handler will answer its request later itself (a responder, or a long-lived
    /// MCP `subscriptions/listen`): the loop sends no response when it returns.
    pub(crate) response_withheld: bool,
    /// Ids of requests waiting in `deferred` that the peer cancelled before they started.
    /// Invariant: every id here named a request in `deferred` when it was added, so the set is
    /// never larger than the queue was.
    pub(crate) cancelled_queued: IdSet,
    /// The id of a request we sent and whose response a handler is waiting for.
    pub(crate) awaiting: Option<RequestId>,
    /// That response, once it arrived.
    pub(crate) arrived: Option<Response>,
    /// The method of the request being handled, for a panic report; reused across requests.
    method_scratch: String,
    pub(crate) stats: Stats,
    pub(crate) diagnostics: Diagnostics,
    max_message_bytes: usize,
    /// For a relay that forwards what it does not change: keep each single message's line as
    /// it came ([`Session::take_raw_line`]), and build params only for the methods this
    /// names (and the cancel method): see [`crate::relayed`].
    pub(crate) relay_lines: Option<fn(&str) -> bool>,
    /// Members of one method's params the handler takes apart ([`crate::Handler`]'s
    /// `params_apart`: the MCP layer's `tools/call`; never the cancel method's, see
    /// [`Session::set_params_apart`]).
    params_apart: Option<ParamsApart>,
    /// What was kept of the line of the message handed out last.
    kept: Option<Kept>,
    /// Whether the input not yet parsed may hold a cancellation (then it is read ahead).
    spotter: CancelSpotter,
    /// Batches waiting for answers owed by responders, written whole when complete.
    pub(crate) batches: PendingBatches,
    /// The methods the handler answers at once on the loop's thread
    /// ([`crate::Handler::methods_answered_at_once`]).
    pub(crate) quick_methods: &'static [&'static str],
    /// Requests of those methods taken out of the read-ahead queue at the in-flight bound
    /// ([`Session::promote_quick`]): handed out first.
    quick: VecDeque<ReadAhead>,
    /// One of those methods' requests was read ahead since the queue was last looked through.
    quick_deferred: bool,
}

/// A message read ahead: the parsed line, its length, and what is kept of the line.
#[derive(Debug)]
pub(crate) struct ReadAhead {
    pub(crate) parsed: Parsed,
    bytes: usize,
    kept: Option<Kept>,
}

/// What is kept of a message's line for the handler.
#[derive(Debug)]
enum Kept {
    /// The whole line, for a relay ([`Session::take_raw_line`]).
    Line(Vec<u8>),
    /// The members of its params read apart ([`Session::take_params_apart`]).
    Apart(Box<Apart>),
}

impl Session {
    /// A session with nothing read or written yet; `next_request_id` is shared with the
    /// outboxes of other threads.
    pub(crate) fn new(limits: &Limits, next_request_id: Arc<AtomicI64>) -> Session {
        Session {
            lines: LineBuffer::new(limits.max_message_bytes),
            queue: WriteQueue::new(limits.max_output_bytes),
            input_eof: false,
            deferred: VecDeque::new(),
            deferred_bytes: 0,
            max_read_ahead_bytes: limits.max_read_ahead_bytes,
            peer_gone: false,
            signal: None,
            next_request_id,
            owed: IdMap::default(),
            superseded: Vec::new(),
            waiting: IdSet::default(),
            outbound: IdMap::default(),
            given_up: GivenUp::default(),
            outbound_ended: false,
            posts: VecDeque::new(),
            cancelled_owed: VecDeque::new(),
            cancel_method: None,
            running: None,
            running_cancelled: false,
            response_withheld: false,
            cancelled_queued: IdSet::default(),
            awaiting: None,
            arrived: None,
            method_scratch: String::new(),
            stats: Stats::default(),
            diagnostics: Diagnostics::new(limits.log_bad_input),
            max_message_bytes: limits.max_message_bytes,
            relay_lines: None,
            params_apart: None,
            kept: None,
            spotter: CancelSpotter::default(),
            batches: PendingBatches::default(),
            quick_methods: &[],
            quick: VecDeque::new(),
            quick_deferred: false,
        }
    }

    /// Room to read input into; say how much was read with [`Session::received`].
    pub(crate) fn input_space(&mut self) -> &mut [u8] {
        self.lines.spare()
    }

    /// `n` bytes were read into [`Session::input_space`].
    pub(crate) fn received(&mut self, n: usize) {
        self.lines.commit(n);
        self.stats.bytes_in += n as u64;
        if self.cancel_method.is_some() {
            let recent = self.lines.recent(n + self.spotter.overlap());
            self.spotter.look(recent, self.stats.bytes_in);
        }
    }

    /// The method of the notification that cancels a request (`None`: cancellation off).
    pub(crate) fn cancel_method(&self) -> Option<&str> {
        self.cancel_method.as_deref()
    }

    /// Has the members `apart` names read apart from its method's params, unless that is the
    /// cancel method, whose params the loop reads whole (set the cancel method first).
    pub(crate) fn set_params_apart(&mut self, apart: Option<ParamsApart>) {
        let cancel = self.cancel_method.as_deref();
        self.params_apart = apart.filter(|a| Some(a.method) != cancel);
    }

    /// Sets the cancel method, and the spotter of it in what is read from now on (what is
    /// buffered already counts as a possible cancellation).
    pub(crate) fn set_cancel_method(&mut self, method: Option<String>) {
        self.spotter = CancelSpotter::new(method.as_deref(), self.stats.bytes_in);
        self.cancel_method = method;
    }

    /// Whether the input not yet parsed may hold a cancellation (see [`CancelSpotter`]).
    fn cancel_may_be_buffered(&self) -> bool {
        self.cancel_method.is_some()
            && self
                .spotter
                .may_hold(self.stats.bytes_in - self.lines.pending() as u64)
    }

    /// Queues a message for the peer (the shell writes the queue).
    pub(crate) fn enqueue(&mut self, message: &Message) {
        self.queue.push(message);
    }

    /// Takes one event from another thread: an answer is queued (unless the peer cancelled its
    /// request), a notification or request queued for the peer, a post kept for the handler.
    pub(crate) fn take_event(&mut self, event: Event) {
        match event {
            Event::Answer { id, result, token } => {
                let Some(write) = self.settle_owed(&id, token.as_ref()) else {
                    return;
                };
                if self.batches.is_empty() {
                    if write {
                        self.enqueue(&answer_message(id, result));
                    }
                } else {
                    let response = write.then(|| Response {
                        id: Some(id.clone()),
                        result,
                    });
                    self.answer_owed(&id, response);
                }
            }
            Event::Notify(notification) => {
                if !self.peer_gone {
                    self.enqueue(&Message::Notification(notification));
                }
            }
            Event::Send(message) => {
                if !self.peer_gone {
                    self.enqueue(&message);
                }
            }
            Event::Request { request, reply } => {
                if self.peer_gone || self.outbound_ended {
                    return; // dropping `reply` tells the sender
                }
                self.outbound.insert(request.id.clone(), reply);
                self.enqueue(&Message::Request(request));
            }
            Event::Forget { id, reason } => {
                if self.outbound.remove(&id).is_some() {
                    self.given_up.note(id.clone());
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

    /// Called before a request's handler runs: drops a request the peer cancelled while it
    /// was queued, and otherwise marks it running (`cancellable`: the peer may cancel it).
    pub(crate) fn start_request(
        &mut self,
        request: &crate::message::Request,
        cancellable: bool,
    ) -> Start {
        let cancellable = cancellable && self.cancel_method.is_some();
        // (Each emptiness test spares hashing the id on the common path: nothing cancelled
        // while queued, nothing answered later, nothing waiting.)
        if self.cancelled_while_queued(&request.id, cancellable) {
            return Start::Dropped;
        }
        if !self.owed.is_empty() && !self.release_cancelled_id(&request.id) {
            self.stats.bad_messages += 1;
            let error = ErrorObject::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "invalid request: the id {} is already used by a request in flight",
                    request.id
                ),
            );
            return Start::Refused(Response::error(Some(request.id.clone()), error));
        }
        self.stats.requests += 1;
        // Kept for a panic report only, in a reused buffer: no allocation per request.
        self.method_scratch.clear();
        self.method_scratch.push_str(&request.method);
        self.running = cancellable.then(|| request.id.clone());
        self.running_cancelled = false;
        self.response_withheld = false;
        Start::Run
    }

    /// Called when the request's handler returned (`Err`: it panicked, with the panic's
    /// message): the response to send, if any. None when the peer cancelled it meanwhile, or
    /// when the handler answers later itself.
    pub(crate) fn finish_request(
        &mut self,
        id: RequestId,
        result: Result<Result<Value, ErrorObject>, String>,
    ) -> Option<Response> {
        self.running = None;
        let withheld = std::mem::take(&mut self.response_withheld);
        if std::mem::take(&mut self.running_cancelled) {
            // The peer cancelled it while it ran: it gets no response, and a responder that
            // holds it sees the cancellation.
            self.stats.cancelled += 1;
            if let Some((token, _)) = self.owed.get(&id) {
                token.cancel_by_peer();
            }
            if let Err(panic) = result {
                self.report_panic(&id, &panic);
            }
            return None;
        }
        if withheld && result.is_ok() {
            // The handler answers later: through a responder, or `Context::send`.
            return None;
        }
        // A panic answers here, even when a responder had been taken: its answer (the
        // responder's drop during the unwinding, or a thread's it was handed to) is no longer
        // owed. That thread is told to stop, and its late answer is dropped, not written as
        // the answer of a later request that takes the id.
        // (Asked only when something is owed: hashing the id costs on every answer.)
        if !self.owed.is_empty() {
            if let Some((token, _)) = self.owed.remove(&id) {
                token.cancel_for_panic();
                self.superseded.push(token);
            }
        }
        if !self.waiting.is_empty() {
            self.waiting.remove(&id);
        }
        match result {
            Ok(result) => Some(Response {
                id: Some(id),
                result,
            }),
            Err(panic) => {
                self.report_panic(&id, &panic);
                let method = &self.method_scratch;
                Some(Response::error(
                    Some(id),
                    ErrorObject::internal(format!(
                        "internal error: the handler panicked while handling {method}"
                    )),
                ))
            }
        }
    }

    fn report_panic(&mut self, id: &RequestId, panic: &str) {
        self.stats.handler_panics += 1;
        let method = &self.method_scratch;
        crate::diagnostics::line(&format!(
            "mcpipe: the handler panicked on {method} (id {id}): {panic}"
        ));
    }

    /// The next message to handle: read-ahead first, then complete lines in the buffer; at end
    /// of file also the last line without a newline. `None` when more input is needed.
    pub(crate) fn next_parsed(&mut self) -> Option<Parsed> {
        let next = self.take_next()?;
        self.kept = next.kept;
        Some(next.parsed)
    }

    /// The next message as [`Session::next_parsed`] hands it out, for the end (the loop's
    /// refusal of what never started). Not a call of `next_parsed`: the loop's call of it, on
    /// every message's path, stays its only one and is inlined (a second caller cost the demo
    /// 14 instructions per request).
    #[cold]
    #[inline(never)]
    pub(crate) fn next_unstarted(&mut self) -> Option<Parsed> {
        self.take_next().map(|next| next.parsed)
    }

    /// Whether a request the handler answers at once (a `ping`) was taken out of its turn
    /// ([`Session::promote_quick`]): it is the next message handed out.
    pub(crate) fn has_quick(&self) -> bool {
        !self.quick.is_empty()
    }

    /// At the in-flight bound: takes the requests the handler answers at once (a `ping`) out
    /// of the read-ahead queue, to be handed out first (JSON-RPC lets answers come in any
    /// order). Looks through the queue only when such a request was read ahead since the
    /// last look.
    pub(crate) fn promote_quick(&mut self) {
        if !std::mem::take(&mut self.quick_deferred) {
            return;
        }
        let quick = |d: &ReadAhead, methods: &[&str]| matches!(&d.parsed, Parsed::Single(Message::Request(r)) if methods.contains(&r.method.as_str()));
        let mut at = 0;
        while at < self.deferred.len() {
            if quick(&self.deferred[at], self.quick_methods) {
                if let Some(next) = self.deferred.remove(at) {
                    self.quick.push_back(next);
                }
            } else {
                at += 1;
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn take_quick(&mut self) -> Option<ReadAhead> {
        let next = self.quick.pop_front()?;
        self.deferred_bytes -= next.bytes;
        Some(next)
    }

    #[inline(always)]
    fn take_next(&mut self) -> Option<ReadAhead> {
        if !self.quick.is_empty() {
            return self.take_quick();
        }
        match self.deferred.pop_front() {
            Some(next) => {
                self.deferred_bytes -= next.bytes;
                Some(next)
            }
            None => self.parse_next_line(),
        }
    }

    /// The line of the single message [`Session::next_parsed`] handed out last, as it came
    /// (without its newline), if lines are kept.
    pub(crate) fn take_raw_line(&mut self) -> Option<Vec<u8>> {
        self.take_kept(|kept| match kept {
            Kept::Line(line) => Ok(line),
            other => Err(other),
        })
    }

    /// The members read apart from the params of the single message [`Session::next_parsed`]
    /// handed out last, when they were.
    pub(crate) fn take_params_apart(&mut self) -> Option<Box<Apart>> {
        self.take_kept(|kept| match kept {
            Kept::Apart(apart) => Ok(apart),
            other => Err(other),
        })
    }

    /// What was kept of the last message's line, when `pick` takes it (`Err`: it is put back).
    fn take_kept<T>(&mut self, pick: impl FnOnce(Kept) -> Result<T, Kept>) -> Option<T> {
        match pick(self.kept.take()?) {
            Ok(taken) => Some(taken),
            Err(kept) => {
                self.kept = Some(kept);
                None
            }
        }
    }

    /// Whether the next message is a line of more than `bytes` waiting, complete, in the line
    /// buffer (not one read ahead): the loop holds such a line while a large answer is being
    /// written.
    pub(crate) fn large_line_next(&mut self, bytes: usize) -> bool {
        self.deferred.is_empty()
            && self.quick.is_empty()
            && self.lines.next_complete_len().is_some_and(|n| n > bytes)
    }

    /// Whether the read-ahead queue holds its limit: no more input is taken until it drains.
    pub(crate) fn read_ahead_full(&self) -> bool {
        self.deferred_bytes >= self.max_read_ahead_bytes
            || self.deferred.len() >= READ_AHEAD_MESSAGES
    }

    /// Whether a handler waiting on the loop's thread must take no more input: the read-ahead
    /// queue is at its limit, or the lines not parsed yet (kept as text unless a cancellation
    /// or a response may be among them) hold as much.
    pub(crate) fn waiting_read_ahead_full(&self) -> bool {
        self.read_ahead_full()
            || self.deferred_bytes + self.lines.pending() >= self.max_read_ahead_bytes
    }

    /// Parses every complete line already in the line buffer into the read-ahead queue (no
    /// syscall), so that cancellations among them take effect before the requests they name
    /// start, and responses a handler waits for are seen. Does nothing unless a cancellation
    /// may be among them (cancellation on, and [`CancelSpotter`] says so) or we wait for a
    /// response.
    pub(crate) fn read_ahead_buffered(&mut self) {
        if self.outbound.is_empty() && self.awaiting.is_none() && !self.cancel_may_be_buffered() {
            return;
        }
        while !self.read_ahead_full() {
            let Some(next) = self.parse_next_line() else {
                break;
            };
            self.defer(next);
        }
    }

    /// Like [`Session::read_ahead_buffered`], but also without a cancel method: used while
    /// too many requests are in flight, so that the line buffer never grows past one read.
    pub(crate) fn read_ahead_always(&mut self) {
        while !self.read_ahead_full() {
            let Some(next) = self.parse_next_line() else {
                break;
            };
            self.defer(next);
        }
    }

    /// Puts a message read ahead into the queue, unless it is the news a waiting handler needs:
    /// a cancellation that names the running request or a queued one (recorded and consumed),
    /// or the response a handler is waiting for (kept aside). Everything else keeps its place in
    /// arrival order.
    fn defer(&mut self, next: ReadAhead) {
        match &next.parsed {
            Parsed::Single(Message::Notification(n)) if self.take_cancellation(n) => return,
            Parsed::Single(Message::Request(r))
                if self.quick_methods.contains(&r.method.as_str()) =>
            {
                self.quick_deferred = true;
            }
            Parsed::Batch(items) => {
                // Cancellations inside a batch are acted on now, as single ones are (the
                // running request, one owed, one queued before the batch); the batch keeps
                // them, and its handling finds them done.
                for item in items {
                    if let Ok(Message::Notification(n)) = item {
                        self.take_cancellation(n);
                    }
                }
            }
            Parsed::Single(Message::Response(r))
                if r.id.is_some() && r.id == self.awaiting && self.arrived.is_none() =>
            {
                if let Parsed::Single(Message::Response(r)) = next.parsed {
                    self.arrived = Some(r);
                }
                return;
            }
            Parsed::Single(Message::Response(r))
                if r.id
                    .as_ref()
                    .is_some_and(|id| self.outbound.contains_key(id)) =>
            {
                if let Parsed::Single(Message::Response(r)) = next.parsed {
                    self.route_response(r);
                }
                return;
            }
            _ => {}
        }
        self.deferred_bytes += next.bytes;
        self.deferred.push_back(next);
    }

    /// No answer can come from the peer any more: lets go of every request to it (each sender
    /// sees its reply channel close), and of every later one.
    pub(crate) fn end_outbound(&mut self) {
        self.outbound_ended = true;
        self.outbound.clear();
    }

    /// Hands a response to the thread that sent the request, if one did; `Err` gives it back.
    /// A late answer to a request whose sender gave up is dropped (`None` too).
    pub(crate) fn route_response(&mut self, response: Response) -> Option<Response> {
        if self.outbound.is_empty() && self.given_up.is_empty() {
            return Some(response);
        }
        let Some(id) = response.id.as_ref() else {
            // An error about a line the peer could not read: the handler's.
            return Some(response);
        };
        if let Some(reply) = self.outbound.remove(id) {
            // The sender may have given up meanwhile; then the answer is simply late.
            let _ = reply.send(response);
            return None;
        }
        if self.given_up.take(id) {
            return None;
        }
        Some(response)
    }

    /// Whether the peer cancelled this request while it waited to start (`cancellable`: it may
    /// be cancelled, and cancellation is on): then it is dropped, never answered.
    #[inline]
    fn cancelled_while_queued(&mut self, id: &RequestId, cancellable: bool) -> bool {
        let dropped =
            !self.cancelled_queued.is_empty() && self.cancelled_queued.remove(id) && cancellable;
        if dropped {
            self.stats.cancelled += 1;
        }
        dropped
    }

    /// At the end, the answer for a request that was read and never started: an error, but
    /// none for one the peer cancelled while it waited (as [`Session::start_request`] drops
    /// it).
    pub(crate) fn unstarted_answer(
        &mut self,
        id: RequestId,
        cancellable: bool,
    ) -> Option<Response> {
        let cancellable = cancellable && self.cancel_method.is_some();
        if self.cancelled_while_queued(&id, cancellable) {
            return None;
        }
        let error = ErrorObject::internal(
            "internal error: the server shut down before the request started",
        );
        Some(Response::error(Some(id), error))
    }

    /// Whether the peer has cancelled the running request, or the loop must end (a shutdown
    /// signal, the peer gone).
    pub(crate) fn interrupted(&self) -> bool {
        self.running_cancelled || self.signal.is_some() || self.peer_gone
    }

    /// Parses the next complete line of the buffer (at end of file also the last line without
    /// a newline), with the line's length. Always inlined: on the hot path (`take_next`) a call
    /// costs 20 instructions a request, and code grown elsewhere had tipped it out (stop 36).
    #[inline(always)]
    fn parse_next_line(&mut self) -> Option<ReadAhead> {
        let line = if self.input_eof {
            self.lines.finish()
        } else {
            self.lines.next_line()
        }?;
        let mut length = self.max_message_bytes;
        let mut kept = None;
        let parsed = match line {
            Line::Complete(bytes) => {
                length = bytes.len();
                let parsed = match self.relay_lines {
                    None => {
                        let (parsed, apart) = parse_line_apart(bytes, self.params_apart);
                        kept = apart.map(Kept::Apart);
                        parsed
                    }
                    Some(needs_params) => parse_relayed(bytes, |method| {
                        needs_params(method) || Some(method) == self.cancel_method.as_deref()
                    }),
                };
                if self.relay_lines.is_some() && matches!(parsed, Parsed::Single(_)) {
                    // Room for the newline the relay adds.
                    let mut line = Vec::with_capacity(bytes.len() + 1);
                    line.extend_from_slice(bytes);
                    kept = Some(Kept::Line(line));
                }
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
        Some(ReadAhead {
            parsed,
            bytes: length,
            kept,
        })
    }

    /// A fresh id for a request we send to the peer.
    pub(crate) fn next_request_id(&mut self) -> i64 {
        self.next_request_id.fetch_add(1, Ordering::Relaxed)
    }

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
}

mod owed;

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
