//! The answers of a batch some of whose requests are answered later (by a responder on
//! another thread): gathered until the last one is in, then written as one array, as JSON-RPC
//! asks of a batch ("after all of the batch Request objects have been processed").
//!
//! Sans-IO: the session hands in the answers it would have written and gets back a batch's
//! answers once they are all in.

use crate::id_map::IdMap;
use crate::message::{RequestId, Response};

/// Batches waiting for answers owed by responders.
#[derive(Debug, Default)]
pub(crate) struct PendingBatches {
    /// The batch each owed request belongs to (its number).
    batch_of: IdMap<u64>,
    /// The batches still waiting, each with its number.
    gathering: Vec<(u64, Gathering)>,
    next: u64,
}

#[derive(Debug)]
struct Gathering {
    /// The answers so far, in the order they came.
    responses: Vec<Response>,
    /// How many owed answers it still waits for.
    waiting: usize,
}

/// What became of an answer handed to [`PendingBatches::settle`].
#[derive(Debug)]
pub(crate) enum Settled {
    /// Its request is in no waiting batch: written as it is, if at all.
    Alone(Option<Response>),
    /// Kept: its batch waits for more.
    Kept,
    /// Its batch is complete: its answers, to write as one array (none: write nothing).
    Complete(Vec<Response>),
}

impl PendingBatches {
    /// Whether no batch waits (the common case, checked before any lookup).
    pub(crate) fn is_empty(&self) -> bool {
        self.gathering.is_empty()
    }

    /// A batch whose requests `owed` are answered later; `responses` are its answers so far.
    pub(crate) fn open(&mut self, responses: Vec<Response>, owed: Vec<RequestId>) {
        let number = self.next;
        self.next += 1;
        let waiting = owed.len();
        for id in owed {
            self.batch_of.insert(id, number);
        }
        self.gathering
            .push((number, Gathering { responses, waiting }));
    }

    /// The answer of the owed request `id` (`None`: it gets none, the peer cancelled it or is
    /// gone).
    pub(crate) fn settle(&mut self, id: &RequestId, response: Option<Response>) -> Settled {
        if self.is_empty() {
            return Settled::Alone(response);
        }
        let Some(number) = self.batch_of.remove(id) else {
            return Settled::Alone(response);
        };
        let Some(at) = self.gathering.iter().position(|(n, _)| *n == number) else {
            return Settled::Alone(response); // Not reached: a number in the map is gathering.
        };
        let batch = &mut self.gathering[at].1;
        batch.responses.extend(response);
        batch.waiting -= 1;
        if batch.waiting > 0 {
            return Settled::Kept;
        }
        let (_, done) = self.gathering.swap_remove(at);
        Settled::Complete(done.responses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(id: i64) -> Response {
        Response::ok(RequestId::from(id), json!(id))
    }

    fn ids(responses: &[Response]) -> Vec<RequestId> {
        responses.iter().filter_map(|r| r.id.clone()).collect()
    }

    #[test]
    fn a_batch_is_complete_with_its_last_owed_answer() {
        let mut batches = PendingBatches::default();
        batches.open(
            vec![answer(1)],
            vec![RequestId::from(2), RequestId::from(3)],
        );
        assert!(matches!(
            batches.settle(&RequestId::from(9), Some(answer(9))),
            Settled::Alone(Some(_))
        ));
        assert!(matches!(
            batches.settle(&RequestId::from(3), Some(answer(3))),
            Settled::Kept
        ));
        let Settled::Complete(all) = batches.settle(&RequestId::from(2), None) else {
            panic!("complete");
        };
        assert_eq!(ids(&all), [RequestId::from(1), RequestId::from(3)]);
        assert!(batches.is_empty());
    }

    #[test]
    fn batches_are_gathered_apart() {
        let mut batches = PendingBatches::default();
        batches.open(Vec::new(), vec![RequestId::from(1)]);
        batches.open(Vec::new(), vec![RequestId::from(2)]);
        let Settled::Complete(second) = batches.settle(&RequestId::from(2), Some(answer(2))) else {
            panic!("complete");
        };
        assert_eq!(ids(&second), [RequestId::from(2)]);
        let Settled::Complete(first) = batches.settle(&RequestId::from(1), None) else {
            panic!("complete");
        };
        assert!(first.is_empty());
    }
}
