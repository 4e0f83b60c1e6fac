//! `mcpipe wrap` in front of misbehaving servers (tests/fixtures/wrap_hazards.py), over pipes,
//! each test under a watchdog; process checks in tests/util/procs.rs.

mod util;

use std::collections::HashSet;
use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use util::mcp::Proc;
use util::watchdog;
use util::wrap::{alive, burst, fixture, gone_within, pid_file, pids_in, wrapped};

#[test]
fn a_banner_on_stdout_goes_to_stderr_and_only_json_rpc_reaches_the_client() {
    let _w = watchdog("wrap_banner", Duration::from_secs(60));
    let mut p = wrapped(&[], "banner", None);
    burst(&mut p);
    assert!(p.result(0)["protocolVersion"].is_string());
    assert!(p.result(1)["tools"].is_array());
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    let stderr = p.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("hazard (stdout, not JSON-RPC): Welcome"),
        "{stderr}"
    );
}

#[test]
fn bad_input_is_answered_by_the_wrapper_and_never_reaches_the_server() {
    let _w = watchdog("wrap_bad_input", Duration::from_secs(60));
    let mut p = wrapped(&[], "dies-on-bad-json", None);
    burst(&mut p);
    p.result(1);
    p.write_raw(b"{not json\n[]\n{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\"}\n\xff\xfe\n");
    for _ in 0..4 {
        let error = p.next();
        assert!(error["error"]["code"].as_i64().is_some(), "{error}");
    }
    // The server is alive and the same process: no restart happened.
    p.call(2, "echo", json!({}));
    assert_eq!(p.result(2)["content"][0]["text"], "ok");
    let stderr = p.stderr.lock().unwrap().clone();
    assert!(!stderr.contains("restarting"), "{stderr}");
}

#[test]
fn a_burst_is_answered_at_once_by_a_server_that_over_reads() {
    let _w = watchdog("wrap_overread", Duration::from_secs(60));
    let mut p = wrapped(&[], "overread", None);
    let started = Instant::now();
    burst(&mut p);
    p.result(0);
    p.result(1);
    // Without pacing the `tools/list` waits in the server's buffer until its 60 s poll ends.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn end_of_input_ends_a_server_that_ignores_eof_and_sigterm() {
    let _w = watchdog("wrap_stubborn", Duration::from_secs(60));
    let mut p = wrapped(&["--grace-ms", "200"], "stubborn", None);
    burst(&mut p);
    p.result(1);
    let server = server_pid(&p);
    let started = Instant::now();
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(
        gone_within(server, Duration::from_secs(1)),
        "the server {server} survived"
    );
}

#[test]
fn sigterm_to_the_wrapper_ends_it_and_the_whole_tree_within_a_second() {
    let _w = watchdog("wrap_sigterm", Duration::from_secs(60));
    let pids = pid_file("sigterm");
    let mut p = wrapped(&[], "setsid", pids.to_str());
    burst(&mut p);
    p.result(1);
    let server = server_pid(&p);
    let grandchild = pids_in(&pids)[0];
    assert!(alive(grandchild));
    let started = Instant::now();
    p.signal("TERM");
    let code = p.wait_exit();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(code, Some(128 + 15));
    assert!(gone_within(server, Duration::from_secs(1)));
    // Linux only: elsewhere nothing tracks a descendant out of the group (docs/wrap.md).
    if cfg!(target_os = "linux") {
        assert!(
            gone_within(grandchild, Duration::from_secs(1)),
            "the setsid grandchild survived"
        );
    } else {
        let _ = Command::new("kill")
            .args(["-KILL", &grandchild.to_string()])
            .status();
    }
}

/// Field test: the Python SDK closes the wrapper's stdin, waits 2 s, then SIGTERMs it; mcp-cron
/// 0.9.1 ignores SIGTERM once its stdin ended. The SIGTERM came in the wrapper's end-of-input
/// grace, after its loop had put the default handlers back: the wrapper died at once (143),
/// and the server ran on, orphaned to init. A signal then shortens the end as during serving.
#[test]
fn sigterm_during_the_end_of_input_grace_still_ends_the_server() {
    let _w = watchdog("wrap_sigterm_in_grace", Duration::from_secs(60));
    let mut p = wrapped(&["--grace-ms", "3000"], "stubborn", None);
    burst(&mut p);
    p.result(1);
    let server = server_pid(&p);
    p.close_stdin();
    // In the grace: the server's stdin is closed and it runs on.
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(server), "the server ended before the signal");
    let started = Instant::now();
    p.signal("TERM");
    let code = p.wait_exit();
    let took = started.elapsed();
    let survived = !gone_within(server, Duration::from_secs(2));
    if survived {
        let _ = Command::new("kill")
            .args(["-KILL", &server.to_string()])
            .status();
    }
    assert!(
        !survived,
        "the server {server} outlived the wrapper (exit {code:?})"
    );
    assert_eq!(code, Some(128 + 15));
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// A stopped server (SIGSTOP, a debugger) acts on SIGTERM only once it runs again: the wrapper
/// follows its SIGTERM with SIGCONT, so the server ends in order rather than by SIGKILL.
#[test]
fn a_stopped_server_is_continued_so_that_it_ends_on_sigterm() {
    let _w = watchdog("wrap_stopped", Duration::from_secs(60));
    let log = pid_file("stopped");
    let mut p = wrapped(&["--grace-ms", "200"], "deaf-logs-term", log.to_str());
    burst(&mut p);
    p.result(1);
    let server = server_pid(&p);
    let stopped = Command::new("kill")
        .args(["-STOP", &server.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    assert!(gone_within(server, Duration::from_secs(1)));
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert_eq!(
        logged, "SIGTERM\n",
        "the stopped server never ran its SIGTERM handler (SIGKILL ended it)"
    );
}

#[cfg(target_os = "linux")] // elsewhere a descendant out of the group survives (docs/wrap.md)
#[test]
fn end_of_input_leaves_no_setsid_grandchild_behind() {
    let _w = watchdog("wrap_setsid", Duration::from_secs(60));
    let pids = pid_file("setsid");
    let mut p = wrapped(&["--grace-ms", "200"], "setsid", pids.to_str());
    burst(&mut p);
    p.result(1);
    let grandchild = pids_in(&pids)[0];
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    assert!(
        gone_within(grandchild, Duration::from_secs(1)),
        "the setsid grandchild survived"
    );
}

#[test]
fn an_overdue_request_is_answered_with_an_error_and_cancelled() {
    let _w = watchdog("wrap_deadline", Duration::from_secs(60));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.args(["wrap", "--timeout-ms", "300", "--grace-ms", "100", "--"]);
    cmd.arg("python3").arg(fixture("never_answers.py"));
    let mut p = Proc::spawn(cmd);
    let started = Instant::now();
    p.request(1, "ping", json!({}));
    let error = p.response(1);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("within 300 ms"),
        "{error}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// The wrapped server's pid: the wrapper's one child process.
fn server_pid(p: &Proc) -> u32 {
    let wrapper = p.pid();
    let children = util::mcp::processes_where(|state, ppid, _| ppid == wrapper && state != "Z");
    assert_eq!(children.len(), 1, "the wrapper's children: {children:?}");
    children[0]
}

/// `n` requests in one write, ids from `first`.
fn requests(p: &mut Proc, first: i64, n: i64) {
    let mut bytes = String::new();
    for id in first..first + n {
        bytes.push_str(&json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}).to_string());
        bytes.push('\n');
    }
    p.write_raw(bytes.as_bytes());
}

#[test]
fn a_server_that_holds_a_probed_request_stays_paced_and_every_request_is_answered() {
    // Three requests in one write after the handshake: the first goes straight in, the next
    // two become the probe (one write), the over-reading server answers one and sleeps with
    // the other in its buffer; the probe times out, a ping frees it, and from then on it is
    // paced. Without that ping the third answer waits for the server's 60 s poll.
    let _w = watchdog("wrap_probe_fails", Duration::from_secs(60));
    let mut p = wrapped(&[], "overread", None);
    burst(&mut p);
    p.result(0);
    p.result(1);
    let started = Instant::now();
    requests(&mut p, 2, 3);
    for id in 2..5 {
        assert!(p.result(id)["tools"].is_array());
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Paced for good: later bursts are answered at once too.
    let started = Instant::now();
    requests(&mut p, 5, 6);
    for id in 5..11 {
        assert!(p.result(id)["tools"].is_array());
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    let stderr = p.stderr.lock().unwrap().clone();
    assert!(!stderr.contains("in batches"), "{stderr}");
}

#[test]
fn a_server_that_answers_lines_that_arrive_together_gets_them_in_batches() {
    let _w = watchdog("wrap_probe_passes", Duration::from_secs(60));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.args([
        "wrap",
        "--name",
        "demo",
        "--",
        env!("CARGO_BIN_EXE_mcpipe"),
        "demo",
    ]);
    let mut p = Proc::spawn(cmd);
    burst(&mut p);
    p.result(0);
    p.result(1);
    // Bursts until a probe was made (the first request of a burst goes straight in, so one
    // burst of three is enough; more only if the server was quick to empty the pipe).
    let mut id = 2;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        requests(&mut p, id, 50);
        for i in id..id + 50 {
            assert!(p.result(i)["tools"].is_array());
        }
        id += 50;
        let stderr = p.stderr.lock().unwrap().clone();
        if stderr.contains("demo handles lines that arrive together; writing them in batches") {
            break;
        }
        assert!(Instant::now() < until, "never proven: {stderr}");
    }
    // Proven: what the loop gathers for the server in a pass is written once it caught up,
    // a burst's lines and a lone request's alike.
    requests(&mut p, id, 50);
    for i in id..id + 51 {
        if i == id + 50 {
            requests(&mut p, i, 1);
        }
        assert!(p.result(i)["tools"].is_array());
    }
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

#[test]
fn what_the_client_sends_reaches_the_server_byte_for_byte() {
    let _w = watchdog("wrap_byte_exact", Duration::from_secs(60));
    let mut p = wrapped(&[], "lines", None);
    // Spacing, member order, number spellings and escapes that writing a parsed message again
    // would change.
    let init = r#"{ "params": {"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}, "method":"initialize", "id":0, "jsonrpc":"2.0" }"#;
    let initialized = r#"{"method":"notifications/initialized" ,"jsonrpc":"2.0"}"#;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"z":1.50,"a":"\u00e9\/","big":12345678901234567890123}}}"#;
    p.write_raw(format!("{init}\n{initialized}\n{call}\n").as_bytes());
    assert_eq!(p.result(0)["lines"], json!([format!("{init}\n")]));
    assert_eq!(
        p.result(1)["lines"],
        json!([format!("{initialized}\n"), format!("{call}\n")])
    );
    // The server's ping; the client's answer, spelled its own way, goes back unchanged.
    let ping = p.next();
    assert_eq!(ping["id"], "from-server", "{ping}");
    let answer = r#"{"result": {}, "id": "from-server", "jsonrpc": "2.0"}"#;
    let next = r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"},"id":2}"#;
    p.write_raw(format!("{answer}\n{next}\n").as_bytes());
    assert_eq!(
        p.result(2)["lines"],
        json!([format!("{answer}\n"), format!("{next}\n")])
    );
}

#[test]
fn a_server_that_stops_reading_holds_the_client_back_and_the_wrapper_stays_small() {
    let _w = watchdog("wrap_deaf", Duration::from_secs(60));
    let mut p = wrapped(&[], "deaf", None);
    burst(&mut p);
    p.result(0);
    p.result(1);
    // 300 requests of 64 KiB (19 MiB), each in a write of its own, from a thread: once the
    // wrapper holds its input (1 MiB waiting for the server, 4 MiB read ahead), they block.
    let mut stdin = p.take_stdin();
    let written = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&written);
    let writer = std::thread::spawn(move || {
        let text = "x".repeat(64 << 10);
        for id in 2..302 {
            let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":"echo","arguments":{"text":text}}});
            if stdin.write_all(format!("{call}\n").as_bytes()).is_err() {
                return; // the wrapper ended
            }
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
    // Taken: one line in the server's pipe (it is paced, and never empties it), 1 MiB queued
    // for it (17 lines), 4 MiB read ahead (about 64) and what the pipes hold: about 85. Wait
    // until at least 60 are taken and nothing moves for half a second (a loaded machine can
    // stall the writer that long before the hold).
    let mut last = load(&written);
    let mut still_since = Instant::now();
    let until = Instant::now() + Duration::from_secs(30);
    while last < 60 || still_since.elapsed() < Duration::from_millis(500) {
        assert!(Instant::now() < until, "only {last} requests taken");
        std::thread::sleep(Duration::from_millis(50));
        let now = load(&written);
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
    }
    assert!(
        last < 150,
        "the client was not held back: {last} of 300 requests taken"
    );
    // The memory bound: Linux only (/proc).
    let peak_kib = util::procs::peak_rss_kib(p.pid());
    if let Some(peak_kib) = peak_kib {
        assert!(peak_kib < 40 << 10, "the wrapper grew to {peak_kib} KiB");
    }
    // A signal ends it at once, and every request it read is answered: the one the server
    // holds, and those that never started.
    p.signal("TERM");
    let mut answered = HashSet::new();
    let mut messages = HashSet::new();
    while let Some(answer) = p.next_within(Duration::from_secs(5)) {
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert!(answered.insert(answer["id"].as_i64().unwrap()), "{answer}");
        messages.insert(answer["error"]["message"].as_str().unwrap().to_owned());
    }
    assert_eq!(p.wait_exit(), Some(128 + 15));
    writer.join().unwrap();
    assert!(answered.len() >= 2, "{answered:?}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("before the request started")),
        "{messages:?}"
    );
    eprintln!(
        "held back after {last} requests; peak {peak_kib:?} KiB; {} answered",
        answered.len()
    );
}

#[test]
fn a_server_that_writes_stderr_without_newlines_leaves_the_wrapper_small() {
    let _w = watchdog("wrap_stderr_flood", Duration::from_secs(60));
    let mut p = wrapped(&[], "stderr-flood", None);
    burst(&mut p);
    p.result(1);
    // 100 MiB without a newline, then a line: the wrapper keeps 64 KiB of a line at most.
    let until = Instant::now() + Duration::from_secs(30);
    while !p.stderr.lock().unwrap().contains("hazard: flood done") {
        assert!(Instant::now() < until, "the flood never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The memory bound: Linux only (/proc).
    let peak = util::procs::peak_rss_kib(p.pid());
    if let Some(peak) = peak {
        assert!(peak < 40 << 10, "the wrapper grew to {peak} KiB");
    }
    p.call(2, "echo", json!({}));
    assert_eq!(p.result(2)["content"][0]["text"], "ok");
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    let stderr = p.stderr.lock().unwrap().clone();
    assert!(
        stderr.contains("hazard: (a stderr line over 65536 bytes, dropped)"),
        "{}",
        &stderr[..stderr.len().min(300)]
    );
    eprintln!("peak {peak:?} KiB");
}

/// Requests with ids under each of the wrapper's own prefixes, and a plain one; returns the
/// answers by id (each checked to be the server's answer: `{"lines": [...]}`).
fn ids_under_the_wrappers_prefixes(p: &mut Proc) -> Vec<(String, String)> {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    p.write_raw(format!("{init}\n").as_bytes());
    p.result(0);
    let ids = [
        "mcpipe-wrap-nudge-1",
        "mcpipe-wrap-replay-1",
        "mcpipe-wrap-relist-tools/list",
        "mcpipe-wrap-client-x",
        "mcpipe-wrap-",
        "plain",
    ];
    let mut seen = Vec::new();
    for id in ids {
        p.send(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo"}}));
        let answer = p.next();
        assert_eq!(answer["id"], id, "{answer}");
        let lines = answer["result"]["lines"]
            .as_array()
            .unwrap_or_else(|| panic!("not the server's answer: {answer}"));
        let line = lines.last().and_then(|l| l.as_str()).unwrap_or_default();
        let sent: serde_json::Value = serde_json::from_str(line).unwrap();
        seen.push((
            id.to_owned(),
            sent["id"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    seen
}

#[test]
fn a_client_id_under_the_wrappers_own_prefix_is_answered_with_the_servers_answer() {
    let _w = watchdog("wrap_own_prefix", Duration::from_secs(60));
    let mut p = wrapped(&[], "lines", None);
    for (id, sent) in ids_under_the_wrappers_prefixes(&mut p) {
        // The server sees it renamed (the wrapper's own ids cannot be taken for it); any
        // other id as it came.
        let want = if id == "plain" {
            id.clone()
        } else {
            format!("mcpipe-wrap-client-{id}")
        };
        assert_eq!(sent, want);
    }
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

#[test]
fn nested_wrappers_answer_every_client_id_with_the_servers_answer() {
    let _w = watchdog("wrap_nested", Duration::from_secs(60));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.args(["wrap", "--name", "outer", "--"]);
    cmd.args([
        env!("CARGO_BIN_EXE_mcpipe"),
        "wrap",
        "--name",
        "inner",
        "--",
    ]);
    cmd.arg("python3")
        .arg(fixture("wrap_hazards.py"))
        .arg("lines");
    let mut p = Proc::spawn(cmd);
    for (id, sent) in ids_under_the_wrappers_prefixes(&mut p) {
        let want = if id == "plain" {
            id.clone()
        } else {
            format!("mcpipe-wrap-client-mcpipe-wrap-client-{id}")
        };
        assert_eq!(sent, want);
    }
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

/// A server that closes `pipe` (its stdout or its stdin) but runs on: the request it holds is
/// answered with an error within a few seconds although the client stays (nothing else is
/// sent: a closed stdin is found without writing to it), the next request is served by a
/// restarted server, and the first one is ended.
fn a_server_that_closes_a_pipe_is_ended_and_restarted(pipe: &str) {
    let test = format!("closes-{pipe}");
    let pids = pid_file(&test);
    let mut p = wrapped(&[], &test, pids.to_str());
    burst(&mut p);
    p.result(1);
    let first = pids_in(&pids)[0];
    let started = Instant::now();
    p.call(2, "close", json!({}));
    let answer = p.response(2);
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("closed its {pipe}")), "{answer}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{took:?}");
    let said = format!("hazard closed its {pipe} but still runs");
    let stderr = p.stderr_with(&said);
    assert!(stderr.contains(&said), "{stderr}");
    p.call(4, "echo", json!({}));
    assert_eq!(p.result(4)["content"][0]["text"], "ok");
    let started = pids_in(&pids);
    assert_eq!(started.len(), 2, "one restart: {started:?}");
    assert!(
        gone_within(first, Duration::from_secs(3)),
        "the server {first} survived"
    );
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    assert!(started
        .iter()
        .all(|pid| gone_within(*pid, Duration::from_secs(2))));
    eprintln!("answered with an error after {took:?}");
}

#[test]
fn a_server_that_closes_its_stdout_but_runs_on_is_ended_and_restarted() {
    let _w = watchdog("wrap_closes_stdout", Duration::from_secs(60));
    a_server_that_closes_a_pipe_is_ended_and_restarted("stdout");
}

// Linux only: the closed stdin is found without writing to it by the pipe's missing reader;
// elsewhere only a write that fails tells (docs/wrap.md).
#[cfg(target_os = "linux")]
#[test]
fn a_server_that_closes_its_stdin_but_runs_on_is_ended_and_restarted() {
    let _w = watchdog("wrap_closes_stdin", Duration::from_secs(60));
    a_server_that_closes_a_pipe_is_ended_and_restarted("stdin");
}

/// Field test: a server's answer that is valid JSON serde_json cannot hold (`10**400` written
/// out, 200 nested arrays) was taken for "not JSON-RPC" and dropped, so the request timed out.
/// The relay judges it by the JSON grammar and forwards it as it came.
#[test]
fn an_answer_serde_json_cannot_hold_is_relayed_as_it_came() {
    let _w = watchdog("wrap_grammar", Duration::from_secs(60));
    for (mode, mark) in [("huge-number", "0".repeat(400)), ("deep", "[".repeat(200))] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
        cmd.args(["wrap", "--name", "grammar", "--", "python3"])
            .arg(fixture("field_hazards.py"))
            .arg(mode);
        let mut p = Proc::spawn(cmd);
        p.initialize();
        p.call(2, "echo", json!({}));
        let line = p
            .next_line_within(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{mode}: no answer; stderr: {}", p.stderr.lock().unwrap()));
        assert!(
            line.contains(r#""id":2"#) && line.contains(&mark),
            "{mode}: {line}"
        );
    }
}

#[test]
fn a_server_path_that_is_not_utf8_is_run_as_given_and_an_option_that_is_not_is_a_usage_error() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let _w = watchdog("wrap_not_utf8", Duration::from_secs(60));
    // A file name is bytes: `srv-\xff.py`, a link to a fixture server.
    let dir = pid_file("not-utf8");
    std::fs::create_dir(&dir).unwrap();
    let script = dir.join(OsStr::from_bytes(b"srv-\xff.py"));
    std::os::unix::fs::symlink(fixture("good_server.py"), &script).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.args(["wrap", "--"]).arg("python3").arg(&script);
    let mut p = Proc::spawn(cmd);
    burst(&mut p);
    assert!(p.result(0)["serverInfo"].is_object());
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    drop(dir);

    let out = Command::new(env!("CARGO_BIN_EXE_mcpipe"))
        .arg("wrap")
        .arg(OsStr::from_bytes(b"--name=\xff"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not valid UTF-8"), "{stderr}");
}

/// Review: the server started only with the client's first message, so its start-up did not
/// overlap the client's, and one that could not start was reported only then. It starts with
/// the wrapper, as it would had the client launched it: what it prints as it starts shows
/// before the client sends anything, and a command that cannot start is reported at once.
#[test]
fn the_server_starts_with_the_wrapper_before_the_client_sends_anything() {
    let _w = watchdog("wrap_starts_at_once", Duration::from_secs(60));
    let stderr_shows = |p: &Proc, text: &str| {
        let until = Instant::now() + Duration::from_secs(10);
        while !p.stderr.lock().unwrap().contains(text) {
            assert!(
                Instant::now() < until,
                "no {text:?} before the client's first message; stderr: {}",
                p.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut p = wrapped(&[], "banner", None);
    stderr_shows(&p, "hazard (stdout, not JSON-RPC): Welcome");
    burst(&mut p);
    assert!(p.result(0)["protocolVersion"].is_string());
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.args(["wrap", "--", "/nonexistent/mcpipe-no-such-server"]);
    let mut p = Proc::spawn(cmd);
    stderr_shows(&p, "could not be started");
    // A request is told why, not "it exited too often, or could not be started".
    p.request(1, "ping", json!({}));
    let refused = p.response(1);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("is not running: it could not be started: ")
            && message.contains("No such file or directory"),
        "{refused}"
    );
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(3));
}

/// Review: a test that failed left its pid file in the temp dir (removed only on the success
/// path). The scratch file goes as the failure unwinds, and the failure is the test's own.
#[test]
fn a_failed_test_leaves_no_pid_file_and_its_failure_stands() {
    let mut written = None;
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let pids = pid_file("failing");
        std::fs::write(&pids, "4242\n").unwrap();
        written = Some(pids.to_path_buf());
        panic!("the test's own failure");
    }));
    let payload = failed.expect_err("the test fails");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"the test's own failure")
    );
    let written = written.unwrap();
    assert!(!written.exists(), "{} was left behind", written.display());
}

/// Set in the environment of this binary's re-run as a test that its watchdog ends.
const HUNG: &str = "MCPIPE_TEST_WRAP_HUNG";

/// The same at a watchdog's exit, which unwinds nothing: a re-run of this test hangs with a
/// scratch directory, its watchdog ends it, and the directory is gone.
#[test]
fn a_test_ended_by_its_watchdog_leaves_no_pid_file() {
    let name = "a_test_ended_by_its_watchdog_leaves_no_pid_file";
    if std::env::var_os(HUNG).is_some() {
        let _w = watchdog("hung_on_purpose", Duration::from_millis(200));
        let dir = pid_file("hung");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("pids"), "4242\n").unwrap();
        writeln!(std::io::stdout(), "SCRATCH {}", dir.display()).unwrap();
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    let _w = watchdog("wrap_scratch_at_watchdog_exit", Duration::from_secs(60));
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(HUNG, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = stdout
        .lines()
        .find_map(|l| l.split_once("SCRATCH ").map(|(_, path)| path))
        .unwrap_or_else(|| panic!("the re-run made no scratch directory: {out:?}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "{stderr}");
    assert!(stderr.contains("WATCHDOG"), "{stderr}");
    let left = std::path::Path::new(dir).exists();
    let _ = std::fs::remove_dir_all(dir);
    assert!(!left, "{dir} was left behind");
}
