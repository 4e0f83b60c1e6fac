//! The handler the wrapper's loop serves: it relays what the client sends to the wrapped
//! server (requests through the supervisor's queue, each answer owed by a responder) and what
//! the client answers back; the loop has already answered every bad line.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::child;
use super::from_server::{self, ServerOutput};
use super::ids;
use super::shared::{is_remembered_list, Pending, Shared, HOLD_BYTES};
use super::signals::LateSignals;
use crate::deadline;
use crate::diagnostics;
use crate::error::Outcome;
use crate::handler::{Context, Handler};
use crate::id_map::IdSet;
use crate::lock::lock;
use crate::message::{ErrorObject, Message, Notification, Request, RequestId, Response};

/// How long the end may wait for the supervisor, beyond the server's own grace.
const JOIN_SLACK: Duration = Duration::from_secs(2);

/// The wrapper's [`Handler`].
#[derive(Debug)]
pub(super) struct Relay {
    shared: Arc<Shared>,
    /// Started as the loop starts ([`Handler::on_start`]), as a client that launched the
    /// server itself would have started it: its start-up overlaps the client's, and one that
    /// cannot start is reported at once, not at the client's first message.
    supervisor: Option<JoinHandle<()>>,
    /// The running server's stdout, watched by the loop.
    upstream: Option<ServerOutput>,
}

impl Relay {
    pub(super) fn new(shared: Arc<Shared>) -> Relay {
        Relay {
            shared,
            supervisor: None,
            upstream: None,
        }
    }

    /// Stops the server (and its tree) after the loop ended: quickly after a signal, with the
    /// configured grace after end of input.
    /// Returns the signal that cut the end short, if one came meanwhile.
    pub(super) fn finish(
        &mut self,
        outcome: &Outcome,
        mut signals: Option<&mut LateSignals>,
    ) -> Option<i32> {
        let quick = !matches!(outcome, Outcome::Eof);
        self.shared.ask_to_stop(quick);
        let mut signal = None;
        let supervisor = self.supervisor.take()?;
        let until = deadline::from_now(self.shared.config.grace.saturating_add(JOIN_SLACK));
        while !supervisor.is_finished() && Instant::now() < until {
            // A signal in the grace ends the server at once, as one during serving does.
            if let Some(n) = signals.as_deref_mut().and_then(LateSignals::take) {
                if signal.is_none() {
                    signal = Some(n);
                    self.shared.ask_to_stop(true);
                }
            }
            // Nobody hears the server any more, but it must not block on a full stdout while
            // it shuts down.
            if let Some(upstream) = &mut self.upstream {
                if !upstream.discard_available() {
                    self.shared.stdout_closed(upstream.life);
                    self.upstream = None;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if supervisor.is_finished() {
            let _ = supervisor.join();
        }
        signal
    }
}

impl Handler for Relay {
    fn handle_request(
        &mut self,
        mut request: Request,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        if self.shared.gave_up() {
            return Err(child::not_running(&self.shared));
        }
        if request.method == "initialize" {
            *self.shared_init() = request.params.clone();
        }
        // Filed as in flight with its line, under the queue's lock (see `Shared::pending`).
        let Some(queue) = self.shared.queue_for_request() else {
            return Err(child::not_running(&self.shared));
        };
        let Some(responder) = cx.responder() else {
            return Err(ErrorObject::internal(
                "internal error: no responder for a request",
            ));
        };
        let deadline = self.shared.config.request_timeout.map(deadline::from_now);
        let first_page = is_remembered_list(&request.method)
            && request
                .params
                .as_ref()
                .is_none_or(|p| p.get("cursor").is_none_or(Value::is_null));
        // The method is read back for the handshake, the lists and a deadline's error only:
        // no copy of it for the rest.
        let method = if deadline.is_some() || needs_params(&request.method) {
            request.method.clone()
        } else {
            String::new()
        };
        let pending = Pending {
            responder,
            method,
            deadline,
            first_page,
        };
        lock(&self.shared.pending).insert(request.id.clone(), pending);
        let mut line = cx.take_raw_line();
        if ids::is_reserved(&request.id) {
            // The client's id could be taken for one of the wrapper's own (`ids`): the server
            // sees it renamed, in its line as it came (or, where that line's members cannot be
            // read apart, in the message written anew: the loop built its params then).
            request.id = ids::renamed(&request.id);
            line = line.and_then(|line| ids::with_id(&line, &request.id));
        }
        self.shared
            .forward(Some(queue), &Message::Request(request), line);
        Ok(Value::Null) // ignored: the responder answers
    }

    fn handle_notification(&mut self, notification: Notification, cx: &mut Context<'_>) {
        // Under the queue's lock, with its line: a restart's replay sees the flag and the line
        // together, or neither (then the line comes after the replay), never the flag alone.
        let queue = lock(&self.shared.queue);
        if notification.method == "notifications/initialized" {
            self.shared.initialized.store(true, Ordering::Release);
        }
        self.shared.forward(
            Some(queue),
            &Message::Notification(notification),
            cx.take_raw_line(),
        );
    }

    fn handle_response(&mut self, response: Response, cx: &mut Context<'_>) {
        // The client's answer to a request the server sent it: back to the server, unchanged.
        self.shared
            .forward(None, &Message::Response(response), cx.take_raw_line());
    }

    fn handle_cancelled(&mut self, request: RequestId, _cx: &mut Context<'_>) {
        // The loop consumed the client's cancellation (and will drop a late answer): the
        // request is no longer in flight. A line still queued is taken back, as at a deadline
        // (`Queue::withdraw`): the server never saw the request and a cancelled one awaits no
        // answer, so it gets neither; one begun may run, and the server is told.
        let sent = ids::sent(&request).into_owned();
        let (pending, withdrawn) = {
            // Queue first, as `send` files a request with its line: the line is either still
            // queued here, or the writer took it.
            let mut queue = lock(&self.shared.queue);
            let pending = lock(&self.shared.pending).remove(&request);
            (pending, queue.withdraw(&IdSet::from_iter([sent.clone()])))
        };
        // Its responder, dropped outside the locks (the loop drops its answer).
        drop(pending);
        if !withdrawn.is_empty() {
            return;
        }
        self.shared.give_up(request);
        self.shared.to_server(&Message::Notification(Notification {
            method: "notifications/cancelled".to_owned(),
            params: Some(
                json!({ "requestId": sent.to_value(), "reason": "cancelled by the client" }),
            ),
        }));
    }

    fn on_start(&mut self, cx: &mut Context<'_>) {
        let handle = cx.loop_handle();
        match child::supervise(Arc::clone(&self.shared), handle) {
            Ok(supervisor) => self.supervisor = Some(supervisor),
            // At a thread or process limit: no server, said once, every request answered.
            Err(e) => child::give_up(
                &self.shared,
                &format!("the wrapper could not start its supervisor thread: {e}"),
                None,
            ),
        }
    }

    fn holds_input(&self) -> bool {
        // A server that gave up takes nothing more: requests are answered at once then.
        self.shared.waiting.load(Ordering::Relaxed) > HOLD_BYTES && !self.shared.gave_up()
    }

    fn handle_post(&mut self, data: Box<dyn Any + Send>, cx: &mut Context<'_>) {
        // A (re)started server's stdout, from the supervisor. Anything else is the writer
        // saying the lines fell under the hold: the loop asks `holds_input` again by itself.
        let Ok(upstream) = data.downcast::<ServerOutput>() else {
            return;
        };
        self.close_upstream(cx);
        match upstream.watch(cx) {
            Ok(()) => self.upstream = Some(*upstream),
            Err(e) => {
                diagnostics::line(&format!(
                    "mcpipe wrap: cannot watch the stdout of {}: {e}",
                    self.shared.config.name
                ));
                self.shared.stdout_closed(upstream.life);
            }
        }
    }

    fn handle_readable(&mut self, key: usize, cx: &mut Context<'_>) {
        if key != from_server::KEY {
            return;
        }
        let Some(upstream) = &mut self.upstream else {
            return;
        };
        if !upstream.read_available(&self.shared, cx) {
            self.close_upstream(cx);
        }
    }

    fn on_caught_up(&mut self, _cx: &mut Context<'_>) {
        self.shared.write_gathered();
    }

    fn accepts_batches(&self) -> bool {
        self.shared.batches.load(Ordering::Acquire)
    }

    fn cancel_method(&self) -> Option<&str> {
        Some("notifications/cancelled")
    }

    fn is_cancellable(&self, request: &Request) -> bool {
        request.method != "initialize"
    }
}

/// The methods whose params the relay reads: `initialize`'s are replayed to a restarted
/// server, and a list's cursor tells whether its answer is the first page.
pub(super) fn needs_params(method: &str) -> bool {
    method == "initialize" || is_remembered_list(method)
}

impl Relay {
    /// Stops reading the server's stdout (at its end, or when a new server replaces it).
    fn close_upstream(&mut self, cx: &mut Context<'_>) {
        if let Some(upstream) = self.upstream.take() {
            upstream.unwatch(cx);
            self.shared.stdout_closed(upstream.life);
        }
    }

    fn shared_init(&self) -> std::sync::MutexGuard<'_, Option<Value>> {
        self.shared
            .init
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
