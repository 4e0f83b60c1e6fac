//! What one request means above a single attempt: the retry policy, the `input_required`
//! rounds of MCP 2026-07-28, and following list cursors. Written once for both clients
//! ([`Client`](super::Client) and [`SharedClient`](super::SharedClient)) over [`Exchange`].

use std::time::Duration;

use serde_json::{json, Value};

pub(super) use super::era::excerpt_of;
use super::era::Asked;
use super::options::RequestOptions;
use super::retry::RetryPolicy;
use super::rounds::{Round, Rounds};
use crate::error::Error;

/// Most pages a list helper follows before it decides the server's cursors go round in circles.
const MAX_PAGES: usize = 10_000;

/// What a client does for one attempt, and what the layers above it need to know.
pub(super) trait Exchange {
    /// Sends one request and waits for its answer. `retrying`: an earlier attempt failed, so a
    /// dead server is started again first.
    fn attempt(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
        retrying: bool,
    ) -> Result<Value, Error>;
    /// The answer to one input of an `input_required` result, or why there is none.
    fn fulfil(&mut self, input: &Asked) -> Result<Value, String>;
    /// Waits between attempts (serving the connection meanwhile where the caller owns it).
    fn pause(&mut self, delay: Duration);
    /// The client's retry policy, for requests that do not set their own.
    fn default_retry(&self) -> RetryPolicy;
    /// How many `input_required` rounds one request may take.
    fn max_input_rounds(&self) -> u32;
    /// Whether the connection speaks MCP 2026-07-28 (results are read by `resultType`).
    fn is_modern(&self) -> bool;
    /// The jitter's random state.
    fn seed(&mut self) -> &mut u64;
}

/// A whole request: attempts under the retry policy, then (under MCP 2026-07-28) the
/// `input_required` rounds until the result is complete.
pub(super) fn request<E: Exchange + ?Sized>(
    ex: &mut E,
    method: &str,
    params: Option<Value>,
    options: &mut RequestOptions<'_>,
) -> Result<Value, Error> {
    // The `input_required` rounds send the params again: a copy is kept where the connection
    // is modern, or may be by the answer (a retry restarts a dead server, which may come back
    // in the other era). Otherwise the era can change only through another thread's restart,
    // which ends this request with `Error::Closed` unless its handshake-era answer came first,
    // and such an answer holds no `resultType`: the rounds end at once without the params.
    let (policy, attempts) = attempts(ex, method, options);
    let kept = (ex.is_modern() || attempts > 1).then(|| params.clone());
    let result = with_retries(ex, method, params, options, &policy, attempts)?;
    if !ex.is_modern() {
        return Ok(result);
    }
    complete_rounds(ex, method, kept.flatten(), result, options)
}

/// The retry policy of a request, and how many attempts it may take.
fn attempts<E: Exchange + ?Sized>(
    ex: &E,
    method: &str,
    options: &RequestOptions<'_>,
) -> (RetryPolicy, u32) {
    let policy = options.retry.clone().unwrap_or_else(|| ex.default_retry());
    let idempotent = options.idempotent.unwrap_or(method != "tools/call");
    let attempts = if idempotent {
        policy.attempts.max(1)
    } else {
        1
    };
    (policy, attempts)
}

/// One request (one round), with the retry policy.
fn with_retries<E: Exchange + ?Sized>(
    ex: &mut E,
    method: &str,
    mut params: Option<Value>,
    options: &mut RequestOptions<'_>,
    policy: &RetryPolicy,
    attempts: u32,
) -> Result<Value, Error> {
    let mut attempt = 1;
    loop {
        // The last attempt takes the params themselves: no copy for a request tried once.
        let sent = if attempt < attempts {
            params.clone()
        } else {
            params.take()
        };
        match ex.attempt(method, sent, options, attempt > 1) {
            Err(e) if e.is_retryable() && attempt < attempts => {
                attempt += 1;
                let delay = policy.delay_before(attempt, ex.seed());
                ex.pause(delay);
            }
            Err(e) if e.is_retryable() && attempts > 1 => {
                return Err(Error::RetriesExhausted {
                    attempts: attempt,
                    last: Box::new(e),
                })
            }
            other => return other,
        }
    }
}

/// Under MCP 2026-07-28: reads `result` by its `resultType`, fulfilling `input_required`
/// rounds until the result is complete: [`Rounds`] decides, this sends and asks.
fn complete_rounds<E: Exchange + ?Sized>(
    ex: &mut E,
    method: &str,
    params: Option<Value>,
    result: Value,
    options: &mut RequestOptions<'_>,
) -> Result<Value, Error> {
    let mut rounds = Rounds::new(method, params, ex.max_input_rounds());
    let mut round = rounds.on_result(result);
    loop {
        let asked = match round {
            Round::Done(result) => return Ok(result),
            Round::Failed(error) => return Err(error),
            Round::Fulfil(asked) => asked,
        };
        // In the server's order; the first input the client cannot give ends the request.
        let answers = asked
            .iter()
            .map(|input| ex.fulfil(input).map(|answer| (input.key.clone(), answer)))
            .collect();
        let next = rounds.answered(answers)?;
        if let Some(delay) = next.pause {
            ex.pause(delay);
        }
        let (policy, attempts) = attempts(ex, method, options);
        let result = with_retries(ex, method, next.params, options, &policy, attempts)?;
        round = rounds.on_result(result);
    }
}

/// Every item of a paginated list method, following `nextCursor` to the last page.
pub(super) fn list_all<E: Exchange + ?Sized>(
    ex: &mut E,
    method: &str,
    key: &str,
) -> Result<Vec<Value>, Error> {
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut seen = Vec::new();
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let page = request(ex, method, params, &mut RequestOptions::new())?;
        let Some(list) = page.get(key).and_then(Value::as_array) else {
            return Err(Error::Protocol {
                reason: format!("the {method} result has no {key} array"),
                line: excerpt_of(&page),
            });
        };
        items.extend(list.iter().cloned());
        match page.get("nextCursor") {
            None | Some(Value::Null) => return Ok(items),
            Some(next) => {
                if seen.contains(next) {
                    return Err(Error::Protocol {
                        reason: format!("{method} returned a cursor it had returned before"),
                        line: excerpt_of(next),
                    });
                }
                seen.push(next.clone());
                cursor = Some(next.clone());
            }
        }
    }
    Err(Error::Protocol {
        reason: format!("{method} returned more than {MAX_PAGES} pages"),
        line: String::new(),
    })
}

/// The params of `tools/call` (and `prompts/get`): the name, and the arguments unless `null`.
pub(super) fn named_params(name: &str, arguments: Value) -> Value {
    let mut params = json!({ "name": name });
    if !arguments.is_null() {
        params["arguments"] = arguments;
    }
    params
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::message::ErrorObject;

    /// A client that answers from a script and records what it was asked: the retry policy,
    /// the rounds and the pagination on plain data, no process.
    #[derive(Default)]
    struct Scripted {
        answers: VecDeque<Result<Value, Error>>,
        sent: Vec<(String, Option<Value>, bool)>,
        pauses: Vec<Duration>,
        fulfilled: Vec<String>,
        modern: bool,
        seed: u64,
    }

    impl Scripted {
        fn new(answers: Vec<Result<Value, Error>>) -> Scripted {
            Scripted {
                answers: answers.into(),
                seed: 1,
                ..Scripted::default()
            }
        }
    }

    impl Exchange for Scripted {
        fn attempt(
            &mut self,
            method: &str,
            params: Option<Value>,
            _options: &mut RequestOptions<'_>,
            retrying: bool,
        ) -> Result<Value, Error> {
            self.sent.push((method.to_owned(), params, retrying));
            self.answers.pop_front().unwrap_or(Err(Error::Closed))
        }

        fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
            self.fulfilled.push(input.key.clone());
            match input.method.as_str() {
                "roots/list" => Ok(json!({"roots": []})),
                other => Err(format!("no callback for {other}")),
            }
        }

        fn pause(&mut self, delay: Duration) {
            self.pauses.push(delay);
        }

        fn default_retry(&self) -> RetryPolicy {
            RetryPolicy {
                jitter: false,
                ..RetryPolicy::default()
            }
        }

        fn max_input_rounds(&self) -> u32 {
            2
        }

        fn is_modern(&self) -> bool {
            self.modern
        }

        fn seed(&mut self) -> &mut u64 {
            &mut self.seed
        }
    }

    fn timeout() -> Error {
        Error::Timeout {
            method: String::from("m"),
            elapsed: Duration::ZERO,
            stderr_tail: None,
        }
    }

    #[test]
    fn retryable_failures_are_retried_with_backoff_and_marked_as_retries() {
        let mut ex = Scripted::new(vec![Err(timeout()), Err(timeout()), Ok(json!({"ok": 1}))]);
        let result = request(&mut ex, "tools/list", None, &mut RequestOptions::new());
        assert_eq!(result.unwrap(), json!({"ok": 1}));
        let retrying: Vec<bool> = ex.sent.iter().map(|s| s.2).collect();
        assert_eq!(retrying, [false, true, true]);
        assert_eq!(
            ex.pauses,
            [Duration::from_millis(500), Duration::from_millis(1000)]
        );
    }

    #[test]
    fn running_out_of_attempts_says_so_and_rpc_errors_are_never_retried() {
        let mut ex = Scripted::new(vec![Err(timeout()), Err(timeout()), Err(timeout())]);
        let err = request(&mut ex, "ping", None, &mut RequestOptions::new()).unwrap_err();
        assert!(
            matches!(err, Error::RetriesExhausted { attempts: 3, .. }),
            "{err}"
        );
        let rpc = Error::Rpc(ErrorObject::method_not_found("x"));
        let mut ex = Scripted::new(vec![Err(rpc)]);
        let err = request(&mut ex, "ping", None, &mut RequestOptions::new()).unwrap_err();
        assert!(matches!(err, Error::Rpc(_)), "{err}");
        assert_eq!(ex.sent.len(), 1);
    }

    #[test]
    fn a_tool_call_is_tried_once_unless_marked_idempotent() {
        let mut ex = Scripted::new(vec![Err(timeout()), Ok(json!({}))]);
        let err = request(&mut ex, "tools/call", None, &mut RequestOptions::new()).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert_eq!(ex.sent.len(), 1);
        let mut ex = Scripted::new(vec![Err(timeout()), Ok(json!({}))]);
        let mut options = RequestOptions::new().idempotent(true);
        assert!(request(&mut ex, "tools/call", None, &mut options).is_ok());
        assert_eq!(ex.sent.len(), 2);
    }

    #[test]
    fn input_required_rounds_send_the_answers_and_the_state_verbatim() {
        let asking = json!({"resultType": "input_required", "requestState": "s-1",
                            "inputRequests": {"where": {"method": "roots/list"}}});
        let mut ex = Scripted::new(vec![Ok(asking), Ok(json!({"resultType": "complete"}))]);
        ex.modern = true;
        let params = Some(json!({"name": "t"}));
        let done = request(&mut ex, "tools/call", params, &mut RequestOptions::new()).unwrap();
        assert_eq!(done["resultType"], "complete");
        assert_eq!(ex.fulfilled, ["where"]);
        let second = ex.sent[1].1.clone().unwrap();
        assert_eq!(second["name"], "t");
        assert_eq!(second["requestState"], "s-1");
        assert_eq!(second["inputResponses"]["where"], json!({"roots": []}));
    }

    #[test]
    fn an_input_the_client_cannot_give_or_too_many_rounds_end_the_request() {
        let sampling = json!({"resultType": "input_required",
                              "inputRequests": {"m": {"method": "sampling/createMessage"}}});
        let mut ex = Scripted::new(vec![Ok(sampling)]);
        ex.modern = true;
        let err = request(&mut ex, "tools/call", None, &mut RequestOptions::new()).unwrap_err();
        assert!(matches!(err, Error::InputUnanswered { .. }), "{err}");
        let state_only = json!({"resultType": "input_required", "requestState": "again"});
        let mut ex = Scripted::new((0..5).map(|_| Ok(state_only.clone())).collect());
        ex.modern = true;
        let err = request(&mut ex, "tools/call", None, &mut RequestOptions::new()).unwrap_err();
        assert!(matches!(err, Error::InputUnanswered { .. }), "{err}");
        // max_input_rounds is 2: the first answer and two more rounds, with growing pauses.
        assert_eq!(ex.sent.len(), 3);
        assert_eq!(
            ex.pauses,
            [Duration::from_millis(50), Duration::from_millis(100)]
        );
    }

    #[test]
    fn the_handshake_era_reads_results_as_they_are() {
        let asking = json!({"resultType": "input_required", "requestState": "s"});
        let mut ex = Scripted::new(vec![Ok(asking.clone())]);
        let result = request(&mut ex, "tools/call", None, &mut RequestOptions::new());
        assert_eq!(result.unwrap(), asking);
    }

    #[test]
    fn pages_are_followed_to_the_end_and_a_repeated_cursor_is_an_error() {
        let mut ex = Scripted::new(vec![
            Ok(json!({"tools": [1], "nextCursor": "a"})),
            Ok(json!({"tools": [2], "nextCursor": null})),
        ]);
        assert_eq!(
            list_all(&mut ex, "tools/list", "tools").unwrap(),
            [json!(1), json!(2)]
        );
        assert_eq!(ex.sent[1].1, Some(json!({"cursor": "a"})));
        let mut ex = Scripted::new(vec![
            Ok(json!({"tools": [], "nextCursor": "a"})),
            Ok(json!({"tools": [], "nextCursor": "a"})),
        ]);
        let err = list_all(&mut ex, "tools/list", "tools").unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err}");
        let mut ex = Scripted::new(vec![Ok(json!({"nope": []}))]);
        assert!(list_all(&mut ex, "tools/list", "tools").is_err());
    }
}
