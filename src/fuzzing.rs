//! Hooks into the sans-IO core for the fuzz targets and the tests that replay their corpus.
//!
//! **Unstable**: not part of the crate's API, hidden from its docs, and free to change in any
//! release. The fuzz crate (`fuzz/`) can only use public items, so this module exposes exactly
//! what its targets drive and nothing more: the line buffer behind a whole-input function, and
//! the line classifier the loop applies to each line.

use crate::line_buffer::{Line, LineBuffer};
use crate::message::{parse_line, Message, Parsed, Response};

/// A line longer than the limit, as the line buffer reports it (once per oversize line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversize;

/// Splits `input` into lines with the loop's line buffer, delivering it in pieces.
///
/// The pieces have the sizes in `chunk_sizes`, cycled (a size of 0 counts as 1), each cut short
/// by the room the buffer offers and by the end of the input. After each piece every complete
/// line is taken, as the loop does after each read; at the end the input is finished as at end
/// of file. Returns each line without its `\n`, `\r` or leading byte order mark, blank lines
/// skipped, and [`Oversize`] for each line longer than `max_line` bytes.
///
/// # Example
/// ```
/// use mcpipe::fuzzing::{split_lines, Oversize};
/// let lines = split_lines(b"a\r\n\n0123456789\nb", &[2], 4);
/// assert_eq!(lines, vec![Ok(b"a".to_vec()), Err(Oversize), Ok(b"b".to_vec())]);
/// ```
pub fn split_lines(
    input: &[u8],
    chunk_sizes: &[usize],
    max_line: usize,
) -> Vec<Result<Vec<u8>, Oversize>> {
    let mut buffer = LineBuffer::new(max_line);
    let mut lines = Vec::new();
    let mut rest = input;
    let mut sizes = chunk_sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let spare = buffer.spare();
        let size = sizes.next().unwrap_or(usize::MAX).max(1);
        let n = size.min(rest.len()).min(spare.len());
        spare[..n].copy_from_slice(&rest[..n]);
        buffer.commit(n);
        rest = &rest[n..];
        while let Some(line) = buffer.next_line() {
            lines.push(owned(line));
        }
    }
    while let Some(line) = buffer.finish() {
        lines.push(owned(line));
    }
    lines
}

fn owned(line: Line<'_>) -> Result<Vec<u8>, Oversize> {
    match line {
        Line::Complete(bytes) => Ok(bytes.to_vec()),
        Line::Oversize => Err(Oversize),
    }
}

/// What the loop makes of one complete line before it calls the handler.
#[derive(Debug)]
pub enum Classified {
    /// A line holding one value (or an empty array, or bytes that are not JSON): the message,
    /// or the error response the loop sends instead.
    Single(Result<Message, Response>),
    /// A non-empty array: for each element, the message, or the error response it gets.
    Batch(Vec<Result<Message, Response>>),
}

/// Classifies one line (without its newline) exactly as the loop does.
///
/// # Example
/// ```
/// use mcpipe::fuzzing::{classify, Classified};
/// let c = classify(br#"[{"jsonrpc":"2.0","id":1,"method":"m"},7]"#);
/// assert!(matches!(c, Classified::Batch(ref items) if items.len() == 2 && items[1].is_err()));
/// ```
pub fn classify(line: &[u8]) -> Classified {
    match parse_line(line) {
        Parsed::Single(message) => Classified::Single(Ok(message)),
        Parsed::Invalid(response) => Classified::Single(Err(response)),
        Parsed::Batch(items) => Classified::Batch(items),
    }
}
