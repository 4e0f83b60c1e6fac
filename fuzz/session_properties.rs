//! `server_session`: the server loop's sans-IO session driven directly (no thread, no fd), so
//! the protocol state — framing, read-ahead, cancellation matching, answers owed by
//! responders — is fuzzed at thousands of inputs per second.

use mcpipe::internals;
use serde_json::Value;

use super::{check_answer_counts, expect, reference_split, Expect};

/// `server_session`: the first byte sets the message limit (64 + 4 × byte), the next two the
/// piece sizes the stream is handed over in (1..=256), the rest is the stream; the session is
/// driven by [`internals::drive_session`]'s scripted handler. Every output line is a JSON
/// response with exactly one of `result` and `error`; every request gets exactly one answer,
/// or at most one when a `notifications/cancelled` in the stream names its id; no answer
/// carries an id no request had; an answer's result is what the script says (the params, or
/// an error for a `later` request whose params are `"drop"`).
pub(crate) fn server_session(data: &[u8]) {
    let (max, pieces, stream) = match data {
        [m, a, b, rest @ ..] => (
            64 + 4 * usize::from(*m),
            vec![usize::from(*a) + 1, usize::from(*b) + 1],
            rest,
        ),
        _ => (256, vec![7], data),
    };
    let output = internals::drive_session(stream, &pieces, max);

    // What the stream asks: requests (with what each must be answered), cancellations.
    let mut requests: Vec<(Value, Option<String>, Option<Value>)> = Vec::new();
    let mut cancelled: Vec<Value> = Vec::new();
    for line in reference_split(stream, max).into_iter().flatten() {
        let items = match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Array(items)) if !items.is_empty() => items,
            Ok(value) => vec![value],
            Err(_) => continue,
        };
        for value in &items {
            match expect(value) {
                Expect::Request { id, method, params } => requests.push((id, Some(method), params)),
                Expect::Notification { method, params } if method == "notifications/cancelled" => {
                    if let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) {
                        cancelled.push(id.clone());
                    }
                }
                Expect::Invalid { id } if !id.is_null() => {
                    requests.push((id, None, None));
                }
                _ => {}
            }
        }
    }

    let mut answered: Vec<Value> = Vec::new();
    for line in output.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let reply: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!(
                "output line is not JSON ({e}): {}",
                String::from_utf8_lossy(line)
            )
        });
        assert!(
            reply.get("result").is_some() != reply.get("error").is_some(),
            "a response needs exactly one of result and error: {reply}"
        );
        let id = reply.get("id").cloned().unwrap_or(Value::Null);
        if id.is_null() {
            continue; // the answer to a line whose id could not be read
        }
        let sent: Vec<_> = requests.iter().filter(|(r, _, _)| *r == id).collect();
        assert!(!sent.is_empty(), "an answer to an id nobody sent: {reply}");
        if let [(_, method, params)] = sent[..] {
            check_scripted(method.as_deref(), params.as_ref(), &reply);
        }
        answered.push(id);
    }
    let ids: Vec<Value> = requests.iter().map(|(id, _, _)| id.clone()).collect();
    check_answer_counts(&ids, &answered, &cancelled);
}

/// The scripted handler's answer to one request (`None`: an invalid request).
fn check_scripted(method: Option<&str>, params: Option<&Value>, reply: &Value) {
    let Some(method) = method else {
        assert!(
            reply.get("error").is_some(),
            "an invalid request got a result: {reply}"
        );
        return;
    };
    let params = params.cloned().unwrap_or(Value::Null);
    if method == "later" && params == Value::String("drop".to_owned()) {
        assert_eq!(reply["error"]["code"], -32603, "{reply}");
    } else {
        assert_eq!(reply.get("result"), Some(&params), "{reply}");
    }
}
