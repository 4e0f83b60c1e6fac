//! The wrapped server process and its supervisor: spawn, its stdin (a paced writer), its
//! stderr (a forwarder that never blocks it), request deadlines, restarts after a crash with
//! the client's own handshake, and the end.
//!
//! The server's stdout is read by the loop's own thread ([`super::from_server`], a watched fd),
//! so an answer reaches the client without a thread hop. A line for the server goes straight
//! from the loop's thread when the pipe is empty and nothing waits before it; otherwise the
//! writer thread, which alone may block on the pipe, sends it as the pacing allows
//! ([`super::pacing`]).

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::json;

use super::from_server::ServerOutput;
use super::ids::{self, RELIST_PREFIX, REPLAY_PREFIX};
use super::shared::{
    Outgoing, Pending, Replay, Shared, Stop, KILL_AFTER_TERM, STOPPING_TICK, TICK,
};
use super::to_server;
use crate::diagnostics;
use crate::id_map::IdSet;
use crate::line_buffer::{Line, LineBuffer};
use crate::lock::lock;
use crate::message::{ErrorCode, ErrorObject, Message, RequestId};
use crate::process_tree::ProcessTree;
use crate::responder::LoopHandle;
use crate::sys;

/// How long the supervisor waits, after the server's tree is gone, for the loop to have read
/// the last of its stdout.
const STDOUT_END_WAIT: Duration = Duration::from_secs(2);

/// How long a server whose stdout ended, or that closed its stdin, may take to exit by
/// itself before the wrapper ends it: a process that exits closes its pipes a moment before
/// its exit can be waited for, and an exit is reported as what it is.
const EXIT_WAIT: Duration = Duration::from_millis(250);

/// The first pause before a restart; it doubles up to [`MAX_BACKOFF`], and comes back after
/// a server that ran for a whole restart window.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The capacity asked for the server's stdin pipe (Linux allows an unprivileged process up to
/// 1 MiB by default).
const PIPE_CAPACITY: usize = 1 << 20;

/// The longest line of the server's stderr forwarded (the client keeps as much of a server's
/// stderr); a longer one is dropped with a notice.
const STDERR_LINE_BYTES: usize = 64 * 1024;

/// The most of the server's last stderr line kept for the error the wrapper gives up with.
pub(super) const STDERR_TOLD: usize = 1000;

/// Starts the supervisor, which spawns the server and keeps it running until asked to stop.
///
/// # Errors
///
/// When the thread cannot start (a thread or process limit).
pub(super) fn supervise(shared: Arc<Shared>, handle: LoopHandle) -> io::Result<JoinHandle<()>> {
    thread_named("mcpipe-wrap-supervisor", move || {
        let mut starts: VecDeque<Instant> = VecDeque::new();
        let mut backoff = FIRST_BACKOFF;
        // How the last life ended, for the reason the wrapper gives up with.
        let mut last_end: Option<String> = None;
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
                    let ended = starts.len() - 1;
                    let within = spoken(now.duration_since(starts[0]));
                    let max = shared.config.max_restarts;
                    let window = spoken(shared.config.restart_window);
                    let allowed = if max == 1 {
                        "1 restart is".to_owned()
                    } else {
                        format!("{max} restarts are")
                    };
                    let why = format!(
                        "it ended {ended} times within {within} (at most {allowed} allowed \
                         within {window})"
                    );
                    give_up(&shared, &why, last_end.as_deref());
                }
                return;
            }
            let Life {
                status,
                retired,
                client_init_kept,
            } = match run_once(&shared, &handle) {
                Ok(life) => life,
                Err(e) => {
                    let why = format!("it could not be started: {e}");
                    give_up(&shared, &why, last_end.as_deref());
                    return;
                }
            };
            *lock(&shared.last_exit) = Some(status);
            last_end = Some(match &retired {
                Some(said) => format!("it {said}, and was ended ({status})"),
                None => format!("it exited ({status})"),
            });
            let retired = retired.is_some();
            let name = &shared.config.name;
            let error = ErrorObject::internal(format!(
                "internal error: the wrapped server {name} exited ({status}) before answering"
            ))
            .with_data(json!({ "exitCode": status.code(), "signal": signal_of(status) }));
            if shared.stopping().is_some() {
                shared.fail_pending(&error); // no next server
                return;
            }
            // A retired server's requests were answered when it was retired: those in flight
            // now came later, wait in the queue, and go to the next server.
            let client_init_kept = if retired {
                client_init_kept
            } else {
                shared.end_life(&error)
            };
            diagnostics::line(&format!(
                "mcpipe wrap: {name} exited ({status}); restarting"
            ));
            // A server that ran for a whole restart window was no crash loop: its restart
            // pauses as little as the first one, however long the pause had grown before.
            if now.elapsed() >= shared.config.restart_window {
                backoff = FIRST_BACKOFF;
            }
            thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
            queue_replay(&shared, client_init_kept);
        }
    })
}

fn signal_of(status: ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(&status)
}

/// From now on every request is answered with an error (the relay checks `gave_up`) that says
/// why: `why`, how the last life ended (`last_end`, when one did), and the server's last line
/// on stderr, often the cause ("missing API key"), with the same in `data`.
pub(super) fn give_up(shared: &Shared, why: &str, last_end: Option<&str>) {
    let name = &shared.config.name;
    let mut told = why.to_owned();
    if let Some(last_end) = last_end {
        told.push_str(&format!("; the last time, {last_end}"));
    }
    let stderr_last = lock(&shared.stderr_last).clone();
    if let Some(line) = &stderr_last {
        told.push_str(&format!("; its last line on stderr: {line}"));
    }
    let status = *lock(&shared.last_exit);
    let error = ErrorObject::internal(format!(
        "internal error: the wrapped server {name} is not running: {told}"
    ))
    .with_data(json!({
        "exitCode": status.and_then(|s| s.code()),
        "signal": status.and_then(signal_of),
        "starts": shared.starts(),
        "stderr": stderr_last,
    }));
    *lock(&shared.gave_up_error) = Some(error.clone());
    // Under the queue's lock: a request is either filed before (and failed below) or answered
    // by `send` itself.
    let queue = lock(&shared.queue);
    shared.gave_up.store(true, Ordering::Release);
    drop(queue);
    diagnostics::line(&format!("mcpipe wrap: giving up on {name}: {told}"));
    shared.fail_pending(&error);
}

/// Puts the client's handshake in front of whatever waits for a restarted server (unless the
/// client's own `initialize` waits there: it goes as it is).
fn queue_replay(shared: &Shared, client_init_kept: bool) {
    let params = lock(&shared.init).clone().filter(|_| !client_init_kept);
    let Some(params) = params else {
        shared.replay_answered(); // nothing to wait for
        return;
    };
    let id = RequestId::from(format!("{REPLAY_PREFIX}{}", shared.starts()));
    let mut queue = lock(&shared.queue);
    if shared.initialized.load(Ordering::Acquire) {
        // Exactly one: the client's own when it still waits here (it reached no server; the
        // flag is set under the queue's lock with its line queued), else one written anew.
        let line = queue.take_client_initialized().unwrap_or_else(|| {
            Outgoing::own(&Message::Notification(crate::message::Notification {
                method: "notifications/initialized".to_owned(),
                params: None,
            }))
        });
        queue.push_front(line);
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
        queue.insert(at, Outgoing::own(&relist));
    }
    queue.push_front(Outgoing::own(&init));
    *lock(&shared.replay) = Some(Replay { id, written: None });
    shared.replaying.store(true, Ordering::Release);
}

/// How one life of the server ended.
struct Life {
    status: ExitStatus,
    /// The wrapper ended it because it could answer nothing more ([`retire`]): what it did
    /// ("closed its stdout but still ran").
    retired: Option<String>,
    /// When retired: the client's own `initialize` waits for the next server.
    client_init_kept: bool,
}

/// One life of the server: spawn it, serve its pipes, watch deadlines, the stop request and
/// its pipes, and return how it ended once it is gone (with every descendant it left).
fn run_once(shared: &Arc<Shared>, handle: &LoopHandle) -> std::io::Result<Life> {
    let config = &shared.config;
    let mut command = Command::new(&config.program);
    command
        .args(&config.args)
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| crate::child::spawn_error(&command, e))?;
    shared.starts.fetch_add(1, Ordering::AcqRel);
    // A line of an earlier life's says nothing about this one.
    *lock(&shared.stderr_last) = None;
    lock(&shared.pacing).reset();
    shared.proven.store(false, Ordering::Release);
    let pid = child.id();
    let pgid = libc::pid_t::try_from(pid).unwrap_or(0);
    let mut tree = ProcessTree::new(pid);
    let life = shared.starts();
    let alive = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(AtomicBool::new(false));
    let threads = match start_pipes(shared, handle, &mut child, &alive, &refused) {
        Ok(threads) => threads,
        Err((threads, e)) => {
            // Nothing serves its pipes: end it, and what it started, before saying why.
            let _ = sys::signal_group(pgid, libc::SIGKILL);
            tree.scan();
            tree.kill_all();
            let _ = child.wait();
            for thread in threads {
                let _ = thread.join();
            }
            return Err(e);
        }
    };
    let mut signalled = (false, false);
    // When a lost pipe was first seen, and how the wrapper ends the server once it retired it.
    let mut lost: Option<Instant> = None;
    let mut retired: Option<(Stop, String)> = None;
    let mut client_init_kept = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        tree.scan_if_due();
        expire_deadlines(shared);
        shared.settle_probe();
        if retired.is_none() && shared.stopping().is_none() {
            let why = if let Some(pipe) = lost_pipe(shared, life, &refused) {
                let since = *lost.get_or_insert_with(Instant::now);
                (since.elapsed() >= EXIT_WAIT).then_some(Retirement::Lost(pipe))
            } else {
                replay_overdue(shared).then_some(Retirement::SilentReplay)
            };
            if let Some(why) = why {
                let (stop, said, kept) = retire(shared, &alive, why);
                retired = Some((stop, said));
                client_init_kept = kept;
            }
        }
        let retiring = retired.as_ref().map(|(stop, _)| *stop);
        for stop in [shared.stopping(), retiring].into_iter().flatten() {
            let since = stop.asked.elapsed();
            if since >= stop.term_after && !signalled.0 {
                signalled.0 = true;
                let _ = sys::terminate_group(pgid);
            }
            if since >= stop.kill_after && !signalled.1 {
                signalled.1 = true;
                let _ = sys::signal_group(pgid, libc::SIGKILL);
                tree.kill_all();
            }
        }
        // Until the next look, or at once when the end is asked for.
        let stop = lock(&shared.stop);
        let tick = if stop.is_some() { STOPPING_TICK } else { TICK };
        drop(shared.stop_asked.wait_timeout(stop, tick));
    };
    alive.store(false, Ordering::Release);
    lock(&shared.queue).lose_direct();
    shared.queue_changed.notify_all();
    // What the server left running: its group, and whatever left the group. (The server is
    // reaped: its pid may be another process's now, so the tree no longer starts from it.)
    let _ = sys::signal_group(pgid, libc::SIGKILL);
    tree.forget_root();
    tree.scan();
    tree.kill_all();
    // Its last answers are still in the pipe: the loop routes them before anything in flight
    // is failed (the pipe ends once every process that held it is gone).
    shared.await_stdout_end(STDOUT_END_WAIT);
    for thread in threads {
        let _ = thread.join();
    }
    Ok(Life {
        status,
        retired: retired.map(|(_, said)| said),
        client_init_kept,
    })
}

/// Which of its pipes the server lost while it still runs, if one: its stdout ended (the
/// loop read its end) or it closed its stdin (the pipe has no reader, or refused a line).
/// Either way it can answer nothing more.
fn lost_pipe(shared: &Shared, life: u32, refused: &AtomicBool) -> Option<&'static str> {
    if *lock(&shared.stdout_open) != Some(life) {
        Some("stdout")
    } else if refused.load(Ordering::Acquire) || shared.stdin_reader_gone() {
        Some("stdin")
    } else {
        None
    }
}

/// Whether the running server has had the replayed `initialize` for the replay timeout
/// ([`Wrapper::replay_timeout`](super::Wrapper::replay_timeout)) without
/// answering it (nothing else is written to it meanwhile: without an end, every later line
/// would wait).
fn replay_overdue(shared: &Shared) -> bool {
    lock(&shared.replay)
        .as_ref()
        .and_then(|r| r.written)
        .is_some_and(|t| t.elapsed() >= shared.config.replay_timeout)
}

/// Why the wrapper gives up on a server that still runs.
#[derive(Debug, Clone, Copy)]
enum Retirement {
    /// It closed this pipe: it can answer nothing more.
    Lost(&'static str),
    /// It never answered the replayed `initialize`.
    SilentReplay,
}

/// Gives up on a server that still runs but can answer nothing more (`why`): it could hold
/// its requests for as long as the client stays. Nothing more is written to it (what waits
/// goes to the next server), its requests in flight are answered with an error now, and it is
/// ended as a stubborn server is at the end (stdin closed and SIGTERM now, SIGKILL
/// [`KILL_AFTER_TERM`] later); its exit is then a crash's (a restart, within the same budget).
/// Returns how it ends, what it did, and whether the client's own `initialize` waits for the
/// next server.
fn retire(shared: &Shared, alive: &AtomicBool, why: Retirement) -> (Stop, String, bool) {
    let name = &shared.config.name;
    // What it did: the cause of its end, for later.
    let (did, error) = match why {
        Retirement::Lost(pipe) => (
            format!("closed its {pipe} but still ran"),
            ErrorObject::internal(format!(
                "internal error: the wrapped server {name} closed its {pipe} before answering"
            ))
            .with_data(json!({ "exitCode": null, "signal": null, "closed": pipe })),
        ),
        Retirement::SilentReplay => (
            format!(
                "did not answer the replayed initialize within {}",
                spoken(shared.config.replay_timeout)
            ),
            ErrorObject::internal(format!(
                "internal error: the wrapped server {name} did not answer the replayed \
                 initialize"
            ))
            .with_data(json!({ "exitCode": null, "signal": null })),
        ),
    };
    let said = match why {
        Retirement::Lost(pipe) => {
            format!("closed its {pipe} but still runs: it can answer nothing more")
        }
        Retirement::SilentReplay => did.clone(),
    };
    diagnostics::line(&format!("mcpipe wrap: {name} {said}; ending it"));
    let mut queue = lock(&shared.queue);
    // Under the queue's lock: from here the writer takes no line for this server (it checks
    // `alive` under the lock), and the loop's thread writes none (no `direct`).
    alive.store(false, Ordering::Release);
    queue.lose_direct();
    drop(queue);
    shared.queue_changed.notify_all();
    let client_init_kept = shared.end_life(&error);
    let stop = Stop {
        asked: Instant::now(),
        term_after: Duration::ZERO,
        kill_after: KILL_AFTER_TERM,
    };
    (stop, did, client_init_kept)
}

/// A duration as the wrapper's lines say it: whole seconds in seconds ("10 s"), else in
/// milliseconds ("400 ms").
fn spoken(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

/// The threads started for the server's pipes; or the error that stopped one, with those
/// already running.
type Started = Result<Vec<JoinHandle<()>>, (Vec<JoinHandle<()>>, io::Error)>;

/// Starts the threads that serve the server's stderr and stdin, then hands its stdout to the
/// loop. A thread that cannot start (a thread or process limit) fails the start: the error
/// comes back with the threads already running, which end once the server is gone.
fn start_pipes(
    shared: &Arc<Shared>,
    handle: &LoopHandle,
    child: &mut Child,
    alive: &Arc<AtomicBool>,
    refused: &Arc<AtomicBool>,
) -> Started {
    let mut threads = Vec::new();
    if let Some(mut stderr) = child.stderr.take() {
        // First: it ends by itself at the end of the pipe, once the server is gone.
        let shared = Arc::clone(shared);
        match thread_named("mcpipe-wrap-stderr", move || {
            forward_stderr(&shared, &mut stderr)
        }) {
            Ok(thread) => threads.push(thread),
            Err(e) => return Err((threads, thread_error("its stderr", e))),
        }
    }
    if let Some(stdin) = child.stdin.take() {
        // Room for many passes of the loop's lines: a full pipe hands them to the writer
        // thread, a hop per pass (best effort: the default 64 KiB otherwise).
        let _ = sys::set_pipe_capacity(stdin.as_fd(), PIPE_CAPACITY);
        // Not on Linux, or not a pipe we can reopen: every line goes through the writer.
        lock(&shared.queue).direct = sys::reopen_nonblocking(stdin.as_fd(), true).ok();
        let (shared, handle) = (Arc::clone(shared), handle.clone());
        let (alive, refused) = (Arc::clone(alive), Arc::clone(refused));
        let queue = Arc::clone(&shared);
        match thread_named("mcpipe-wrap-stdin", move || {
            to_server::write_lines(&shared, stdin, &alive, &refused, &handle)
        }) {
            Ok(thread) => threads.push(thread),
            Err(e) => {
                lock(&queue.queue).lose_direct();
                return Err((threads, thread_error("its stdin", e)));
            }
        }
    }
    if let Some(stdout) = child.stdout.take() {
        // Read by the loop's own thread (a watched fd): no hop between an answer and the client.
        let life = shared.starts();
        match ServerOutput::new(life, stdout) {
            Ok(upstream) => {
                *lock(&shared.stdout_open) = Some(life);
                if handle.post(Box::new(upstream)).is_err() {
                    // The loop has ended: the pipe closed with the post; nobody reads it.
                    shared.stdout_closed(life);
                }
            }
            Err(e) => diagnostics::line(&format!(
                "mcpipe wrap: cannot read the stdout of {}: {e}",
                shared.config.name
            )),
        }
    }
    Ok(threads)
}

/// A thread with a name, or the error that it could not start (`std::thread::spawn` would
/// panic instead).
fn thread_named(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    thread::Builder::new().name(name.to_owned()).spawn(f)
}

fn thread_error(pipe: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("no thread could be started for {pipe}: {e}"),
    )
}

/// Answers overdue requests with an error. One whose line still waits for the server's stdin
/// is taken out of the queue (the server never sees it, nor a cancellation); the server gets
/// `notifications/cancelled` for each of the others.
fn expire_deadlines(shared: &Shared) {
    let Some(timeout) = shared.config.request_timeout else {
        return; // no deadlines
    };
    let now = Instant::now();
    let due = |p: &Pending| p.deadline.is_some_and(|d| now >= d);
    if !lock(&shared.pending).values().any(due) {
        return; // the usual look: no lock of the queue
    }
    let (overdue, withdrawn) = {
        // Queue first, as `send` files a request with its line: a request's line is either
        // still queued here, or the writer took it.
        let mut queue = lock(&shared.queue);
        let overdue: Vec<(RequestId, Pending)> = {
            let mut pending = lock(&shared.pending);
            let ids: Vec<RequestId> = pending
                .iter()
                .filter(|(_, p)| due(p))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| pending.remove(&id).map(|p| (id, p)))
                .collect()
        };
        let sent: IdSet = overdue
            .iter()
            .map(|(id, _)| ids::sent(id).into_owned())
            .collect();
        (overdue, queue.withdraw(&sent))
    };
    for (id, p) in overdue {
        // The cancellation first: whatever the client sends once it has the error reaches the
        // server after it.
        let sent = ids::sent(&id);
        if !withdrawn.contains(sent.as_ref()) {
            shared.give_up(id.clone());
            shared.to_server(&Message::Notification(crate::message::Notification {
                method: "notifications/cancelled".to_owned(),
                params: Some(json!({ "requestId": sent.to_value(), "reason": "timeout" })),
            }));
        }
        // An event after which the loop asks again whether it holds the client's input
        // (`Handler::holds_input`): lines taken back may have ended the hold.
        p.responder.respond(Err(ErrorObject::internal(format!(
            "internal error: the wrapped server did not answer {} within {} ms",
            p.method,
            timeout.as_millis()
        ))));
    }
}

/// The server's stderr, line by line, to ours under its name: read as fast as it comes, so the
/// server never blocks on it, and written without blocking (dropped and counted if ours is
/// full). A line is kept until its newline up to `STDERR_LINE_BYTES` only: past that it is
/// dropped with a notice (else a server writing without newlines grows the wrapper without
/// limit). A blocking read: this thread is for this one pipe. The last line that is not blank
/// is kept (its start) for the error the wrapper may give up with.
fn forward_stderr(shared: &Shared, stderr: &mut impl Read) {
    let name = &shared.config.name;
    let mut lines = LineBuffer::new(STDERR_LINE_BYTES);
    let forward = |line: Line<'_>| match line {
        Line::Complete(line) => {
            let text = String::from_utf8_lossy(line);
            diagnostics::line(&format!("{name}: {text}"));
            let text = text.trim();
            if !text.is_empty() {
                let mut end = text.len().min(STDERR_TOLD);
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                *lock(&shared.stderr_last) = Some(text[..end].to_owned());
            }
        }
        Line::Oversize => diagnostics::line(&format!(
            "{name}: (a stderr line over {STDERR_LINE_BYTES} bytes, dropped)"
        )),
    };
    loop {
        match stderr.read(lines.spare()) {
            Ok(0) => break,
            Ok(n) => lines.commit(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        while let Some(line) = lines.next_line() {
            forward(line);
        }
    }
    while let Some(line) = lines.finish() {
        forward(line);
    }
}

/// The error a request gets once the wrapper gave up on the server: the one it gave up with,
/// which says why.
pub(super) fn not_running(shared: &Shared) -> ErrorObject {
    lock(&shared.gave_up_error).clone().unwrap_or_else(|| {
        // Not reached: the error is kept before `gave_up` is set.
        ErrorObject::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "internal error: the wrapped server {} is not running",
                shared.config.name
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Notification, Request};
    use crate::wrap::Wrapper;

    fn texts(shared: &Shared) -> Vec<String> {
        let queue = lock(&shared.queue);
        let lines = queue.lines().iter();
        lines
            .map(|l| String::from_utf8_lossy(&l.bytes).into_owned())
            .collect()
    }

    #[test]
    fn a_restarted_server_gets_notifications_initialized_exactly_once() {
        let shared = Shared::new(Wrapper::new("unused", ["x"]));
        *lock(&shared.init) = Some(json!({ "protocolVersion": "2025-11-25" }));
        shared.initialized.store(true, Ordering::Release);
        shared.starts.store(1, Ordering::Release);
        // The client's notification, spelled its own way, still waits (kept for this server),
        // behind a request of its own.
        let call = Message::Request(Request {
            id: RequestId::from(5),
            method: "tools/call".to_owned(),
            params: None,
        });
        let initialized = br#"{ "method": "notifications/initialized", "jsonrpc": "2.0" }"#;
        {
            let mut queue = lock(&shared.queue);
            queue.push_back(Outgoing::new(&call));
            queue.push_back(Outgoing::forwarded(initialized.to_vec(), None));
        }
        queue_replay(&shared, false);
        let got = texts(&shared);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].contains("mcpipe-wrap-replay-1"), "{got:?}");
        let client = format!("{}\n", String::from_utf8_lossy(initialized));
        assert_eq!(
            got[1], client,
            "the client's own, in place of one written anew"
        );
        assert_eq!(got[2], String::from_utf8(call.to_line()).unwrap());
        // It reached the last server (not queued): one written anew, in the same place.
        shared.replay_answered();
        while lock(&shared.queue).pop_front().is_some() {}
        lock(&shared.queue).push_back(Outgoing::new(&call));
        queue_replay(&shared, false);
        let got = texts(&shared);
        let own = Message::Notification(Notification {
            method: "notifications/initialized".to_owned(),
            params: None,
        });
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[1], String::from_utf8(own.to_line()).unwrap());
        let replays = got.iter().filter(|l| l.contains("initialized")).count();
        assert_eq!(replays, 1, "{got:?}");
    }
}
