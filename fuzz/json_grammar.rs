//! A naive reference for the JSON grammar (RFC 8259), with no limit of its own on numbers or
//! nesting: what the relay's value-less scan accepts must be JSON by it. Written for clarity,
//! not speed (a recursion per nested value; fuzz inputs are small).

/// Whether `bytes` is one JSON text: UTF-8, one value between optional whitespace.
pub(crate) fn is_json(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_err() {
        return false;
    }
    let mut at = space(bytes, 0);
    match value(bytes, at) {
        Some(end) => at = space(bytes, end),
        None => return false,
    }
    at == bytes.len()
}

fn space(b: &[u8], mut at: usize) -> usize {
    while matches!(b.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// The end of the value starting at `at`.
fn value(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at)? {
        b'{' => container(b, at + 1, b'}', true),
        b'[' => container(b, at + 1, b']', false),
        b'"' => string(b, at + 1),
        b't' => word(b, at, b"true"),
        b'f' => word(b, at, b"false"),
        b'n' => word(b, at, b"null"),
        _ => number(b, at),
    }
}

fn word(b: &[u8], at: usize, w: &[u8]) -> Option<usize> {
    (b.get(at..at + w.len())? == w).then_some(at + w.len())
}

fn container(b: &[u8], at: usize, end: u8, object: bool) -> Option<usize> {
    let mut at = space(b, at);
    if b.get(at) == Some(&end) {
        return Some(at + 1);
    }
    loop {
        if object {
            if b.get(at) != Some(&b'"') {
                return None;
            }
            at = space(b, string(b, at + 1)?);
            if b.get(at) != Some(&b':') {
                return None;
            }
            at = space(b, at + 1);
        }
        at = space(b, value(b, at)?);
        match b.get(at)? {
            b',' => at = space(b, at + 1),
            c if *c == end => return Some(at + 1),
            _ => return None,
        }
    }
}

fn string(b: &[u8], mut at: usize) -> Option<usize> {
    loop {
        match *b.get(at)? {
            b'"' => return Some(at + 1),
            b'\\' => {
                at += 1;
                match b.get(at)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 1,
                    b'u' => {
                        let hex = b.get(at + 1..at + 5)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        at += 5;
                    }
                    _ => return None,
                }
            }
            c if c < 0x20 => return None,
            _ => at += 1,
        }
    }
}

fn number(b: &[u8], mut at: usize) -> Option<usize> {
    let digits = |from: usize| {
        b[from.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    if b.get(at) == Some(&b'-') {
        at += 1;
    }
    match b.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at += digits(at),
        _ => return None,
    }
    if b.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return None;
        }
        at += 1 + n;
    }
    if matches!(b.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(b.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return None;
        }
        at += n;
    }
    Some(at)
}
