//! The loop skips the read that would only say `EAGAIN` after a short read of a pipe. These
//! tests pin the cases where that could sleep past input: a writer that hangs up while the
//! loop is busy between its short read and its poll, a writer gone before the loop starts, a
//! burst in many small writes, and a writer that sends packets. Each checks every answer
//! arrives, the loop ends at end of file, and `Stats::late_input` says whether the loop only
//! found input by its confirming read (0 unless the writer sends packets). Watchdogs and
//! deadlines everywhere: a hang fails the test.
//!
//! Linux only: a short read stands in for `EAGAIN` only on the private pipe description
//! reopened through `/proc/self/fd` (elsewhere the loop reads until `EAGAIN`), and the tests
//! watch the loop's thread in `/proc` and use Linux's packet pipes (`O_DIRECT`).
#![cfg(target_os = "linux")]

mod util;

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use mcpipe::{Context, ErrorObject, Handler, Outcome, Request, Stats};
use serde_json::{json, Value};
use util::{line_channel, recv_json, request, test_server, watchdog, BOUND};

const LIMIT: Duration = Duration::from_secs(60);

/// Answers every request with its method; a `hold` request blocks the loop's thread until the
/// test says go, so the test can act between the loop's read and its next poll; `tid` answers
/// the loop thread's id (see [`Running::warm_up`]).
struct Hold {
    entered: Sender<()>,
    go: Receiver<()>,
    stats: Option<Stats>,
}

impl Handler for Hold {
    fn handle_request(
        &mut self,
        req: Request,
        _cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        if req.method == "hold" {
            self.entered
                .send(())
                .expect("the test waits for the handler");
            self.go.recv_timeout(BOUND).expect("the test says go");
        }
        if req.method == "tid" {
            // "/proc/thread-self" links to "PID/task/TID".
            let link = std::fs::read_link("/proc/thread-self").expect("Linux /proc");
            let tid = link.file_name().unwrap().to_string_lossy().into_owned();
            return Ok(json!({"tid": tid}));
        }
        Ok(json!({"method": req.method}))
    }

    fn on_shutdown(&mut self, _outcome: &Outcome, cx: &mut Context<'_>) {
        self.stats = Some(cx.stats().clone());
    }
}

/// A loop serving `input` on a thread; its outcome and final stats come back on the channel.
struct Running {
    output: Receiver<Vec<u8>>,
    done: Receiver<(Outcome, Stats)>,
    entered: Receiver<()>,
    go: Sender<()>,
}

fn serve(input: impl AsFd + Send + 'static) -> Running {
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    thread::spawn(move || {
        let mut handler = Hold {
            entered: entered_tx,
            go: go_rx,
            stats: None,
        };
        let outcome = test_server()
            .serve(input.as_fd(), out_w.as_fd(), &mut handler)
            .expect("the loop ends cleanly");
        drop(out_w);
        let _ = done_tx.send((outcome, handler.stats.expect("on_shutdown ran")));
    });
    Running {
        output: line_channel(out_r),
        done,
        entered,
        go,
    }
}

impl Running {
    /// Makes the loop skip the `EAGAIN` read after its next short reads, deterministically: the
    /// loop first follows a short read with a probe read and skips only after probes found the
    /// pipe empty. So: `rounds` requests, each written only once the loop sleeps in its poll
    /// (its thread's `wchan`), so that every probe finds the pipe empty. After 11 rounds the
    /// next 8 short reads skip (runs of 1, 2, 4, 8 between probes).
    fn warm_up(&self, w: &mut impl Write, rounds: usize) {
        w.write_all(&request("tid", "tid", json!({}))).unwrap();
        let tid = recv_json(&self.output)["result"]["tid"]
            .as_str()
            .expect("the loop's thread id")
            .to_owned();
        let wchan = format!("/proc/self/task/{tid}/wchan");
        for round in 0..rounds {
            let deadline = Instant::now() + BOUND;
            loop {
                let now = std::fs::read_to_string(&wchan).unwrap_or_default();
                if now.contains("epoll") || now.contains("ep_poll") {
                    break;
                }
                assert!(Instant::now() < deadline, "the loop never slept: {now:?}");
                thread::sleep(Duration::from_millis(1));
            }
            w.write_all(&request(round, "echo", json!({}))).unwrap();
            assert_eq!(recv_json(&self.output)["id"], round);
        }
    }

    fn finish(self) -> Stats {
        let (outcome, stats) = self
            .done
            .recv_timeout(BOUND)
            .unwrap_or_else(|_| panic!("the loop did not end within {BOUND:?}"));
        assert_eq!(outcome, Outcome::Eof);
        stats
    }
}

#[test]
fn a_writer_that_hangs_up_between_our_short_read_and_our_poll_is_read_to_its_end() {
    let _w = watchdog("hang_up_between_read_and_poll", LIMIT);
    let (r, mut w) = std::io::pipe().unwrap();
    let run = serve(r);
    run.warm_up(&mut w, 11);
    // The loop reads this line alone (a short read), then runs the handler, which waits.
    w.write_all(&request("h1", "hold", json!({}))).unwrap();
    run.entered.recv_timeout(BOUND).expect("the handler runs");
    // While the loop is busy and not polling: the last line, then the hang-up. The loop's
    // next poll reports both in one event; after it reads the line (short again), only the
    // remembered hang-up tells it to read on to end of file.
    w.write_all(&request("h2", "echo", json!({}))).unwrap();
    drop(w);
    run.go.send(()).unwrap();
    assert_eq!(recv_json(&run.output)["id"], "h1");
    assert_eq!(recv_json(&run.output)["id"], "h2");
    let stats = run.finish();
    assert_eq!(stats.requests, 1 + 11 + 2);
    assert_eq!(
        stats.late_input, 0,
        "end of file found only by the confirming read"
    );
}

#[test]
fn a_writer_gone_before_the_loop_starts_is_read_to_its_end() {
    let _w = watchdog("writer_gone_before_start", LIMIT);
    let (r, mut w) = std::io::pipe().unwrap();
    for id in 0..3 {
        w.write_all(&request(id, "echo", json!({}))).unwrap();
    }
    drop(w);
    let run = serve(r);
    for id in 0..3 {
        assert_eq!(recv_json(&run.output)["id"], id);
    }
    let stats = run.finish();
    assert_eq!(stats.requests, 3);
    assert_eq!(stats.late_input, 0);
}

#[test]
fn a_burst_split_over_many_small_writes_is_answered_in_full() {
    let _w = watchdog("burst_in_many_writes", LIMIT);
    let (r, mut w) = std::io::pipe().unwrap();
    let run = serve(r);
    run.warm_up(&mut w, 11);
    const N: usize = 2_000;
    let writer = thread::spawn(move || {
        let mut bytes = Vec::new();
        for id in 0..N {
            bytes.extend_from_slice(&request(id, "echo", json!({"pad": "x".repeat(id % 50)})));
        }
        // Pieces of 1 to 97 bytes, cut anywhere (mid-line, mid-UTF-8 is not possible here).
        let mut at = 0;
        let mut step = 1;
        while at < bytes.len() {
            let end = (at + step).min(bytes.len());
            w.write_all(&bytes[at..end]).unwrap();
            at = end;
            step = step * 7 % 97 + 1;
        }
        // The hang-up right after the last piece: it may come in the same event as that piece.
        drop(w);
    });
    for id in 0..N {
        assert_eq!(recv_json(&run.output)["id"], id);
    }
    writer.join().unwrap();
    let stats = run.finish();
    assert_eq!(stats.requests, 1 + 11 + N as u64);
    assert_eq!(stats.late_input, 0);
}

#[test]
fn a_writer_sending_packets_is_answered_late_but_never_stuck() {
    let _w = watchdog("packet_writer", LIMIT);
    // The writer turns on packet mode (`O_DIRECT`) for its own end of a pipe, which the
    // reading end cannot see: each read returns one packet, so a short read leaves the rest.
    // Python does the `fcntl` (tests stay free of `unsafe`) and relays each line we write to
    // it as one packet; on `BURST` it writes three packets at once.
    let script = r#"
import fcntl, os, sys
fd = sys.stdout.fileno()
fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
for line in sys.stdin.buffer:
    if line == b"BURST\n":
        for i in range(3):
            os.write(fd, b'{"jsonrpc":"2.0","id":"p%d","method":"echo"}\n' % i)
        sys.stderr.write("written\n")
        sys.stderr.flush()
    else:
        os.write(fd, line)
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut relay = child.stdin.take().unwrap();
    let mut said = std::io::BufReader::new(child.stderr.take().unwrap());
    let run = serve(child.stdout.take().unwrap());
    run.warm_up(&mut relay, 11);
    relay.write_all(&request("h", "hold", json!({}))).unwrap();
    run.entered.recv_timeout(BOUND).expect("the handler runs");
    // While the loop is busy: three packets behind one readiness edge.
    relay.write_all(b"BURST\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert_eq!(line, "written\n");
    run.go.send(()).unwrap();
    assert_eq!(recv_json(&run.output)["id"], "h");
    for id in ["p0", "p1", "p2"] {
        assert_eq!(recv_json(&run.output)["id"], id);
    }
    // The writer ends when its input does: the loop then sees end of file.
    drop(relay);
    assert!(child.wait().unwrap().success());
    let stats = run.finish();
    assert_eq!(stats.requests, 1 + 11 + 4);
    assert!(
        stats.late_input >= 1,
        "packets found without the confirming read: {stats:?}"
    );
}
