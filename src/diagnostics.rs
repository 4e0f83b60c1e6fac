//! Everything the crate says on stderr: one process-wide sink that never blocks and never
//! panics, and a rate-limited reporter of bad input on top of it.
//!
//! Why not `eprintln!`: it blocks when nobody reads stderr (a launcher that pipes it and never
//! drains it), and it panics on `EPIPE` when the reader closed it. Either would stall or kill
//! the session over a log line. The sink instead keeps at most [`SINK_BYTES`] of unwritten
//! text, drops and counts lines that do not fit (and says how many, once stderr drains), and
//! stops logging for good when stderr is gone (`EPIPE`, `EBADF`). Any thread may use it.
//!
//! Who writes: a caller writes itself only what stderr takes without blocking (a private
//! non-blocking description of a pipe or, on Linux, a tty; `MSG_DONTWAIT`; a plain file;
//! `/dev/null`), under the lock. What is left, and everything for a stderr no write can be
//! sure not to block on (a tty or pipe that cannot be reopened, as on macOS; another device:
//! another process may take the room `poll` saw), is written by the writer thread,
//! "mcpipe-stderr": started when text is left, ended when none is, it waits and writes with
//! the lock released. So text goes out as soon as stderr takes it, with no further call, and
//! nothing waits for the thread: one stuck on a stderr nobody reads delays nothing but the
//! exit, and that by [`EXIT_STALL`] at most (what it could not write is then counted, and said
//! in one line where stderr takes it). A process at its fd limit (`EMFILE`) writes fd 2
//! as it is, as a stderr that may block, until an fd of its own can be had.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sys::{self, FileKind};

/// The most unwritten stderr text kept; a line that does not fit is dropped and counted.
pub(crate) const SINK_BYTES: usize = 64 * 1024;

/// At most this many bad-input lines per window; the rest are counted and summarised.
const LINES_PER_WINDOW: u32 = 10;
const WINDOW: Duration = Duration::from_secs(1);

/// The most the writer thread takes out of the buffer at a time for a stderr that takes
/// bytes without blocking.
const CHUNK: usize = 4096;
/// The most written at once where a write may block: the smallest `PIPE_BUF`, so that each
/// write reaches a pipe whole, never interleaved with another process's output.
const POLLED_CHUNK: usize = 512;

/// How long the writer thread pauses when a write takes nothing although `poll` said it would.
const NO_ROOM_PAUSE: Duration = Duration::from_millis(10);

/// At exit, how long the writer thread may go without writing a piece before the exit stops
/// waiting for it: a stderr nobody reads delays the exit by this much, no more.
const EXIT_STALL: Duration = Duration::from_millis(50);
/// At exit, the longest wait for the writer thread, however steadily it writes.
const EXIT_MOST: Duration = Duration::from_millis(500);

/// How bytes reach stderr.
#[derive(Debug)]
enum Writer {
    /// A private non-blocking description of the pipe or terminal (Linux), or a file or
    /// `/dev/null`, which never block.
    Direct(OwnedFd),
    /// A socket: `send` with `MSG_DONTWAIT`.
    Socket(OwnedFd),
    /// Anything else (a tty on macOS, any pipe there, a FIFO or tty where it cannot be
    /// reopened, a character device other than `/dev/null` and ttys): a write
    /// may block even after `poll` said there was room, since another process sharing stderr
    /// may take that room first. Only the writer thread writes it (blocking, nothing waits for
    /// it); callers do only if the thread cannot be started.
    Polled(OwnedFd),
    /// fd 2 itself, written as `Polled` is, while no fd of our own can be had for it (the
    /// process is at its fd limit): the next flush tries again.
    Borrowed,
}

impl Writer {
    /// Prepares fd 2 for writing: `Ok(None)` when it is closed or unusable, `Err`
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
            FileKind::CharDevice if sys::is_dev_null(fd) => {
                sys::dup_cloexec(fd, 3).map(Writer::Direct)
            }
            FileKind::Socket => sys::dup_cloexec(fd, 3).map(Writer::Socket),
            // A pipe, or a tty (never another device: an open may have side effects): writes
            // through a private non-blocking description return `EAGAIN` instead of waiting.
            FileKind::Fifo => Writer::reopened(fd),
            FileKind::CharDevice if sys::is_reopenable_terminal(fd) => Writer::reopened(fd),
            _ => sys::dup_cloexec(fd, 3).map(Writer::Polled),
        };
        match opened {
            Ok(writer) => Ok(Some(writer)),
            Err(e) if sys::out_of_fds(&e) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// `Direct` through a private non-blocking description of `fd`, else `Polled`.
    fn reopened(fd: BorrowedFd<'_>) -> io::Result<Writer> {
        match sys::reopen_nonblocking(fd, true) {
            Ok(private) => Ok(Writer::Direct(private)),
            Err(_) => sys::dup_cloexec(fd, 3).map(Writer::Polled),
        }
    }

    /// Runs `f` on the fd written to.
    fn with_fd<R>(&self, f: impl FnOnce(BorrowedFd<'_>) -> R) -> R {
        match self {
            Writer::Direct(fd) | Writer::Socket(fd) | Writer::Polled(fd) => f(fd.as_fd()),
            Writer::Borrowed => f(io::stderr().as_fd()),
        }
    }

    /// Whether a write may block: then only the writer thread writes.
    fn may_block(&self) -> bool {
        matches!(self, Writer::Polled(_) | Writer::Borrowed)
    }

    /// Writes what the kernel takes now; `Ok(0)` when it takes nothing. For `Polled` and
    /// `Borrowed` (only when no thread could be started) a piece `poll` says fits: it blocks
    /// if another process takes the room first.
    fn write_now(&self, bytes: &[u8]) -> io::Result<usize> {
        let result = match self {
            Writer::Direct(fd) => sys::write(fd.as_fd(), bytes),
            Writer::Socket(fd) => sys::send_nowait(fd.as_fd(), bytes),
            Writer::Polled(_) | Writer::Borrowed => self.with_fd(|fd| {
                if !sys::writable_now(fd)? {
                    return Ok(0);
                }
                sys::write(fd, &bytes[..bytes.len().min(POLLED_CHUNK)])
            }),
        };
        match result {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }

    /// On the writer thread, no lock held: writes all of `bytes`, waiting as long as stderr
    /// takes (a blocking write for `Polled`, `poll` for room otherwise).
    fn write_all_waiting(&self, mut bytes: &[u8]) -> io::Result<()> {
        let mut waited = false;
        while !bytes.is_empty() {
            let written = match self {
                Writer::Polled(_) | Writer::Borrowed => self.with_fd(|fd| sys::write(fd, bytes))?,
                _ => self.write_now(bytes)?,
            };
            if written == 0 {
                if waited {
                    // `poll` promised room the write did not find (a tty counts its room in
                    // buffers, not bytes): pause rather than spin until a write takes some.
                    std::thread::sleep(NO_ROOM_PAUSE);
                }
                self.with_fd(sys::wait_writable)?;
            }
            waited = written == 0;
            let (done, rest) = bytes.split_at(written);
            note_written(done);
            PIECE_LINES_LEFT.fetch_sub(lines_in(done), Ordering::Relaxed);
            bytes = rest;
        }
        Ok(())
    }
}

/// The process-wide stderr sink. Invariant: `pending.len() + in_flight <= SINK_BYTES`; while
/// `writing`, only the writer thread writes (so text goes out in order).
#[derive(Debug)]
struct Sink {
    /// `None` until first used; then the writer, or `None` inside when stderr is unusable.
    writer: Option<Option<Arc<Writer>>>,
    pending: VecDeque<u8>,
    /// Bytes the writer thread took out of `pending` and is writing.
    in_flight: usize,
    /// Lines dropped because the buffer was full or stderr was gone, ever.
    dropped: u64,
    /// `dropped` as of the last "lines dropped" notice.
    dropped_told: u64,
    /// Stderr refused a write for good: nothing more is written.
    closed: bool,
    /// The writer thread runs.
    writing: bool,
    /// Pieces the writer thread wrote, ever: what the exit watches for progress.
    pieces_written: u64,
}

static SINK: Mutex<Sink> = Mutex::new(Sink::new());
/// Signalled by the writer thread after each piece it writes, and when it ends.
static WRITTEN: Condvar = Condvar::new();
/// Whether the exit hook is registered (once, with the first writer thread).
static EXIT_HOOKED: AtomicBool = AtomicBool::new(false);

fn sink() -> MutexGuard<'static, Sink> {
    // A panic while holding the lock leaves the sink consistent (plain bytes and counters).
    SINK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sink {
    const fn new() -> Sink {
        Sink {
            writer: None,
            pending: VecDeque::new(),
            in_flight: 0,
            dropped: 0,
            dropped_told: 0,
            closed: false,
            writing: false,
            pieces_written: 0,
        }
    }

    fn push(&mut self, line: &str) {
        let needed = line.len() + 1;
        if self.closed || self.pending.len() + self.in_flight + needed > SINK_BYTES {
            self.dropped += 1;
            return;
        }
        self.pending.extend(line.as_bytes());
        self.pending.push_back(b'\n');
    }

    /// Queues the "lines dropped" notice if lines were dropped since the last one; whether it
    /// did. Called once the buffer has emptied, so the notice follows the text that was kept.
    fn queue_drop_notice(&mut self) -> bool {
        if self.dropped <= self.dropped_told {
            return false;
        }
        let notice = format!(
            "mcpipe: {} diagnostic lines were dropped (stderr was full or not being read)",
            self.dropped - self.dropped_told
        );
        self.dropped_told = self.dropped;
        self.push(&notice);
        true
    }

    /// Stderr is gone: nothing more is kept or written.
    fn close(&mut self) {
        self.closed = true;
        self.pending.clear();
    }

    /// The caller's part: writes what stderr takes without blocking, and leaves the rest to
    /// the writer thread (started here when needed). With the thread running, only queues.
    fn flush(&mut self) {
        if self.closed {
            self.pending.clear();
            return;
        }
        let out_of_fds_before =
            matches!(&self.writer, Some(Some(w)) if matches!(**w, Writer::Borrowed));
        if self.writer.is_none() || out_of_fds_before {
            // First use, or the last one found the process out of fds: our own fd now, else
            // fd 2 as it is (a diagnostic at the fd limit is the one that says why).
            let opened = Writer::open().unwrap_or(Some(Writer::Borrowed));
            self.writer = Some(opened.map(Arc::new));
        }
        let Some(Some(writer)) = self.writer.clone() else {
            self.closed = true;
            self.dropped += self.pending.iter().filter(|b| **b == b'\n').count() as u64;
            self.pending.clear();
            return;
        };
        if self.writing {
            return;
        }
        if writer.may_block() {
            if !self.start_writer(&writer) {
                // No thread: write what `poll` says fits, the only way left.
                self.write_now(&writer);
            }
            return;
        }
        self.write_now(&writer);
        if self.unwritten() {
            // If the thread cannot start, the next flush tries again.
            self.start_writer(&writer);
        }
    }

    /// Writes as much as stderr takes now, the drop notice included once the text is out.
    fn write_now(&mut self, writer: &Writer) {
        loop {
            while !self.pending.is_empty() {
                let (front, _) = self.pending.as_slices();
                match writer.write_now(front) {
                    Ok(0) => return,
                    Ok(n) => {
                        note_written(&front[..n]);
                        self.pending.drain(..n);
                    }
                    // EPIPE, EBADF, EIO: stderr is gone. Logging ends; the server does not.
                    Err(_) => return self.close(),
                }
            }
            if !self.queue_drop_notice() {
                return;
            }
        }
    }

    /// Whether text (or a drop notice) waits to be written.
    fn unwritten(&self) -> bool {
        !self.closed && (!self.pending.is_empty() || self.dropped > self.dropped_told)
    }

    /// Starts the writer thread; whether it runs.
    fn start_writer(&mut self, writer: &Arc<Writer>) -> bool {
        let writer = Arc::clone(writer);
        let started = std::thread::Builder::new()
            .name("mcpipe-stderr".to_owned())
            .stack_size(64 * 1024)
            .spawn(move || write_in_background(&writer));
        self.writing = started.is_ok();
        if !EXIT_HOOKED.swap(true, Ordering::Relaxed) {
            // Without the hook, text still being written when the process exits is lost, and
            // text no thread could take is lost without a word.
            let _ = sys::at_exit(finish_at_exit);
        }
        self.writing
    }

    /// The writer thread's part: moves the next piece into `piece`; false when nothing is
    /// left, and then the thread has ended (`writing` is cleared under the same lock, so a
    /// caller that queues next starts a new one).
    fn take_piece(&mut self, max: usize, piece: &mut Vec<u8>) -> bool {
        if self.pending.is_empty() && !self.closed {
            self.queue_drop_notice();
        }
        if self.closed || self.pending.is_empty() {
            self.pending.clear();
            self.writing = false;
            return false;
        }
        let n = self.pending.len().min(max);
        piece.clear();
        piece.extend(self.pending.drain(..n));
        self.in_flight = n;
        PIECE_LINES_LEFT.store(lines_in(piece), Ordering::Relaxed);
        true
    }

    /// The lines kept that are not written yet: queued, or in the writer thread's hands (the
    /// newlines of its piece not yet written).
    fn lines_unwritten(&self) -> u64 {
        let queued: u64 = self.pending.iter().filter(|b| **b == b'\n').count() as u64;
        let in_flight = if self.in_flight > 0 {
            PIECE_LINES_LEFT.load(Ordering::Relaxed)
        } else {
            0
        };
        queued + in_flight
    }

    /// At exit, once the wait for the writer thread is over: what callers could write without
    /// blocking goes out (when no thread has it); what is left is counted as dropped and said,
    /// in one line, if stderr takes it now without blocking. Never for a stderr whose write may
    /// block (the writer thread may be inside a write there, and a second write would wait
    /// behind it). The sink takes nothing more after that line.
    fn say_lost_at_exit(&mut self) {
        let Some(Some(writer)) = self.writer.clone() else {
            return;
        };
        if self.closed {
            return;
        }
        if !self.writing && !writer.may_block() {
            self.write_now(&writer);
        }
        if self.closed {
            return;
        }
        let unwritten = self.lines_unwritten();
        let untold = self.dropped - self.dropped_told;
        if unwritten + untold == 0 {
            return;
        }
        let lost = unwritten + untold;
        self.dropped += unwritten;
        self.dropped_told = self.dropped;
        self.close();
        if !writer.may_block() {
            let start = if MID_LINE.load(Ordering::Relaxed) {
                "\n"
            } else {
                ""
            };
            let notice = format!(
                "{start}mcpipe: {lost} diagnostic lines were lost at exit (stderr was full or \
                 not being read)\n"
            );
            let _ = writer.write_now(notice.as_bytes());
        }
    }
}

/// Whether the last byte the sink wrote ended a line: a line said after text cut mid-line
/// starts on a line of its own.
static MID_LINE: AtomicBool = AtomicBool::new(false);
/// The newlines of the writer thread's piece not written yet (read at exit, without it).
static PIECE_LINES_LEFT: AtomicU64 = AtomicU64::new(0);

/// Notes what the sink just wrote (see [`MID_LINE`]).
fn note_written(bytes: &[u8]) {
    if let Some(last) = bytes.last() {
        MID_LINE.store(*last != b'\n', Ordering::Relaxed);
    }
}

fn lines_in(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

/// The writer thread: takes a piece under the lock, writes it with the lock released, until
/// nothing is left or stderr is gone.
fn write_in_background(writer: &Writer) {
    let max = if writer.may_block() {
        POLLED_CHUNK
    } else {
        CHUNK
    };
    let mut piece = Vec::with_capacity(max);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loop {
        {
            let mut state = sink();
            let more = state.take_piece(max, &mut piece);
            publish(&state);
            if !more {
                WRITTEN.notify_all();
                return;
            }
        }
        let result = writer.write_all_waiting(&piece);
        let mut state = sink();
        state.in_flight = 0;
        state.pieces_written += 1;
        if result.is_err() {
            // EPIPE, EBADF, EIO: stderr is gone.
            state.close();
        }
        drop(state);
        WRITTEN.notify_all();
    }));
    if run.is_err() {
        // Nothing here panics by design; if it did, callers must not count on a dead thread.
        let mut state = sink();
        state.writing = false;
        state.in_flight = 0;
        publish(&state);
        WRITTEN.notify_all();
    }
}

/// Runs at `exit(3)`: gives the writer thread time to write what it has while it keeps
/// writing ([`EXIT_STALL`] without a piece written ends the wait, [`EXIT_MOST`] in all), so a
/// last line written just before the exit is not lost on a stderr that is read; then what is
/// still unwritten is counted and said where stderr takes it ([`Sink::say_lost_at_exit`]).
extern "C" fn finish_at_exit() {
    let start = Instant::now();
    let mut sink = sink();
    let mut seen = sink.pieces_written;
    let mut progress_at = start;
    while sink.writing {
        let now = Instant::now();
        let stall_end = progress_at + EXIT_STALL;
        let end = stall_end.min(start + EXIT_MOST);
        if now >= end {
            break;
        }
        sink = match WRITTEN.wait_timeout(sink, end - now) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        };
        if sink.pieces_written != seen {
            seen = sink.pieces_written;
            progress_at = Instant::now();
        }
    }
    sink.say_lost_at_exit();
    publish(&sink);
}

/// Writes one line to stderr without ever blocking or panicking: what stderr does not take now
/// is kept (up to 64 KiB) and written as soon as stderr takes it, by a thread of the sink's
/// own; a line that does not fit is dropped and counted
/// ([`Stats::stderr_lines_dropped`](crate::Stats)). Logging stops for good once stderr is
/// closed (`EPIPE`); the program goes on. A newline is added.
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

/// Queues one line for stderr (a newline is added) and writes what stderr takes now without
/// blocking. Never blocks, never panics; a line that does not fit is dropped and counted.
pub(crate) fn line(text: &str) {
    let mut sink = sink();
    sink.push(text);
    sink.flush();
    publish(&sink);
}

/// Writes queued stderr text as far as stderr takes it now, unless the writer thread has it.
/// Cheap when there is nothing to write (one atomic load, no lock): the loop calls it on every
/// pass.
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

/// Whether the sink holds text (or a drop notice) for a caller to write (none while the writer
/// thread has it); read without the lock.
static UNWRITTEN: AtomicBool = AtomicBool::new(false);
/// `Sink::dropped`, readable without the lock.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Makes the sink's state readable without its lock; called with the lock held.
fn publish(sink: &Sink) {
    UNWRITTEN.store(sink.unwritten() && !sink.writing, Ordering::Release);
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
            ..Sink::new()
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
            ..Sink::new()
        };
        sink.push("one");
        sink.flush();
        assert!(sink.closed);
        sink.push("two");
        assert!(sink.pending.is_empty());
        assert_eq!(sink.dropped, 2);
    }

    #[test]
    fn text_the_writer_thread_holds_counts_against_the_bound() {
        let mut sink = Sink {
            writer: Some(None),
            writing: true,
            ..Sink::new()
        };
        let line = "x".repeat(999);
        for _ in 0..65 {
            sink.push(&line);
        }
        let mut piece = Vec::new();
        assert!(sink.take_piece(CHUNK, &mut piece));
        assert_eq!((piece.len(), sink.in_flight), (CHUNK, CHUNK));
        // The piece taken frees no room until it is written.
        sink.push(&line);
        assert_eq!(sink.dropped, 1);
        assert!(sink.pending.len() + sink.in_flight <= SINK_BYTES);
        sink.in_flight = 0;
        sink.push(&line);
        assert_eq!(sink.dropped, 1);
    }

    #[test]
    fn the_writer_thread_writes_the_drop_notice_last_then_ends() {
        let mut sink = Sink {
            writer: Some(None),
            writing: true,
            dropped: 3,
            ..Sink::new()
        };
        sink.push("kept");
        let mut piece = Vec::new();
        assert!(sink.take_piece(CHUNK, &mut piece));
        assert_eq!(piece, b"kept\n");
        sink.in_flight = 0;
        assert!(sink.take_piece(CHUNK, &mut piece));
        assert!(String::from_utf8_lossy(&piece).starts_with("mcpipe: 3 diagnostic lines"));
        sink.in_flight = 0;
        assert!(!sink.take_piece(CHUNK, &mut piece));
        assert!(!sink.writing, "the thread ends when nothing is left");
        assert!(!sink.unwritten());
    }
}
