//! `run_command` in a program that ignores `SIGCHLD`: the kernel reaps the command as it
//! exits, so waiting for it fails with `ECHILD`. The call must still return the command's
//! output, say that its exit status is unknown (`ChildOutput::status` is `None`), and leave no
//! process behind: on the loop's thread (`Context::run_command`) and on a worker
//! (`McpContext::run_command` in a concurrent tool), for a command that exits by itself and
//! one stopped at its timeout.
//!
//! A signal's disposition is the whole process's, so the test runs itself again in a child
//! process with `SIGCHLD` ignored (set by Python, which then `exec`s: an ignored signal stays
//! ignored across `exec`), as `client_sigchld.rs` does; only that child runs commands.
#![cfg(target_os = "linux")]

mod util;

use std::io::Write;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use mcpipe::{
    ChildOutput, Context, ErrorObject, Handler, McpServer, Request, Server, Tool, ToolResult,
};
use serde_json::{json, Value};
use util::sigchld;
use util::{line_channel, recv_json, request, test_server, watchdog, BOUND};

const TEST: &str = "run_command_works_when_the_program_ignores_sigchld";

#[test]
fn run_command_works_when_the_program_ignores_sigchld() {
    if sigchld::is_rerun() {
        // Its own watchdog (it ends this process): the outer one cannot end it.
        let _w = watchdog("run_sigchld_inner", Duration::from_secs(50));
        return with_sigchld_ignored();
    }
    let _w = watchdog("run_sigchld", Duration::from_secs(60));
    sigchld::rerun_with_sigchld_ignored(TEST);
}

/// What a test reads back from a run: the output, the status, and whether it timed out.
fn report(out: &ChildOutput) -> Value {
    json!({
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
        "known": out.status.is_some(),
        "code": out.status.and_then(|s| s.code()),
        "timed_out": out.timed_out,
    })
}

/// A `sh -c` command from a request's params: `script`, and `timeout_ms`.
fn command(params: &Value) -> (Command, Option<Duration>) {
    let mut command = Command::new("sh");
    command.args(["-c", params["script"].as_str().unwrap_or("exit 9")]);
    let timeout = params["timeout_ms"].as_u64().map(Duration::from_millis);
    (command, timeout)
}

/// A raw handler that runs the request's command on the loop's thread.
struct OnLoop;

impl Handler for OnLoop {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        let (command, timeout) = command(req.params.as_ref().unwrap_or(&Value::Null));
        let out = cx
            .run_command(command, 1 << 16, timeout)
            .map_err(|e| ErrorObject::internal(e.to_string()))?;
        Ok(report(&out))
    }
}

/// The `sleep`s a command leaves behind, found by their argument (a duration no other test
/// uses); dropping it kills those still alive, so a failing test leaves nothing behind.
struct Leftovers(String);

impl Leftovers {
    fn new(case: u32) -> Leftovers {
        Leftovers(format!("300.{}{case:02}", std::process::id()))
    }

    fn alive(&self) -> Vec<u32> {
        let wanted = format!("sleep\0{}\0", self.0);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie = stat
                    .rfind(')')
                    .is_some_and(|i| stat[i + 1..].trim_start().starts_with(['Z', 'X']));
                !zombie
                    && std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c == wanted.as_bytes())
            })
            .collect()
    }

    /// Waits (bounded) until none is left.
    fn assert_gone(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.alive().is_empty() {
            assert!(Instant::now() < deadline, "left behind: {:?}", self.alive());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in self.alive() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The two commands, each with what it leaves behind: one that writes to both pipes, starts a
/// `sleep` in its group and exits 3; one stopped at its 300 ms timeout.
fn cases(base: u32) -> [(Leftovers, Value); 2] {
    let (a, b) = (Leftovers::new(base), Leftovers::new(base + 1));
    let exits = json!({ "script": format!("echo out; echo err >&2; sleep {} & exit 3", a.0) });
    let stopped = json!({ "script": format!("echo started; sleep {} & exec sleep {}", b.0, b.0),
                          "timeout_ms": 300 });
    [(a, exits), (b, stopped)]
}

/// Checks a report against its case (`timed_out`: the second one).
fn check(report: &Value, timed_out: bool) {
    assert_eq!(report["known"], false, "the kernel reaped it: {report}");
    assert_eq!(report["code"], Value::Null, "{report}");
    assert_eq!(report["timed_out"], timed_out, "{report}");
    if timed_out {
        assert_eq!(report["stdout"], "started\n", "{report}");
    } else {
        assert_eq!(report["stdout"], "out\n", "{report}");
        assert_eq!(report["stderr"], "err\n", "{report}");
    }
}

/// Serves the handler `make` makes (on the loop's thread: an `McpServer` is not `Send`) over
/// pipes; the input's writer, the output's lines, and a channel that says when the loop ended.
fn serve<H: Handler + 'static>(
    server: Server,
    make: impl FnOnce() -> H + Send + 'static,
) -> (std::io::PipeWriter, Receiver<Vec<u8>>, Receiver<bool>) {
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (done_tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        let mut handler = make();
        let outcome = server.serve(in_r.as_fd(), out_w.as_fd(), &mut handler);
        drop(out_w);
        let _ = done_tx.send(outcome.is_ok());
    });
    (in_w, line_channel(out_r), done)
}

fn with_sigchld_ignored() {
    sigchld::assert_sigchld_ignored();

    // On the loop's thread.
    let (mut input, output, done) = serve(test_server(), || OnLoop);
    for (i, (leftovers, params)) in cases(1).into_iter().enumerate() {
        input.write_all(&request(i, "run", params)).unwrap();
        let answer = recv_json(&output);
        let report = answer
            .get("result")
            .unwrap_or_else(|| panic!("on the loop's thread: {answer}"));
        check(report, i == 1);
        leftovers.assert_gone();
    }
    drop(input);
    assert_eq!(done.recv_timeout(BOUND), Ok(true), "the loop ended");

    // On a worker: a concurrent tool.
    let mcp = || {
        McpServer::new("run", "0", ()).concurrent_tool(
            Tool::new("run", "Runs a shell script")
                .arg("script", "string", "The script")
                .optional_arg("timeout_ms", "integer", "The timeout"),
            |args, cx| {
                let (command, timeout) = command(&Value::Object(args.as_map().clone()));
                let out = cx.run_command(command, 1 << 16, timeout)?;
                Ok(ToolResult::structured(report(&out)))
            },
        )
    };
    let (mut input, output, done) = serve(test_server(), mcp);
    input
        .write_all(&request(
            0,
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "0" } }),
        ))
        .unwrap();
    assert!(recv_json(&output).get("result").is_some());
    for (i, (leftovers, arguments)) in cases(3).into_iter().enumerate() {
        let params = json!({ "name": "run", "arguments": arguments });
        input
            .write_all(&request(i + 1, "tools/call", params))
            .unwrap();
        let answer = recv_json(&output);
        let result = &answer["result"];
        assert_eq!(result["isError"], Value::Null, "on a worker: {answer}");
        check(&result["structuredContent"], i == 1);
        leftovers.assert_gone();
    }
    drop(input);
    assert_eq!(done.recv_timeout(BOUND), Ok(true), "the loop ended");
}
