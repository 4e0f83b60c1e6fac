//! A JSON reader for request lines: the top level's members with borrowed names, their values
//! built as the `Value`s serde_json builds, with none of its per-token machinery (a third of
//! a small request's instructions). It declines (`None`) whatever it does not read exactly as
//! serde_json does: the caller then asks serde_json, which decides and words every error. The
//! `message` fuzz target checks the result against the `Value` path. Each value is built where
//! it is kept (a map's slot, an envelope's member), never returned and then moved.
//!
//! A relay that only routes what it forwards (`mcpipe wrap`) reads a line with the same
//! grammar but builds nothing: [`top_level_spans`] gives each member's value as text. It
//! judges the values by the JSON grammar (RFC 8259) alone, not by what serde_json can hold
//! (a number past `f64`, nesting past 128): the relay forwards the text as it came, so valid
//! JSON is relayed whatever the peer's parser makes of it.

use serde_json::{Map, Value};

use crate::json_text::clean_len;

mod spans;
#[cfg(test)]
use spans::MAX_MEMBERS;
pub(crate) use spans::{plain_string, top_level_spans};

/// Deeper nesting is left to serde_json (whose own limit is 128).
const MAX_DEPTH: usize = 100;

/// An object whose first member has this name is not an object to serde_json's `Value` when
/// serde_json's `raw_value` feature is on (this crate does not ask for it, but any other crate
/// in the same build may): it is the JSON in that member's string. Left to serde_json.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// A position in a line known to be UTF-8.
struct Reader<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
    /// Values skipped by the grammar alone ([`top_level_spans`]): any number RFC 8259 allows,
    /// nesting without [`MAX_DEPTH`]. Otherwise as serde_json reads them.
    grammar: bool,
}

/// Calls `member` with each member of the object that is the whole of `text`, in order (a
/// duplicate name comes again; the caller keeps the last, as serde_json does), and its value
/// still to be taken, read or recognised (`member` must do one or the other). `None` when
/// `text` is not one object, a member name has an escape, or the reader declines.
pub(crate) fn top_level_members<'a>(
    text: &'a str,
    mut member: impl FnMut(&'a str, ValueAt<'_, 'a>) -> Option<()>,
) -> Option<()> {
    each_top_level_member(text, false, |name, reader| member(name, ValueAt(reader)))
}

/// A member's value, not yet read: built as a `Value`, or recognised without building anything
/// when it is a string known beforehand (an envelope's `"2.0"`).
pub(crate) struct ValueAt<'r, 'a>(&'r mut Reader<'a>);

impl<'a> ValueAt<'_, 'a> {
    /// The value, as serde_json builds it (`None` where the reader declines).
    pub(crate) fn read(self) -> Option<Value> {
        let mut value = Value::Null;
        self.0.value_into(&mut value)?;
        Some(value)
    }

    /// The value read into `slot`, where it is kept (see [`Reader::value_into`]; what `slot`
    /// holds when `None` is unspecified).
    pub(crate) fn read_into(self, slot: &mut Value) -> Option<()> {
        self.0.value_into(slot)
    }

    /// The members of the value, when it is an object whose member names have no escapes:
    /// each name handed to `member` with its value still to be read (which `member` must read
    /// or recognise), in order. `None` for any other value, and where the reader declines
    /// (as for an object read whole).
    pub(crate) fn members(
        self,
        mut member: impl FnMut(&'a str, ValueAt<'_, 'a>) -> Option<()>,
    ) -> Option<()> {
        let reader = self.0;
        if reader.depth >= MAX_DEPTH {
            return None;
        }
        reader.expect(b'{')?;
        reader.depth += 1;
        reader.members(true, &mut |name, reader| member(name, ValueAt(reader)))?;
        reader.depth -= 1;
        Some(())
    }

    /// The value's text when it is an object and the line is at most `line_limit` bytes long,
    /// with where its members are: checked as [`ValueAt::read`] would read it (`None` where
    /// that declines), nothing built. `Some(None)` for any other value, still to be read.
    pub(crate) fn object_text(
        &mut self,
        line_limit: usize,
    ) -> Option<Option<(&'a str, ObjectIndex)>> {
        let reader = &mut *self.0;
        reader.skip_space();
        if reader.text.len() > line_limit || reader.bytes().get(reader.pos) != Some(&b'{') {
            return Some(None);
        }
        let start = reader.pos;
        let index = reader.skip_object_indexed()?;
        Some(Some((reader.text.get(start..reader.pos)?, index)))
    }

    /// Whether the value is the string `plain` written without escapes (then it is taken);
    /// otherwise nothing is taken, and the value is still to be read.
    pub(crate) fn is_plain(&mut self, plain: &str) -> bool {
        let reader = &mut *self.0;
        reader.skip_space();
        let rest = &reader.bytes()[reader.pos..];
        let found = rest.len() > plain.len() + 1
            && rest[0] == b'"'
            && &rest[1..=plain.len()] == plain.as_bytes()
            && rest[plain.len() + 1] == b'"';
        if found {
            reader.pos += plain.len() + 2;
        }
        found
    }
}

/// An object's JSON text, checked, and where its members are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexedObject {
    pub(crate) text: String,
    pub(crate) index: ObjectIndex,
}

/// How many members an [`ObjectIndex`] holds; an object of more is not indexed.
const INDEXED: usize = 6;

/// Where the top-level members of an object's text are, found as the text was checked, so
/// that a member is found again without reading the text again. Offsets from the `{`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ObjectIndex {
    members: [MemberSpan; INDEXED],
    /// How many of `members` hold a member; `None`: not indexed (over [`INDEXED`] members, or
    /// a name with an escape).
    len: Option<u8>,
}

/// One member of an [`ObjectIndex`]: its name (no escapes) and its value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemberSpan {
    name: (u16, u16),
    value: (u16, u16),
    /// The value is a string without escapes.
    plain_string: bool,
}

impl ObjectIndex {
    /// The members, in order, duplicates included; `None` when the object is not indexed.
    pub(crate) fn members(&self) -> Option<&[MemberSpan]> {
        self.members.get(..usize::from(self.len?))
    }
}

impl MemberSpan {
    /// Whether the member's name is `name` (in `text`, the object indexed): bytes compared,
    /// no character boundary checked.
    #[inline]
    pub(crate) fn is_named(&self, text: &str, name: &str) -> bool {
        let (start, end) = self.name;
        text.as_bytes().get(usize::from(start)..usize::from(end)) == Some(name.as_bytes())
    }

    /// The member's name (in `text`, the object indexed).
    #[inline]
    pub(crate) fn name<'a>(&self, text: &'a str) -> &'a str {
        let (start, end) = self.name;
        text.get(usize::from(start)..usize::from(end)).unwrap_or("")
    }

    /// The member's value's text and, when it is a string without escapes, its contents.
    pub(crate) fn value<'a>(&self, text: &'a str) -> (&'a str, Option<&'a str>) {
        let (start, end) = self.value;
        let value = text
            .get(usize::from(start)..usize::from(end))
            .unwrap_or("null");
        let plain = self
            .plain_string
            .then(|| value.get(1..value.len() - 1))
            .flatten();
        (value, plain)
    }
}

/// A line as text when it is UTF-8 (checked once, whole, so that no string in it is checked
/// again). On x86_64 an ASCII line, nearly every request, is told so sixteen bytes at a time
/// (`sys::ascii_str`); other lines, and other targets, go through `str::from_utf8`.
pub(crate) fn line_text(bytes: &[u8]) -> Option<&str> {
    #[cfg(target_arch = "x86_64")]
    if let Some(text) = crate::sys::ascii_str(bytes) {
        return Some(text);
    }
    std::str::from_utf8(bytes).ok()
}

/// The walk both readings share: the object that is the whole of `text`, each member's name
/// (without escapes) handed to `member` with the reader at its value.
fn each_top_level_member<'a>(
    text: &'a str,
    grammar: bool,
    mut member: impl FnMut(&'a str, &mut Reader<'a>) -> Option<()>,
) -> Option<()> {
    let mut reader = Reader {
        text,
        pos: 0,
        depth: 1,
        grammar,
    };
    reader.expect(b'{')?;
    reader.members(false, &mut member)?;
    reader.skip_space();
    (reader.pos == text.len()).then_some(())
}

impl<'a> Reader<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON's whitespace (space, tab, newline, carriage return). Compact JSON has none:
    /// one comparison decides that (every whitespace byte is at most a space).
    #[inline]
    fn skip_space(&mut self) {
        if let Some(&byte) = self.bytes().get(self.pos) {
            if byte <= b' ' {
                self.skip_space_run();
            }
        }
    }

    #[inline(never)]
    fn skip_space_run(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    /// Whether the next byte after whitespace is `byte` (not consumed).
    fn next_is(&mut self, byte: u8) -> bool {
        self.skip_space();
        self.bytes().get(self.pos) == Some(&byte)
    }

    /// The members of an object (its `{` consumed) to its `}`, each name (without escapes)
    /// handed to `member` with the reader at its value. `raw_check`: a first member named as
    /// serde_json's raw values are declines, as [`Reader::object_into`] does.
    fn members(
        &mut self,
        raw_check: bool,
        member: &mut impl FnMut(&'a str, &mut Reader<'a>) -> Option<()>,
    ) -> Option<()> {
        if self.next_is(b'}') {
            self.pos += 1;
            return Some(());
        }
        let mut first = raw_check;
        loop {
            self.expect(b'"')?;
            let name = self.plain_str()?;
            if first && name == RAW_VALUE_TOKEN {
                return None;
            }
            first = false;
            self.expect(b':')?;
            member(name, self)?;
            if !self.comma_or(b'}')? {
                return Some(());
            }
        }
    }

    /// Consumes `byte` after whitespace.
    fn expect(&mut self, byte: u8) -> Option<()> {
        if self.next_is(byte) {
            self.pos += 1;
            Some(())
        } else {
            None
        }
    }

    /// After a member or an element: `true` for a comma (another follows), `false` for `end`.
    fn comma_or(&mut self, end: u8) -> Option<bool> {
        self.skip_space();
        let byte = *self.bytes().get(self.pos)?;
        self.pos += 1;
        match byte {
            b',' => Some(true),
            _ if byte == end => Some(false),
            _ => None,
        }
    }

    /// The rest of a string without escapes, borrowed (its opening quote consumed); `None` at
    /// an escape or a control character. Inlined into the member walks: its call and return
    /// were a tenth of the reader's time.
    #[inline(always)]
    fn plain_str(&mut self) -> Option<&'a str> {
        let start = self.pos;
        let end = start + clean_len(&self.bytes()[start..]);
        if self.bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.pos = end + 1;
        // The quotes are ASCII, so both ends are character boundaries.
        self.text.get(start..end)
    }

    /// The rest of a string (its opening quote consumed), escapes decoded as serde_json
    /// decodes them; `None` at a control character, an unknown escape or a lone surrogate.
    /// Inlined: the `String` is then built in the value's place, not returned through memory
    /// and copied (see [`Reader::value_into`]).
    #[inline(always)]
    fn string(&mut self) -> Option<String> {
        let mut out = String::new();
        loop {
            let start = self.pos;
            let end = start + clean_len(&self.bytes()[start..]);
            let run = self.text.get(start..end)?;
            let byte = *self.bytes().get(end)?;
            self.pos = end + 1;
            if byte == b'"' {
                if out.is_empty() {
                    return Some(run.to_owned());
                }
                out.push_str(run);
                return Some(out);
            }
            if byte != b'\\' {
                return None; // A control character: serde_json refuses it.
            }
            out.push_str(run);
            let escape = *self.bytes().get(self.pos)?;
            self.pos += 1;
            out.push(match escape {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => self.unicode_escape()?,
                _ => return None,
            });
        }
    }

    /// The character of a `\u` escape (its `\u` consumed), a surrogate pair in two escapes.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                if self.bytes().get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return None;
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(first),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.pos..self.pos + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None; // (`from_str_radix` would also take a sign)
        }
        self.pos += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number, read into `out`: plain integers here, anything else (fractions, exponents, `-0`,
    /// integers too large for 64 bits) parsed by serde_json from the number's own bytes, so it is
    /// exactly the number serde_json makes.
    fn number_into(&mut self, out: &mut Value) -> Option<()> {
        let start = self.pos;
        let rest = &self.bytes()[start..];
        // A plain integer, the common case, in one pass: an optional `-`, at most 18 digits
        // (they fit an `i64` either way) without a leading zero, ended by anything but the rest
        // of a number. (`-0` is a float to serde_json.)
        let negative = rest.first() == Some(&b'-');
        let body = &rest[usize::from(negative)..];
        let mut n: u64 = 0;
        let mut digits = 0;
        while let Some(&b @ b'0'..=b'9') = body.get(digits) {
            if digits == 18 {
                break;
            }
            n = n * 10 + u64::from(b - b'0');
            digits += 1;
        }
        let ended = !matches!(
            body.get(digits),
            Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'-' | b'+')
        );
        if ended && digits > 0 && (digits == 1 || body[0] != b'0') && !(negative && n == 0) {
            self.pos = start + usize::from(negative) + digits;
            *out = match i64::try_from(n) {
                Ok(n) if negative => Value::from(-n),
                _ => Value::from(n),
            };
            return Some(());
        }
        // Anything else: the token, as serde_json reads it.
        let len = rest
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(rest.len());
        let token = self.text.get(start..start + len)?;
        self.pos = start + len;
        *out = serde_json::from_str::<Value>(token)
            .ok()
            .filter(Value::is_number)?;
        Some(())
    }

    /// A number checked, nothing built: a plain integer of at most 18 digits here (the ids of
    /// nearly every message), anything else as [`Reader::number_into`] judges it, or by the
    /// grammar alone ([`Reader::grammar_number`]). (Reading each id into a `Value` only to drop
    /// it cost a relay 150 instructions a number.) Inlined: with the grammar's branch it was
    /// no longer, and its call cost the relay's 20,000 calls 1.7 M instructions.
    #[inline(always)]
    fn skip_number(&mut self) -> Option<()> {
        let rest = &self.bytes()[self.pos..];
        let negative = usize::from(rest.first() == Some(&b'-'));
        let body = &rest[negative..];
        let digits = body.iter().take_while(|b| b.is_ascii_digit()).count();
        let ended = !matches!(body.get(digits), Some(b'.' | b'e' | b'E' | b'-' | b'+'));
        if ended && (1..=18).contains(&digits) && (digits == 1 || body[0] != b'0') {
            self.pos += negative + digits;
            return Some(());
        }
        if self.grammar {
            return self.grammar_number();
        }
        self.number_into(&mut Value::Null)
    }

    /// Consumes `word` (the rest of `true`, `false` or `null`).
    fn literal(&mut self, word: &[u8], value: Value) -> Option<Value> {
        if self.bytes().get(self.pos..self.pos + word.len()) != Some(word) {
            return None;
        }
        self.pos += word.len();
        Some(value)
    }

    /// The rest of a string (its opening quote consumed), checked as [`Reader::string`]
    /// reads it, nothing built. Inlined: its call and return (registers saved and restored)
    /// were a third of its cost for the short strings of an envelope.
    #[inline(always)]
    fn skip_string(&mut self) -> Option<()> {
        loop {
            self.pos += clean_len(&self.bytes()[self.pos..]);
            let byte = *self.bytes().get(self.pos)?;
            self.pos += 1;
            match byte {
                b'"' => return Some(()),
                b'\\' => {
                    let escape = *self.bytes().get(self.pos)?;
                    self.pos += 1;
                    match escape {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.unicode_escape()?;
                        }
                        _ => return None,
                    }
                }
                _ => return None, // A control character: serde_json refuses it.
            }
        }
    }

    /// An object (at its `{`) checked as [`Reader::skip_value`] checks it, and where its
    /// members are (see [`ObjectIndex`]).
    fn skip_object_indexed(&mut self) -> Option<ObjectIndex> {
        let start = self.pos;
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.expect(b'{')?;
        self.depth += 1;
        let mut index = ObjectIndex {
            len: Some(0),
            ..ObjectIndex::default()
        };
        let offset = |pos: usize| u16::try_from(pos - start).ok();
        if self.next_is(b'}') {
            self.pos += 1;
        } else {
            let mut first = true;
            loop {
                self.expect(b'"')?;
                let name_start = self.pos;
                let plain_name = match self.plain_str() {
                    Some(name) => {
                        if first && name == RAW_VALUE_TOKEN {
                            return None;
                        }
                        true
                    }
                    // As `skip_value` reads a first name: decoded, to tell the raw-value token.
                    None if first => {
                        if self.string()? == RAW_VALUE_TOKEN {
                            return None;
                        }
                        false
                    }
                    None => {
                        self.skip_string()?;
                        false
                    }
                };
                let name_end = self.pos - 1;
                first = false;
                self.expect(b':')?;
                self.skip_space();
                let value_start = self.pos;
                let plain_string = if self.bytes().get(self.pos) == Some(&b'"') {
                    self.pos += 1;
                    // A string without escapes is told so in the same scan that checks it.
                    self.plain_str().is_some() || {
                        self.skip_string()?;
                        false
                    }
                } else {
                    self.skip_value()?;
                    false
                };
                index.len = match index.len {
                    Some(n) if plain_name && usize::from(n) < INDEXED => {
                        index.members[usize::from(n)] = MemberSpan {
                            name: (offset(name_start)?, offset(name_end)?),
                            value: (offset(value_start)?, offset(self.pos)?),
                            plain_string,
                        };
                        Some(n + 1)
                    }
                    _ => None,
                };
                if !self.comma_or(b'}')? {
                    break;
                }
            }
        }
        self.depth -= 1;
        Some(index)
    }

    /// One value checked as [`Reader::value_into`] reads it, nothing built (but a number other
    /// than a plain integer, which serde_json judges), or by the grammar alone. A loop, not a
    /// recursion: which of the open containers are objects is kept in the bits of `objects`
    /// (the innermost lowest, [`MAX_DEPTH`] of them at most), so a nested value costs no call.
    /// Deeper it declines; [`top_level_spans`] then asks [`Reader::skip_deep`].
    fn skip_value(&mut self) -> Option<()> {
        let mut objects: u128 = 0;
        let mut open = 0usize;
        loop {
            self.skip_space();
            let byte = *self.bytes().get(self.pos)?;
            match byte {
                b'"' => {
                    self.pos += 1;
                    self.skip_string()?;
                }
                b'{' | b'[' => {
                    if self.depth >= MAX_DEPTH {
                        return None;
                    }
                    self.pos += 1;
                    let object = byte == b'{';
                    if self.next_is(if object { b'}' } else { b']' }) {
                        self.pos += 1;
                    } else {
                        self.depth += 1;
                        open += 1;
                        objects = (objects << 1) | u128::from(object);
                        if object {
                            self.expect(b'"')?;
                            // As `object` reads it: not the raw-value token (a name with
                            // escapes decoded to tell).
                            let token = match self.plain_str() {
                                Some(name) => name == RAW_VALUE_TOKEN,
                                None => self.string()? == RAW_VALUE_TOKEN,
                            };
                            if token {
                                return None;
                            }
                            self.expect(b':')?;
                        }
                        continue; // its first member's value or first element
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
            // A value ended: the next member or element, or the ends of the containers it
            // closes.
            loop {
                if open == 0 {
                    return Some(());
                }
                let object = objects & 1 == 1;
                if self.comma_or(if object { b'}' } else { b']' })? {
                    if object {
                        self.expect(b'"')?;
                        self.skip_string()?;
                        self.expect(b':')?;
                    }
                    break;
                }
                objects >>= 1;
                open -= 1;
                self.depth -= 1;
            }
        }
    }

    /// Reads a value into `out`, where it is kept: built in its place, never returned and
    /// moved. (A `Value` returned through memory and copied at once stalls the CPU: the copy's
    /// wide loads wait for the narrower stores that wrote it. Reading into the slot took 8 % of
    /// the demo's time per small `tools/call`.) What `out` holds when `None` is unspecified.
    fn value_into(&mut self, out: &mut Value) -> Option<()> {
        self.skip_space();
        let byte = *self.bytes().get(self.pos)?;
        match byte {
            b'"' => {
                self.pos += 1;
                *out = Value::String(self.string()?);
            }
            b'{' | b'[' => {
                if self.depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                self.depth += 1;
                if byte == b'{' {
                    self.object_into(out)?;
                } else {
                    self.array_into(out)?;
                }
                self.depth -= 1;
            }
            b't' => *out = self.literal(b"true", Value::Bool(true))?,
            b'f' => *out = self.literal(b"false", Value::Bool(false))?,
            b'n' => *out = self.literal(b"null", Value::Null)?,
            b'-' | b'0'..=b'9' => self.number_into(out)?,
            _ => return None,
        }
        Some(())
    }

    /// The rest of an object (its `{` consumed), each value read in its place in the map (of
    /// duplicate names the last value counts, as `insert` does).
    fn object_into(&mut self, out: &mut Value) -> Option<()> {
        *out = Value::Object(Map::new());
        let Value::Object(map) = out else {
            return None; // Not reached: just written.
        };
        if self.next_is(b'}') {
            self.pos += 1;
            return Some(());
        }
        loop {
            self.expect(b'"')?;
            let name = self.string()?;
            if map.is_empty() && name == RAW_VALUE_TOKEN {
                return None;
            }
            self.expect(b':')?;
            self.value_into(map.entry(name).or_insert(Value::Null))?;
            if !self.comma_or(b'}')? {
                return Some(());
            }
        }
    }

    /// The rest of an array (its `[` consumed), each item read in its place.
    fn array_into(&mut self, out: &mut Value) -> Option<()> {
        *out = Value::Array(Vec::new());
        let Value::Array(items) = out else {
            return None; // Not reached: just written.
        };
        if self.next_is(b']') {
            self.pos += 1;
            return Some(());
        }
        loop {
            items.push(Value::Null);
            self.value_into(items.last_mut()?)?;
            if !self.comma_or(b']')? {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
#[path = "json_read_tests.rs"]
mod tests;
