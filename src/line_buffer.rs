//! Complete lines out of a byte stream that arrives in arbitrary pieces.
//!
//! Sans-IO: the caller reads into [`LineBuffer::spare`], reports how much with
//! [`LineBuffer::commit`], and takes lines with [`LineBuffer::next_line`]. Bytes are searched for
//! `\n` once only, so a 64 MiB line arriving in 64 KiB pieces costs O(n), not O(n²).

/// How much room a read gets at the least (a buffer let go is replaced by one of twice this).
pub(crate) const MIN_READ: usize = 64 * 1024;

/// The most a long line's buffer is zeroed ahead of the reads that fill it, so also about the
/// most one read brings: a line's buffer holds little more of the next line when the line ends,
/// which moves to a small buffer of its own and lets the large one go (else a regular file
/// would fill a 16 MiB buffer with most of the next message in one read, and the buffer would
/// stay alive while this one is answered).
const MAX_STEP: usize = 64 * 1024;

/// A buffer up to this size is kept once its line is taken: lines of a hundred kilobytes or so,
/// one after another, reuse it instead of each allocating (and faulting in) a fresh one.
const KEEP: usize = 4 * MIN_READ;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What [`LineBuffer::next_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A complete line: no `\n`, no trailing `\r`, not blank.
    Complete(&'a [u8]),
    /// A line longer than the limit. It is reported once, as soon as it is known to be too long;
    /// the rest of its bytes, up to its newline, are dropped as they arrive.
    Oversize,
}

/// A growable buffer of unread input with an incremental newline search and a line size limit.
#[derive(Debug)]
pub(crate) struct LineBuffer {
    /// Storage; bytes past `end` are scratch space for the next read.
    buf: Vec<u8>,
    /// First unconsumed byte. Invariant: `start <= scanned <= end <= buf.len()`.
    start: usize,
    /// Bytes in `start..scanned` are known to hold no `\n`.
    scanned: usize,
    /// End of the bytes read so far.
    end: usize,
    /// Inside an oversize line: bytes up to the next `\n` are dropped, not kept.
    discarding: bool,
    /// No line has been taken yet, so a UTF-8 byte order mark may still lead the stream.
    at_stream_start: bool,
    /// The longest line accepted, in bytes, without its `\n` or `\r\n`.
    max_line: usize,
}

impl LineBuffer {
    /// An empty buffer that accepts lines of up to `max_line` bytes.
    pub(crate) fn new(max_line: usize) -> LineBuffer {
        LineBuffer {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            end: 0,
            discarding: false,
            at_stream_start: true,
            max_line,
        }
    }

    /// Room to read into: at least [`MIN_READ`] bytes, more while a long line is arriving.
    ///
    /// Moves pending bytes to the front when that makes room, and gives memory back once a large
    /// line has been consumed.
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        self.give_back();
        let pending = self.end - self.start;
        if pending == 0 {
            self.start = 0;
            self.scanned = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < MIN_READ {
            if self.start > 0 {
                // Each byte of a line is moved at most once by this: after it, `start` is 0
                // until that line has been consumed.
                self.buf.copy_within(self.start..self.end, 0);
                self.scanned -= self.start;
                self.end = pending;
                self.start = 0;
            }
            if self.buf.len() - self.end < MIN_READ {
                self.grow();
            }
        }
        &mut self.buf[self.end..]
    }

    /// Makes room for the next read of a line longer than the buffer.
    ///
    /// The allocation grows by doubling (`realloc`, which moves a large block's pages instead
    /// of copying them and never touches what is not used), while only the next window is
    /// zeroed, just before a read fills it: a long line costs its own length in memory, not
    /// the doubled capacity, and each byte is written once by the zeroing and once by the read.
    fn grow(&mut self) {
        // A line is dropped once it exceeds `max_line + 1` bytes (the +1 is a `\r`), so the
        // buffer never needs to hold more than that plus one read.
        let cap = self.max_line.saturating_add(2 + BOM.len() + MIN_READ);
        let step = self.buf.len().clamp(MIN_READ, MAX_STEP);
        let wanted = (self.end + step).min(cap).max(self.end + MIN_READ);
        let additional = wanted - self.buf.len();
        self.buf.reserve(additional);
        crate::sys::prefault(&mut self.buf.spare_capacity_mut()[..additional]);
        self.buf.resize(wanted, 0);
    }

    /// Gives the memory of a large line back once it has been taken: called after each line is
    /// handled, so that a long line's buffer is not held while its response is built. A buffer
    /// of at most [`KEEP`] is kept for the next lines.
    pub(crate) fn give_back(&mut self) {
        if self.buf.capacity() <= KEEP {
            return;
        }
        let pending = self.end - self.start;
        if pending == 0 {
            self.buf = Vec::new();
            self.start = 0;
            self.scanned = 0;
            self.end = 0;
        } else if pending <= MAX_STEP + MIN_READ {
            // Only the start of the next line is here (one read at most): keep it in a small
            // buffer.
            self.move_to(vec![0; (pending + MIN_READ).max(2 * MIN_READ)]);
        }
    }

    /// Moves the pending bytes to the front of `fresh`, which becomes the buffer.
    fn move_to(&mut self, mut fresh: Vec<u8>) {
        let pending = self.end - self.start;
        fresh[..pending].copy_from_slice(&self.buf[self.start..self.end]);
        self.scanned -= self.start;
        self.end = pending;
        self.start = 0;
        self.buf = fresh;
    }

    /// Records that `n` bytes were read into the front of [`LineBuffer::spare`].
    pub(crate) fn commit(&mut self, n: usize) {
        debug_assert!(self.end + n <= self.buf.len());
        self.end += n;
    }

    /// The length of the next line if it is complete (its newline has arrived), without taking
    /// it; blank lines count as lines here. `None` while the next line is still arriving.
    pub(crate) fn next_complete_len(&mut self) -> Option<usize> {
        if self.discarding {
            return None;
        }
        match memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) {
            Some(offset) => {
                // Still no newline in `start..scanned`: it is at `scanned`.
                self.scanned += offset;
                Some(self.scanned - self.start)
            }
            None => {
                self.scanned = self.end;
                None
            }
        }
    }

    /// How many bytes were read but not yet taken as lines.
    pub(crate) fn pending(&self) -> usize {
        self.end - self.start
    }

    /// The last `n` bytes read, or fewer when lines were taken from among them.
    pub(crate) fn recent(&self, n: usize) -> &[u8] {
        &self.buf[self.end.saturating_sub(n).max(self.start)..self.end]
    }

    /// The memory the buffer holds (allocated, touched or not).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// How much of the memory has been written (zeroed or read into).
    #[cfg(test)]
    fn initialised(&self) -> usize {
        self.buf.len()
    }

    /// The next complete line, skipping blank ones; `None` when more bytes are needed.
    pub(crate) fn next_line(&mut self) -> Option<Line<'_>> {
        let found = self.next_range()?;
        Some(self.line_at(found))
    }

    /// At end of input: every complete line, then the final line if it had no newline, then
    /// `None`.
    pub(crate) fn finish(&mut self) -> Option<Line<'_>> {
        if let Some(found) = self.next_range() {
            return Some(self.line_at(found));
        }
        let (line_start, line_end) = (self.start, self.end);
        self.start = self.end;
        self.scanned = self.end;
        if std::mem::take(&mut self.discarding) || line_start == line_end {
            return None;
        }
        let found = self.check(line_start, line_end)?;
        Some(self.line_at(found))
    }

    /// Where the next line is, as indices (so no borrow outlives the search).
    fn next_range(&mut self) -> Option<Found> {
        loop {
            let newline = memchr::memchr(b'\n', &self.buf[self.scanned..self.end]);
            let Some(offset) = newline else {
                self.scanned = self.end;
                if self.discarding {
                    // Drop what arrived of the oversize line; it is never kept.
                    self.start = self.end;
                    return None;
                }
                // A partial line may still lose a trailing `\r` (and, first in the stream, a
                // BOM) before it is measured, so allow for those.
                let slack = if self.at_stream_start {
                    1 + BOM.len()
                } else {
                    1
                };
                if self.end - self.start > self.max_line.saturating_add(slack) {
                    self.discarding = true;
                    self.at_stream_start = false;
                    self.start = self.end;
                    return Some(Found::Oversize);
                }
                return None;
            };
            let line_end = self.scanned + offset;
            let line_start = self.start;
            self.start = line_end + 1;
            self.scanned = self.start;
            if self.discarding {
                // This newline ends the oversize line; what follows is a fresh line.
                self.discarding = false;
                continue;
            }
            if let Some(found) = self.check(line_start, line_end) {
                return Some(found);
            }
        }
    }

    /// Trims a raw line (a trailing `\r`, a BOM leading the stream) and checks its size;
    /// `None` for a blank line.
    fn check(&mut self, mut start: usize, mut end: usize) -> Option<Found> {
        if end > start && self.buf[end - 1] == b'\r' {
            end -= 1;
        }
        if std::mem::take(&mut self.at_stream_start) && self.buf[start..end].starts_with(BOM) {
            start += BOM.len();
        }
        if end - start > self.max_line {
            return Some(Found::Oversize);
        }
        if self.buf[start..end]
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
        {
            return None;
        }
        Some(Found::Line(start, end))
    }

    fn line_at(&self, found: Found) -> Line<'_> {
        match found {
            Found::Line(start, end) => Line::Complete(&self.buf[start..end]),
            Found::Oversize => Line::Oversize,
        }
    }
}

/// A line's place in the buffer, or the news that it was too long.
#[derive(Debug, Clone, Copy)]
enum Found {
    Line(usize, usize),
    Oversize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a line buffer should yield: `Ok(line)` or `Err(())` for an oversize line.
    type Lines = Vec<Result<Vec<u8>, ()>>;

    /// The reference: split the whole input at once.
    fn naive_split(input: &[u8], max: usize) -> Lines {
        let mut out = Vec::new();
        for (i, piece) in input.split(|&b| b == b'\n').enumerate() {
            let mut line = piece;
            if let Some(stripped) = line.strip_suffix(b"\r") {
                line = stripped;
            }
            if i == 0 {
                line = line.strip_prefix(BOM).unwrap_or(line);
            }
            if line.len() > max {
                out.push(Err(()));
            } else if !line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                out.push(Ok(line.to_vec()));
            }
        }
        out
    }

    /// Feeds `input` in pieces of the given sizes (cycled), then finishes.
    fn feed(input: &[u8], sizes: &[usize], max: usize) -> Lines {
        let mut lb = LineBuffer::new(max);
        let mut out = Vec::new();
        let mut rest = input;
        let mut i = 0;
        while !rest.is_empty() {
            let spare = lb.spare();
            let n = sizes[i % sizes.len()]
                .max(1)
                .min(rest.len())
                .min(spare.len());
            spare[..n].copy_from_slice(&rest[..n]);
            lb.commit(n);
            rest = &rest[n..];
            i += 1;
            while let Some(line) = lb.next_line() {
                out.push(owned(line));
            }
        }
        while let Some(line) = lb.finish() {
            out.push(owned(line));
        }
        out
    }

    fn owned(line: Line<'_>) -> Result<Vec<u8>, ()> {
        match line {
            Line::Complete(l) => Ok(l.to_vec()),
            Line::Oversize => Err(()),
        }
    }

    #[test]
    fn the_next_complete_line_is_measured_without_being_taken() {
        let mut lines = LineBuffer::new(1 << 20);
        let feed = |lines: &mut LineBuffer, bytes: &[u8]| {
            lines.spare()[..bytes.len()].copy_from_slice(bytes);
            lines.commit(bytes.len());
        };
        feed(&mut lines, b"abc");
        assert_eq!(lines.next_complete_len(), None);
        feed(&mut lines, b"de\n\nxyz\n");
        assert_eq!(lines.next_complete_len(), Some(5));
        assert_eq!(lines.next_complete_len(), Some(5));
        assert_eq!(lines.next_line(), Some(Line::Complete(&b"abcde"[..])));
        // A blank line counts (it is skipped when taken).
        assert_eq!(lines.next_complete_len(), Some(0));
        assert_eq!(lines.next_line(), Some(Line::Complete(&b"xyz"[..])));
        assert_eq!(lines.next_complete_len(), None);
        assert_eq!(lines.pending(), 0);
    }

    #[test]
    fn lines_match_a_naive_split_whatever_the_chunking() {
        let inputs: &[&[u8]] = &[
            b"",
            b"a",
            b"a\nb\n",
            b"a\r\nb\r\n\r\n\n  \n\t\nc",
            b"\xEF\xBB\xBF{\"x\":1}\n{\"y\":2}\n",
            b"\xEF\xBB\xBF\n\xEF\xBB\xBFx\n",
            b"short\nthis line is far too long for the limit\nok\n",
            b"this line is far too long for the limit and has no newline",
            b"123456789\n1234567890\n12345678901\n123456789\r\n1234567890\r\n",
            b"\r\r\n\r\nx\r\r\n",
        ];
        for input in inputs {
            let want = naive_split(input, 10);
            for sizes in [&[1][..], &[2], &[3, 1], &[7], &[64], &[1, 100, 5]] {
                assert_eq!(
                    feed(input, sizes, 10),
                    want,
                    "input {:?} sizes {sizes:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }

    #[test]
    fn newline_on_either_side_of_the_read_size_boundary() {
        for len in [
            MIN_READ - 2,
            MIN_READ - 1,
            MIN_READ,
            MIN_READ + 1,
            2 * MIN_READ,
        ] {
            let mut input = vec![b'x'; len];
            input.push(b'\n');
            input.extend_from_slice(b"next\n");
            let want = naive_split(&input, 4 * MIN_READ);
            assert_eq!(feed(&input, &[MIN_READ], 4 * MIN_READ), want, "len {len}");
            assert_eq!(
                feed(&input, &[MIN_READ - 1], 4 * MIN_READ),
                want,
                "len {len}"
            );
            assert_eq!(want.len(), 2);
        }
    }

    #[test]
    fn a_line_exactly_at_the_limit_is_accepted_and_one_more_byte_is_not() {
        let max = 100;
        let mut input = vec![b'a'; max];
        input.extend_from_slice(b"\r\n");
        input.extend(vec![b'b'; max + 1]);
        input.extend_from_slice(b"\nc\n");
        let got = feed(&input, &[1, 13], max);
        assert_eq!(got, vec![Ok(vec![b'a'; max]), Err(()), Ok(b"c".to_vec())]);
    }

    #[test]
    fn an_oversize_line_is_reported_once_and_never_buffered() {
        let max = 1000;
        let mut lb = LineBuffer::new(max);
        let mut reports = 0;
        for _ in 0..1000 {
            let spare = lb.spare();
            spare[..MIN_READ].fill(b'z');
            lb.commit(MIN_READ);
            while let Some(line) = lb.next_line() {
                assert_eq!(line, Line::Oversize);
                reports += 1;
            }
            assert!(lb.capacity() <= 4 * MIN_READ, "capacity {}", lb.capacity());
        }
        assert_eq!(reports, 1);
        let spare = lb.spare();
        spare[..8].copy_from_slice(b"zz\nnext\n");
        lb.commit(8);
        assert_eq!(lb.next_line(), Some(Line::Complete(b"next")));
        assert_eq!(lb.next_line(), None);
    }

    #[test]
    fn memory_is_given_back_after_a_large_line() {
        let mut lb = LineBuffer::new(64 << 20);
        let big = 8 << 20;
        let mut sent = 0;
        while sent < big {
            let spare = lb.spare();
            let n = spare.len().min(big - sent);
            spare[..n].fill(b'q');
            lb.commit(n);
            sent += n;
            assert_eq!(lb.next_line(), None);
        }
        let spare = lb.spare();
        spare[0] = b'\n';
        lb.commit(1);
        assert!(matches!(lb.next_line(), Some(Line::Complete(l)) if l.len() == big));
        assert!(lb.capacity() >= big);
        lb.spare();
        assert!(lb.capacity() <= 2 * MIN_READ, "capacity {}", lb.capacity());
    }

    #[test]
    fn a_long_line_is_zeroed_only_a_step_ahead_of_the_reads() {
        // The allocation doubles, but only what the next read gets is written beforehand: a
        // 10 MB line must not cost the 16 MiB of its capacity in touched memory.
        let mut lb = LineBuffer::new(64 << 20);
        let big = 10_000_000;
        let mut sent = 0;
        while sent < big {
            let spare = lb.spare();
            let n = spare.len().min(MIN_READ).min(big - sent);
            spare[..n].fill(b'q');
            lb.commit(n);
            sent += n;
            assert_eq!(lb.next_line(), None);
            assert!(
                lb.initialised() <= sent + MAX_STEP + MIN_READ,
                "{} bytes written ahead of {sent}",
                lb.initialised() - sent
            );
        }
        assert!(lb.capacity() >= big);
        let spare = lb.spare();
        spare[0] = b'\n';
        lb.commit(1);
        assert!(matches!(lb.next_line(), Some(Line::Complete(l)) if l.len() == big));
    }

    #[test]
    fn lines_of_a_hundred_kilobytes_in_a_row_reuse_one_buffer() {
        // Pipe-sized reads (64 KiB) of 100 KB lines: the buffer that the first lines grew is
        // kept for the next ones, not replaced after each line (a fresh buffer per line is
        // faulted in page by page by the read that fills it).
        let mut lb = LineBuffer::new(1 << 20);
        let mut line = vec![b'x'; 100_000];
        line.push(b'\n');
        let input = line.repeat(20);
        let mut rest = &input[..];
        let mut first_buffer = None;
        let mut lines = 0;
        while !rest.is_empty() {
            let spare = lb.spare();
            let n = spare.len().min(MIN_READ).min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            lb.commit(n);
            rest = &rest[n..];
            while let Some(Line::Complete(l)) = lb.next_line() {
                assert_eq!(l.len(), 100_000);
                lines += 1;
                lb.give_back();
                // The buffer reaches its size during the second line (a line and a read).
                if lines >= 2 {
                    let at = lb.buf.as_ptr();
                    assert_eq!(*first_buffer.get_or_insert(at), at, "line {lines}");
                }
                assert!(lb.capacity() <= KEEP, "capacity {}", lb.capacity());
            }
        }
        assert_eq!(lines, 20);
    }

    #[test]
    fn the_start_of_the_next_line_moves_to_a_small_buffer_after_a_large_line() {
        let mut lb = LineBuffer::new(64 << 20);
        let mut input = vec![b'x'; 4 << 20];
        input.push(b'\n');
        input.extend_from_slice(b"{\"next\"");
        let mut rest = &input[..];
        while !rest.is_empty() {
            let spare = lb.spare();
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            lb.commit(n);
            rest = &rest[n..];
        }
        assert!(matches!(lb.next_line(), Some(Line::Complete(l)) if l.len() == 4 << 20));
        lb.give_back();
        assert!(lb.capacity() <= 2 * MIN_READ, "capacity {}", lb.capacity());
        let spare = lb.spare();
        spare[..3].copy_from_slice(b":1}");
        lb.commit(3);
        assert_eq!(lb.finish(), Some(Line::Complete(&b"{\"next\":1}"[..])));
    }

    #[test]
    fn a_large_buffer_is_let_go_even_when_a_whole_read_of_the_next_line_follows() {
        // Reads as large as the room allows (a regular file): the first line's buffer must not
        // be kept for the next line's first bytes.
        let mut input = vec![b'x'; 4 << 20];
        input.push(b'\n');
        input.extend(vec![b'y'; 4 << 20]);
        input.push(b'\n');
        let mut lb = LineBuffer::new(64 << 20);
        let mut rest = &input[..];
        let mut lines = 0;
        while !rest.is_empty() {
            let spare = lb.spare();
            assert!(
                spare.len() <= MAX_STEP + MIN_READ,
                "a read of {} bytes",
                spare.len()
            );
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            lb.commit(n);
            rest = &rest[n..];
            if let Some(Line::Complete(line)) = lb.next_line() {
                assert_eq!(line.len(), 4 << 20);
                lines += 1;
                lb.give_back();
                assert!(
                    lb.capacity() <= MAX_STEP + 2 * MIN_READ,
                    "capacity {}",
                    lb.capacity()
                );
            }
        }
        assert_eq!(lines, 2);
    }

    #[test]
    fn scanning_is_incremental() {
        // 64 MiB arriving in 64 KiB reads: quadratic rescanning would take minutes; linear takes
        // milliseconds. The bound only catches the quadratic case.
        let started = std::time::Instant::now();
        let total = 64 << 20;
        let mut lb = LineBuffer::new(total);
        let mut sent = 0;
        while sent < total {
            let spare = lb.spare();
            let n = spare.len().min(MIN_READ).min(total - sent);
            spare[..n].fill(b'a');
            lb.commit(n);
            sent += n;
            assert_eq!(lb.next_line(), None);
        }
        let spare = lb.spare();
        spare[0] = b'\n';
        lb.commit(1);
        assert!(matches!(lb.next_line(), Some(Line::Complete(l)) if l.len() == total));
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }
}
