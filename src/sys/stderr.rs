//! What the stderr sink needs from the kernel: what stderr is (the null device, a terminal that
//! can be opened anew), a wait, as long as it takes, for room in it, and a hook that runs when
//! the process exits. Part of `sys`: every `unsafe` block has its `// SAFETY:`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Whether `fd` is the null device: a character device with the device number of `/dev/null`
/// (any node of it counts: the number picks the driver). Writes to it never block.
/// `/dev/null` is looked up by its path, no fd opened: the sink also opens at the fd limit.
pub(crate) fn is_dev_null(fd: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(null) = std::fs::metadata("/dev/null") else {
        return false;
    };
    let is_char = |st: &libc::stat| st.st_mode & libc::S_IFMT == libc::S_IFCHR;
    #[allow(clippy::unnecessary_cast)] // `dev_t` is `u64` on Linux, `i32` on macOS.
    let same_device = |st: &libc::stat| st.st_rdev as u64 == null.rdev();
    null.file_type().is_char_device()
        && super::fstat(fd.as_raw_fd()).is_ok_and(|st| is_char(&st) && same_device(&st))
}

/// Whether `fd` is a terminal that opening its `/proc/self/fd` link reaches again (Linux): a
/// tty, but not the pty multiplexer (`/dev/ptmx`, device 5:2, where a pty master's link
/// leads), which an open answers with a new pty. Other character devices are never opened
/// anew: an open may have side effects.
#[cfg(target_os = "linux")]
pub(crate) fn is_reopenable_terminal(fd: BorrowedFd<'_>) -> bool {
    use std::io::IsTerminal;
    fd.is_terminal()
        && super::fstat(fd.as_raw_fd()).is_ok_and(|st| st.st_rdev != libc::makedev(5, 2))
}

/// Elsewhere no `/proc/self/fd` reopens a terminal.
#[cfg(not(target_os = "linux"))]
pub(crate) fn is_reopenable_terminal(_fd: BorrowedFd<'_>) -> bool {
    false
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn only_the_null_device_counts_as_dev_null() {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert!(is_dev_null(null.as_fd()));
        let zero = std::fs::File::open("/dev/zero").unwrap();
        assert!(!is_dev_null(zero.as_fd()), "another character device");
        let (_r, w) = std::io::pipe().unwrap();
        assert!(!is_dev_null(w.as_fd()));
        let file = std::fs::File::open("Cargo.toml").unwrap();
        assert!(!is_dev_null(file.as_fd()));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pty_is_reopened_as_a_terminal_but_not_its_master_nor_dev_null() {
        // The read of the master would wait for ever if the write went elsewhere.
        crate::test_watchdog::watchdog(|| {
            let master = super::super::open("/dev/ptmx", libc::O_RDWR | libc::O_NOCTTY).unwrap();
            // SAFETY: test-only; `master` is an open pty master for the call.
            assert_eq!(unsafe { libc::unlockpt(master.as_raw_fd()) }, 0);
            let mut number: libc::c_uint = 0;
            // SAFETY: TIOCGPTN writes one `c_uint`, into `number`, which lives for the call.
            let got = unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCGPTN, &mut number) };
            assert_eq!(got, 0);
            let slave =
                super::super::open(&format!("/dev/pts/{number}"), libc::O_RDWR | libc::O_NOCTTY)
                    .unwrap();
            assert!(is_reopenable_terminal(slave.as_fd()));
            assert!(
                !is_reopenable_terminal(master.as_fd()),
                "an open makes a new pty"
            );
            let null = std::fs::File::open("/dev/null").unwrap();
            assert!(!is_reopenable_terminal(null.as_fd()));
            // The private description writes the same terminal, without blocking.
            let private = super::super::reopen_nonblocking(slave.as_fd(), true).unwrap();
            assert_eq!(super::super::write(private.as_fd(), b"hi").unwrap(), 2);
            let mut buf = [0u8; 8];
            assert_eq!(super::super::read(master.as_fd(), &mut buf).unwrap(), 2);
            assert_eq!(&buf[..2], b"hi");
        });
    }
}
