//! The sans-IO pieces of the loop, for the crate's own benchmarks, fuzz targets and the tests
//! that replay or measure them. Compiled only with the `internals` cargo feature.
//!
//! **Unstable**: not part of the crate's API and exempt from semver; anything here may change
//! or vanish in any release. Each item forwards to the crate-private code the server loop runs,
//! so what is measured and fuzzed is what serves.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;

use serde_json::Value;

use crate::cancel_spotter::CancelSpotter;
use crate::line_buffer::{Line, LineBuffer};
use crate::mcp::tool::ToolResult;
use crate::message::{
    parse_line, parse_line_apart, parse_line_by_value, ApartMember, ErrorObject, Message, Parsed,
    RequestId, Response,
};
use crate::responder::{CancelToken, Event};
use crate::session::{Limits, Session, Start};
use crate::write_queue::WriteQueue;

/// The client session's fuzz property (`client_session`): see its doc.
pub use crate::client::check_session;

/// A line longer than the limit, as the line buffer reports it (once per oversize line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversize;

/// The loop's line buffer: complete lines out of bytes that arrive in arbitrary pieces.
#[derive(Debug)]
pub struct LineSplitter(LineBuffer);

impl LineSplitter {
    /// An empty buffer that accepts lines of up to `max_line` bytes.
    pub fn new(max_line: usize) -> LineSplitter {
        LineSplitter(LineBuffer::new(max_line))
    }

    /// Room to read into (at least 64 KiB).
    pub fn spare(&mut self) -> &mut [u8] {
        self.0.spare()
    }

    /// Records that `n` bytes were written to the front of [`LineSplitter::spare`].
    pub fn commit(&mut self, n: usize) {
        self.0.commit(n);
    }

    /// The next complete line (blank lines skipped, no `\n`, no trailing `\r`, no leading byte
    /// order mark), or [`Oversize`]; `None` when more bytes are needed.
    pub fn next_line(&mut self) -> Option<Result<&[u8], Oversize>> {
        self.0.next_line().map(from_line)
    }

    /// Like [`LineSplitter::next_line`] at end of input: the last line needs no newline.
    pub fn finish(&mut self) -> Option<Result<&[u8], Oversize>> {
        self.0.finish().map(from_line)
    }
}

fn from_line(line: Line<'_>) -> Result<&[u8], Oversize> {
    match line {
        Line::Complete(bytes) => Ok(bytes),
        Line::Oversize => Err(Oversize),
    }
}

/// The loop's output queue: coalesced lines waiting for a writable fd.
#[derive(Debug)]
pub struct OutputQueue(WriteQueue);

impl OutputQueue {
    /// An empty queue that counts as full at `bound` pending bytes.
    pub fn new(bound: usize) -> OutputQueue {
        OutputQueue(WriteQueue::new(bound))
    }

    /// Appends one message as a line (serialising it, as the loop does for a response).
    pub fn push(&mut self, message: &Message) {
        self.0.push(message);
    }

    /// The buffer to append complete lines to directly.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        self.0.buffer()
    }

    /// Bytes still to be written.
    pub fn pending(&self) -> usize {
        self.0.pending()
    }

    /// Writes as much as `write` takes; `Ok(true)` when the queue is empty.
    ///
    /// # Errors
    /// Any error of `write` other than `WouldBlock`.
    pub fn write_to(&mut self, write: impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<bool> {
        self.0.write_to(write)
    }
}

/// What the loop makes of one complete line before it calls the handler.
#[derive(Debug)]
pub enum Classified {
    /// A line holding one value (or an empty array, or bytes that are not JSON): the message,
    /// or the error response the loop sends instead.
    Single(Result<Message, Response>),
    /// A non-empty array: for each element, the message, or the error response it gets.
    Batch(Vec<Result<Message, Response>>),
}

impl From<Parsed> for Classified {
    fn from(parsed: Parsed) -> Classified {
        match parsed {
            Parsed::Single(message) => Classified::Single(Ok(message)),
            Parsed::Invalid(response) => Classified::Single(Err(response)),
            Parsed::Batch(items) => Classified::Batch(items),
        }
    }
}

/// Classifies one line (without its newline) exactly as the loop does.
///
/// # Example
/// ```
/// use mcpipe::internals::{classify, Classified};
/// let c = classify(br#"[{"jsonrpc":"2.0","id":1,"method":"m"},7]"#);
/// assert!(matches!(c, Classified::Batch(ref items) if items.len() == 2 && items[1].is_err()));
/// ```
pub fn classify(line: &[u8]) -> Classified {
    Classified::from(parse_line(line))
}

/// Classifies one line through a `serde_json::Value` for the whole line, as the loop did
/// before it read a message's top level without one: the reference [`classify`] must equal,
/// error messages included (the `message` fuzz target checks it).
pub fn classify_by_value(line: &[u8]) -> Classified {
    Classified::from(parse_line_by_value(line))
}

/// Classifies one line as the loop does for the MCP layer: a `tools/call`'s `name` and
/// `arguments` read apart from its params, beside the message (when they were).
pub fn classify_call(line: &[u8]) -> (Classified, Option<ReadApart>) {
    let (parsed, taken) = parse_line_apart(line, Some(crate::mcp::server::TOOL_CALL_APART));
    (Classified::from(parsed), taken.map(ReadApart))
}

/// A `tools/call`'s `name` and `arguments` as [`classify_call`] read them apart: the
/// arguments of a short line kept as their JSON text.
#[derive(Debug)]
pub struct ReadApart(Box<crate::message::Apart>);

impl ReadApart {
    /// The two members' values (built from the text where the arguments were kept as text).
    pub fn into_values(self) -> [Option<Value>; 2] {
        let [name, arguments] = *self.0;
        [
            name.map(ApartMember::into_value),
            arguments.map(ApartMember::into_value),
        ]
    }

    /// Whether the arguments were kept as text.
    pub fn arguments_as_text(&self) -> bool {
        matches!(self.0[1], Some(ApartMember::ObjectText(..)))
    }

    /// The arguments as the MCP layer hands them to a tool (`None`: not an object).
    pub fn arguments(self) -> Option<crate::Arguments> {
        let [_, arguments] = *self.0;
        match arguments {
            Some(ApartMember::ObjectText(object)) => {
                Some(crate::Arguments::from_object_text(object))
            }
            Some(ApartMember::Value(Value::Object(map))) => Some(crate::Arguments::from_map(map)),
            Some(ApartMember::Value(Value::Null)) | None => Some(crate::Arguments::default()),
            Some(ApartMember::Value(_)) => None,
        }
    }
}

/// [`classify_call`] with the members read apart put back into the params: the outcome must
/// be [`classify`]'s (the `message` fuzz target checks it).
pub fn classify_apart(line: &[u8]) -> Classified {
    let apart = crate::mcp::server::TOOL_CALL_APART;
    match classify_call(line) {
        (Classified::Single(Ok(mut message)), taken) => {
            if let (Message::Request(request), Some(taken)) = (&mut message, taken) {
                if let Some(Value::Object(params)) = &mut request.params {
                    for (name, value) in apart.names.iter().zip(taken.into_values()) {
                        if let Some(value) = value {
                            params.insert((*name).to_owned(), value);
                        }
                    }
                }
            }
            Classified::Single(Ok(message))
        }
        (classified, _) => classified,
    }
}

/// Appends a `tools/call` result as the MCP layer answers a quick tool: JSON text written
/// straight from the [`ToolResult`], no `Value` built; with `server_info` (MCP 2026-07-28)
/// completed with `resultType` and the server's info in `_meta`.
pub fn write_tool_result(result: &ToolResult, server_info: Option<&Value>, out: &mut Vec<u8>) {
    result.write_json(out, server_info);
}

/// The `Value` a [`ToolResult`] answers as (completed under 2026-07-28 when `server_info` is
/// given): the path [`write_tool_result`] replaced, for benchmarks and tests to compare.
pub fn tool_result_value(result: ToolResult, server_info: Option<&Value>) -> Value {
    let mut value = result.into_value();
    if let Some(info) = server_info {
        crate::mcp::server::modern_result(&mut value, info, None);
    }
    value
}

/// The loop's look at each read for a possible cancellation (`notifications/cancelled`, or an
/// escape that could spell it), which decides whether buffered lines are parsed ahead.
#[derive(Debug)]
pub struct CancellationLook {
    spotter: CancelSpotter,
    end: u64,
}

impl CancellationLook {
    /// Looks for `notifications/cancelled`, the MCP layer's cancel method.
    pub fn new() -> CancellationLook {
        CancellationLook {
            spotter: CancelSpotter::new(Some("notifications/cancelled"), 0),
            end: 0,
        }
    }

    /// Looks at one read (without the overlap with the one before); whether it may hold a
    /// cancellation.
    pub fn look(&mut self, read: &[u8]) -> bool {
        let before = self.end;
        self.end += read.len() as u64;
        self.spotter.look(read, self.end);
        self.spotter.may_hold(before)
    }
}

impl Default for CancellationLook {
    fn default() -> CancellationLook {
        CancellationLook::new()
    }
}

/// The bytes of freed small blocks the calling thread keeps for its next allocations, when
/// `LargeBlockAllocator` is the global allocator (always 0 elsewhere than Linux).
pub fn cached_small_bytes() -> usize {
    #[cfg(target_os = "linux")]
    return crate::sys::cached_bytes();
    #[cfg(not(target_os = "linux"))]
    0
}

/// The file status flags (`F_GETFL`: access mode, `O_NONBLOCK`, ...) of `fd`, for the tests
/// that check the loop leaves them as it found them, on every system (Linux also shows them
/// in `/proc/self/fdinfo`, macOS nowhere else).
pub fn fd_status_flags(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<i32> {
    crate::sys::status_flags(fd)
}

/// The most bytes of freed small blocks one thread keeps.
pub const CACHED_SMALL_BYTES: usize = crate::large_blocks::CACHED_BYTES;

/// Classifies one line as the loop of a relay (`mcpipe wrap`) does, which forwards lines as
/// they came: the same outcome as [`classify`], except that requests and notifications may
/// come with `params: None` (their line holds them; the `message` fuzz target checks it).
pub fn classify_relayed(line: &[u8]) -> Classified {
    Classified::from(crate::relayed::parse_relayed(line, |_| false))
}

/// The top-level members (name, value text) of a JSON object as the relay's value-less reading finds
/// them, or `None` where it leaves the text to serde_json. Whatever it accepts, serde_json
/// must accept alike (the `message` fuzz target checks it).
pub fn scan_members(line: &[u8]) -> Option<Vec<(String, String)>> {
    let members = crate::json_read::top_level_spans(line)?;
    Some(
        members
            .iter()
            .map(|m| (m.name.to_owned(), m.value.to_owned()))
            .collect(),
    )
}

/// Drives the server loop's sans-IO session (the state the loop keeps: framing, read-ahead,
/// cancellation matching, answers owed by responders) with `stream`, handed over in pieces whose
/// sizes cycle through `pieces` (each at least 1), as the loop and a scripted handler would, with
/// no thread and no fd; returns every byte the session wrote.
///
/// The handler's script, by method: `later` takes the answer out of the loop (a responder) and
/// answers it two messages later (an error when its params are `"drop"`, as a dropped
/// responder does); `slow` reads ahead once before it returns (so a cancellation right behind
/// it suppresses its answer); anything else is answered at once with its params. The cancel
/// method is `notifications/cancelled`. At the end of the stream every answer still owed is
/// given. Batches are answered item by item, without the array (the session does not frame
/// batches: the loop does).
pub fn drive_session(stream: &[u8], pieces: &[usize], max_message_bytes: usize) -> Vec<u8> {
    let limits = Limits {
        max_message_bytes,
        max_output_bytes: usize::MAX,
        max_read_ahead_bytes: 1 << 20,
        log_bad_input: false,
    };
    let mut session = Session::new(&limits, Arc::new(AtomicI64::new(1)));
    session.set_cancel_method(Some("notifications/cancelled".to_owned()));
    let mut later: VecDeque<(u32, RequestId, Result<Value, ErrorObject>)> = VecDeque::new();
    let mut output = Vec::new();
    let mut rest = stream;
    let mut sizes = pieces.iter().copied().map(|n| n.max(1)).cycle();
    let mut step = 0u32;
    loop {
        if rest.is_empty() {
            session.input_eof = true;
        } else {
            let space = session.input_space();
            let n = sizes.next().unwrap_or(1).min(rest.len()).min(space.len());
            space[..n].copy_from_slice(&rest[..n]);
            session.received(n);
            rest = &rest[n..];
        }
        session.read_ahead_buffered();
        while let Some(parsed) = session.next_parsed() {
            step += 1;
            let messages = match parsed {
                Parsed::Single(message) => vec![message],
                Parsed::Invalid(response) => {
                    session.enqueue(&Message::Response(response));
                    Vec::new()
                }
                Parsed::Batch(items) => items
                    .into_iter()
                    .filter_map(|item| match item {
                        Ok(message) => Some(message),
                        Err(response) => {
                            session.enqueue(&Message::Response(response));
                            None
                        }
                    })
                    .collect(),
            };
            for message in messages {
                drive_one(&mut session, message, step, &mut later);
            }
            // Answers of responders whose time has come.
            while later.front().is_some_and(|(due, _, _)| *due <= step) {
                if let Some((_, id, result)) = later.pop_front() {
                    session.take_event(Event::Answer {
                        id,
                        result,
                        token: None,
                    });
                }
            }
            session.read_ahead_buffered();
        }
        if session.input_eof {
            break;
        }
    }
    while let Some((_, id, result)) = later.pop_front() {
        session.take_event(Event::Answer {
            id,
            result,
            token: None,
        });
    }
    let _ = session.queue.write_to(|bytes| {
        output.extend_from_slice(bytes);
        Ok(bytes.len())
    });
    output
}

/// One message through the scripted handler of [`drive_session`].
fn drive_one(
    session: &mut Session,
    message: Message,
    step: u32,
    later: &mut VecDeque<(u32, RequestId, Result<Value, ErrorObject>)>,
) {
    let request = match message {
        Message::Request(request) => request,
        Message::Response(response) => {
            let _ = session.route_response(response);
            return;
        }
        Message::Notification(_) => return,
    };
    match session.start_request(&request, true) {
        Start::Run => {}
        Start::Dropped => return,
        Start::Refused(response) => {
            session.enqueue(&Message::Response(response));
            return;
        }
    }
    let params = request.params.clone().unwrap_or(Value::Null);
    let result = match request.method.as_str() {
        "later" => {
            // What `Context::responder` does.
            session.response_withheld = true;
            let token = CancelToken::new();
            if session.running_cancelled {
                token.cancel_by_peer();
            }
            session.owed.insert(request.id.clone(), (token, true));
            let answer = if params == Value::String("drop".to_owned()) {
                Err(ErrorObject::internal("dropped"))
            } else {
                Ok(params)
            };
            later.push_back((step + 2, request.id.clone(), answer));
            Value::Null // ignored: the responder answers
        }
        "slow" => {
            session.read_ahead_buffered();
            params
        }
        _ => params,
    };
    if let Some(response) = session.finish_request(request.id, Ok(Ok(result))) {
        session.enqueue(&Message::Response(response));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_reports_oversize_lines_and_finishes_the_last_one() {
        let mut lines = LineSplitter::new(4);
        let input = b"a\r\n\n0123456789\nb";
        lines.spare()[..input.len()].copy_from_slice(input);
        lines.commit(input.len());
        assert_eq!(lines.next_line(), Some(Ok(&b"a"[..])));
        assert_eq!(lines.next_line(), Some(Err(Oversize)));
        assert_eq!(lines.next_line(), None);
        assert_eq!(lines.finish(), Some(Ok(&b"b"[..])));
        assert_eq!(lines.finish(), None);
    }
}
