//! `Context::watch`: the loop serves a handler's own fd alongside its input, on its one
//! thread, and `Context::respond` answers from there (in-process pipes, under a watchdog).

mod util;

use std::io::{PipeReader, Read, Write};
use std::os::fd::{AsFd, OwnedFd};

use mio::unix::pipe::Receiver;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use mcpipe::{Context, ErrorObject, Handler, Request, Responder};
use serde_json::{json, Value};
use util::{line_channel, recv_json, request, test_server, watchdog};

const KEY: usize = 7;

/// Watches `upstream` once asked (`watch`), and answers each `wait` request with the next
/// word read from it.
struct Relay {
    upstream: Receiver,
    watching: bool,
    waiting: Vec<Responder>,
    /// Keys `handle_readable` was called with.
    keys: Vec<usize>,
}

impl Handler for Relay {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        match req.method.as_str() {
            "watch" => {
                cx.watch(self.upstream.as_fd(), KEY)
                    .map_err(|e| ErrorObject::internal(e.to_string()))?;
                self.watching = true;
                Ok(json!("watching"))
            }
            "wait" => {
                self.waiting
                    .push(cx.responder().expect("a request has a responder"));
                Ok(Value::Null)
            }
            "unwatch" => {
                cx.unwatch(self.upstream.as_fd(), KEY);
                self.watching = false;
                Ok(json!("unwatched"))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }

    fn handle_readable(&mut self, key: usize, cx: &mut Context<'_>) {
        self.keys.push(key);
        let mut buf = [0u8; 256];
        // Edge-triggered: read until the pipe is empty.
        loop {
            match self.upstream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]).trim().to_owned();
                    if !self.waiting.is_empty() {
                        let responder = self.waiting.remove(0);
                        cx.respond(responder, Ok(json!(text)));
                    }
                }
            }
        }
    }
}

/// The handler reads until `WouldBlock`, so its end must not block.
fn nonblocking(r: PipeReader) -> Receiver {
    let rx = Receiver::from(OwnedFd::from(r));
    rx.set_nonblocking(true).unwrap();
    rx
}

#[test]
fn a_watched_fd_is_served_by_the_loop_and_answers_from_it_go_out() {
    let _w = watchdog("watch_serves", Duration::from_secs(30));
    let (up_r, mut up_w) = std::io::pipe().unwrap();
    let up_r = nonblocking(up_r);
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (done_tx, done) = mpsc::channel();
    let server = thread::spawn(move || {
        let mut relay = Relay {
            upstream: up_r,
            watching: false,
            waiting: Vec::new(),
            keys: Vec::new(),
        };
        let outcome = test_server().serve(in_r.as_fd(), out_w.as_fd(), &mut relay);
        drop(out_w);
        let _ = done_tx.send((outcome.is_ok(), relay.keys, relay.watching));
    });
    let output = line_channel(out_r);

    in_w.write_all(&request(1, "watch", json!({}))).unwrap();
    assert_eq!(recv_json(&output)["result"], "watching");
    // The answer comes only from the watched pipe: the loop must wake for it.
    in_w.write_all(&request(2, "wait", json!({}))).unwrap();
    thread::sleep(Duration::from_millis(100));
    up_w.write_all(b"first\n").unwrap();
    let answer = recv_json(&output);
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"], "first");
    // Again, so the watch is not a one-off.
    in_w.write_all(&request(3, "wait", json!({}))).unwrap();
    thread::sleep(Duration::from_millis(100));
    up_w.write_all(b"second\n").unwrap();
    let answer = recv_json(&output);
    assert_eq!(answer["id"], 3);
    assert_eq!(answer["result"], "second");

    in_w.write_all(&request(4, "unwatch", json!({}))).unwrap();
    assert_eq!(recv_json(&output)["result"], "unwatched");
    drop(in_w);
    let (ok, keys, watching) = done.recv_timeout(Duration::from_secs(20)).unwrap();
    server.join().unwrap();
    assert!(ok);
    assert!(!watching);
    assert!(keys.iter().all(|k| *k == KEY), "{keys:?}");
    assert!(keys.len() >= 2, "{keys:?}");
}

/// Watches a plain `PipeReader` (blocking, as std makes it), once asked or from the start
/// (`from_start`), and passes what it reads on as `feed` notifications.
struct Feed {
    upstream: PipeReader,
    from_start: bool,
}

impl Handler for Feed {
    fn on_start(&mut self, cx: &mut Context<'_>) {
        if self.from_start {
            cx.watch(self.upstream.as_fd(), KEY).unwrap();
        }
    }

    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        match req.method.as_str() {
            "watch" => {
                cx.watch(self.upstream.as_fd(), KEY)
                    .map_err(|e| ErrorObject::internal(e.to_string()))?;
                Ok(json!("watching"))
            }
            "unwatch" => {
                cx.unwatch(self.upstream.as_fd(), KEY);
                Ok(json!("unwatched"))
            }
            _ => Ok(json!("pong")),
        }
    }

    fn handle_readable(&mut self, _key: usize, cx: &mut Context<'_>) {
        let mut buf = [0u8; 256];
        // As the docs say: read until the read would block.
        while let Ok(n @ 1..) = self.upstream.read(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).trim().to_owned();
            let _ = cx.notify("feed", Some(json!(text)));
        }
    }
}

#[test]
fn a_watched_blocking_pipe_does_not_stall_the_loop() {
    let _w = watchdog("watch_blocking", Duration::from_secs(30));
    let (up_r, mut up_w) = std::io::pipe().unwrap();
    let (in_r, mut in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (done_tx, done) = mpsc::channel();
    let server = thread::spawn(move || {
        let mut feed = Feed {
            upstream: up_r,
            from_start: false,
        };
        let outcome = test_server().serve(in_r.as_fd(), out_w.as_fd(), &mut feed);
        drop(out_w);
        let _ = done_tx.send(outcome.is_ok());
    });
    let output = line_channel(out_r);
    in_w.write_all(&request(1, "watch", json!({}))).unwrap();
    assert_eq!(recv_json(&output)["result"], "watching");
    // The watched pipe is empty and its writer open: a blocking read in the handler would
    // hold the loop, and this request would never be answered.
    in_w.write_all(&request(2, "ping", json!({}))).unwrap();
    let pong = output
        .recv_timeout(Duration::from_secs(5))
        .expect("the loop stalled in a read of the watched pipe");
    assert_eq!(serde_json::from_slice::<Value>(&pong).unwrap()["id"], 2);
    up_w.write_all(b"hello\n").unwrap();
    assert_eq!(
        recv_json(&output),
        json!({"jsonrpc": "2.0", "method": "feed", "params": "hello"})
    );
    in_w.write_all(&request(3, "unwatch", json!({}))).unwrap();
    assert_eq!(recv_json(&output)["result"], "unwatched");
    drop(in_w);
    assert!(done.recv_timeout(Duration::from_secs(20)).unwrap());
    server.join().unwrap();
    drop(up_w);
}

#[test]
fn a_handler_watches_from_the_start_before_the_peer_says_anything() {
    let _w = watchdog("watch_on_start", Duration::from_secs(30));
    let (up_r, mut up_w) = std::io::pipe().unwrap();
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let server = thread::spawn(move || {
        let mut feed = Feed {
            upstream: up_r,
            from_start: true,
        };
        let outcome = test_server().serve(in_r.as_fd(), out_w.as_fd(), &mut feed);
        drop(out_w);
        outcome.is_ok()
    });
    let output = line_channel(out_r);
    // Nothing on the input: only the watch set up in `on_start` can wake the loop.
    up_w.write_all(b"hello\n").unwrap();
    let told = recv_json(&output);
    assert_eq!(told["method"], "feed", "{told}");
    assert_eq!(told["params"], "hello", "{told}");
    drop(in_w);
    assert!(server.join().unwrap());
}
