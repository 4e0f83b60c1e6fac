//! One spawned server: its pipes, its process group, its stderr tail, and the bounded shutdown
//! sequence. Everything here is non-blocking; the only sleep is [`ServerProcess::wait`].

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::pipe::{Receiver, Sender};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::deadline;
use crate::error::Error;
use crate::line_buffer::{Line, LineBuffer};
use crate::process_tree::ProcessTree;
use crate::readiness::{Fill, Input, Output};
use crate::sys::{self, SignalIgnored};
use crate::write_queue::WriteQueue;

use super::spawner::{self, Lease};

const STDOUT: Token = Token(0);
const STDERR: Token = Token(1);
const STDIN: Token = Token(2);
const EXITED: Token = Token(3);
/// Woken by another thread that has work for the one waiting here (the shared client).
const WAKER: Token = Token(4);

/// How much of the server's stderr is kept for error messages.
pub(crate) const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// Without a pidfd, the child's status is checked this often while waiting.
const EXIT_TICK: Duration = Duration::from_millis(10);

/// With a pidfd, the waiting loops ask the kernel for the server's status (`waitpid`) this often
/// at most, unless the pidfd said it exited: its readiness wakes a loop that sleeps, and this
/// covers a loop kept too busy to sleep.
const EXIT_RECHECK: Duration = Duration::from_millis(1);

/// At most this much is read from one pipe before the caller gets to handle it, so a flooding
/// server cannot keep the client reading forever.
const READ_BUDGET: usize = 1 << 20;

/// After a SIGKILL, how long reaping may take before the client gives up on it (a process in
/// uninterruptible sleep cannot die until the kernel lets it).
const REAP_AFTER_KILL: Duration = Duration::from_millis(500);

/// What to start: the command line and its environment.
#[derive(Debug, Clone)]
pub(crate) struct Spawn {
    pub(crate) program: OsString,
    pub(crate) args: Vec<OsString>,
    /// `None`: inherit the whole environment. `Some(names)`: only these variables.
    pub(crate) env_allowlist: Option<Vec<OsString>>,
    /// Set on top of whatever was inherited or allowed.
    pub(crate) envs: Vec<(OsString, OsString)>,
    pub(crate) cwd: Option<PathBuf>,
}

/// The longest command line a server's label shows; the rest becomes "...".
const LABEL_COMMAND_CHARS: usize = 60;

impl Spawn {
    /// Names the server `pid` started from this command in the client's stderr lines, so that
    /// a host with many clients can tell whose line it is: "server python3 srv.py (pid 42)".
    pub(crate) fn label(&self, pid: u32) -> String {
        let program = std::path::Path::new(&self.program)
            .file_name()
            .unwrap_or(&self.program)
            .to_string_lossy();
        let mut command = program.into_owned();
        for arg in &self.args {
            command.push(' ');
            command.push_str(&arg.to_string_lossy());
        }
        if command.chars().count() > LABEL_COMMAND_CHARS {
            command = command.chars().take(LABEL_COMMAND_CHARS).collect();
            command.push_str("...");
        }
        format!("server {command} (pid {pid})")
    }
}

/// How a server ended when the client shut it down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownStage {
    /// The server had already exited (or was already shut down) before the sequence began.
    AlreadyExited,
    /// It exited after its stdin was closed.
    StdinClosed,
    /// It exited after SIGTERM to its process group.
    Terminated,
    /// It was killed with SIGKILL to its process group.
    Killed,
    /// It was sent SIGKILL but could not be reaped in time (a process stuck in the kernel).
    NotReaped,
}

/// How [`Client::close`](crate::Client::close) ended the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Shutdown {
    /// The server's exit status, when it was reaped.
    pub status: Option<ExitStatus>,
    /// Which step of the sequence ended it.
    pub stage: ShutdownStage,
    /// How long the sequence took.
    pub elapsed: Duration,
}

/// The last bytes of the server's stderr.
#[derive(Debug, Default)]
struct Tail {
    /// Invariant: `buf.len() <= 2 * STDERR_TAIL_BYTES`; the tail is its last
    /// `STDERR_TAIL_BYTES` bytes.
    buf: Vec<u8>,
}

impl Tail {
    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() >= STDERR_TAIL_BYTES {
            self.buf.clear();
            self.buf
                .extend_from_slice(&bytes[bytes.len() - STDERR_TAIL_BYTES..]);
            return;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > 2 * STDERR_TAIL_BYTES {
            self.buf.drain(..self.buf.len() - STDERR_TAIL_BYTES);
        }
    }

    fn text(&self) -> String {
        let start = self.buf.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&self.buf[start..]).into_owned()
    }
}

/// A running (or exited, not yet dropped) server and the non-blocking ends of its pipes.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    /// The server's pid, which is also its process group id.
    pgid: libc::pid_t,
    /// Set once the server has been reaped; the pid is then no longer ours.
    status: Option<ExitStatus>,
    /// Someone else reaped the server (the embedder ignores `SIGCHLD`, or reaps in its own
    /// handler): it is gone, its status unknown.
    reaped_elsewhere: bool,
    /// `SIGKILL` was sent and waited for (bounded) once: a second wait would find no more.
    kill_waited: bool,
    /// The pidfd reported the server's exit (collected by `wait`).
    exit_signalled: bool,
    /// When `exit_seen` last asked the kernel.
    exit_checked: Instant,
    poll: Poll,
    events: Events,
    /// Ends a [`wait`](ServerProcess::wait) early from another thread.
    waker: Arc<Waker>,
    stdin: Option<Sender>,
    stdout: Option<Receiver>,
    stderr: Option<Receiver>,
    /// Readable when the server exits; `None` where pidfds do not exist (then `EXIT_TICK`).
    pidfd: Option<OwnedFd>,
    /// The server's stdout, split into lines.
    lines: LineBuffer,
    /// The server's stderr, split into lines for the stderr callback.
    err_lines: LineBuffer,
    /// Bytes for the server's stdin.
    queue: WriteQueue,
    // Readiness, the same as the server loop's (`readiness`): set by events (or at the
    // start), cleared by `WouldBlock` or by a short read of stdout or stderr, end of file
    // final.
    stdout_ready: Input,
    stderr_ready: Input,
    stdin_ready: Output,
    /// Writing to stdin failed (EPIPE): the server closed it, or died.
    stdin_broken: bool,
    tail: Tail,
    /// When bytes last came from the server's stdout.
    pub(crate) last_inbound: Instant,
    /// Bytes read from stdout and written to stdin.
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    max_message_bytes: usize,
    /// Descendants that may have left the process group: killed at shutdown too.
    tree: ProcessTree,
    _sigpipe: SignalIgnored,
    /// Keeps the thread the server was forked on alive while the server may run; dropped
    /// last, after `Drop` ended the server.
    _spawner: Lease,
}

impl ServerProcess {
    /// Starts the server in its own process group with piped stdio.
    pub(crate) fn spawn(spec: &Spawn, max_message_bytes: usize) -> Result<ServerProcess, Error> {
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(allowed) = &spec.env_allowlist {
            command.env_clear();
            for name in allowed {
                if let Some(value) = std::env::var_os(name) {
                    command.env(name, value);
                }
            }
        }
        for (name, value) in &spec.envs {
            command.env(name, value);
        }
        if let Some(dir) = &spec.cwd {
            command.current_dir(dir);
        }
        sys::kill_child_with_parent(&mut command);
        // SIGPIPE must not kill us when the server closes its stdin while we write to it.
        let sigpipe = SignalIgnored::sigpipe().map_err(|e| Error::io("ignoring SIGPIPE", e))?;
        // Forked on the spawner thread, which outlives the caller's (see `spawner`); the lease
        // is dropped after the child (declared first, it drops last on every path).
        let (mut child, lease) = spawner::spawn(command).map_err(|source| Error::Spawn {
            program: spec.program.to_string_lossy().into_owned(),
            source,
        })?;
        let pgid = child_pgid(&child);
        let stdin = child.stdin.take().map(Sender::from);
        let stdout = child.stdout.take().map(Receiver::from);
        let stderr = child.stderr.take().map(Receiver::from);
        // From here on, an error must not leave the child behind: `Partial` kills it on drop.
        let partial = Partial(Some(child));
        let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) = (stdin, stdout, stderr) else {
            return Err(Error::io(
                "taking the server's pipes",
                io::Error::from(io::ErrorKind::NotFound),
            ));
        };
        let mut setup = || -> io::Result<(Poll, Option<OwnedFd>, Waker)> {
            stdin.set_nonblocking(true)?;
            stdout.set_nonblocking(true)?;
            stderr.set_nonblocking(true)?;
            let poll = Poll::new()?;
            poll.registry()
                .register(&mut stdout, STDOUT, Interest::READABLE)?;
            poll.registry()
                .register(&mut stderr, STDERR, Interest::READABLE)?;
            poll.registry()
                .register(&mut stdin, STDIN, Interest::WRITABLE)?;
            let pidfd = sys::pidfd_open(pgid).ok();
            if let Some(fd) = &pidfd {
                poll.registry().register(
                    &mut SourceFd(&fd.as_raw_fd()),
                    EXITED,
                    Interest::READABLE,
                )?;
            }
            let waker = Waker::new(poll.registry(), WAKER)?;
            Ok((poll, pidfd, waker))
        };
        let (poll, pidfd, waker) =
            setup().map_err(|e| Error::io("setting up the server's pipes", e))?;
        let Some(child) = partial.disarm() else {
            return Err(Error::Closed);
        };
        Ok(ServerProcess {
            child,
            pgid,
            status: None,
            reaped_elsewhere: false,
            kill_waited: false,
            exit_signalled: false,
            exit_checked: Instant::now(),
            poll,
            events: Events::with_capacity(8),
            waker: Arc::new(waker),
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            pidfd,
            lines: LineBuffer::new(max_message_bytes),
            err_lines: LineBuffer::new(STDERR_TAIL_BYTES),
            queue: WriteQueue::new(usize::MAX),
            // A short read stands in for `EAGAIN` on both, as on the server loop's pipe: these
            // read ends are ours alone (made by `Command`, close-on-exec), so a read that
            // returns less than asked emptied the pipe. A server writing packets (`O_DIRECT`
            // on its end) is caught by the confirming read after a quiet wait (`wait`), and a
            // hang-up is remembered from its event. One `read` fewer a round trip
            // (BENCHMARKS.md, "The client under load").
            stdout_ready: Input::new(true),
            stderr_ready: Input::new(true),
            stdin_ready: Output::new(),
            stdin_broken: false,
            tail: Tail::default(),
            last_inbound: Instant::now(),
            bytes_in: 0,
            bytes_out: 0,
            max_message_bytes,
            tree: ProcessTree::new(pgid as u32),
            _sigpipe: sigpipe,
            _spawner: lease,
        })
    }

    /// The server's pid (and process group id).
    pub(crate) fn pid(&self) -> u32 {
        self.pgid as u32
    }

    /// What another thread calls to end this process's [`wait`](ServerProcess::wait) early.
    pub(crate) fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.waker)
    }

    /// Whether the server closed its stdout.
    pub(crate) fn stdout_eof(&self) -> bool {
        self.stdout_ready.is_eof()
    }

    /// Whether writing to the server failed because it no longer reads its stdin.
    pub(crate) fn stdin_broken(&self) -> bool {
        self.stdin_broken
    }

    /// The last 64 KiB of the server's stderr, as text.
    pub(crate) fn stderr_tail(&self) -> String {
        self.tail.text()
    }

    /// The bytes queued for the server, to append whole lines to;
    /// [`flush`](ServerProcess::flush) writes them.
    pub(crate) fn outgoing(&mut self) -> &mut Vec<u8> {
        self.queue.buffer()
    }

    /// Queues raw bytes for the server and writes what the pipe takes now.
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.queue.buffer().extend_from_slice(bytes);
        self.flush();
    }

    /// Writes queued bytes until the pipe would block. A write error means the server no
    /// longer reads: the queue is dropped and the failure remembered.
    pub(crate) fn flush(&mut self) {
        if !self.stdin_ready.writable || self.queue.pending() == 0 {
            return;
        }
        let Some(stdin) = &self.stdin else {
            self.stdin_broken = true;
            return;
        };
        let before = self.queue.pending();
        let result = self
            .stdin_ready
            .flush(&mut self.queue, |bytes| (&*stdin).write(bytes));
        self.bytes_out += (before - self.queue.pending()) as u64;
        match result {
            Ok(()) => {}
            Err(_) => {
                self.stdin_broken = true;
                self.queue = WriteQueue::new(usize::MAX);
            }
        }
    }

    /// Closes the server's stdin (its end-of-input signal). Whatever is still queued is lost.
    pub(crate) fn close_stdin(&mut self) {
        self.stdin = None;
        self.queue = WriteQueue::new(usize::MAX);
    }

    /// Reads what the server's stdout and stderr hold now, without blocking, up to a budget per
    /// pipe. Returns whether anything (bytes or end of file) arrived.
    pub(crate) fn read_available(&mut self, on_stderr: &mut dyn FnMut(&[u8])) -> bool {
        let mut progressed = false;
        let mut budget = READ_BUDGET;
        while self.stdout_ready.ready() && budget > 0 {
            let Some(stdout) = &mut self.stdout else {
                break;
            };
            let spare = self.lines.spare();
            let asked = spare.len();
            match self.stdout_ready.after_read(stdout.read(spare), asked) {
                Ok((Fill::Eof, _)) => progressed = true,
                Ok((Fill::Bytes(n), _)) => {
                    self.lines.commit(n);
                    self.bytes_in += n as u64;
                    self.last_inbound = Instant::now();
                    budget = budget.saturating_sub(n);
                    progressed = true;
                }
                Ok((Fill::WouldBlock, _)) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Any other error leaves the pipe unusable: treat it as closed.
                Err(_) => {
                    self.stdout_ready.set_eof();
                    progressed = true;
                }
            }
        }
        if self.stderr_ready.ready() {
            progressed |= self.read_stderr(on_stderr);
        }
        progressed
    }

    /// Reads what the server's stderr holds now, up to a budget. Called only while the pipe may
    /// hold bytes: its 16 KiB chunk was zeroed at every pass otherwise, twice a round trip
    /// (BENCHMARKS.md, "The client under load").
    fn read_stderr(&mut self, on_stderr: &mut dyn FnMut(&[u8])) -> bool {
        let mut progressed = false;
        let mut budget = READ_BUDGET;
        let mut chunk = [0u8; 16 * 1024];
        while self.stderr_ready.ready() && budget > 0 {
            let Some(stderr) = &mut self.stderr else {
                break;
            };
            match self
                .stderr_ready
                .after_read(stderr.read(&mut chunk), chunk.len())
            {
                Ok((Fill::Eof, _)) => {
                    while let Some(line) = self.err_lines.finish() {
                        if let Line::Complete(line) = line {
                            on_stderr(line);
                        }
                    }
                    progressed = true;
                }
                Ok((Fill::Bytes(n), _)) => {
                    self.tail.push(&chunk[..n]);
                    let mut rest = &chunk[..n];
                    while !rest.is_empty() {
                        let spare = self.err_lines.spare();
                        let take = spare.len().min(rest.len());
                        spare[..take].copy_from_slice(&rest[..take]);
                        self.err_lines.commit(take);
                        rest = &rest[take..];
                        while let Some(line) = self.err_lines.next_line() {
                            if let Line::Complete(line) = line {
                                on_stderr(line);
                            }
                        }
                    }
                    budget = budget.saturating_sub(n);
                    progressed = true;
                }
                Ok((Fill::WouldBlock, _)) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.stderr_ready.set_eof();
                    progressed = true;
                }
            }
        }
        progressed
    }

    /// Makes the next `read_available` try both pipes whatever the last readiness events said:
    /// once the server is gone, what it wrote last must be read even if its readiness event
    /// has not been collected yet (reading a non-blocking pipe is harmless).
    pub(crate) fn assume_readable(&mut self) {
        self.stdout_ready.ready = true;
        self.stderr_ready.ready = true;
    }

    /// Whether a pipe may hold unread bytes (so the caller must read before sleeping).
    pub(crate) fn may_have_input(&self) -> bool {
        self.stdout_ready.ready() || self.stderr_ready.ready()
    }

    /// The next line of the server's stdout (for the session); `None` when more bytes are
    /// needed. At end of file, the last line without a newline counts too.
    pub(crate) fn next_line(&mut self) -> Option<Line<'_>> {
        if self.stdout_ready.is_eof() {
            self.lines.finish()
        } else {
            self.lines.next_line()
        }
    }

    /// The longest line accepted from the server.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
    }

    /// Reaps the server if it has exited; returns its status once it has.
    pub(crate) fn check_exit(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() && !self.reaped_elsewhere {
            match self.child.try_wait() {
                Ok(Some(status)) => self.status = Some(status),
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => self.reaped_elsewhere = true,
                _ => return None,
            }
            // Its pid may be another process's from now on: the tree goes on from the
            // descendants it knows.
            self.tree.forget_root();
            // The pidfd has done its job; a readable pidfd would wake every later poll.
            if let Some(fd) = self.pidfd.take() {
                let _ = self
                    .poll
                    .registry()
                    .deregister(&mut SourceFd(&fd.as_raw_fd()));
            }
        }
        self.status
    }

    /// Whether the server has exited and been reaped, by us (its status is then known) or by
    /// someone else.
    pub(crate) fn has_exited(&mut self) -> bool {
        self.check_exit().is_some() || self.reaped_elsewhere
    }

    /// Whether the server has exited, as the waiting loops ask at every pass. With a pidfd, the
    /// kernel is asked only once the pidfd said so, or `EXIT_RECHECK` after the last time: a
    /// `waitpid` at every pass was three system calls of seven in a round trip (BENCHMARKS.md,
    /// "The client under load"). Without one, at every pass.
    pub(crate) fn exit_seen(&mut self) -> bool {
        if self.status.is_some() || self.reaped_elsewhere {
            return true;
        }
        if self.pidfd.is_some() && !self.exit_signalled {
            let now = Instant::now();
            if now.saturating_duration_since(self.exit_checked) < EXIT_RECHECK {
                return false;
            }
            self.exit_checked = now;
        }
        self.has_exited()
    }

    /// Sleeps until a pipe or the process has news, or `timeout` passes. The caller has
    /// already read everything available (`may_have_input` is false) and handled every line.
    ///
    /// After a short read stood in for `EAGAIN`, the sleep lasts `readiness`'s `CONFIRM_AFTER`
    /// at most and the pipe is read once more after it, so bytes a short read ever left
    /// behind (a server writing packets) are late by milliseconds, never stuck.
    pub(crate) fn wait(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        // Without a pidfd, nothing wakes us when the server exits: look on a short tick.
        let watching_exit = self.status.is_none() && self.pidfd.is_none();
        let timeout = if watching_exit {
            Some(timeout.map_or(EXIT_TICK, |t| t.min(EXIT_TICK)))
        } else {
            timeout
        };
        let timeout = self.stdout_ready.wait_limit(timeout);
        let timeout = self.stderr_ready.wait_limit(timeout);
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("polling the server's pipes", e)),
        }
        let any_event = !self.events.is_empty();
        self.stdout_ready.after_wait(any_event);
        self.stderr_ready.after_wait(any_event);
        for event in self.events.iter() {
            let hup = event.is_read_closed() || event.is_error();
            match event.token() {
                STDOUT => self.stdout_ready.on_event(hup),
                STDERR => self.stderr_ready.on_event(hup),
                // A closed read end also shows up as writable: the next write says EPIPE.
                STDIN => self.stdin_ready.writable = true,
                EXITED => self.exit_signalled = true,
                // WAKER: the caller looks at its own queue after every wait.
                _ => {}
            }
        }
        // With a pidfd, its readiness says when the server exits.
        if self.pidfd.is_none() || self.exit_signalled {
            self.check_exit();
        }
        self.tree.scan_if_due();
        Ok(())
    }

    /// Waits until the server exits or `deadline` passes, reading (and discarding) its stdout
    /// and draining its stderr meanwhile, so a server blocked on a full pipe can still exit.
    fn wait_exit(&mut self, deadline: Instant, on_stderr: &mut dyn FnMut(&[u8])) -> bool {
        loop {
            if self.has_exited() {
                // Its last words, for the stderr tail (bounded by the read budget).
                self.assume_readable();
                self.read_available(on_stderr);
                return true;
            }
            self.read_available(on_stderr);
            while self.next_line().is_some() {}
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if self.may_have_input() {
                continue;
            }
            if self.wait(Some(deadline - now)).is_err() {
                // Polling itself failed: fall back to the tick.
                std::thread::sleep(EXIT_TICK.min(deadline - now));
            }
        }
    }

    /// Ends the server in order: close its stdin (when `close_stdin`), wait `stdin_grace`;
    /// SIGTERM the group, wait `term_grace`; SIGKILL the group and reap. Whatever ended it,
    /// what is left of its process group, and every descendant seen while it lived (also one
    /// that left the group: see `process_tree`), is killed too (no orphans). Never takes much longer
    /// than `stdin_grace + term_grace` (plus a short bound on reaping after SIGKILL).
    pub(crate) fn shut_down(
        &mut self,
        close_stdin: bool,
        stdin_grace: Duration,
        term_grace: Duration,
        on_stderr: &mut dyn FnMut(&[u8]),
    ) -> Shutdown {
        let started = Instant::now();
        self.tree.scan();
        let mut stage = if self.has_exited() {
            ShutdownStage::AlreadyExited
        } else {
            ShutdownStage::StdinClosed
        };
        if stage != ShutdownStage::AlreadyExited {
            if close_stdin {
                // One last chance to write what is queued, without waiting for it.
                self.flush();
                self.close_stdin();
                if !self.wait_exit(deadline::after(started, stdin_grace), on_stderr) {
                    stage = ShutdownStage::Terminated;
                }
            } else {
                stage = ShutdownStage::Terminated;
            }
        }
        if stage == ShutdownStage::Terminated {
            let _ = sys::terminate_group(self.pgid);
            if !self.wait_exit(deadline::from_now(term_grace), on_stderr) {
                stage = ShutdownStage::Killed;
                let _ = sys::signal_group(self.pgid, libc::SIGKILL);
                self.kill_waited = true;
                if !self.wait_exit(Instant::now() + REAP_AFTER_KILL, on_stderr) {
                    stage = ShutdownStage::NotReaped;
                }
            }
        }
        self.kill_leftovers();
        self.tree.kill_all();
        self.close_stdin();
        Shutdown {
            status: self.status,
            stage,
            elapsed: started.elapsed(),
        }
    }

    /// Kills the whole group at once and reaps the server (bounded).
    pub(crate) fn kill(&mut self) {
        self.tree.scan();
        if !self.has_exited() && !self.kill_waited {
            let _ = sys::signal_group(self.pgid, libc::SIGKILL);
            self.kill_waited = true;
            self.wait_exit(Instant::now() + REAP_AFTER_KILL, &mut |_| {});
        }
        self.kill_leftovers();
        self.tree.kill_all();
    }

    /// Once the server is reaped, anything still in its process group (a grandchild it left
    /// behind) is an orphan: kill it. The group id cannot belong to anyone else while a member
    /// lives, and with no member left the signal finds nobody (ESRCH).
    fn kill_leftovers(&mut self) {
        if self.status.is_some() || self.reaped_elsewhere {
            let _ = sys::signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // The client shuts the server down in order before dropping it; this is the safety net
        // for every other path (a failed handshake, a panic): no child outlives its owner.
        self.kill();
    }
}

/// The pid of a spawned child, as the group id it leads.
fn child_pgid(child: &Child) -> libc::pid_t {
    // Pids fit a pid_t: the kernel hands them out as such.
    child.id() as libc::pid_t
}

/// A child that is killed and reaped on drop unless disarmed: covers the steps between spawning
/// and owning it.
struct Partial(Option<Child>);

impl Partial {
    fn disarm(mut self) -> Option<Child> {
        self.0.take()
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = sys::signal_group(child_pgid(child), libc::SIGKILL);
            // SIGKILL was sent, so this wait is short.
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
