//! Lines read for a relay (`mcpipe wrap`), which forwards each line as it came: the envelope
//! is read as [`parse_line`] reads it (to the same outcome), but the params of a request or a
//! notification are only checked as JSON text ([`json_read::top_level_spans`]), not built
//! into a `Value`, unless the relay (or the loop, for cancellations) needs them. Params are
//! judged by the JSON grammar (RFC 8259), so a value past serde_json's limits (a number past
//! `f64`, nesting past 128) is forwarded where [`parse_line`] would refuse the line: the
//! server behind the relay decides what it can read.

use crate::json_read;
use crate::message::{parse_line, Message, Notification, Parsed, Request, RequestId};

/// Parses one line for a relay. A request or notification whose method `needs_params` refuses
/// comes back with `params: None` (its line holds them, validated); everything else (other
/// methods, responses, batches, anything unusual or invalid) is [`parse_line`]'s.
pub(crate) fn parse_relayed(bytes: &[u8], needs_params: impl Fn(&str) -> bool) -> Parsed {
    lazily(bytes, needs_params).unwrap_or_else(|| parse_line(bytes))
}

fn lazily(bytes: &[u8], needs_params: impl Fn(&str) -> bool) -> Option<Parsed> {
    // Anything but the four members of a request or notification, each once and plainly
    // written, and anything the reader declines: the full path decides (and words
    // the errors).
    let members = json_read::top_level_spans(bytes)?;
    let [mut jsonrpc, mut id, mut method, mut params] = [None; 4];
    for member in members.iter() {
        let slot = match member.name {
            "jsonrpc" => &mut jsonrpc,
            "id" => &mut id,
            "method" => &mut method,
            "params" => &mut params,
            _ => return None,
        };
        if slot.replace(member.value).is_some() {
            return None;
        }
    }
    if jsonrpc? != "\"2.0\"" {
        return None;
    }
    let method = json_read::plain_string(method?)?;
    if needs_params(method) {
        return None;
    }
    // Only the kind of params is checked: an object or an array.
    if params.is_some_and(|p| !p.starts_with(['{', '['])) {
        return None;
    }
    let method = method.to_owned();
    Some(Parsed::Single(match id {
        None => Message::Notification(Notification {
            method,
            params: None,
        }),
        Some(id) => Message::Request(Request {
            id: plain_id(id)?,
            method,
            params: None,
        }),
    }))
}

/// An id written as a string without escapes or as an integer that fits an `i64` (as
/// serde_json reads it); `None` for anything else, which the full path judges.
pub(crate) fn plain_id(text: &str) -> Option<RequestId> {
    if let Some(s) = json_read::plain_string(text) {
        return Some(RequestId::from(s));
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    // `-0` is a float to serde_json; 18 digits always fit.
    if digits.is_empty() || digits.len() > 18 || (digits != text && digits.starts_with('0')) {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok().map(RequestId::from)
}

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
            r#"{"jsonrpc":"2.0","id":-0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":0,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":999999999999999999,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"","method":"m","extra":{"x":1}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":[]}"#,
            r#"{"jsonrpc": "2.0" ,"method":"m","id":1,"id":2}"#,
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
        let relayed = parse_relayed(brackets_in_text.as_bytes(), initialize_only);
        assert_eq!(
            without_params(relayed),
            without_params(parse_line(brackets_in_text.as_bytes()))
        );
        // Past serde_json's nesting limit but valid JSON: forwarded, where the full path
        // refuses the line.
        let relayed = without_params(parse_relayed(deep.as_bytes(), initialize_only));
        assert!(relayed.starts_with("Single(Request("), "{relayed}");
        assert!(matches!(parse_line(deep.as_bytes()), Parsed::Invalid(_)));
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
