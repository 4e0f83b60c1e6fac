//! Tests of the connection: readiness, pipes, answers and the output queue.

use super::*;
use std::io::Write;
use std::os::unix::net::UnixStream;

fn config() -> ConnectionConfig {
    ConnectionConfig {
        max_message_bytes: 1 << 20,
        max_output_bytes: 1 << 20,
        max_read_ahead_bytes: 1 << 20,
        handle_signals: false,
        log_bad_input: false,
    }
}

const LINE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n";

// Linux only: the short read stands in for `EAGAIN` on the pipe description reopened through
// `/proc/self/fd`; elsewhere the loop reads a pipe until `EAGAIN`.
#[cfg(target_os = "linux")]
#[test]
fn a_short_read_of_a_pipe_stands_in_for_the_eagain_read() {
    let (r, mut w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    conn.input_readiness.skips_left = 1;
    w.write_all(LINE).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
    assert!(!conn.input_ready(), "a short read emptied the pipe");
    // The wait after it reads once more (here the registration's own event).
    conn.wait(Some(Duration::ZERO)).unwrap();
    assert!(conn.input_ready());
    assert_eq!(conn.fill().unwrap(), Fill::WouldBlock);
}

#[cfg(target_os = "linux")] // as above: short reads count only on Linux
#[test]
fn probes_that_find_the_pipe_empty_lengthen_the_skips_and_one_that_finds_bytes_ends_them() {
    let (r, mut w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    // Ping-pong: each short read is followed by the probe or, once probes found the pipe
    // empty, by nothing; the runs between probes double: 1, 2, 4, 8.
    let mut probes = 0;
    for _ in 0..11 {
        w.write_all(LINE).unwrap();
        assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
        if conn.input_ready() {
            probes += 1;
            assert_eq!(conn.fill().unwrap(), Fill::WouldBlock);
        }
        conn.input_readiness.ready = true;
    }
    assert_eq!(
        (
            probes,
            conn.input_readiness.skip_run,
            conn.input_readiness.skips_left
        ),
        (4, 8, 8)
    );
    // A stream: input arrived before the probe, so reads come first again.
    conn.input_readiness.skips_left = 0;
    w.write_all(LINE).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
    w.write_all(LINE).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
    assert_eq!(
        (
            conn.input_readiness.skip_run,
            conn.input_readiness.skips_left
        ),
        (0, 0)
    );
    assert!(conn.input_ready(), "the next read is a probe again");
}

#[test]
fn a_hang_up_polled_before_a_short_read_keeps_the_input_read_to_end_of_file() {
    // As in a handler's peek: the writer wrote and hung up, the poll reports both at
    // once, then the read empties the pipe. No event will ever come again, so only the
    // remembered hang-up makes the loop read on and see end of file.
    let (r, mut w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    conn.input_readiness.skips_left = 1;
    w.write_all(LINE).unwrap();
    drop(w);
    conn.wait(Some(Duration::ZERO)).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
    assert!(conn.input_ready(), "the hang-up was forgotten");
    assert_eq!(conn.fill().unwrap(), Fill::Eof);
}

#[test]
fn a_large_result_text_is_not_kept_once_sent_and_a_small_one_is() {
    let (r, _w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let mut config = config();
    config.max_output_bytes = 64 << 20;
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config).unwrap();
    // Something waits in the queue, so the large answer is copied in behind it.
    conn.enqueue(&Message::Response(Response::ok(
        RequestId::from(0),
        "w".into(),
    )));
    let id = RequestId::from(1);
    let text = conn.answer_text(&id);
    text.extend_from_slice(b"\"");
    text.extend(std::iter::repeat_n(b'x', 4 << 20));
    text.extend_from_slice(b"\"");
    conn.queue_answer(Response::ok(id.clone(), serde_json::Value::Null));
    assert!(
        conn.session.queue.pending() > 2 << 20,
        "the answer was queued"
    );
    assert_eq!(conn.answer_line.capacity(), 0, "a 4 MiB text kept");
    conn.answer_text(&id).extend_from_slice(b"{}");
    conn.queue_answer(Response::ok(id, serde_json::Value::Null));
    assert!(
        conn.answer_line.capacity() >= 2,
        "a small text's buffer let go"
    );
    drop(out_r);
}

#[test]
fn a_large_answer_goes_to_an_empty_queue_without_a_copy() {
    let (r, _w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut config = config();
    config.max_output_bytes = 64 << 20;
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config).unwrap();
    let id = RequestId::from("big");
    let text = conn.answer_text(&id);
    text.extend_from_slice(b"\"");
    text.extend(std::iter::repeat_n(b'x', 2 << 20));
    text.extend_from_slice(b"\"");
    let made_at = text.as_ptr();
    conn.queue_answer(Response::ok(id, serde_json::Value::Null));
    let queued = conn.session.queue.buffer();
    assert_eq!(queued.as_ptr(), made_at, "the answer was copied");
    assert!(queued.starts_with(b"{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"result\":\"xxx"));
    assert!(queued.ends_with(b"xxx\"}\n"));
    assert_eq!(queued.len(), (2 << 20) + 41);
}

#[test]
fn a_result_text_in_a_batch_is_read_back_into_the_value_and_a_failure_leaves_it() {
    let (r, _w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    conn.answer_text(&RequestId::from(3))
        .extend_from_slice(b"[true]");
    let response = conn.answer_value(Response::ok(RequestId::from(3), serde_json::Value::Null));
    assert_eq!(response.result, Ok(serde_json::json!([true])));
    // A handler that wrote part of its text and then failed: the error goes out alone.
    conn.answer_text(&RequestId::from(4))
        .extend_from_slice(b"[tr");
    let error = crate::message::ErrorObject::internal("boom");
    conn.queue_answer(Response::error(Some(RequestId::from(4)), error.clone()));
    let queued = conn.session.queue.buffer().clone();
    assert_eq!(
        queued,
        Message::Response(Response::error(Some(RequestId::from(4)), error)).to_line()
    );
}

#[cfg(target_os = "linux")]
#[test]
fn an_input_pipe_found_full_is_widened_and_a_quiet_one_is_not() {
    let (r, mut w) = std::io::pipe().unwrap();
    let (_out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    let capacity = || crate::sys::pipe_capacity(r.as_fd()).unwrap();
    assert_eq!(capacity(), endpoint::DEFAULT_PIPE);
    w.write_all(LINE).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(LINE.len()));
    assert_eq!(
        capacity(),
        endpoint::DEFAULT_PIPE,
        "a quiet pipe was widened"
    );
    // As much as the pipe holds, with no newline yet: the peer found it full.
    w.write_all(&vec![b'x'; endpoint::DEFAULT_PIPE]).unwrap();
    assert_eq!(conn.fill().unwrap(), Fill::Bytes(endpoint::DEFAULT_PIPE));
    assert_eq!(capacity(), endpoint::WIDE_PIPE);
}

#[cfg(target_os = "linux")]
#[test]
fn an_output_pipe_found_full_is_widened_and_written_on_at_once() {
    let (r, _w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let mut conn = Connection::new(r.as_fd(), out_w.as_fd(), &config()).unwrap();
    let answer = Response::ok(RequestId::from(1), "y".repeat(100_000).into());
    conn.enqueue(&Message::Response(answer));
    conn.flush();
    // Nobody read: the 100 KB went into the pipe, widened when it was found full.
    assert_eq!(conn.output_pending(), 0, "the answer waits for an event");
    assert!(conn.output_writable());
    assert_eq!(
        crate::sys::pipe_capacity(out_r.as_fd()).unwrap(),
        endpoint::WIDE_PIPE
    );
    // Found full again, it stays as it is.
    conn.enqueue(&Message::Response(Response::ok(
        RequestId::from(2),
        "z".repeat(200_000).into(),
    )));
    conn.flush();
    assert!(!conn.output_writable());
    assert_eq!(
        crate::sys::pipe_capacity(out_r.as_fd()).unwrap(),
        endpoint::WIDE_PIPE
    );
}

#[test]
fn a_handler_peeking_reads_ahead_through_the_socket_and_sees_its_cancellation() {
    let (mut peer, ours) = UnixStream::pair().unwrap();
    let mut conn = Connection::new(ours.as_fd(), ours.as_fd(), &config()).unwrap();
    conn.session.set_cancel_method(Some("cancel".to_owned()));
    conn.session.running = Some(crate::message::RequestId::from("r"));
    peer.write_all(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\n\
          {\"jsonrpc\":\"2.0\",\"method\":\"cancel\",\"params\":{\"requestId\":\"r\"}}\n",
    )
    .unwrap();
    assert!(!conn.session.interrupted());
    conn.peek(true);
    assert!(conn.session.interrupted());
    assert_eq!(conn.session.deferred.len(), 1);
}
