//! Taking a lock whose holder panicked.
//!
//! Every mutex in the crate guards plain data (queues, flags, a waker) that a panic cannot
//! leave half-written in a way the next holder would misread, so a poisoned lock is taken as
//! it is: one panicking thread must not turn every later call into a second panic.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, going on with the data when a holder panicked.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
