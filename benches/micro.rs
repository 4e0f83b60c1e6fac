//! Micro-benchmarks of the framing and message layers, each next to its floor.
//!
//! Run: `cargo bench --bench micro` (or `cargo bench`); `cargo bench --bench micro -- --test` runs
//! each once. Every benchmark checks its own result (the number of lines found, the method
//! parsed), so a fast wrong answer fails instead of winning.
//!
//! - `lines`: the loop's line buffer against a bare `memchr` scan of the same bytes, and against
//!   copying them in 64 KiB pieces and scanning (what any reader that owns its buffer must do;
//!   the copy stands in for the kernel's copy in `read`). The 10 MB line measures a long line's
//!   growth: its buffer is let go after each pass, as after each large message.
//! - `cancel_look`: the look at each 64 KiB read for a possible cancellation (the cancel
//!   method's name or an escape that could spell it), which decides whether the loop parses
//!   buffered lines ahead; next to `lines::memchr_scan`, the newline scan of the same bytes.
//! - `message`: `Message::from_slice` + `Message::write_line` (what the loop does per request
//!   and response) against `serde_json::from_slice::<Value>` + `serde_json::to_writer` alone.
//! - `parse`: classifying one `tools/call` line the loop's way (the top level read without a
//!   `Value` map) against the `Value` path it replaced, which it must match exactly.
//! - `answer`: answering one `tools/call` with a text result, from `ToolResult::text` to the
//!   response line: the MCP layer's way (the result written as JSON text, no `Value`) against
//!   the `Value` path, written by the crate's writer and by serde_json's; in both eras. Each
//!   checks that its line is the same as the others'.

use std::hint::black_box;

use divan::counter::BytesCount;
use divan::Bencher;
use mcpipe::internals::{CancellationLook, Classified, LineSplitter};
use mcpipe::{Message, Response, ToolResult};
use serde_json::Value;

fn main() {
    divan::main();
}

/// The size of one simulated read.
const READ: usize = 64 * 1024;

/// About 4 MiB of echo request lines whose text is `TEXT` bytes long (one line if longer), and
/// their number.
fn stream<const TEXT: usize>() -> (Vec<u8>, usize) {
    let text = "x".repeat(TEXT);
    let mut data = Vec::new();
    let mut lines = 0;
    while data.len() < (4 << 20) {
        data.extend_from_slice(
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{lines},\"method\":\"echo\",\"params\":{{\"text\":\"{text}\"}}}}\n"
            )
            .as_bytes(),
        );
        lines += 1;
    }
    (data, lines)
}

mod lines {
    use super::*;

    /// The floor: find every newline, nothing else.
    #[divan::bench(consts = [100, 100_000, 10_000_000])]
    fn memchr_scan<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let (data, lines) = stream::<TEXT>();
        bencher
            .counter(BytesCount::of_slice(&data))
            .bench(|| assert_eq!(memchr::memchr_iter(b'\n', black_box(&data)).count(), lines));
    }

    /// Copy into a reused 64 KiB buffer, then scan it: a reader that owns its buffer.
    #[divan::bench(consts = [100, 100_000, 10_000_000])]
    fn copy_and_scan<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let (data, lines) = stream::<TEXT>();
        let mut buf = vec![0u8; READ];
        bencher
            .counter(BytesCount::of_slice(&data))
            .bench_local(|| {
                let mut found = 0;
                for piece in black_box(&data).chunks(READ) {
                    buf[..piece.len()].copy_from_slice(piece);
                    found += memchr::memchr_iter(b'\n', &buf[..piece.len()]).count();
                }
                assert_eq!(found, lines);
            });
    }

    /// The loop's line buffer, fed in 64 KiB reads, every line taken.
    #[divan::bench(consts = [100, 100_000, 10_000_000])]
    fn line_buffer<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let (data, lines) = stream::<TEXT>();
        let mut splitter = LineSplitter::new(64 << 20);
        bencher
            .counter(BytesCount::of_slice(&data))
            .bench_local(|| {
                let mut found = 0;
                let mut rest = black_box(&data[..]);
                while !rest.is_empty() {
                    let spare = splitter.spare();
                    let n = spare.len().min(READ).min(rest.len());
                    spare[..n].copy_from_slice(&rest[..n]);
                    splitter.commit(n);
                    rest = &rest[n..];
                    while let Some(line) = splitter.next_line() {
                        black_box(line.expect("no line is oversize"));
                        found += 1;
                    }
                }
                assert_eq!(found, lines);
            });
    }
}

mod cancel_look {
    use super::*;

    /// About 4 MiB of echo requests with `TEXT`-byte texts, looked at in 64 KiB reads: none
    /// may hold a cancellation.
    #[divan::bench(consts = [100, 100_000])]
    fn plain_requests<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let (data, _) = stream::<TEXT>();
        let mut look = CancellationLook::new();
        bencher
            .counter(BytesCount::of_slice(&data))
            .bench_local(|| {
                for read in black_box(&data).chunks(READ) {
                    assert!(!look.look(read));
                }
            });
    }
}

mod message {
    use super::*;

    /// One 100-byte echo request, as the pipelined benchmark sends it.
    fn request() -> Vec<u8> {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"echo\",\"params\":{{\"text\":\"{}\"}}}}",
            "x".repeat(100)
        )
        .into_bytes()
    }

    /// The floor: serde_json alone, parsing to a `Value` and writing one back.
    #[divan::bench]
    fn serde_json_value(bencher: Bencher<'_, '_>) {
        let line = request();
        let mut out = Vec::new();
        bencher
            .counter(BytesCount::of_slice(&line))
            .bench_local(|| {
                let v: Value = serde_json::from_slice(black_box(&line)).expect("valid JSON");
                assert_eq!(v["method"], "echo");
                out.clear();
                serde_json::to_writer(&mut out, &v).expect("writing to a Vec");
                out.push(b'\n');
                black_box(&out);
            });
    }

    /// mcpipe: parse and classify the request, answer with its params, write the response.
    #[divan::bench]
    fn parse_and_respond(bencher: Bencher<'_, '_>) {
        let line = request();
        let mut out = Vec::new();
        bencher
            .counter(BytesCount::of_slice(&line))
            .bench_local(|| {
                let Ok(Message::Request(req)) = Message::from_slice(black_box(&line)) else {
                    panic!("not a request");
                };
                assert_eq!(req.method, "echo");
                let response = Response::ok(req.id, req.params.unwrap_or(Value::Null));
                out.clear();
                Message::Response(response).write_line(&mut out);
                black_box(&out);
            });
    }
}

mod parse {
    use super::*;

    /// One `tools/call` of the demo's `echo` with a text of `TEXT` bytes.
    fn call<const TEXT: usize>() -> Vec<u8> {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":12345,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{}\"}}}}}}",
            "x".repeat(TEXT)
        )
        .into_bytes()
    }

    fn check(classified: Classified) {
        let Classified::Single(Ok(Message::Request(req))) = classified else {
            panic!("not a request");
        };
        assert_eq!(req.method, "tools/call");
        black_box(req);
    }

    /// The loop's parse: the top level's names borrowed, no `Value` map for it.
    #[divan::bench(consts = [100, 100_000])]
    fn lazy_envelope<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let line = call::<TEXT>();
        bencher
            .counter(BytesCount::of_slice(&line))
            .bench(|| check(mcpipe::internals::classify(black_box(&line))));
    }

    /// The MCP server's parse: a `tools/call`'s name and arguments read apart from its params,
    /// whose object and two names are never built.
    #[divan::bench(consts = [100, 100_000])]
    fn call_apart<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let line = call::<TEXT>();
        bencher.counter(BytesCount::of_slice(&line)).bench(|| {
            let (classified, apart) = mcpipe::internals::classify_call(black_box(&line));
            assert!(apart.is_some(), "read apart");
            black_box(apart);
            check(classified);
        });
    }

    /// Takes the echo's `text` as the demo does, and checks it and the call.
    fn take_text<const TEXT: usize>(arguments: Option<mcpipe::Arguments>, call: Classified) {
        let text = arguments
            .expect("arguments")
            .take_string("text")
            .expect("a text");
        assert_eq!(text.len(), TEXT);
        black_box(text);
        check(call);
    }

    /// A call read apart, then its `text` argument taken as the demo's echo takes it: from
    /// the arguments' text on a short line (the whole call: 100 B), built then moved on a long
    /// one (100 KB).
    #[divan::bench(consts = [100, 100_000])]
    fn call_argument_taken<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let line = call::<TEXT>();
        bencher.counter(BytesCount::of_slice(&line)).bench(|| {
            let (classified, apart) = mcpipe::internals::classify_call(black_box(&line));
            take_text::<TEXT>(apart.and_then(|a| a.arguments()), classified);
        });
    }

    /// The same with the arguments' text built into a map first (by serde_json, then taken
    /// from the map): what reading every value costs a tool that asks for one.
    #[divan::bench(consts = [100, 100_000])]
    fn call_argument_from_map<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let line = call::<TEXT>();
        bencher.counter(BytesCount::of_slice(&line)).bench(|| {
            let (classified, apart) = mcpipe::internals::classify_call(black_box(&line));
            let [_, arguments] = apart.expect("read apart").into_values();
            take_text::<TEXT>(arguments.map(mcpipe::Arguments::from_value), classified);
        });
    }

    /// The `Value` path it replaced (still taken for batches, escaped names and errors).
    #[divan::bench(consts = [100, 100_000])]
    fn value_path<const TEXT: usize>(bencher: Bencher<'_, '_>) {
        let line = call::<TEXT>();
        bencher
            .counter(BytesCount::of_slice(&line))
            .bench(|| check(mcpipe::internals::classify_by_value(black_box(&line))));
    }
}

mod answer {
    use super::*;
    use mcpipe::RequestId;

    /// The text of the result and, for MCP 2026-07-28, the server's info.
    fn inputs<const TEXT: usize>() -> (String, Value) {
        let info = serde_json::json!({ "name": "mcpipe-demo", "version": "0.1.0" });
        ("x".repeat(TEXT), info)
    }

    /// The response line every path must write.
    fn expected(text: &str, info: Option<&Value>) -> Vec<u8> {
        let value = mcpipe::internals::tool_result_value(ToolResult::text(text), info);
        let mut out = Vec::new();
        Message::Response(Response::ok(RequestId::from(12345), value)).write_line(&mut out);
        out
    }

    /// The MCP layer's way: `ToolResult` to JSON text, framed as the loop frames it.
    fn direct(text: &str, info: Option<&Value>, out: &mut Vec<u8>) {
        let result = ToolResult::text(black_box(text));
        out.clear();
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":12345,\"result\":");
        mcpipe::internals::write_tool_result(&result, info, out);
        out.extend_from_slice(b"}\n");
    }

    /// The `Value` path: the result built as a `Value`, written by the crate's writer.
    fn by_value(text: &str, info: Option<&Value>, out: &mut Vec<u8>) {
        let value = mcpipe::internals::tool_result_value(ToolResult::text(black_box(text)), info);
        out.clear();
        Message::Response(Response::ok(RequestId::from(12345), value)).write_line(out);
    }

    /// The `Value` path written by serde_json (the writer before this crate had its own).
    fn by_value_serde(text: &str, info: Option<&Value>, out: &mut Vec<u8>) {
        let value = mcpipe::internals::tool_result_value(ToolResult::text(black_box(text)), info);
        out.clear();
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":12345,\"result\":");
        serde_json::to_writer(&mut *out, &value).expect("writing to a Vec");
        out.extend_from_slice(b"}\n");
    }

    fn run<const TEXT: usize>(
        bencher: Bencher<'_, '_>,
        modern: bool,
        answer: fn(&str, Option<&Value>, &mut Vec<u8>),
    ) {
        let (text, info) = inputs::<TEXT>();
        let info = modern.then_some(&info);
        let want = expected(&text, info);
        let mut out = Vec::new();
        answer(&text, info, &mut out);
        assert_eq!(out, want, "a path wrote another line");
        bencher
            .counter(BytesCount::of_slice(&want))
            .bench_local(|| {
                answer(&text, info, &mut out);
                black_box(&out);
            });
    }

    #[divan::bench(consts = [100, 100_000], args = [false, true])]
    fn direct_text<const TEXT: usize>(bencher: Bencher<'_, '_>, modern: bool) {
        run::<TEXT>(bencher, modern, direct);
    }

    #[divan::bench(consts = [100, 100_000], args = [false, true])]
    fn value_path<const TEXT: usize>(bencher: Bencher<'_, '_>, modern: bool) {
        run::<TEXT>(bencher, modern, by_value);
    }

    #[divan::bench(consts = [100, 100_000], args = [false, true])]
    fn value_path_serde_writer<const TEXT: usize>(bencher: Bencher<'_, '_>, modern: bool) {
        run::<TEXT>(bencher, modern, by_value_serde);
    }
}
