//! `message`: one line classified as the JSON-RPC 2.0 rules (with MCP's ids) say, by every
//! reading the crate has (the lazy envelope, the `Value` path, a relay's, the MCP server's
//! with a call's members apart); every error a valid JSON-RPC error with the right id;
//! accepted messages stable through write, parse, write.

use mcpipe::internals::{self, Classified};
use mcpipe::{ErrorCode, Message, Response};
use serde_json::{Map, Value};

use super::json_grammar::is_json;
use super::{check_error_value, expect, Expect};

/// `message`: any line classifies without panicking, as the rules say; every error response is
/// a valid JSON-RPC 2.0 error with the right id; accepted messages survive write → parse →
/// write unchanged.
pub(crate) fn message(line: &[u8]) {
    let classified = internals::classify(line);
    // The lazy envelope decides, and words every error, exactly as a `Value` for the whole line.
    assert!(
        same_classification(&classified, &internals::classify_by_value(line)),
        "the lazy envelope and the Value path disagree on {:?}",
        String::from_utf8_lossy(line)
    );
    // The MCP layer's reading, a call's name and arguments apart, put back: the same again.
    assert!(
        same_classification(&classified, &internals::classify_apart(line)),
        "reading a call's members apart changed {:?}",
        String::from_utf8_lossy(line)
    );
    check_relayed(line);
    check_scan(line);
    check_arguments(line);
    let single = |c: Classified| match c {
        Classified::Single(r) => r,
        Classified::Batch(items) => panic!("a non-array line was classified as a batch {items:?}"),
    };
    match serde_json::from_slice::<Value>(line) {
        Err(_) => {
            let response = single(classified).expect_err("bytes that are not JSON were accepted");
            check_error_response(&response, ErrorCode::PARSE_ERROR, &Value::Null);
        }
        Ok(Value::Array(items)) if items.is_empty() => {
            let response = single(classified).expect_err("an empty batch was accepted");
            check_error_response(&response, ErrorCode::INVALID_REQUEST, &Value::Null);
        }
        Ok(Value::Array(items)) => {
            let Classified::Batch(got) = classified else {
                panic!("an array was not classified as a batch");
            };
            assert_eq!(got.len(), items.len(), "a batch lost or gained elements");
            for (item, got) in items.iter().zip(got) {
                check_classified(item, got);
            }
        }
        Ok(value) => check_classified(&value, single(classified)),
    }
}

/// A `tools/call`'s arguments kept as text answer every getter as their map does.
fn check_arguments(line: &[u8]) {
    let (_, Some(apart)) = internals::classify_call(line) else {
        return;
    };
    if !apart.arguments_as_text() {
        return;
    }
    let mut from_text = apart
        .arguments()
        .expect("arguments kept as text are an object");
    let Ok(Value::Object(line)) = serde_json::from_slice::<Value>(line) else {
        panic!("arguments were kept as text on a line serde_json refuses");
    };
    let Some(Value::Object(params)) = line.get("params") else {
        panic!("arguments were kept as text without params");
    };
    let Some(Value::Object(map)) = params.get("arguments") else {
        panic!("arguments were kept as text that is no object");
    };
    let mut from_map = mcpipe::Arguments::from_map(map.clone());
    let mut names: Vec<&str> = map.keys().map(String::as_str).collect();
    names.push("absent");
    type Getter = fn(&mut mcpipe::Arguments, &str) -> String;
    let getters: [Getter; 5] = [
        |a, n| format!("{:?}", a.optional_string(n)),
        |a, n| format!("{:?}", a.optional_integer(n)),
        |a, n| format!("{:?}", a.optional_number(n)),
        |a, n| format!("{:?}", a.optional_boolean(n)),
        |a, n| format!("{:?}", a.take_string(n)),
    ];
    for name in names {
        for getter in getters {
            assert_eq!(
                getter(&mut from_text, name),
                getter(&mut from_map, name),
                "arguments from text differ on {name}"
            );
        }
    }
    assert_eq!(
        from_text.as_map(),
        from_map.as_map(),
        "what is left differs"
    );
}

/// What the relay's quick scan accepts is JSON by the grammar (RFC 8259, the naive reference)
/// and each member's text too; where serde_json reads the line, the same members. (The scan
/// takes numbers and nesting serde_json cannot hold: the relay forwards the text.)
fn check_scan(line: &[u8]) {
    let Some(members) = internals::scan_members(line) else {
        return;
    };
    let shown = String::from_utf8_lossy(line);
    assert!(
        is_json(line),
        "the scan accepted what is not JSON: {shown:?}"
    );
    for (_, text) in &members {
        assert!(
            is_json(text.as_bytes()),
            "a member's text {text:?} is not JSON"
        );
    }
    let Ok(parsed) = serde_json::from_slice::<Value>(line) else {
        return; // Beyond serde_json's limits (the grammar holds, checked above).
    };
    let Value::Object(object) = parsed else {
        panic!("the scan accepted what is no object: {shown:?}");
    };
    let mut last = Map::new();
    for (name, text) in &members {
        let value: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("a member's text {text:?} is not JSON: {e}"));
        last.insert(name.clone(), value);
    }
    assert_eq!(last, object, "the scan found other members");
}

/// A relay's reading of a line is the loop's, but for params it leaves in the line, and for a
/// request or notification whose params are JSON that serde_json cannot hold: the loop answers
/// that -32700, the relay forwards it as it came.
fn check_relayed(line: &[u8]) {
    let without_params = |c: Classified| match c {
        Classified::Single(Ok(Message::Request(mut r))) => {
            r.params = None;
            Classified::Single(Ok(Message::Request(r)))
        }
        Classified::Single(Ok(Message::Notification(mut n))) => {
            n.params = None;
            Classified::Single(Ok(Message::Notification(n)))
        }
        other => other,
    };
    let relayed = without_params(internals::classify_relayed(line));
    let full = without_params(internals::classify(line));
    let forwarded = matches!(
        relayed,
        Classified::Single(Ok(Message::Request(_) | Message::Notification(_)))
    );
    let refused = matches!(&full, Classified::Single(Err(r))
        if r.result.as_ref().is_err_and(|e| e.code == ErrorCode::PARSE_ERROR));
    if forwarded && refused && is_json(line) {
        return;
    }
    assert!(
        same_classification(&relayed, &full),
        "a relay reads {:?} otherwise: {relayed:?} against {full:?}",
        String::from_utf8_lossy(line)
    );
}

fn same_classification(a: &Classified, b: &Classified) -> bool {
    match (a, b) {
        (Classified::Single(a), Classified::Single(b)) => a == b,
        (Classified::Batch(a), Classified::Batch(b)) => a == b,
        _ => false,
    }
}

fn check_classified(value: &Value, got: Result<Message, Response>) {
    let want = expect(value);
    match (&want, got) {
        (Expect::Invalid { id }, Err(response)) => {
            check_error_response(&response, ErrorCode::INVALID_REQUEST, id);
        }
        (Expect::Request { id, method, params }, Ok(Message::Request(r))) => {
            assert_eq!(&r.id.to_value(), id, "request id changed");
            assert_eq!(&r.method, method, "request method changed");
            assert_eq!(&r.params, params, "request params changed");
            check_round_trip(&Message::Request(r));
        }
        (Expect::Notification { method, params }, Ok(Message::Notification(n))) => {
            assert_eq!(&n.method, method, "notification method changed");
            assert_eq!(&n.params, params, "notification params changed");
            check_round_trip(&Message::Notification(n));
        }
        (Expect::Response { id, ok }, Ok(Message::Response(r))) => {
            let got_id = r.id.as_ref().map_or(Value::Null, |i| i.to_value());
            assert_eq!(&got_id, id, "response id changed");
            assert_eq!(r.result.is_ok(), *ok, "result and error swapped");
            check_round_trip(&Message::Response(r));
        }
        (want, got) => panic!("{value} was classified as {got:?}; the rules say {want:?}"),
    }
}

/// A written line is compact JSON with exactly one `\n`, at its end.
fn check_line_shape(line: &[u8]) {
    assert_eq!(
        line.last(),
        Some(&b'\n'),
        "a written line lacks its newline"
    );
    assert_eq!(
        line.iter().filter(|&&b| b == b'\n').count(),
        1,
        "a written line holds a raw newline"
    );
}

/// An error response is `{"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<string>}}`.
fn check_error_response(response: &Response, code: ErrorCode, id: &Value) {
    let line = Message::Response(response.clone()).to_line();
    check_line_shape(&line);
    let value: Value = serde_json::from_slice(&line).expect("an error response is not JSON");
    check_error_value(&value, code, id);
}

/// What serde_json writes for the message, member by member in the crate's order: the crate
/// writes JSON text itself (for speed), and must give these bytes.
fn reference_line(message: &Message) -> Vec<u8> {
    let json = |v: &Value| serde_json::to_string(v).expect("a Value into a String");
    let mut line = String::from("{\"jsonrpc\":\"2.0\"");
    match message {
        Message::Request(r) => {
            line += &format!(
                ",\"id\":{},\"method\":{}",
                json(&r.id.to_value()),
                json(&r.method.as_str().into())
            );
            if let Some(p) = &r.params {
                line += &format!(",\"params\":{}", json(p));
            }
        }
        Message::Notification(n) => {
            line += &format!(",\"method\":{}", json(&n.method.as_str().into()));
            if let Some(p) = &n.params {
                line += &format!(",\"params\":{}", json(p));
            }
        }
        Message::Response(r) => {
            let id = r.id.as_ref().map_or(Value::Null, |id| id.to_value());
            line += &format!(",\"id\":{}", json(&id));
            match &r.result {
                Ok(result) => line += &format!(",\"result\":{}", json(result)),
                Err(error) => line += &format!(",\"error\":{}", json(&error.to_value())),
            }
        }
    }
    line += "}\n";
    line.into_bytes()
}

/// Write → parse → write gives the same message and the same bytes, and those are the bytes
/// serde_json writes.
fn check_round_trip(message: &Message) {
    let line = message.to_line();
    assert_eq!(
        String::from_utf8_lossy(&line),
        String::from_utf8_lossy(&reference_line(message)),
        "the crate's JSON text is not serde_json's"
    );
    check_line_shape(&line);
    let again = Message::from_slice(&line[..line.len() - 1])
        .unwrap_or_else(|e| panic!("a written message does not parse back: {e:?}"));
    assert_eq!(
        &again, message,
        "a message changed on its way through its own line"
    );
    assert_eq!(again.to_line(), line, "writing a message is not stable");
}
