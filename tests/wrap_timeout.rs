//! `mcpipe wrap --timeout-ms`: a request answered at its deadline before its line reached the
//! server never reaches it (nor does a cancellation for it); one whose line was written is
//! cancelled. Over pipes, each test under a watchdog.

mod util;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::mcp::Proc;
use util::watchdog;
use util::wrap::{burst, pids_in, received, received_until, responses, wrapped, HeldFiles};

/// The `held` fixture behind `mcpipe wrap --timeout-ms 1000`, past the handshake; its log, and
/// the file that lets it read on. A notification starts it first, so that its start-up counts
/// against no deadline.
fn held(test: &str) -> (Proc, HeldFiles) {
    let files = HeldFiles::new(test);
    let mut p = wrapped(&["--timeout-ms", "1000"], "held", files.log.to_str());
    p.notify("notifications/roots/list_changed", json!({}));
    let until = Instant::now() + Duration::from_secs(10);
    while pids_in(&files.log).is_empty() {
        assert!(Instant::now() < until, "the server never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    burst(&mut p);
    p.result(0);
    p.result(1);
    (p, files)
}

#[test]
fn a_request_answered_at_its_deadline_before_it_was_written_never_reaches_the_server() {
    let _w = watchdog("wrap_timeout_unwritten", Duration::from_secs(60));
    let (mut p, files) = held("timeout-unwritten");
    let log = &files.log;
    // The server takes call 2 and then reads nothing until told to.
    p.call(2, "hold", json!({}));
    let got = received_until(log, Duration::from_secs(10), |m| m["id"] == 2);
    assert!(got.iter().any(|m| m["id"] == 2), "{got:?}");
    // Call 3 goes into the empty pipe (written); 4 and 5 wait for the server to take it.
    let call = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"echo","arguments":{}}})
        .to_string()
            + "\n"
    };
    p.write_raw((3..=5).map(call).collect::<String>().as_bytes());
    for (id, answer) in responses(&mut p, 2..=5, Duration::from_secs(10)) {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("within 1000 ms"), "{id}: {answer}");
    }
    files.release();
    // Once the server answered a later call, it has received all that came before (the
    // cancellations too: each is queued before the client has the error).
    p.call(6, "echo", json!({}));
    p.result(6);
    let got = received(log);
    let of = |method: &str, field: &str| -> Vec<Value> {
        got.iter()
            .filter(|m| m["method"] == method)
            .map(|m| m[field].clone())
            .collect()
    };
    assert_eq!(of("tools/call", "id"), [2, 3, 6], "{got:?}");
    let mut cancelled = of("notifications/cancelled", "requestId");
    cancelled.sort_by_key(|v| v.as_i64());
    assert_eq!(cancelled, [2, 3], "{got:?}");
    p.close_stdin();
    assert_eq!(p.wait_exit(), Some(0));
    // The server answered 2 and 3 after their deadlines: late answers, dropped without a word.
    let stderr = p.stderr_at_end();
    assert!(
        !stderr.contains("no request in flight"),
        "a late answer to a timed-out request reported as a fault: {stderr}"
    );
}

#[test]
fn requests_answered_at_their_deadline_free_the_held_input_of_a_server_that_reads_nothing() {
    // Calls 3.. wait for a server that reads nothing: past 1 MiB waiting the wrapper takes no
    // more input. At their deadline they are dropped from the queue, and the client's next
    // request is read and answered (by the wrapper, at its own deadline) without the server.
    let _w = watchdog("wrap_timeout_hold", Duration::from_secs(60));
    let (mut p, files) = held("timeout-hold");
    let log = &files.log;
    p.call(2, "hold", json!({}));
    received_until(log, Duration::from_secs(10), |m| m["id"] == 2);
    let text = "x".repeat(64 << 10);
    let mut bytes = String::new();
    for id in 3..40 {
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":text}}});
        bytes.push_str(&format!("{call}\n"));
    }
    let mut stdin = p.take_stdin();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = stdin.write_all(bytes.as_bytes());
        let last = json!({"jsonrpc":"2.0","id":40,"method":"ping"});
        let _ = stdin.write_all(format!("{last}\n").as_bytes());
        stdin
    });
    let started = Instant::now();
    for (id, answer) in responses(&mut p, 2..=40, Duration::from_secs(30)) {
        assert_eq!(answer["error"]["code"], -32603, "{id}: {answer}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let stdin = writer.join().unwrap();
    files.release();
    drop(stdin);
    assert_eq!(p.wait_exit(), Some(0));
    let calls: Vec<Value> = received(log)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(calls, [2, 3], "only those written before their deadline");
}
