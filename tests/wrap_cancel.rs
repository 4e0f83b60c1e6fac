//! `mcpipe wrap` and the client's cancellations: a request whose line still waits in the
//! wrapper (paced behind a server that holds one, or kept for a restarting server) is taken
//! out of the queue, and neither it nor its cancellation reaches the server; one whose line
//! was written is cancelled on the wire; lines taken back free the client's held input. Over
//! pipes, each test under a watchdog.

mod util;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::mcp::Proc;
use util::watchdog;
use util::wrap::{burst, pids_in, received, received_until, wrapped, HeldFiles};

/// `tools/call` of `tool` as a line.
fn call(id: i64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":tool,"arguments":{}}})
    .to_string()
        + "\n"
}

/// A line the wrapper's loop answers itself (-32700), in order with the client's other lines:
/// once its answer is back, every line the client sent before it was handled.
fn sync(p: &mut Proc) {
    p.write_raw(b"{not json\n");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let msg = p
            .next_within(left)
            .expect("the wrapper answers a bad line (it reads the client's input)");
        if msg["error"]["code"] == -32700 {
            return;
        }
    }
}

/// What the server logged of `method`: `field` of each, in the order received.
fn of(log: &PathBuf, method: &str, field: &str) -> Vec<Value> {
    received(log)
        .iter()
        .filter(|m| m["method"] == method)
        .map(|m| m[field].clone())
        .collect()
}

/// The ids of the responses among `messages`.
fn answered(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.get("method").is_none())
        .map(|m| m["id"].clone())
        .collect()
}

#[test]
fn a_cancelled_request_still_queued_in_the_wrapper_never_reaches_the_server() {
    let _w = watchdog("wrap_cancel_queued", Duration::from_secs(60));
    let files = HeldFiles::new("cancel-queued");
    let log = &files.log;
    let mut p = wrapped(&[], "held", log.to_str());
    burst(&mut p);
    p.result(0);
    p.result(1);
    // The server takes call 2 and then reads nothing until told to.
    p.write_raw(call(2, "hold").as_bytes());
    let got = received_until(log, Duration::from_secs(10), |m| m["id"] == 2);
    assert!(got.iter().any(|m| m["id"] == 2), "{got:?}");
    // Call 3 goes into the empty pipe (written); 4 and 5 wait for the server to take it.
    p.write_raw(
        [call(3, "echo"), call(4, "echo"), call(5, "echo")]
            .concat()
            .as_bytes(),
    );
    // Handed to the relay before they are cancelled (else the loop drops them itself).
    sync(&mut p);
    // 4 never left the wrapper: taken back. 3 was written: the server is told.
    p.cancel(4);
    p.cancel(3);
    sync(&mut p);
    // The id of a cancelled request is free again: a new request under it goes on.
    p.write_raw(call(4, "echo").as_bytes());
    files.release();
    // Once the server answered the new 4, it has received all that came before it.
    let (before, last) = p.until_response(4);
    let calls = of(log, "tools/call", "id");
    assert_eq!(calls, [2, 3, 5, 4], "{:?}", received(log));
    let cancelled = of(log, "notifications/cancelled", "requestId");
    assert_eq!(cancelled, [3], "{:?}", received(log));
    assert!(last.get("result").is_some(), "{last}");
    let mut ids = answered(&before);
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, [2, 5], "no answer for a cancelled request: {before:?}");
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    // The server answered 3 (an echo) before it read the cancellation behind it: a late
    // answer MCP allows, dropped without a word.
    let stderr = p.stderr_at_end();
    assert!(
        !stderr.contains("no request in flight"),
        "a late answer to a cancelled request reported as a fault: {stderr}"
    );
}

#[test]
fn a_request_cancelled_while_the_server_restarts_reaches_no_server() {
    // The first server dies with the client's `initialize` in its pipe, unread; the rest waits
    // in the wrapper for the next one. The client cancels call 3 as soon as it hears of the
    // crash (the next server is not even started, or holds call 1, with 2 in its pipe: either
    // way 3 never left the wrapper).
    let _w = watchdog("wrap_cancel_restart", Duration::from_secs(60));
    let files = HeldFiles::new("cancel-restart");
    let log = &files.log;
    let mut p = wrapped(&[], "deaf-first", log.to_str());
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let lines = [
        format!("{init}\n{initialized}\n"),
        call(1, "hold"),
        call(2, "echo"),
        call(3, "echo"),
    ];
    p.write_raw(lines.concat().as_bytes());
    let crashed = p.response(0);
    assert_eq!(crashed["error"]["data"]["exitCode"], 7, "{crashed}");
    p.cancel(3);
    sync(&mut p);
    let until = Instant::now() + Duration::from_secs(10);
    while pids_in(log).len() < 2 {
        assert!(Instant::now() < until, "the server was never restarted");
        std::thread::sleep(Duration::from_millis(10));
    }
    files.release();
    p.write_raw(call(4, "echo").as_bytes());
    let (before, last) = p.until_response(4);
    let calls = of(log, "tools/call", "id");
    assert_eq!(calls, [1, 2, 4], "{:?}", received(log));
    let cancelled = of(log, "notifications/cancelled", "requestId");
    assert!(cancelled.is_empty(), "{:?}", received(log));
    assert!(last.get("result").is_some(), "{last}");
    let mut ids = answered(&before);
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, [1, 2], "no answer for the cancelled 3: {before:?}");
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}

#[test]
fn cancelling_the_queued_requests_frees_the_clients_held_input() {
    // Behind a server that holds call 2, over 1 MiB of calls waits in the wrapper, which then
    // takes no more of the client's input (the rest is only read ahead). The client cancels
    // them: their lines are taken back, the bytes waiting fall, and the wrapper reads on: it
    // answers a bad line while the server still holds call 2.
    let _w = watchdog("wrap_cancel_hold", Duration::from_secs(60));
    let files = HeldFiles::new("cancel-hold");
    let log = &files.log;
    let mut p = wrapped(&[], "held", log.to_str());
    burst(&mut p);
    p.result(0);
    p.result(1);
    p.write_raw(call(2, "hold").as_bytes());
    received_until(log, Duration::from_secs(10), |m| m["id"] == 2);
    let text = "x".repeat(64 << 10);
    let calls: String = (3..30)
        .map(|id| {
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":"echo","arguments":{"text":text}}})
            .to_string()
                + "\n"
        })
        .collect();
    p.write_raw(calls.as_bytes());
    for id in 4..30 {
        p.cancel(id);
    }
    sync(&mut p);
    files.release();
    p.write_raw(call(30, "echo").as_bytes());
    let (before, last) = p.until_response(30);
    let got = of(log, "tools/call", "id");
    assert_eq!(got, [2, 3, 30], "{:?}", received(log));
    assert!(last.get("result").is_some(), "{last}");
    let mut ids = answered(&before);
    ids.sort_by_key(|v| v.as_i64());
    assert_eq!(ids, [2, 3], "{before:?}");
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
}
