//! A full or closed stderr never stalls or kills the server: `mcpipe demo` launched with a
//! stderr pipe nobody reads (filled before the server starts), and with a stderr whose reader
//! is gone; the examples (whose hooks and endings write to stderr) with a full one. Every wait
//! has a deadline.

mod util;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::watchdog;

/// The demo with its stderr on `stderr`, stdin and stdout piped; stdout lines on a channel.
struct Demo {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: Receiver<String>,
}

impl Demo {
    fn start(stderr: impl Into<Stdio>) -> Demo {
        let mut demo = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
        demo.arg("demo");
        Demo::spawn(demo, stderr)
    }

    /// Any server (an example), stdin and stdout piped, its stderr on `stderr`.
    fn spawn(mut command: Command, stderr: impl Into<Stdio>) -> Demo {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the demo starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Demo {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
    }

    fn request(&mut self, id: i64, method: &str, params: Value) {
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.send(&line.to_string());
    }

    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(util::BOUND)
            .expect("an answer within the bound (the server is not blocked on stderr)");
        serde_json::from_str(&line).unwrap()
    }

    /// Waits up to `limit` for the exit; its code.
    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "no exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The bad-input flood, panics, a tool error and a ping: each answered, in order.
    fn exercise(&mut self) -> Value {
        self.request(
            0,
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "stderr-test", "version": "0" } }),
        );
        assert!(self.next()["result"]["protocolVersion"].is_string());
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        // Long bad lines: each is described on stderr (rate-limited), so stderr fills fast.
        let garbage = format!("{{not json {}", "x".repeat(2000));
        for _ in 0..50 {
            self.send(&garbage);
        }
        for _ in 0..50 {
            assert_eq!(self.next()["error"]["code"], -32700);
        }
        // Each panic is reported on stderr (not rate-limited): a thousand reports are more than
        // the sink keeps while nobody reads, so some must be dropped, never waited for.
        for _ in 0..1000 {
            self.request(1, "tools/call", json!({ "name": "panic", "arguments": {} }));
        }
        for _ in 0..1000 {
            assert_eq!(self.next()["result"]["isError"], true);
        }
        self.request(
            2,
            "tools/call",
            json!({ "name": "fail", "arguments": { "message": "m" } }),
        );
        assert_eq!(self.next()["result"]["isError"], true);
        self.request(3, "ping", json!({}));
        assert_eq!(self.next()["id"], 3);
        self.request(4, "tools/call", json!({ "name": "stats", "arguments": {} }));
        self.next()["result"]["structuredContent"].clone()
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pipe whose buffer is already full. Python fills it through a non-blocking write loop and
/// then restores the flags, so the server inherits an ordinary, blocking, full pipe: the
/// launcher that pipes stderr and never reads it.
fn full_pipe() -> (std::io::PipeReader, std::io::PipeWriter) {
    let (reader, writer) = std::io::pipe().unwrap();
    let fill = "import fcntl, os\n\
                flags = fcntl.fcntl(1, fcntl.F_GETFL)\n\
                fcntl.fcntl(1, fcntl.F_SETFL, flags | os.O_NONBLOCK)\n\
                try:\n    while True: os.write(1, bytes(65536))\n\
                except BlockingIOError: pass\n\
                fcntl.fcntl(1, fcntl.F_SETFL, flags)\n";
    let status = Command::new("python3")
        .args(["-c", fill])
        .stdout(writer.try_clone().unwrap())
        .status()
        .expect("python3 runs");
    assert!(status.success(), "filling the pipe failed");
    (reader, writer)
}

#[test]
fn a_stderr_nobody_reads_does_not_block_answers_and_drops_are_counted() {
    let _w = watchdog("stderr_full", Duration::from_secs(60));
    let (reader, writer) = full_pipe();
    let mut demo = Demo::start(writer);
    let stats = demo.exercise();
    assert!(
        stats["stderr_lines_dropped"].as_u64().unwrap() > 0,
        "the drop counter counts: {stats}"
    );
    let started = Instant::now();
    demo.sigterm();
    assert_eq!(demo.wait_exit(Duration::from_secs(5)), Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "SIGTERM took {took:?}");
    drop(reader);
}

#[test]
fn a_closed_stderr_ends_logging_not_the_server() {
    let _w = watchdog("stderr_closed", Duration::from_secs(60));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // every write to stderr now fails with EPIPE
    let mut demo = Demo::start(writer);
    demo.exercise();
    demo.stdin = None;
    assert_eq!(demo.wait_exit(Duration::from_secs(5)), Some(0));
}

/// The raw example server with an idle hook every 200 ms: it answers across idle-hook runs and
/// ends on SIGTERM, though nothing it writes to stderr can get out.
#[test]
fn the_echo_example_with_a_stderr_nobody_reads_answers_across_idle_hooks_and_exits() {
    let _w = watchdog("stderr_echo_example", Duration::from_secs(120));
    let (reader, writer) = full_pipe();
    let mut example = Command::new(util::example_binary("echo_server"));
    example.args(["--idle-timeout-ms", "200"]);
    let mut server = Demo::spawn(example, writer);
    server.request(1, "echo", json!({ "x": 1 }));
    assert_eq!(server.next()["result"], json!({ "x": 1 }));
    // Long enough for the idle hook to run at least twice.
    std::thread::sleep(Duration::from_millis(700));
    server.request(2, "echo", json!({ "x": 2 }));
    assert_eq!(server.next()["result"], json!({ "x": 2 }));
    server.sigterm();
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0));
    drop(reader);
}

/// The MCP example: answers, then exits on end of input and on SIGTERM, though its closing
/// report cannot be written.
#[test]
fn the_three_tools_example_with_a_stderr_nobody_reads_exits_on_eof_and_on_sigterm() {
    let _w = watchdog("stderr_three_tools", Duration::from_secs(120));
    for by_signal in [false, true] {
        let (reader, writer) = full_pipe();
        let mut server = Demo::spawn(Command::new(util::example_binary("three_tools")), writer);
        server.request(
            0,
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "stderr-test", "version": "0" } }),
        );
        assert!(server.next()["result"]["protocolVersion"].is_string());
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server.request(
            1,
            "tools/call",
            json!({ "name": "shout", "arguments": { "text": "hi" } }),
        );
        assert_eq!(server.next()["result"]["content"][0]["text"], "HI");
        if by_signal {
            server.sigterm();
        } else {
            server.stdin = None;
        }
        assert_eq!(
            server.wait_exit(Duration::from_secs(5)),
            Some(0),
            "ended by {}",
            if by_signal { "SIGTERM" } else { "EOF" }
        );
        drop(reader);
    }
}
