//! The events of one [`SharedClient`](super::SharedClient) request, from the IO thread to the
//! caller that waits for them: progress, then the outcome. A channel made for one request,
//! in place of `std::sync::mpsc::channel`, whose first send allocated a block of 31 slots
//! (zeroed, about 3 KiB) for what is almost always one event (BENCHMARKS.md, "The client under
//! load"). One allocation per request; no system call unless the caller sleeps.
//!
//! The same guarantees as the `mpsc` channel: events come in the order sent; once the IO
//! thread's end is dropped (the request ended, the thread ended, the command never reached
//! it) a waiting caller wakes and learns that nothing more will come; an event sent after
//! the caller's end is dropped is dropped at once.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};

use serde_json::Value;

use super::options::Progress;
use crate::error::Error;
use crate::lock::lock;

/// What the IO thread tells the caller of one request.
#[derive(Debug)]
pub(super) enum Event {
    Progress(Progress),
    /// The last event of a request.
    Done(Result<Value, Error>),
}

/// A new channel for one request: the IO thread's end and the caller's.
pub(super) fn channel() -> (EventSender, EventReceiver) {
    let shared = Arc::new(Mutex::new(State {
        progress: VecDeque::new(),
        done: None,
        sender_gone: false,
        receiver_gone: false,
        waiter: None,
    }));
    (EventSender(Arc::clone(&shared)), EventReceiver(shared))
}

/// The events not yet taken, and who waits for them.
#[derive(Debug)]
struct State {
    /// Progress not yet taken, oldest first (allocated only when progress comes).
    progress: VecDeque<Progress>,
    /// The outcome, once sent; taken after every progress event sent before it.
    done: Option<Result<Value, Error>>,
    /// The IO thread's end was dropped: nothing comes after what is queued.
    sender_gone: bool,
    /// The caller's end was dropped: events are dropped as they come.
    receiver_gone: bool,
    /// The caller, parked until an event comes or the sender goes; set by the caller just
    /// before it parks, taken by whoever wakes it.
    waiter: Option<Thread>,
}

/// The IO thread's end: sends events; dropping it ends the request for the caller.
#[derive(Debug)]
pub(super) struct EventSender(Arc<Mutex<State>>);

impl EventSender {
    /// Sends `event`; dropped when the caller's end is gone.
    pub(super) fn send(&self, event: Event) {
        let mut state = lock(&self.0);
        if state.receiver_gone {
            return;
        }
        match event {
            Event::Progress(progress) => state.progress.push_back(progress),
            Event::Done(outcome) => state.done = Some(outcome),
        }
        let waiter = state.waiter.take();
        drop(state);
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        let mut state = lock(&self.0);
        state.sender_gone = true;
        let waiter = state.waiter.take();
        drop(state);
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
    }
}

/// The caller's end.
#[derive(Debug)]
pub(super) struct EventReceiver(Arc<Mutex<State>>);

impl EventReceiver {
    /// The next event, waiting as long as it takes; `None` once the sender is gone and
    /// every event it sent was taken. (The IO thread ends every request by its deadline.)
    pub(super) fn recv(&self) -> Option<Event> {
        let mut state = lock(&self.0);
        loop {
            if let Some(progress) = state.progress.pop_front() {
                return Some(Event::Progress(progress));
            }
            if let Some(outcome) = state.done.take() {
                return Some(Event::Done(outcome));
            }
            if state.sender_gone {
                return None;
            }
            state.waiter = Some(thread::current());
            drop(state);
            // Ends at the sender's `unpark` (which may come before this: then at once), or
            // spuriously: either way the state is looked at again.
            thread::park();
            state = lock(&self.0);
        }
    }
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        let mut state = lock(&self.0);
        state.receiver_gone = true;
        let progress = std::mem::take(&mut state.progress);
        let done = state.done.take();
        drop(state);
        // Dropped outside the lock: a large result takes a while.
        drop((progress, done));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_watchdog::watchdog;
    use std::time::Duration;

    fn progress(n: f64) -> Event {
        Event::Progress(Progress {
            progress: n,
            total: None,
            message: None,
        })
    }

    #[test]
    fn events_come_in_order_and_nothing_after_the_sender_is_gone() {
        watchdog(|| {
            let (sender, receiver) = channel();
            sender.send(progress(1.0));
            sender.send(progress(2.0));
            sender.send(Event::Done(Ok(Value::from(3))));
            drop(sender);
            let seen: Vec<String> = std::iter::from_fn(|| receiver.recv())
                .map(|event| match event {
                    Event::Progress(p) => format!("progress {}", p.progress),
                    Event::Done(outcome) => format!("done {:?}", outcome.ok()),
                })
                .collect();
            assert_eq!(seen, ["progress 1", "progress 2", "done Some(Number(3))"]);
        });
    }

    #[test]
    fn a_waiting_caller_wakes_for_an_event_from_another_thread() {
        watchdog(|| {
            let (sender, receiver) = channel();
            let thread = thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                sender.send(progress(1.0));
                thread::sleep(Duration::from_millis(20));
                sender.send(Event::Done(Ok(Value::Null)));
            });
            assert!(matches!(receiver.recv(), Some(Event::Progress(_))));
            assert!(matches!(
                receiver.recv(),
                Some(Event::Done(Ok(Value::Null)))
            ));
            thread.join().unwrap();
            assert!(receiver.recv().is_none(), "the sender is gone");
        });
    }

    #[test]
    fn a_waiting_caller_wakes_when_the_sender_is_dropped_without_an_answer() {
        watchdog(|| {
            let (sender, receiver) = channel();
            let thread = thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                drop(sender);
            });
            assert!(receiver.recv().is_none());
            thread.join().unwrap();
        });
    }

    #[test]
    fn events_sent_after_the_caller_left_are_dropped_at_once() {
        watchdog(|| {
            let (sender, receiver) = channel();
            sender.send(progress(1.0));
            drop(receiver);
            sender.send(Event::Done(Ok(Value::Null)));
            let state = lock(&sender.0);
            assert!(state.progress.is_empty() && state.done.is_none());
        });
    }
}
