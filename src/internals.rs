//! The sans-IO pieces of the loop, for the crate's own benchmarks, fuzz targets and the tests
//! that replay or measure them. Compiled only with the `internals` cargo feature.
//!
//! **Unstable**: not part of the crate's API and exempt from semver; anything here may change
//! or vanish in any release. Each item forwards to the crate-private code the server loop runs,
//! so what is measured and fuzzed is what serves.

use std::io;

use crate::line_buffer::{Line, LineBuffer};
use crate::message::{parse_line, Message, Parsed, Response};
use crate::write_queue::WriteQueue;

/// A line longer than the limit, as the line buffer reports it (once per oversize line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversize;

/// The loop's line buffer: complete lines out of bytes that arrive in arbitrary pieces.
#[derive(Debug)]
pub struct LineSplitter(LineBuffer);

impl LineSplitter {
    /// An empty buffer that accepts lines of up to `max_line` bytes.
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter(LineBuffer::new(max_line))
    }

    /// Room to read into (at least 64 KiB).
    pub fn spare(&mut self) -> &mut [u8] {
        self.0.spare()
    }

    /// Records that `n` bytes were written to the front of [`LineSplitter::spare`].
    pub fn commit(&mut self, n: usize) {
        self.0.commit(n);
    }

    /// The next complete line (blank lines skipped, no `\n`, no trailing `\r`, no leading byte
    /// order mark), or [`Oversize`]; `None` when more bytes are needed.
    pub fn next_line(&mut self) -> Option<Result<&[u8], Oversize>> {
        self.0.next_line().map(from_line)
    }

    /// Like [`LineSplitter::next_line`] at end of input: the last line needs no newline.
    pub fn finish(&mut self) -> Option<Result<&[u8], Oversize>> {
        self.0.finish().map(from_line)
    }
}

fn from_line(line: Line<'_>) -> Result<&[u8], Oversize> {
    match line {
        Line::Complete(bytes) => Ok(bytes),
        Line::Oversize => Err(Oversize),
    }
}

/// The loop's output queue: coalesced lines waiting for a writable fd.
#[derive(Debug)]
pub struct OutputQueue(WriteQueue);

impl OutputQueue {
    /// An empty queue that counts as full at `bound` pending bytes.
    pub fn new(bound: usize) -> OutputQueue {
        OutputQueue(WriteQueue::new(bound))
    }

    /// Appends one message as a line (serialising it, as the loop does for a response).
    pub fn push(&mut self, message: &Message) {
        self.0.push(message);
    }

    /// The buffer to append complete lines to directly.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        self.0.buffer()
    }

    /// Bytes still to be written.
    pub fn pending(&self) -> usize {
        self.0.pending()
    }

    /// Writes as much as `write` takes; `Ok(true)` when the queue is empty.
    ///
    /// # Errors
    /// Any error of `write` other than `WouldBlock`.
    pub fn write_to(&mut self, write: impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<bool> {
        self.0.write_to(write)
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
/// use mcpipe::internals::{classify, Classified};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_reports_oversize_lines_and_finishes_the_last_one() {
        let mut lines = LineSplitter::new(4);
        let input = b"a\r\n\n0123456789\nb";
        lines.spare()[..input.len()].copy_from_slice(input);
        lines.commit(input.len());
        assert_eq!(lines.next_line(), Some(Ok(&b"a"[..])));
        assert_eq!(lines.next_line(), Some(Err(Oversize)));
        assert_eq!(lines.next_line(), None);
        assert_eq!(lines.finish(), Some(Ok(&b"b"[..])));
        assert_eq!(lines.finish(), None);
    }
}
