//! A handler that waits on the loop's own thread (sleeps, asks the peer, sends a flood of
//! notifications) keeps the loop's promises: the end of input stops it after the shutdown
//! grace, what it sends and what it reads ahead stay bounded, and a cancellation reaches it
//! from inside a batch, or alone before the loop sleeps. In-process servers over pipes, each
//! test under a watchdog.

mod util;

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use mcpipe::{Context, ErrorObject, Handler, Outcome, Request, Server};
use serde_json::{json, Value};
use util::{line_channel, recv_json, request, watchdog};

/// Methods, all on the loop's thread: `block {ms}` sleeps, `ask {ms}` asks the peer
/// `question` (for `ms`, 60 s unless given), `flood {n}` sends `n` notifications of 1 KiB; `later {ms}` answers from a thread
/// after `ms` (cancellable); `owe {ms}` answers from a thread after `ms`, deaf to
/// cancellation (as a relay's server is to the loop); anything else is answered at once (`ping` is named so). An error
/// is answered with its text. The cancellation of an owed request of id 100 or more is told
/// to the peer (`test/cancelled`), so that a test sees when the handler heard of it. A
/// response that reaches the handler is told to the peer too (`test/response`, with its id).
struct OnTheLoop;

impl Handler for OnTheLoop {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        let params = req.params.clone().unwrap_or(json!({}));
        let failed = |e: mcpipe::Error| ErrorObject::internal(e.to_string());
        match req.method.as_str() {
            "block" => {
                let ms = params["ms"].as_u64().unwrap_or(0);
                cx.sleep(Duration::from_millis(ms)).map_err(failed)?;
                Ok(json!({ "blocked": ms }))
            }
            "ask" => {
                let ms = params["ms"].as_u64().unwrap_or(60_000);
                cx.call("question", None, Duration::from_millis(ms))
                    .map_err(failed)
            }
            "flood" => {
                let n = params["n"].as_u64().unwrap_or(0);
                let pad = "x".repeat(1024);
                for i in 0..n {
                    cx.notify("test/flood", Some(json!({ "i": i, "pad": pad })))
                        .map_err(failed)?;
                }
                Ok(json!({ "sent": n }))
            }
            "later" => {
                let ms = params["ms"].as_u64().unwrap_or(0);
                let responder = cx.responder().expect("a request has a responder");
                thread::spawn(move || {
                    let token = responder.cancel_token();
                    match token.sleep_until(Instant::now() + Duration::from_millis(ms)) {
                        Ok(()) => responder.respond(Ok(json!({ "slept": ms }))),
                        Err(_) => responder.respond(Ok(json!("too late"))),
                    }
                });
                Ok(Value::Null)
            }
            "owe" => {
                let ms = params["ms"].as_u64().unwrap_or(0);
                let responder = cx.responder().expect("a request has a responder");
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(ms));
                    responder.respond(Ok(json!({ "owed": ms })));
                });
                Ok(Value::Null)
            }
            other => Ok(json!({ "now": other })),
        }
    }

    fn cancel_method(&self) -> Option<&str> {
        Some("cancel")
    }

    fn handle_cancelled(&mut self, request: mcpipe::RequestId, cx: &mut Context<'_>) {
        if request.as_i64().is_some_and(|id| id >= 100) {
            let _ = cx.notify("test/cancelled", Some(json!({ "id": request.to_value() })));
        }
    }

    fn methods_answered_at_once(&self) -> &'static [&'static str] {
        &["ping"]
    }

    fn handle_response(&mut self, response: mcpipe::Response, cx: &mut Context<'_>) {
        let id = response.id.map_or(Value::Null, |id| id.to_value());
        let _ = cx.notify("test/response", Some(json!({ "id": id })));
    }
}

struct Running {
    input: Option<std::io::PipeWriter>,
    output: Option<std::io::PipeReader>,
    done: Receiver<(Result<Outcome, mcpipe::Error>, Instant)>,
}

fn start(server: Server) -> Running {
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (tx, done) = mpsc::channel();
    thread::spawn(move || {
        let outcome = server.serve(in_r.as_fd(), out_w.as_fd(), &mut OnTheLoop);
        drop(out_w);
        let _ = tx.send((outcome, Instant::now()));
    });
    Running {
        input: Some(in_w),
        output: Some(out_r),
        done,
    }
}

impl Running {
    fn send(&mut self, bytes: &[u8]) {
        self.input.as_mut().unwrap().write_all(bytes).unwrap();
    }
    /// Sends one JSON value (a batch) as a line.
    fn send_json(&mut self, value: &Value) {
        self.send(format!("{value}\n").as_bytes());
    }
    /// Starts reading the output, line by line.
    fn lines(&mut self) -> Receiver<Vec<u8>> {
        line_channel(self.output.take().unwrap())
    }
    fn close_input(&mut self) {
        self.input = None;
    }
    /// When the loop ended, waiting for it at most `limit`.
    fn ended_within(&self, limit: Duration) -> Instant {
        let (outcome, at) = self.done.recv_timeout(limit).expect("the loop did not end");
        assert!(outcome.is_ok(), "{outcome:?}");
        at
    }
}

fn server() -> Server {
    util::test_server()
}

#[test]
fn end_of_input_stops_a_sleeping_handler_after_the_grace() {
    let _w = watchdog("loop_sleep_eof", Duration::from_secs(30));
    let mut s = start(server().shutdown_grace(Duration::from_millis(500)));
    let out = s.lines();
    s.send(&request(1, "block", json!({ "ms": 20_000 })));
    s.send(&request(2, "quick", json!({})));
    thread::sleep(Duration::from_millis(100));
    let closed = Instant::now();
    s.close_input();
    let first = recv_json(&out);
    assert_eq!(first["id"], 1, "{first}");
    assert!(
        first["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{first}"
    );
    assert_eq!(recv_json(&out)["id"], 2);
    let ended = s.ended_within(Duration::from_secs(10));
    let took = ended.duration_since(closed);
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "ended {took:?} after the end of input (grace 500 ms)"
    );
}

#[test]
fn a_handler_asking_the_peer_fails_at_once_when_the_input_ends() {
    let _w = watchdog("loop_ask_eof", Duration::from_secs(30));
    let mut s = start(server());
    let out = s.lines();
    s.send(&request(1, "ask", json!({})));
    assert_eq!(recv_json(&out)["method"], "question");
    let closed = Instant::now();
    s.close_input();
    let answer = recv_json(&out);
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ended its input")),
        "{answer}"
    );
    s.ended_within(Duration::from_secs(5));
    assert!(
        closed.elapsed() < Duration::from_secs(3),
        "{:?}",
        closed.elapsed()
    );
}

#[test]
fn requests_that_keep_starting_after_the_end_each_get_the_whole_grace() {
    let _w = watchdog("loop_grace_restarts", Duration::from_secs(30));
    // Four 300 ms sleeps read before the end, a 500 ms grace: each starts after the end of
    // input and is within the grace of its own start, so all four finish.
    let mut s = start(server().shutdown_grace(Duration::from_millis(500)));
    let out = s.lines();
    for id in 1..=4 {
        s.send(&request(id, "block", json!({ "ms": 300 })));
    }
    s.close_input();
    for id in 1..=4 {
        let answer = recv_json(&out);
        assert_eq!(answer["id"], id);
        assert_eq!(answer["result"]["blocked"], 300, "{answer}");
    }
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn a_flood_of_notifications_from_the_loop_waits_for_a_peer_that_does_not_read() {
    let _w = watchdog("loop_flood", Duration::from_secs(60));
    let mut s = start(server().max_output_bytes(1 << 20));
    // 200,000 notifications of about 1 KiB (200 MiB) while nobody reads: the handler waits
    // for room at the 1 MiB bound.
    s.send(&request(1, "flood", json!({ "n": 200_000 })));
    thread::sleep(Duration::from_millis(1500));
    // The memory bound: Linux only (/proc).
    if let Some(peak) = util::procs::peak_rss_kib(std::process::id()) {
        assert!(peak < 100 << 10, "memory grew to {peak} KiB");
    }
    // Reading lets it go on to the end; nothing is lost.
    let out = s.lines();
    let mut seen = 0u64;
    loop {
        let message = recv_json(&out);
        if message["id"] == 1 {
            assert_eq!(message["result"]["sent"], 200_000, "{message}");
            break;
        }
        assert_eq!(message["params"]["i"], seen);
        seen += 1;
    }
    assert_eq!(seen, 200_000);
    s.close_input();
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn input_read_ahead_while_a_handler_sleeps_on_the_loop_stays_bounded() {
    let _w = watchdog("loop_read_ahead", Duration::from_secs(60));
    let mut s = start(server().max_read_ahead_bytes(1 << 20));
    let out = s.lines();
    s.send(&request(1, "block", json!({ "ms": 1500 })));
    // 100 MiB of requests from a thread while the handler sleeps: the loop takes about the
    // read-ahead bound and the pipe's share, then the writer waits.
    let mut input = s.input.take().unwrap();
    let (tx, written) = mpsc::channel();
    let writer = thread::spawn(move || {
        let text = "y".repeat(1000);
        let mut n = 0u64;
        for id in 2..102_402 {
            let line = request(id, "echo", json!({ "text": text }));
            if input.write_all(&line).is_err() {
                break;
            }
            n += 1;
            let _ = tx.send(n);
        }
        drop(input);
    });
    thread::sleep(Duration::from_millis(1000));
    let taken = written.try_iter().last().unwrap_or(0);
    assert!(
        taken < 10_000,
        "{taken} requests of 1 KB were taken while the handler slept (1 MiB read-ahead)"
    );
    // Then every request is answered, in order.
    assert_eq!(recv_json(&out)["id"], 1);
    for id in 2..102_402 {
        assert_eq!(recv_json(&out)["id"], id);
    }
    writer.join().unwrap();
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn a_cancellation_inside_a_batch_reaches_work_on_a_thread_and_on_the_loop() {
    let _w = watchdog("loop_batch_cancel", Duration::from_secs(30));
    let mut s = start(server());
    let out = s.lines();
    let cancel = |id: i64| json!({"jsonrpc":"2.0","method":"cancel","params":{"requestId":id}});
    // Work on a thread, cancelled by a later batch: its answer is never sent.
    s.send(&request(1, "later", json!({ "ms": 60_000 })));
    s.send_json(&json!([cancel(1), {"jsonrpc":"2.0","id":2,"method":"ping"}]));
    let batch = recv_json(&out);
    assert_eq!(batch[0]["id"], 2, "{batch}");
    // The same batch as the call: the call starts, the cancellation after it ends it.
    let call = json!({"jsonrpc":"2.0","id":3,"method":"later","params":{"ms":60_000}});
    s.send_json(&json!([call, cancel(3)]));
    // A sleep on the loop, cancelled by a batch read while it sleeps.
    let started = Instant::now();
    s.send(&request(4, "block", json!({ "ms": 20_000 })));
    s.send_json(&json!([cancel(4), {"jsonrpc":"2.0","id":5,"method":"ping"}]));
    // No answer for 1, 3 or 4; the ping's batch comes once the loop is free.
    let next = recv_json(&out);
    assert_eq!(next[0]["id"], 5, "{next}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    s.send(&request(6, "ping", json!({})));
    assert_eq!(recv_json(&out)["id"], 6);
    s.close_input();
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn a_lone_cancellation_of_an_owed_request_reaches_the_handler_before_the_loop_sleeps() {
    // A cancellation read ahead (the loop looks for cancellations first) was recorded for the
    // handler, and the loop could sleep with it: the handler heard of it at the next event
    // only, here the answer 3 s later (a relay neither told its silent server nor took the
    // request's line back meanwhile). Whether the loop slept on it depended on how the
    // reads fell, so several rounds.
    let _w = watchdog("loop_lone_cancel", Duration::from_secs(60));
    let mut s = start(server().shutdown_grace(Duration::from_millis(100)));
    let out = s.lines();
    for round in 0..5 {
        let (owed, marker) = (100 + 2 * round, 101 + 2 * round);
        s.send(&request(owed, "owe", json!({ "ms": 3_000 })));
        // Answered in order after the call started.
        s.send(&request(marker, "now", json!({})));
        assert_eq!(recv_json(&out)["id"], marker);
        let sent = Instant::now();
        s.send_json(&json!({"jsonrpc":"2.0","method":"cancel","params":{"requestId":owed}}));
        let heard = recv_json(&out);
        assert_eq!(heard["method"], "test/cancelled", "round {round}: {heard}");
        assert_eq!(heard["params"]["id"], owed, "{heard}");
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "round {round}: heard after {:?}",
            sent.elapsed()
        );
    }
    s.close_input();
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn a_batch_with_requests_answered_later_is_answered_in_one_array() {
    let _w = watchdog("loop_batch_later", Duration::from_secs(30));
    let mut s = start(server().shutdown_grace(Duration::from_millis(300)));
    let out = s.lines();
    let call = |id: i64, method: &str, ms: u64| json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"ms":ms}});
    let batch = json!([
        call(1, "later", 300),
        call(2, "quick", 0),
        call(3, "later", 100)
    ]);
    s.send_json(&batch);
    let answers = recv_json(&out);
    let ids: Vec<i64> = answers
        .as_array()
        .unwrap_or_else(|| panic!("not one array: {answers}"))
        .iter()
        .map(|a| a["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [2, 3, 1], "{answers}");
    // A request of the batch cancelled while the rest is in: the array holds the rest.
    let batch = json!([call(4, "later", 60_000), call(5, "quick", 0)]);
    s.send_json(&batch);
    thread::sleep(Duration::from_millis(100));
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":4}}\n");
    let answers = recv_json(&out);
    assert_eq!(answers.as_array().map(Vec::len), Some(1), "{answers}");
    assert_eq!(answers[0]["id"], 5, "{answers}");
    // At the end, one still owed is failed into its batch's array.
    let batch = json!([call(6, "later", 60_000), call(7, "quick", 0)]);
    s.send_json(&batch);
    s.close_input();
    let answers = recv_json(&out);
    assert_eq!(answers[0]["id"], 7, "{answers}");
    assert_eq!(answers[1]["id"], 6, "{answers}");
    s.ended_within(Duration::from_secs(20));
}

#[test]
fn a_ping_is_answered_at_once_while_requests_wait_for_a_slot() {
    let _w = watchdog("loop_quick_ping", Duration::from_secs(30));
    let mut s = start(
        server()
            .max_in_flight(2)
            .shutdown_grace(Duration::from_millis(300)),
    );
    let out = s.lines();
    // Two slots taken for a minute, two more requests waiting for one, then a ping.
    for id in 1..=4 {
        s.send(&request(id, "later", json!({ "ms": 60_000 })));
    }
    let started = Instant::now();
    s.send(&request(5, "ping", json!({})));
    let answer = recv_json(&out);
    assert_eq!(answer["id"], 5, "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // Anything else still waits for a slot.
    s.send(&request(6, "quick", json!({})));
    util::assert_silent(&out, Duration::from_millis(300));
    s.close_input();
    let mut ids: Vec<i64> = (0..5)
        .map(|_| recv_json(&out)["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 6]);
    s.ended_within(Duration::from_secs(10));
}

#[test]
fn a_question_asked_on_the_loop_is_cancelled_on_the_wire_when_its_request_is() {
    let _w = watchdog("loop_ask_cancelled", Duration::from_secs(30));
    let mut s = start(server());
    let lines = s.lines();
    s.send(&request(1, "ask", json!({})));
    let question = recv_json(&lines);
    assert_eq!(question["method"], "question", "{question}");
    // The peer cancels the request that asked: the handler stops waiting, and the peer is
    // told that its question need not be answered.
    s.send(
        br#"{"jsonrpc":"2.0","method":"cancel","params":{"requestId":1}}
"#,
    );
    s.send(&request(2, "ping", json!({})));
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &Value| m["id"] == 2) {
        seen.push(recv_json(&lines));
    }
    assert!(
        seen.iter()
            .any(|m| m["method"] == "cancel" && m["params"]["requestId"] == question["id"]),
        "the question of a cancelled request is left open: {seen:?}"
    );
    assert!(!seen.iter().any(|m| m["id"] == 1), "answered: {seen:?}");
}

#[test]
fn a_late_answer_to_a_question_given_up_on_is_dropped_not_handled() {
    let _w = watchdog("loop_ask_late", Duration::from_secs(30));
    let mut s = start(server());
    let lines = s.lines();
    let until = |done: &dyn Fn(&Value) -> bool| {
        let mut seen = Vec::new();
        while !seen.last().is_some_and(done) {
            seen.push(recv_json(&lines));
        }
        seen
    };
    // Given up at its deadline.
    s.send(&request(1, "ask", json!({ "ms": 100 })));
    let timed_out = recv_json(&lines);
    assert_eq!(timed_out["method"], "question", "{timed_out}");
    until(&|m| m["id"] == 1);
    // Given up as the request that asked is cancelled.
    s.send(&request(2, "ask", json!({})));
    let cancelled = recv_json(&lines);
    assert_eq!(cancelled["method"], "question", "{cancelled}");
    s.send(
        br#"{"jsonrpc":"2.0","method":"cancel","params":{"requestId":2}}
"#,
    );
    until(&|m| m["method"] == "cancel" && m["params"]["requestId"] == cancelled["id"]);
    // Both answers come late; an answer to nothing asked still reaches the handler.
    for id in [&timed_out["id"], &cancelled["id"], &json!("never-asked")] {
        let late = json!({ "jsonrpc": "2.0", "id": id, "result": "late" });
        s.send(format!("{late}\n").as_bytes());
    }
    s.send(&request(3, "hello", json!({})));
    let seen = until(&|m| m["id"] == 3);
    let handled: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "test/response")
        .map(|m| &m["params"]["id"])
        .collect();
    assert_eq!(handled, [&json!("never-asked")], "{seen:?}");
}
