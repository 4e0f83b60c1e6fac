//! What the loop's thread, the supervisor and the writer share about the wrapped server:
//! the requests in flight, the lines for its stdin, the client's handshake and lists, and how
//! the end goes.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::pacing::Pacing;
use super::Wrapper;
use crate::deadline;
use crate::id_map::{GivenUp, IdMap};
use crate::lock::lock;
use crate::message::{ErrorObject, Message, RequestId};
use crate::responder::Responder;

/// The list methods whose first page the wrapper remembers, and the notification that says
/// each changed.
pub(super) const LISTS: [(&str, &str); 3] = [
    ("tools/list", "notifications/tools/list_changed"),
    ("prompts/list", "notifications/prompts/list_changed"),
    ("resources/list", "notifications/resources/list_changed"),
];

/// Whether `method` is a list whose first page the wrapper remembers.
pub(super) fn is_remembered_list(method: &str) -> bool {
    LISTS.iter().any(|(m, _)| *m == method)
}

/// While more than this many bytes of lines wait for the server's stdin (a server that reads
/// slowly or not at all), the loop takes no new message from the client
/// ([`Handler::holds_input`](crate::Handler::holds_input)): the wrapper's memory stays flat and
/// the client is held back by its own pipe, as it would be by the server's.
pub(super) const HOLD_BYTES: usize = 1 << 20;

/// From SIGTERM to SIGKILL, when the wrapper ends a server that is not in a hurry (at the
/// end of input, or one that can answer nothing more).
pub(super) const KILL_AFTER_TERM: Duration = Duration::from_secs(1);
/// From a signal to the wrapper to SIGKILL (SIGTERM goes at once).
const QUICK_KILL: Duration = Duration::from_millis(200);

/// How often the supervisor looks at the server, the deadlines and a stop request.
pub(super) const TICK: Duration = Duration::from_millis(5);

/// How often it looks once the end was asked for: the server's exit is then what the client
/// waits for (the wrapper's exit), so it is noticed within a millisecond, not a tick.
pub(super) const STOPPING_TICK: Duration = Duration::from_millis(1);

/// A request of the client's that the server has not answered yet.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) responder: Responder,
    /// The request's method where it is read back (`initialize`, a list, with a deadline);
    /// empty otherwise.
    pub(super) method: String,
    pub(super) deadline: Option<Instant>,
    /// A list request for the first page (no cursor): its result is remembered.
    pub(super) first_page: bool,
}

/// A replayed `initialize` waiting for its answer.
#[derive(Debug)]
pub(super) struct Replay {
    pub(super) id: RequestId,
    /// When the writer wrote it: the server has the replay timeout
    /// ([`Wrapper::replay_timeout`]) from then.
    pub(super) written: Option<Instant>,
}

/// How the end goes, once asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stop {
    pub(super) asked: Instant,
    /// From `asked` to SIGTERM.
    pub(super) term_after: Duration,
    /// From `asked` to SIGKILL.
    pub(super) kill_after: Duration,
}

/// What the loop's thread and the supervisor's threads share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) config: Wrapper,
    /// The client's requests in flight. A request is filed under the queue's lock, with its
    /// line: a server's end ([`Shared::end_life`]) finds each one's line where it is.
    pub(super) pending: Mutex<IdMap<Pending>>,
    /// Requests given up on after their line reached the server (cancelled by the client, or
    /// past their deadline): the server may still answer one, which is then dropped without
    /// a word (see [`Shared::given_up`]).
    given_up: Mutex<GivenUp>,
    pub(super) queue: Mutex<Queue>,
    pub(super) queue_changed: Condvar,
    /// The bytes of the lines in the queue (kept by [`Queue`], read here without its lock).
    pub(super) waiting: Arc<AtomicUsize>,
    /// The client's `initialize` params, replayed to a restarted server.
    pub(super) init: Mutex<Option<Value>>,
    /// The client sent `notifications/initialized` (replayed too).
    pub(super) initialized: AtomicBool,
    /// The negotiated revision has batches (2025-03-26).
    pub(super) batches: AtomicBool,
    /// The first page of each list the client was given, by list method: after a restart the
    /// server's lists are compared with these.
    pub(super) lists: Mutex<HashMap<String, Value>>,
    /// The capabilities the server declared to the client (its `initialize` answer): a list
    /// change is announced only where it declared `listChanged`.
    pub(super) capabilities: Mutex<Value>,
    /// The replayed `initialize` whose answer the writer waits for.
    pub(super) replay: Mutex<Option<Replay>>,
    pub(super) replay_done: Condvar,
    pub(super) stop: Mutex<Option<Stop>>,
    /// Told when the end is asked for (the supervisor waits on it between its looks).
    pub(super) stop_asked: Condvar,
    /// How many lines the server may be handed at once (see [`super::pacing`]).
    pub(super) pacing: Mutex<Pacing>,
    /// The running server proved it takes batches (mirrors `pacing`, read without its lock
    /// on every line and every answer).
    pub(super) proven: AtomicBool,
    /// A replayed `initialize` waits for its answer (mirrors `replay`, which is set and
    /// cleared under the queue's lock).
    pub(super) replaying: AtomicBool,
    /// The life (start number) whose stdout the loop still reads.
    pub(super) stdout_open: Mutex<Option<u32>>,
    pub(super) stdout_ended: Condvar,
    pub(super) gave_up: AtomicBool,
    /// Once given up: the error every request gets, in the words of the cause (set before
    /// `gave_up`).
    pub(super) gave_up_error: Mutex<Option<ErrorObject>>,
    pub(super) starts: AtomicU32,
    pub(super) last_exit: Mutex<Option<ExitStatus>>,
    /// The last line the running server (or the last one) wrote on stderr, cut to
    /// `child::STDERR_TOLD` bytes: the likeliest reason it ended, for the error given up with.
    pub(super) stderr_last: Mutex<Option<String>>,
}

impl Shared {
    pub(super) fn new(config: Wrapper) -> Shared {
        let queue = Queue::default();
        let waiting = Arc::clone(&queue.waiting);
        Shared {
            config,
            pending: Mutex::new(IdMap::default()),
            given_up: Mutex::new(GivenUp::default()),
            queue: Mutex::new(queue),
            queue_changed: Condvar::new(),
            waiting,
            init: Mutex::new(None),
            initialized: AtomicBool::new(false),
            batches: AtomicBool::new(false),
            lists: Mutex::new(HashMap::new()),
            capabilities: Mutex::new(Value::Null),
            replay: Mutex::new(None),
            replay_done: Condvar::new(),
            stop: Mutex::new(None),
            stop_asked: Condvar::new(),
            pacing: Mutex::new(Pacing::default()),
            proven: AtomicBool::new(false),
            replaying: AtomicBool::new(false),
            stdout_open: Mutex::new(None),
            stdout_ended: Condvar::new(),
            gave_up: AtomicBool::new(false),
            gave_up_error: Mutex::new(None),
            starts: AtomicU32::new(0),
            last_exit: Mutex::new(None),
            stderr_last: Mutex::new(None),
        }
    }

    /// The loop read the end of the stdout of life `life`.
    pub(super) fn stdout_closed(&self, life: u32) {
        let mut open = lock(&self.stdout_open);
        if *open == Some(life) {
            *open = None;
        }
        drop(open);
        self.stdout_ended.notify_all();
    }

    /// Waits (at most `limit`) until the loop read the end of the server's stdout.
    pub(super) fn await_stdout_end(&self, limit: Duration) {
        let until = deadline::from_now(limit);
        let mut open = lock(&self.stdout_open);
        while open.is_some() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            open = match self.stdout_ended.wait_timeout(open, left) {
                Ok((o, _)) => o,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// The server answered the replayed `initialize`: what waits behind it may go.
    pub(super) fn replay_answered(&self) {
        let queue = lock(&self.queue);
        self.replaying.store(false, Ordering::Release);
        drop(queue);
        *lock(&self.replay) = None;
        self.replay_done.notify_all();
    }

    /// Notes that the request `id` was given up on after the server saw it (it was told with
    /// `notifications/cancelled`): a late answer to it is expected, not a fault.
    pub(super) fn give_up(&self, id: RequestId) {
        lock(&self.given_up).note(id);
    }

    /// Whether `id` names a request given up on (see [`Shared::give_up`]); it is forgotten,
    /// as one answer is all a request gets.
    pub(super) fn given_up(&self, id: &RequestId) -> bool {
        lock(&self.given_up).take(id)
    }

    /// Takes the request in flight `id` answers.
    pub(super) fn take_pending(&self, id: &RequestId) -> Option<Pending> {
        lock(&self.pending).remove(id)
    }

    /// Takes the request in flight `id` answers, if `keep` says so of it (else leaves it).
    pub(super) fn take_pending_if(
        &self,
        id: &RequestId,
        keep: impl FnOnce(&Pending) -> bool,
    ) -> Option<Pending> {
        let mut pending = lock(&self.pending);
        if pending.get(id).is_some_and(keep) {
            pending.remove(id)
        } else {
            None
        }
    }

    /// Remembers the first page of a list; whether it differs from the one remembered.
    pub(super) fn remember_list(&self, method: &str, result: Value) -> bool {
        let mut lists = lock(&self.lists);
        let changed = lists.get(method) != Some(&result);
        lists.insert(method.to_owned(), result);
        changed
    }

    /// Remembers the capabilities the server declared to the client.
    pub(super) fn remember_capabilities(&self, capabilities: Value) {
        *lock(&self.capabilities) = capabilities;
    }

    /// Whether the server declared `listChanged` for `kind` (tools, prompts, resources).
    pub(super) fn declared_list_changed(&self, kind: &str) -> bool {
        lock(&self.capabilities)[kind]["listChanged"] == true
    }

    pub(super) fn gave_up(&self) -> bool {
        self.gave_up.load(Ordering::Acquire)
    }

    pub(super) fn starts(&self) -> u32 {
        self.starts.load(Ordering::Acquire)
    }

    pub(super) fn last_exit(&self) -> Option<ExitStatus> {
        *lock(&self.last_exit)
    }

    /// Asks for the end: the server's stdin is closed now; SIGTERM and SIGKILL follow. Asked
    /// again, the sooner of the two ends stands.
    pub(super) fn ask_to_stop(&self, quick: bool) {
        let (term_after, kill_after) = if quick {
            (Duration::ZERO, QUICK_KILL)
        } else {
            (self.config.grace, self.config.grace + KILL_AFTER_TERM)
        };
        let now = Instant::now();
        let mut stop = lock(&self.stop);
        // Asked again (a signal in the end-of-input grace), the end that comes sooner stands.
        if stop.is_none_or(|s| s.asked + s.kill_after > now + kill_after) {
            *stop = Some(Stop {
                asked: now,
                term_after,
                kill_after,
            });
        }
        drop(stop);
        self.stop_asked.notify_all();
        let mut queue = lock(&self.queue);
        queue.closed = true;
        // The server's end of input comes once no description of its stdin is left open.
        queue.lose_direct();
        drop(queue);
        self.queue_changed.notify_all();
    }

    pub(super) fn stopping(&self) -> Option<Stop> {
        *lock(&self.stop)
    }

    /// Answers every request in flight with `error`.
    pub(super) fn fail_pending(&self, error: &ErrorObject) {
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in pending {
            p.responder.respond(Err(error.clone()));
        }
    }
}

/// One line for the server's stdin.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub(super) bytes: Vec<u8>,
    /// Goes next, whatever the pacing: the rest of a line written in part, or lines gathered
    /// for a server that takes batches.
    pub(super) continues: bool,
    /// Begins with the rest of a line written in part to the running server: never for
    /// another one (see [`super::restart`]).
    pub(super) begun: bool,
    /// One of the wrapper's own lines for the running server (the replayed handshake, lists
    /// fetched again, a ping): meaningless to the next one.
    pub(super) own: bool,
    /// The id, when the line is a request of the client's (a probe is made of two).
    pub(super) request: Option<RequestId>,
}

impl Outgoing {
    pub(super) fn new(message: &Message) -> Outgoing {
        let request = match message {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        Outgoing {
            bytes: message.to_line(),
            continues: false,
            begun: false,
            own: false,
            request,
        }
    }

    /// One of the wrapper's own lines for the running server.
    pub(super) fn own(message: &Message) -> Outgoing {
        Outgoing {
            own: true,
            ..Outgoing::new(message)
        }
    }

    /// Lines that go next, whatever the pacing; `begun` when they start with the rest of a
    /// line written in part.
    pub(super) fn chunk(bytes: Vec<u8>, begun: bool) -> Outgoing {
        Outgoing {
            bytes,
            continues: true,
            begun,
            own: false,
            request: None,
        }
    }

    /// A line the client sent, forwarded as it came: it was only read, not changed.
    pub(super) fn forwarded(mut line: Vec<u8>, request: Option<RequestId>) -> Outgoing {
        line.push(b'\n');
        Outgoing {
            bytes: line,
            continues: false,
            begun: false,
            own: false,
            request,
        }
    }
}

/// Lines for the server's stdin, in order, `closed` once the client is done.
#[derive(Debug, Default)]
pub(super) struct Queue {
    /// Read through [`Queue::lines`], changed only through [`Queue::push_back`] and the like,
    /// which keep `waiting` (private, so that no other change can be written: a ping pushed
    /// past the count once made it wrap and hold the client's input for good).
    lines: VecDeque<Outgoing>,
    /// The bytes of `lines` (shared with [`Shared::waiting`]).
    waiting: Arc<AtomicUsize>,
    pub(super) closed: bool,
    /// The writer thread is writing a line it took (so nobody else may write now).
    pub(super) busy: bool,
    /// The writer thread sleeps on `queue_changed` (a wake-up is a syscall: only then).
    pub(super) writer_asleep: bool,
    /// A private non-blocking description of the server's stdin (Linux), for writing a line
    /// straight from the loop's thread when nothing waits before it: one thread hop fewer.
    pub(super) direct: Option<OwnedFd>,
    /// Lines the loop's thread forwarded in its current pass, for a server that takes lines
    /// in batches: written in one go when the loop has caught up with its input (or when
    /// they fill [`GATHER_BYTES`]), not one write per message.
    pub(super) gathered: Vec<u8>,
}

/// Gathered lines are written once they reach this size, whatever the loop is doing.
pub(super) const GATHER_BYTES: usize = 16 << 10;

impl Queue {
    /// The lines waiting, in order.
    pub(super) fn lines(&self) -> &VecDeque<Outgoing> {
        &self.lines
    }

    pub(super) fn push_back(&mut self, line: Outgoing) {
        self.waiting.fetch_add(line.bytes.len(), Ordering::Relaxed);
        self.lines.push_back(line);
    }

    pub(super) fn push_front(&mut self, line: Outgoing) {
        self.waiting.fetch_add(line.bytes.len(), Ordering::Relaxed);
        self.lines.push_front(line);
    }

    pub(super) fn insert(&mut self, at: usize, line: Outgoing) {
        self.waiting.fetch_add(line.bytes.len(), Ordering::Relaxed);
        self.lines.insert(at, line);
    }

    pub(super) fn remove(&mut self, at: usize) -> Option<Outgoing> {
        let line = self.lines.remove(at)?;
        self.waiting.fetch_sub(line.bytes.len(), Ordering::Relaxed);
        Some(line)
    }

    pub(super) fn pop_front(&mut self) -> Option<Outgoing> {
        let line = self.lines.pop_front()?;
        self.waiting.fetch_sub(line.bytes.len(), Ordering::Relaxed);
        Some(line)
    }

    /// Keeps, in order and in place, the lines `keep` says to keep (it may change a line's
    /// bytes): one pass, where popping and pushing back every line cost each cancellation
    /// half a millisecond behind a full queue.
    pub(super) fn retain_mut(&mut self, mut keep: impl FnMut(&mut Outgoing) -> bool) {
        let (mut before, mut after) = (0, 0);
        self.lines.retain_mut(|line| {
            before += line.bytes.len();
            let kept = keep(line);
            if kept {
                after += line.bytes.len();
            }
            kept
        });
        self.waiting.fetch_add(after, Ordering::Relaxed);
        self.waiting.fetch_sub(before, Ordering::Relaxed);
    }

    /// The bytes of the lines waiting.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The server's stdin can no longer be written from the loop's thread (it died, or the
    /// client is done): what was gathered goes to the writer thread, in order.
    pub(super) fn lose_direct(&mut self) {
        self.direct = None;
        if !self.gathered.is_empty() {
            let bytes = std::mem::take(&mut self.gathered);
            self.push_front(Outgoing::chunk(bytes, false));
        }
    }
}
