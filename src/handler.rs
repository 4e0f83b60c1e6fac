//! The handler trait a server implements, and the context a handler works through.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use serde_json::Value;

use crate::connection::Connection;
use crate::error::{Error, Outcome};
use crate::message::{ErrorObject, Message, Notification, Request, RequestId, Response};

/// What a server does with the messages it receives.
///
/// Only [`handle_request`](Handler::handle_request) is required; every other method has a
/// default that does nothing. Methods run on the loop's thread, one at a time, so a handler can
/// keep state in `&mut self` without locks.
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

    /// Runs once after each quiet period of the server's idle timeout: the place to evict
    /// caches and close idle stores.
    fn on_idle(&mut self, cx: &mut Context<'_>) {
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
}

/// Counters of what a loop has seen, readable from a handler through [`Context::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Requests handed to the handler.
    pub requests: u64,
    /// Notifications handed to the handler.
    pub notifications: u64,
    /// Responses handed to the handler.
    pub responses: u64,
    /// Lines that were not valid messages (each answered with an error), oversize ones included.
    pub bad_messages: u64,
    /// Lines longer than the message limit.
    pub oversize_messages: u64,
    /// Handler calls that panicked.
    pub handler_panics: u64,
    /// Times the idle hook ran.
    pub idle_hooks: u64,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
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
        let id = RequestId::from(self.conn.next_request_id());
        self.send(&Message::Request(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        }))?;
        Ok(id)
    }

    /// Queues any message and writes it as far as the peer takes it without blocking.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the peer closed the connection.
    pub fn send(&mut self, message: &Message) -> Result<(), Error> {
        if self.conn.peer_gone {
            return Err(Error::PeerGone);
        }
        self.conn.queue.push(message);
        self.conn.flush();
        if self.conn.peer_gone {
            return Err(Error::PeerGone);
        }
        Ok(())
    }

    /// The loop's counters so far.
    pub fn stats(&self) -> &Stats {
        &self.conn.stats
    }

    /// The connection, for crate-internal extensions of the context.
    #[allow(dead_code)] // Used by later layers (cancellation, waiting for responses).
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
