//! Multi-round-trip requests (MCP 2026-07-28, "input required"): what a handler asked the
//! client for, what the client answered, and the integrity-protected `requestState` that
//! carries earlier answers from one round to the next.
//!
//! # How a handler is re-run
//! The layer runs the handler from the start in every round. Each input it asks for
//! ([`McpContext::input`](crate::McpContext::input)) is looked up by key among the answers:
//! those the client sends with the retry (`inputResponses`) and those of earlier rounds,
//! which travel in `requestState`. A missing one is recorded and the round ends with
//! `{"resultType":"input_required","inputRequests":{..},"requestState":".."}`.
//!
//! # `requestState`: format and threat model
//! `mcpipe1.<tag>.<json>`: the JSON holds the earlier answers and the handler's own round
//! state; `<tag>` is a 128-bit keyed MAC (two SipHash-1-3 runs, std's `RandomState`, with keys
//! drawn at random once per process) over a domain string, the request's method and target,
//! its arguments and the JSON. So:
//! - a client (or anyone on the path) cannot forge or alter a state: any change of the JSON,
//!   or reuse for another tool, prompt, resource or other arguments, fails verification and
//!   the retry gets `-32602`. A forgery has to guess a 128-bit tag; each wrong guess costs a
//!   round trip and gives nothing away.
//! - the state is not secret: the client can read it (it holds its own answers and whatever
//!   the handler saved with `set_round_state`; do not put secrets there).
//! - it is not single-use: the same state can be replayed within the process's life. It only
//!   ever lets a client resume a call it was really in the middle of.
//! - the key dies with the process, so a state from an earlier process (a restarted server)
//!   is rejected with `-32602` and the client must start the call again.
//!
//! SipHash is a keyed pseudo-random function designed for exactly this use (short inputs,
//! secret 128-bit key); it is not a standard HMAC, and std does not promise which hash
//! `RandomState` uses. That is fine for integrity within one process, which is all this needs.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::message::ErrorObject;

const PREFIX: &str = "mcpipe1.";

/// The two per-process MAC keys.
fn keys() -> &'static (RandomState, RandomState) {
    static KEYS: OnceLock<(RandomState, RandomState)> = OnceLock::new();
    KEYS.get_or_init(|| (RandomState::new(), RandomState::new()))
}

fn tag(binding: &str, payload: &str) -> String {
    let (a, b) = keys();
    let run = |key: &RandomState, domain: u8| {
        let mut h = key.build_hasher();
        h.write(b"mcpipe request state v1");
        h.write_u8(domain);
        // Length-prefixed, so that the split between binding and payload is unambiguous.
        h.write_u64(binding.len() as u64);
        h.write(binding.as_bytes());
        h.write_u64(payload.len() as u64);
        h.write(payload.as_bytes());
        h.finish()
    };
    format!("{:016x}{:016x}", run(a, 1), run(b, 2))
}

/// Compares two tags without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// What identifies one call across its rounds: method, target (tool or prompt name, resource
/// URI) and arguments.
pub(crate) fn binding(method: &str, target: &str, arguments: &Value) -> String {
    format!("{method}\n{target}\n{arguments}")
}

/// [`binding`] of an arguments object, without wrapping (cloning) it into a [`Value`]: the
/// same bytes as `binding(method, target, &Value::Object(arguments.clone()))`.
pub(crate) fn binding_of_map(method: &str, target: &str, arguments: &Map<String, Value>) -> String {
    let mut out = format!("{method}\n{target}\n").into_bytes();
    // Serialising a map of `Value`s into a `Vec` cannot fail (string keys, infallible writes).
    serde_json::to_writer(&mut out, arguments).expect("serialising a Map into a Vec cannot fail");
    // serde_json writes UTF-8, and the prefix came from `&str`s.
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The inputs of one round: answers known so far, what is still missing, and the handler's
/// own state. Most calls have none (every call of the handshake era): their inputs are never
/// allocated, so such a call does not make, move and drop four empty maps (0.3 k instructions
/// of a small `tools/call`). The inputs read as empty until written ([`Inputs`] through
/// `Deref` / `DerefMut`).
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    /// The round number: 1 for a call without `requestState`.
    pub(crate) round: u32,
    inputs: Option<Box<Inputs>>,
}

/// What a round knows and asks for, allocated on the first write.
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    /// Answers by key: earlier rounds' (from `requestState`) and this retry's.
    pub(crate) answers: Map<String, Value>,
    /// Requests the handler asked for and found no answer to, by key.
    pub(crate) pending: Map<String, Value>,
    /// The handler's state from the previous round.
    pub(crate) saved: Option<Value>,
    /// The state to carry into the next round (starts as `saved`).
    pub(crate) to_save: Option<Value>,
    /// The capabilities a request the handler needed wanted and the client did not declare,
    /// as a `ClientCapabilities` object (`{"sampling":{}}`).
    pub(crate) missing_capability: Option<Value>,
    /// Per-method counters for keys made up by `elicit`, `create_message` and `list_roots`.
    pub(crate) counters: Map<String, Value>,
}

impl std::ops::Deref for Rounds {
    type Target = Inputs;

    fn deref(&self) -> &Inputs {
        static NONE: std::sync::OnceLock<Inputs> = std::sync::OnceLock::new();
        match &self.inputs {
            Some(inputs) => inputs,
            None => NONE.get_or_init(Inputs::default),
        }
    }
}

impl std::ops::DerefMut for Rounds {
    fn deref_mut(&mut self) -> &mut Inputs {
        self.inputs.get_or_insert_with(Box::default)
    }
}

impl Rounds {
    /// The first round of a call, no inputs yet.
    pub(crate) fn first() -> Rounds {
        Rounds {
            round: 1,
            inputs: None,
        }
    }

    /// Reads `inputResponses` and `requestState` from a modern request.
    ///
    /// # Errors
    /// `-32602` when either is malformed or the state fails verification.
    pub(crate) fn from_params(
        params: &Map<String, Value>,
        binding: &str,
    ) -> Result<Rounds, ErrorObject> {
        let mut rounds = Rounds::first();
        match params.get("requestState") {
            None => {}
            Some(Value::String(state)) => {
                let (answers, saved, round) = open(state, binding)?;
                rounds.answers = answers;
                rounds.saved = saved.clone();
                rounds.to_save = saved;
                rounds.round = round.saturating_add(1);
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: \"requestState\" must be a string",
                ))
            }
        }
        match params.get("inputResponses") {
            None => {}
            Some(Value::Object(responses)) => {
                for (key, response) in responses {
                    if !response.is_object() {
                        return Err(ErrorObject::invalid_params(format!(
                            "invalid params: inputResponses[{key:?}] must be an object (the \
                             result of the request that was asked for)"
                        ))
                        .with_data(json!({ "key": key })));
                    }
                    rounds.answers.insert(key.clone(), response.clone());
                }
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: \"inputResponses\" must be an object",
                ))
            }
        }
        Ok(rounds)
    }

    /// The next made-up key for `method` in this round: `elicitation-1`, `elicitation-2`, ...
    /// The same calls in the same order give the same keys in every round.
    pub(crate) fn next_key(&mut self, prefix: &str) -> String {
        let n = self
            .counters
            .get(prefix)
            .and_then(Value::as_u64)
            .unwrap_or(0)
            + 1;
        self.counters.insert(prefix.to_owned(), json!(n));
        format!("{prefix}-{n}")
    }

    /// The `input_required` result for the pending requests, with a fresh `requestState`
    /// holding every answer so far.
    pub(crate) fn input_required(&self, binding: &str) -> Value {
        let state = seal(binding, &self.answers, self.to_save.as_ref(), self.round);
        json!({
            "resultType": "input_required",
            "inputRequests": Value::Object(self.pending.clone()),
            "requestState": state,
        })
    }
}

/// Seals answers and saved state into a `requestState` string.
pub(crate) fn seal(
    binding: &str,
    answers: &Map<String, Value>,
    saved: Option<&Value>,
    round: u32,
) -> String {
    let mut payload = Map::new();
    payload.insert("answers".into(), Value::Object(answers.clone()));
    if let Some(saved) = saved {
        payload.insert("saved".into(), saved.clone());
    }
    payload.insert("round".into(), json!(round));
    let payload = Value::Object(payload).to_string();
    format!("{PREFIX}{}.{payload}", tag(binding, &payload))
}

type Opened = (Map<String, Value>, Option<Value>, u32);

/// Verifies and opens a `requestState`.
///
/// # Errors
/// `-32602` when it was not made by this process for this call, or was altered.
pub(crate) fn open(state: &str, binding: &str) -> Result<Opened, ErrorObject> {
    let invalid = || {
        ErrorObject::invalid_params(
            "invalid params: \"requestState\" failed its integrity check (altered, made for \
             another call, or made by an earlier server process); start the call again without it",
        )
    };
    let rest = state.strip_prefix(PREFIX).ok_or_else(invalid)?;
    let (got, payload) = rest.split_once('.').ok_or_else(invalid)?;
    if !same(got, &tag(binding, payload)) {
        return Err(invalid());
    }
    let Ok(Value::Object(mut payload)) = serde_json::from_str::<Value>(payload) else {
        return Err(invalid());
    };
    let Some(Value::Object(answers)) = payload.remove("answers") else {
        return Err(invalid());
    };
    let round = payload
        .get("round")
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
        .ok_or_else(invalid)?;
    Ok((answers, payload.remove("saved"), round))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers() -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("a".into(), json!({ "action": "accept" }));
        m
    }

    #[test]
    fn a_sealed_state_opens_for_the_same_call_only() {
        let b = binding("tools/call", "t", &json!({ "x": 1 }));
        let state = seal(&b, &answers(), Some(&json!("mine")), 2);
        let (got, saved, round) = open(&state, &b).unwrap();
        assert_eq!(got, answers());
        assert_eq!(saved, Some(json!("mine")));
        assert_eq!(round, 2);
        let other = binding("tools/call", "t", &json!({ "x": 2 }));
        assert!(open(&state, &other).is_err());
        let other = binding("prompts/get", "t", &json!({ "x": 1 }));
        assert!(open(&state, &other).is_err());
    }

    #[test]
    fn any_change_to_a_state_is_rejected() {
        let b = binding("tools/call", "t", &json!({}));
        let state = seal(&b, &answers(), None, 1);
        let tampered = [
            format!("{state}-TAMPERED"),
            state.replace("accept", "decline"),
            state.replacen('0', "1", 1),
            state[..state.len() - 1].to_owned(),
            String::new(),
            "mcpipe1.".to_owned(),
            "mcpipe1.00.{}".to_owned(),
        ];
        for t in tampered {
            if t != state {
                assert!(open(&t, &b).is_err(), "{t}");
            }
        }
    }

    #[test]
    fn a_binding_of_a_map_is_the_binding_of_its_value() {
        let args = json!({ "b": [1, "x\n"], "a": { "z": null }, "c": 1.5 });
        let map = args.as_object().unwrap();
        assert_eq!(
            binding_of_map("tools/call", "t", map),
            binding("tools/call", "t", &args)
        );
        assert_eq!(
            binding_of_map("prompts/get", "p", &Map::new()),
            binding("prompts/get", "p", &json!({}))
        );
    }

    #[test]
    fn a_round_without_inputs_allocates_none_until_one_is_written() {
        let mut rounds = Rounds::first();
        assert!(rounds.pending.is_empty() && rounds.answers.is_empty() && rounds.saved.is_none());
        assert!(rounds.inputs.is_none(), "reading allocated the inputs");
        rounds.pending.insert("k".into(), json!({}));
        assert!(rounds.inputs.is_some());
        assert_eq!(rounds.pending.len(), 1);
        assert!(
            Rounds::first().answers.is_empty(),
            "another round saw this one's inputs"
        );
    }

    #[test]
    fn made_up_keys_repeat_in_the_same_order() {
        let mut r = Rounds::default();
        assert_eq!(r.next_key("elicitation"), "elicitation-1");
        assert_eq!(r.next_key("elicitation"), "elicitation-2");
        assert_eq!(r.next_key("sampling"), "sampling-1");
    }
}
