//! stderr on `/dev/null` or on a terminal (a pty) is written by the line's caller, without a
//! writer thread: a burst of lines starts no "mcpipe-stderr" thread, and every line reaches a
//! pty that is read. A pty whose output is stopped, or that nobody reads, blocks no logger:
//! what it does not take is kept, or dropped and counted, as on a full pipe. The logger is
//! this test binary run again (its stderr on the device), under a watchdog of its own.
#![cfg(target_os = "linux")]

mod util;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::watchdog;

/// Set in the re-run's environment: how many lines it logs.
const BURST: &str = "MCPIPE_TEST_STDERR_BURST";

/// Runs `command` (after a mode: `read`, `stopped`) with its stderr on a fresh pty, stdin
/// inherited, and passes its stdout on. `read`: the pty is read from the start. `stopped`:
/// its output is stopped (`stty stop`, as Ctrl-S does) until the child says `LOGGED`, then
/// read. Once the child's stdout ends, one JSON line: the `burst-logger` line numbers that
/// reached the pty, in order, and the count a "lines were dropped" notice gave. As soon as
/// such a notice reaches the pty, a line `{"notice": true}` says so.
const PTY_HOST: &str = r#"
import json, os, pty, re, subprocess, sys, termios, threading

mode, command = sys.argv[1], sys.argv[2:]
master, slave = pty.openpty()
if mode == "stopped":
    termios.tcflow(slave, termios.TCOOFF)
child = subprocess.Popen(command, stderr=slave, stdout=subprocess.PIPE)
text = bytearray()
out = threading.Lock()

def say(line):
    with out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

def drain():
    told = False
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return
        if not chunk:
            return
        text.extend(chunk)
        if not told and b"lines were dropped" in text:
            told = True
            say(json.dumps({"notice": True}))

reader = threading.Thread(target=drain)
if mode == "read":
    reader.start()
for line in child.stdout:
    line = line.decode(errors="replace").rstrip("\n")
    say(line)
    if mode == "stopped" and "LOGGED" in line:
        termios.tcflow(slave, termios.TCOON)
        reader.start()
child.wait()
os.close(slave)
if reader.ident is None:
    reader.start()
reader.join()
lines = text.decode(errors="replace").replace("\r", "").split("\n")
numbers = [int(l.split()[-1]) for l in lines if l.startswith("burst-logger: line ")]
dropped = [int(m.group(1)) for m in (re.match(r"mcpipe: (\d+) diagnostic lines were dropped", l) for l in lines) if m]
say(json.dumps({"numbers": numbers, "dropped": dropped, "exit": child.returncode}))
"#;

/// The logger, run from the test named `name` with its stderr on `stderr`, through `host`
/// (`python3 PTY_HOST mode`) when given.
struct Logger {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<Vec<u8>>,
}

impl Logger {
    fn start(name: &str, lines: usize, stderr: Stdio, pty_mode: Option<&str>) -> Logger {
        let me = std::env::current_exe().unwrap();
        let mut command = match pty_mode {
            Some(mode) => {
                let mut host = Command::new("python3");
                host.args(["-c", PTY_HOST, mode]).arg(me);
                host
            }
            None => Command::new(me),
        };
        command
            .args([name, "--exact", "--nocapture", "--test-threads", "1"])
            .env(BURST, lines.to_string());
        Logger::spawn(command, stderr)
    }

    /// Any process, stdin and stdout piped, its stderr on `stderr`.
    fn spawn(mut command: Command, stderr: Stdio) -> Logger {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("the process starts");
        let stdout = util::line_channel(child.stdout.take().unwrap());
        Logger {
            stdin: child.stdin.take(),
            child,
            stdout,
        }
    }

    /// The next stdout line with `start` in it, from there on, within the bound.
    fn line_starting(&self, start: &str) -> String {
        let deadline = Instant::now() + util::BOUND;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stdout.recv_timeout(left) {
                Ok(line) => {
                    // The test harness may have begun the line ("test name ... ").
                    let line = String::from_utf8_lossy(&line);
                    if let Some(at) = line.find(start) {
                        return line[at..].trim_end().to_owned();
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no line starting {start:?} within {:?}", util::BOUND);
    }

    /// The `LOGGED` report: how many writer threads the logger saw at most, and its slowest
    /// line.
    fn logged(&self) -> (usize, Duration) {
        let line = self.line_starting("LOGGED");
        let field = |key: &str| -> u64 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        };
        let threads = usize::try_from(field("threads=")).unwrap();
        (threads, Duration::from_micros(field("slowest_us=")))
    }

    /// Ends the logger (its stdin closed) and waits for the exit, within the bound.
    fn finish(&mut self) {
        self.stdin = None;
        let deadline = Instant::now() + util::BOUND;
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the logger did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The re-run's part: logs its lines, one call each, looking for a writer thread after each
/// one; says what it saw on stdout; then waits for the end of stdin.
fn burst_logger(lines: usize) {
    // Its own watchdog: the outer one cannot end this process.
    let _w = watchdog("stderr_burst_child", Duration::from_secs(50));
    let mut threads = 0;
    let mut slowest = Duration::ZERO;
    for i in 0..lines {
        let started = Instant::now();
        mcpipe::stderr_line(&format!("burst-logger: line {i}"));
        slowest = slowest.max(started.elapsed());
        threads = threads.max(util::threads_named("mcpipe-stderr"));
    }
    let mut stdout = std::io::stdout();
    let report = format!(
        "LOGGED threads={threads} slowest_us={}\n",
        slowest.as_micros()
    );
    stdout.write_all(report.as_bytes()).unwrap();
    stdout.flush().unwrap();
    for _ in BufReader::new(std::io::stdin())
        .lines()
        .map_while(Result::ok)
    {}
}

/// In the re-run (its environment names how many lines): logs them, and says so.
fn ran_as_logger() -> bool {
    let Some(lines) = std::env::var_os(BURST) else {
        return false;
    };
    burst_logger(lines.to_str().unwrap().parse().unwrap());
    true
}

/// The lines in a burst: enough that a thread started for any of them is seen.
const LINES: usize = 2000;

#[test]
fn a_burst_of_lines_to_dev_null_starts_no_writer_thread() {
    let name = "a_burst_of_lines_to_dev_null_starts_no_writer_thread";
    if ran_as_logger() {
        return;
    }
    let _w = watchdog("stderr_dev_null", Duration::from_secs(60));
    let mut logger = Logger::start(name, LINES, Stdio::null(), None);
    let (threads, _) = logger.logged();
    assert_eq!(threads, 0, "a writer thread ran for /dev/null");
    logger.finish();
}

#[test]
fn a_burst_of_lines_to_a_read_pty_starts_no_writer_thread_and_every_line_arrives() {
    let name = "a_burst_of_lines_to_a_read_pty_starts_no_writer_thread_and_every_line_arrives";
    if ran_as_logger() {
        return;
    }
    let _w = watchdog("stderr_read_pty", Duration::from_secs(60));
    let mut logger = Logger::start(name, LINES, Stdio::null(), Some("read"));
    let (threads, _) = logger.logged();
    assert_eq!(threads, 0, "a writer thread ran for a pty that is read");
    logger.finish();
    let report: Value = serde_json::from_str(&logger.line_starting("{\"numbers\"")).unwrap();
    let expected: Vec<usize> = (0..LINES).collect();
    assert_eq!(
        report["numbers"],
        json!(expected),
        "lines lost or out of order"
    );
    assert_eq!(report["dropped"], json!([]));
}

/// A tty whose output is stopped (Ctrl-S) takes nothing: the lines are kept while they fit,
/// the rest dropped and counted, and the logger never waits. Once output resumes, the kept
/// lines and then the drop notice reach the pty with no further call.
#[test]
fn a_stopped_pty_blocks_no_logger_and_its_text_goes_out_when_resumed() {
    let name = "a_stopped_pty_blocks_no_logger_and_its_text_goes_out_when_resumed";
    if ran_as_logger() {
        return;
    }
    let _w = watchdog("stderr_stopped_pty", Duration::from_secs(60));
    // About 120 KB of lines: more than the sink keeps.
    let lines = 5000;
    let mut logger = Logger::start(name, lines, Stdio::null(), Some("stopped"));
    let (_, slowest) = logger.logged();
    assert!(slowest < Duration::from_secs(1), "a line took {slowest:?}");
    // Only the thread writes now: the logger makes no call until its stdin ends.
    logger.line_starting("{\"notice\"");
    logger.finish();
    let report: Value = serde_json::from_str(&logger.line_starting("{\"numbers\"")).unwrap();
    let numbers = report["numbers"].as_array().unwrap();
    let kept = numbers.len();
    assert!(kept > 0 && kept < lines, "{kept} lines kept");
    let expected: Vec<usize> = (0..kept).collect();
    assert_eq!(
        report["numbers"],
        json!(expected),
        "the first lines are kept, in order"
    );
    assert_eq!(
        report["dropped"],
        json!([lines - kept]),
        "every line not kept is counted"
    );
}

/// Fills a fresh pty (non-blocking writes until it takes no more) and `exec`s the command in
/// argv[1..] with that pty as its stderr; nobody ever reads it (the master stays open in the
/// server, unread).
const UNREAD_PTY: &str = r#"
import os, pty, sys
master, slave = pty.openpty()
w = os.open(os.ttyname(slave), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
try:
    while True:
        os.write(w, b"f" * 4096)
except BlockingIOError:
    pass
os.close(w)
os.set_inheritable(master, True)
os.dup2(slave, 2)
os.execv(sys.argv[1], sys.argv[1:])
"#;

/// `mcpipe demo` on a full pty nobody reads answers its flood of diagnostics without delay,
/// counts what it dropped, and ends on SIGTERM at once.
#[test]
fn a_pty_nobody_reads_does_not_block_answers_and_drops_are_counted() {
    let _w = watchdog("stderr_unread_pty", Duration::from_secs(60));
    let mut command = Command::new("python3");
    command.args(["-c", UNREAD_PTY, env!("CARGO_BIN_EXE_mcpipe"), "demo"]);
    let mut demo = Logger::spawn(command, Stdio::null());
    let mut stdin = demo.stdin.take().unwrap();
    let answers = &demo.stdout;
    let mut send = |message: Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
    };
    send(json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                             "clientInfo": { "name": "stderr-test", "version": "0" } } }));
    assert!(util::recv_json(answers)["result"]["protocolVersion"].is_string());
    send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    // Each panic is reported on stderr: far more than the sink keeps.
    for id in 1..=1000 {
        send(json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": { "name": "panic", "arguments": {} } }));
    }
    for _ in 1..=1000 {
        assert_eq!(util::recv_json(answers)["result"]["isError"], true);
    }
    send(
        json!({ "jsonrpc": "2.0", "id": 1001, "method": "tools/call",
                 "params": { "name": "stats", "arguments": {} } }),
    );
    let stats = util::recv_json(answers)["result"]["structuredContent"].clone();
    assert!(
        stats["stderr_lines_dropped"].as_u64().unwrap() > 0,
        "the drop counter counts: {stats}"
    );
    let started = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &demo.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + util::BOUND;
    let code = loop {
        if let Some(status) = demo.child.try_wait().unwrap() {
            break status.code();
        }
        assert!(Instant::now() < deadline, "the demo did not exit");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(code, Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "SIGTERM took {took:?}");
}
