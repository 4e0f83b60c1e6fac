//! Work owed an answer by a responder, and its cancellation: what the loop writes when an
//! answer comes (alone, or into its batch), cancels when the peer asks, and fails at the end.

use super::Session;
use crate::batch_answers::Settled;
use crate::message::{ErrorObject, Message, Notification, Parsed, RequestId, Response};
use crate::responder::CancelToken;

impl Session {
    /// Writes the answer of the owed request `id` (`None`: it gets none), or keeps it for its
    /// batch until the batch is complete (see [`crate::batch_answers::PendingBatches`]).
    pub(crate) fn answer_owed(&mut self, id: &RequestId, response: Option<Response>) {
        match self.batches.settle(id, response) {
            Settled::Alone(Some(response)) => self.enqueue(&Message::Response(response)),
            Settled::Alone(None) | Settled::Kept => {}
            Settled::Complete(responses) => self.write_batch(responses),
        }
    }

    /// Writes the answers of a batch: in one array; none at all when it has none (a batch of
    /// notifications, or of requests the peer cancelled: never `[]`).
    pub(crate) fn write_batch(&mut self, responses: Vec<Response>) {
        if responses.is_empty() {
            return;
        }
        let out = self.queue.buffer();
        out.push(b'[');
        for (i, response) in responses.into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            Message::Response(response).write_json(out);
        }
        out.extend_from_slice(b"]\n");
    }

    /// An answer for the owed request `id` (of the request whose token is `token`) arrived: it
    /// is no longer owed. Whether the answer is to be written: not for a request the peer
    /// cancelled, nor to a peer that is gone (one stopped by a shutdown still gets whatever
    /// the handler made of it). `None`: the late answer of a superseded request, which leaves
    /// the request now owed under `id` (and its batch) alone.
    pub(crate) fn settle_owed(
        &mut self,
        id: &RequestId,
        token: Option<&CancelToken>,
    ) -> Option<bool> {
        if !self.superseded.is_empty() && self.drop_superseded(token) {
            return None;
        }
        if !self.waiting.is_empty() {
            self.waiting.remove(id);
        }
        let Some((token, _)) = self.owed.remove(id) else {
            return Some(false);
        };
        Some(!token.cancelled_by_peer() && !self.peer_gone)
    }

    /// The request a cancellation names, if `n` is one.
    fn cancel_target(&self, n: &Notification) -> Option<RequestId> {
        if Some(n.method.as_str()) != self.cancel_method.as_deref() {
            return None;
        }
        n.params
            .as_ref()
            .and_then(|p| p.get("requestId"))
            .and_then(RequestId::from_value)
    }

    /// Acts on `n` if it is a cancellation of the running request, of one whose answer is
    /// owed, or of one waiting in the read-ahead queue; whether it was (it is then consumed).
    /// Any other (unknown, finished or malformed) goes to the handler in order, which may
    /// ignore it, as MCP says to.
    pub(crate) fn take_cancellation(&mut self, n: &Notification) -> bool {
        let Some(id) = self.cancel_target(n) else {
            return false;
        };
        if self.running.as_ref() == Some(&id) {
            self.running_cancelled = true;
            return true;
        }
        if self.cancel_owed(&id) {
            return true;
        }
        let queued = self
            .deferred
            .iter()
            .any(|d| matches!(&d.parsed, Parsed::Single(Message::Request(r)) if r.id == id));
        if queued {
            self.cancelled_queued.insert(id);
        }
        queued
    }

    /// How many owed answers count toward the in-flight bound (those of work that runs).
    pub(crate) fn in_flight(&self) -> usize {
        (self.owed.len() + self.superseded.len()).saturating_sub(self.waiting.len())
    }

    /// Whether a new request may use `id`: no answer is owed under it, or the one owed is of a
    /// request the peer cancelled (it gets no answer), which then waits aside for its work to
    /// end. `false`: a request in flight has the id.
    pub(crate) fn release_cancelled_id(&mut self, id: &RequestId) -> bool {
        let Some((token, _)) = self.owed.get(id) else {
            return true;
        };
        if !token.cancelled_by_peer() {
            return false;
        }
        if let Some((token, _)) = self.owed.remove(id) {
            self.superseded.push(token);
        }
        if !self.waiting.is_empty() {
            self.waiting.remove(id);
        }
        true
    }

    /// Whether an answer is the late one of a superseded request (it is then forgotten, and
    /// never written: its id is another request's now).
    fn drop_superseded(&mut self, token: Option<&CancelToken>) -> bool {
        let Some(token) = token else {
            return false;
        };
        match self.superseded.iter().position(|t| t.is(token)) {
            Some(i) => {
                self.superseded.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Cancels a request whose answer a responder owes, if `id` names one the peer may cancel;
    /// its answer will not be sent.
    pub(crate) fn cancel_owed(&mut self, id: &RequestId) -> bool {
        match self.owed.get(id) {
            Some((token, true)) => {
                if !token.is_cancelled() {
                    token.cancel_by_peer();
                    self.stats.cancelled += 1;
                    self.cancelled_owed.push_back(id.clone());
                }
                true
            }
            _ => false,
        }
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
        self.waiting.clear();
        self.superseded.clear();
        let owed: Vec<RequestId> = self.owed.drain().map(|(id, _)| id).collect();
        for id in owed {
            let error = ErrorObject::internal(format!("internal error: {why}"));
            let response = Response::error(Some(id.clone()), error);
            self.answer_owed(&id, Some(response));
        }
    }
}
