//! Everything the crate says on stderr: one process-wide sink that never blocks and never
//! panics, and a rate-limited reporter of bad input on top of it.
//!
//! Why not `eprintln!`: it blocks when nobody reads stderr (a launcher that pipes it and never
//! drains it), and it panics on `EPIPE` when the reader closed it. Either would stall or kill
//! the session over a log line. The sink instead keeps at most [`SINK_BYTES`] of unwritten
//! text, writes it without blocking whenever it is touched (the loop calls [`flush`] on every
//! pass), drops and counts lines that do not fit (and says how many, once stderr drains), and
//! stops logging for good when stderr is gone (`EPIPE`, `EBADF`). A process at its fd limit
//! (`EMFILE`) writes fd 2 as it is until an fd of its own can be had. Any thread may use it:
//! the lock is held only for a non-blocking write.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sys::{self, FileKind};

/// The most unwritten stderr text kept; a line that does not fit is dropped and counted.
pub(crate) const SINK_BYTES: usize = 64 * 1024;

/// At most this many bad-input lines per window; the rest are counted and summarised.
const LINES_PER_WINDOW: u32 = 10;
const WINDOW: Duration = Duration::from_secs(1);

/// How bytes reach stderr without blocking.
#[derive(Debug)]
enum Writer {
    /// A private non-blocking description of the pipe (Linux), or a file that never blocks.
    Direct(OwnedFd),
    /// A socket: `send` with `MSG_DONTWAIT`.
    Socket(OwnedFd),
    /// Anything else (a tty, a FIFO where it cannot be reopened): write only what `poll` says
    /// fits, in pieces no larger than the smallest `PIPE_BUF` (512 bytes).
    Polled(OwnedFd),
    /// fd 2 itself, written as `Polled` is, while no fd of our own can be had for it (the
    /// process is at its fd limit): the next flush tries again.
    Borrowed,
}

impl Writer {
    /// Prepares fd 2 for non-blocking writes: `Ok(None)` when it is closed or unusable, `Err`
    /// when no fd could be had for it now (`EMFILE`, `ENFILE`).
    fn open() -> io::Result<Option<Writer>> {
        // fd 2 is borrowed only for this call; what we keep is our own duplicate or reopening.
        let stderr = io::stderr();
        let fd = stderr.as_fd();
        let Ok(kind) = sys::file_kind(2) else {
            return Ok(None);
        };
        let opened = match kind {
            FileKind::Regular => sys::dup_cloexec(fd, 3).map(Writer::Direct),
            FileKind::Socket => sys::dup_cloexec(fd, 3).map(Writer::Socket),
            FileKind::Fifo => match sys::reopen_nonblocking(fd, true) {
                Ok(private) => Ok(Writer::Direct(private)),
                Err(_) => sys::dup_cloexec(fd, 3).map(Writer::Polled),
            },
            _ => sys::dup_cloexec(fd, 3).map(Writer::Polled),
        };
        match opened {
            Ok(writer) => Ok(Some(writer)),
            Err(e) if sys::out_of_fds(&e) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// Writes what the kernel takes now; `Ok(0)` when it takes nothing.
    fn write(&self, bytes: &[u8]) -> io::Result<usize> {
        let polled = |fd: BorrowedFd<'_>| {
            if !sys::writable_now(fd)? {
                return Ok(0);
            }
            sys::write(fd, &bytes[..bytes.len().min(512)])
        };
        let result = match self {
            Writer::Direct(fd) => sys::write(fd.as_fd(), bytes),
            Writer::Socket(fd) => sys::send_nowait(fd.as_fd(), bytes),
            Writer::Polled(fd) => polled(fd.as_fd()),
            Writer::Borrowed => polled(io::stderr().as_fd()),
        };
        match result {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }
}

/// The process-wide stderr sink. Invariant: `pending.len() <= SINK_BYTES`.
#[derive(Debug)]
struct Sink {
    /// `None` until first used; then the writer, or `None` inside when stderr is unusable.
    writer: Option<Option<Writer>>,
    pending: VecDeque<u8>,
    /// Lines dropped because the buffer was full or stderr was gone, ever.
    dropped: u64,
    /// `dropped` as of the last "lines dropped" notice.
    dropped_told: u64,
    /// Stderr refused a write for good: nothing more is written.
    closed: bool,
}

static SINK: Mutex<Sink> = Mutex::new(Sink {
    writer: None,
    pending: VecDeque::new(),
    dropped: 0,
    dropped_told: 0,
    closed: false,
});

fn sink() -> std::sync::MutexGuard<'static, Sink> {
    // A panic while holding the lock leaves the sink consistent (plain bytes and counters).
    SINK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sink {
    fn push(&mut self, line: &str) {
        let needed = line.len() + 1;
        if self.closed || self.pending.len() + needed > SINK_BYTES {
            self.dropped += 1;
            return;
        }
        self.pending.extend(line.as_bytes());
        self.pending.push_back(b'\n');
    }

    fn flush(&mut self) {
        if self.closed {
            self.pending.clear();
            return;
        }
        if matches!(self.writer, None | Some(Some(Writer::Borrowed))) {
            // First use, or the last one found the process out of fds: our own fd now, else
            // fd 2 as it is (a diagnostic at the fd limit is the one that says why).
            self.writer = Some(Writer::open().unwrap_or(Some(Writer::Borrowed)));
        }
        let Some(Some(writer)) = &self.writer else {
            self.closed = true;
            self.dropped += self.pending.iter().filter(|b| **b == b'\n').count() as u64;
            self.pending.clear();
            return;
        };
        while !self.pending.is_empty() {
            let (front, _) = self.pending.as_slices();
            match writer.write(front) {
                Ok(0) => return,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                // EPIPE, EBADF, EIO: stderr is gone. Logging ends; the server does not.
                Err(_) => {
                    self.closed = true;
                    self.pending.clear();
                    return;
                }
            }
        }
        if self.dropped > self.dropped_told {
            let notice = format!(
                "mcpipe: {} diagnostic lines were dropped (stderr was full or not being read)",
                self.dropped - self.dropped_told
            );
            self.dropped_told = self.dropped;
            self.push(&notice);
            // One more round writes the notice, or leaves it for the next flush.
            if let Some(Some(writer)) = &self.writer {
                let (front, _) = self.pending.as_slices();
                if let Ok(n) = writer.write(front) {
                    self.pending.drain(..n);
                }
            }
        }
    }
}

/// Writes one line to stderr without ever blocking or panicking: what stderr does not take now
/// is kept (up to 64 KiB, written on the next call or by the server loop) and a line that does
/// not fit is dropped and counted ([`Stats::stderr_lines_dropped`](crate::Stats)). Logging
/// stops for good once stderr is closed (`EPIPE`); the program goes on. A newline is added.
///
/// Use it instead of `eprintln!` anywhere a server may run: `eprintln!` blocks when nobody
/// reads stderr and panics when the reader closed it. Any thread may call it.
///
/// # Example
/// ```
/// mcpipe::stderr_line("my-server: cache warmed (1,024 entries)");
/// ```
pub fn stderr_line(text: &str) {
    line(text);
}

/// Queues one line for stderr (a newline is added) and writes what stderr takes now. Never
/// blocks, never panics; a line that does not fit is dropped and counted.
pub(crate) fn line(text: &str) {
    let mut sink = sink();
    sink.push(text);
    sink.flush();
    publish(&sink);
}

/// Writes queued stderr text as far as stderr takes it now. Cheap when there is nothing to
/// write (one atomic load, no lock): the loop calls it on every pass.
pub(crate) fn flush() {
    if !UNWRITTEN.load(Ordering::Acquire) {
        return;
    }
    let mut sink = sink();
    sink.flush();
    publish(&sink);
}

/// How many stderr lines were dropped in this process so far (no lock).
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether the sink holds text (or a drop notice) not yet written; read without the lock.
static UNWRITTEN: AtomicBool = AtomicBool::new(false);
/// `Sink::dropped`, readable without the lock.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Makes the sink's state readable without its lock; called with the lock held.
fn publish(sink: &Sink) {
    let unwritten = !sink.pending.is_empty() || sink.dropped > sink.dropped_told;
    UNWRITTEN.store(unwritten, Ordering::Release);
    DROPPED.store(sink.dropped, Ordering::Relaxed);
}

/// Describes bad input on stderr through the sink, without flooding it.
#[derive(Debug)]
pub(crate) struct Diagnostics {
    window_start: Option<Instant>,
    printed_in_window: u32,
    suppressed: u64,
    /// Whether to print at all (tests of floods turn it off; counting goes on).
    pub(crate) enabled: bool,
    /// Who is speaking, after "mcpipe: " (a client's server): many clients share one
    /// stderr, and a line that does not say which server it is about helps nobody.
    label: String,
}

impl Diagnostics {
    pub(crate) fn new(enabled: bool) -> Diagnostics {
        Diagnostics {
            window_start: None,
            printed_in_window: 0,
            suppressed: 0,
            enabled,
            label: String::new(),
        }
    }

    /// Names the speaker in every later line: "mcpipe: {label}: ...".
    pub(crate) fn set_label(&mut self, label: String) {
        self.label = label;
    }

    /// The start of every line.
    fn prefix(&self) -> String {
        if self.label.is_empty() {
            "mcpipe: ".to_owned()
        } else {
            format!("mcpipe: {}: ", self.label)
        }
    }

    /// Describes one event on stderr, unless the window's quota is spent.
    pub(crate) fn report(&mut self, describe: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let window_over = self
            .window_start
            .is_none_or(|start| now.duration_since(start) >= WINDOW);
        if window_over {
            if self.suppressed > 0 {
                line(&format!(
                    "{}{} more bad input lines were not described",
                    self.prefix(),
                    self.suppressed
                ));
                self.suppressed = 0;
            }
            self.window_start = Some(now);
            self.printed_in_window = 0;
        }
        if self.printed_in_window < LINES_PER_WINDOW {
            self.printed_in_window += 1;
            line(&format!("{}{}", self.prefix(), describe()));
        } else {
            self.suppressed += 1;
        }
    }

    /// Says something on stderr once, outside the bad-input quota (the caller makes sure it is
    /// rare): a flood of bad lines must not hide it, nor be summarised as including it.
    pub(crate) fn notice(&self, text: &str) {
        if self.enabled {
            line(&format!("{}{text}", self.prefix()));
        }
    }
}

/// The start of a line, made printable, for a diagnostic.
pub(crate) fn excerpt(line: &[u8]) -> String {
    const MAX: usize = 80;
    let shown = &line[..line.len().min(MAX)];
    let mut text: String = String::from_utf8_lossy(shown)
        .chars()
        .map(|c| if c.is_control() { '.' } else { c })
        .collect();
    if line.len() > MAX {
        text.push_str(&format!("... ({} bytes)", line.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_sink_drops_and_counts_lines_instead_of_growing() {
        let mut sink = Sink {
            writer: Some(None),
            pending: VecDeque::new(),
            dropped: 0,
            dropped_told: 0,
            closed: false,
        };
        let line = "x".repeat(1000);
        for _ in 0..100 {
            sink.push(&line);
        }
        assert!(sink.pending.len() <= SINK_BYTES);
        assert_eq!(sink.pending.len(), 65 * 1001);
        assert_eq!(sink.dropped, 35);
    }

    #[test]
    fn a_closed_sink_counts_everything_and_keeps_nothing() {
        let mut sink = Sink {
            writer: Some(None),
            pending: VecDeque::new(),
            dropped: 0,
            dropped_told: 0,
            closed: false,
        };
        sink.push("one");
        sink.flush();
        assert!(sink.closed);
        sink.push("two");
        assert!(sink.pending.is_empty());
        assert_eq!(sink.dropped, 2);
    }
}
