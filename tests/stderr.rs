//! A full or closed stderr never stalls or kills the server: `mcpipe demo` launched with a
//! stderr pipe nobody reads (filled before the server starts), and with a stderr whose reader
//! is gone; the examples (whose hooks and endings write to stderr) with a full one. A stderr
//! with less room than `poll` promised (a pty) stalls nothing either; text left on a full
//! stderr goes out once it drains, with no further call, and a server's last line before its
//! exit reaches a slowly read stderr. Every wait has a deadline.

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

/// Sets up a pty whose reader never reads, with room left for less than one 512-byte write
/// although `poll` says it is writable, and `exec`s the server named by argv[1] with that pty
/// as its stderr (the pty's reading end stays open in it, never read). Where another process
/// on the same stderr takes the room between a `poll` and a write, a write blocks; this is
/// the same state, set up at will. The pty writes through `OPOST` (its default), so a write
/// takes no more than the room: 256 bytes of it, then it waits for the reader.
///
/// How many bytes leave that room is found on a first pty (single bytes until `poll` says
/// no room: one fewer leaves one buffer's room) and checked on a second (a non-blocking write
/// of 512 bytes must take fewer); the third gets the same single bytes (the pty's buffers
/// depend on the sizes of the writes) and goes to the server. If the
/// state cannot be set up, a JSON line on stdout says why.
const PTY_WITH_LITTLE_ROOM: &str = r#"
import json, os, pty, select, sys, time

def fresh():
    master, slave = pty.openpty()
    w = os.open(os.ttyname(slave), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    p = select.poll()
    p.register(w, select.POLLOUT)
    # The reader's line discipline takes the first 4 KiB; let it settle before counting.
    for _ in range(2):
        os.write(w, b"p" * 4096)
        time.sleep(0.1)
    return master, slave, w, p

def fail(why):
    print(json.dumps({"setup_failed": why}), flush=True)
    sys.exit(3)

master, slave, w, p = fresh()
n = 0
while p.poll(0):
    os.write(w, b"c")
    n += 1
    if n > 1 << 20:
        fail("the pty never filled")

master, slave, w, p = fresh()
for _ in range(n - 1):
    os.write(w, b"c")
if not p.poll(0):
    fail(f"no room after {n - 1} bytes")
try:
    took = os.write(w, b"z" * 512)
except BlockingIOError:
    took = 0
if took >= 512:
    fail(f"a 512-byte write fitted after {n - 1} bytes")

master, slave, w, p = fresh()
for _ in range(n - 1):
    os.write(w, b"c")
os.close(w)
os.set_inheritable(master, True)
os.dup2(slave, 2)
os.execv(sys.argv[1], sys.argv[1:])
"#;

/// A server whose stderr takes less than a write that `poll` said fits (another process
/// sharing it took the room): the write waits for a reader that never comes, on the writer
/// thread, while the loop goes on answering; the exit does not wait for that write.
#[test]
#[cfg(target_os = "linux")]
fn a_stderr_write_that_blocks_after_poll_said_room_does_not_stall_the_loop() {
    let _w = watchdog("stderr_pty_little_room", Duration::from_secs(60));
    let mut command = Command::new("python3");
    command
        .args(["-c", PTY_WITH_LITTLE_ROOM])
        .arg(util::example_binary("echo_server"));
    let mut server = Demo::spawn(command, Stdio::null());
    // 2,000 bytes: more than the room, in 512-byte writes.
    server.request(1, "log", json!({ "bytes": 2000 }));
    let answer = server.next();
    assert!(answer.get("setup_failed").is_none(), "{answer}");
    assert_eq!(answer["result"], json!({ "logged": 2000 }));
    server.request(2, "echo", json!({ "x": 2 }));
    assert_eq!(server.next()["result"], json!({ "x": 2 }));
    server.request(3, "log", json!({ "bytes": 100 }));
    assert_eq!(server.next()["result"], json!({ "logged": 100 }));
    let started = Instant::now();
    server.stdin = None;
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "the exit took {took:?}");
}

/// Set in the environment of this binary's re-run as a process that only writes stderr.
const LONE_WRITER: &str = "MCPIPE_TEST_STDERR_LONE_WRITER";

/// A process with no server loop (one that only hosts clients, say) writes one line to a full
/// stderr and then makes no further call: the line goes out once stderr drains, and the writer
/// thread that wrote it ends.
#[test]
fn a_line_left_pending_goes_out_when_stderr_drains_without_another_call() {
    let name = "a_line_left_pending_goes_out_when_stderr_drains_without_another_call";
    if std::env::var_os(LONE_WRITER).is_some() {
        return lone_writer();
    }
    let _w = watchdog("stderr_lone_writer", Duration::from_secs(60));
    let (reader, writer) = full_pipe();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(LONE_WRITER, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(writer)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = util::line_channel(child.stdout.take().unwrap());
    let said = |marker: &str| {
        let deadline = Instant::now() + util::BOUND;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match stdout.recv_timeout(left) {
                Ok(line) if String::from_utf8_lossy(&line).contains(marker) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    };
    assert!(said("LINE WRITTEN"), "the child did not write its line");
    // Only now is stderr drained: everything read goes to a channel.
    let (tx, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = vec![0; 65536];
        while let Ok(n @ 1..) = std::io::Read::read(&mut reader, &mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut text = Vec::new();
    let deadline = Instant::now() + util::BOUND;
    let marker = b"lone-writer: the one line\n";
    while !text.windows(marker.len()).any(|w| w == marker) {
        let left = deadline.saturating_duration_since(Instant::now());
        match chunks.recv_timeout(left) {
            Ok(chunk) => text.extend(chunk),
            Err(_) => panic!(
                "the line did not reach the drained stderr without another call ({} bytes read)",
                text.len()
            ),
        }
    }
    if cfg!(target_os = "linux") {
        stdin.write_all(b"threads?\n").unwrap();
        assert!(
            said("NO WRITER THREAD"),
            "the writer thread outlived its text"
        );
    }
    drop(stdin);
    let deadline = Instant::now() + util::BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(status.success(), "the child failed");
}

/// The re-run's part: one line, then only answers on stdout about its own threads, until the
/// end of stdin.
fn lone_writer() {
    // Its own watchdog: the outer one cannot end this process.
    let _w = watchdog("stderr_lone_writer_child", Duration::from_secs(50));
    mcpipe::stderr_line("lone-writer: the one line");
    let mut stdout = std::io::stdout();
    stdout.write_all(b"LINE WRITTEN\n").unwrap();
    stdout.flush().unwrap();
    for _ in BufReader::new(std::io::stdin())
        .lines()
        .map_while(Result::ok)
    {
        // The thread ends once its text is out; give it a moment to.
        let deadline = Instant::now() + util::BOUND;
        while util::threads_named("mcpipe-stderr") > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let answer: &[u8] = if util::threads_named("mcpipe-stderr") == 0 {
            b"NO WRITER THREAD\n"
        } else {
            b"A WRITER THREAD IS LEFT\n"
        };
        stdout.write_all(answer).unwrap();
        stdout.flush().unwrap();
    }
}

/// A server that logs more than its stderr holds and then ends: the exit waits for the writer
/// thread while a slow reader takes the text, so the last line (`ended`) is not lost.
#[test]
fn the_last_line_before_exit_reaches_a_slowly_read_stderr() {
    let _w = watchdog("stderr_exit_line", Duration::from_secs(60));
    let (reader, writer) = full_pipe();
    let mut server = Demo::spawn(Command::new(util::example_binary("echo_server")), writer);
    // A steady reader: 4 KiB a millisecond, from now on.
    let (tx, chunks) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = vec![0; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut reader, &mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // 50 KB of lines (the sink keeps 64 KiB), behind the full pipe's 64 KiB.
    for id in 0..50 {
        server.request(id, "log", json!({ "bytes": 1000 }));
    }
    for _ in 0..50 {
        assert_eq!(server.next()["result"], json!({ "logged": 1000 }));
    }
    server.stdin = None;
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0));
    let mut text = Vec::new();
    while let Ok(chunk) = chunks.recv_timeout(util::BOUND) {
        text.extend(chunk);
    }
    let text = String::from_utf8_lossy(&text);
    assert_eq!(text.matches("echo_server: xxx").count(), 50);
    assert!(
        text.contains("echo_server: ended"),
        "the last line was lost at exit ({} bytes read)",
        text.len()
    );
}

/// Field review: text still waiting for a stderr nobody reads when the process ends (here on
/// SIGTERM, through the loop's shutdown and the exit) was lost without a word: not counted,
/// not said. The exit gives the writer thread its bounded wait as before, then says in one
/// line how many lines were lost, where stderr takes that line without blocking: here a
/// one-page pipe with 300 bytes of room, too little for any of the 1,000-byte lines.
#[test]
#[cfg(target_os = "linux")]
fn text_lost_at_a_signal_exit_is_counted_and_said_where_stderr_takes_it() {
    let _w = watchdog("stderr_lost_at_exit", Duration::from_secs(60));
    let (reader, writer) = std::io::pipe().unwrap();
    // One page (F_SETPIPE_SZ is 1031), 300 bytes of it left.
    let fill = "import fcntl, os\n\
                fcntl.fcntl(1, 1031, 4096)\n\
                os.write(1, b'f' * 3795 + b'\\n')\n";
    let status = Command::new("python3")
        .args(["-c", fill])
        .stdout(writer.try_clone().unwrap())
        .status()
        .expect("python3 runs");
    assert!(status.success(), "filling the pipe failed");
    let mut server = Demo::spawn(Command::new(util::example_binary("echo_server")), writer);
    for id in 0..50 {
        server.request(id, "log", json!({ "bytes": 1000 }));
    }
    for _ in 0..50 {
        assert_eq!(server.next()["result"], json!({ "logged": 1000 }));
    }
    let started = Instant::now();
    server.sigterm();
    assert_eq!(server.wait_exit(Duration::from_secs(5)), Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "the exit took {took:?}");
    let mut text = String::new();
    let mut reader = reader;
    std::io::Read::read_to_string(&mut reader, &mut text).unwrap();
    let said = text
        .strip_prefix(&format!("{}\n", "f".repeat(3795)))
        .unwrap_or(&text);
    let lost: u64 = said
        .strip_prefix("mcpipe: ")
        .and_then(|rest| {
            rest.strip_suffix(
                " diagnostic lines were lost at exit (stderr was full or not being read)\n",
            )
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the lost lines were not said: {said:?}"));
    // The 50 lines and the line the example ends with, at least.
    assert!(lost > 50, "{said:?}");
}
