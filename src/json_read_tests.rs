//! Unit tests of `json_read.rs`: every reading against serde_json's.

use super::*;
use crate::json_text::any_value;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// What serde_json makes of `text` as the top level's members (`None` where it fails).
fn by_serde(text: &str) -> Option<BTreeMap<&str, Value>> {
    serde_json::from_str(text).ok()
}

#[test]
fn a_line_is_text_when_it_is_utf8_whether_or_not_it_is_ascii() {
    // Past two sixteen-byte blocks, with the odd byte in a block and in the tail.
    for len in 1..40 {
        let ascii = "x".repeat(len);
        assert_eq!(line_text(ascii.as_bytes()), Some(ascii.as_str()));
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            crate::sys::ascii_str(ascii.as_bytes()),
            Some(ascii.as_str())
        );
        for at in 0..len {
            let mut text = ascii.clone();
            text.replace_range(at..=at, "é");
            assert_eq!(line_text(text.as_bytes()), Some(text.as_str()));
            #[cfg(target_arch = "x86_64")]
            assert_eq!(crate::sys::ascii_str(text.as_bytes()), None);
            let mut bytes = ascii.clone().into_bytes();
            bytes[at] = 0xff;
            assert_eq!(line_text(&bytes), None, "{bytes:?}");
        }
    }
    assert_eq!(line_text(b""), Some(""));
}

fn ours(text: &str) -> Option<BTreeMap<&str, Value>> {
    let mut members = BTreeMap::new();
    top_level_members(text, |name, value| {
        members.insert(name, value.read()?);
        Some(())
    })?;
    Some(members)
}

/// The members [`top_level_spans`] finds, their values parsed by serde_json, the last of
/// a name kept (`None` also where serde_json cannot hold one).
fn spans(text: &str) -> Option<BTreeMap<&str, Value>> {
    let found = top_level_spans(text.as_bytes())?;
    if beyond_serde(text) {
        return Some(BTreeMap::new());
    }
    let parsed = found.iter().map(|m| {
        let value = serde_json::from_str(m.value);
        (
            m.name,
            value.unwrap_or_else(|e| panic!("{:?} is not JSON: {e}", m.value)),
        )
    });
    Some(parsed.collect())
}

/// Whether serde_json refuses `text` only for a limit of its own, not the grammar: a number
/// past `f64`, nesting past 128. (Its first error only: the spans' own tests and the
/// `message` fuzz target's reference grammar check the rest.)
fn beyond_serde(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_err_and(|e| {
        let e = e.to_string();
        e.starts_with("number out of range") || e.starts_with("recursion limit exceeded")
    })
}

/// Where we read, serde_json reads the same; where we decline, so may it. The spans are
/// taken exactly where the values are read (up to their member limit), and also where the
/// grammar allows what serde_json cannot hold.
fn check(text: &str) {
    let read = ours(text);
    if let Some(members) = &read {
        assert_eq!(Some(members), by_serde(text).as_ref(), "{text:?}");
    }
    let mut count = 0;
    let _ = top_level_members(text, |_, value| {
        count += 1;
        value.read().map(drop)
    });
    match (&read, spans(text)) {
        (Some(read), Some(scanned)) => assert_eq!(read, &scanned, "spans of {text:?}"),
        // The grammar reads more: what serde_json cannot hold, or reads otherwise.
        (None, Some(scanned)) => assert!(
            beyond_serde(text) || by_serde(text) == Some(scanned),
            "spans read {text:?}"
        ),
        (Some(_), None) => assert!(count > MAX_MEMBERS, "spans declined {text:?}"),
        (None, None) => {}
    }
}

#[test]
fn spans_are_each_member_s_text_as_it_came() {
    let text =
        r#" { "a" : [1, {"b":"c\"}"}] ,"n":-0.5e1, "t":true,"f":false,"z":null,"s":"é\n\u00e9"} "#;
    let found = top_level_spans(text.as_bytes()).unwrap();
    let got: Vec<(&str, &str)> = found.iter().map(|m| (m.name, m.value)).collect();
    assert_eq!(
        got,
        [
            ("a", r#"[1, {"b":"c\"}"}]"#),
            ("n", "-0.5e1"),
            ("t", "true"),
            ("f", "false"),
            ("z", "null"),
            ("s", r#""é\n\u00e9""#),
        ]
    );
    let twice = top_level_spans(br#"{"a":1,"a":2}"#).unwrap();
    assert_eq!((twice.len(), twice.get("a")), (2, Some("2")));
    assert_eq!(plain_string(r#""tools/call""#), Some("tools/call"));
    assert_eq!(plain_string(r#""a\/b""#), None);
    let many = r#"{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}"#;
    assert!(ours(many).is_some() && top_level_spans(many.as_bytes()).is_none());
    // A member whose value is an object past 64 KiB (more than an index's offsets hold) is
    // still read: nested objects are checked, never indexed.
    let large = format!(r#"{{"a":{{"b":"{}","c":1}}}}"#, "x".repeat(70_000));
    assert_eq!(top_level_spans(large.as_bytes()).map(|m| m.len()), Some(1));
    let control = format!("{{\"a\":\"{}\u{1}\"}}", "x".repeat(37));
    assert!(top_level_spans(control.as_bytes()).is_none());
    assert!(top_level_spans(b"{\"a\":\"\xff\"}").is_none());
}

#[test]
fn requests_read_as_serde_json_reads_them() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        r#" { "jsonrpc" : "2.0" , "id" : "x\"y" , "method" : "m" , "params" : [ 1 , -2 , 3.5 , 1e3 , -0 , true , false , null ] } "#,
        r#"{"a":{"b":{"c":[[],{}]}},"a":2}"#,
        r#"{"s":"\u00e9\ud83e\udd80\n\t\\\/\b\f\r\"","e":"","u":"\u0000"}"#,
        r#"{"n":[0,18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809,123456789012345678,1234567890123456789,0.1,2.5e-8,1E300]}"#,
        "{}",
        "{\"é\":\"ü\u{2028}\"}",
    ];
    for line in lines {
        assert!(ours(line).is_some(), "declined {line}");
        check(line);
    }
}

#[test]
fn what_serde_json_refuses_is_declined() {
    let lines = [
        "",
        "[]",
        "1",
        "{",
        "{}x",
        r#"{"a":1,}"#,
        r#"{"a":[1,]}"#,
        r#"{"a":01}"#,
        r#"{"a":-}"#,
        r#"{"a":1.}"#,
        r#"{"a":"\x"}"#,
        r#"{"a":"\ud800"}"#,
        r#"{"a":"\udc00"}"#,
        r#"{"a":"\ud800\u0041"}"#,
        r#"{"a":"\u12"}"#,
        r#"{"a":"\u+123"}"#,
        "{\"a\":\"\u{1}\"}",
        r#"{"a":tru}"#,
        r#"{"a" 1}"#,
        r#"{"a":1 "b":2}"#,
        r#"{"\u0061":1}"#,
        // The same mistakes inside nested values, which the spans skip rather than read.
        r#"{"a":{"b" 1}}"#,
        r#"{"a":{"b":1 "c":2}}"#,
        r#"{"a":{"b":1,"c" 2}}"#,
        r#"{"a":{"b":1,}}"#,
        r#"{"a":{1:2}}"#,
        r#"{"a":{"b":1]}"#,
        r#"{"a":[1 2]}"#,
        r#"{"a":[[1],]}"#,
        r#"{"a":[1}"#,
        r#"{"a":[{"b":"\x"}]}"#,
        r#"{"a":[{"b":01}]}"#,
        r#"{"a":[{"b":tru}]}"#,
        r#"{"a":{"b":{"c":[}}}"#,
        r#"{"a":[[["#,
        // Numbers the grammar refuses, whatever their size.
        r#"{"a":1e}"#,
        r#"{"a":1e+}"#,
        r#"{"a":.5}"#,
        r#"{"a":+1}"#,
        r#"{"a":1.e5}"#,
        r#"{"a":-x}"#,
        r#"{"a":0123456789012345678901}"#,
        r#"{"a":[1E400,]}"#,
    ];
    for line in lines {
        assert!(ours(line).is_none(), "read {line}");
        assert!(
            top_level_spans(line.as_bytes()).is_none(),
            "spans read {line}"
        );
    }
}

#[test]
fn numbers_read_as_serde_json_reads_them() {
    let numbers = [
        "0",
        "7",
        "10",
        "-0",
        "-7",
        "01",
        "-01",
        "00",
        "0.5",
        "1.0",
        "5e3",
        "5E-3",
        "1e400",
        "5-",
        "5+1",
        "-",
        "999999999999999999",
        "1000000000000000000",
        "9223372036854775807",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "123456789012345678901234567890",
    ];
    for n in numbers {
        for text in [
            format!("{{\"a\":{n}}}"),
            format!("{{\"a\":{n},\"b\":[{n}]}}"),
        ] {
            check(&text);
            if serde_json::from_str::<Value>(&text).is_ok() {
                assert!(ours(&text).is_some(), "declined {text}");
            }
        }
    }
}

/// Field test: a server's answer with `10**400` written out, `-1e400` or 200 nested arrays is
/// valid JSON that serde_json cannot hold; the relay judged it by serde_json and dropped it.
#[test]
fn spans_judge_numbers_and_nesting_by_the_grammar_not_by_serde_json() {
    let huge = "1".to_owned() + &"0".repeat(400);
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let mixed = |n: usize| format!("{}1{}", r#"{"b":["#.repeat(n), "]}".repeat(n));
    for value in [
        huge.clone(),
        format!("-{huge}.5e-3"),
        "-1e400".to_owned(),
        "1E+400".to_owned(),
        "0.0e0".to_owned(),
        deep(200),
        deep(MAX_DEPTH),
        deep(1000),
        mixed(129),
        mixed(300),
        format!(
            "{}[],{{}},{{\"x\":[true,false,null,\"s\"]}}{}",
            "[".repeat(120),
            "]".repeat(120)
        ),
        format!(r#"[{huge},{{"c":{}}},-1e400]"#, deep(150)),
    ] {
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{value}}}"#);
        let found = top_level_spans(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
        assert_eq!(found.get("result"), Some(value.as_str()));
        assert_eq!(found.get("id"), Some("1"));
        // Broken at the end, it is not JSON, however deep.
        let broken = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{value}]}}"#);
        assert!(top_level_spans(broken.as_bytes()).is_none(), "{broken}");
    }
    // A raw-value token is an ordinary name to the grammar.
    let raw = r#"{"a":{"$serde_json::private::RawValue":"[1]"}}"#;
    assert!(ours(raw).is_none() && top_level_spans(raw.as_bytes()).is_some());
    // Past the depth limit each container's kind is kept, not made up: the outermost array
    // must end with `]`.
    let nested = |end: &str| {
        let (open, close) = (r#"{"b":["#.repeat(130), "]}".repeat(129));
        format!(r#"{{"a":{open}1{close}{end}}}"#)
    };
    assert!(top_level_spans(nested("]}").as_bytes()).is_some());
    assert!(top_level_spans(nested("}}").as_bytes()).is_none());
}

#[test]
fn nesting_deeper_than_the_limit_is_left_to_serde_json() {
    let deep = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
    assert!(ours(&deep(MAX_DEPTH - 2)).is_some());
    check(&deep(MAX_DEPTH - 2));
    assert!(ours(&deep(MAX_DEPTH)).is_none());
}

proptest! {
    #[test]
    fn any_written_object_reads_back_as_serde_json_reads_it(
        members in prop::collection::btree_map("[a-z]{0,8}", any_value(), 0..6),
        pretty in any::<bool>(),
    ) {
        let value = Value::Object(members.into_iter().collect());
        let text = if pretty {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            serde_json::to_string(&value).unwrap()
        };
        prop_assert!(ours(&text).is_some(), "declined {}", text);
        check(&text);
    }

    #[test]
    fn any_line_is_read_as_serde_json_reads_it_or_declined(text in "\\PC{0,40}") {
        check(&text);
        check(&format!("{{\"a\":{text}}}"));
        check(&format!("{{\"a\":\"{text}\"}}"));
    }
}
