//! Answering later, from any thread: a raw [`Handler`] takes a [`Responder`], the loop keeps
//! serving, and the answer is written when it arrives. In-process servers over pipes, each
//! test under a watchdog.

mod util;

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use mcpipe::{Context, ErrorObject, Handler, Outcome, Request, Responder, Server};
use serde_json::{json, Value};
use util::{line_channel, recv_json, request, watchdog};

/// Methods: `later {ms}` answers from a thread after `ms` (cancellable), `drop` lets its
/// responder go unanswered, `post` posts to the loop then answers, `ask` asks the peer
/// `question` and answers with the peer's result, `never` keeps its responder until cancelled,
/// `block {ms}` sleeps on the loop's own thread, `handoff_panic {ms}` hands its responder to a
/// thread as `later` does, then panics; anything else is answered at once.
#[derive(Default)]
struct Deferring {
    posts: Vec<String>,
    kept: Vec<Responder>,
}

impl Handler for Deferring {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        let params = req.params.clone().unwrap_or(json!({}));
        let method = req.method.as_str();
        if method == "block" {
            // Holds the loop (a slow handler on the loop's thread), reading ahead meanwhile.
            let ms = params["ms"].as_u64().unwrap_or(0);
            return match cx.sleep(Duration::from_millis(ms)) {
                Ok(()) => Ok(json!({ "blocked": ms })),
                Err(e) => Err(ErrorObject::internal(e.to_string())),
            };
        }
        if method == "park" {
            // Waits on something else (like MCP's tasks/result): not counted as work in flight.
            let responder = cx.waiting_responder().expect("a request has a responder");
            self.kept.push(responder);
            return Ok(Value::Null);
        }
        if !matches!(
            method,
            "later"
                | "drop"
                | "post"
                | "ask"
                | "ask_briefly"
                | "never"
                | "stubborn"
                | "handoff_panic"
        ) {
            return Ok(json!({ "now": method, "posts": self.posts.len() }));
        }
        let responder = cx.responder().expect("a request has a responder");
        assert!(cx.responder().is_none(), "the answer is taken once");
        match method {
            "later" | "handoff_panic" => {
                let ms = params["ms"].as_u64().unwrap_or(0);
                thread::spawn(move || {
                    let token = responder.cancel_token();
                    let deadline = Instant::now() + Duration::from_millis(ms);
                    match token.sleep_until(deadline) {
                        Ok(()) => responder.respond(Ok(json!({ "slept": ms }))),
                        // Cancelled: say so where the test can see it, then answer anyway (the
                        // loop must drop the answer of a cancelled request).
                        Err(e) => {
                            let _ = responder.notify("test/saw-cancel", Some(json!(e.to_string())));
                            responder.respond(Ok(json!("too late")));
                        }
                    }
                });
            }
            "drop" => {
                thread::spawn(move || drop(responder));
            }
            "stubborn" => {
                // Ignores cancellation: answers after `ms` whatever happened meanwhile.
                let ms = params["ms"].as_u64().unwrap_or(0);
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(ms));
                    responder.respond(Ok(json!({ "stubborn": ms })));
                });
            }
            "post" => {
                thread::spawn(move || {
                    responder
                        .post(Box::new("from a thread".to_owned()))
                        .unwrap();
                    responder.respond(Ok(json!("posted")));
                });
            }
            "ask" | "ask_briefly" => {
                let wait = if method == "ask" { 5000 } else { 200 };
                thread::spawn(move || {
                    let answer = responder.call("question", None, Duration::from_millis(wait));
                    responder.respond(answer.map_err(|e| ErrorObject::internal(e.to_string())));
                });
            }
            _ => self.kept.push(responder),
        }
        if method == "handoff_panic" {
            panic!("the handler panics after handing its responder to a thread");
        }
        Ok(Value::Null)
    }

    fn handle_post(&mut self, data: Box<dyn std::any::Any + Send>, _cx: &mut Context<'_>) {
        self.posts.push(*data.downcast::<String>().unwrap());
    }

    fn handle_response(&mut self, response: mcpipe::Response, cx: &mut Context<'_>) {
        // Where the test can see it: a response no thread took.
        let id = response.id.map(|id| id.to_value());
        let _ = cx.notify("test/stray-response", Some(json!(id)));
    }

    fn cancel_method(&self) -> Option<&str> {
        Some("cancel")
    }
}

struct Running {
    input: Option<std::io::PipeWriter>,
    output: Receiver<Vec<u8>>,
    done: Receiver<Result<Outcome, mcpipe::Error>>,
}

fn start(server: Server) -> Running {
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (tx, done) = mpsc::channel();
    thread::spawn(move || {
        let mut handler = Deferring::default();
        let outcome = server.serve(in_r.as_fd(), out_w.as_fd(), &mut handler);
        drop(out_w);
        let _ = tx.send(outcome);
    });
    Running {
        input: Some(in_w),
        output: line_channel(out_r),
        done,
    }
}

impl Running {
    fn send(&mut self, bytes: &[u8]) {
        self.input.as_mut().unwrap().write_all(bytes).unwrap();
    }
    fn recv(&self) -> Value {
        recv_json(&self.output)
    }
}

fn server() -> Server {
    util::test_server()
}

#[test]
fn a_later_answer_does_not_hold_up_the_next_request() {
    let _w = watchdog("later_answer", Duration::from_secs(30));
    let mut s = start(server());
    let started = Instant::now();
    s.send(&request(1, "later", json!({ "ms": 1000 })));
    s.send(&request(2, "quick", json!({})));
    let first = s.recv();
    assert_eq!(first["id"], 2, "the quick one first: {first}");
    assert!(started.elapsed() < Duration::from_millis(800));
    let second = s.recv();
    assert_eq!(
        second,
        json!({ "jsonrpc": "2.0", "id": 1, "result": { "slept": 1000 } })
    );
}

#[test]
fn a_responder_dropped_unanswered_answers_internal_error() {
    let _w = watchdog("dropped_responder", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request("d", "drop", json!({})));
    let answer = s.recv();
    assert_eq!(answer["id"], "d");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
}

#[test]
fn a_cancelled_later_request_wakes_its_holder_and_gets_no_answer() {
    let _w = watchdog("cancel_later", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "later", json!({ "ms": 60_000 })));
    s.send(&request(2, "quick", json!({})));
    assert_eq!(s.recv()["id"], 2);
    let cancelled = Instant::now();
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":1}}\n");
    let saw = s.recv();
    assert_eq!(saw["method"], "test/saw-cancel", "{saw}");
    assert!(cancelled.elapsed() < Duration::from_millis(500));
    // The answer it gave after the cancellation is not sent: the next line is the ping's.
    s.send(&request(3, "ping", json!({})));
    assert_eq!(s.recv()["id"], 3);
}

#[test]
fn posts_reach_the_handler_on_the_loop_before_the_answer() {
    let _w = watchdog("posts", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "post", json!({})));
    assert_eq!(s.recv()["result"], "posted");
    s.send(&request(2, "count", json!({})));
    assert_eq!(s.recv()["result"]["posts"], 1);
}

#[test]
fn a_thread_can_ask_the_peer_through_the_loop() {
    let _w = watchdog("ask", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "ask", json!({})));
    let question = s.recv();
    assert_eq!(question["method"], "question");
    let id = question["id"].clone();
    // The loop keeps serving while the thread waits.
    s.send(&request(2, "quick", json!({})));
    assert_eq!(s.recv()["id"], 2);
    let reply = json!({ "jsonrpc": "2.0", "id": id, "result": { "answer": 42 } });
    s.send(format!("{reply}\n").as_bytes());
    assert_eq!(s.recv()["result"], json!({ "answer": 42 }));
}

#[test]
fn a_thread_asking_the_peer_learns_at_once_when_the_input_ends() {
    let _w = watchdog("ask_eof", Duration::from_secs(30));
    // The question waits 5 s for an answer, the grace 10 s: without the end of input failing
    // it, the answer would come after 5 s.
    let mut s = start(server().shutdown_grace(Duration::from_secs(10)));
    s.send(&request(1, "ask", json!({})));
    assert_eq!(s.recv()["method"], "question");
    let started = Instant::now();
    s.input = None;
    let answer = s.recv();
    assert_eq!(answer["id"], 1, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("ended its input"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let outcome = s.done.recv_timeout(util::BOUND).unwrap().unwrap();
    assert_eq!(outcome, Outcome::Eof);
}

#[test]
fn end_of_input_awaits_owed_answers_then_answers_for_stuck_ones() {
    let _w = watchdog("eof_owed", Duration::from_secs(30));
    let mut s = start(server().shutdown_grace(Duration::from_millis(300)));
    s.send(&request(1, "later", json!({ "ms": 100 })));
    s.send(&request(2, "never", json!({})));
    s.input = None;
    assert_eq!(s.recv()["id"], 1);
    // `never` keeps its responder and ignores the cancellation: after the grace and the
    // cancellation's half second, the loop answers for it.
    let stuck = s.recv();
    assert_eq!(stuck["id"], 2);
    assert_eq!(stuck["error"]["code"], -32603, "{stuck}");
    let outcome = s.done.recv_timeout(util::BOUND).unwrap().unwrap();
    assert_eq!(outcome, Outcome::Eof);
}

#[test]
fn at_the_in_flight_bound_new_requests_wait_for_a_free_slot() {
    let _w = watchdog("in_flight", Duration::from_secs(30));
    let mut s = start(server().max_in_flight(2));
    s.send(&request(1, "later", json!({ "ms": 300 })));
    s.send(&request(2, "later", json!({ "ms": 300 })));
    s.send(&request(3, "quick", json!({})));
    // 3 waits until one of the two frees a slot.
    let first = s.recv();
    assert_ne!(
        first["id"], 3,
        "the third request started before a slot was free"
    );
    let ids: Vec<Value> = (0..2).map(|_| s.recv()["id"].clone()).collect();
    assert!(ids.contains(&json!(3)));
}

#[test]
fn end_of_input_behind_the_in_flight_bound_still_ends_and_answers_every_request() {
    let _w = watchdog("eof_saturated", Duration::from_secs(30));
    let mut s = start(
        server()
            .max_in_flight(1)
            .shutdown_grace(Duration::from_millis(300)),
    );
    // 1 holds the only slot and never answers; 2 and 3 wait, read ahead, for a slot that
    // never frees. The end of input must still start the grace, and end the loop after it.
    s.send(&request(1, "never", json!({})));
    s.send(&request(2, "quick", json!({})));
    s.send(&request(3, "quick", json!({})));
    thread::sleep(Duration::from_millis(50));
    s.input = None;
    let mut answers: Vec<Value> = (0..3).map(|_| s.recv()).collect();
    answers.sort_by_key(|a| a["id"].as_i64());
    for (answer, id) in answers.iter().zip(1..) {
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
    }
    let unstarted = answers[1]["error"]["message"].as_str().unwrap();
    assert!(
        unstarted.contains("before the request started"),
        "{unstarted}"
    );
    let outcome = s.done.recv_timeout(util::BOUND).unwrap().unwrap();
    assert_eq!(outcome, Outcome::Eof);
}

#[test]
fn at_the_end_requests_behind_the_bound_still_start_while_answers_keep_coming() {
    let _w = watchdog("eof_saturated_progress", Duration::from_secs(30));
    let mut s = start(
        server()
            .max_in_flight(1)
            .shutdown_grace(Duration::from_millis(700)),
    );
    // One slot, five calls of 200 ms: a second of work after the end of input, more than the
    // grace. The grace is for a loop where nothing moves; here every answer frees the slot for
    // the next (200 ms apart, well inside the grace), so every call runs and is answered.
    for id in 1..=5 {
        s.send(&request(id, "later", json!({ "ms": 200 })));
    }
    s.input = None;
    for id in 1..=5 {
        let answer = s.recv();
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"], json!({ "slept": 200 }), "{answer}");
    }
    assert_eq!(
        s.done.recv_timeout(util::BOUND).unwrap().unwrap(),
        Outcome::Eof
    );
}

#[test]
fn at_the_end_requests_still_unread_behind_the_read_ahead_bound_are_answered_too() {
    let _w = watchdog("eof_unread", Duration::from_secs(60));
    let mut s = start(
        server()
            .max_in_flight(1)
            .max_read_ahead_bytes(1024)
            .shutdown_grace(Duration::from_millis(200)),
    );
    // One slot held for good, a read-ahead of 1 KiB, and 100 KB of requests behind them: one
    // read takes what the line buffer holds, the rest stays in the pipe, unread, when the
    // writer hangs up. At the end every request is answered, the unread ones too.
    s.send(&request(1, "never", json!({})));
    let mut burst = Vec::new();
    let mut last = 1;
    while burst.len() < 100_000 {
        last += 1;
        burst.extend(request(last, "quick", json!({})));
    }
    s.send(&burst);
    s.input = None;
    let mut ids: Vec<i64> = (1..=last)
        .map(|_| s.recv()["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=last).collect::<Vec<i64>>());
    assert_eq!(
        s.done.recv_timeout(util::BOUND).unwrap().unwrap(),
        Outcome::Eof
    );
}

#[test]
fn at_the_end_a_waiting_request_the_peer_cancelled_is_still_not_answered() {
    let _w = watchdog("eof_saturated_cancel", Duration::from_secs(30));
    let mut s = start(
        server()
            .max_in_flight(1)
            .shutdown_grace(Duration::from_millis(100)),
    );
    s.send(&request(1, "never", json!({})));
    s.send(&request(2, "quick", json!({})));
    s.send(&request(3, "quick", json!({})));
    // A request cancelled while it waits for a slot is dropped, never answered: at the end too.
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":3}}\n");
    thread::sleep(Duration::from_millis(50));
    s.input = None;
    let mut ids: Vec<i64> = (0..2).map(|_| s.recv()["id"].as_i64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);
    assert_eq!(
        s.done.recv_timeout(util::BOUND).unwrap().unwrap(),
        Outcome::Eof
    );
    let extra = s.output.recv_timeout(Duration::from_millis(200));
    assert!(extra.is_err(), "nothing after the last answer: {extra:?}");
}

#[test]
fn a_cancellation_behind_the_in_flight_bound_is_still_honoured() {
    let _w = watchdog("cancel_saturated", Duration::from_secs(30));
    let mut s = start(server().max_in_flight(1));
    s.send(&request(1, "later", json!({ "ms": 60_000 })));
    s.send(&request(2, "quick", json!({})));
    // Sent once 1 is running (a cancellation read together with its request drops the request
    // before it starts, which is another test's case).
    thread::sleep(Duration::from_millis(100));
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":1}}\n");
    // Read ahead while saturated: the cancellation frees the slot, and 2 is served.
    let saw = s.recv();
    assert_eq!(saw["method"], "test/saw-cancel", "{saw}");
    assert_eq!(s.recv()["id"], 2);
}

#[test]
fn a_request_queued_behind_a_handler_holding_the_loop_is_dropped_when_cancelled() {
    let _w = watchdog("queued_cancel", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "block", json!({ "ms": 300 })));
    s.send(&request(2, "quick", json!({})));
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":2}}\n");
    s.send(&request(3, "ping", json!({})));
    assert_eq!(s.recv()["id"], 1);
    let next = s.recv();
    assert_eq!(
        next["id"], 3,
        "the cancelled request must get no response: {next}"
    );
}

#[test]
fn the_id_of_a_cancelled_request_may_be_used_again_at_once_and_its_late_answer_is_dropped() {
    let _w = watchdog("reused_id", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(5, "stubborn", json!({ "ms": 400 })));
    // Answered in order: once 4 is, 5 runs (a cancellation read before it started would
    // drop it unstarted instead).
    s.send(&request(4, "quick", json!({})));
    assert_eq!(s.recv()["id"], 4);
    s.send(b"{\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":5}}\n");
    // A cancelled request awaits no answer (MCP 2026-07-28 lets its id be used again). The
    // new one answers later too, after the old one's late answer (at 400 ms), which must
    // neither be written nor settle the new one.
    s.send(&request(5, "later", json!({ "ms": 800 })));
    let answered = s.recv();
    assert_eq!(answered["id"], 5, "{answered}");
    assert_eq!(answered["result"], json!({ "slept": 800 }), "{answered}");
    util::assert_silent(&s.output, Duration::from_millis(300));
    s.send(&request(6, "quick", json!({})));
    assert_eq!(s.recv()["id"], 6);
}

#[test]
fn a_second_request_with_the_id_of_one_in_flight_is_refused_and_both_are_answered() {
    let _w = watchdog("duplicate_id", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(5, "later", json!({ "ms": 200 })));
    s.send(&request(5, "quick", json!({})));
    let refused = s.recv();
    assert_eq!(refused["id"], 5);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let answered = s.recv();
    assert_eq!(answered["result"], json!({ "slept": 200 }), "{answered}");
}

#[test]
fn waiting_answers_do_not_count_toward_the_in_flight_bound() {
    let _w = watchdog("waiting_responders", Duration::from_secs(30));
    let mut s = start(
        server()
            .max_in_flight(1)
            .shutdown_grace(Duration::from_millis(100)),
    );
    for id in 1..=3 {
        s.send(&request(id, "park", json!({})));
    }
    // Three waits are held, and work still starts.
    s.send(&request(4, "later", json!({ "ms": 10 })));
    assert_eq!(s.recv()["id"], 4);
    s.send(&request(5, "quick", json!({})));
    assert_eq!(s.recv()["id"], 5);
    // At the end every wait is answered (with an error: nothing answered it).
    s.input = None;
    let mut ended: Vec<i64> = (0..3).map(|_| s.recv()["id"].as_i64().unwrap()).collect();
    ended.sort_unstable();
    assert_eq!(ended, [1, 2, 3]);
}

#[test]
fn a_panic_after_handing_the_responder_away_leaves_a_reused_id_its_own_answer() {
    let _w = watchdog("handoff_panic", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "handoff_panic", json!({ "ms": 300 })));
    let panicked = s.recv();
    assert_eq!(panicked["error"]["code"], -32603, "{panicked}");
    // The id is free again: a new request takes it, and must get its own answer, not the
    // one the panicked request's thread gives 300 ms later.
    s.send(&request(1, "later", json!({ "ms": 600 })));
    let mut told = None;
    let answer = loop {
        let line = s.recv();
        if line["method"] == "test/saw-cancel" {
            told = Some(line["params"].clone());
            continue;
        }
        break line;
    };
    assert_eq!(
        answer,
        json!({ "jsonrpc": "2.0", "id": 1, "result": { "slept": 600 } }),
        "the reused id got another request's answer"
    );
    // It is told what happened (the loop gave up on the request), not that the peer
    // cancelled it.
    let told = told.expect("the thread holding the panicked request's responder was not told");
    assert_eq!(
        told,
        json!(mcpipe::Error::HandlerPanicked.to_string()),
        "the thread was told another reason"
    );
    assert!(told.as_str().unwrap().contains("panicked"), "{told}");
}

#[test]
fn a_late_answer_to_a_question_a_thread_gave_up_on_is_dropped() {
    let _w = watchdog("ask_late", Duration::from_secs(30));
    let mut s = start(server());
    s.send(&request(1, "ask_briefly", json!({})));
    let question = s.recv();
    assert_eq!(question["method"], "question", "{question}");
    let id = question["id"].clone();
    // The thread gives up after 200 ms: the peer is told, and the request is answered.
    let mut seen = Vec::new();
    while !seen.iter().any(|m: &Value| m["id"] == 1) {
        seen.push(s.recv());
    }
    assert!(
        seen.iter()
            .any(|m| m["method"] == "cancel" && m["params"]["requestId"] == id),
        "{seen:?}"
    );
    // The answer comes late; then a request whose answer shows the late one was handled.
    let reply = json!({ "jsonrpc": "2.0", "id": id, "result": { "answer": 42 } });
    s.send(format!("{reply}\n").as_bytes());
    s.send(&request(2, "quick", json!({})));
    let mut after = Vec::new();
    while !after.iter().any(|m: &Value| m["id"] == 2) {
        after.push(s.recv());
    }
    assert!(
        !after.iter().any(|m| m["method"] == "test/stray-response"),
        "the late answer reached the handler as a stray response: {after:?}"
    );
}
