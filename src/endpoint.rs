//! The two ends a loop talks through, and how each kind of fd is read or written without ever
//! blocking when the kernel has nothing.
//!
//! | fd kind | how | shared flags changed? |
//! | --- | --- | --- |
//! | pipe/FIFO on Linux | a private description reopened via `/proc/self/fd`, non-blocking | no |
//! | socket | `recv`/`send` with `MSG_DONTWAIT` | no |
//! | regular file, `/dev/null` (the poller refuses them) | plain reads and writes, never polled: they never block | no |
//! | anything else (tty, FIFO elsewhere) | `O_NONBLOCK` set, restored on every exit path | yes, restored |
//! | closed | end of file on input, peer gone on output | no |
//!
//! Only on that private pipe description does a short read prove the pipe empty (see
//! [`Endpoint::short_read_drains`]); everywhere else the loop reads until `EAGAIN`.
//!
//! A pipe found full is widened once (see [`Endpoint::widen_pipe`]).

use std::io::{self, IsTerminal};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use crate::sys::{self, FileKind, NonBlockingGuard};

/// How bytes move through an endpoint's fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `read`/`write` on a non-blocking description.
    Stream,
    /// `read`/`write` on our private non-blocking description of a pipe we read: a read that
    /// returns less than asked emptied the pipe (unless the writer sends packets).
    Pipe,
    /// `recv`/`send` with `MSG_DONTWAIT`.
    Socket,
    /// A file that is always ready and cannot be polled.
    Plain,
}

/// The kernel's poller under mio: what it answers for a file it cannot watch differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Poller {
    /// Linux: `EPERM` for regular files and for devices without poll support (`/dev/null`).
    Epoll,
    /// macOS: `EINVAL` for a character device whose driver has no kqueue support
    /// (`/dev/null`, `/dev/zero`, but also `/dev/tty`, the controlling terminal's alias).
    Kqueue,
}

/// This build's poller (mio's choice: epoll on Linux, Android and illumos, kqueue on macOS
/// and the BSDs).
const POLLER: Poller = if cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "illumos"
)) {
    Poller::Epoll
} else {
    Poller::Kqueue
};

/// Whether the poller's refusal (`errno`) of a file that is not a pipe, socket or regular
/// file means it is always ready, so it may be read and written without polling. A terminal
/// kqueue refuses is not (its reads block): that refusal stays an error (`is_tty` is asked
/// only then).
fn always_ready(errno: Option<i32>, poller: Poller, is_tty: impl FnOnce() -> bool) -> bool {
    match poller {
        Poller::Epoll => errno == Some(libc::EPERM),
        Poller::Kqueue => errno == Some(libc::EINVAL) && !is_tty(),
    }
}

/// The capacity a pipe found full is widened to: a 100 KB message then crosses in one piece
/// instead of two (measured: 100 KB echoes 1.7 times as fast, 10 MB ones 1.1 to 1.2 times,
/// where 1 MiB bought no more).
pub(crate) const WIDE_PIPE: usize = 256 * 1024;

/// Linux's default pipe capacity: a read that returns this much found the pipe full.
pub(crate) const DEFAULT_PIPE: usize = 64 * 1024;

/// One direction of the connection: an owned fd and how to use it.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// `None` when the fd was closed to begin with.
    fd: Option<OwnedFd>,
    mode: Mode,
    /// A pipe not yet widened (see [`Endpoint::widen_pipe`]).
    narrow_pipe: bool,
}

impl Endpoint {
    /// Prepares `fd` for non-blocking use in one direction and registers it with `registry`.
    /// A flag change that could not be avoided is recorded in `guards`, which restores it.
    pub(crate) fn open(
        fd: BorrowedFd<'_>,
        for_write: bool,
        registry: &Registry,
        token: Token,
        guards: &mut Vec<NonBlockingGuard>,
    ) -> io::Result<Endpoint> {
        let kind = match sys::file_kind(fd.as_raw_fd()) {
            Ok(kind) => kind,
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => {
                return Ok(Endpoint {
                    fd: None,
                    mode: Mode::Plain,
                    narrow_pipe: false,
                })
            }
            Err(e) => return Err(e),
        };
        let interest = if for_write {
            Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        if kind == FileKind::Regular {
            return Ok(Endpoint {
                fd: Some(sys::dup_cloexec(fd, 3)?),
                mode: Mode::Plain,
                narrow_pipe: false,
            });
        }
        if kind == FileKind::Socket {
            let own = sys::dup_cloexec(fd, 3)?;
            registry.register(&mut SourceFd(&own.as_raw_fd()), token, interest)?;
            return Ok(Endpoint {
                fd: Some(own),
                mode: Mode::Socket,
                narrow_pipe: false,
            });
        }
        if kind == FileKind::Fifo {
            if let Ok(private) = sys::reopen_nonblocking(fd, for_write) {
                registry.register(&mut SourceFd(&private.as_raw_fd()), token, interest)?;
                return Ok(Endpoint {
                    fd: Some(private),
                    mode: if for_write { Mode::Stream } else { Mode::Pipe },
                    narrow_pipe: true,
                });
            }
        }
        let own = sys::dup_cloexec(fd, 3)?;
        match registry.register(&mut SourceFd(&own.as_raw_fd()), token, interest) {
            Ok(()) => {}
            // The poller refuses files that are always ready (`/dev/null`, ...): use them
            // directly.
            Err(e) if always_ready(e.raw_os_error(), POLLER, || own.as_fd().is_terminal()) => {
                return Ok(Endpoint {
                    fd: Some(own),
                    mode: Mode::Plain,
                    narrow_pipe: false,
                })
            }
            Err(e) => return Err(e),
        }
        guards.push(NonBlockingGuard::new(own.as_fd())?);
        Ok(Endpoint {
            fd: Some(own),
            mode: Mode::Stream,
            narrow_pipe: kind == FileKind::Fifo,
        })
    }

    /// Widens a pipe found full to [`WIDE_PIPE`], the first time only; returns whether it grew.
    /// Large messages then cross in fewer, larger reads and writes, with fewer wake-ups on
    /// both sides; a pipe that never fills (a ping-pong of small messages) is never asked. The
    /// cost is kernel memory while the pipe is full, counted against the user's pipe limit
    /// (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB by default); a refusal there, a pipe
    /// already as wide (its other end may have widened it) or a system without
    /// `F_SETPIPE_SZ` leaves it as it is.
    pub(crate) fn widen_pipe(&mut self) -> bool {
        if !std::mem::take(&mut self.narrow_pipe) {
            return false;
        }
        let Some(fd) = &self.fd else { return false };
        match sys::pipe_capacity(fd.as_fd()) {
            Ok(capacity) if capacity < WIDE_PIPE => {
                sys::set_pipe_capacity(fd.as_fd(), WIDE_PIPE).is_ok_and(|new| new > capacity)
            }
            _ => false,
        }
    }

    /// Whether the fd was closed before the loop began.
    pub(crate) fn is_closed(&self) -> bool {
        self.fd.is_none()
    }

    /// Whether a read that returned less than asked left nothing behind, so the loop may
    /// poll without first reading `EAGAIN`. True only for our private description of a pipe:
    /// a pipe read stops early only when the pipe is empty, and any later write wakes the
    /// poller. Not for ttys (a read stops at each line) or sockets (a read may stop early at
    /// a record boundary, e.g. where passed fds or credentials change). The one pipe
    /// exception, a writer that sends packets (`O_DIRECT` on its end, which the reading end
    /// cannot see), is bounded by the loop's confirming read after a quiet wait
    /// (`Connection::wait`).
    pub(crate) fn short_read_drains(&self) -> bool {
        self.mode == Mode::Pipe
    }

    /// Reads what the kernel has, without blocking. `Ok(0)` is end of file.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(fd) = &self.fd else { return Ok(0) };
        match self.mode {
            Mode::Socket => sys::recv_nowait(fd.as_fd(), buf),
            Mode::Stream | Mode::Pipe | Mode::Plain => sys::read(fd.as_fd(), buf),
        }
    }

    /// Writes what the kernel takes, without blocking.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let Some(fd) = &self.fd else {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        };
        match self.mode {
            Mode::Socket => sys::send_nowait(fd.as_fd(), buf),
            Mode::Stream | Mode::Pipe | Mode::Plain => sys::write(fd.as_fd(), buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_means_always_ready_only_in_the_pollers_own_words() {
        let tty = || true;
        let not_tty = || false;
        // epoll: EPERM (a regular file, `/dev/null`); the tty question is never asked.
        let unasked = || -> bool { panic!("epoll's answer needs no tty check") };
        assert!(always_ready(Some(libc::EPERM), Poller::Epoll, unasked));
        assert!(!always_ready(Some(libc::EINVAL), Poller::Epoll, not_tty));
        assert!(!always_ready(None, Poller::Epoll, not_tty));
        // kqueue (macOS): EINVAL for `/dev/null`, but not for `/dev/tty`, whose reads block.
        assert!(always_ready(Some(libc::EINVAL), Poller::Kqueue, not_tty));
        assert!(!always_ready(Some(libc::EINVAL), Poller::Kqueue, tty));
        assert!(!always_ready(Some(libc::EPERM), Poller::Kqueue, not_tty));
        assert!(!always_ready(Some(libc::EBADF), Poller::Kqueue, not_tty));
    }

    #[test]
    fn dev_null_is_used_without_polling_in_both_directions() {
        let poll = mio::Poll::new().unwrap();
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        let mut guards = Vec::new();
        for for_write in [false, true] {
            let end = Endpoint::open(
                null.as_fd(),
                for_write,
                poll.registry(),
                Token(0),
                &mut guards,
            )
            .unwrap();
            assert_eq!(end.mode, Mode::Plain);
        }
        assert!(guards.is_empty(), "no flag of /dev/null was changed");
    }
}
