//! The relay's value-less reading ([`top_level_spans`]): a line's top-level members as text,
//! judged by the JSON grammar (RFC 8259) alone, and the grammar's own walks, which the
//! serde_json-agreeing reader of the parent module never takes.

use serde_json::Value;

use super::{each_top_level_member, line_text, Reader};

/// The top level of an object, its values checked but not built, for a relay that only
/// routes what it forwards: each member's name and the text of its value. The values are
/// judged by the JSON grammar alone, so this reads a superset of what [`super::top_level_members`]
/// reads: also numbers and nesting serde_json cannot hold. `None` where the text is not JSON,
/// for a member name with escapes, a raw-value token and objects of more than [`MAX_MEMBERS`]
/// members (serde_json then decides).
pub(crate) fn top_level_spans(bytes: &[u8]) -> Option<Members<'_>> {
    let text = line_text(bytes)?;
    let empty = Member {
        name: "",
        value: "",
    };
    let mut members = Members {
        found: [empty; MAX_MEMBERS],
        len: 0,
    };
    each_top_level_member(text, true, |name, reader| {
        reader.skip_space();
        let start = reader.pos;
        if reader.skip_value().is_none() {
            // Not JSON, or past what serde_json reads: the grammar alone decides, from the
            // member's value again (a top-level member's, so at depth 1).
            (reader.pos, reader.depth) = (start, 1);
            reader.skip_deep()?;
        }
        *members.found.get_mut(members.len)? = Member {
            name,
            value: text.get(start..reader.pos)?,
        };
        members.len += 1;
        Some(())
    })?;
    Some(members)
}

/// Objects of more members than this are left to serde_json by [`top_level_spans`].
pub(crate) const MAX_MEMBERS: usize = 8;

/// One top-level member: its name (it had no escapes) and its value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member<'a> {
    pub(crate) name: &'a str,
    pub(crate) value: &'a str,
}

/// The members of an object, in order (duplicates included).
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

/// The contents of a string value written without escapes (`"abc"` gives `abc`).
pub(crate) fn plain_string(value: &str) -> Option<&str> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

impl Reader<'_> {
    /// A number as RFC 8259 §6 writes it, whatever its size:
    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`. Out of line: rare (a
    /// fraction, an exponent, a long integer), and kept out of [`Reader::skip_number`].
    #[cold]
    #[inline(never)]
    pub(super) fn grammar_number(&mut self) -> Option<()> {
        let bytes = self.bytes();
        let digits = |from: usize| {
            bytes[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let mut at = self.pos + usize::from(bytes.get(self.pos) == Some(&b'-'));
        match bytes.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at += digits(at),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            let n = digits(at + 1);
            if n == 0 {
                return None;
            }
            at += 1 + n;
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1 + usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
            let n = digits(at);
            if n == 0 {
                return None;
            }
            at += n;
        }
        self.pos = at;
        Some(())
    }

    /// One value by the grammar alone, however deep: the ends of the open containers on a
    /// stack of their own. What [`Reader::skip_value`] declined ([`top_level_spans`] asks
    /// again here: nesting past [`super::MAX_DEPTH`], a raw-value token); out of line and apart, so
    /// that [`Reader::skip_value`], the relay's every line, stays as lean as it was.
    #[cold]
    #[inline(never)]
    fn skip_deep(&mut self) -> Option<()> {
        let mut ends: Vec<u8> = Vec::new();
        loop {
            self.skip_space();
            match *self.bytes().get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                byte @ (b'{' | b'[') => {
                    self.pos += 1;
                    let end = if byte == b'{' { b'}' } else { b']' };
                    if self.next_is(end) {
                        self.pos += 1;
                    } else {
                        ends.push(end);
                        if byte == b'{' {
                            self.expect(b'"')?;
                            self.skip_string()?;
                            self.expect(b':')?;
                        }
                        continue;
                    }
                }
                b't' => {
                    self.literal(b"true", Value::Null)?;
                }
                b'f' => {
                    self.literal(b"false", Value::Null)?;
                }
                b'n' => {
                    self.literal(b"null", Value::Null)?;
                }
                b'-' | b'0'..=b'9' => self.skip_number()?,
                _ => return None,
            }
            loop {
                let Some(&end) = ends.last() else {
                    return Some(()); // the value ended
                };
                if self.comma_or(end)? {
                    if end == b'}' {
                        self.expect(b'"')?;
                        self.skip_string()?;
                        self.expect(b':')?;
                    }
                    break;
                }
                ends.pop();
            }
        }
    }
}
