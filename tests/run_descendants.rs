//! No process left behind by `run_command`: every descendant of the command is ended with it,
//! also one that left the command's process group and session with `setsid` (which a signal to
//! the group misses), however the call ends: the command exits, its timeout, a cancellation,
//! SIGTERM to the server, end of input, the client closing both pipes. On a worker thread
//! (`mcpipe demo`'s `run`, a concurrent tool) and on the loop's thread (a raw handler served in
//! this process). Linux only (/proc); elsewhere only the process group is ended.
#![cfg(target_os = "linux")]

mod util;

use std::io::Write;
use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcpipe::{Context, ErrorObject, Handler, Request};
use serde_json::{json, Value};
use util::mcp::Proc;
use util::{line_channel, recv_json, test_server, watchdog, BOUND};

/// How long each test may take before the watchdog fails it.
const LIMIT: Duration = Duration::from_secs(60);

/// The `sleep`s of one test, found by their argument: a duration no other test uses. Dropping
/// it kills those still alive, so a failing test leaves nothing behind either.
struct Sleeps {
    marker: String,
}

impl Sleeps {
    fn new(case: u32) -> Sleeps {
        Sleeps {
            marker: format!("300.{}{case:02}", std::process::id()),
        }
    }

    /// Three sleeps, one of them in a session of its own, then `echo hi` once `last` exits.
    fn script(&self, last: &str) -> String {
        let m = &self.marker;
        format!("sleep {m} & setsid sleep {m} & sleep {last}; echo hi")
    }

    /// A command that runs until it is stopped.
    fn endless(&self) -> String {
        self.script(&self.marker)
    }

    /// The live ones: pid, and whether it leads a session (the `setsid` one).
    fn alive(&self) -> Vec<(u32, bool)> {
        let wanted = format!("sleep\0{}\0", self.marker);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted.as_bytes())
            })
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                // After the command name: state, ppid, pgrp, session.
                let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
                let live = !matches!(fields.first(), Some(&("Z" | "X")) | None);
                let session: u32 = fields.get(3)?.parse().ok()?;
                live.then_some((pid, session == pid))
            })
            .collect()
    }

    /// Waits until `count` of them run, one in a session of its own; that one's pid.
    fn started(&self, count: usize) -> u32 {
        let end = Instant::now() + BOUND;
        loop {
            let alive = self.alive();
            if alive.len() >= count {
                if let Some(&(pid, _)) = alive.iter().find(|(_, leader)| *leader) {
                    return pid;
                }
            }
            assert!(Instant::now() < end, "the command did not start: {alive:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every one is gone within a second or two, the `setsid` grandchild among them.
    fn assert_all_gone(&self, grandchild: u32) {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let left = self.alive();
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < end,
                "left behind: {left:?} (the setsid grandchild is {grandchild})"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Sleeps {
    fn drop(&mut self) {
        for (pid, _) in self.alive() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// `mcpipe demo --allow-run` with `flags`, initialized, running `script` as call 1.
fn demo_running_with(flags: &[&str], script: &str, timeout_ms: Option<u64>) -> Proc {
    let mut demo = Proc::demo(&[&["--allow-run"], flags].concat());
    demo.initialize();
    let mut arguments = json!({ "argv": ["sh", "-c", script] });
    if let Some(ms) = timeout_ms {
        arguments["timeout_ms"] = json!(ms);
    }
    demo.call(1, "run", arguments);
    demo
}

/// `mcpipe demo --allow-run`, initialized, running `script` as call 1.
fn demo_running(script: &str, timeout_ms: Option<u64>) -> Proc {
    demo_running_with(&[], script, timeout_ms)
}

#[test]
fn a_command_that_exits_takes_its_setsid_grandchild_with_it() {
    let _w = watchdog("run_exits", LIMIT);
    let sleeps = Sleeps::new(1);
    let mut demo = demo_running(&sleeps.script("1"), None);
    let grandchild = sleeps.started(2);
    let result = demo.result(1);
    assert_eq!(result["structuredContent"]["stdout"], "hi\n", "{result}");
    sleeps.assert_all_gone(grandchild);
}

#[test]
fn a_command_stopped_at_its_timeout_takes_its_setsid_grandchild_with_it() {
    let _w = watchdog("run_timeout", LIMIT);
    let sleeps = Sleeps::new(2);
    let mut demo = demo_running(&sleeps.endless(), Some(2000));
    let grandchild = sleeps.started(3);
    let result = demo.result(1);
    assert_eq!(result["structuredContent"]["timed_out"], true, "{result}");
    sleeps.assert_all_gone(grandchild);
}

#[test]
fn a_cancelled_command_takes_its_setsid_grandchild_with_it() {
    let _w = watchdog("run_cancel", LIMIT);
    let sleeps = Sleeps::new(3);
    let mut demo = demo_running(&sleeps.endless(), None);
    let grandchild = sleeps.started(3);
    demo.cancel(1);
    demo.request(2, "ping", json!({}));
    assert_eq!(demo.next()["id"], 2, "the cancelled call gets no answer");
    sleeps.assert_all_gone(grandchild);
}

#[test]
fn sigterm_to_the_server_ends_the_setsid_grandchild_of_a_running_command() {
    let _w = watchdog("run_sigterm", LIMIT);
    let sleeps = Sleeps::new(4);
    let mut demo = demo_running(&sleeps.endless(), None);
    let grandchild = sleeps.started(3);
    demo.signal("TERM");
    assert_eq!(demo.wait_exit(), Some(0));
    sleeps.assert_all_gone(grandchild);
}

#[test]
fn end_of_input_ends_the_setsid_grandchild_of_a_running_command() {
    let _w = watchdog("run_eof", LIMIT);
    let sleeps = Sleeps::new(5);
    // The server lets running calls finish for its shutdown grace (10 s by default) before it
    // stops them; a short one keeps the test quick and shows that the flag is honoured.
    let mut demo = demo_running_with(&["--shutdown-grace-ms", "200"], &sleeps.endless(), None);
    let grandchild = sleeps.started(3);
    demo.close_stdin();
    assert_eq!(demo.wait_exit_within(Duration::from_secs(5)), Some(0));
    sleeps.assert_all_gone(grandchild);
}

/// The server's process; killed when dropped, so a failing test leaves no server behind.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_client_that_closes_both_pipes_ends_the_setsid_grandchild_of_a_running_command() {
    let _w = watchdog("run_close_both", LIMIT);
    let sleeps = Sleeps::new(6);
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_mcpipe"))
            .args(["demo", "--allow-run"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdin = server.0.stdin.take().unwrap();
    let lines = [
        json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": { "name": "t", "version": "0" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": { "name": "run",
                            "arguments": { "argv": ["sh", "-c", sleeps.endless()] } } }),
    ];
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let grandchild = sleeps.started(3);
    drop(stdin);
    drop(server.0.stdout.take());
    let end = Instant::now() + BOUND;
    while server.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the server did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    sleeps.assert_all_gone(grandchild);
}

/// A raw handler that runs one shell script on the loop's thread.
struct Runner {
    script: String,
}

impl Handler for Runner {
    fn handle_request(
        &mut self,
        _req: Request,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let mut command = Command::new("sh");
        command.args(["-c", &self.script]);
        let out = cx
            .run_command(command, 1 << 16, None)
            .map_err(|e| ErrorObject::internal(e.to_string()))?;
        Ok(json!({ "stdout": String::from_utf8_lossy(&out.stdout) }))
    }
}

/// On the loop's thread: a command that exits, and one still running at end of input.
#[test]
fn on_the_loops_thread_a_command_takes_its_setsid_grandchild_with_it() {
    let _w = watchdog("run_on_loop", LIMIT);
    for (case, exits) in [(7, true), (8, false)] {
        let sleeps = Sleeps::new(case);
        let script = if exits {
            sleeps.script("1")
        } else {
            sleeps.endless()
        };
        let (in_r, mut in_w) = std::io::pipe().unwrap();
        let (out_r, out_w) = std::io::pipe().unwrap();
        let (done_tx, done) = mpsc::channel();
        std::thread::spawn(move || {
            let server = test_server().shutdown_grace(Duration::from_millis(100));
            let outcome = server.serve(in_r.as_fd(), out_w.as_fd(), &mut Runner { script });
            drop(out_w);
            let _ = done_tx.send(outcome.is_ok());
        });
        let output = line_channel(out_r);
        in_w.write_all(&util::request(1, "run", json!({}))).unwrap();
        let grandchild = sleeps.started(if exits { 2 } else { 3 });
        if exits {
            assert_eq!(recv_json(&output)["result"]["stdout"], "hi\n");
        }
        drop(in_w);
        assert_eq!(done.recv_timeout(BOUND), Ok(true), "the loop ended");
        sleeps.assert_all_gone(grandchild);
    }
}
