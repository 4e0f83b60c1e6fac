//! Deadlines from durations a caller may set to anything, `Duration::MAX` included.
//!
//! `Instant + Duration` panics when the sum does not fit; every deadline built from a
//! caller's timeout, grace or interval goes through here instead, and a wait too long to
//! represent becomes a wait of a century: no end, in practice, and no panic.

use std::time::{Duration, Instant};

/// The longest wait a deadline stands for: a century.
pub(crate) const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `start + wait`, with `wait` capped at a century.
pub(crate) fn after(start: Instant, wait: Duration) -> Instant {
    let wait = wait.min(CENTURY);
    start
        .checked_add(wait)
        .or_else(|| start.checked_add(wait / 1000))
        .unwrap_or(start)
}

/// `Instant::now() + wait`, with `wait` capped at a century.
pub(crate) fn from_now(wait: Duration) -> Instant {
    after(Instant::now(), wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_wait_gives_a_deadline_and_long_ones_lie_far_ahead() {
        let now = Instant::now();
        assert_eq!(
            after(now, Duration::from_secs(3)),
            now + Duration::from_secs(3)
        );
        for wait in [
            Duration::MAX,
            Duration::from_secs(u64::MAX / 2),
            CENTURY * 2,
        ] {
            let deadline = after(now, wait);
            assert!(deadline >= now + Duration::from_secs(365 * 24 * 60 * 60));
        }
        assert!(from_now(Duration::MAX) > Instant::now());
    }
}
