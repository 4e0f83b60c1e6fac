//! The readiness of a non-blocking fd under mio's edge-triggered poller, in one place for every
//! shell that reads or writes one: the server's loop (its input and output), the client's
//! process supervisor (the server's pipes) and the wrapper (its server's stdout).
//!
//! The rules are the same everywhere: an event sets `ready`, only `WouldBlock` clears it (the
//! poller will not report the fd again until new bytes come, so a reader reads until then),
//! end of file is final, and a write error makes an output unusable. On a private pipe
//! description a short read may stand in for the `WouldBlock` read (see [`Input::new`]).

use std::io;
use std::time::Duration;

use crate::write_queue::WriteQueue;

/// How long a wait lasts at most after a short read stood in for `EAGAIN`, before the input
/// is read once more to confirm it is empty (see [`Input::wait_limit`]).
const CONFIRM_AFTER: Duration = Duration::from_millis(10);

/// The longest run of short reads that stand in for `EAGAIN` between two probes: at most one
/// read in this many is spent on checking.
const MAX_SKIPS: u32 = 64;

/// What one read did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Bytes arrived.
    Bytes(usize),
    /// Nothing is there now (the poller will say when there is).
    WouldBlock,
    /// The input ended.
    Eof,
}

/// The readiness of one input.
#[derive(Debug)]
pub(crate) struct Input {
    /// The kernel may hold unread bytes: set by an event, cleared by `WouldBlock` or by a
    /// short read that stands in for it.
    pub(crate) ready: bool,
    eof: bool,
    /// An event said the writer hung up. From then on only end of file ends the reading: the
    /// hang-up's edge has been consumed, and no later event would report bytes a short read
    /// left behind.
    hup: bool,
    /// A short read empties the pipe (our private description of a pipe; see `new`).
    short_reads: bool,
    /// `ready` was cleared by a short read rather than by `EAGAIN`: the next wait that brings
    /// no event is followed by one confirming read.
    unconfirmed: bool,
    /// The next read is that confirming read.
    confirming: bool,
    /// How many short reads may still stand in for `EAGAIN` before one is followed by a real
    /// read again (a probe), and the size of the last run. Skipping pays when the peer is
    /// slower than we are (ping-pong: the read would say `EAGAIN`) and costs a poll when input
    /// arrives while we work; a probe that finds bytes ends the runs, one that finds `EAGAIN`
    /// doubles the next run, up to `MAX_SKIPS`.
    pub(crate) skips_left: u32,
    pub(crate) skip_run: u32,
    /// The read in progress is such a probe.
    probing: bool,
}

impl Input {
    /// An input, ready until a read says otherwise. `short_reads`: a read that returns less
    /// than asked means the input was empty (true of a pipe read through a description of our
    /// own, whose writer does not send packets; never of a tty, a socket or a file).
    pub(crate) fn new(short_reads: bool) -> Input {
        Input {
            ready: true,
            eof: false,
            hup: false,
            short_reads,
            unconfirmed: false,
            confirming: false,
            skips_left: 0,
            skip_run: 0,
            probing: false,
        }
    }

    /// Whether a read may find something (bytes or end of file).
    pub(crate) fn ready(&self) -> bool {
        self.ready && !self.eof
    }

    pub(crate) fn is_eof(&self) -> bool {
        self.eof
    }

    /// The input is over (closed by us, or found unusable).
    pub(crate) fn set_eof(&mut self) {
        self.eof = true;
    }

    /// The poller reported the fd (`hup`: its writer hung up, or it is in error).
    pub(crate) fn on_event(&mut self, hup: bool) {
        self.ready = true;
        self.hup |= hup;
    }

    /// An event said the writer hung up.
    pub(crate) fn hung_up(&self) -> bool {
        self.hup
    }

    /// The timeout for the next wait: after a short read stood in for `EAGAIN`, at most
    /// `CONFIRM_AFTER`, so that bytes a short read ever left behind (a writer that sends
    /// packets) are late by milliseconds, never stuck.
    pub(crate) fn wait_limit(&mut self, timeout: Option<Duration>) -> Option<Duration> {
        self.confirming = false;
        if self.unconfirmed {
            Some(timeout.map_or(CONFIRM_AFTER, |t| t.min(CONFIRM_AFTER)))
        } else {
            timeout
        }
    }

    /// After the wait: `any_event` says whether the poller reported anything at all. A wait
    /// after an unconfirmed short read ends with one more read.
    pub(crate) fn after_wait(&mut self, any_event: bool) {
        if std::mem::take(&mut self.unconfirmed) {
            self.ready = true;
            self.confirming = !any_event;
        }
    }

    /// Records what a read of `asked` bytes did. `Ok((fill, late))`: `late` when it was the
    /// confirming read and it found something. Errors other than a reset or `EIO` (which end
    /// the input) are the caller's to judge, with no change here.
    pub(crate) fn after_read(
        &mut self,
        result: io::Result<usize>,
        asked: usize,
    ) -> io::Result<(Fill, bool)> {
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::Interrupted) {
            return result.map(|_| (Fill::WouldBlock, false));
        }
        let late = std::mem::take(&mut self.confirming) && result.is_ok();
        let probe = std::mem::take(&mut self.probing);
        let fill = match result {
            Ok(0) => {
                self.eof = true;
                Fill::Eof
            }
            Ok(n) => {
                if probe {
                    // Input came while we worked: reading first is what pays now.
                    self.skip_run = 0;
                    self.skips_left = 0;
                }
                if n < asked && !self.hup && self.short_reads {
                    if self.skips_left > 0 {
                        self.skips_left -= 1;
                        self.ready = false;
                        self.unconfirmed = true;
                    } else {
                        self.probing = true;
                    }
                }
                Fill::Bytes(n)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.ready = false;
                self.unconfirmed = false;
                if probe {
                    self.skip_run = (self.skip_run * 2).clamp(1, MAX_SKIPS);
                    self.skips_left = self.skip_run;
                }
                Fill::WouldBlock
            }
            // A tty whose session ended, a socket reset: the input is over.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EIO | libc::ECONNRESET)) => {
                self.eof = true;
                Fill::Eof
            }
            Err(e) => return Err(e),
        };
        Ok((fill, late))
    }
}

/// The readiness of one output.
#[derive(Debug)]
pub(crate) struct Output {
    /// The kernel may take more bytes: set by an event, cleared by `WouldBlock`.
    pub(crate) writable: bool,
}

impl Output {
    pub(crate) fn new() -> Output {
        Output { writable: true }
    }

    /// Writes `queue` with `write` until it is empty or the fd would block. An error means
    /// the output is unusable (the caller decides what that ends).
    pub(crate) fn flush(
        &mut self,
        queue: &mut WriteQueue,
        write: impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<()> {
        if !self.writable || queue.pending() == 0 {
            return Ok(());
        }
        if !queue.write_to(write)? {
            self.writable = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn would_block_clears_readiness_an_event_sets_it_and_end_of_file_stays() {
        let mut input = Input::new(false);
        assert!(input.ready());
        let would_block = Err(io::Error::from(io::ErrorKind::WouldBlock));
        assert_eq!(
            input.after_read(would_block, 10).unwrap().0,
            Fill::WouldBlock
        );
        assert!(!input.ready());
        input.on_event(false);
        assert_eq!(input.after_read(Ok(3), 10).unwrap().0, Fill::Bytes(3));
        assert!(
            input.ready(),
            "without short reads a short read proves nothing"
        );
        let reset = Err(io::Error::from_raw_os_error(libc::ECONNRESET));
        assert_eq!(input.after_read(reset, 10).unwrap().0, Fill::Eof);
        input.on_event(false);
        assert!(!input.ready() && input.is_eof());
        let other = Err(io::Error::from_raw_os_error(libc::EBADF));
        assert!(Input::new(false).after_read(other, 10).is_err());
    }

    #[test]
    fn an_output_that_would_block_waits_for_its_event() {
        let mut output = Output::new();
        let mut queue = WriteQueue::new(1 << 20);
        queue.buffer().extend_from_slice(b"abcdef");
        output
            .flush(&mut queue, |bytes| Ok(bytes.len().min(2)))
            .unwrap();
        assert_eq!(queue.pending(), 0, "partial writes go on");
        queue.buffer().extend_from_slice(b"abc");
        output
            .flush(&mut queue, |_| {
                Err(io::Error::from(io::ErrorKind::WouldBlock))
            })
            .unwrap();
        assert!(!output.writable);
        assert_eq!(queue.pending(), 3);
        output
            .flush(&mut queue, |_| panic!("no write before the event"))
            .unwrap();
        output.writable = true;
        assert!(output
            .flush(&mut queue, |_| Err(io::Error::from(
                io::ErrorKind::BrokenPipe
            )))
            .is_err());
    }
}
