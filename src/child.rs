//! Running a command from inside a handler: in a process group of its own, with its output
//! captured up to a bound, while the loop keeps watching for cancellation and shutdown.
//!
//! Whatever way the wait ends (the command exits, its deadline passes, the peer cancels, a
//! signal asks the server to stop, the handler panics), what the command started is gone
//! afterwards: SIGTERM to the whole group and to every descendant seen while the command ran,
//! SIGKILL after a short grace, then the direct child is reaped. A signal to the group alone
//! misses a descendant that left it (`setsid`), so the wait also learns the command's process
//! tree as it goes ([`ProcessTree`]; Linux, about every 10 ms). A process started *and*
//! orphaned between two looks, or any that left the group on a system without `/proc`, is
//! beyond its reach.
//!
//! The embedding program may ignore `SIGCHLD` (or reap children in a handler of its own): the
//! kernel then reaps the command when it exits, and waiting for it fails with `ECHILD`. That
//! means "exited, status unknown", as in the client (`client/process.rs`), not a failure: the
//! output and the cleanup are the same, and [`ChildOutput::status`] is `None`.

use std::io::{self, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mio::unix::pipe::Receiver;
use mio::{Events, Interest, Poll, Token};

use crate::deadline;
use crate::error::Error;
use crate::process_tree::ProcessTree;
use crate::responder::CancelToken;
use crate::sys;

/// Where a running command waits: the loop itself (a handler on the loop's thread, which keeps
/// reading input meanwhile), or a poller of its own on a worker thread.
pub(crate) trait Waiter {
    /// Registers one of the child's output pipes to wake the wait.
    fn register(&mut self, pipe: &mut Receiver, stderr: bool) -> io::Result<()>;
    /// Removes a pipe registered before.
    fn deregister(&mut self, pipe: &mut Receiver);
    /// Sleeps until a pipe has data, something else the waiter watches happens, or `deadline`.
    fn wait_until(&mut self, deadline: Instant) -> Result<(), Error>;
    /// Why the command must be stopped now, if it must.
    fn interruption(&self) -> Option<Error>;
}

/// The waiter of a command run on a worker thread: its own poller for the child's pipes, and
/// the request's cancel token, looked at every [`CHILD_TICK`] (so a cancellation stops the
/// command within about 10 ms).
pub(crate) struct TokenWaiter {
    poll: Poll,
    events: Events,
    cancel: CancelToken,
}

impl TokenWaiter {
    pub(crate) fn new(cancel: CancelToken) -> io::Result<TokenWaiter> {
        Ok(TokenWaiter {
            poll: Poll::new()?,
            events: Events::with_capacity(4),
            cancel,
        })
    }
}

impl Waiter for TokenWaiter {
    fn register(&mut self, pipe: &mut Receiver, stderr: bool) -> io::Result<()> {
        let token = Token(usize::from(stderr));
        self.poll
            .registry()
            .register(pipe, token, Interest::READABLE)
    }

    fn deregister(&mut self, pipe: &mut Receiver) {
        let _ = self.poll.registry().deregister(pipe);
    }

    fn wait_until(&mut self, deadline: Instant) -> Result<(), Error> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(CHILD_TICK);
        match self.poll.poll(&mut self.events, Some(left)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(Error::io("polling a child's output", e)),
        }
    }

    fn interruption(&self) -> Option<Error> {
        self.cancel.reason()
    }
}

/// How long a process group gets between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(200);

/// How often the wait looks at the child while nothing else wakes it (a child that exits
/// while a grandchild keeps its pipes open sends no event).
const CHILD_TICK: Duration = Duration::from_millis(10);

/// How long output may keep arriving after the command itself exited (from processes it left
/// behind) before those are killed.
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// What a command run by [`Context::run_command`](crate::Context::run_command) left behind.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ChildOutput {
    /// How the command ended (`status.code()` for an exit, the signal otherwise); `None` when
    /// it was reaped by someone else, so that nobody can know: the embedding program ignores
    /// `SIGCHLD` (the kernel then reaps children as they exit) or reaps children itself. The
    /// output is complete either way.
    pub status: Option<ExitStatus>,
    /// Its standard output, up to the bound.
    pub stdout: Vec<u8>,
    /// Its standard error, up to the bound.
    pub stderr: Vec<u8>,
    /// Some output was dropped because it went past the bound.
    pub truncated: bool,
    /// The deadline passed and the command was stopped.
    pub timed_out: bool,
}

/// The direct child, its process group and its other descendants; dropping it stops and reaps
/// whatever still runs.
struct Group {
    child: Child,
    pgid: libc::pid_t,
    /// `Some` once the direct child is gone: with its status when reaped here, `None` when
    /// reaped elsewhere (see [`reaped_elsewhere`]). Its pid is no longer ours either way.
    ended: Option<Option<ExitStatus>>,
    /// Every descendant seen while the command ran, also those that left the group.
    tree: ProcessTree,
}

/// Whether a wait for the direct child failed because someone else reaped it (`ECHILD`): it
/// has exited, its status is unknown.
fn reaped_elsewhere(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECHILD)
}

impl Group {
    /// Whether the direct child has ended (reaped here or elsewhere).
    fn try_wait(&mut self) -> io::Result<bool> {
        if self.ended.is_none() {
            self.ended = match self.child.try_wait() {
                Ok(None) => return Ok(false),
                Ok(Some(status)) => Some(Some(status)),
                Err(e) if reaped_elsewhere(&e) => Some(None),
                Err(e) => return Err(e),
            };
            self.tree.forget_root();
        }
        Ok(true)
    }

    /// SIGTERM to the group and the tree, SIGKILL after the grace, then reap the direct child;
    /// its status (`None`: reaped elsewhere). Every signal is sent before an error can return.
    fn terminate(&mut self) -> io::Result<Option<ExitStatus>> {
        // One last look while the links to the command's descendants still exist.
        self.tree.scan();
        // ESRCH (nobody left) is the good case; nothing else can usefully be done on error.
        let _ = sys::terminate_group(self.pgid);
        self.tree.terminate_all();
        let until = Instant::now() + TERM_GRACE;
        while Instant::now() < until && !self.all_gone() {
            std::thread::sleep(Duration::from_millis(2));
        }
        // What a process forked during the grace.
        self.tree.scan();
        let _ = sys::signal_group(self.pgid, libc::SIGKILL);
        self.tree.kill_all();
        if let Some(status) = self.ended {
            return Ok(status);
        }
        // After SIGKILL the wait is short (and ends with ECHILD if the kernel reaps it).
        let status = match self.child.wait() {
            Ok(status) => Some(status),
            Err(e) if reaped_elsewhere(&e) => None,
            Err(e) => return Err(e),
        };
        self.ended = Some(status);
        self.tree.forget_root();
        Ok(status)
    }

    /// Whether the direct child is reaped (or cannot be waited for) and nothing else is left.
    fn all_gone(&mut self) -> bool {
        self.try_wait().unwrap_or(true) && !sys::group_exists(self.pgid) && !self.tree.any_alive()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.ended.is_none() || sys::group_exists(self.pgid) || !self.tree.is_empty() {
            let _ = self.terminate();
        }
    }
}

/// One output pipe being captured.
struct Capture {
    pipe: Option<Receiver>,
    bytes: Vec<u8>,
    limit: usize,
    truncated: bool,
}

impl Capture {
    fn new(pipe: Option<Receiver>, limit: usize) -> Capture {
        Capture {
            pipe,
            bytes: Vec::new(),
            limit,
            truncated: false,
        }
    }

    /// Reads what the pipe holds, keeping up to the limit and dropping the rest (so the child
    /// never blocks on a full pipe). Closes the pipe at end of file.
    fn drain(&mut self, conn: &mut dyn Waiter) {
        let Some(pipe) = &mut self.pipe else { return };
        let mut buf = [0u8; 16 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let room = self.limit.saturating_sub(self.bytes.len());
                    if n > room {
                        self.truncated = true;
                    }
                    self.bytes.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        if let Some(mut pipe) = self.pipe.take() {
            conn.deregister(&mut pipe);
        }
    }

    fn open(&self) -> bool {
        self.pipe.is_some()
    }
}

fn receiver(
    conn: &mut dyn Waiter,
    pipe: Option<impl Into<Receiver>>,
    stderr: bool,
) -> io::Result<Option<Receiver>> {
    let Some(pipe) = pipe else { return Ok(None) };
    let mut pipe: Receiver = pipe.into();
    pipe.set_nonblocking(true)?;
    conn.register(&mut pipe, stderr)?;
    Ok(Some(pipe))
}

/// Why `command` could not start, in words that name the cause where the OS error alone
/// misleads: `ENOENT` for a program that exists (the interpreter its `#!` line names is
/// missing: a script saved with CRLF line ends asks for `python3\r`), or for a working
/// directory that does not exist. Other errors come back as they were.
pub(crate) fn spawn_error(command: &Command, e: io::Error) -> io::Error {
    if e.kind() != io::ErrorKind::NotFound {
        return e;
    }
    if let Some(dir) = command.get_current_dir() {
        if !dir.is_dir() {
            let why = format!("{e} (the working directory {dir:?} does not exist)");
            return io::Error::new(e.kind(), why);
        }
    }
    let program = Path::new(command.get_program());
    let found = if program.components().count() > 1 {
        Some(program.to_path_buf()).filter(|p| p.is_file())
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    };
    let Some(found) = found else {
        return e; // the program itself is missing: the OS error says so
    };
    let why = match interpreter(&found) {
        Some(line) => format!(
            "{e} ({found:?} exists; the interpreter its first line names, {line:?}, was not found)"
        ),
        None => format!("{e} ({found:?} exists; the loader or a library it needs was not found)"),
    };
    io::Error::new(e.kind(), why)
}

/// The program a script's `#!` line names (up to its first space or the end of the line, a
/// `\r` kept), if the file starts with one.
fn interpreter(path: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let line = line.trim_start_matches([' ', '\t']);
    Some(
        line.split([' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Runs `command` as described in [`Context::run_command`](crate::Context::run_command),
/// waiting through `conn`.
pub(crate) fn run(
    conn: &mut dyn Waiter,
    mut command: Command,
    max_output: usize,
    timeout: Option<Duration>,
) -> Result<ChildOutput, Error> {
    let program = command.get_program().to_string_lossy().into_owned();
    let failed = |source: io::Error| Error::Spawn {
        program: program.clone(),
        source,
    };
    {
        use std::os::unix::process::CommandExt;
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    let mut child = command
        .spawn()
        .map_err(|e| failed(spawn_error(&command, e)))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut group = Group {
        // Pids always fit a pid_t; 0 would only make `signal_group` refuse, never misfire.
        pgid: libc::pid_t::try_from(child.id()).unwrap_or(0),
        tree: ProcessTree::new(child.id()),
        child,
        ended: None,
    };
    let mut out = Capture::new(receiver(conn, stdout, false).map_err(failed)?, max_output);
    let mut err = Capture::new(receiver(conn, stderr, true).map_err(failed)?, max_output);
    let deadline = timeout.map(deadline::from_now);
    let mut timed_out = false;

    let status = loop {
        // Before `try_wait`: the command's children are learned while it still links them.
        group.tree.scan_if_due();
        out.drain(conn);
        err.drain(conn);
        if group.try_wait().map_err(failed)? {
            // The command is done; let what it left behind finish writing, briefly.
            let until = Instant::now() + DRAIN_GRACE;
            while (out.open() || err.open())
                && Instant::now() < until
                && conn.interruption().is_none()
            {
                conn.wait_until(until.min(Instant::now() + CHILD_TICK))?;
                group.tree.scan_if_due();
                out.drain(conn);
                err.drain(conn);
            }
            break group.terminate().map_err(failed)?;
        }
        if let Some(why) = conn.interruption() {
            group.terminate().map_err(failed)?;
            return Err(why);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            timed_out = true;
            let status = group.terminate().map_err(failed)?;
            out.drain(conn);
            err.drain(conn);
            break status;
        }
        let tick = now + CHILD_TICK;
        conn.wait_until(deadline.map_or(tick, |d| d.min(tick)))?;
    };
    for capture in [&mut out, &mut err] {
        if let Some(mut pipe) = capture.pipe.take() {
            conn.deregister(&mut pipe);
        }
    }
    Ok(ChildOutput {
        status,
        truncated: out.truncated || err.truncated,
        stdout: out.bytes,
        stderr: err.bytes,
        timed_out,
    })
}
