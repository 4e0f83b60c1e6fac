//! Internals exposed for the crate's own benchmarks and allocation tests (`benches/micro.rs`,
//! `tests/framing_alloc.rs`).
//!
//! **Not part of the API.** Hidden from the docs, exempt from semver: anything here may change
//! or vanish in any release. Each type is a thin wrapper that forwards to the crate-private
//! type the server loop uses, so what is measured is what runs.

use std::io;

pub use crate::sys::CountingAllocator;

use crate::line_buffer::{Line, LineBuffer};
use crate::message::Message;
use crate::write_queue::WriteQueue;

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

    /// The next complete line (blank lines skipped, no `\n`, no trailing `\r`); an oversize
    /// line is returned as an empty slice (a complete line is never empty). `None` when more
    /// bytes are needed.
    pub fn next_line(&mut self) -> Option<&[u8]> {
        match self.0.next_line()? {
            Line::Complete(line) => Some(line),
            Line::Oversize => Some(&[]),
        }
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
