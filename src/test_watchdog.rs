//! The unit tests' guard against a hang: a test that talks to a thread or a process runs on a
//! thread of its own and fails, rather than waits for ever, when it does not end in time.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How long one test may take before it fails as a hang.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// Runs `test` on a thread of its own and fails if it is still running after `LIMIT`.
pub(crate) fn watchdog(test: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let thread = thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    match finished.recv_timeout(LIMIT) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test did not end within {LIMIT:?}"),
    }
}
