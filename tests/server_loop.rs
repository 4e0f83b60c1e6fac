//! The loop over in-process pipes: framing, bad input, handler failures, backpressure, EOF.
//! Every test runs under a watchdog and waits with deadlines.

mod util;

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use mcpipe::Outcome;
use serde_json::{json, Value};
use util::{request, test_server, watchdog, Peer, BOUND};

const LIMIT: Duration = Duration::from_secs(60);

/// The burst exactly as a real client sends it, in one write.
const BURST: &str = concat!(
    r#"{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","version":"2.1.80"}},"jsonrpc":"2.0","id":0}"#,
    "\n",
    r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#,
    "\n",
    r#"{"method":"tools/list","jsonrpc":"2.0","id":1}"#,
    "\n"
);

#[test]
fn rapid_init_burst_in_one_write_gets_both_responses() {
    let _w = watchdog("rapid_init_burst_in_one_write_gets_both_responses", LIMIT);
    let mut peer = Peer::start(test_server());
    let started = Instant::now();
    peer.send(BURST.as_bytes());
    let first = peer.recv();
    let second = peer.recv();
    // Generous: a hang is what this catches (the buffered-reader hang sleeps 60 s here).
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(first["id"], 0);
    assert_eq!(first["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(second["id"], 1);
    assert_eq!(second["result"]["tools"], json!([]));
    peer.close_input();
    let (outcome, handler) = peer.finish();
    assert_eq!(outcome.unwrap(), Outcome::Eof);
    assert_eq!(handler.notifications, ["notifications/initialized"]);
}

#[test]
fn ten_thousand_requests_in_one_write_are_all_answered_in_order() {
    let _w = watchdog("ten_thousand_requests_in_one_write", LIMIT);
    let mut peer = Peer::start(test_server());
    let mut all = Vec::new();
    for i in 0..10_000 {
        all.extend(request(i, "echo", json!({"i": i})));
    }
    // A writer thread: the burst is larger than a pipe, and the test reads meanwhile.
    let mut input = peer.input.take().unwrap();
    let writer = std::thread::spawn(move || input.write_all(&all).unwrap());
    for i in 0..10_000 {
        let r = peer.recv();
        assert_eq!(r["id"], i);
        assert_eq!(r["result"]["i"], i);
    }
    writer.join().unwrap();
    assert_eq!(peer.finish().0.unwrap(), Outcome::Eof);
}

#[test]
fn a_request_written_one_byte_at_a_time_is_answered() {
    let _w = watchdog("a_request_written_one_byte_at_a_time", LIMIT);
    let mut peer = Peer::start(test_server());
    let line = request("byte-by-byte", "echo", json!({"text": "slow"}));
    for b in &line {
        peer.send(&[*b]);
        peer.input.as_mut().unwrap().flush().unwrap();
    }
    let r = peer.recv();
    assert_eq!(r["id"], "byte-by-byte");
    assert_eq!(r["result"]["text"], "slow");
}

#[test]
fn newlines_on_either_side_of_the_read_size_are_found() {
    let _w = watchdog("newlines_on_either_side_of_the_read_size", LIMIT);
    let mut peer = Peer::start(test_server());
    let read_size: usize = 64 * 1024;
    let mut ids = Vec::new();
    let mut all = Vec::new();
    for (i, target) in [
        read_size - 2,
        read_size - 1,
        read_size,
        read_size + 1,
        2 * read_size,
    ]
    .into_iter()
    .enumerate()
    {
        let mut line = request(i, "echo", json!({"pad": ""}));
        let pad = target.saturating_sub(line.len());
        line = request(i, "echo", json!({"pad": "x".repeat(pad)}));
        ids.push(i);
        all.extend(line);
    }
    let mut input = peer.input.take().unwrap();
    let writer = std::thread::spawn(move || input.write_all(&all).unwrap());
    for i in ids {
        assert_eq!(peer.recv()["id"], i);
    }
    writer.join().unwrap();
}

#[test]
fn a_64_mib_message_is_answered() {
    let _w = watchdog("a_64_mib_message_is_answered", Duration::from_secs(120));
    let mut peer = Peer::start(test_server().max_message_bytes(65 << 20));
    let text = "a".repeat(64 << 20);
    let line = request(1, "echo", json!({ "text": text }));
    assert!(line.len() > 64 << 20);
    let mut input = peer.input.take().unwrap();
    let writer = std::thread::spawn(move || {
        input.write_all(&line).unwrap();
        input
    });
    let r = peer
        .output
        .recv_timeout(Duration::from_secs(60))
        .expect("no response to the 64 MiB message");
    let r: Value = serde_json::from_slice(&r).unwrap();
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["text"].as_str().unwrap().len(), 64 << 20);
    drop(writer.join().unwrap());
}

#[test]
fn crlf_blank_lines_bom_and_a_final_line_without_newline() {
    let _w = watchdog("crlf_blank_lines_bom_and_a_final_line", LIMIT);
    let mut peer = Peer::start(test_server());
    peer.send(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\"}\r\n");
    peer.send(b"\n\r\n   \n\t\n");
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\"}\r\n");
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"echo\"}");
    assert_eq!(peer.recv()["id"], 1);
    assert_eq!(peer.recv()["id"], 2);
    peer.close_input();
    assert_eq!(peer.recv()["id"], 3);
    let (outcome, handler) = peer.finish();
    assert_eq!(outcome.unwrap(), Outcome::Eof);
    assert_eq!(handler.shutdowns, [Outcome::Eof]);
}

/// Each bad input, the error it must get (code and id), and then a valid request still works.
#[test]
fn every_bad_input_gets_its_error_and_the_loop_goes_on() {
    let _w = watchdog("every_bad_input_gets_its_error", LIMIT);
    let mut peer = Peer::start(test_server());
    let cases: &[(&[u8], i64, Value)] = &[
        (b"not json", -32700, Value::Null),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\"",
            -32700,
            Value::Null,
        ),
        (b"\"\xff\xfe\"", -32700, Value::Null),
        (
            br#"{"jsonrpc":"2.0","id":"s","method":"echo","params":{"x":"\ud800"}}"#,
            -32700,
            Value::Null,
        ),
        (br#"{"jsonrpc":"2.0","id":5}"#, -32600, json!(5)),
        (br#"{"jsonrpc":"2.0","id":6,"method":7}"#, -32600, json!(6)),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":null}"#,
            -32600,
            json!(7),
        ),
        (
            br#"{"jsonrpc":"1.0","id":8,"method":"echo"}"#,
            -32600,
            json!(8),
        ),
        (br#"{"id":9,"method":"echo"}"#, -32600, json!(9)),
        (
            br#"{"jsonrpc":2.0,"id":10,"method":"echo"}"#,
            -32600,
            json!(10),
        ),
        (
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}"#,
            -32600,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":[1],"method":"echo"}"#,
            -32600,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":true,"method":"echo"}"#,
            -32600,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1.5,"method":"echo"}"#,
            -32600,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"echo"}"#,
            -32600,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":11,"method":"echo","params":"str"}"#,
            -32600,
            json!(11),
        ),
        (
            br#"{"jsonrpc":"2.0","id":12,"method":"echo","params":3}"#,
            -32600,
            json!(12),
        ),
        (
            br#"{"jsonrpc":"2.0","id":13,"result":{},"error":{"code":1,"message":"m"}}"#,
            -32600,
            json!(13),
        ),
        (b"42", -32600, Value::Null),
        (b"[]", -32600, Value::Null),
        (
            br#"{"jsonrpc":"2.0","id":14,"method":"no/such/method"}"#,
            -32601,
            json!(14),
        ),
        (
            br#"{"jsonrpc":"2.0","id":15,"method":"needs_params","params":{"n":"x"}}"#,
            -32602,
            json!(15),
        ),
    ];
    for (line, code, id) in cases {
        peer.send(line);
        peer.send(b"\n");
        let r = peer.recv();
        let shown = String::from_utf8_lossy(line);
        assert_eq!(r["jsonrpc"], "2.0", "{shown}");
        assert_eq!(r["error"]["code"], *code, "{shown}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{shown}"
        );
        assert_eq!(&r["id"], id, "{shown}: {r}");
        assert!(r.get("result").is_none());
        // The next valid request is answered.
        peer.send(&request("after", "echo", json!({"ok": true})));
        let ok = peer.recv();
        assert_eq!(ok["id"], "after", "after {shown}");
        assert_eq!(ok["result"]["ok"], true);
    }
    // A notification, valid or for an unknown method, never gets a response.
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"no/such/notification\"}\n");
    peer.send(&request("stats", "stats", json!({})));
    let stats = peer.recv();
    assert_eq!(stats["id"], "stats", "a notification was answered: {stats}");
    assert_eq!(stats["result"]["bad_messages"], 20);
}

#[test]
fn ids_go_back_exactly_as_received() {
    let _w = watchdog("ids_go_back_exactly_as_received", LIMIT);
    let mut peer = Peer::start(test_server());
    let raw_ids = [
        "0",
        "-7",
        "9007199254740993",
        "18446744073709551615",
        r#""with \"escapes\" \\ and \n newline""#,
        r#""ünïcødé ✓""#,
        r#""""#,
    ];
    for raw in raw_ids {
        peer.send(format!("{{\"jsonrpc\":\"2.0\",\"id\":{raw},\"method\":\"echo\"}}\n").as_bytes());
    }
    for raw in raw_ids {
        let line = peer.output.recv_timeout(BOUND).expect("a response");
        let text = String::from_utf8(line).unwrap();
        let r: Value = serde_json::from_str(&text).unwrap();
        let want: Value = serde_json::from_str(raw).unwrap();
        assert_eq!(r["id"], want);
        if !raw.starts_with('"') {
            // Integers keep their exact digits (no trip through f64).
            assert!(text.contains(&format!("\"id\":{raw},")), "{text}");
        }
    }
}

#[test]
fn panicking_and_erroring_handlers_leave_the_loop_answering() {
    let _w = watchdog("panicking_and_erroring_handlers", LIMIT);
    let mut peer = Peer::start(test_server());
    for i in 0..50 {
        peer.send(&request(i, "panic", json!({})));
        let r = peer.recv();
        assert_eq!(r["id"], i);
        assert_eq!(r["error"]["code"], -32603);
        assert!(r["error"]["message"].as_str().unwrap().contains("panic"));
        peer.send(&request(i, "fail", json!({})));
        let r = peer.recv();
        assert_eq!(r["error"]["code"], -32000);
        assert_eq!(r["error"]["message"], "failed on purpose");
    }
    // A panic in a notification handler is caught as well, and nothing is answered.
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"panic\"}\n");
    peer.send(&request("last", "stats", json!({})));
    let r = peer.recv();
    assert_eq!(r["id"], "last");
    assert_eq!(r["result"]["handler_panics"], 51);
}

#[test]
fn an_oversize_line_gets_one_error_and_the_loop_lives_with_bounded_memory() {
    let _w = watchdog("an_oversize_line_gets_one_error", LIMIT);
    let limit = 1 << 20;
    let mut peer = Peer::start(test_server().max_message_bytes(limit));
    let mut input = peer.input.take().unwrap();
    let writer = std::thread::spawn(move || {
        // 64 MiB of one line, then a valid request.
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            input.write_all(&chunk).unwrap();
        }
        input.write_all(b"\n").unwrap();
        input
            .write_all(&request("next", "stats", json!({})))
            .unwrap();
        input
    });
    let err = peer.recv();
    assert_eq!(err["id"], Value::Null);
    assert_eq!(err["error"]["code"], -32600);
    assert_eq!(err["error"]["data"]["maxMessageBytes"], limit);
    let next = peer.recv();
    assert_eq!(next["id"], "next");
    assert_eq!(next["result"]["oversize_messages"], 1);
    drop(writer.join().unwrap());
}

#[test]
fn twenty_thousand_requests_written_before_any_response_is_read() {
    // The deadlock scenario: the peer writes everything before reading anything. The loop must
    // keep reading while its output pipe is full, or both sides block for ever.
    let _w = watchdog("twenty_thousand_requests_written_before_reading", LIMIT);
    let mut peer = Peer::start(test_server());
    let mut all = Vec::new();
    for i in 0..20_000 {
        all.extend(request(
            i,
            "echo",
            json!({"text": "some text to make the responses fill the pipe"}),
        ));
    }
    let total = all.len();
    assert!(total > 1 << 20);
    peer.send(&all);
    peer.close_input();
    for i in 0..20_000 {
        assert_eq!(peer.recv()["id"], i);
    }
    assert_eq!(peer.finish().0.unwrap(), Outcome::Eof);
}

#[test]
fn large_requests_written_before_any_answer_is_read_are_all_answered() {
    // A large line waits while a large answer is being written, but only for a moment: a peer
    // that reads nothing until it has written everything must not wait for ever. (Its own
    // pipes: `Peer` reads the output all the time.)
    let _w = watchdog("large_requests_written_before_any_answer_is_read", LIMIT);
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let server = std::thread::spawn(move || {
        use std::os::fd::AsFd;
        let mut handler = util::TestHandler::default();
        test_server().serve(in_r.as_fd(), out_w.as_fd(), &mut handler)
    });
    let text = "z".repeat(2 << 20);
    let mut all = Vec::new();
    for i in 0..4 {
        all.extend(request(i, "echo", json!({ "text": text })));
    }
    let started = Instant::now();
    in_w.write_all(&all).unwrap();
    drop(in_w);
    let mut lines = std::io::BufReader::new(out_r).lines();
    for i in 0..4 {
        let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], i);
        assert_eq!(
            answer["result"]["text"].as_str().map(str::len),
            Some(text.len())
        );
    }
    assert!(lines.next().is_none());
    // Generous: each held line waits 20 ms at most.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(server.join().unwrap().unwrap(), Outcome::Eof);
}

#[test]
fn output_bound_applies_backpressure_and_loses_nothing() {
    let _w = watchdog("output_bound_applies_backpressure", LIMIT);
    let mut peer = Peer::start(test_server().max_output_bytes(64 * 1024));
    let mut all = Vec::new();
    for i in 0..5_000 {
        all.extend(request(i, "echo", json!({"text": "x".repeat(200)})));
    }
    let mut input = peer.input.take().unwrap();
    let writer = std::thread::spawn(move || input.write_all(&all).unwrap());
    // Read slowly at first, so the bound is reached.
    std::thread::sleep(Duration::from_millis(200));
    for i in 0..5_000 {
        assert_eq!(peer.recv()["id"], i);
    }
    writer.join().unwrap();
}

#[test]
fn eof_right_after_a_burst_answers_everything_then_returns() {
    let _w = watchdog("eof_right_after_a_burst", LIMIT);
    let mut peer = Peer::start(test_server());
    let mut all = Vec::new();
    for i in 0..500 {
        all.extend(request(i, "echo", json!({})));
    }
    peer.send(&all);
    peer.close_input();
    for i in 0..500 {
        assert_eq!(peer.recv()["id"], i);
    }
    let (outcome, handler) = peer.finish();
    assert_eq!(outcome.unwrap(), Outcome::Eof);
    assert_eq!(handler.shutdowns, [Outcome::Eof]);
}

#[test]
fn batches_get_an_array_of_responses_and_can_be_switched_off() {
    let _w = watchdog("batches_get_an_array", LIMIT);
    let batch = concat!(
        r#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}},"#,
        r#"{"jsonrpc":"2.0","method":"note"},"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"nope"},"#,
        r#"7]"#,
        "\n"
    );
    let mut peer = Peer::start(test_server());
    peer.send(batch.as_bytes());
    let r = peer.recv();
    let items = r.as_array().expect("a batch is answered with an array");
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["id"], 1);
    assert_eq!(items[0]["result"]["a"], 1);
    assert_eq!(items[1]["id"], 2);
    assert_eq!(items[1]["error"]["code"], -32601);
    assert_eq!(items[2]["id"], Value::Null);
    assert_eq!(items[2]["error"]["code"], -32600);
    // Only notifications: no reply at all.
    peer.send(b"[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"method\":\"b\"}]\n");
    peer.send(&request("next", "echo", json!({})));
    assert_eq!(peer.recv()["id"], "next");

    let mut peer = Peer::start(test_server().batches(false));
    peer.send(batch.as_bytes());
    let r = peer.recv();
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["error"]["code"], -32600);
    peer.send(&request("next", "echo", json!({})));
    assert_eq!(peer.recv()["id"], "next");
}

#[test]
fn responses_and_notifications_reach_the_handler_without_replies() {
    let _w = watchdog("responses_and_notifications_reach_the_handler", LIMIT);
    let mut peer = Peer::start(test_server());
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
    peer.send(b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}\n");
    peer.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"hello\"}\n");
    peer.send(&request("n", "notify", json!({})));
    let note = peer.recv();
    assert_eq!(note["method"], "notifications/test");
    assert!(note.get("id").is_none());
    assert_eq!(peer.recv()["id"], "n");
    peer.close_input();
    let (_, handler) = peer.finish();
    assert_eq!(handler.responses, 2);
    assert_eq!(handler.notifications, ["hello"]);
}

#[test]
fn a_closed_output_ends_the_loop_promptly_even_when_idle() {
    let _w = watchdog("a_closed_output_ends_the_loop", LIMIT);
    // Nobody will ever read the output: its read end is closed before the loop starts.
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    drop(out_r);
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        let r = test_server().serve(
            in_r.as_fd(),
            out_w.as_fd(),
            &mut util::TestHandler::default(),
        );
        let _ = tx.send(r);
    });
    let outcome = rx
        .recv_timeout(BOUND)
        .expect("the loop did not end")
        .unwrap();
    assert_eq!(outcome, Outcome::PeerGone);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    drop(in_w);
}

#[test]
fn a_peer_that_stops_reading_mid_stream_ends_the_loop_without_spinning() {
    let _w = watchdog("a_peer_that_stops_reading_mid_stream", LIMIT);
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::os::fd::AsFd;
        let r = test_server().serve(
            in_r.as_fd(),
            out_w.as_fd(),
            &mut util::TestHandler::default(),
        );
        let _ = tx.send(r);
    });
    in_w.write_all(&request(1, "echo", json!({}))).unwrap();
    let lines = util::line_channel(out_r);
    util::recv_json(&lines);
    // The peer goes away: its read end closes once the reader thread sees the next line fail.
    drop(lines);
    in_w.write_all(&request(2, "echo", json!({}))).unwrap();
    // The loop may already have ended (it closes its input then), so this write may fail.
    let _ = in_w.write_all(&request(3, "echo", json!({})));
    // The reader thread exits after failing to deliver line 2, dropping the read end; the
    // loop sees EPIPE or a hang-up and ends.
    let outcome = rx
        .recv_timeout(BOUND)
        .expect("the loop did not end")
        .unwrap();
    assert_eq!(outcome, Outcome::PeerGone);
}

/// Field review: an output that refuses writes for another reason than the peer going away
/// (`ENOSPC` on a full disk, here `/dev/full`) ended the loop with `Ok(Outcome::PeerGone)`, so
/// a caller took a server whose answers were lost for one that ended normally. The loop still
/// ends as for a peer gone, its whole shutdown included (the handler told, a thread holding a
/// responder cancelled), and then returns the write error.
#[test]
fn an_output_that_refuses_writes_is_returned_as_an_error_after_the_whole_shutdown() {
    use mcpipe::{Context, Error, ErrorObject, Handler, Request};
    use std::os::fd::AsFd;
    use std::sync::mpsc;

    /// Holds request `hold`'s responder on a thread until it is cancelled (the reason goes to
    /// `reasons`); answers anything else at once.
    struct Holder {
        reasons: mpsc::Sender<String>,
        threads: Vec<std::thread::JoinHandle<()>>,
        shutdowns: Vec<Outcome>,
    }
    impl Handler for Holder {
        fn handle_request(
            &mut self,
            req: Request,
            cx: &mut Context<'_>,
        ) -> Result<Value, ErrorObject> {
            if req.method != "hold" {
                return Ok(json!({}));
            }
            let responder = cx.responder().expect("a request has a responder");
            let reasons = self.reasons.clone();
            self.threads.push(std::thread::spawn(move || {
                let cancel = responder.cancel_token();
                let why = cancel.sleep_until(Instant::now() + BOUND);
                let _ = reasons.send(format!("{why:?}"));
            }));
            Ok(Value::Null)
        }
        fn on_shutdown(&mut self, outcome: &Outcome, _cx: &mut Context<'_>) {
            self.shutdowns.push(outcome.clone());
        }
    }

    let _w = watchdog("an_output_that_refuses_writes", LIMIT);
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("not run: no /dev/full");
        return;
    };
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    // The input stays open: the write error alone must end the loop.
    in_w.write_all(&request(1, "hold", json!({}))).unwrap();
    in_w.write_all(&request(2, "echo", json!({}))).unwrap();
    let (reasons, reasons_rx) = mpsc::channel();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut handler = Holder {
            reasons,
            threads: Vec::new(),
            shutdowns: Vec::new(),
        };
        let served = test_server().serve(in_r.as_fd(), full.as_fd(), &mut handler);
        for thread in handler.threads.drain(..) {
            thread.join().unwrap();
        }
        let _ = tx.send((served, handler.shutdowns));
    });
    let (served, shutdowns) = rx.recv_timeout(BOUND).expect("the loop did not end");
    match served {
        Err(Error::Io { doing, source }) => {
            assert_eq!(doing, "writing the output");
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{source}");
        }
        other => panic!("a full output ended the loop with {other:?}, not the write error"),
    }
    assert_eq!(shutdowns, [Outcome::PeerGone], "the handler is told");
    let reason = reasons_rx.recv_timeout(BOUND).expect("the holder was told");
    assert!(reason.contains("PeerGone"), "{reason}");
    drop(in_w);
}

#[test]
fn fd_flags_are_the_same_after_the_loop_as_before() {
    let _w = watchdog("fd_flags_are_the_same_after_the_loop", LIMIT);
    use std::os::fd::{AsFd, BorrowedFd};
    fn flags(fd: BorrowedFd<'_>) -> i32 {
        mcpipe::internals::fd_status_flags(fd).unwrap()
    }
    // Pipes.
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let before = (flags(in_r.as_fd()), flags(out_w.as_fd()));
    in_w.write_all(&request(1, "echo", json!({}))).unwrap();
    drop(in_w);
    let lines = util::line_channel(out_r);
    let r = test_server().serve(
        in_r.as_fd(),
        out_w.as_fd(),
        &mut util::TestHandler::default(),
    );
    assert_eq!(r.unwrap(), Outcome::Eof);
    assert_eq!(util::recv_json(&lines)["id"], 1);
    assert_eq!((flags(in_r.as_fd()), flags(out_w.as_fd())), before);
    // A socket used in both directions.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let before = flags(theirs.as_fd());
    (&ours).write_all(&request(2, "echo", json!({}))).unwrap();
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    let r = test_server().serve(
        theirs.as_fd(),
        theirs.as_fd(),
        &mut util::TestHandler::default(),
    );
    assert_eq!(r.unwrap(), Outcome::Eof);
    assert_eq!(util::recv_json(&util::line_channel(ours))["id"], 2);
    assert_eq!(flags(theirs.as_fd()), before);
    // A regular file as input and /dev/null as output.
    let dir = std::env::temp_dir().join(format!("mcpipe-flags-{}", std::process::id()));
    std::fs::write(&dir, request(3, "echo", json!({}))).unwrap();
    let file = std::fs::File::open(&dir).unwrap();
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    let before = (flags(file.as_fd()), flags(null.as_fd()));
    let r = test_server().serve(
        file.as_fd(),
        null.as_fd(),
        &mut util::TestHandler::default(),
    );
    assert_eq!(r.unwrap(), Outcome::Eof);
    assert_eq!((flags(file.as_fd()), flags(null.as_fd())), before);
    let _ = std::fs::remove_file(&dir);
}

#[test]
fn idle_hook_fires_once_per_quiet_period() {
    let _w = watchdog("idle_hook_fires_once_per_quiet_period", LIMIT);
    let mut peer = Peer::start(test_server().idle_timeout(Some(Duration::from_millis(100))));
    std::thread::sleep(Duration::from_millis(450));
    peer.send(&request(1, "stats", json!({})));
    assert_eq!(peer.recv()["result"]["idle_hooks"], 1);
    std::thread::sleep(Duration::from_millis(450));
    peer.send(&request(2, "stats", json!({})));
    assert_eq!(peer.recv()["result"]["idle_hooks"], 2);
    // Input before the timeout: no extra run.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(20));
        peer.send(&request(3, "echo", json!({})));
        peer.recv();
    }
    peer.send(&request(4, "stats", json!({})));
    assert_eq!(peer.recv()["result"]["idle_hooks"], 2);
    peer.close_input();
    let (_, handler) = peer.finish();
    assert_eq!(handler.idle_runs, 2);
}
