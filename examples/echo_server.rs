//! A raw JSON-RPC server over stdio, for trying the loop by hand and for tests to spawn.
//!
//! Run: `cargo run --example echo_server -- [--idle-timeout-ms N] [--max-message-bytes N]
//!       [--no-guard] [--no-signals] [--no-batches] [--orphan-check-ms N] [--report-restore]`
//! then type `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}`.
//!
//! Methods: `echo` (returns its params), `sleep {ms}`, `fail {message}` (an error response),
//! `panic`, `notify {count}` (sends that many notifications first), `noisy` (prints to stdout
//! and runs a child that does too: the protocol must stay clean), `log {bytes}` (a line that
//! long on stderr, through `mcpipe::stderr_line`), `stats`.

use std::process::ExitCode;
use std::time::Duration;

use mcpipe::{Context, ErrorCode, ErrorObject, Handler, Request, Server};
use serde_json::{json, Value};

/// The example's handler; it counts idle-hook runs to show the hook at work.
struct Example {
    idle_runs: u64,
}

impl Handler for Example {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        let params = req.params.unwrap_or(json!({}));
        match req.method.as_str() {
            "echo" => Ok(params),
            "sleep" => {
                let ms = params["ms"]
                    .as_u64()
                    .ok_or_else(|| ErrorObject::invalid_params("sleep needs an integer \"ms\""))?;
                std::thread::sleep(Duration::from_millis(ms));
                Ok(json!({ "slept_ms": ms }))
            }
            "fail" => Err(ErrorObject::new(
                ErrorCode(-32000),
                params["message"].as_str().unwrap_or("failed on purpose"),
            )),
            "panic" => panic!("the example handler panics on purpose"),
            "notify" => {
                let count = params["count"].as_u64().unwrap_or(1);
                for i in 0..count {
                    cx.notify("notifications/example", Some(json!({ "i": i })))
                        .map_err(|e| ErrorObject::internal(e.to_string()))?;
                }
                Ok(json!({ "sent": count }))
            }
            "log" => {
                let bytes = params["bytes"].as_u64().unwrap_or(80);
                let text = "x".repeat(usize::try_from(bytes).unwrap_or(80));
                mcpipe::stderr_line(&format!("echo_server: {text}"));
                Ok(json!({ "logged": bytes }))
            }
            "noisy" => {
                noisy();
                Ok(json!({ "noisy": true }))
            }
            "stats" => {
                let s = cx.stats();
                Ok(json!({
                    "requests": s.requests,
                    "notifications": s.notifications,
                    "bad_messages": s.bad_messages,
                    "oversize_messages": s.oversize_messages,
                    "handler_panics": s.handler_panics,
                    "idle_hooks": s.idle_hooks,
                    "idle_runs": self.idle_runs,
                }))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }

    fn on_idle(&mut self, _cx: &mut Context<'_>) {
        self.idle_runs += 1;
        // On the loop's thread: `eprintln!` would stall the loop on a stderr nobody reads.
        mcpipe::stderr_line(&format!(
            "echo_server: idle hook ran ({} times)",
            self.idle_runs
        ));
    }
}

/// Writes to stdout the ways real servers do by mistake: the stdout guard must keep the
/// protocol stream clean anyway.
#[allow(clippy::print_stdout)]
fn noisy() {
    println!("stray line from a handler's println!");
    print!("stray text without a newline");
    let _ = std::process::Command::new("sh")
        .args(["-c", "echo stray line from a child; cat"])
        .status();
}

/// After the loop, fd 1 is the real stdout again: this line must reach it, after the protocol.
#[allow(clippy::print_stdout)]
fn say_stdout_is_back() {
    println!("stdout restored");
}

/// The status flags of fds 0 and 1 as Linux shows them (empty elsewhere).
fn std_fd_flags() -> Vec<String> {
    (0..2)
        .map(|fd| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .ok()
                .and_then(|info| {
                    info.lines()
                        .find(|l| l.starts_with("flags:"))
                        .map(str::to_owned)
                })
                .unwrap_or_default()
        })
        .collect()
}

fn run() -> Result<(), String> {
    let mut server = Server::new();
    let mut report_restore = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        server = match arg.as_str() {
            "--idle-timeout-ms" => server.idle_timeout(Some(Duration::from_millis(number(&arg)?))),
            "--max-message-bytes" => server.max_message_bytes(number(&arg)? as usize),
            "--no-guard" => server.guard_stdout(false),
            "--no-signals" => server.handle_signals(false),
            "--no-batches" => server.batches(false),
            "--orphan-check-ms" => server.orphan_check(Some(Duration::from_millis(number(&arg)?))),
            "--report-restore" => {
                report_restore = true;
                server
            }
            other => return Err(format!("unknown argument {other}")),
        };
    }
    let flags_before = std_fd_flags();
    let outcome = server
        .serve_stdio(&mut Example { idle_runs: 0 })
        .map_err(|e| e.to_string())?;
    // Not `eprintln!`: on a stderr nobody reads it would keep the process from exiting.
    mcpipe::stderr_line(&format!("echo_server: ended: {outcome}"));
    if report_restore {
        mcpipe::stderr_line(&format!(
            "echo_server: fd flags before: {flags_before:?} after: {:?}",
            std_fd_flags()
        ));
        say_stdout_is_back();
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            mcpipe::stderr_line(&format!("echo_server: {e}"));
            ExitCode::from(2)
        }
    }
}
