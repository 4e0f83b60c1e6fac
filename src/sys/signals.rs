//! Signals: a self-pipe per subscriber. The handler only writes one byte (the signal number) to
//! each subscriber's pipe, ignores EAGAIN, and saves and restores errno. Everything else happens
//! in the event loop, which drains its pipe before acting. Also the signals a write may raise,
//! ignored while the crate writes. Part of `sys`: every `unsafe` block has its `// SAFETY:`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

use super::cvt;

/// The signals that end the loop gracefully.
pub(crate) const SHUTDOWN_SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

const SLOTS: usize = 32;
#[allow(clippy::declare_interior_mutable_const)] // Only used to initialise the array below.
const EMPTY_SLOT: AtomicI32 = AtomicI32::new(-1);
/// Write ends of the subscribers' pipes; -1 marks a free slot. Read by the signal handler.
static SIGNAL_PIPES: [AtomicI32; SLOTS] = [EMPTY_SLOT; SLOTS];

/// The signals a write may raise, which [`SignalIgnored`] ignores so that the write fails
/// instead: SIGPIPE (a reader gone, `EPIPE`) and SIGXFSZ (a file past `RLIMIT_FSIZE`, `EFBIG`).
pub(crate) const WRITE_SIGNALS: [libc::c_int; 2] = [libc::SIGPIPE, libc::SIGXFSZ];

struct SignalState {
    subscribers: usize,
    previous: Vec<(libc::c_int, libc::sigaction)>,
    /// For each of [`WRITE_SIGNALS`]: the guards alive, and the disposition before the first.
    ignored: [(usize, Option<libc::sigaction>); 2],
}

static SIGNAL_STATE: Mutex<SignalState> = Mutex::new(SignalState {
    subscribers: 0,
    previous: Vec::new(),
    ignored: [(0, None), (0, None)],
});

fn errno_location() -> *mut libc::c_int {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: returns the calling thread's errno slot; always valid.
    return unsafe { libc::__errno_location() };
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    // SAFETY: returns the calling thread's errno slot; always valid.
    return unsafe { libc::__error() };
}

extern "C" fn on_shutdown_signal(signo: libc::c_int) {
    // Only async-signal-safe work here: atomics, write(2), errno.
    let errno = errno_location();
    // SAFETY: the errno slot of this thread is valid for reads and writes.
    let saved = unsafe { *errno };
    let byte = signo as u8;
    for slot in &SIGNAL_PIPES {
        let fd = slot.load(Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: writing one byte from a valid stack location. The fd may have been closed
            // concurrently; write then fails with EBADF, which is harmless. A full pipe gives
            // EAGAIN (the pipe is non-blocking): one pending byte is enough to wake the loop.
            unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
        }
    }
    // SAFETY: as above.
    unsafe { *errno = saved };
}

fn install(signo: libc::c_int, handler: libc::sighandler_t) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags) that we then fill in.
    let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
    new.sa_sigaction = handler;
    new.sa_flags = libc::SA_RESTART;
    // SAFETY: `new.sa_mask` is a valid sigset to initialise.
    unsafe { libc::sigemptyset(&mut new.sa_mask) };
    // SAFETY: as above; `old` receives the previous action.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to valid sigaction values for the duration of the call.
    cvt(unsafe { libc::sigaction(signo, &new, &mut old) })?;
    Ok(old)
}

fn restore(signo: libc::c_int, old: &libc::sigaction) {
    // SAFETY: `old` is an action previously returned by sigaction for this signal.
    unsafe { libc::sigaction(signo, old, std::ptr::null_mut()) };
}

/// The handler now installed for `signo` (or `SIG_DFL` / `SIG_IGN`).
fn current_handler(signo: libc::c_int) -> io::Result<libc::sighandler_t> {
    // SAFETY: a zeroed sigaction is a valid value for sigaction to overwrite.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the current one into `now`, a valid sigaction.
    cvt(unsafe { libc::sigaction(signo, std::ptr::null(), &mut now) })?;
    Ok(now.sa_sigaction)
}

/// Puts `old` back for `signo` only if `ours` is still installed: a disposition the embedding
/// program set meanwhile is its choice, and stays. (It could still change between the look and
/// the restore; the signal API offers no compare-and-swap.)
fn restore_if_ours(signo: libc::c_int, ours: libc::sighandler_t, old: &libc::sigaction) {
    if current_handler(signo).is_ok_and(|now| now == ours) {
        restore(signo, old);
    }
}

/// The address of the shutdown handler, as sigaction stores it.
fn shutdown_handler() -> libc::sighandler_t {
    on_shutdown_signal as extern "C" fn(libc::c_int) as usize as libc::sighandler_t
}

fn lock_state() -> std::sync::MutexGuard<'static, SignalState> {
    // The state stays consistent even if a holder panicked: every update is a single step.
    SIGNAL_STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A subscription to SIGTERM, SIGINT and SIGHUP: while it lives, each of those signals writes its
/// number to the given pipe instead of ending the process. The process's previous handlers come
/// back when the last subscription is dropped, except where the embedding program installed
/// its own meanwhile (that one stays).
#[derive(Debug)]
pub(crate) struct SignalSubscription {
    slot: usize,
}

impl SignalSubscription {
    /// Subscribes the pipe whose (non-blocking) write end is `write_fd`. The caller keeps it open
    /// for the subscription's life.
    pub(crate) fn new(write_fd: BorrowedFd<'_>) -> io::Result<SignalSubscription> {
        let mut state = lock_state();
        let slot = SIGNAL_PIPES
            .iter()
            .position(|s| s.load(Ordering::Relaxed) == -1)
            .ok_or_else(|| io::Error::other("too many concurrent signal subscriptions"))?;
        if state.subscribers == 0 {
            let mut previous = Vec::new();
            for signo in SHUTDOWN_SIGNALS {
                match install(signo, shutdown_handler()) {
                    Ok(old) => previous.push((signo, old)),
                    Err(e) => {
                        for (signo, old) in &previous {
                            restore(*signo, old);
                        }
                        return Err(e);
                    }
                }
            }
            state.previous = previous;
        }
        state.subscribers += 1;
        SIGNAL_PIPES[slot].store(write_fd.as_raw_fd(), Ordering::SeqCst);
        Ok(SignalSubscription { slot })
    }
}

impl Drop for SignalSubscription {
    fn drop(&mut self) {
        let mut state = lock_state();
        SIGNAL_PIPES[self.slot].store(-1, Ordering::SeqCst);
        state.subscribers -= 1;
        if state.subscribers == 0 {
            for (signo, old) in std::mem::take(&mut state.previous) {
                restore_if_ours(signo, shutdown_handler(), &old);
            }
        }
    }
}

/// While it lives, `signo` (one of [`WRITE_SIGNALS`]) is ignored, so a write fails with its
/// error (`EPIPE`, `EFBIG`) instead of killing the process. The previous disposition comes back
/// when the last guard of that signal is dropped, unless the embedding program set its own
/// meanwhile (that one stays).
#[derive(Debug)]
pub(crate) struct SignalIgnored(usize);

impl SignalIgnored {
    /// Ignores SIGPIPE: a write to a pipe whose reader is gone fails with `EPIPE`.
    pub(crate) fn sigpipe() -> io::Result<SignalIgnored> {
        SignalIgnored::new(libc::SIGPIPE)
    }

    /// Ignores SIGXFSZ: a write past `RLIMIT_FSIZE` fails with `EFBIG`.
    pub(crate) fn sigxfsz() -> io::Result<SignalIgnored> {
        SignalIgnored::new(libc::SIGXFSZ)
    }

    /// Ignores `signo` (reference counted across threads).
    fn new(signo: libc::c_int) -> io::Result<SignalIgnored> {
        let Some(which) = WRITE_SIGNALS.iter().position(|&s| s == signo) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        let mut state = lock_state();
        let (users, previous) = &mut state.ignored[which];
        if *users == 0 {
            *previous = Some(install(signo, libc::SIG_IGN)?);
        }
        *users += 1;
        Ok(SignalIgnored(which))
    }
}

impl Drop for SignalIgnored {
    fn drop(&mut self) {
        let mut state = lock_state();
        let (users, previous) = &mut state.ignored[self.0];
        *users -= 1;
        if *users == 0 {
            if let Some(old) = previous.take() {
                restore_if_ours(WRITE_SIGNALS[self.0], libc::SIG_IGN, &old);
            }
        }
    }
}

#[cfg(test)]
#[path = "signals_tests.rs"]
mod tests;
