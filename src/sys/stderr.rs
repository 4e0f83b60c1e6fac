//! What the stderr sink's writer thread needs from the kernel: a wait, as long as it takes, for
//! room in stderr, and a hook that runs when the process exits. Part of `sys`: every `unsafe`
//! block has its `// SAFETY:`.

use std::io;
use std::os::fd::BorrowedFd;

/// Waits until a write to `fd` would not block (`poll(2)` for `POLLOUT` with no timeout,
/// EINTR retried). An fd in error or hung up counts as ready: the write then says what is
/// wrong. Only for a thread nothing waits for: it may wait forever.
pub(crate) fn wait_writable(fd: BorrowedFd<'_>) -> io::Result<()> {
    let revents = super::poll_out(fd, -1)?.unwrap_or(0);
    if revents & libc::POLLNVAL != 0 {
        // Not an open fd: the write would fail the same way.
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(())
}

/// Registers `hook` to run when the process exits through `exit(3)` (a return from `main`,
/// `std::process::exit`); a signal that ends the process skips it.
pub(crate) fn at_exit(hook: extern "C" fn()) -> io::Result<()> {
    // SAFETY: `hook` is a plain function that lives as long as the program; `atexit` only
    // records it.
    let ret = unsafe { libc::atexit(hook) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::other("atexit refused the hook"))
    }
}
