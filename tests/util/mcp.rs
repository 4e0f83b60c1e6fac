//! Shared helpers for the MCP integration tests: a demo server driven over pipes, where every
//! read has a deadline (a reader thread feeds a channel read with `recv_timeout`) and the
//! process is killed when the helper is dropped, so no test can hang or leak a process.
#![allow(dead_code, unreachable_pub)] // Each test file uses its own subset; `pub` for clarity.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use super::BOUND;

/// The longest a test may keep a server: past it, the alarm kills the server, so a write
/// blocked on a server that stopped reading fails with EPIPE and reads end, and the test fails
/// instead of hanging (the `alarm(2)` of a C test).
pub const PROC_LIMIT: Duration = Duration::from_secs(120);

/// A running `mcpipe demo` (or any command) with line-based access to its stdout.
pub struct Proc {
    /// Kills the server if the test is still running after [`PROC_LIMIT`]; cancelled on drop.
    alarm: Option<mpsc::Sender<()>>,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Everything the server wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// Set once its stderr reached end of file (every writer gone).
    stderr_ended: Arc<AtomicBool>,
}

impl Proc {
    /// Starts `mcpipe demo` with these extra arguments.
    pub fn demo(args: &[&str]) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
        cmd.arg("demo").args(args);
        Proc::spawn(cmd)
    }

    /// Starts any command with piped stdio.
    pub fn spawn(mut cmd: Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let stdout = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let stderr_ended = Arc::new(AtomicBool::new(false));
        let ended = Arc::clone(&stderr_ended);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            ended.store(true, Ordering::Release);
        });
        let (alarm, cancelled) = mpsc::channel::<()>();
        let pid = child.id().to_string();
        thread::spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = cancelled.recv_timeout(PROC_LIMIT) {
                eprintln!("ALARM: the test kept server {pid} past {PROC_LIMIT:?}: killing it");
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        });
        Proc {
            alarm: Some(alarm),
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            stderr_ended,
        }
    }

    /// All it wrote to stderr, once the stderr pipe reached end of file (the process and
    /// whatever shared its stderr are gone); fails the test after [`BOUND`].
    pub fn stderr_at_end(&self) -> String {
        let until = Instant::now() + BOUND;
        while !self.stderr_ended.load(Ordering::Acquire) {
            assert!(Instant::now() < until, "stderr still open after {BOUND:?}");
            thread::sleep(Duration::from_millis(5));
        }
        self.stderr.lock().unwrap().clone()
    }

    /// Its stderr once it contains `text` (or after [`BOUND`]): a reader thread collects it,
    /// so a line written before an answer may be collected after the answer was read.
    pub fn stderr_with(&self, text: &str) -> String {
        let until = Instant::now() + BOUND;
        loop {
            let stderr = self.stderr.lock().unwrap().clone();
            if stderr.contains(text) || Instant::now() >= until {
                return stderr;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's stdin, for a thread of its own (a write that may block).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin is open")
    }

    /// Writes raw bytes to the server's stdin.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("the server reads its input");
        stdin.flush().unwrap();
    }

    /// Sends one message as a line.
    pub fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.write_raw(&line);
    }

    /// Sends a request.
    pub fn request(&mut self, id: i64, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends `tools/call`.
    pub fn call(&mut self, id: i64, tool: &str, arguments: Value) {
        self.request(
            id,
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        );
    }

    /// Cancels request `id`.
    pub fn cancel(&mut self, id: i64) {
        self.notify(
            "notifications/cancelled",
            json!({ "requestId": id, "reason": "test" }),
        );
    }

    /// Closes the server's stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next line as it came (not read as JSON), or `None` when `timeout` passes.
    pub fn next_line_within(&mut self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next message, or `None` when `timeout` passes (or the output ended).
    pub fn next_within(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Some(serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the server wrote a line that is not JSON ({e}): {line:?}")
            })),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// The next message; fails the test after [`BOUND`].
    pub fn next(&mut self) -> Value {
        self.next_within(BOUND).unwrap_or_else(|| {
            panic!(
                "no message from the server within {BOUND:?}; stderr: {}",
                self.stderr.lock().unwrap()
            )
        })
    }

    /// Messages until the response with `id` (inclusive); fails after [`BOUND`].
    pub fn until_response(&mut self, id: i64) -> (Vec<Value>, Value) {
        let deadline = Instant::now() + BOUND;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(msg) = self.next_within(left) else {
                panic!(
                    "no response to id {id} within {BOUND:?}; saw {before:?}; stderr: {}",
                    self.stderr.lock().unwrap()
                );
            };
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return (before, msg);
            }
            before.push(msg);
        }
    }

    /// The response to `id`, skipping notifications.
    pub fn response(&mut self, id: i64) -> Value {
        self.until_response(id).1
    }

    /// The `result` of the response to `id`; fails the test on an error response.
    pub fn result(&mut self, id: i64) -> Value {
        let response = self.response(id);
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("expected a result for id {id}, got {response}"),
        }
    }

    /// The error code of the response to `id`; fails the test on a result.
    pub fn error_code(&mut self, id: i64) -> i64 {
        let response = self.response(id);
        response["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error for id {id}, got {response}"))
    }

    /// Runs the handshake with `version` and returns the `initialize` result.
    pub fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        self.request(
            0,
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": capabilities,
                "clientInfo": { "name": "mcpipe-tests", "version": "0" }
            }),
        );
        let result = self.result(0);
        self.notify("notifications/initialized", json!({}));
        result
    }

    /// Runs the handshake with the latest version.
    pub fn initialize(&mut self) -> Value {
        self.initialize_with("2025-11-25", json!({}))
    }

    /// Waits up to [`BOUND`] for the process to exit and returns its status code.
    pub fn wait_exit(&mut self) -> Option<i32> {
        self.wait_exit_within(BOUND)
    }

    /// Waits up to `limit` for the process to exit and returns its status code.
    pub fn wait_exit_within(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {limit:?}; stderr: {}; status: {}",
                self.stderr.lock().unwrap(),
                std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default()
            );
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends a signal (`"TERM"`, `"INT"`, ...) to the server, with kill(1).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill(1) runs");
        assert!(status.success(), "kill -{signal} failed");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Cancel the alarm first: once the child is reaped its pid may be reused.
        if let Some(alarm) = self.alarm.take() {
            let _ = alarm.send(());
        }
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of the first content block of a tool result.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Pids of live (non-zombie) processes whose process group is `pgid`.
pub fn live_in_group(pgid: u32) -> Vec<u32> {
    processes_where(|state, _ppid, pgrp| pgrp == pgid && state != "Z")
}

/// Pids of the processes for which `keep(state, ppid, pgrp)` holds (see [`super::procs`]).
pub fn processes_where(keep: impl Fn(&str, u32, u32) -> bool) -> Vec<u32> {
    super::procs::all()
        .into_iter()
        .filter(|p| keep(&p.state, p.ppid, p.pgid))
        .map(|p| p.pid)
        .collect()
}
