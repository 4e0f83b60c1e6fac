//! The channel between the callers of a [`SharedClient`](super::SharedClient) and its IO
//! thread: the commands callers send, what callers may read, and the caller's end of one
//! request ([`Call`], [`Canceller`]; its events come on its own channel, `call_events.rs`).

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

use mio::Waker;
use serde_json::Value;

use super::call_events::{Event, EventReceiver, EventSender};
use super::era::{Asked, Era};
use super::options::{Progress, RequestOptions};
use super::process::Shutdown;
use super::ClientStats;
use crate::error::Error;
use crate::lock::lock;
use crate::message::Notification;

/// Who waits for a request of the shared client (the session keeps its deadlines).
#[derive(Debug)]
pub(super) struct Detached {
    /// The caller's name for it (ids are given out on the IO thread).
    pub(super) key: u64,
    pub(super) events: EventSender,
}

impl Detached {
    /// Hands the outcome to the waiting caller (gone already: nothing to do).
    pub(super) fn answer(self, outcome: Result<Value, Error>) {
        self.events.send(Event::Done(outcome));
    }

    /// Passes a progress notification on to the waiting caller.
    pub(super) fn progress(&self, progress: Progress) {
        self.events.send(Event::Progress(progress));
    }
}

/// The parts of [`RequestOptions`] the IO thread needs (the progress callback stays with the
/// caller).
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub(super) timeout: Option<Duration>,
    pub(super) max_total: Option<Duration>,
    pub(super) reset_on_progress: Option<bool>,
    pub(super) wants_progress: bool,
}

impl Plan {
    pub(super) fn of(options: &RequestOptions<'_>) -> Plan {
        Plan {
            timeout: options.timeout,
            max_total: options.max_total,
            reset_on_progress: options.reset_on_progress,
            wants_progress: options.progress.is_some(),
        }
    }

    pub(super) fn options(self) -> RequestOptions<'static> {
        RequestOptions {
            timeout: self.timeout,
            max_total: self.max_total,
            reset_on_progress: self.reset_on_progress,
            ..RequestOptions::default()
        }
    }
}

/// What a caller asks of the IO thread.
#[derive(Debug)]
pub(super) enum Command {
    Start {
        key: u64,
        method: String,
        params: Option<Value>,
        plan: Plan,
        /// An earlier attempt failed: restart a dead server first.
        retrying: bool,
        events: EventSender,
    },
    Cancel {
        key: u64,
    },
    Notify {
        method: String,
        params: Option<Value>,
        reply: Sender<Result<(), Error>>,
    },
    Fulfil {
        input: Asked,
        reply: Sender<Result<Value, String>>,
    },
    /// Shut the server down and start it again, with a fresh handshake.
    Restart {
        reply: Sender<Result<(), Error>>,
    },
    /// `Some(grace)`: terminate without the end-of-input step.
    Close {
        terminate: Option<Duration>,
        reply: Sender<Shutdown>,
    },
}

/// What callers may read about the connection, refreshed by the IO thread.
#[derive(Debug, Clone, Default)]
pub(super) struct View {
    pub(super) stats: ClientStats,
    pub(super) era: Option<Era>,
    pub(super) protocol_version: String,
    pub(super) pid: Option<u32>,
    pub(super) initialize_result: Value,
    pub(super) discover_result: Value,
    /// The capabilities the client declared (the task helpers declare them again).
    pub(super) capabilities: Value,
}

/// What the handles, the calls and the IO thread share.
#[derive(Debug)]
pub(super) struct LinkState {
    pub(super) commands: Sender<Command>,
    /// Wakes the IO thread's poll; replaced when the server is restarted, `None` once the
    /// thread has ended.
    pub(super) waker: Mutex<Option<Arc<Waker>>>,
    /// A wake is on its way: set by the command that sends it, cleared by the IO thread
    /// before it looks at the queue. The commands sent meanwhile need no wake of their own.
    pub(super) wake_pending: AtomicBool,
    pub(super) view: Mutex<View>,
    pub(super) notifications: Mutex<VecDeque<Notification>>,
    pub(super) notified: Condvar,
    pub(super) next_key: AtomicU64,
    /// The IO thread, once it runs.
    pub(super) io_thread: OnceLock<ThreadId>,
    /// Set by the IO thread as it ends: how the server was shut down, and the panic of a
    /// callback that ended it. Read by a `close` whose own command came too late.
    pub(super) ended: Mutex<Option<Ended>>,
}

/// How the IO thread ended.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub(super) shutdown: Shutdown,
    /// A callback's panic (message and location), when that is what ended it.
    pub(super) panic: Option<String>,
}

/// The callers' end of the IO thread.
#[derive(Debug, Clone)]
pub(super) struct Link(pub(super) Arc<LinkState>);

impl Link {
    /// Queues a command and wakes the IO thread. `Err(Closed)` once the thread has ended;
    /// `Err(Io(Deadlock))` for a command that waits, sent from the IO thread itself (a callback
    /// using its own client would wait for itself forever).
    pub(super) fn send(&self, command: Command) -> Result<(), Error> {
        let waits = !matches!(command, Command::Cancel { .. });
        if waits && self.on_io_thread() {
            return Err(deadlock());
        }
        self.0.commands.send(command).map_err(|_| self.gone())?;
        // The IO thread clears the flag before it takes the queue: a command queued before
        // the clearing is taken by that look, one queued after it finds the flag clear.
        if self.0.wake_pending.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(waker) = lock(&self.0.waker).as_ref() {
            // A failed wake leaves the command queued; the thread's next wake-up sees it.
            let _ = waker.wake();
        }
        Ok(())
    }

    /// The IO thread is about to take the queue: the next command must wake it again.
    pub(super) fn taking_commands(&self) {
        self.0.wake_pending.store(false, Ordering::SeqCst);
    }

    /// Whether the calling thread is the IO thread.
    pub(super) fn on_io_thread(&self) -> bool {
        self.0.io_thread.get() == Some(&std::thread::current().id())
    }

    pub(super) fn view(&self) -> MutexGuard<'_, View> {
        lock(&self.0.view)
    }

    /// The IO thread ends: records how, lets go of the waker (its fd, and on kqueue systems
    /// the poll's, would otherwise stay open for as long as any handle or call does), and
    /// wakes whoever waits for a notification. A command sent later fails with
    /// [`Error::Closed`]: the thread's end of the channel is gone.
    pub(super) fn end(&self, ended: Ended) {
        *lock(&self.0.waker) = None;
        *lock(&self.0.ended) = Some(ended);
        let _queue = lock(&self.0.notifications);
        self.0.notified.notify_all();
    }

    /// How the IO thread ended, once it has.
    pub(super) fn ended(&self) -> Option<Ended> {
        lock(&self.0.ended).clone()
    }

    /// The error for a request the IO thread can no longer take: [`Error::Closed`], or the
    /// callback's panic that closed the client.
    pub(super) fn gone(&self) -> Error {
        match self.ended().and_then(|ended| ended.panic) {
            Some(panic) => Error::CallbackPanicked(panic),
            None => Error::Closed,
        }
    }
}

/// The error of a callback that would wait for the IO thread it runs on.
pub(super) fn deadlock() -> Error {
    Error::io(
        "using a shared client from its own callbacks",
        io::Error::from(io::ErrorKind::Deadlock),
    )
}

/// One request in flight on a [`SharedClient`](super::SharedClient): wait for its answer, or
/// cancel it.
///
/// Dropping a call that has not finished cancels it.
#[derive(Debug)]
pub struct Call {
    key: u64,
    events: EventReceiver,
    link: Link,
    finished: bool,
}

impl Call {
    pub(super) fn new(key: u64, events: EventReceiver, link: Link) -> Call {
        Call {
            key,
            events,
            link,
            finished: false,
        }
    }

    /// Waits for the answer. Ends by the request's deadline at the latest (then
    /// [`Error::Timeout`]); [`Error::Cancelled`] when it was cancelled first; the server's
    /// error as [`Error::Rpc`]; [`Error::Closed`] when the client was closed.
    ///
    /// # Errors
    /// As above, and [`Error::ServerExited`] / [`Error::Unresponsive`] when the server died.
    pub fn wait(self) -> Result<Value, Error> {
        self.wait_with_progress(&mut |_| {})
    }

    /// [`wait`](Call::wait), calling `on_progress` (on this thread) with each progress
    /// notification the server sends for the request.
    ///
    /// # Errors
    /// As [`Call::wait`].
    pub fn wait_with_progress(
        mut self,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<Value, Error> {
        loop {
            match self.events.recv() {
                Some(Event::Progress(progress)) => on_progress(&progress),
                Some(Event::Done(outcome)) => {
                    self.finished = true;
                    return outcome;
                }
                // The IO thread dropped the request without an answer: it is gone.
                None => {
                    self.finished = true;
                    return Err(self.link.gone());
                }
            }
        }
    }

    /// Cancels the request: the server is sent `notifications/cancelled`, a late answer is
    /// dropped, and the wait ends with [`Error::Cancelled`] (unless the answer came first).
    pub fn cancel(&self) {
        self.canceller().cancel();
    }

    /// A handle that cancels this request from any thread (while another waits on it).
    pub fn canceller(&self) -> Canceller {
        Canceller {
            key: self.key,
            link: self.link.clone(),
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.finished {
            // Nobody will wait for it: stop it (a closed client has nothing to stop).
            let _ = self.link.send(Command::Cancel { key: self.key });
        }
    }
}

/// Cancels one [`Call`] from any thread.
#[derive(Debug, Clone)]
pub struct Canceller {
    key: u64,
    link: Link,
}

impl Canceller {
    /// As [`Call::cancel`]; harmless once the call has ended.
    pub fn cancel(&self) {
        let _ = self.link.send(Command::Cancel { key: self.key });
    }
}
