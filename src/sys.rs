//! The only module with `unsafe`: thin, checked wrappers over the libc calls the crate needs.
//!
//! Every wrapper converts the libc return value into `io::Result` once, here, and decides EINTR
//! itself (retried, except where a caller must see it). File descriptors go in as `BorrowedFd` and
//! come out as `OwnedFd`, so only `OwnedFd` ever closes one.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// The large-block allocator's calls to the kernel, and the line buffer's prefault: a file of
// their own within this module (the same `allow(unsafe_code)`), to keep this one short.
mod large_alloc;
pub(crate) use large_alloc::prefault;
// The allocator's per-thread lists of freed small blocks (Linux, as the rest of it).
#[cfg(target_os = "linux")]
mod small_cache;
#[cfg(all(target_os = "linux", feature = "internals"))]
pub(crate) use small_cache::cached_bytes;
// The string scan's sixteen-byte test and the ASCII test of a line (x86_64; elsewhere
// `json_text` tests words and `json_read` leaves lines to `str::from_utf8`).
#[cfg(target_arch = "x86_64")]
mod sse2;
#[cfg(target_arch = "x86_64")]
pub(crate) use sse2::{ascii_str, escape_mask};
// The stderr sink's writer thread: its wait for room, and the hook that lets it finish at exit.
mod stderr;
pub(crate) use stderr::{at_exit, is_dev_null, is_reopenable_terminal, wait_writable};
// Signals: the shutdown signals' self-pipes, and the signals a write may raise.
mod signals;
pub(crate) use signals::{SignalIgnored, SignalSubscription};

/// Turns a libc `-1` return into the current `errno` as an `io::Error`.
fn cvt<T: PartialEq + From<i8>>(ret: T) -> io::Result<T> {
    if ret == T::from(-1) {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Runs `f` again while it fails with EINTR.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `read(2)` into `buf`, retrying EINTR. Blocks only if the description is blocking.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is a valid, writable region of `buf.len()` bytes for the whole call, and
        // `fd` is borrowed, so it stays open for the call.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        cvt(n).map(|n| n as usize)
    })
}

/// `recv(2)` with `MSG_DONTWAIT`: a non-blocking read from a socket that leaves the shared open
/// file description's flags alone.
pub(crate) fn recv_nowait(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: as in `read`: a valid writable buffer and an fd that is open for the call.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        cvt(n).map(|n| n as usize)
    })
}

/// `write(2)` from `buf`, retrying EINTR.
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is a valid readable region of `buf.len()` bytes; `fd` is open.
        let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        cvt(n).map(|n| n as usize)
    })
}

/// `send(2)` with `MSG_DONTWAIT` (and `MSG_NOSIGNAL` where it exists): a non-blocking write to a
/// socket that never raises SIGPIPE and leaves the description's flags alone.
pub(crate) fn send_nowait(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = libc::MSG_DONTWAIT;
    retry(|| {
        // SAFETY: `buf` is a valid readable region of `buf.len()` bytes; `fd` is open.
        let n = unsafe { libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), flags) };
        cvt(n).map(|n| n as usize)
    })
}

/// What kind of file an fd refers to, as far as reading and polling it differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// A regular file: reads never block, and epoll refuses it.
    Regular,
    /// A pipe or FIFO.
    Fifo,
    /// A socket.
    Socket,
    /// A character device: a tty, `/dev/null`, ...
    CharDevice,
    /// Anything else (directories, block devices, ...).
    Other,
}

/// `fstat(2)`. Fails with EBADF when the fd is closed.
fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a properly sized, writable `stat` buffer; fstat only writes into it and
    // reports EBADF for an fd that is not open, so any `fd` value is safe to pass.
    cvt(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // SAFETY: fstat returned 0, so it initialised the whole struct.
    Ok(unsafe { st.assume_init() })
}

/// `fstat(2)` reduced to the file kind. Fails with EBADF when the fd is closed.
pub(crate) fn file_kind(fd: RawFd) -> io::Result<FileKind> {
    let mode = fstat(fd)?.st_mode & libc::S_IFMT;
    Ok(match mode {
        libc::S_IFREG => FileKind::Regular,
        libc::S_IFIFO => FileKind::Fifo,
        libc::S_IFSOCK => FileKind::Socket,
        libc::S_IFCHR => FileKind::CharDevice,
        _ => FileKind::Other,
    })
}

/// Opens `path` with `flags | O_CLOEXEC`.
pub(crate) fn open(path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c_path = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    retry(|| {
        // SAFETY: `c_path` is a NUL-terminated string that lives for the call.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags | libc::O_CLOEXEC) };
        cvt(fd)?;
        // SAFETY: open returned a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    })
}

/// Opens a second, private open file description for the pipe (or terminal) behind `fd`,
/// non-blocking and close-on-exec, through `/proc/self/fd`. Linux only: elsewhere it fails with
/// `Unsupported`.
///
/// Setting `O_NONBLOCK` on an inherited fd would change the description shared with the parent
/// and with our own children; a private description can be non-blocking without that.
/// `O_NOCTTY`: a terminal opened anew must not become a session leader's controlling terminal.
pub(crate) fn reopen_nonblocking(fd: BorrowedFd<'_>, for_write: bool) -> io::Result<OwnedFd> {
    if !cfg!(target_os = "linux") {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    let access = if for_write {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    open(
        &format!("/proc/self/fd/{}", fd.as_raw_fd()),
        access | libc::O_NONBLOCK | libc::O_NOCTTY,
    )
}

/// Whether a write to `fd` would not block now (`poll(2)` for `POLLOUT` with a zero timeout).
/// An fd in error or hung up counts as writable: the write then reports what is wrong.
pub(crate) fn writable_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    Ok(poll_out_now(fd)?.is_some())
}

/// Whether the pipe whose write end is `fd` has no reader left: `poll(2)` reports `POLLERR`
/// on the write end then (Linux), before any write fails. An error of `poll` counts as not.
pub(crate) fn pipe_reader_gone(fd: BorrowedFd<'_>) -> bool {
    poll_out_now(fd).is_ok_and(|revents| revents.is_some_and(|r| r & libc::POLLERR != 0))
}

/// `poll(2)` of `fd` for `POLLOUT` with a zero timeout: the events it reports, `None` when
/// none.
fn poll_out_now(fd: BorrowedFd<'_>) -> io::Result<Option<libc::c_short>> {
    poll_out(fd, 0)
}

/// `poll(2)` of `fd` for `POLLOUT`, waiting up to `timeout_ms` (-1: as long as it takes; EINTR
/// retried): the events it reports, `None` when none came in time.
fn poll_out(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<Option<libc::c_short>> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    let ready = retry(|| {
        // SAFETY: `pfd` is one valid, writable `pollfd` for the call; the count passed is 1.
        cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })
    })?;
    Ok((ready > 0).then_some(pfd.revents))
}

/// How many bytes wait unread in the pipe behind `fd`, asked on either end: what lets a writer
/// see whether its reader took a line. Linux answers `FIONREAD` on either end. macOS answers
/// it with the count of the fd's own end, which on the write end is always 0 (the bytes
/// written wait in the read end's buffer); its `fstat` gives the unread bytes as `st_size` on
/// either end (XNU's `pipe_stat` reads the peer's count for the write end).
pub(crate) fn pipe_unread(fd: BorrowedFd<'_>) -> io::Result<usize> {
    #[cfg(not(target_vendor = "apple"))]
    {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one `c_int` through the pointer, which points at a live,
        // writable `c_int` for the whole call; `fd` is open.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::FIONREAD, &mut unread) })?;
        Ok(usize::try_from(unread).unwrap_or(0))
    }
    #[cfg(target_vendor = "apple")]
    {
        Ok(usize::try_from(fstat(fd.as_raw_fd())?.st_size).unwrap_or(0))
    }
}

/// Asks for a pipe of `bytes` capacity (Linux `F_SETPIPE_SZ`; the kernel rounds it up to
/// pages and refuses more than `/proc/sys/fs/pipe-max-size` to an unprivileged process).
/// Elsewhere it fails with `Unsupported`. Returns the capacity granted.
pub(crate) fn set_pipe_capacity(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: F_SETPIPE_SZ takes an int argument and touches no memory of ours; `fd` is
        // open.
        let granted = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, want) })?;
        Ok(usize::try_from(granted).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fd, bytes);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// The capacity of the pipe behind `fd` (Linux `F_GETPIPE_SZ`). Elsewhere it fails with
/// `Unsupported`.
pub(crate) fn pipe_capacity(fd: BorrowedFd<'_>) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: F_GETPIPE_SZ takes no argument and touches no memory of ours; `fd` is open.
        let capacity = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) })?;
        Ok(usize::try_from(capacity).unwrap_or(0))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = fd;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Makes this process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): descendants orphaned
/// below it are reparented to it instead of to init, so it can find and end them. Elsewhere it
/// fails with `Unsupported`.
pub(crate) fn become_child_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag and no pointers.
        cvt(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(drop)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Reaps one exited child of this process without waiting (`waitpid(-1, WNOHANG)`): its pid,
/// or `None` when no child has exited (or there are none).
pub(crate) fn reap_any() -> Option<libc::pid_t> {
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live, writable `c_int`; WNOHANG makes the call return at once.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    (pid > 0).then_some(pid)
}

/// Reaps the one process `pid` if it is an exited child of this process (`waitpid(pid,
/// WNOHANG)`): `Ok(true)` when reaped, `Ok(false)` while it runs. Fails with ECHILD when it is
/// no child of ours. Never touches another child's status (pids `<= 1` would name any child).
pub(crate) fn reap_pid(pid: libc::pid_t) -> io::Result<bool> {
    if pid <= 1 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    let mut status: libc::c_int = 0;
    // SAFETY: `status` is a live, writable `c_int`; a pid above 1 names exactly one process;
    // WNOHANG makes the call return at once.
    let reaped = retry(|| cvt(unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) }))?;
    Ok(reaped == pid)
}

/// Reaps the process a pidfd refers to if it is an exited child of this process
/// (`waitid(P_PIDFD, fd, WEXITED | WNOHANG)`, Linux 5.4 and later): `Ok(true)` when reaped,
/// `Ok(false)` while it runs. Unlike a pid, the fd cannot name a later process. Fails with
/// ECHILD when it is no child of ours, EINVAL on kernels without `P_PIDFD`, and with
/// `Unsupported` off Linux.
pub(crate) fn reap_pidfd(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    #[cfg(target_os = "linux")]
    {
        let id = libc::id_t::try_from(pidfd.as_raw_fd())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: all-zero bytes are a valid `siginfo_t` (plain integers and a union of them).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG;
        // SAFETY: `info` is a live, writable `siginfo_t` for the call; the fd stays open for it
        // (it is borrowed); WNOHANG makes the call return at once.
        retry(|| cvt(unsafe { libc::waitid(libc::P_PIDFD, id, &mut info, flags) }))?;
        // SAFETY: waitid returned 0, so `info` holds the reaped child's fields, or the zeros it
        // started with when no child had exited (`si_pid` 0).
        Ok(unsafe { info.si_pid() } != 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pidfd;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// The file status flags (`F_GETFL`) of `fd`.
pub(crate) fn status_flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
    // SAFETY: F_GETFL takes no pointer argument; `fd` is open.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })
}

fn set_status_flags(fd: RawFd, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: F_SETFL takes an integer argument; an fd that is not open gives EBADF.
    cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(drop)
}

/// Sets `O_NONBLOCK` on an fd and puts the original flags back when dropped (on every exit path,
/// unwinding included). Used only where a private description cannot be had.
#[derive(Debug)]
pub(crate) struct NonBlockingGuard {
    fd: RawFd,
    original: libc::c_int,
}

impl NonBlockingGuard {
    /// Records the flags of `fd` and sets `O_NONBLOCK`. The caller keeps `fd` open for the
    /// guard's life.
    pub(crate) fn new(fd: BorrowedFd<'_>) -> io::Result<NonBlockingGuard> {
        let original = status_flags(fd)?;
        if original & libc::O_NONBLOCK == 0 {
            set_status_flags(fd.as_raw_fd(), original | libc::O_NONBLOCK)?;
        }
        Ok(NonBlockingGuard {
            fd: fd.as_raw_fd(),
            original,
        })
    }
}

impl Drop for NonBlockingGuard {
    fn drop(&mut self) {
        // Best effort: the fd may already be gone, and there is nothing better to do then.
        let _ = set_status_flags(self.fd, self.original);
    }
}

/// Whether `e` says the process or the system is out of fds (`EMFILE`, `ENFILE`): a state
/// that passes once some are closed, unlike a bad or closed fd.
pub(crate) fn out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Duplicates `fd` to the lowest free fd at or above `min`, close-on-exec.
pub(crate) fn dup_cloexec(fd: BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC takes an integer argument and returns a new fd that we own.
    let new = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) })?;
    // SAFETY: `new` is a fresh fd owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Points fd number `target` at the file behind `src` (`dup2(2)`), closing what `target` held.
///
/// `target` is one of the standard fds the caller deliberately redirects; whoever owns it in
/// Rust (nobody, for 0, 1 and 2) keeps using the number.
pub(crate) fn redirect(src: BorrowedFd<'_>, target: RawFd) -> io::Result<()> {
    retry(|| {
        // SAFETY: dup2 atomically replaces `target`; it does not touch memory. Only the standard
        // fds are passed as `target`, which no `OwnedFd` in this process owns.
        cvt(unsafe { libc::dup2(src.as_raw_fd(), target) }).map(drop)
    })
}

/// The parent process id.
pub(crate) fn parent_pid() -> libc::pid_t {
    // SAFETY: getppid cannot fail and has no arguments.
    unsafe { libc::getppid() }
}

// ---------------------------------------------------------------------------------------------
// Child processes and their groups: what the client needs to supervise a server it spawned, and
// what a handler's child command needs. A spawned child leads its own process group (its pgid is
// its pid), so a signal to the group reaches every process it started that did not leave the
// group on purpose; a cancelled or finished command leaves nothing behind.
// ---------------------------------------------------------------------------------------------

/// Asks every process in the group `pgid` to end: SIGTERM, then SIGCONT. A stopped process
/// (SIGSTOP, a debugger, job control) acts on a SIGTERM only once it runs again; without the
/// SIGCONT it would sit out the whole grace and get SIGKILL, with no chance to end in order.
/// A running process ignores SIGCONT unless it asked for it. The SIGTERM's result is returned.
pub(crate) fn terminate_group(pgid: libc::pid_t) -> io::Result<()> {
    let asked = signal_group(pgid, libc::SIGTERM);
    let _ = signal_group(pgid, libc::SIGCONT);
    asked
}

/// Sends `signal` to every process in the group `pgid` (`kill(-pgid, signal)`).
///
/// Fails with ESRCH when the group has no process left.
pub(crate) fn signal_group(pgid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pgid <= 1 {
        // -1 would mean "every process we may signal", and 0 our own group: never either.
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes plain integers and touches no memory; `-pgid` is a negative number
    // below -1, which names exactly one process group.
    cvt(unsafe { libc::kill(-pgid, signal) }).map(drop)
}

/// Sends `signal` to the one process `pid` (`kill(2)`), never to a group.
///
/// Fails with `InvalidInput` for pids that would name a group or every process (`<= 1`).
pub(crate) fn signal_process(pid: libc::pid_t, signal: libc::c_int) -> io::Result<()> {
    if pid <= 1 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill takes plain integers and touches no memory; a pid above 1 names exactly one
    // process.
    cvt(unsafe { libc::kill(pid, signal) }).map(drop)
}

/// Sends `signal` to the process a pidfd refers to (`pidfd_send_signal(2)`, Linux 5.1 and
/// later): unlike a pid, a pidfd never comes to name another process. Fails with ESRCH once
/// the process has exited, and with `Unsupported` off Linux.
pub(crate) fn pidfd_signal(pidfd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the syscall takes an fd that stays open for the call (it is borrowed), a
        // signal number, a null siginfo pointer (allowed: the kernel fills in a default) and
        // zero flags; it writes no memory of ours.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        };
        cvt(ret).map(drop)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (pidfd, signal);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Whether any process of group `pgid` still exists (`kill(-pgid, 0)`). Zombies count as
/// existing until someone reaps them.
pub(crate) fn group_exists(pgid: libc::pid_t) -> bool {
    match signal_group(pgid, 0) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// A file descriptor that becomes readable when the process `pid` exits (`pidfd_open(2)`,
/// Linux 5.3 and later), close-on-exec. Elsewhere, or on an older kernel, it fails and the
/// caller polls the child's status on a short tick instead.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pidfd_open takes a pid and a flags word and returns a new fd or -1; it touches
        // no memory of ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
        let fd = cvt(fd)?;
        let fd = RawFd::try_from(fd).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
        // SAFETY: the kernel returned a new fd (close-on-exec by definition) that nobody owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Makes the child that `command` spawns receive SIGKILL when the thread that spawned it dies
/// (Linux `PR_SET_PDEATHSIG`), so a server cannot outlive a client that crashed. Does nothing
/// on other systems.
///
/// The kernel ties this to the spawning *thread*, not the process: the client forks its servers
/// on a thread that outlives them (`client::spawner`), not on the caller's.
pub(crate) fn kill_child_with_parent(command: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        let hook = move || -> io::Result<()> {
            // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and no pointers.
            cvt(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
            // The parent may have died between fork and prctl; then nobody will send the signal.
            if parent_pid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        };
        // SAFETY: the hook runs in the forked child before exec. It only calls prctl and
        // getppid, both async-signal-safe, and allocates nothing and takes no locks: its errors
        // are built from raw error codes.
        unsafe { command.pre_exec(hook) };
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = command;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pipe_asked_for_more_room_takes_more_without_blocking() {
        // mio's pipes are non-blocking: a write takes what the pipe has room for.
        let (w, _r) = mio::unix::pipe::new().unwrap();
        let chunk = vec![b'x'; 256 << 10];
        let granted = set_pipe_capacity(w.as_fd(), 1 << 20).unwrap();
        assert!(granted >= 1 << 20, "{granted}");
        assert_eq!(write(w.as_fd(), &chunk).unwrap(), chunk.len());
        let (w, _r) = mio::unix::pipe::new().unwrap();
        assert!(
            write(w.as_fd(), &chunk).unwrap() < chunk.len(),
            "the default is smaller"
        );
    }

    #[test]
    fn file_kind_tells_pipes_files_and_closed_fds_apart() {
        let (r, _w) = mio::unix::pipe::new().unwrap();
        assert_eq!(file_kind(r.as_raw_fd()).unwrap(), FileKind::Fifo);
        let f = std::fs::File::open("Cargo.toml").unwrap();
        assert_eq!(file_kind(f.as_raw_fd()).unwrap(), FileKind::Regular);
        let null = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(file_kind(null.as_raw_fd()).unwrap(), FileKind::CharDevice);
        let err = file_kind(100_000).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn unread_bytes_are_counted_on_either_end_of_a_pipe() {
        // The wrapper's pacing asks on the write end (the server's stdin).
        let (mut r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, b"hello").unwrap();
        assert_eq!(pipe_unread(w.as_fd()).unwrap(), 5, "asked on the write end");
        assert_eq!(pipe_unread(r.as_fd()).unwrap(), 5, "asked on the read end");
        std::io::Read::read_exact(&mut r, &mut [0; 5]).unwrap();
        assert_eq!(pipe_unread(w.as_fd()).unwrap(), 0);
        assert_eq!(pipe_unread(r.as_fd()).unwrap(), 0);
    }

    #[test]
    fn non_blocking_guard_restores_the_original_flags() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let before = status_flags(f.as_fd()).unwrap();
        {
            let _guard = NonBlockingGuard::new(f.as_fd()).unwrap();
            assert_ne!(status_flags(f.as_fd()).unwrap() & libc::O_NONBLOCK, 0);
        }
        assert_eq!(status_flags(f.as_fd()).unwrap(), before);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reopened_pipe_is_non_blocking_but_the_original_is_untouched() {
        let mut fds = [0; 2];
        // SAFETY: test-only; `fds` has room for the two fds pipe writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the fds were just created and are owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let private = reopen_nonblocking(r.as_fd(), false).unwrap();
        assert_eq!(status_flags(r.as_fd()).unwrap() & libc::O_NONBLOCK, 0);
        let mut buf = [0u8; 8];
        let err = read(private.as_fd(), &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        write(w.as_fd(), b"hi").unwrap();
        assert_eq!(read(private.as_fd(), &mut buf).unwrap(), 2);
    }
}
