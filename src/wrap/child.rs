//! The wrapped server process and its supervisor: spawn, the three pipes (a paced writer, a
//! line reader that routes what the server says, a stderr forwarder that never blocks it),
//! request deadlines, restarts after a crash with the client's own handshake, and the end.
//!
//! Each pipe has a thread of its own that blocks only on that pipe, so nothing here can hold
//! up the loop: the loop hands lines over through a queue and gets answers back through
//! responders and its [`LoopHandle`].

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::Wrapper;
use crate::diagnostics;
use crate::message::{ErrorCode, ErrorObject, Message, RequestId, Response};
use crate::process_tree::ProcessTree;
use crate::responder::{LoopHandle, Responder};
use crate::sys;

/// The id prefix of the `initialize` the wrapper replays to a restarted server.
const REPLAY_PREFIX: &str = "mcpipe-wrap-replay-";

/// The id prefix of the list requests the wrapper sends a restarted server, to compare its
/// lists with what the client saw.
const RELIST_PREFIX: &str = "mcpipe-wrap-relist-";

/// The list methods whose first page the wrapper remembers, and the notification that says
/// each changed.
const LISTS: [(&str, &str); 3] = [
    ("tools/list", "notifications/tools/list_changed"),
    ("prompts/list", "notifications/prompts/list_changed"),
    ("resources/list", "notifications/resources/list_changed"),
];

/// How long a replayed `initialize` may take before the queued messages go anyway.
const REPLAY_WAIT: Duration = Duration::from_secs(10);

/// How often the supervisor looks at the server, the deadlines and a stop request.
const TICK: Duration = Duration::from_millis(5);

/// The first pause before a restart; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind: go on with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A request of the client's that the server has not answered yet.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) responder: Responder,
    pub(super) method: String,
    pub(super) deadline: Option<Instant>,
    /// A list request for the first page (no cursor): its result is remembered.
    pub(super) first_page: bool,
}

/// Lines for the server's stdin, in order (each with whether it continues a line written in
/// part), `closed` once the client is done.
#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<(Vec<u8>, bool)>,
    closed: bool,
    /// The writer thread is writing a line it took (so nobody else may write now).
    busy: bool,
    /// A private non-blocking description of the server's stdin (Linux), for writing a line
    /// straight from the loop's thread when nothing waits before it: one thread hop fewer.
    direct: Option<OwnedFd>,
}

/// How the end goes, once asked for.
#[derive(Debug, Clone, Copy)]
struct Stop {
    asked: Instant,
    /// From `asked` to SIGTERM.
    term_after: Duration,
    /// From `asked` to SIGKILL.
    kill_after: Duration,
}

/// What the loop's thread and the supervisor's threads share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) config: Wrapper,
    pub(super) pending: Mutex<HashMap<RequestId, Pending>>,
    queue: Mutex<Queue>,
    queue_changed: Condvar,
    /// The client's `initialize` params, replayed to a restarted server.
    pub(super) init: Mutex<Option<Value>>,
    /// The client sent `notifications/initialized` (replayed too).
    pub(super) initialized: AtomicBool,
    /// The negotiated revision has batches (2025-03-26).
    pub(super) batches: AtomicBool,
    /// The first page of each list the client was given, by list method: after a restart the
    /// server's lists are compared with these.
    lists: Mutex<HashMap<String, Value>>,
    /// The capabilities the server declared to the client (its `initialize` answer): a list
    /// change is announced only where it declared `listChanged`.
    capabilities: Mutex<Value>,
    /// The id of a replayed `initialize` whose answer the writer waits for.
    replay: Mutex<Option<RequestId>>,
    replay_done: Condvar,
    stop: Mutex<Option<Stop>>,
    gave_up: AtomicBool,
    starts: AtomicU32,
    last_exit: Mutex<Option<ExitStatus>>,
}

impl Shared {
    pub(super) fn new(config: Wrapper) -> Shared {
        Shared {
            config,
            pending: Mutex::new(HashMap::new()),
            queue: Mutex::new(Queue::default()),
            queue_changed: Condvar::new(),
            init: Mutex::new(None),
            initialized: AtomicBool::new(false),
            batches: AtomicBool::new(false),
            lists: Mutex::new(HashMap::new()),
            capabilities: Mutex::new(Value::Null),
            replay: Mutex::new(None),
            replay_done: Condvar::new(),
            stop: Mutex::new(None),
            gave_up: AtomicBool::new(false),
            starts: AtomicU32::new(0),
            last_exit: Mutex::new(None),
        }
    }

    /// Sends one message, as a line, to the server: written at once when nothing waits before
    /// it and the pipe is empty (with pacing), without blocking; queued for the writer
    /// thread otherwise.
    pub(super) fn to_server(&self, message: &Message) {
        let line = message.to_line();
        let mut queue = lock(&self.queue);
        let free = queue.lines.is_empty() && !queue.busy && lock(&self.replay).is_none();
        if let (true, Some(fd)) = (free, &queue.direct) {
            let fd = fd.as_fd();
            let empty = !self.config.pacing || sys::pipe_unread(fd).is_ok_and(|n| n == 0);
            if empty {
                match sys::write(fd, &line) {
                    Ok(n) if n == line.len() => return,
                    // The rest goes next, without pacing: it is the same line.
                    Ok(n) => queue.lines.push_back((line[n..].to_vec(), true)),
                    // Full pipe (or a dying server): the writer thread takes it from here.
                    Err(_) => queue.lines.push_back((line, false)),
                }
                drop(queue);
                self.queue_changed.notify_all();
                return;
            }
        }
        queue.lines.push_back((line, false));
        drop(queue);
        self.queue_changed.notify_all();
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

    /// Asks for the end: the server's stdin is closed now; SIGTERM and SIGKILL follow.
    pub(super) fn ask_to_stop(&self, quick: bool) {
        let (term_after, kill_after) = if quick {
            (Duration::ZERO, Duration::from_millis(200))
        } else {
            (
                self.config.grace,
                self.config.grace + Duration::from_secs(1),
            )
        };
        lock(&self.stop).get_or_insert(Stop {
            asked: Instant::now(),
            term_after,
            kill_after,
        });
        let mut queue = lock(&self.queue);
        queue.closed = true;
        // The server's end of input comes once no description of its stdin is left open.
        queue.direct = None;
        drop(queue);
        self.queue_changed.notify_all();
    }

    fn stopping(&self) -> Option<Stop> {
        *lock(&self.stop)
    }

    /// Answers every request in flight with `error`.
    fn fail_pending(&self, error: &ErrorObject) {
        let pending: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in pending {
            p.responder.respond(Err(error.clone()));
        }
    }
}

/// Starts the supervisor, which spawns the server and keeps it running until asked to stop.
pub(super) fn supervise(shared: Arc<Shared>, handle: LoopHandle) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut starts: VecDeque<Instant> = VecDeque::new();
        let mut backoff = FIRST_BACKOFF;
        loop {
            let now = Instant::now();
            starts.push_back(now);
            while starts
                .front()
                .is_some_and(|t| now.duration_since(*t) > shared.config.restart_window)
            {
                starts.pop_front();
            }
            let allowed = shared.config.max_restarts as usize + 1;
            if starts.len() > allowed || shared.stopping().is_some() {
                if shared.stopping().is_none() {
                    give_up(&shared, "it exited too often");
                }
                return;
            }
            let status = match run_once(&shared, &handle) {
                Ok(status) => status,
                Err(e) => {
                    give_up(&shared, &format!("it could not be started: {e}"));
                    return;
                }
            };
            *lock(&shared.last_exit) = Some(status);
            let name = &shared.config.name;
            let error = ErrorObject::internal(format!(
                "internal error: the wrapped server {name} exited ({status}) before answering"
            ))
            .with_data(json!({ "exitCode": status.code(), "signal": signal_of(status) }));
            shared.fail_pending(&error);
            if shared.stopping().is_some() {
                return;
            }
            diagnostics::line(&format!(
                "mcpipe wrap: {name} exited ({status}); restarting"
            ));
            thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
            queue_replay(&shared);
        }
    })
}

fn signal_of(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

/// From now on every request is answered with an error (the relay checks `gave_up`).
fn give_up(shared: &Shared, why: &str) {
    shared.gave_up.store(true, Ordering::Release);
    let name = &shared.config.name;
    diagnostics::line(&format!("mcpipe wrap: giving up on {name}: {why}"));
    let error = ErrorObject::internal(format!(
        "internal error: the wrapped server {name} is not running: {why}"
    ));
    shared.fail_pending(&error);
}

/// Puts the client's handshake in front of whatever waits for a restarted server.
fn queue_replay(shared: &Shared) {
    let Some(params) = lock(&shared.init).clone() else {
        return;
    };
    let id = RequestId::from(format!("{REPLAY_PREFIX}{}", shared.starts()));
    let mut queue = lock(&shared.queue);
    if shared.initialized.load(Ordering::Acquire) {
        let line = Message::Notification(crate::message::Notification {
            method: "notifications/initialized".to_owned(),
            params: None,
        });
        queue.lines.push_front((line.to_line(), false));
    }
    let init = Message::Request(crate::message::Request {
        id: id.clone(),
        method: "initialize".to_owned(),
        params: Some(params),
    });
    // Behind the handshake: the lists the client has seen, to tell it if they changed.
    let seen: Vec<String> = lock(&shared.lists).keys().cloned().collect();
    let at = if shared.initialized.load(Ordering::Acquire) {
        1
    } else {
        0
    };
    for method in seen {
        let relist = Message::Request(crate::message::Request {
            id: RequestId::from(format!("{RELIST_PREFIX}{method}")),
            method,
            params: None,
        });
        queue.lines.insert(at, (relist.to_line(), false));
    }
    queue.lines.push_front((init.to_line(), false));
    *lock(&shared.replay) = Some(id);
}

/// One life of the server: spawn it, serve its pipes, watch deadlines and the stop request,
/// and return its exit status once it is gone (with every descendant it left).
fn run_once(shared: &Arc<Shared>, handle: &LoopHandle) -> std::io::Result<ExitStatus> {
    let config = &shared.config;
    let mut command = Command::new(&config.program);
    command
        .args(&config.args)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn()?;
    shared.starts.fetch_add(1, Ordering::AcqRel);
    let pid = child.id();
    let pgid = libc::pid_t::try_from(pid).unwrap_or(0);
    let mut tree = ProcessTree::new(pid);
    let alive = Arc::new(AtomicBool::new(true));
    let threads = start_pipes(shared, handle, &mut child, &alive);
    let mut signalled = (false, false);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        tree.scan_if_due();
        expire_deadlines(shared);
        if let Some(stop) = shared.stopping() {
            let since = stop.asked.elapsed();
            if since >= stop.term_after && !signalled.0 {
                signalled.0 = true;
                let _ = sys::signal_group(pgid, libc::SIGTERM);
            }
            if since >= stop.kill_after && !signalled.1 {
                signalled.1 = true;
                let _ = sys::signal_group(pgid, libc::SIGKILL);
                tree.kill_all();
            }
        }
        thread::sleep(TICK);
    };
    alive.store(false, Ordering::Release);
    lock(&shared.queue).direct = None;
    shared.queue_changed.notify_all();
    // What the server left running: its group, and whatever left the group.
    let _ = sys::signal_group(pgid, libc::SIGKILL);
    tree.scan();
    tree.kill_all();
    for thread in threads {
        let _ = thread.join();
    }
    Ok(status)
}

fn start_pipes(
    shared: &Arc<Shared>,
    handle: &LoopHandle,
    child: &mut Child,
    alive: &Arc<AtomicBool>,
) -> Vec<JoinHandle<()>> {
    let mut threads = Vec::new();
    if let Some(stdin) = child.stdin.take() {
        // Not on Linux, or not a pipe we can reopen: every line goes through the writer.
        lock(&shared.queue).direct = sys::reopen_nonblocking(stdin.as_fd(), true).ok();
        let (shared, alive) = (Arc::clone(shared), Arc::clone(alive));
        threads.push(thread::spawn(move || write_lines(&shared, stdin, &alive)));
    }
    if let Some(stdout) = child.stdout.take() {
        let (shared, handle) = (Arc::clone(shared), handle.clone());
        threads.push(thread::spawn(move || read_lines(&shared, &handle, stdout)));
    }
    if let Some(mut stderr) = child.stderr.take() {
        let name = shared.config.name.clone();
        threads.push(thread::spawn(move || forward_stderr(&name, &mut stderr)));
    }
    threads
}

/// Answers overdue requests with an error and tells the server they are cancelled.
fn expire_deadlines(shared: &Shared) {
    let now = Instant::now();
    let overdue: Vec<(RequestId, Pending)> = {
        let mut pending = lock(&shared.pending);
        let ids: Vec<RequestId> = pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| now >= d))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter()
            .filter_map(|id| pending.remove(&id).map(|p| (id, p)))
            .collect()
    };
    for (id, p) in overdue {
        let timeout = shared.config.request_timeout.unwrap_or_default();
        p.responder.respond(Err(ErrorObject::internal(format!(
            "internal error: the wrapped server did not answer {} within {} ms",
            p.method,
            timeout.as_millis()
        ))));
        shared.to_server(&Message::Notification(crate::message::Notification {
            method: "notifications/cancelled".to_owned(),
            params: Some(json!({ "requestId": id.to_value(), "reason": "timeout" })),
        }));
    }
}

/// The server's stdin: one line at a time; with pacing, a line is written only once the
/// server took the previous one out of the pipe. Ends when the server is gone or the client is
/// done.
fn write_lines(shared: &Shared, mut stdin: ChildStdin, alive: &AtomicBool) {
    loop {
        let (line, continues) = {
            let mut queue = lock(&shared.queue);
            loop {
                if !alive.load(Ordering::Acquire) {
                    return;
                }
                if let Some(next) = queue.lines.pop_front() {
                    queue.busy = true;
                    break next;
                }
                if queue.closed {
                    return; // dropping stdin is the server's end of input
                }
                queue = match shared.queue_changed.wait_timeout(queue, TICK * 10) {
                    Ok((q, _)) => q,
                    Err(p) => p.into_inner().0,
                };
            }
        };
        if shared.config.pacing && !continues {
            wait_until_taken(&stdin, alive);
        }
        let written = stdin.write_all(&line).and_then(|()| stdin.flush());
        lock(&shared.queue).busy = false;
        if written.is_err() {
            return; // the server is gone; its requests are failed by the supervisor
        }
        // After a replayed `initialize`, nothing else until the server answered it.
        let mut replay = lock(&shared.replay);
        let until = Instant::now() + REPLAY_WAIT;
        while replay.is_some() && alive.load(Ordering::Acquire) && Instant::now() < until {
            replay = match shared.replay_done.wait_timeout(replay, TICK * 10) {
                Ok((r, _)) => r,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// Waits until the pipe to the server is empty: the server read what it was sent (into
/// whatever buffer it has, which is the point: it then holds every message it was sent, and
/// cannot sleep on one while another waits in the pipe). Spins briefly first (a server at work
/// takes a line within microseconds, far below a timer's resolution), then sleeps.
fn wait_until_taken(stdin: &ChildStdin, alive: &AtomicBool) {
    let mut pause = Duration::from_micros(50);
    let mut spins = 0;
    while alive.load(Ordering::Acquire) {
        match sys::pipe_unread(stdin.as_fd()) {
            Ok(0) | Err(_) => return,
            Ok(_) if spins < 200 => {
                spins += 1;
                thread::yield_now();
            }
            Ok(_) => {
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(1));
            }
        }
    }
}

/// The server's stdout, line by line: answers go to the requests' responders, requests and
/// notifications to the client unchanged, anything that is not JSON-RPC to stderr.
fn read_lines(shared: &Shared, handle: &LoopHandle, stdout: impl Read) {
    for_each_line(stdout, |line| {
        if !line.iter().all(u8::is_ascii_whitespace) {
            route(shared, handle, line);
        }
    });
}

/// Calls `f` with each line `input` gives (without its line ending) until end of file or an
/// error. A blocking read: the caller is a thread of its own for this one pipe.
fn for_each_line(input: impl Read, mut f: impl FnMut(&[u8])) {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        f(&line);
    }
}

fn route(shared: &Shared, handle: &LoopHandle, line: &[u8]) {
    match Message::from_slice(line) {
        Ok(Message::Response(response)) => answer(shared, handle, response),
        Ok(message) => {
            let _ = handle.send(message);
        }
        Err(_) => match serde_json::from_slice::<Vec<Value>>(line) {
            // A batch (2025-03-26): each item on its own.
            Ok(items) if !items.is_empty() => {
                for item in items {
                    route(shared, handle, item.to_string().as_bytes());
                }
            }
            _ => {
                let name = &shared.config.name;
                let text = String::from_utf8_lossy(line);
                diagnostics::line(&format!("{name} (stdout, not JSON-RPC): {text}"));
            }
        },
    }
}

fn answer(shared: &Shared, handle: &LoopHandle, response: Response) {
    let name = &shared.config.name;
    let Some(id) = response.id.clone() else {
        diagnostics::line(&format!(
            "{name}: an error response without an id: {:?}",
            response.result.err()
        ));
        return;
    };
    if id.as_str().is_some_and(|s| s.starts_with(REPLAY_PREFIX)) {
        *lock(&shared.replay) = None;
        shared.replay_done.notify_all();
        if let Err(e) = response.result {
            diagnostics::line(&format!("{name}: the replayed initialize failed: {e}"));
        }
        return;
    }
    if let Some(method) = id.as_str().and_then(|s| s.strip_prefix(RELIST_PREFIX)) {
        relisted(shared, handle, method, response.result.ok());
        return;
    }
    let Some(pending) = lock(&shared.pending).remove(&id) else {
        diagnostics::line(&format!(
            "{name}: an answer to no request in flight (id {id})"
        ));
        return;
    };
    if pending.first_page {
        if let Ok(result) = &response.result {
            lock(&shared.lists).insert(pending.method.clone(), result.clone());
        }
    }
    if pending.method == "initialize" {
        if let Ok(result) = &response.result {
            *lock(&shared.capabilities) = result["capabilities"].clone();
        }
        let version = response
            .result
            .as_ref()
            .ok()
            .and_then(|r| r.get("protocolVersion"));
        let batches = version.and_then(Value::as_str) == Some("2025-03-26");
        shared.batches.store(batches, Ordering::Release);
    }
    pending.responder.respond(response.result);
}

/// A restarted server's answer to a list the client had seen: when it differs, the client is
/// told the list changed (and the new one is remembered).
fn relisted(shared: &Shared, handle: &LoopHandle, method: &str, result: Option<Value>) {
    let Some(result) = result else { return };
    let mut lists = lock(&shared.lists);
    let changed = lists.get(method) != Some(&result);
    lists.insert(method.to_owned(), result);
    drop(lists);
    // Only where the server declared it may send the notice (capability discipline).
    let kind = method.trim_end_matches("/list");
    let declared = lock(&shared.capabilities)[kind]["listChanged"] == true;
    if changed && declared {
        if let Some((_, notification)) = LISTS.iter().find(|(m, _)| *m == method) {
            let _ = handle.notify(notification, None);
        }
    }
}

/// Whether `method` is a list whose first page the wrapper remembers.
pub(super) fn is_remembered_list(method: &str) -> bool {
    LISTS.iter().any(|(m, _)| *m == method)
}

/// The server's stderr, line by line, to ours under its name: read as fast as it comes, so the
/// server never blocks on it, and written without blocking (dropped and counted if ours is
/// full).
fn forward_stderr(name: &str, stderr: &mut impl Read) {
    for_each_line(stderr, |line| {
        diagnostics::line(&format!("{name}: {}", String::from_utf8_lossy(line)));
    });
}

/// Ends every process still below this one (the wrapper is a subreaper on Linux, so orphans
/// of the server's tree are its children now) and reaps them.
pub(super) fn end_every_descendant() {
    let mut mine = ProcessTree::new(std::process::id());
    mine.scan();
    mine.kill_all();
    let until = Instant::now() + Duration::from_millis(500);
    loop {
        while sys::reap_any().is_some() {}
        let mut again = ProcessTree::new(std::process::id());
        again.scan();
        if again.is_empty() || Instant::now() >= until {
            return;
        }
        thread::sleep(TICK);
    }
}

/// The error a request gets once the wrapper gave up on the server.
pub(super) fn not_running(shared: &Shared) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::INTERNAL_ERROR,
        format!(
            "internal error: the wrapped server {} is not running (it exited too often, or \
             could not be started)",
            shared.config.name
        ),
    )
}
