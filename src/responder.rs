//! Answering a request later, from any thread: the [`Responder`] a handler takes out of its
//! [`Context`](crate::Context), the [`CancelToken`] the holder watches, and the outbox through
//! which other threads hand messages back to the loop.
//!
//! Only the loop writes stdout. A thread holding a responder never touches it: it puts an
//! [`Event`] on a channel and wakes the loop (a `mio::Waker`), which writes the answer, routes
//! the notification, or sends the request to the peer and routes its response back.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::deadline;
use crate::error::Error;
use crate::message::{ErrorObject, Message, Notification, Request, RequestId, Response};

/// Notifications from other threads that may wait for the loop before a sender is slowed down
/// (back-pressure: a tool that floods progress cannot grow the loop's memory without bound).
const MAX_QUEUED_NOTIFICATIONS: usize = 4096;

/// What another thread hands to the loop.
pub(crate) enum Event {
    /// The answer of a request the loop handed to a [`Responder`]. `token` is the request's
    /// own: after the peer cancelled it, a new request may take its id, and the late answer
    /// of the old one must not settle the new one.
    Answer {
        id: RequestId,
        result: Result<Value, ErrorObject>,
        token: Option<CancelToken>,
    },
    /// A notification for the peer.
    Notify(Notification),
    /// Any message for the peer, as it is (a relay's request or response with its own id).
    Send(Message),
    /// A request for the peer; its response goes to `reply`.
    Request {
        request: Request,
        reply: Sender<Response>,
    },
    /// The sender of a request stopped waiting for its response: the loop forgets it and tells
    /// the peer (with the cancel method, when there is one).
    Forget { id: RequestId, reason: String },
    /// Data for the handler, delivered on the loop's thread
    /// ([`Handler::handle_post`](crate::Handler::handle_post)).
    Post(Box<dyn Any + Send>),
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Answer { id, .. } => write!(f, "Answer({id})"),
            Event::Notify(n) => write!(f, "Notify({})", n.method),
            Event::Send(_) => write!(f, "Send"),
            Event::Request { request, .. } => write!(f, "Request({})", request.method),
            Event::Forget { id, .. } => write!(f, "Forget({id})"),
            Event::Post(_) => write!(f, "Post"),
        }
    }
}

/// The sending side of the loop's event channel; cheap to clone, usable from any thread.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: Sender<Event>,
    waker: Arc<mio::Waker>,
    /// Notifications sent and not yet taken by the loop.
    queued: Arc<AtomicUsize>,
    /// Ids for requests to the peer, shared with the loop so that no two collide.
    next_id: Arc<AtomicI64>,
    /// Set when the loop ended: nothing sent is delivered any more.
    closed: Arc<AtomicBool>,
    /// Set when the peer's input ended and every line of it was handled: no answer to a
    /// request to the peer can come any more.
    input_ended: Arc<AtomicBool>,
    /// Events sent and not yet taken by the loop.
    unread: Arc<AtomicUsize>,
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("queued", &self.queued.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The loop's receiving side.
#[derive(Debug)]
pub(crate) struct Inbox {
    rx: Receiver<Event>,
    queued: Arc<AtomicUsize>,
    closed: Arc<AtomicBool>,
    input_ended: Arc<AtomicBool>,
    unread: Arc<AtomicUsize>,
}

/// A channel from other threads to the loop, waking `waker`'s poll on every send.
pub(crate) fn channel(waker: mio::Waker, next_id: Arc<AtomicI64>) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicBool::new(false));
    let input_ended = Arc::new(AtomicBool::new(false));
    let unread = Arc::new(AtomicUsize::new(0));
    let outbox = Outbox {
        tx,
        waker: Arc::new(waker),
        queued: Arc::clone(&queued),
        next_id,
        closed: Arc::clone(&closed),
        input_ended: Arc::clone(&input_ended),
        unread: Arc::clone(&unread),
    };
    let inbox = Inbox {
        rx,
        queued,
        closed,
        input_ended,
        unread,
    };
    (outbox, inbox)
}

impl Inbox {
    /// The next event, without waiting. The loop asks once a message and the channel is
    /// almost always empty, so a counter answers that first: one load, where the channel's
    /// own `try_recv` costs some 25 instructions.
    #[inline]
    pub(crate) fn try_next(&self) -> Option<Event> {
        if self.unread.load(Ordering::Acquire) == 0 {
            // An event sent but not yet counted is not lost: its sender wakes the poll next.
            return None;
        }
        self.next_unread()
    }

    #[inline(never)]
    fn next_unread(&self) -> Option<Event> {
        let event = self.rx.try_recv().ok()?;
        self.unread.fetch_sub(1, Ordering::Relaxed);
        if matches!(event, Event::Notify(_) | Event::Send(_)) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
        }
        Some(event)
    }

    /// The peer's input has ended and been handled: requests to the peer, waiting or new,
    /// fail with [`Error::InputEnded`].
    pub(crate) fn set_input_ended(&self) {
        self.input_ended.store(true, Ordering::Release);
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Release);
    }
}

impl Outbox {
    fn send(&self, event: Event) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::PeerGone);
        }
        self.tx.send(event).map_err(|_| Error::PeerGone)?;
        // Counted after it is in the channel, before the wake (see `Inbox::try_next`).
        self.unread.fetch_add(1, Ordering::Release);
        // A failed wake leaves the event for the loop's next pass; nothing is lost.
        let _ = self.waker.wake();
        Ok(())
    }

    /// Sends a notification to the peer, waiting (briefly, repeatedly) while too many are
    /// queued for the loop.
    pub(crate) fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        while self.queued.load(Ordering::Relaxed) >= MAX_QUEUED_NOTIFICATIONS {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::PeerGone);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.send(Event::Notify(Notification {
            method: method.to_owned(),
            params,
        }))
    }

    /// Sends any message to the peer as it is, waiting (briefly, repeatedly) while too many
    /// are queued for the loop.
    pub(crate) fn send_message(&self, message: Message) -> Result<(), Error> {
        while self.queued.load(Ordering::Relaxed) >= MAX_QUEUED_NOTIFICATIONS {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::PeerGone);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.send(Event::Send(message))
    }

    /// Hands `data` to the handler on the loop's thread.
    pub(crate) fn post(&self, data: Box<dyn Any + Send>) -> Result<(), Error> {
        self.send(Event::Post(data))
    }

    /// Sends a request to the peer through the loop and waits for its response until
    /// `deadline`, or until `cancel` fires. On a timeout or a cancellation the loop forgets the
    /// request and tells the peer.
    pub(crate) fn call(
        &self,
        method: &str,
        params: Option<Value>,
        deadline: Instant,
        cancel: &CancelToken,
    ) -> Result<Value, Error> {
        let started = Instant::now();
        if self.input_ended.load(Ordering::Acquire) {
            return Err(Error::InputEnded);
        }
        let id = RequestId::from(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = mpsc::channel();
        self.send(Event::Request {
            request: Request {
                id: id.clone(),
                method: method.to_owned(),
                params,
            },
            reply,
        })?;
        // Wake often enough to see a cancellation within a few milliseconds.
        let tick = Duration::from_millis(5);
        loop {
            if let Some(why) = cancel.reason() {
                let _ = self.send(Event::Forget {
                    id,
                    reason: "the request that asked was cancelled".to_owned(),
                });
                return Err(why);
            }
            let now = Instant::now();
            if now >= deadline {
                let _ = self.send(Event::Forget {
                    id,
                    reason: "no response before the deadline".to_owned(),
                });
                return Err(Error::Timeout {
                    method: method.to_owned(),
                    elapsed: started.elapsed(),
                    stderr_tail: None,
                });
            }
            match answer.recv_timeout((deadline - now).min(tick)) {
                Ok(response) => return response.result.map_err(Error::Rpc),
                Err(RecvTimeoutError::Timeout) => {}
                // The loop let go of the request: the input ended without its answer, or the
                // loop ended.
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(if self.input_ended.load(Ordering::Acquire) {
                        Error::InputEnded
                    } else {
                        Error::PeerGone
                    });
                }
            }
        }
    }
}

/// Why a token was cancelled (0 while it is not).
const LIVE: u8 = 0;
const BY_PEER: u8 = 1;
const BY_SHUTDOWN: u8 = 2;
const PEER_GONE: u8 = 3;
const HANDLER_PANICKED: u8 = 4;

#[derive(Debug, Default)]
struct CancelState {
    why: AtomicU8,
    lock: Mutex<()>,
    changed: Condvar,
}

/// Whether a request was cancelled, readable and awaitable from any thread. Clones share one
/// state.
///
/// The loop cancels it when the peer cancels the request (`notifications/cancelled` in MCP),
/// when a shutdown signal arrives, when the grace after end of input runs out, when the
/// peer goes away, or when the handler that took the request's [`Responder`] panics (the
/// loop has answered the request itself).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelState>);

impl CancelToken {
    /// A token that is not cancelled.
    pub(crate) fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Whether `other` is this very token (a clone of it), not just one in the same state.
    pub(crate) fn is(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Whether the work should stop.
    pub fn is_cancelled(&self) -> bool {
        self.0.why.load(Ordering::Acquire) != LIVE
    }

    /// Why the work should stop, as the error a handler returns: [`Error::Cancelled`] (the
    /// peer cancelled it), [`Error::Shutdown`], [`Error::PeerGone`] or
    /// [`Error::HandlerPanicked`]; `None` while it may go on.
    pub fn reason(&self) -> Option<Error> {
        match self.0.why.load(Ordering::Acquire) {
            LIVE => None,
            BY_PEER => Some(Error::Cancelled),
            BY_SHUTDOWN => Some(Error::Shutdown),
            HANDLER_PANICKED => Some(Error::HandlerPanicked),
            _ => Some(Error::PeerGone),
        }
    }

    /// Sleeps until `deadline` or until the token is cancelled, whichever comes first; wakes at
    /// once on cancellation.
    ///
    /// # Errors
    /// The cancellation's [`reason`](CancelToken::reason), when it was cancelled.
    pub fn sleep_until(&self, deadline: Instant) -> Result<(), Error> {
        let mut guard = self
            .0
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        loop {
            if let Some(why) = self.reason() {
                return Err(why);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            guard = match self.0.changed.wait_timeout(guard, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Cancels because the peer asked to; the first reason given sticks.
    pub(crate) fn cancel_by_peer(&self) {
        self.cancel(BY_PEER);
    }

    /// Cancels because the server is stopping.
    pub(crate) fn cancel_for_shutdown(&self) {
        self.cancel(BY_SHUTDOWN);
    }

    /// Cancels because nobody reads the answers any more.
    pub(crate) fn cancel_peer_gone(&self) {
        self.cancel(PEER_GONE);
    }

    /// Cancels because the handler that took the responder panicked, and the loop answered.
    pub(crate) fn cancel_for_panic(&self) {
        self.cancel(HANDLER_PANICKED);
    }

    /// Whether the peer (not a shutdown) cancelled it.
    pub(crate) fn cancelled_by_peer(&self) -> bool {
        self.0.why.load(Ordering::Acquire) == BY_PEER
    }

    fn cancel(&self, why: u8) {
        let _ = self
            .0
            .why
            .compare_exchange(LIVE, why, Ordering::AcqRel, Ordering::Acquire);
        let _guard = self
            .0
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.0.changed.notify_all();
    }
}

/// The answer of one request, to be given later from any thread
/// ([`Context::responder`](crate::Context::responder)).
///
/// The loop keeps serving meanwhile. [`respond`](Responder::respond) hands the answer to the
/// loop, which writes it unless the peer cancelled the request (then it is dropped, as MCP
/// asks). A responder dropped without answering answers `-32603` itself, so a request is never
/// lost silently (a worker that panics still answers). When the handler that took it panics,
/// the loop answers the request with `-32603` at once: the responder is then cancelled (its
/// token's reason is [`Error::HandlerPanicked`]) and its answer dropped.
///
/// # Example
/// ```
/// use mcpipe::{Context, ErrorObject, Handler, Request};
/// use serde_json::{json, Value};
///
/// struct Slow;
/// impl Handler for Slow {
///     fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
///         let Some(responder) = cx.responder() else {
///             return Err(ErrorObject::internal("not a request"));
///         };
///         std::thread::spawn(move || {
///             let cancel = responder.cancel_token();
///             let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
///             match cancel.sleep_until(deadline) {
///                 Ok(()) => responder.respond(Ok(json!({ "slept": req.method }))),
///                 Err(_) => drop(responder), // cancelled: the loop sends nothing for it
///             }
///         });
///         Ok(Value::Null) // ignored: the responder answers
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Responder {
    id: RequestId,
    outbox: Outbox,
    cancel: CancelToken,
    answered: bool,
}

impl Responder {
    pub(crate) fn new(id: RequestId, outbox: Outbox, cancel: CancelToken) -> Responder {
        Responder {
            id,
            outbox,
            cancel,
            answered: false,
        }
    }

    /// The id of the request this answers.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// Answers the request: `Ok` becomes a result response, `Err` an error response. Nothing is
    /// sent when the peer cancelled the request or is gone.
    pub fn respond(mut self, result: Result<Value, ErrorObject>) {
        self.answered = true;
        let _ = self.outbox.send(Event::Answer {
            id: self.id.clone(),
            result,
            token: Some(self.cancel.clone()),
        });
    }

    /// Marks the answer given (by the caller, on the loop's thread) and returns the id.
    pub(crate) fn into_answered(mut self) -> RequestId {
        self.answered = true;
        self.id.clone()
    }

    /// Whether the request was cancelled (by the peer, a shutdown, the peer going away, or the
    /// handler that took this responder panicking: see [`CancelToken::reason`]).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The request's cancellation, to watch or wait on from anywhere.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Sends a notification to the peer (through the loop) now, before the answer.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the loop has ended.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.outbox.notify(method, params)
    }

    /// Sends a request to the peer (through the loop) and waits up to `timeout` for its result;
    /// gives up early when this request is cancelled. On a timeout the peer is told the
    /// request is cancelled (when the handler has a cancel method) and a late answer is dropped.
    ///
    /// # Errors
    /// [`Error::Rpc`] when the peer answered with an error, [`Error::Timeout`], the
    /// cancellation's [`reason`](CancelToken::reason), [`Error::InputEnded`] (at once) when the
    /// peer's input ended without the answer, [`Error::PeerGone`].
    pub fn call(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        self.outbox
            .call(method, params, deadline::from_now(timeout), &self.cancel)
    }

    /// Hands `data` to the handler on the loop's thread
    /// ([`Handler::handle_post`](crate::Handler::handle_post)), before the answer: the way work
    /// done elsewhere updates state that only the loop owns.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the loop has ended.
    pub fn post(&self, data: Box<dyn Any + Send>) -> Result<(), Error> {
        self.outbox.post(data)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.outbox.send(Event::Answer {
                id: self.id.clone(),
                result: Err(ErrorObject::internal(
                    "internal error: the request was dropped without an answer",
                )),
                token: Some(self.cancel.clone()),
            });
        }
    }
}

/// A way to reach the peer from any thread, outside of any one request
/// ([`Context::loop_handle`](crate::Context::loop_handle)): for notifications that no request
/// causes (a resource watcher's `notifications/resources/updated`), for requests to the peer
/// from background work, and for relays that pass messages through as they are.
///
/// Everything goes through the loop, which alone writes the output. Once the loop has ended,
/// every method returns [`Error::PeerGone`].
#[derive(Debug, Clone)]
pub struct LoopHandle {
    outbox: Outbox,
}

impl LoopHandle {
    pub(crate) fn new(outbox: Outbox) -> LoopHandle {
        LoopHandle { outbox }
    }

    /// Sends a notification to the peer.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the loop has ended.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.outbox.notify(method, params)
    }

    /// Sends any message to the peer unchanged: a request with an id of the caller's choosing
    /// (its response then reaches [`Handler::handle_response`](crate::Handler::handle_response)),
    /// a response, a notification.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the loop has ended.
    pub fn send(&self, message: Message) -> Result<(), Error> {
        self.outbox.send_message(message)
    }

    /// Sends a request to the peer (the loop picks its id) and waits up to `timeout` for the
    /// result; at the deadline the peer is told the request is cancelled (when the handler has
    /// a cancel method) and a late answer is dropped.
    ///
    /// # Errors
    /// [`Error::Rpc`] when the peer answered with an error, [`Error::Timeout`],
    /// [`Error::InputEnded`] (at once) when the peer's input ended without the answer,
    /// [`Error::PeerGone`].
    pub fn call(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        self.outbox.call(
            method,
            params,
            deadline::from_now(timeout),
            &CancelToken::new(),
        )
    }

    /// Hands `data` to the handler on the loop's thread
    /// ([`Handler::handle_post`](crate::Handler::handle_post)).
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the loop has ended.
    pub fn post(&self, data: Box<dyn Any + Send>) -> Result<(), Error> {
        self.outbox.post(data)
    }
}

/// Builds the response message for an answer.
pub(crate) fn answer_message(id: RequestId, result: Result<Value, ErrorObject>) -> Message {
    Message::Response(Response {
        id: Some(id),
        result,
    })
}
