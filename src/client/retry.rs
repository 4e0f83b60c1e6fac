//! When and how often a failed request is tried again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a [`Client`](crate::Client) retries a failed request.
///
/// Only retryable failures are retried ([`Error::is_retryable`](crate::Error::is_retryable): a
/// timeout, an I/O failure, a server that exited or went silent), and a server that died is
/// restarted (with a fresh handshake) before the next attempt. RPC and protocol errors are never
/// retried: the server would answer the same again. A non-idempotent call (`tools/call`, unless
/// the caller marks it [idempotent](crate::RequestOptions::idempotent)) is never retried either.
///
/// The delay before attempt *n* + 1 is `initial_backoff * 2^(n-1)`, at most `max_backoff`, with
/// ±20 % jitter so that many clients do not retry in step.
///
/// # Example
/// ```
/// use std::time::Duration;
/// let policy = mcpipe::RetryPolicy::default(); // 3 attempts, 500 ms, then 1 s
/// assert_eq!(policy.attempts, 3);
/// assert_eq!(policy.backoff_before(2), Duration::from_millis(500));
/// assert_eq!(policy.backoff_before(4), Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 means no retry.
    pub attempts: u32,
    /// The delay before the second attempt.
    pub initial_backoff: Duration,
    /// The longest delay between attempts.
    pub max_backoff: Duration,
    /// Whether delays are spread by ±20 %.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    /// Three attempts; backoff 500 ms → 1 s → 2 s (capped), with jitter.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(2),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// A policy that makes one attempt only (the client's default).
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The delay before attempt `attempt` (counted from 1), without jitter: zero for the first.
    pub fn backoff_before(&self, attempt: u32) -> Duration {
        if attempt <= 1 {
            return Duration::ZERO;
        }
        let doublings = (attempt - 2).min(20);
        self.initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }

    /// The delay before `attempt`, with jitter when the policy asks for it.
    pub(crate) fn delay_before(&self, attempt: u32, seed: &mut u64) -> Duration {
        let base = self.backoff_before(attempt);
        if !self.jitter || base.is_zero() {
            return base;
        }
        // A factor in [0.8, 1.2); a delay past what a Duration holds is the longest one
        // (`mul_f64` would panic there).
        let factor = 0.8 + 0.4 * next_unit(seed);
        Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(Duration::MAX)
    }
}

/// A seed for the jitter: no two processes (or clients) should share one.
pub(crate) fn seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ (u64::from(std::process::id()) << 32)) | 1
}

/// xorshift64*: plenty for spreading delays, and no dependency.
fn next_unit(state: &mut u64) -> f64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    (r >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_backoff_doubles_from_500_ms_up_to_2_s() {
        let p = RetryPolicy::default();
        let want = [0, 500, 1000, 2000, 2000];
        for (attempt, ms) in (1..).zip(want) {
            assert_eq!(p.backoff_before(attempt), Duration::from_millis(ms));
        }
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let p = RetryPolicy::default();
        let mut s = seed();
        for _ in 0..1000 {
            let d = p.delay_before(2, &mut s);
            assert!(
                d >= Duration::from_millis(400) && d < Duration::from_millis(600),
                "{d:?}"
            );
        }
    }

    #[test]
    fn huge_backoffs_saturate_instead_of_panicking() {
        let p = RetryPolicy {
            attempts: 40,
            initial_backoff: Duration::MAX,
            max_backoff: Duration::MAX,
            jitter: true,
        };
        let mut s = seed();
        for attempt in 1..40 {
            let d = p.delay_before(attempt, &mut s);
            assert!(attempt == 1 || d >= Duration::MAX.mul_f64(0.79), "{d:?}");
        }
        assert_eq!(p.backoff_before(39), Duration::MAX);
    }
}
