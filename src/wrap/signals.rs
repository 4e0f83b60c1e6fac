//! The shutdown signals after the wrapper's loop returned. The loop's handlers go with it, but
//! the wrapper still has the server to end (the end-of-input grace: 2 s and more); a signal's
//! default action then would kill the wrapper and leave the server running, orphaned. This
//! subscription, taken before the loop starts, keeps the signals caught until the end.

use std::io::Read;
use std::os::fd::AsFd;

use crate::sys::SignalSubscription;

/// SIGTERM, SIGINT and SIGHUP caught for the wrapper's whole run (see the module docs).
#[derive(Debug)]
pub(super) struct LateSignals {
    // Declared first, dropped first: the handler must stop writing before the pipe closes.
    _subscription: SignalSubscription,
    _sender: mio::unix::pipe::Sender,
    receiver: mio::unix::pipe::Receiver,
}

impl LateSignals {
    /// None when the pipe or the handlers cannot be set up: the loop, which needs the same,
    /// then fails and says why.
    pub(super) fn new() -> Option<LateSignals> {
        let (sender, receiver) = mio::unix::pipe::new().ok()?;
        let subscription = SignalSubscription::new(sender.as_fd()).ok()?;
        Some(LateSignals {
            _subscription: subscription,
            _sender: sender,
            receiver,
        })
    }

    /// The last signal caught since the previous call, if one (never blocks: the pipe is
    /// non-blocking).
    pub(super) fn take(&mut self) -> Option<i32> {
        let mut buf = [0u8; 16];
        let mut last = None;
        while let Ok(n @ 1..) = self.receiver.read(&mut buf) {
            last = Some(i32::from(buf[n - 1]));
        }
        last
    }
}
