//! The properties the fuzz targets check, as plain functions of the input bytes.
//!
//! Each fuzz target in `fuzz_targets/` is one call into this module, and `tests/fuzz_replay.rs`
//! includes the same file (by `#[path]`) to replay every corpus and artifact file through the
//! same functions on stable Rust. A property failing is a panic that names what went wrong.
//!
//! Only public API is used: `mcpipe::internals` (the sans-IO pieces, behind the unstable
//! `internals` feature) and the loop itself.
// Each includer uses a different part of this module.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::thread;

use mcpipe::internals::{LineSplitter, Oversize};
use mcpipe::{Context, ErrorCode, ErrorObject, Handler, Outcome, Request, Server};
use serde_json::{Map, Value};

#[path = "client_properties.rs"]
mod client_properties;
#[allow(unused_imports)] // Each includer uses some of them.
pub(crate) use client_properties::{client_responses, client_session};
#[path = "json_grammar.rs"]
mod json_grammar;
#[path = "message_properties.rs"]
mod message_properties;
#[allow(unused_imports)] // The replay test and the `message` target use it.
pub(crate) use message_properties::message;
#[path = "session_properties.rs"]
mod session_properties;
#[allow(unused_imports)] // Only the replay test and the `server_session` target use it.
pub(crate) use session_properties::server_session;

const BOM: &[u8] = b"\xEF\xBB\xBF";

// ---------------------------------------------------------------------------------------------
// framing: the line buffer against a naive split of the whole input
// ---------------------------------------------------------------------------------------------

/// The reference framing: split the whole input on `\n`; strip one trailing `\r` from each
/// piece and a byte order mark from the first; a piece longer than `max` is one oversize line;
/// a piece of only spaces, tabs and `\r` is skipped; the last piece needs no newline.
pub(crate) fn reference_split(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, Oversize>> {
    let mut lines = Vec::new();
    for (i, piece) in input.split(|&b| b == b'\n').enumerate() {
        let mut line = piece.strip_suffix(b"\r").unwrap_or(piece);
        if i == 0 {
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        let blank = line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'));
        if line.len() > max {
            lines.push(Err(Oversize));
        } else if !blank {
            lines.push(Ok(line.to_vec()));
        }
    }
    lines
}

/// How a framing input is read: the first byte is the line limit (0..=255, small so that the
/// oversize paths are hit), the next three are piece sizes (1..=256, cycled), the rest is the
/// stream. Shorter inputs are a stream on their own, with limit 16 and one-byte pieces.
fn framing_setup(data: &[u8]) -> (usize, Vec<usize>, &[u8]) {
    if data.len() < 4 {
        return (16, vec![1], data);
    }
    let max = usize::from(data[0]);
    let sizes = data[1..4].iter().map(|&b| usize::from(b) + 1).collect();
    (max, sizes, &data[4..])
}

/// Splits `input` with the loop's line buffer, delivering it in pieces of `chunk_sizes` (cycled,
/// 0 counts as 1), each cut short by the room the buffer offers and by the end of the input.
/// Every complete line is taken after each piece, as the loop does after each read; at the end
/// the input is finished as at end of file.
fn split_lines(input: &[u8], chunk_sizes: &[usize], max: usize) -> Vec<Result<Vec<u8>, Oversize>> {
    let mut splitter = LineSplitter::new(max);
    let mut lines = Vec::new();
    let mut rest = input;
    let mut sizes = chunk_sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let spare = splitter.spare();
        let size = sizes.next().unwrap_or(usize::MAX).max(1);
        let n = size.min(rest.len()).min(spare.len());
        spare[..n].copy_from_slice(&rest[..n]);
        splitter.commit(n);
        rest = &rest[n..];
        while let Some(line) = splitter.next_line() {
            lines.push(line.map(<[u8]>::to_vec));
        }
    }
    while let Some(line) = splitter.finish() {
        lines.push(line.map(<[u8]>::to_vec));
    }
    lines
}

/// `framing`: whatever the pieces, the line buffer yields exactly the reference lines.
pub(crate) fn framing(data: &[u8]) {
    let (max, sizes, stream) = framing_setup(data);
    let want = reference_split(stream, max);
    let got = split_lines(stream, &sizes, max);
    assert_eq!(
        got, want,
        "pieces {sizes:?}, limit {max}: the line buffer disagrees with the reference split"
    );
    let whole = split_lines(stream, &[usize::MAX], max);
    assert_eq!(
        whole, want,
        "one piece, limit {max}: the line buffer disagrees with the reference split"
    );
}

// ---------------------------------------------------------------------------------------------
// message: classification against the JSON-RPC rules, valid errors, stable round trips
// ---------------------------------------------------------------------------------------------

/// What the rules (JSON-RPC 2.0 with MCP's ids; see issue 2, point 4) say one JSON value is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expect {
    /// A request: it gets exactly one response carrying `id`.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification: never a response.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response from the peer: handed to the handler, never answered.
    Response { id: Value, ok: bool },
    /// Not a valid message: one `-32600` carrying `id` (null when no valid id can be read).
    Invalid { id: Value },
}

impl Expect {
    /// Whether the loop writes something back for this value.
    fn is_answered(&self) -> bool {
        matches!(self, Expect::Request { .. } | Expect::Invalid { .. })
    }
}

/// A string or an integer: the only ids MCP allows.
fn is_valid_id(v: &Value) -> bool {
    v.is_string() || v.is_i64() || v.is_u64()
}

/// The rules, written out independently of `src/message.rs`.
pub(crate) fn expect(value: &Value) -> Expect {
    let Some(obj) = value.as_object() else {
        return Expect::Invalid { id: Value::Null };
    };
    let has_method = obj.contains_key("method");
    let id = match obj.get("id") {
        None => None,
        Some(v) if is_valid_id(v) => Some(v.clone()),
        // A null id is how an error response answers a message whose id could not be read.
        Some(Value::Null) if !has_method => None,
        Some(_) => return Expect::Invalid { id: Value::Null },
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Expect::Invalid { id: reply_id };
    }
    if let Some(method) = obj.get("method") {
        let Some(method) = method.as_str() else {
            return Expect::Invalid { id: reply_id };
        };
        let params = match obj.get("params") {
            None => None,
            Some(p) if p.is_object() || p.is_array() => Some(p.clone()),
            Some(_) => return Expect::Invalid { id: reply_id },
        };
        let method = method.to_owned();
        return match id {
            Some(id) => Expect::Request { id, method, params },
            None => Expect::Notification { method, params },
        };
    }
    match (obj.get("result"), obj.get("error")) {
        (Some(_), None) if id.is_some() => Expect::Response {
            id: reply_id,
            ok: true,
        },
        (None, Some(e)) if is_error_object(e) => Expect::Response {
            id: reply_id,
            ok: false,
        },
        _ => Expect::Invalid { id: reply_id },
    }
}

fn is_error_object(e: &Value) -> bool {
    e.get("code").is_some_and(Value::is_i64) && e.get("message").is_some_and(Value::is_string)
}

pub(crate) fn check_error_value(value: &Value, code: ErrorCode, id: &Value) {
    let obj = value
        .as_object()
        .expect("an error response is not an object");
    assert_eq!(obj.len(), 3, "an error response has other members: {value}");
    assert_eq!(obj.get("jsonrpc"), Some(&Value::from("2.0")), "{value}");
    assert_eq!(obj.get("id"), Some(id), "wrong id in {value}");
    let error = obj["error"].as_object().expect("error is not an object");
    assert!(
        error["code"].is_i64(),
        "error code is not an integer: {value}"
    );
    assert_eq!(
        error["code"].as_i64(),
        Some(code.0),
        "wrong code in {value}"
    );
    assert!(
        error["message"].is_string(),
        "message is not a string: {value}"
    );
}

// ---------------------------------------------------------------------------------------------
// server_loop: the whole loop over real pipes
// ---------------------------------------------------------------------------------------------

/// The loop's message limit in the `server_loop` target: small, so oversize lines are common.
pub(crate) const LOOP_MAX_MESSAGE_BYTES: usize = 512;

/// A handler whose every answer can be predicted, and that never sleeps.
///
/// Methods: `echo` (its params, or null), `fail` (error `-32000`), `panic`, `notify` (sends a
/// notification with its params first, then answers `true`); any other method is `-32601`.
#[derive(Debug, Default)]
pub(crate) struct EchoHandler;

impl Handler for EchoHandler {
    fn handle_request(&mut self, req: Request, cx: &mut Context<'_>) -> Result<Value, ErrorObject> {
        match req.method.as_str() {
            "echo" => Ok(req.params.unwrap_or(Value::Null)),
            "fail" => Err(ErrorObject::new(ErrorCode(-32000), "failed on purpose")),
            "panic" => panic!("the fuzz handler panics on purpose"),
            "notify" => {
                cx.notify("notifications/fuzz", req.params)
                    .map_err(|e| ErrorObject::internal(e.to_string()))?;
                Ok(Value::Bool(true))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

/// What [`EchoHandler`] answers to a request, checked on the response object.
pub(crate) fn check_echo_reply(method: &str, params: Option<&Value>, reply: &Map<String, Value>) {
    let error_code = || reply.get("error").and_then(|e| e["code"].as_i64());
    match method {
        "echo" => assert_eq!(
            reply.get("result"),
            Some(params.unwrap_or(&Value::Null)),
            "echo did not echo"
        ),
        "notify" => assert_eq!(reply.get("result"), Some(&Value::Bool(true))),
        "fail" => assert_eq!(error_code(), Some(-32000)),
        "panic" => assert_eq!(error_code(), Some(ErrorCode::INTERNAL_ERROR.0)),
        _ => assert_eq!(error_code(), Some(ErrorCode::METHOD_NOT_FOUND.0)),
    }
}

/// `server_loop` with [`EchoHandler`].
pub(crate) fn server_loop(stream: &[u8]) {
    server_loop_with(stream, EchoHandler, check_echo_reply);
}

/// `server_loop`: the loop, fed `stream` through a pipe in pieces, ends at end of input without
/// panicking; every output line is JSON; every well-formed request gets exactly one response,
/// with its id, in order; notifications and responses get none; every bad line gets one error.
///
/// The handler is a parameter so a richer one (the MCP demo handler) can be fuzzed the same
/// way; `check_reply` checks what it answered to one request. Lines the handler sends on its
/// own (they carry a `method`) are checked to be JSON and otherwise skipped.
pub(crate) fn server_loop_with<H: Handler + Send + 'static>(
    stream: &[u8],
    handler: H,
    check_reply: fn(&str, Option<&Value>, &Map<String, Value>),
) {
    let want = expect_loop_output(stream, LOOP_MAX_MESSAGE_BYTES);
    let (outcome, output) = run_loop(stream, handler, LOOP_MAX_MESSAGE_BYTES);
    assert_eq!(
        outcome,
        Outcome::Eof,
        "the loop did not end at end of input"
    );
    if !output.is_empty() {
        assert_eq!(output.last(), Some(&b'\n'), "the output ends mid-line");
    }
    let mut replies = Vec::new();
    for line in output.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!(
                "output line is not JSON ({e}): {}",
                String::from_utf8_lossy(line)
            )
        });
        if value.get("method").is_none() {
            replies.push(value);
        }
    }
    assert_eq!(
        replies.len(),
        want.len(),
        "{} lines answered, {} expected: {replies:?} vs {want:?}",
        replies.len(),
        want.len()
    );
    for (got, want) in replies.iter().zip(&want) {
        match want {
            Answer::One(want) => check_reply_value(got, want, check_reply),
            Answer::Batch(wants) => {
                let got = got
                    .as_array()
                    .expect("a batch was not answered with an array");
                assert_eq!(
                    got.len(),
                    wants.len(),
                    "a batch answer lost or gained items"
                );
                for (got, want) in got.iter().zip(wants) {
                    check_reply_value(got, want, check_reply);
                }
            }
        }
    }
}

/// What the loop writes for one input line.
#[derive(Debug)]
enum Answer {
    One(Reply),
    Batch(Vec<Reply>),
}

/// What one reply must be.
#[derive(Debug)]
enum Reply {
    Error { code: ErrorCode, id: Value },
    Request(Expect),
}

/// The answers the loop owes `stream`, line by line, from the reference split and the rules.
fn expect_loop_output(stream: &[u8], max: usize) -> Vec<Answer> {
    let mut answers = Vec::new();
    for line in reference_split(stream, max) {
        let error = |code| Reply::Error {
            code,
            id: Value::Null,
        };
        let Ok(line) = line else {
            answers.push(Answer::One(error(ErrorCode::INVALID_REQUEST)));
            continue;
        };
        match serde_json::from_slice::<Value>(&line) {
            Err(_) => answers.push(Answer::One(error(ErrorCode::PARSE_ERROR))),
            Ok(Value::Array(items)) if items.is_empty() => {
                answers.push(Answer::One(error(ErrorCode::INVALID_REQUEST)));
            }
            Ok(Value::Array(items)) => {
                let replies: Vec<Reply> = items.iter().filter_map(reply_for).collect();
                if !replies.is_empty() {
                    answers.push(Answer::Batch(replies));
                }
            }
            Ok(value) => answers.extend(reply_for(&value).map(Answer::One)),
        }
    }
    answers
}

fn reply_for(value: &Value) -> Option<Reply> {
    let want = expect(value);
    if !want.is_answered() {
        return None;
    }
    Some(match want {
        Expect::Invalid { id } => Reply::Error {
            code: ErrorCode::INVALID_REQUEST,
            id,
        },
        request => Reply::Request(request),
    })
}

fn check_reply_value(
    got: &Value,
    want: &Reply,
    check_reply: fn(&str, Option<&Value>, &Map<String, Value>),
) {
    match want {
        Reply::Error { code, id } => check_error_value(got, *code, id),
        Reply::Request(Expect::Request { id, method, params }) => {
            let obj = got.as_object().expect("a response is not an object");
            assert_eq!(obj.get("jsonrpc"), Some(&Value::from("2.0")), "{got}");
            assert_eq!(
                obj.get("id"),
                Some(id),
                "a response carries the wrong id: {got}"
            );
            assert_eq!(
                obj.len(),
                3,
                "a response needs exactly id, jsonrpc and one of result and error: {got}"
            );
            assert!(
                obj.contains_key("result") != obj.contains_key("error"),
                "a response needs exactly one of result and error: {got}"
            );
            check_reply(method, params.as_ref(), obj);
        }
        Reply::Request(other) => unreachable!("only requests are answered: {other:?}"),
    }
}

/// Serves `stream` (written through a pipe in pieces of varying size, then closed) with
/// `handler`; returns how the loop ended and everything it wrote.
// `std::io::pipe` is newer than the library's MSRV; tests and fuzz targets build with a current
// toolchain (proptest, a dev-dependency, needs 1.88 anyway), the library does not use it.
#[allow(clippy::incompatible_msrv)]
pub(crate) fn run_loop<H: Handler + Send + 'static>(
    stream: &[u8],
    handler: H,
    max_message_bytes: usize,
) -> (Outcome, Vec<u8>) {
    run_loop_built(stream, move || handler, max_message_bytes)
}

/// [`run_loop`] with a handler built on the loop's own thread (an `McpServer`, whose tool
/// functions need not be `Send`).
#[allow(clippy::incompatible_msrv)]
pub(crate) fn run_loop_built<H: Handler + 'static>(
    stream: &[u8],
    build: impl FnOnce() -> H + Send + 'static,
    max_message_bytes: usize,
) -> (Outcome, Vec<u8>) {
    let (input_rx, mut input_tx) = std::io::pipe().expect("no pipe");
    let (mut output_rx, output_tx) = std::io::pipe().expect("no pipe");
    let server = thread::spawn(move || {
        let mut handler = build();
        let outcome = Server::new()
            .handle_signals(false)
            .log_bad_input(false)
            .idle_timeout(None)
            .max_message_bytes(max_message_bytes)
            .serve(input_rx.as_fd(), output_tx.as_fd(), &mut handler);
        // Closing the output here is what ends the reader's `read_to_end`.
        drop(output_tx);
        outcome
    });
    // The loop keeps reading while its output waits (it queues up to its output bound), so
    // writing everything before reading anything cannot deadlock.
    let mut rest = stream;
    for size in [1, 2, 5, 64, 700, 4096].into_iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let n = size.min(rest.len());
        input_tx
            .write_all(&rest[..n])
            .expect("the loop stopped reading its input");
        rest = &rest[n..];
    }
    drop(input_tx);
    let mut output = Vec::new();
    output_rx
        .read_to_end(&mut output)
        .expect("reading the loop's output");
    let outcome = match server.join() {
        Ok(result) => result.expect("the loop failed"),
        Err(_) => panic!("the loop panicked"),
    };
    (outcome, output)
}

// ---------------------------------------------------------------------------------------------
// server_loop_mcp: the loop with the MCP layer
// ---------------------------------------------------------------------------------------------

/// An MCP server like the demo, minus anything slow: tools `echo`, `fail` and `panic` on the
/// loop's thread, `nap` (sleeps up to 3 ms, with progress) and `cpanic` on the worker pool, a
/// resource and a prompt.
fn mcp_server() -> mcpipe::McpServer<u64> {
    use mcpipe::{
        Content, McpServer, Prompt, PromptMessage, Resource, ResourceContents, TaskSupport, Tool,
        ToolResult,
    };
    McpServer::new("fuzz", "0", 0u64)
        .tool(
            Tool::new("echo", "echo").arg("text", "string", "text"),
            |calls, args, _cx| {
                *calls += 1;
                Ok(ToolResult::text(args.string("text")?))
            },
        )
        .tool(Tool::new("fail", "fail"), |_, _, _| {
            Err("failed on purpose".into())
        })
        .tool(Tool::new("panic", "panic"), |_, _, _| {
            panic!("the fuzz tool panics on purpose")
        })
        // Concurrent tools: answered later, from the worker pool (a responder), in any order.
        // `nap` also runs as a task when asked (so the server declares tasks and the fuzzer
        // reaches `tasks/*`); `ntask` must be one.
        .concurrent_tool(
            Tool::new("nap", "nap")
                .optional_arg("ms", "integer", "ms")
                .task_support(TaskSupport::Optional),
            |args, cx| {
                let ms = args.integer_or("ms", 0)?.clamp(0, 3) as u64;
                cx.progress(0.5, None, None)?;
                cx.sleep(std::time::Duration::from_millis(ms))?;
                Ok(ToolResult::text("napped"))
            },
        )
        .concurrent_tool(
            Tool::new("ntask", "ntask").task_support(TaskSupport::Required),
            |_, _| Ok(ToolResult::text("tasked")),
        )
        .concurrent_tool(Tool::new("cpanic", "cpanic"), |_, _| {
            panic!("the fuzz tool panics on purpose")
        })
        .resource(Resource::new("fuzz://readme", "readme"), |_, uri, _cx| {
            Ok(vec![ResourceContents::text(
                uri,
                Some("text/plain"),
                "readme",
            )])
        })
        .prompt(Prompt::new("greet", "greet"), |_, _, _| {
            Ok(vec![PromptMessage::user(Content::text("hello"))])
        })
}

/// `server_loop_mcp`: the loop with the MCP layer, fed `stream` in pieces, ends at end of input
/// without panicking; every output line is JSON; every well-formed request gets exactly one
/// response unless a `notifications/cancelled` in the stream names it (then at most one: it may
/// have run before the cancellation arrived); no response carries an id no request had.
/// Batches are answered as one array or one error depending on the negotiated version, so a
/// stream with a batch is checked only for valid JSON and unknown ids.
pub(crate) fn server_loop_mcp(stream: &[u8]) {
    let mut requests: Vec<Value> = Vec::new();
    let mut cancelled: Vec<Value> = Vec::new();
    let mut has_batch = false;
    for line in reference_split(stream, LOOP_MAX_MESSAGE_BYTES)
        .into_iter()
        .flatten()
    {
        let items = match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Array(items)) => {
                has_batch = true;
                items
            }
            Ok(value) => vec![value],
            Err(_) => continue,
        };
        for value in &items {
            match expect(value) {
                Expect::Request { id, .. } => requests.push(id),
                Expect::Notification { method, params } if method == "notifications/cancelled" => {
                    if let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) {
                        cancelled.push(id.clone());
                    }
                }
                Expect::Invalid { id } if !id.is_null() => requests.push(id),
                _ => {}
            }
        }
    }
    let (outcome, output) = run_loop_built(stream, mcp_server, LOOP_MAX_MESSAGE_BYTES);
    assert_eq!(
        outcome,
        Outcome::Eof,
        "the loop did not end at end of input"
    );
    if !output.is_empty() {
        assert_eq!(output.last(), Some(&b'\n'), "the output ends mid-line");
    }
    let mut answered: Vec<Value> = Vec::new();
    for line in output.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!(
                "output line is not JSON ({e}): {}",
                String::from_utf8_lossy(line)
            )
        });
        let items = match value {
            Value::Array(items) => items,
            other => vec![other],
        };
        for item in items {
            if item.get("method").is_some() {
                continue; // a notification the server sent on its own (progress, logs)
            }
            let id = item.get("id").cloned().unwrap_or(Value::Null);
            assert!(
                item.get("result").is_some() != item.get("error").is_some(),
                "a response needs exactly one of result and error: {item}"
            );
            if !id.is_null() {
                assert!(
                    requests.contains(&id),
                    "a response to an id nobody sent: {item}"
                );
                answered.push(id);
            }
        }
    }
    if has_batch {
        return;
    }
    check_answer_counts(&requests, &answered, &cancelled);
}

/// Every request id is answered as often as it was sent, or at most that often when a
/// cancellation in the stream named it.
pub(crate) fn check_answer_counts(requests: &[Value], answered: &[Value], cancelled: &[Value]) {
    for id in requests {
        let sent = requests.iter().filter(|r| *r == id).count();
        let got = answered.iter().filter(|a| *a == id).count();
        if cancelled.contains(id) {
            assert!(
                got <= sent,
                "id {id} answered {got} times for {sent} requests"
            );
        } else {
            assert_eq!(got, sent, "id {id}: {sent} requests, {got} answers");
        }
    }
}
