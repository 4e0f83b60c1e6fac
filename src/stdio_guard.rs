//! Keeps stray output off the protocol channel while a server runs on stdin/stdout.
//!
//! A `println!` in a handler, or a child process that inherits fd 1, would write into the middle
//! of the protocol stream. While the guard lives, the protocol runs on private duplicates of fds
//! 0 and 1 (close-on-exec, so children never inherit them), fd 1 points at stderr and fd 0 at
//! `/dev/null`. Dropping the guard puts both back.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::sys;

/// Standard fds moved aside for the life of a served connection.
#[derive(Debug)]
pub(crate) struct StdioGuard {
    /// Where fd 0 pointed; `None` when fd 0 was closed.
    saved_in: Option<OwnedFd>,
    /// Where fd 1 pointed; `None` when fd 1 was closed.
    saved_out: Option<OwnedFd>,
    /// Stands in for a closed fd 0: `/dev/null`, which reads as end of file at once.
    closed_in: OwnedFd,
    /// Stands in for a closed fd 1: a pipe with no reader, which fails every write with EPIPE.
    closed_out: OwnedFd,
}

fn save(fd: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    match sys::dup_cloexec(fd, 3) {
        Ok(saved) => Ok(Some(saved)),
        Err(e) if e.raw_os_error() == Some(libc::EBADF) => Ok(None),
        Err(e) => Err(e),
    }
}

impl StdioGuard {
    /// Moves the protocol off fds 0 and 1.
    pub(crate) fn new() -> io::Result<StdioGuard> {
        let saved_in = save(io::stdin().as_fd())?;
        let saved_out = save(io::stdout().as_fd())?;
        let mut null = sys::open("/dev/null", libc::O_RDWR)?;
        if null.as_raw_fd() <= 2 {
            // A standard fd was closed and `open` reused its number: move /dev/null out of the
            // way, so that closing it later does not close a standard fd.
            null = sys::dup_cloexec(null.as_fd(), 3)?;
        }
        let (no_reader, reader) = std::os::unix::net::UnixStream::pair()?;
        drop(reader);
        let guard = StdioGuard {
            saved_in,
            saved_out,
            closed_in: sys::dup_cloexec(null.as_fd(), 3)?,
            closed_out: OwnedFd::from(no_reader),
        };
        if guard.saved_in.is_some() {
            sys::redirect(null.as_fd(), 0)?;
        }
        if guard.saved_out.is_some() {
            flush_std_stdout();
            if sys::redirect(io::stderr().as_fd(), 1).is_err() {
                sys::redirect(null.as_fd(), 1)?;
            }
        }
        Ok(guard)
    }

    /// The protocol's input (the original fd 0), or fd 0 itself when it was closed.
    pub(crate) fn input(&self) -> BorrowedFd<'_> {
        match &self.saved_in {
            Some(fd) => fd.as_fd(),
            None => self.closed_in.as_fd(),
        }
    }

    /// The protocol's output (the original fd 1), or fd 1 itself when it was closed.
    pub(crate) fn output(&self) -> BorrowedFd<'_> {
        match &self.saved_out {
            Some(fd) => fd.as_fd(),
            None => self.closed_out.as_fd(),
        }
    }
}

/// Writes out whatever `print!` left in std's stdout buffer, wherever fd 1 points now, so that
/// it never reaches the protocol stream later.
fn flush_std_stdout() {
    let _ = io::stdout().flush();
}

impl Drop for StdioGuard {
    fn drop(&mut self) {
        flush_std_stdout();
        // Best effort: if restoring fails there is no better place to report it than stderr.
        if let Some(saved) = &self.saved_in {
            if let Err(e) = sys::redirect(saved.as_fd(), 0) {
                crate::diagnostics::line(&format!("mcpipe: could not restore stdin: {e}"));
            }
        }
        if let Some(saved) = &self.saved_out {
            if let Err(e) = sys::redirect(saved.as_fd(), 1) {
                crate::diagnostics::line(&format!("mcpipe: could not restore stdout: {e}"));
            }
        }
    }
}
