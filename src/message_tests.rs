//! Unit tests of `message.rs`: parsing lines (both readers), classification, ids, writing.

use super::*;
use serde_json::json;

fn error_of(bytes: &[u8]) -> (Option<RequestId>, ErrorCode) {
    let r = Message::from_slice(bytes).unwrap_err();
    (r.id, r.result.unwrap_err().code)
}

#[test]
fn request_notification_and_response_are_told_apart() {
    let m = Message::from_slice(br#"{"jsonrpc":"2.0","id":"a","method":"m","params":{}}"#);
    assert!(matches!(m, Ok(Message::Request(_))));
    let m = Message::from_slice(br#"{"jsonrpc":"2.0","method":"m"}"#);
    assert!(matches!(m, Ok(Message::Notification(_))));
    let m = Message::from_slice(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#);
    assert!(matches!(
        m,
        Ok(Message::Response(Response { result: Ok(_), .. }))
    ));
    let m = Message::from_slice(
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
    );
    assert!(matches!(
        m,
        Ok(Message::Response(Response {
            id: None,
            result: Err(_)
        }))
    ));
}

#[test]
fn invalid_json_and_invalid_utf8_are_parse_errors_with_null_id() {
    assert_eq!(error_of(b"{"), (None, ErrorCode::PARSE_ERROR));
    assert_eq!(error_of(b"\"\xff\""), (None, ErrorCode::PARSE_ERROR));
    assert_eq!(error_of(br#""\ud800""#), (None, ErrorCode::PARSE_ERROR));
}

#[test]
fn invalid_requests_keep_their_id_when_it_can_be_read() {
    let cases: &[(&[u8], Option<RequestId>)] = &[
        (br#"{"jsonrpc":"2.0","id":5}"#, Some(5.into())),
        (br#"{"jsonrpc":"1.0","id":5,"method":"m"}"#, Some(5.into())),
        (br#"{"id":"x","method":"m"}"#, Some("x".into())),
        (br#"{"jsonrpc":"2.0","id":7,"method":3}"#, Some(7.into())),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"m","params":"s"}"#,
            Some(7.into()),
        ),
        (
            br#"{"jsonrpc":"2.0","id":7,"result":1,"error":{"code":1,"message":"m"}}"#,
            Some(7.into()),
        ),
        (br#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, None),
        (br#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#, None),
        (br#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, None),
        (br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#, None),
        (br#"{"jsonrpc":"2.0","id":null,"method":"m"}"#, None),
        (br#"{"jsonrpc":"2.0","method":"m"},"#, None),
        (b"42", None),
        (b"null", None),
        (br#"{"foo":"bar"}"#, None),
    ];
    for (line, id) in cases {
        let r = Message::from_slice(line);
        let Err(response) = r else {
            // The trailing-comma case is a parse error, checked separately.
            panic!("{} was accepted", String::from_utf8_lossy(line));
        };
        assert_eq!(&response.id, id, "{}", String::from_utf8_lossy(line));
    }
    assert_eq!(
        error_of(br#"{"jsonrpc":"2.0","id":7,"method":3}"#).1,
        ErrorCode::INVALID_REQUEST
    );
}

#[test]
fn ids_round_trip_exactly() {
    for raw in [
        r#"0"#,
        r#"-1"#,
        r#"9007199254740993"#,
        r#"18446744073709551615"#,
        r#"-9223372036854775808"#,
        r#""a\"b\\c\n""#,
        r#""""#,
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"m"}}"#);
        let Ok(Message::Request(r)) = Message::from_slice(line.as_bytes()) else {
            panic!("{line} not a request");
        };
        let out = Message::Response(Response::ok(r.id, json!({}))).to_line();
        let back: Value = serde_json::from_slice(&out).unwrap();
        let want: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(back["id"], want, "{raw}");
        let text = String::from_utf8(out).unwrap();
        if !raw.starts_with('"') {
            assert!(text.contains(&format!("\"id\":{raw}")), "{text}");
        }
    }
}

#[test]
fn written_lines_have_exactly_one_newline_at_the_end() {
    let m = Message::Notification(Notification {
        method: "a\nb".into(),
        params: Some(json!({"text": "line1\nline2\r\n"})),
    });
    let line = m.to_line();
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(line.last(), Some(&b'\n'));
    assert_eq!(Message::from_slice(&line[..line.len() - 1]).unwrap(), m);
}

#[test]
fn empty_batch_is_one_invalid_request() {
    let Parsed::Invalid(r) = parse_line(b"[]") else {
        panic!("empty batch accepted")
    };
    assert_eq!(r.id, None);
    assert_eq!(r.result.unwrap_err().code, ErrorCode::INVALID_REQUEST);
}

#[test]
fn batch_elements_are_classified_one_by_one() {
    let Parsed::Batch(items) =
        parse_line(br#"[{"jsonrpc":"2.0","id":1,"method":"a"},1,{"jsonrpc":"2.0","method":"n"}]"#)
    else {
        panic!("not a batch")
    };
    assert!(matches!(items[0], Ok(Message::Request(_))));
    assert!(items[1].is_err());
    assert!(matches!(items[2], Ok(Message::Notification(_))));
}

#[test]
fn the_lazy_envelope_decides_and_words_errors_as_the_value_path() {
    let lines: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        br#"{"jsonrpc":"2.0","id":1,"id":"two","method":"m"}"#,
        br#"{"jsonrpc":"2.0","method":"a","method":"b","params":[1],"params":{}}"#,
        br#"{"jsonrpc":"2.0","id":"x","result":1,"result":{"a":2}}"#,
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#,
        br#"{"jsonrpc":"2.0","id":7,"error":{"code":1.5,"message":"m"}}"#,
        br#"{"jsonr\u0070c":"2.0","id":1,"method":"m"}"#,
        br#"{"jsonrpc":"2\u002e0","id":1,"method":"m\n"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"m","params":"s"}"#,
        br#"{"jsonrpc":"2.0","id":1,"jsonrpc":"1.0","method":"m"}"#,
        br#"{"jsonrpc":"1.0","id":1,"jsonrpc":"2.0","method":"m"}"#,
        br#"{"jsonrpc":"2.0","jsonrpc":null,"method":"m"}"#,
        br#"{ "jsonrpc" : "2.0" , "method":"m"}"#,
        br#"{"jsonrpc":"2.0 ","method":"m"}"#,
        br#"{"jsonrpc":"2.00","method":"m"}"#,
        br#"{"jsonrpc":2.0,"method":"m"}"#,
        br#"{"jsonrpc":"2.0"#,
        br#"{"id":1,"method":"m"}"#,
        br#"{"jsonrpc":"2.0","id":1.0,"method":"m"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"m","#,
        br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#,
        br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"t":"\u00e9\ud83d\ude00"}}"#,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
        br#"{}"#,
        br#"[]"#,
        br#"[{"jsonrpc":"2.0","method":"m"},{"jsonrpc":"2.0","id":2}]"#,
        b"7",
        b"",
    ];
    for line in lines {
        assert_eq!(
            format!("{:?}", parse_line(line)),
            format!("{:?}", parse_line_by_value(line)),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    // The common case and duplicate names take the lazy path; an escaped name does not.
    assert!(classify_envelope(lines[0], None).is_some());
    assert!(classify_envelope(lines[1], None).is_some());
    assert!(classify_envelope(lines[6], None).is_none());
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut line = Vec::new();
    line.extend(std::iter::repeat_n(b'[', 100_000));
    line.extend(std::iter::repeat_n(b']', 100_000));
    assert!(matches!(parse_line(&line), Parsed::Invalid(_)));
}

const CALL: ParamsApart = ParamsApart {
    method: "tools/call",
    names: ["name", "arguments"],
    object_text: Some(1),
};

/// `parse_line_apart` with the members read apart put back into the params: it must give
/// what `parse_line` gives, whichever way the line was read.
fn put_back(line: &str) -> (String, bool) {
    let (mut parsed, apart) = parse_line_apart(line.as_bytes(), Some(CALL));
    let read_apart = apart.is_some();
    if let (Parsed::Single(Message::Request(request)), Some(apart)) = (&mut parsed, apart) {
        let Some(Value::Object(params)) = &mut request.params else {
            panic!("params read apart are an object: {line}");
        };
        for (name, value) in CALL.names.iter().zip(*apart) {
            if let Some(value) = value {
                params.insert((*name).to_owned(), value.into_value());
            }
        }
    }
    (format!("{parsed:?}"), read_apart)
}

#[test]
fn members_read_apart_put_back_give_the_params_parse_line_gives() {
    let apart: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"arguments":{},"_meta":{"progressToken":3},"name":"e"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0065cho","task":{"ttl":5}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,"arguments":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":null}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b","x":1,"x":2}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a"},"id":9}"#,
        r#"{ "jsonrpc" : "2.0" , "id" : 1 , "method" : "tools/call" , "params" : { "name" : "a" } }"#,
        // Arguments kept as text: duplicates, escapes, nesting, whitespace, numbers of all kinds.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":"two","y\u0031":"\ud83d\ude00\n"}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{ "a" : [ 1.5e3 , -0 , 18446744073709551615, {"b":{}} ] },"arguments":{"c":true}}}"#,
    ];
    let whole: &[&str] = &[
        // Not the method, the method after the params, or changed after them.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"a"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"params":{"name":"a"},"method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"method":"x"}"#,
        // No id: a notification keeps its params whole.
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a"}}"#,
        // Params that are no object, or an object read whole after one read apart.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[{"name":"a"}]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":[1]}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1],"params":{"name":"a"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"s"}"#,
        // A member name with an escape, serde_json's raw-value name, a batch, bad JSON.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"a"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"$serde_json::private::RawValue":1}}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a",}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"a"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"a"}}"#,
    ];
    for (lines, expected) in [(apart, true), (whole, false)] {
        for line in lines {
            let (put_back, read_apart) = put_back(line);
            assert_eq!(
                put_back,
                format!("{:?}", parse_line(line.as_bytes())),
                "{line}"
            );
            assert_eq!(read_apart, expected, "{line}");
        }
    }
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{}1{}}}}}"#,
        "[".repeat(150),
        "]".repeat(150)
    );
    let (put_back, _) = put_back(&deep);
    assert_eq!(put_back, format!("{:?}", parse_line(deep.as_bytes())));
}

#[test]
fn members_read_apart_leave_the_others_in_the_params() {
    let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"t":1},"_meta":{}}}"#;
    let (Parsed::Single(Message::Request(request)), Some(apart)) =
        parse_line_apart(line, Some(CALL))
    else {
        panic!("read apart");
    };
    let [name, arguments] = *apart;
    assert_eq!(request.params, Some(json!({"_meta": {}})));
    assert_eq!(name, Some(ApartMember::Value(json!("e"))));
    let Some(ApartMember::ObjectText(text)) = arguments else {
        panic!("kept as text");
    };
    assert_eq!(text.text, r#"{"t":1}"#);
}

#[test]
fn arguments_are_kept_as_text_on_a_short_line_only_and_only_when_an_object() {
    let arguments_of = |line: &str| {
        let (parsed, apart) = parse_line_apart(line.as_bytes(), Some(CALL));
        assert!(matches!(parsed, Parsed::Single(_)), "{line}");
        let [_, arguments] = *apart.expect("read apart");
        arguments
    };
    let call = |arguments: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"e","arguments":{arguments}}}}}"#
        )
    };
    // As written (whitespace inside kept), escapes and all: nothing is decoded.
    let text = r#"{ "t" : "a\nb", "n\u0061me": [1, {"x": null}] }"#;
    assert!(
        matches!(arguments_of(&call(text)), Some(ApartMember::ObjectText(t)) if t.text == text)
    );
    assert_eq!(
        arguments_of(&call("[1]")),
        Some(ApartMember::Value(json!([1])))
    );
    assert_eq!(
        arguments_of(&call("null")),
        Some(ApartMember::Value(Value::Null))
    );
    // A line over the bound builds them: a long string is then moved to the tool, not copied.
    let long = "x".repeat(OBJECT_TEXT_LINE);
    let line = call(&format!(r#"{{"t":"{long}"}}"#));
    assert_eq!(
        arguments_of(&line),
        Some(ApartMember::Value(json!({ "t": long })))
    );
    // Text the reader would decline is declined whole: serde_json reads the line.
    let (_, apart) = parse_line_apart(call(r#"{"t":01}"#).as_bytes(), Some(CALL));
    assert!(apart.is_none());
}
