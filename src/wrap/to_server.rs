//! The wrapped server's stdin: lines from the loop's thread (straight into an empty pipe)
//! and from the writer thread (which alone may block on the pipe), as the pacing allows.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::MutexGuard;
use std::thread;
use std::time::{Duration, Instant};

use super::ids::{NUDGE_PREFIX, REPLAY_PREFIX};
use super::pacing::{Mode, MAX_BATCH_BYTES};
use super::shared::{Outgoing, Queue, Shared, GATHER_BYTES, HOLD_BYTES, TICK};
use crate::diagnostics;
use crate::lock::lock;
use crate::message::{Message, RequestId};
use crate::responder::LoopHandle;
use crate::sys;

/// What the writer posts to the loop when the lines waiting fell under the hold.
struct Released;

/// Writes to a pipe up to this size are atomic: a probe's two lines reach the server in one
/// piece.
const PIPE_BUF: usize = 4096;

impl Shared {
    /// Sends one message, as a line, to the server: written at once when nothing waits before
    /// it and the pipe is empty (with pacing), without blocking; queued for the writer
    /// thread otherwise.
    pub(super) fn to_server(&self, message: &Message) {
        self.send(lock(&self.queue), Outgoing::new(message), false);
    }

    /// The queue's lock for forwarding a request, `None` once the wrapper gave up (checked
    /// under it: no request slips past the errors `give_up` sends). The caller files the
    /// request as in flight while it holds it (see [`Shared::pending`]).
    pub(super) fn queue_for_request(&self) -> Option<MutexGuard<'_, Queue>> {
        let queue = lock(&self.queue);
        (!self.gave_up()).then_some(queue)
    }

    /// Sends the client's message to the server: its own line when the loop kept it (the
    /// bytes it sent, not written again), else the message written as a line. Only from the
    /// loop's thread: to a server that takes batches, the line is gathered with the others
    /// of the loop's pass ([`Shared::write_gathered`]). A request comes with the `queue`'s
    /// lock it was filed under ([`Shared::queue_for_request`]).
    pub(super) fn forward(
        &self,
        queue: Option<MutexGuard<'_, Queue>>,
        message: &Message,
        line: Option<Vec<u8>>,
    ) {
        let request = match message {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let queue = queue.unwrap_or_else(|| lock(&self.queue));
        match line {
            Some(line) => self.send(queue, Outgoing::forwarded(line, request), true),
            None => self.send(queue, Outgoing::new(message), true),
        }
    }

    /// Writes the lines the loop's thread gathered (see [`Shared::forward`]).
    pub(super) fn write_gathered(&self) {
        let mut queue = lock(&self.queue);
        if queue.gathered.is_empty() {
            return;
        }
        flush_gathered(&mut queue);
        // The writer thread only for what the pipe did not take.
        if !queue.lines().is_empty() {
            self.wake_writer(queue);
        }
    }

    fn send(&self, mut queue: MutexGuard<'_, Queue>, mut line: Outgoing, may_gather: bool) {
        if self.gave_up() {
            return; // No server will take it (its requests are answered with errors).
        }
        let free =
            queue.lines().is_empty() && !queue.busy && !self.replaying.load(Ordering::Acquire);
        let (batches, probing) =
            if free && (!self.config.pacing || self.proven.load(Ordering::Acquire)) {
                (true, false)
            } else if free {
                let pacing = lock(&self.pacing);
                (
                    !self.config.pacing || pacing.batches_allowed(),
                    pacing.probing(),
                )
            } else {
                (false, false)
            };
        if free && batches && !probing && may_gather && queue.direct.is_some() {
            queue.gathered.extend_from_slice(&line.bytes);
            if queue.gathered.len() >= GATHER_BYTES {
                flush_gathered(&mut queue);
                if !queue.lines().is_empty() {
                    self.wake_writer(queue);
                }
            }
            return;
        }
        // Whatever else goes, goes after what was gathered.
        if !queue.gathered.is_empty() {
            flush_gathered(&mut queue);
        }
        let free = free && queue.lines().is_empty();
        if let (true, false, Some(fd)) = (free, probing, &queue.direct) {
            let fd = fd.as_fd();
            // Straight from the loop into an empty pipe, or into any pipe once the server
            // takes lines in batches: no thread hop. Lines that queue up behind a full pipe
            // go in batches from the writer.
            if batches || sys::pipe_unread(fd).is_ok_and(|n| n == 0) {
                match sys::write(fd, &line.bytes) {
                    Ok(n) if n == line.bytes.len() => return,
                    // The rest goes next, without pacing: it is the same line.
                    Ok(n) => {
                        line.bytes.drain(..n);
                        line.continues = true;
                        line.begun = n > 0;
                        queue.push_back(line);
                    }
                    // Full pipe (or a dying server): the writer thread takes it from here.
                    Err(_) => queue.push_back(line),
                }
                self.wake_writer(queue);
                return;
            }
        }
        queue.push_back(line);
        self.wake_writer(queue);
    }

    /// Whether the server closed its stdin, as the loop's own description of the pipe shows
    /// (Linux, while the server is written to): found without writing to it. Elsewhere only
    /// a failed write tells (the writer's `refused`).
    pub(super) fn stdin_reader_gone(&self) -> bool {
        let queue = lock(&self.queue);
        queue
            .direct
            .as_ref()
            .is_some_and(|fd| sys::pipe_reader_gone(fd.as_fd()))
    }

    /// Releases the queue and wakes the writer if it sleeps.
    fn wake_writer(&self, queue: MutexGuard<'_, Queue>) {
        let asleep = queue.writer_asleep;
        drop(queue);
        if asleep {
            self.queue_changed.notify_all();
        }
    }

    /// The server answered `id`: it may settle the pacing probe.
    pub(super) fn answered(&self, id: &RequestId) {
        if self.proven.load(Ordering::Acquire) {
            return; // nothing left to settle
        }
        let proven = lock(&self.pacing).answered(id);
        if proven {
            self.proven.store(true, Ordering::Release);
            diagnostics::line(&format!(
                "mcpipe wrap: {} handles lines that arrive together; writing them in batches",
                self.config.name
            ));
            self.queue_changed.notify_all();
        }
    }

    /// A probe that ran out of time leaves the server paced; if nothing else is queued, a
    /// ping frees the request it may hold in its buffer.
    pub(super) fn settle_probe(&self) {
        if !lock(&self.pacing).probe_expired(Instant::now()) {
            return;
        }
        let mut queue = lock(&self.queue);
        if queue.lines().is_empty() {
            let id = RequestId::from(format!("{NUDGE_PREFIX}{}", self.starts()));
            queue.push_back(Outgoing::own(&Message::Request(crate::message::Request {
                id,
                method: "ping".to_owned(),
                params: None,
            })));
        }
        drop(queue);
        self.queue_changed.notify_all();
    }
}

/// Writes the gathered lines straight into the pipe (never blocking); what a full pipe does
/// not take goes to the writer thread, next.
fn flush_gathered(queue: &mut Queue) {
    let written = match &queue.direct {
        Some(fd) => sys::write(fd.as_fd(), &queue.gathered).unwrap_or(0),
        None => 0,
    };
    if written == queue.gathered.len() {
        queue.gathered.clear();
        return;
    }
    // Gathered lines are whole: the rest begins mid-line unless the write ended one.
    let begun = written > 0 && queue.gathered[written - 1] != b'\n';
    let rest = queue.gathered.split_off(written);
    queue.gathered.clear();
    queue.push_front(Outgoing::chunk(rest, begun));
}

/// The server's stdin. With pacing, one line at a time (written once the server took the
/// previous one out of the pipe) until the server proves it handles lines that arrive
/// together (see [`super::pacing`]); then, and without pacing, everything queued in one
/// write. Ends when the server is gone or the client is done.
/// The loop is woken (`handle`) when the lines waiting fall under the hold
/// ([`HOLD_BYTES`]); `refused` is set when a write fails (the server closed its stdin, or
/// died: the supervisor tells which).
pub(super) fn write_lines(
    shared: &Shared,
    mut stdin: ChildStdin,
    alive: &AtomicBool,
    refused: &AtomicBool,
    handle: &LoopHandle,
) {
    let mut batch = Vec::new();
    loop {
        batch.clear();
        let mut released = false;
        let taken = {
            let mut queue = lock(&shared.queue);
            loop {
                if !alive.load(Ordering::Acquire) {
                    return;
                }
                let held = queue.waiting() > HOLD_BYTES;
                match take_lines(shared, &mut queue, &mut batch, stdin.as_fd()) {
                    Some(Take::Write(probe)) => {
                        queue.busy = true;
                        released = held && queue.waiting() <= HOLD_BYTES;
                        break Some(probe);
                    }
                    Some(Take::AwaitPipe) => break None,
                    None => {}
                }
                if queue.closed && queue.lines().is_empty() {
                    return; // dropping stdin is the server's end of input
                }
                queue.writer_asleep = true;
                queue = match shared.queue_changed.wait_timeout(queue, TICK * 10) {
                    Ok((q, _)) => q,
                    Err(p) => p.into_inner().0,
                };
                queue.writer_asleep = false;
            }
        };
        if released {
            // The loop holds the client's input until it hears this (`Handler::holds_input`).
            let _ = handle.post(Box::new(Released));
        }
        let Some(probe) = taken else {
            wait_until_taken(&stdin, alive);
            continue;
        };
        if let Some(ids) = probe {
            lock(&shared.pacing).probe_written(ids, Instant::now());
        }
        let written = stdin.write_all(&batch).and_then(|()| stdin.flush());
        lock(&shared.queue).busy = false;
        if written.is_err() {
            // The server is gone, or closed its stdin: either way the supervisor ends it and
            // answers its requests.
            refused.store(true, Ordering::Release);
            return;
        }
        // After a replayed `initialize`, nothing else until the server answered it (the
        // supervisor ends a server that takes longer than the replay timeout from now).
        let mut replay = lock(&shared.replay);
        if let Some(replay) = replay.as_mut() {
            replay.written.get_or_insert_with(Instant::now);
        }
        while replay.is_some() && alive.load(Ordering::Acquire) {
            replay = match shared.replay_done.wait_timeout(replay, TICK * 10) {
                Ok((r, _)) => r,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// What the writer does next.
enum Take {
    /// Write what was moved into the batch (the ids of a probe, when it is one).
    Write(Option<Vec<RequestId>>),
    /// Wait until the server took what its pipe holds: meanwhile the next line stays in the
    /// queue, where a request answered at its deadline, or cancelled by the client, is still
    /// taken back (`Queue::withdraw`).
    AwaitPipe,
}

/// Moves the lines the pacing allows now from the queue into `batch` (a paced line only once
/// the server's pipe, `stdin`, is empty), or `None` when nothing may go yet.
fn take_lines(
    shared: &Shared,
    queue: &mut Queue,
    batch: &mut Vec<u8>,
    stdin: BorrowedFd<'_>,
) -> Option<Take> {
    let first = queue.lines().front()?;
    if first.continues {
        // The rest of a line written in part goes at once.
        batch.extend_from_slice(&queue.pop_front()?.bytes);
        return Some(Take::Write(None));
    }
    let two_requests = queue.lines().len() >= 2
        && queue
            .lines()
            .iter()
            .take(2)
            .all(|l| l.request.is_some() && !l.continues)
        && queue
            .lines()
            .iter()
            .take(2)
            .map(|l| l.bytes.len())
            .sum::<usize>()
            <= PIPE_BUF;
    let mode = if shared.config.pacing {
        lock(&shared.pacing).mode(two_requests)
    } else {
        Mode::Batch
    };
    // An error (a server gone) lets the write tell.
    let paced = || sys::pipe_unread(stdin).map_or(true, |n| n == 0);
    match mode {
        Mode::Hold => None,
        Mode::Single | Mode::Probe if !paced() => Some(Take::AwaitPipe),
        Mode::Single => {
            batch.extend_from_slice(&queue.pop_front()?.bytes);
            Some(Take::Write(None))
        }
        Mode::Probe => {
            let mut ids = Vec::new();
            for _ in 0..2 {
                let line = queue.pop_front()?;
                ids.extend(line.request);
                batch.extend_from_slice(&line.bytes);
            }
            Some(Take::Write(Some(ids)))
        }
        Mode::Batch => {
            while let Some(line) = queue.lines().front() {
                if !batch.is_empty() && batch.len() + line.bytes.len() > MAX_BATCH_BYTES {
                    break;
                }
                let replay = line.own
                    && line
                        .request
                        .as_ref()
                        .and_then(RequestId::as_str)
                        .is_some_and(|id| id.starts_with(REPLAY_PREFIX));
                batch.extend_from_slice(&queue.pop_front()?.bytes);
                if replay {
                    break; // nothing else until the server answered it
                }
            }
            Some(Take::Write(None))
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

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::fd::OwnedFd;

    use super::*;
    use crate::message::{Notification, Request};
    use crate::wrap::Wrapper;

    fn request(id: i64) -> Message {
        Message::Request(Request {
            id: RequestId::from(id),
            method: "ping".to_owned(),
            params: None,
        })
    }

    #[test]
    fn lines_forwarded_in_one_pass_reach_a_batching_server_in_one_write_and_in_order() {
        let shared = Shared::new(Wrapper::new("unused", ["x"]).pacing(false));
        let (mut reader, writer) = std::io::pipe().unwrap();
        lock(&shared.queue).direct = Some(OwnedFd::from(writer));
        let unread = |r: &std::io::PipeReader| sys::pipe_unread(r.as_fd()).unwrap();
        shared.forward(None, &request(1), Some(b"{\"one\":1}".to_vec()));
        shared.forward(None, &request(2), None);
        assert_eq!(unread(&reader), 0, "gathered, not written yet");
        shared.write_gathered();
        // A message from another thread goes after what was gathered, and at once.
        shared.forward(None, &request(3), None);
        shared.to_server(&Message::Notification(Notification {
            method: "n".to_owned(),
            params: None,
        }));
        let want = [
            b"{\"one\":1}\n".to_vec(),
            request(2).to_line(),
            request(3).to_line(),
            b"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n".to_vec(),
        ]
        .concat();
        assert_eq!(unread(&reader), want.len());
        let mut got = vec![0; want.len()];
        reader.read_exact(&mut got).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
        // Enough of them are written without waiting for the end of the pass.
        let big = vec![b' '; GATHER_BYTES];
        shared.forward(None, &request(4), Some(big));
        assert_eq!(unread(&reader), GATHER_BYTES + 1);
        assert!(lock(&shared.queue).lines().is_empty());
    }

    #[test]
    fn the_bytes_waiting_are_counted_through_every_change_of_the_queue() {
        use std::sync::atomic::Ordering::Relaxed;
        // No private description of the server's stdin: every line waits for the writer.
        let shared = Shared::new(Wrapper::new("unused", ["x"]));
        shared.to_server(&request(1));
        shared.to_server(&request(2));
        let len = request(1).to_line().len();
        assert_eq!(shared.waiting.load(Relaxed), 2 * len);
        {
            let mut queue = lock(&shared.queue);
            queue.push_front(Outgoing::new(&request(3)));
            queue.insert(1, Outgoing::new(&request(4)));
            assert_eq!(queue.waiting(), 4 * len);
            while queue.pop_front().is_some() {}
            assert_eq!(queue.waiting(), 0);
        }
        // The ping that frees a held request after a probe ran out of time is counted too.
        let long_ago = Instant::now() - super::super::pacing::PROBE_WAIT;
        lock(&shared.pacing).probe_written(vec![RequestId::from(9)], long_ago);
        shared.settle_probe();
        let queue = lock(&shared.queue);
        let ping = queue.lines().front().expect("a ping").bytes.len();
        assert_eq!(queue.waiting(), ping);
    }
}
