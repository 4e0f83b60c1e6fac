//! The server, the wrapper and the diagnostics sink in a hostile environment: no thread can be
//! started (a process or thread limit: here every new thread's stack is refused with
//! `RUST_MIN_STACK`), no fd can be had (`RLIMIT_NOFILE` reached). Every test under a watchdog.

mod util;

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use util::mcp::{text, Proc};
use util::watchdog;

const LIMIT: Duration = Duration::from_secs(60);

/// A stack no thread can be given: every thread the process starts after its main one fails
/// with `EAGAIN`/`ENOMEM`, as it does at a process or thread limit.
const NO_THREADS: (&str, &str) = ("RUST_MIN_STACK", "100000000000000");

fn demo_without_threads() -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.arg("demo").env(NO_THREADS.0, NO_THREADS.1);
    Proc::spawn(cmd)
}

#[test]
fn a_concurrent_call_without_a_worker_thread_is_answered_with_an_error_at_once() {
    let _w = watchdog("concurrent_call_without_a_worker_thread", LIMIT);
    let mut p = demo_without_threads();
    p.initialize();
    p.call(1, "sleep", json!({ "ms": 10 }));
    p.call(2, "echo", json!({ "text": "on the loop" }));
    // The echo runs on the loop's thread, the sleep would need a worker: both are answered
    // now, not after the end of input's grace.
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let Some(answer) = p.next_within(Duration::from_secs(5)) else {
            panic!("no answer within 5 s; so far {answers:?}");
        };
        answers.insert(answer["id"].as_i64().unwrap_or(-1), answer);
    }
    let message = answers[&1]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no worker thread could be started"),
        "{}",
        answers[&1]
    );
    assert_eq!(text(&answers[&2]["result"]), "on the loop");
    assert!(p
        .stderr_with("no worker thread")
        .contains("no worker thread could be started"));
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

#[test]
fn a_task_without_a_worker_thread_fails_instead_of_staying_working() {
    let _w = watchdog("task_without_a_worker_thread", LIMIT);
    let mut p = demo_without_threads();
    p.initialize();
    p.request(
        1,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 10 }, "task": { "ttl": 60000 } }),
    );
    let task = p.result(1);
    let id = task["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    p.request(2, "tasks/result", json!({ "taskId": id }));
    let (_, answer) = p.until_response(2);
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no worker thread could be started"),
        "{answer}"
    );
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

/// `mcpipe wrap -- mcpipe demo`, its stdin closed after `request` was written.
fn wrap_once(configure: impl FnOnce(&mut Command)) -> Proc {
    let bin = env!("CARGO_BIN_EXE_mcpipe");
    let mut cmd = Command::new(bin);
    cmd.args(["wrap", "--", bin, "demo"]);
    configure(&mut cmd);
    let mut p = Proc::spawn(cmd);
    p.request(1, "ping", json!({}));
    p.close_stdin();
    p
}

#[test]
fn the_wrapper_without_threads_gives_up_with_the_reason_instead_of_panicking() {
    let _w = watchdog("wrapper_without_threads", LIMIT);
    let mut p = wrap_once(|cmd| {
        cmd.env(NO_THREADS.0, NO_THREADS.1);
    });
    let answer = p.response(1);
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        !answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("panicked"),
        "{answer}"
    );
    assert_eq!(p.wait_exit(), Some(3));
    let stderr = p.stderr_at_end();
    assert!(
        stderr.contains("could not start its supervisor thread"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Whether this process may run a command as another user (`setpriv` needs root): a process
/// limit binds only an unprivileged user.
fn may_change_user() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout == b"0\n")
        && Command::new("setpriv").arg("--help").output().is_ok()
}

#[test]
fn the_wrapper_at_a_process_limit_says_which_thread_it_could_not_start() {
    if !may_change_user() {
        eprintln!("not run: needs root and setpriv(1) to put an unprivileged user at RLIMIT_NPROC");
        return;
    }
    let _w = watchdog("wrapper_at_a_process_limit", LIMIT);
    // As `nobody` with room for 3 tasks: the wrapper, its supervisor and the server; the
    // thread for the server's stderr is the one refused (4 tasks: for its stdin).
    for (limit, pipe) in [(3, "its stderr"), (4, "its stdin")] {
        let mut p = wrap_once(|cmd| {
            let program = cmd.get_program().to_owned();
            let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
            *cmd = Command::new("setpriv");
            cmd.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "prlimit",
            ])
            .arg(format!("--nproc={limit}:{limit}"))
            .arg(program)
            .args(args);
        });
        let answer = p.response(1);
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        let why = format!("no thread could be started for {pipe}");
        assert!(message.contains(&why), "limit {limit}: {answer}");
        assert_eq!(p.wait_exit(), Some(3), "limit {limit}");
        let stderr = p.stderr_at_end();
        assert!(stderr.contains(&why), "limit {limit}: {stderr}");
    }
}

/// Set in the environment of this binary run again at a low fd limit.
const AT_FD_LIMIT: &str = "MCPIPE_TEST_AT_FD_LIMIT";

#[test]
fn a_line_logged_at_the_fd_limit_reaches_stderr_and_logging_goes_on() {
    if std::env::var_os(AT_FD_LIMIT).is_some() {
        // The re-run: every fd taken, then a line (the sink's first use), then fds again.
        let mut held = Vec::new();
        while let Ok(file) = std::fs::File::open("/dev/null") {
            held.push(file);
        }
        mcpipe::stderr_line("hostile-env: said at the fd limit");
        drop(held);
        mcpipe::stderr_line("hostile-env: said with fds to spare");
        return;
    }
    let _w = watchdog("line_logged_at_the_fd_limit", LIMIT);
    // Python lowers RLIMIT_NOFILE (64: quick to fill) and runs this test again; its stderr is
    // a pipe, which the sink would reopen or duplicate: both need an fd.
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, resource, sys\n\
             resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n\
             os.execv(sys.argv[1], sys.argv[1:])",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([
            "a_line_logged_at_the_fd_limit_reaches_stderr_and_logging_goes_on",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(AT_FD_LIMIT, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("said at the fd limit\n"), "{stderr}");
    assert!(stderr.contains("said with fds to spare\n"), "{stderr}");
}

#[test]
fn the_probe_without_threads_blames_the_thread_not_the_server() {
    let _w = watchdog("probe_without_threads", LIMIT);
    let bin = env!("CARGO_BIN_EXE_mcpipe");
    let out = Command::new(bin)
        .args(["probe", "--", bin, "demo"])
        .env(NO_THREADS.0, NO_THREADS.1)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{report}");
    assert!(
        report.contains("no thread could be started to fork it"),
        "{report}"
    );
}

/// `mcpipe ARGS` with stdout on `stdout` and stdin kept open (the output alone must end it),
/// one ping written; its exit status, its stderr, and the wrapper's server (`wrap` only: its
/// pid, once it runs).
fn ended_by_its_output(
    args: &[&str],
    stdout: std::process::Stdio,
) -> (Option<i32>, String, Option<u32>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcpipe"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut server = None;
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while args[0] == "wrap" && server.is_none() && std::time::Instant::now() < until {
        // The wrapper starts its server at once (unless it ended at once).
        if child.try_wait().unwrap().is_some() {
            break;
        }
        server = util::procs::all()
            .into_iter()
            .find(|p| p.ppid == pid && p.live())
            .map(|p| p.pid);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stdin = child.stdin.take().unwrap();
    // It may have ended already (a reader that went away is seen at once).
    let _ = std::io::Write::write_all(
        &mut stdin,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
    );
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr, server)
}

#[test]
fn an_output_that_refuses_writes_is_said_on_stderr_not_taken_for_a_peer_gone() {
    let _w = watchdog("output_that_refuses_writes", LIMIT);
    // /dev/full: every write fails with ENOSPC, as on a full disk.
    if std::fs::metadata("/dev/full").is_err() {
        eprintln!("not run: no /dev/full");
        return;
    }
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    // A server that ignores the end of its input and SIGTERM: only the wrapper's end stops it.
    let hazards = util::wrap::fixture("wrap_hazards.py");
    let wrapped = ["wrap", "--", "python3", &hazards, "stubborn"];
    for args in [&["demo"][..], &wrapped[..]] {
        let (code, stderr, server) = ended_by_its_output(args, full().into());
        assert!(
            stderr.contains("the output cannot be written (No space left on device"),
            "{args:?}: {stderr}"
        );
        // Field review: it exited 0, as for a peer gone, so `mcpipe demo > file` on a full
        // disk reported success.
        assert_eq!(code, Some(1), "{args:?} on a full output; stderr: {stderr}");
        assert!(
            stderr.contains("i/o error while writing the output: No space left on device"),
            "{args:?}: {stderr}"
        );
        if args[0] == "wrap" {
            let server = server.expect("the wrapper's server was seen");
            if !util::wrap::gone_within(server, Duration::from_secs(5)) {
                let _ = Command::new("kill")
                    .args(["-KILL", &server.to_string()])
                    .status();
                panic!("the wrapped server {server} outlived the wrapper");
            }
        }
    }
    // A reader that went away (EPIPE) is a normal end.
    for args in [&["demo"][..], &wrapped[..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let (code, stderr, _) = ended_by_its_output(args, writer.into());
        assert_eq!(
            code,
            Some(0),
            "{args:?} with its reader gone; stderr: {stderr}"
        );
        assert!(!stderr.contains("cannot be written"), "{args:?}: {stderr}");
    }
}

/// Field review: a file stdout that reaches `RLIMIT_FSIZE` (`ulimit -f`, a supervisor's cap on
/// a log) raised SIGXFSZ, whose default action killed the server mid-write, with no word on
/// stderr and no shutdown. The loop ignores SIGXFSZ while it writes, so the write fails with
/// `EFBIG` and ends serving as any other output that refuses writes: said on stderr, exit 1.
#[test]
fn an_output_file_past_the_file_size_limit_is_a_write_error_not_a_kill() {
    use std::os::unix::process::ExitStatusExt;
    let _w = watchdog("output_past_the_file_size_limit", LIMIT);
    let file = util::Scratch::new("mcpipe-hostile-fsize.jsonl");
    let output = std::fs::File::create(&*file).unwrap();
    // One 512-byte block (dash and bash agree on `-f` being in blocks of 512 or 1024 bytes:
    // either way far less than the answers below).
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -f 1 && exec \"$0\" demo"])
        .arg(env!("CARGO_BIN_EXE_mcpipe"))
        .stdin(std::process::Stdio::piped())
        .stdout(output)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pings: String = (1..=400)
        .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"))
        .collect();
    // It may have ended before it read them all.
    let _ = std::io::Write::write_all(&mut stdin, pings.as_bytes());
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        None,
        "killed by a signal; stderr: {stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("i/o error while writing the output: File too large"),
        "{stderr}"
    );
    let written = std::fs::metadata(&*file).unwrap().len();
    assert!(written <= 1024, "{written} bytes past the limit");
}
