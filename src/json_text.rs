//! Compact JSON text appended to a byte buffer: the same bytes as `serde_json::to_writer`
//! gives for a [`Value`] or a `str`, without its generic serialiser and its byte-by-byte
//! escaping loop. Every answer the loop writes goes through here, so this is the response
//! writer's hot path: a string is scanned eight bytes at a time and copied in runs.

use serde_json::{Number, Value};

#[cfg(target_arch = "x86_64")]
use crate::sys;

/// What serde_json writes for each byte in a string: `b'u'` for `\u00XX`, the letter of a
/// short escape (`\n`, `\"`, ...), or 0 for a byte copied as it is. The same choices as
/// serde_json: control characters, `"` and `\`; not `/`, not DEL, nothing above ASCII.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// `0x0101…01` times a byte: that byte in each of the eight lanes of a word.
const fn lanes(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// The lanes of `word` (read little-endian: lane 0 is the first byte) that need escaping (a
/// control character, `"` or `\`), as their top bits; 0 when none does. The classic "has a
/// byte less than n" (n ≤ 128) and "has a zero byte" word tests: a borrow may flag a lane
/// above a flagged one, never one below, so the lowest flag is exact.
fn escape_lanes(word: u64) -> u64 {
    let quote = word ^ lanes(b'"');
    let quote = quote.wrapping_sub(lanes(1)) & !quote;
    let backslash = word ^ lanes(b'\\');
    let backslash = backslash.wrapping_sub(lanes(1)) & !backslash;
    (quote | backslash) & lanes(0x80) | control_lanes(word)
}

/// The lanes of `word` holding a control character (below 0x20), as their top bits, by the same
/// word test (the lowest flag exact).
fn control_lanes(word: u64) -> u64 {
    word.wrapping_sub(lanes(0x20)) & !word & lanes(0x80)
}

/// How many bytes of a string [`words_clean_len`] tests a word at a time, inline, before it
/// hands the rest to [`long_clean_len`]: most strings end within them, and for those a call to
/// `memchr` would cost more than it saves (a 100-byte text, read and written once per echo:
/// with 32 here, 1 % more instructions per request).
const SHORT: usize = 128;

/// How many bytes at the start of `bytes` need no escaping: on x86_64 sixteen bytes at a time
/// (SSE2, [`sys::escape_mask`]; a 100-byte text in about a quarter of the instructions of the
/// word tests), the last few bytes with the sixteen before them again; fewer than sixteen in
/// all, and on other targets, by [`words_clean_len`].
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn clean_len(bytes: &[u8]) -> usize {
    let mut rest = bytes;
    let mut clean = 0;
    while let Some((block, after)) = rest.split_first_chunk::<16>() {
        let flagged = sys::escape_mask(block);
        if flagged != 0 {
            return clean + flagged.trailing_zeros() as usize;
        }
        clean += 16;
        rest = after;
    }
    if rest.is_empty() {
        return clean;
    }
    match bytes.last_chunk::<16>() {
        // The last sixteen bytes: those before `rest` were found clean already.
        Some(last) => {
            let flagged = sys::escape_mask(last) >> (16 - rest.len());
            clean
                + if flagged != 0 {
                    flagged.trailing_zeros() as usize
                } else {
                    rest.len()
                }
        }
        None => words_clean_len(rest),
    }
}

/// How many bytes at the start of `bytes` need no escaping (see [`clean_len`]).
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(crate) fn clean_len(bytes: &[u8]) -> usize {
    words_clean_len(bytes)
}

/// [`clean_len`] by word tests: the first [`SHORT`] bytes eight at a time, a longer run by
/// [`long_clean_len`].
#[inline]
fn words_clean_len(bytes: &[u8]) -> usize {
    let mut rest = bytes;
    let mut clean = 0;
    while let Some((word, after)) = rest.split_first_chunk::<8>() {
        let flagged = escape_lanes(u64::from_le_bytes(*word));
        if flagged != 0 {
            // The first flagged lane is the first byte to escape.
            return clean + (flagged.trailing_zeros() / 8) as usize;
        }
        clean += 8;
        rest = after;
        if clean == SHORT {
            return SHORT + long_clean_len(rest);
        }
    }
    // The last few bytes, fewer than a word.
    clean
        + rest
            .iter()
            .position(|&byte| ESCAPE[usize::from(byte)] != 0)
            .unwrap_or(rest.len())
}

/// [`clean_len`] of a long run: `"` and `\` found by `memchr` (vectorised), then control
/// characters, rare, by a word test of the run before them.
#[inline(never)]
fn long_clean_len(bytes: &[u8]) -> usize {
    let end = memchr::memchr2(b'"', b'\\', bytes).unwrap_or(bytes.len());
    let run = &bytes[..end];
    let mut clean = 0;
    for chunk in run.chunks_exact(8) {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break; // Not reached: the chunks are exactly 8 bytes.
        };
        if control_lanes(u64::from_ne_bytes(word)) != 0 {
            break;
        }
        clean += 8;
    }
    let tail = &run[clean..];
    clean + tail.iter().position(|&b| b < 0x20).unwrap_or(tail.len())
}

/// Appends `s` as a JSON string (quoted, escaped as serde_json escapes).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let mut rest = s.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    loop {
        let clean = clean_len(rest);
        out.extend_from_slice(&rest[..clean]);
        let Some(&byte) = rest.get(clean) else {
            break;
        };
        match ESCAPE[usize::from(byte)] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(byte >> 4)],
                    HEX[usize::from(byte & 0xF)],
                ]);
            }
            escape => out.extend_from_slice(&[b'\\', escape]),
        }
        rest = &rest[clean + 1..];
    }
    out.push(b'"');
}

/// Appends a number as serde_json writes it (its own integer and float writers).
fn write_number(out: &mut Vec<u8>, number: &Number) {
    // Writing a number into a `Vec` cannot fail (no fallible parts, infallible writes).
    serde_json::to_writer(&mut *out, number).expect("a number into a Vec");
}

/// Appends `value` as compact JSON: the bytes of `serde_json::to_writer(out, value)`, object
/// members in the map's own order.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// Arbitrary JSON values for the property tests of the crate's JSON reader and writer.
#[cfg(test)]
pub(crate) fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    use serde_json::{json, Value};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x7f]{0,24}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ours(value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, value);
        out
    }

    #[test]
    fn every_byte_is_escaped_as_serde_json_escapes_it() {
        for c in (0u32..0x300).filter_map(char::from_u32) {
            // The byte alone, and inside and around runs longer than a word, at each offset.
            for text in [
                c.to_string(),
                format!("{c}abcdefghijklmnop"),
                format!("abcdefghijklmnop{c}"),
                format!("abcdefg{c}hijklmnop{c}{c}qrstuvw{c}"),
            ] {
                let value = Value::String(text);
                assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap(), "{c:?}");
            }
        }
    }

    #[test]
    fn the_first_byte_to_escape_is_found_with_others_after_it_in_the_same_word() {
        let specials = [b'"', b'\\', 0x00, 0x1f, b'\n'];
        let harmless = [b'x', 0x20, 0x7f, 0x80, 0xc3, 0xff, b'/', b'!', b'#', b']'];
        // Past two of the sixteen-byte blocks, so the last bytes are tested with the block
        // before them; every scan the crate has, whichever this target uses.
        for len in 1..42 {
            for first in 0..len {
                for second in first + 1..len.min(first + 9) {
                    for (i, &a) in specials.iter().enumerate() {
                        let b = specials[(i + second) % specials.len()];
                        let filler = harmless[(first + second + len) % harmless.len()];
                        let mut bytes = vec![filler; len];
                        bytes[first] = a;
                        bytes[second] = b;
                        assert_eq!(clean_len(&bytes), first, "{bytes:?}");
                        assert_eq!(words_clean_len(&bytes), first, "{bytes:?}");
                    }
                }
            }
            assert_eq!(clean_len(&vec![b'x'; len]), len);
            assert_eq!(words_clean_len(&vec![b'x'; len]), len);
        }
    }

    #[test]
    fn an_escape_at_each_offset_of_a_long_string_is_written_as_serde_json_writes_it() {
        // Past the word tests' inline part, into `long_clean_len`.
        for len in 0..SHORT + 40 {
            for at in 0..len {
                for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', '\u{7f}', 'é', '€'] {
                    let mut text: String = "x".repeat(len);
                    text.replace_range(at..at + 1, &special.to_string());
                    let escaped = special < ' ' || special == '"' || special == '\\';
                    let clean = if escaped { at } else { text.len() };
                    assert_eq!(clean_len(text.as_bytes()), clean, "{text:?}");
                    assert_eq!(words_clean_len(text.as_bytes()), clean, "{text:?}");
                    let value = Value::String(text);
                    assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap());
                }
            }
        }
    }

    #[test]
    fn values_of_every_kind_are_written_as_serde_json_writes_them() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(-1),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(0.1),
            json!(-0.0),
            json!(1e300),
            json!(2.5e-8),
            json!([]),
            json!({}),
            json!([1, "a", null, [[]], {}]),
            json!({ "b": 1, "a": [true, { "z": "\"q\"", "": -2.5 }], "é": "\u{0}\u{7f}" }),
        ];
        for value in values {
            assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap(), "{value}");
        }
    }

    proptest! {
        #[test]
        fn any_value_is_written_as_serde_json_writes_it(value in any_value()) {
            prop_assert_eq!(ours(&value), serde_json::to_vec(&value).unwrap());
        }
    }
}
