//! Bytes waiting for a writable fd: coalesced, written in as few calls as the fd allows, bounded.

use std::io;

use crate::message::Message;

/// A buffer that grew past this for a burst is shrunk back to it once written: a burst that
/// the peer reads slowly is likely to come again.
const KEEP_CAPACITY: usize = 1 << 20;

/// A buffer that grew past this (a large message) is shrunk to [`SHRUNK_CAPACITY`] instead, so
/// that the next large message's request and text are not joined by megabytes of idle output
/// buffer, and the large block is free for them to reuse.
const LARGE_CAPACITY: usize = 4 << 20;

/// A buffer grown for a large message with no more than this left to write moves what is left
/// to a buffer of its own size (see `compact`).
const RELEASE_BELOW: usize = 256 << 10;

/// Written bytes are dropped from the front of the buffer once there are more than this many
/// and they are the larger part of it.
const COMPACT_AFTER: usize = 64 * 1024;

/// What a buffer grown for a large message shrinks to.
const SHRUNK_CAPACITY: usize = 64 * 1024;

/// A byte queue that accepts whole messages and hands them to a non-blocking writer.
#[derive(Debug)]
pub(crate) struct WriteQueue {
    /// Serialised lines; `buf[pos..]` is still to be written. Invariant: `pos <= buf.len()`.
    buf: Vec<u8>,
    pos: usize,
    /// Past this many pending bytes the queue is full: the loop stops taking input.
    bound: usize,
}

impl WriteQueue {
    /// An empty queue that counts as full at `bound` pending bytes.
    pub(crate) fn new(bound: usize) -> WriteQueue {
        WriteQueue {
            buf: Vec::new(),
            pos: 0,
            bound,
        }
    }

    /// Appends one message as a line.
    pub(crate) fn push(&mut self, message: &Message) {
        message.write_line(&mut self.buf);
    }

    /// Appends raw bytes that already form complete lines.
    #[cfg(test)]
    pub(crate) fn push_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends `line`, complete lines, and leaves it empty. When nothing is waiting and the
    /// line is larger than the queue's buffer, the two buffers trade places instead: a large
    /// answer is written from where it was made, with no copy.
    pub(crate) fn push_line(&mut self, line: &mut Vec<u8>) {
        if self.pos == self.buf.len() && line.len() > self.buf.capacity() {
            self.buf.clear();
            self.pos = 0;
            std::mem::swap(&mut self.buf, line);
        } else {
            self.buf.extend_from_slice(line);
        }
        line.clear();
    }

    /// The buffer to serialise into directly; the caller appends whole lines only.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Bytes still to be written.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether the queue holds at least its bound: time to stop reading input.
    pub(crate) fn is_full(&self) -> bool {
        self.pending() >= self.bound
    }

    /// Writes as much as `write` takes, until the queue is empty or `write` would block.
    ///
    /// Returns `Ok(true)` when the queue is empty, `Ok(false)` when the fd would block.
    ///
    /// # Errors
    /// Any error of `write` other than `WouldBlock` (EPIPE when the peer is gone).
    pub(crate) fn write_to(
        &mut self,
        mut write: impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<bool> {
        while self.pos < self.buf.len() {
            match write(&self.buf[self.pos..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => self.pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.compact();
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.pos = 0;
        if self.buf.capacity() > LARGE_CAPACITY {
            self.buf.shrink_to(SHRUNK_CAPACITY);
        } else if self.buf.capacity() > KEEP_CAPACITY {
            self.buf.shrink_to(KEEP_CAPACITY);
        }
        Ok(true)
    }

    /// Drops written bytes from the front once they are the larger part of the buffer. A large
    /// buffer (a large message) almost all written gives its memory back: what is left moves
    /// to a buffer of its own size, so that the written megabytes are not resident beside the
    /// next message. Until then a large buffer is compacted only when it is nearly full: moving
    /// the unwritten half of a 10 MB answer to the front frees no memory (the pages stay
    /// resident) and was 4 % of a 10 MB echo's time; it only makes room, which the spare
    /// capacity usually holds.
    fn compact(&mut self) {
        let pending = self.pending();
        let large = self.buf.capacity() > LARGE_CAPACITY;
        if large && pending <= RELEASE_BELOW {
            let mut rest = Vec::with_capacity(pending.max(SHRUNK_CAPACITY));
            rest.extend_from_slice(&self.buf[self.pos..]);
            self.buf = rest;
            self.pos = 0;
        } else if self.pos > COMPACT_AFTER
            && self.pos * 2 > self.buf.len()
            && (!large || self.buf.capacity() - self.buf.len() < COMPACT_AFTER)
        {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Notification, Response};
    use serde_json::json;

    /// One pass of the loop's writing to a peer that takes `budget` bytes (appended to `out`),
    /// then has a full pipe: whether the queue emptied.
    fn write_at_most(q: &mut WriteQueue, mut budget: usize, out: &mut Vec<u8>) -> bool {
        q.write_to(|b| {
            if budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(budget);
            budget -= n;
            out.extend_from_slice(&b[..n]);
            Ok(n)
        })
        .unwrap()
    }

    #[test]
    fn partial_writes_resume_where_they_stopped() {
        let mut q = WriteQueue::new(1 << 20);
        for i in 0..100 {
            q.push(&Message::Response(Response::ok(i.into(), json!({"i": i}))));
        }
        let total = q.pending();
        let mut out = Vec::new();
        let mut budget = 7;
        loop {
            let done = q
                .write_to(|b| {
                    if budget == 0 {
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    budget -= 1;
                    let n = b.len().min(33);
                    out.extend_from_slice(&b[..n]);
                    Ok(n)
                })
                .unwrap();
            if done {
                break;
            }
            budget = 7;
        }
        assert_eq!(out.len(), total);
        assert_eq!(out.split(|&b| b == b'\n').count(), 101);
        assert_eq!(q.pending(), 0);
    }

    #[test]
    fn a_burst_is_written_in_one_call_when_the_fd_takes_it() {
        let mut q = WriteQueue::new(1 << 20);
        for _ in 0..50 {
            q.push(&Message::Notification(Notification {
                method: "n".into(),
                params: None,
            }));
        }
        let mut calls = 0;
        assert!(q
            .write_to(|b| {
                calls += 1;
                Ok(b.len())
            })
            .unwrap());
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_peer_that_keeps_a_backlog_does_not_make_written_bytes_pile_up() {
        // 100 KB answers, the peer taking one answer's worth per turn behind a backlog of
        // three: the written bytes are dropped from the front long before a megabyte of them
        // sits in the buffer beside what is still to be written.
        let mut q = WriteQueue::new(64 << 20);
        let mut message = vec![b'z'; 100_000];
        message.push(b'\n');
        let mut out = Vec::new();
        for turn in 0..40 {
            q.push_bytes(&message);
            if turn < 3 {
                continue;
            }
            assert!(!write_at_most(&mut q, message.len(), &mut out));
            assert!(
                q.buf.len() <= 2 * q.pending() + COMPACT_AFTER,
                "turn {turn}: {} bytes held for {} pending",
                q.buf.len(),
                q.pending()
            );
        }
        assert_eq!(out.len() + q.pending(), 40 * message.len());
    }

    #[test]
    fn a_large_answer_is_not_moved_while_it_is_written_in_pieces() {
        // A 10 MB answer with room behind it, the peer taking 64 KiB a turn: nothing moves
        // until the end, when the last bytes go to a small buffer of their own.
        let mut q = WriteQueue::new(64 << 20);
        q.buffer().reserve(16 << 20);
        let mut message = vec![b'w'; 10_000_000];
        message.push(b'\n');
        q.push_bytes(&message);
        let start = q.buf.as_ptr();
        let mut out = Vec::new();
        while q.pending() > RELEASE_BELOW + (64 << 10) {
            assert!(!write_at_most(&mut q, 64 << 10, &mut out));
            assert_eq!(q.buf.as_ptr(), start);
            assert_eq!(q.pos, out.len(), "the written bytes were moved");
        }
        while !write_at_most(&mut q, 64 << 10, &mut out) {}
        assert_eq!(out, message);
        assert!(q.buf.capacity() <= KEEP_CAPACITY);
    }

    #[test]
    fn a_burst_keeps_a_megabyte_and_a_large_message_a_small_buffer_once_written() {
        let mut q = WriteQueue::new(64 << 20);
        q.push_bytes(&vec![b'x'; 2_000_000]);
        q.push_bytes(b"\n");
        assert!(q.write_to(|b| Ok(b.len())).unwrap());
        assert_eq!(q.buf.capacity(), KEEP_CAPACITY);
        q.push_bytes(&vec![b'x'; 10_000_000]);
        q.push_bytes(b"\n");
        assert!(q.write_to(|b| Ok(b.len())).unwrap());
        assert!(
            q.buf.capacity() <= SHRUNK_CAPACITY,
            "capacity {}",
            q.buf.capacity()
        );
    }

    #[test]
    fn a_large_buffer_almost_all_written_gives_its_memory_back_before_the_end() {
        let mut q = WriteQueue::new(64 << 20);
        let mut message = vec![b'y'; 10_000_000];
        message.push(b'\n');
        q.push_bytes(&message);
        let mut out = Vec::new();
        // The peer takes all but the last 100 KB, then its pipe is full.
        let mut budget = message.len() - 100_000;
        let write = |b: &[u8], out: &mut Vec<u8>, budget: &mut usize| {
            if *budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(*budget).min(1 << 16);
            *budget -= n;
            out.extend_from_slice(&b[..n]);
            Ok(n)
        };
        assert!(!q.write_to(|b| write(b, &mut out, &mut budget)).unwrap());
        assert_eq!(q.pending(), 100_000);
        assert!(
            q.buf.capacity() <= RELEASE_BELOW,
            "capacity {}",
            q.buf.capacity()
        );
        budget = usize::MAX;
        assert!(q.write_to(|b| write(b, &mut out, &mut budget)).unwrap());
        assert_eq!(out, message);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Whatever the messages (some of megabytes), however they come in, and however the
        /// peer takes them (any amounts, full pipes anywhere), every byte goes out once, in
        /// order; and a buffer grown for a large message never stays large once little of it
        /// is left.
        #[test]
        fn every_byte_goes_out_once_in_order_and_large_buffers_shrink(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![1usize..2_000, 100_000usize..6_000_000],
                1..6,
            ),
            // After each message the peer leaves this many bytes unread (its pipe is full).
            lefts in proptest::collection::vec(
                proptest::prop_oneof![0usize..300_000, 300_000usize..6_000_000],
                1..8,
            ),
        ) {
            let mut q = WriteQueue::new(usize::MAX);
            let mut sent = Vec::new();
            let mut out = Vec::new();
            let mut lefts = lefts.into_iter().cycle();
            for (i, size) in sizes.iter().enumerate() {
                let mut line = vec![b'a' + (i % 26) as u8; *size];
                line.push(b'\n');
                sent.extend_from_slice(&line);
                // Both ways in: serialised into the buffer, or a line handed over (taken
                // whole when nothing waits and it is larger than the buffer).
                if i % 2 == 0 {
                    q.push_line(&mut line);
                    proptest::prop_assert!(line.is_empty());
                } else {
                    q.buffer().extend_from_slice(&line);
                }
                // One pass of the loop's writing: the peer takes all but `left` bytes, then
                // its pipe is full.
                let budget = q.pending().saturating_sub(lefts.next().unwrap_or(0));
                let done = write_at_most(&mut q, budget, &mut out);
                if !done && q.pending() <= RELEASE_BELOW {
                    proptest::prop_assert!(
                        q.buf.capacity() <= LARGE_CAPACITY,
                        "capacity {} with {} pending",
                        q.buf.capacity(),
                        q.pending()
                    );
                }
            }
            let emptied = q
                .write_to(|b| {
                    out.extend_from_slice(b);
                    Ok(b.len())
                })
                .unwrap();
            proptest::prop_assert!(emptied);
            proptest::prop_assert!(out == sent, "{} bytes out of {}", out.len(), sent.len());
        }
    }

    #[test]
    fn full_at_the_bound() {
        let mut q = WriteQueue::new(10);
        assert!(!q.is_full());
        q.push_bytes(b"0123456789\n");
        assert!(q.is_full());
        let err = q
            .write_to(|_| Err(io::ErrorKind::BrokenPipe.into()))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
