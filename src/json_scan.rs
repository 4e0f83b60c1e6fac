//! A quick, conservative reading of one JSON object: it checks the whole text and finds the
//! object's top-level members without building anything, for a relay that only routes what
//! it forwards (`mcpipe wrap`: the client's requests, the server's answers).
//!
//! Conservative: it accepts only text that serde_json accepts too, and says `None` for
//! anything it does not read itself (a `\u` escape, an exponent, more than [`MAX_MEMBERS`]
//! members, nesting deeper than [`MAX_DEPTH`], escaped member names); the caller then
//! takes serde_json's path, which decides. Where [`crate::json_read`] builds the `Value`s of a
//! line, this only checks one and finds where its members are.

use crate::json_text::clean_len;

/// Members of one object beyond this many are left to serde_json.
pub(crate) const MAX_MEMBERS: usize = 8;

/// Nesting deeper than this is left to serde_json (whose limit is 128).
const MAX_DEPTH: usize = 100;

/// Integer parts longer than this are left to serde_json (it refuses numbers beyond `f64`,
/// about 1.8e308).
const MAX_INTEGER_DIGITS: usize = 300;

/// One top-level member: its name (without quotes; it had no escapes) and its value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: &'a str,
}

/// The members of a JSON object, in order (duplicates included).
#[derive(Debug)]
pub(crate) struct Members<'a> {
    found: [Member<'a>; MAX_MEMBERS],
    len: usize,
}

impl<'a> Members<'a> {
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Member<'a>> {
        self.found[..self.len].iter()
    }

    /// The value of the last member of that name (JSON's usual reading of duplicates).
    pub(crate) fn get(&self, name: &str) -> Option<&'a str> {
        self.iter().rev().find(|m| m.name == name).map(|m| m.value)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Reads `bytes` as one JSON object (whitespace around it allowed), or `None` (see the
/// module's note).
pub(crate) fn object_members(bytes: &[u8]) -> Option<Members<'_>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut scan = Scan {
        bytes,
        at: 0,
        depth: 0,
    };
    let empty = Member {
        name: "",
        value: "",
    };
    let mut members = Members {
        found: [empty; MAX_MEMBERS],
        len: 0,
    };
    scan.skip_space();
    scan.eat(b'{')?;
    scan.depth = 1;
    scan.skip_space();
    if scan.peek() == Some(b'}') {
        scan.at += 1;
    } else {
        loop {
            scan.skip_space();
            let name_start = scan.at + 1;
            if !scan.string()? {
                return None; // an escaped name
            }
            let name = &text[name_start..scan.at - 1];
            scan.skip_space();
            scan.eat(b':')?;
            scan.skip_space();
            let value_start = scan.at;
            scan.value()?;
            if members.len == MAX_MEMBERS {
                return None;
            }
            members.found[members.len] = Member {
                name,
                value: &text[value_start..scan.at],
            };
            members.len += 1;
            scan.skip_space();
            match scan.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    scan.skip_space();
    (scan.at == bytes.len()).then_some(members)
}

/// The contents of a string value written without escapes (`"abc"` gives `abc`).
pub(crate) fn plain_string(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// A cursor over the text being checked.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// One value of any kind.
    fn value(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.container(b'}', true),
            b'[' => self.container(b']', false),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object (`keyed`) or an array, from its opening bracket to `close`.
    fn container(&mut self, close: u8, keyed: bool) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.skip_space();
        if self.peek() == Some(close) {
            self.at += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            self.skip_space();
            if keyed {
                self.string()?;
                self.skip_space();
                self.eat(b':')?;
                self.skip_space();
            }
            self.value()?;
            self.skip_space();
            match self.next()? {
                b',' => continue,
                b if b == close => break,
                _ => return None,
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// A string, from its opening quote past its closing one; `Some(false)` when it held an
    /// escape (all of them checked; `\u` is left to serde_json, which checks surrogates).
    fn string(&mut self) -> Option<bool> {
        self.eat(b'"')?;
        let mut plain = true;
        loop {
            self.skip_to_quote_or_escape()?;
            match self.next()? {
                b'"' => return Some(plain),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => plain = false,
                    _ => return None,
                },
                _ => return None, // a control character
            }
        }
    }

    /// Moves to the next `"` or `\\` of a string; `None` at a control character or the end.
    /// The text is UTF-8 already: nothing else in a string matters.
    fn skip_to_quote_or_escape(&mut self) -> Option<()> {
        self.at += clean_len(&self.bytes[self.at..]);
        match self.peek()? {
            b'"' | b'\\' => Some(()),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)?`: an exponent is left to serde_json.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let integer = self.digits();
        match integer {
            0 => return None,
            1 => {}
            _ if self.bytes[self.at - integer] == b'0' => return None,
            n if n > MAX_INTEGER_DIGITS => return None,
            _ => {}
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        match self.peek() {
            Some(b'e' | b'E') => None,
            _ => Some(()),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(text: &str) -> Option<Vec<(&str, &str)>> {
        object_members(text.as_bytes()).map(|m| m.iter().map(|m| (m.name, m.value)).collect())
    }

    #[test]
    fn an_object_s_members_are_found_with_their_text() {
        let got = members(
            r#" { "a" : [1, {"b":"c\"}"}] ,"n":-0.5, "t":true,"f":false,"z":null,"s":"é\n"} "#,
        );
        assert_eq!(
            got.unwrap(),
            vec![
                ("a", r#"[1, {"b":"c\"}"}]"#),
                ("n", "-0.5"),
                ("t", "true"),
                ("f", "false"),
                ("z", "null"),
                ("s", r#""é\n""#),
            ]
        );
        assert_eq!(members("{}").unwrap(), vec![]);
        let m = object_members(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!((m.len(), m.get("a")), (2, Some("2")));
    }

    #[test]
    fn what_serde_json_would_refuse_or_it_does_not_read_is_none() {
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(150), "]".repeat(150));
        let long = format!(r#"{{"a":{}}}"#, "9".repeat(400));
        for text in [
            "",
            "[]",
            "1",
            "{",
            r#"{"a":1"#,
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":1} x"#,
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":1e5}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\ud800"}"#,
            "{\"a\":\"\x01\"}",
            r#"{"\u0061":1}"#,
            r#"{"a\n":1}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":{"b"}}"#,
            r#"{"a":{1:2}}"#,
            r#"{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}"#,
            &deep,
            &long,
        ] {
            assert!(members(text).is_none(), "{text}");
        }
        assert!(object_members(b"{\"a\":\"\xff\"}").is_none());
    }

    #[test]
    fn long_strings_are_read_to_their_end_and_control_characters_refused() {
        let text = format!(r#"{{"a":"{}\n{}","b":1}}"#, "x".repeat(37), "é".repeat(20));
        assert_eq!(members(&text).unwrap().len(), 2);
        let control = format!("{{\"a\":\"{}\u{1}\"}}", "x".repeat(37));
        assert!(members(&control).is_none());
    }

    #[test]
    fn whatever_it_accepts_serde_json_accepts_alike() {
        let texts = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
            r#"{"a":[[],{},[{}],-0,0.25,12345678901234567890123,"\/\b\f\n\r\t\"\\"]}"#,
            " \t\r\n{\"a\" :\t1 }\n",
        ];
        for text in texts {
            let scanned = members(text).expect(text);
            let parsed: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(text).expect(text);
            assert_eq!(scanned.len(), parsed.len());
            for (name, value) in scanned {
                let value: serde_json::Value = serde_json::from_str(value).expect(value);
                assert_eq!(parsed[name], value, "{text}");
            }
        }
    }
}
