//! Shared test helpers. Every wait here has a deadline, so a hang fails a test instead of
//! stalling the suite, and every spawned process is killed when its handle drops.
//!
//! This file: a watchdog, an in-process server on pipes ([`Peer`]) and the spawned example
//! server ([`Spawned`]), for the loop's tests. [`mcp`]: `mcpipe demo` driven over pipes, for the
//! MCP layer's tests. [`client`]: fixtures and helpers for the client and probe tests. [`probe`]:
//! `mcpipe probe` run and its report read. [`procs`]: the process table (`/proc` on Linux, `ps`
//! elsewhere). [`sigchld`]: a test run again with `SIGCHLD` ignored.
#![allow(dead_code, unreachable_pub)] // Each test file uses a different subset.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mcpipe::{Context, Error, ErrorCode, ErrorObject, Handler, Outcome, Request, Server};

pub mod client;
pub mod mcp;
pub mod probe;
pub mod procs;
pub mod sigchld;
pub mod wrap;
use serde_json::{json, Value};

/// How long any single expected event may take before the test fails. Generous: it only
/// catches hangs; expected times are milliseconds.
pub const BOUND: Duration = Duration::from_secs(10);

/// Ends the whole test process if the test is still running after `limit`, like `alarm(2)` in
/// a C test: a hang becomes a failure with a message, never a stalled suite.
pub struct Watchdog {
    cancel: Option<Sender<()>>,
}

pub fn watchdog(name: &'static str, limit: Duration) -> Watchdog {
    let (cancel, cancelled) = mpsc::channel::<()>();
    thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = cancelled.recv_timeout(limit) {
            eprintln!("WATCHDOG: test {name} still running after {limit:?}: failing it");
            // The exit unwinds nothing: the scratch files go now.
            remove_all_scratch();
            std::process::exit(101);
        }
    });
    Watchdog {
        cancel: Some(cancel),
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            let _ = cancel.send(());
        }
    }
}

/// The scratch paths alive in this process, for a watchdog's exit (which unwinds nothing).
static SCRATCH: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A scratch path under the temp dir (a file a fixture writes, or a directory), removed when
/// dropped: after a test that passed, and after one that failed, as its panic unwinds (and at
/// a watchdog's exit). Removing it never panics, so a failure is never turned into an abort
/// that hides its message; a failed test's file is printed first, as it may say why.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// `name`, made unique to this process, under the temp dir; anything there removed first.
    pub fn new(name: &str) -> Scratch {
        Scratch::at(std::env::temp_dir().join(format!("{name}-{}", std::process::id())))
    }

    /// `path` as it is; anything there removed first.
    pub fn at(path: PathBuf) -> Scratch {
        remove_path(&path);
        if let Ok(mut all) = SCRATCH.lock() {
            all.push(path.clone());
        }
        Scratch(path)
    }
}

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if thread::panicking() {
            if let Ok(text) = std::fs::read(&self.0) {
                let shown = &text[text.len().saturating_sub(4096)..];
                eprintln!(
                    "scratch file {} (its last {} of {} bytes):\n{}",
                    self.0.display(),
                    shown.len(),
                    text.len(),
                    String::from_utf8_lossy(shown)
                );
            }
        }
        remove_path(&self.0);
        if let Ok(mut all) = SCRATCH.lock() {
            all.retain(|p| *p != self.0);
        }
    }
}

fn remove_path(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// Removes every scratch path still alive (a test that will not unwind: its process exits).
/// Never waits for the list's lock: a test holding it is not waited for.
pub fn remove_all_scratch() {
    if let Ok(all) = SCRATCH.try_lock() {
        for path in all.iter() {
            remove_path(path);
        }
    }
}

/// Reads lines from `reader` on a thread and passes them on, so tests can wait with deadlines.
pub fn line_channel(reader: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut reader = BufReader::with_capacity(1 << 16, reader);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// This process's threads named `name` (Linux: `/proc/self/task`; 0 elsewhere).
pub fn threads_named(name: &str) -> usize {
    threads_of("self", |comm| comm == name).unwrap_or(0)
}

/// The threads of process `pid` ("self": this one) whose name passes `wanted`, from
/// `/proc/PID/task/*/comm`: Linux only, `None` elsewhere. Panics when the process is gone.
pub fn threads_of(pid: &str, wanted: impl Fn(&str) -> bool) -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("the threads of process {pid}: {e}"));
    let count = tasks
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|comm| wanted(comm.trim()))
        })
        .count();
    Some(count)
}

/// Waits for the next line and parses it as JSON; panics (fails the test) after [`BOUND`].
pub fn recv_json(rx: &Receiver<Vec<u8>>) -> Value {
    let line = rx
        .recv_timeout(BOUND)
        .unwrap_or_else(|e| panic!("no output line within {BOUND:?}: {e}"));
    assert_eq!(line.last(), Some(&b'\n'), "line without newline: {line:?}");
    serde_json::from_slice(&line).unwrap_or_else(|e| {
        panic!(
            "output line is not JSON ({e}): {}",
            String::from_utf8_lossy(&line)
        )
    })
}

/// Asserts that no line arrives within `wait`.
pub fn assert_silent(rx: &Receiver<Vec<u8>>, wait: Duration) {
    if let Ok(line) = rx.recv_timeout(wait) {
        panic!("unexpected output: {}", String::from_utf8_lossy(&line));
    }
}

/// A request line (with newline).
pub fn request(id: impl Into<Value>, method: &str, params: Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": id.into(), "method": method, "params": params}),
    )
    .unwrap();
    line.push(b'\n');
    line
}

/// The handler the in-process tests serve: small, deterministic, and observable.
#[derive(Debug, Default)]
pub struct TestHandler {
    pub notifications: Vec<String>,
    pub responses: usize,
    pub idle_runs: usize,
    pub shutdowns: Vec<Outcome>,
}

impl Handler for TestHandler {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        let params = req.params.unwrap_or(Value::Null);
        match req.method.as_str() {
            "initialize" => Ok(json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "test", "version": "0"}
            })),
            "tools/list" => Ok(json!({"tools": []})),
            "echo" => Ok(params),
            "fail" => Err(ErrorObject::new(ErrorCode(-32000), "failed on purpose")),
            "needs_params" => match params.get("n").and_then(Value::as_u64) {
                Some(n) => Ok(json!({"n": n})),
                None => Err(ErrorObject::invalid_params(
                    "needs_params takes an integer \"n\"",
                )),
            },
            "panic" => panic!("the test handler panics on purpose"),
            "notify" => {
                cx.notify("notifications/test", Some(json!({"from": "handler"})))
                    .map_err(|e| ErrorObject::internal(e.to_string()))?;
                Ok(json!({}))
            }
            "stats" => {
                let s = cx.stats();
                Ok(json!({
                    "requests": s.requests,
                    "bad_messages": s.bad_messages,
                    "oversize_messages": s.oversize_messages,
                    "handler_panics": s.handler_panics,
                    "idle_hooks": s.idle_hooks,
                }))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }

    fn handle_notification(&mut self, n: mcpipe::Notification, _cx: &mut Context<'_>) {
        if n.method == "panic" {
            panic!("the test handler panics on a notification");
        }
        self.notifications.push(n.method);
    }

    fn handle_response(&mut self, _r: mcpipe::Response, _cx: &mut Context<'_>) {
        self.responses += 1;
    }

    fn on_idle(&mut self, _cx: &mut Context<'_>) {
        self.idle_runs += 1;
    }

    fn on_shutdown(&mut self, outcome: &Outcome, _cx: &mut Context<'_>) {
        self.shutdowns.push(outcome.clone());
    }
}

/// A server running on a thread of this process, talking through two pipes.
pub struct Peer {
    /// Our end of the server's input; `None` once closed.
    pub input: Option<std::io::PipeWriter>,
    /// Lines the server wrote.
    pub output: Receiver<Vec<u8>>,
    done: Receiver<(Result<Outcome, Error>, TestHandler)>,
    _thread: JoinHandle<()>,
}

/// A server with test settings: no signal handling (tests share one process), quiet logs.
pub fn test_server() -> Server {
    Server::new()
        .handle_signals(false)
        .log_bad_input(false)
        .idle_timeout(None)
}

impl Peer {
    pub fn start(server: Server) -> Peer {
        Peer::start_with(server, TestHandler::default())
    }

    pub fn start_with(server: Server, handler: TestHandler) -> Peer {
        let (in_r, in_w) = std::io::pipe().unwrap();
        let (out_r, out_w) = std::io::pipe().unwrap();
        let (done_tx, done) = mpsc::channel();
        let thread = thread::spawn(move || {
            let mut handler = handler;
            use std::os::fd::AsFd;
            let outcome = server.serve(in_r.as_fd(), out_w.as_fd(), &mut handler);
            drop(out_w);
            let _ = done_tx.send((outcome, handler));
        });
        Peer {
            input: Some(in_w),
            output: line_channel(out_r),
            done,
            _thread: thread,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.input
            .as_mut()
            .expect("input already closed")
            .write_all(bytes)
            .expect("write to the server's input");
    }

    pub fn recv(&self) -> Value {
        recv_json(&self.output)
    }

    pub fn close_input(&mut self) {
        self.input = None;
    }

    /// Waits for the loop to end; fails the test after [`BOUND`].
    pub fn finish(self) -> (Result<Outcome, Error>, TestHandler) {
        self.done
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("the loop did not end within {BOUND:?}"))
    }
}

/// The example server binary, built (once per test process) so that a targeted
/// `cargo test --test NAME`, which does not build examples, never runs a stale one.
pub fn example_binary(name: &str) -> std::path::PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args(["build", "--quiet", "--examples"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo to build the examples");
        assert!(status.success(), "building the examples failed");
    });
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo test` (it builds examples)",
        path.display()
    );
    path
}

/// A spawned example server; killed when dropped, so no test leaves a process behind.
pub struct Spawned {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub stdout: Receiver<Vec<u8>>,
    pub stderr: Receiver<Vec<u8>>,
}

impl Spawned {
    pub fn new(args: &[&str], stdin: Stdio) -> Spawned {
        let mut cmd = Command::new(example_binary("echo_server"));
        cmd.args(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn the example server");
        let stdout = line_channel(child.stdout.take().unwrap());
        let stderr = line_channel(child.stderr.take().unwrap());
        Spawned {
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    pub fn recv(&self) -> Value {
        recv_json(&self.stdout)
    }

    /// Waits for the process to exit; fails the test after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "the server did not exit within {limit:?}"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        let mut text = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(100)) {
            text.push_str(&String::from_utf8_lossy(&line));
        }
        text
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
