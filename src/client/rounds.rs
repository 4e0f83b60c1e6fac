//! The `input_required` rounds of one MCP 2026-07-28 request as a sans-IO state machine:
//! results in, what to do next out (the inputs to fulfil, the pause, the next round's
//! params, the final result or why the request ends). No I/O and no clock; the shells'
//! common sequence (`exchange.rs`) sends each round and calls the callbacks.

use std::time::Duration;

use serde_json::{Map, Value};

use super::era::{self, excerpt_of, Asked, ResultType};
use crate::error::Error;

/// The first pause before retrying an `input_required` result that asks for nothing (only
/// `requestState`: the server is not ready yet); it doubles up to `STATE_ONLY_MAX_DELAY`.
const STATE_ONLY_FIRST_DELAY: Duration = Duration::from_millis(50);
const STATE_ONLY_MAX_DELAY: Duration = Duration::from_millis(250);

/// What a result means for the request.
#[derive(Debug)]
pub(super) enum Round {
    /// The final result (`complete`, or a task's handle).
    Done(Value),
    /// The server asks for these inputs (possibly none: only `requestState`); give the
    /// answers to [`Rounds::answered`].
    Fulfil(Vec<Asked>),
    /// The request ends here.
    Failed(Error),
}

/// The next round to send.
#[derive(Debug, PartialEq)]
pub(super) struct Resend {
    /// Wait this long first (the server asked for nothing and is not ready yet).
    pub(super) pause: Option<Duration>,
    /// The original params, the answers as `inputResponses`, the `requestState` verbatim.
    pub(super) params: Option<Value>,
}

/// The rounds of one request.
#[derive(Debug)]
pub(super) struct Rounds {
    method: String,
    params: Option<Value>,
    max_rounds: u32,
    rounds: u32,
    state_only_delay: Duration,
    /// The last `input_required` result, until it is answered.
    last: Value,
}

impl Rounds {
    /// The rounds of `method` first sent with `params`, at most `max_rounds` of them.
    pub(super) fn new(method: &str, params: Option<Value>, max_rounds: u32) -> Rounds {
        Rounds {
            method: method.to_owned(),
            params,
            max_rounds,
            rounds: 0,
            state_only_delay: STATE_ONLY_FIRST_DELAY,
            last: Value::Null,
        }
    }

    /// A result arrived: the first one, or that of the last round sent.
    pub(super) fn on_result(&mut self, result: Value) -> Round {
        match era::result_type(&result) {
            ResultType::Complete => return Round::Done(result),
            // A task's handle (the tasks extension): final for this request, and only ever
            // sent to a request that declared the extension (see `Client::start_task`).
            ResultType::Other(kind) if kind == "task" => return Round::Done(result),
            ResultType::Other(kind) => {
                return Round::Failed(Error::Protocol {
                    reason: format!(
                        "the {} result has an unknown resultType {kind}",
                        self.method
                    ),
                    line: excerpt_of(&result),
                })
            }
            ResultType::InputRequired => {}
        }
        if self.rounds >= self.max_rounds {
            let reason = format!(
                "the server still asked for input after {} rounds",
                self.rounds
            );
            return Round::Failed(self.unanswered(reason, result));
        }
        self.rounds += 1;
        let asked = match era::input_requests(&result) {
            Ok(asked) => asked,
            Err(why) => return Round::Failed(self.unanswered(why, result)),
        };
        if asked.is_empty() && result.get("requestState").is_none() {
            let reason = String::from("the result has neither inputRequests nor requestState");
            return Round::Failed(self.unanswered(reason, result));
        }
        self.last = result;
        Round::Fulfil(asked)
    }

    /// The answers to what [`Round::Fulfil`] asked, by key, or why one could not be given.
    ///
    /// # Errors
    /// [`Error::InputUnanswered`] carrying the `input_required` result.
    pub(super) fn answered(
        &mut self,
        responses: Result<Map<String, Value>, String>,
    ) -> Result<Resend, Error> {
        let last = std::mem::take(&mut self.last);
        let responses = match responses {
            Ok(responses) => responses,
            Err(reason) => return Err(self.unanswered(reason, last)),
        };
        let pause = if responses.is_empty() {
            // Only state: the server is not ready yet. Back off a little before asking.
            let delay = self.state_only_delay;
            self.state_only_delay = (delay * 2).min(STATE_ONLY_MAX_DELAY);
            Some(delay)
        } else {
            self.state_only_delay = STATE_ONLY_FIRST_DELAY;
            None
        };
        let params = era::next_round_params(&self.params, responses, &last);
        Ok(Resend { pause, params })
    }

    fn unanswered(&self, reason: String, result: Value) -> Error {
        Error::InputUnanswered {
            method: self.method.clone(),
            reason,
            result,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fulfil(round: Round) -> Vec<Asked> {
        match round {
            Round::Fulfil(asked) => asked,
            other => panic!("not asking: {other:?}"),
        }
    }

    #[test]
    fn a_complete_or_task_result_is_final_and_an_unknown_type_an_error() {
        let mut r = Rounds::new("tools/call", None, 3);
        assert!(matches!(
            r.on_result(json!({"content": []})),
            Round::Done(_)
        ));
        assert!(matches!(
            r.on_result(json!({"resultType": "task"})),
            Round::Done(_)
        ));
        let round = r.on_result(json!({"resultType": "later"}));
        assert!(
            matches!(round, Round::Failed(Error::Protocol { .. })),
            "{round:?}"
        );
    }

    #[test]
    fn answers_go_back_with_the_state_verbatim_and_the_original_params() {
        let mut r = Rounds::new("tools/call", Some(json!({"name": "t"})), 3);
        let asked = fulfil(r.on_result(json!({"resultType": "input_required",
            "requestState": "s\u{2028}1", "inputRequests": {"k": {"method": "roots/list"}}})));
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].key, "k");
        let mut answers = Map::new();
        answers.insert("k".into(), json!({"roots": []}));
        let next = r.answered(Ok(answers)).unwrap();
        assert_eq!(next.pause, None);
        let params = next.params.unwrap();
        assert_eq!(params["name"], "t");
        assert_eq!(params["requestState"], "s\u{2028}1");
        assert_eq!(params["inputResponses"]["k"], json!({"roots": []}));
    }

    #[test]
    fn state_only_rounds_back_off_and_too_many_rounds_end_the_request() {
        let mut r = Rounds::new("tools/call", None, 4);
        let state = json!({"resultType": "input_required", "requestState": "again"});
        let mut pauses = Vec::new();
        for _ in 0..4 {
            assert!(fulfil(r.on_result(state.clone())).is_empty());
            pauses.push(r.answered(Ok(Map::new())).unwrap().pause.unwrap());
        }
        let ms: Vec<u128> = pauses.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [50, 100, 200, 250]);
        let round = r.on_result(state);
        assert!(
            matches!(&round, Round::Failed(Error::InputUnanswered { reason, .. })
                if reason.contains("after 4 rounds")),
            "{round:?}"
        );
    }

    #[test]
    fn malformed_or_unanswerable_requests_end_with_the_result() {
        let mut r = Rounds::new("tools/call", None, 3);
        let empty = json!({"resultType": "input_required"});
        assert!(matches!(
            r.on_result(empty),
            Round::Failed(Error::InputUnanswered { .. })
        ));
        let bad = json!({"resultType": "input_required", "inputRequests": []});
        assert!(matches!(
            r.on_result(bad),
            Round::Failed(Error::InputUnanswered { .. })
        ));
        let asking = json!({"resultType": "input_required",
                            "inputRequests": {"m": {"method": "sampling/createMessage"}}});
        fulfil(r.on_result(asking.clone()));
        match r.answered(Err(String::from("no callback"))) {
            Err(Error::InputUnanswered { reason, result, .. }) => {
                assert_eq!(reason, "no callback");
                assert_eq!(result, asking);
            }
            other => panic!("{other:?}"),
        }
    }
}
