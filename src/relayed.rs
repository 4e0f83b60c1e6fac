//! Lines read for a relay (`mcpipe wrap`), which forwards each line as it came: the envelope
//! is checked exactly as [`parse_line`] checks it, but the params of a request or a
//! notification are only validated as JSON, not built into a `Value`, unless the relay (or the
//! loop, for cancellations) needs them. Building them was a third of the relay's work.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::message::{classify_members, parse_line, Message, Parsed};

/// Parses one line for a relay. A request or notification whose method `needs_params` refuses
/// comes back with `params: None` (its line holds them, validated); everything else (other
/// methods, responses, batches, anything unusual or invalid) is [`parse_line`]'s.
pub(crate) fn parse_relayed(bytes: &[u8], needs_params: impl Fn(&str) -> bool) -> Parsed {
    lazily(bytes, needs_params).unwrap_or_else(|| parse_line(bytes))
}

fn lazily(bytes: &[u8], needs_params: impl Fn(&str) -> bool) -> Option<Parsed> {
    // Member names with escapes, another JSON type, invalid JSON: the full path decides.
    let members = serde_json::from_slice::<BTreeMap<&str, &RawValue>>(bytes).ok()?;
    let method = serde_json::from_str::<&str>(members.get("method")?.get()).ok()?;
    if needs_params(method) {
        return None;
    }
    let mut envelope = BTreeMap::new();
    for (name, raw) in members {
        let value = if name == "params" {
            if !reads_as_a_value_would(raw.get().as_bytes()) {
                return None;
            }
            // Its kind is all the classification reads: an empty stand-in of that kind.
            match raw.get().trim_start().as_bytes().first() {
                Some(b'{') => Value::Object(Map::new()),
                Some(b'[') => Value::Array(Vec::new()),
                _ => return None,
            }
        } else {
            serde_json::from_str(raw.get()).ok()?
        };
        envelope.insert(name, value);
    }
    Some(match classify_members(envelope) {
        Ok(Message::Request(mut request)) => {
            request.params = None;
            Parsed::Single(Message::Request(request))
        }
        Ok(Message::Notification(mut notification)) => {
            notification.params = None;
            Parsed::Single(Message::Notification(notification))
        }
        // A method makes it a request or a notification, or an error: not reached.
        Ok(other) => Parsed::Single(other),
        Err(response) => Parsed::Invalid(response),
    })
}

/// Validating params as JSON text accepts what building a `Value` refuses in two cases: a
/// lone surrogate escape (`"\ud800"`) and nesting deeper than serde_json's limit of 128. Such
/// params take the full path, which refuses them as before: every `\u` escape (rare in
/// practice) and more than [`MAX_OPENINGS`] brackets (counted in strings too, so never fewer
/// than the depth).
fn reads_as_a_value_would(params: &[u8]) -> bool {
    memchr::memmem::find(params, b"\\u").is_none()
        && memchr::memchr2_iter(b'{', b'[', params)
            .take(MAX_OPENINGS + 1)
            .count()
            <= MAX_OPENINGS
}

/// Below serde_json's recursion limit (128) with the envelope's own level to spare.
const MAX_OPENINGS: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

    fn initialize_only(method: &str) -> bool {
        method == "initialize"
    }

    /// A classification with params dropped where the relay may drop them (it keeps them
    /// where it falls back to the full path, which is just as right).
    fn without_params(parsed: Parsed) -> String {
        match parsed {
            Parsed::Single(Message::Request(mut r)) if r.method != "initialize" => {
                r.params = None;
                format!("{:?}", Parsed::Single(Message::Request(r)))
            }
            Parsed::Single(Message::Notification(mut n)) if n.method != "initialize" => {
                n.params = None;
                format!("{:?}", Parsed::Single(Message::Notification(n)))
            }
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn every_line_is_classified_as_the_full_path_classifies_it() {
        let lines: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{ "params" : [1,2] , "method":"m", "jsonrpc":"2.0", "id":"s" }"#,
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":[{"b":null}]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":3}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            r#"{"id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m\u0041"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1},"params":[2]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}} trailing"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","\u0070arams":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","result":1}"#,
            r#""just a string""#,
            r#"{"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":["\ud800"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":["\u00e9\ud83d\ude00"]}"#,
        ];
        for line in lines {
            let relayed = parse_relayed(line.as_bytes(), initialize_only);
            let full = parse_line(line.as_bytes());
            assert_eq!(without_params(relayed), without_params(full), "{line}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let brackets_in_text = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"t":"{}"}}}}"#,
            "[".repeat(200)
        );
        for line in [deep, brackets_in_text] {
            let relayed = parse_relayed(line.as_bytes(), initialize_only);
            assert_eq!(
                without_params(relayed),
                without_params(parse_line(line.as_bytes()))
            );
        }
        let bad_utf8 =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}";
        assert_eq!(
            without_params(parse_relayed(bad_utf8, initialize_only)),
            without_params(parse_line(bad_utf8))
        );
    }

    #[test]
    fn params_are_left_unbuilt_only_where_not_needed() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        let Parsed::Single(Message::Request(r)) = parse_relayed(line, |_| false) else {
            panic!("a request");
        };
        assert_eq!(r.params, None);
        let Parsed::Single(Message::Request(r)) = parse_relayed(line, |m| m == "tools/call") else {
            panic!("a request");
        };
        assert_eq!(r.params, Some(serde_json::json!({"name": "echo"})));
    }
}
