//! The wrapped server's stdout, read on the loop's own thread (a watched fd): answers go to
//! the requests' responders, requests and notifications to the client unchanged, anything that
//! is not JSON-RPC to stderr. No thread hop between the server's answer and the client.

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::process::ChildStdout;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::ids::{self, NUDGE_PREFIX, RELIST_PREFIX};
use super::shared::{is_remembered_list, Shared, LISTS};
use crate::diagnostics;
use crate::handler::Context;
use crate::json_read;
use crate::line_buffer::{Line, LineBuffer};
use crate::lock::lock;
use crate::message::{ErrorObject, Message, RequestId, Response};
use crate::readiness::{Fill, Input};
use crate::relayed;

/// The key the loop reports the server's stdout under.
pub(super) const KEY: usize = 0;

/// The longest line the server may write (its answers can be large; the bound only keeps a
/// server that never writes a newline from taking all memory).
const MAX_LINE: usize = 1 << 30;

/// The stdout of one life of the server, handed to the loop by the supervisor.
#[derive(Debug)]
pub(super) struct ServerOutput {
    /// Which start of the server this is (the supervisor waits for its end of file).
    pub(super) life: u32,
    pipe: mio::unix::pipe::Receiver,
    /// The same readiness rules as every other pipe of the crate (`readiness`).
    ready: Input,
    lines: LineBuffer,
}

impl ServerOutput {
    pub(super) fn new(life: u32, stdout: ChildStdout) -> io::Result<ServerOutput> {
        let pipe = mio::unix::pipe::Receiver::from(stdout);
        pipe.set_nonblocking(true)?;
        Ok(ServerOutput {
            life,
            pipe,
            ready: Input::new(false),
            lines: LineBuffer::new(MAX_LINE),
        })
    }

    /// Starts watching the pipe from the loop.
    pub(super) fn watch(&self, cx: &mut Context<'_>) -> Result<(), crate::Error> {
        cx.watch(self.pipe.as_fd(), KEY)
    }

    /// Stops watching the pipe.
    pub(super) fn unwatch(&self, cx: &mut Context<'_>) {
        cx.unwatch(self.pipe.as_fd(), KEY);
    }

    /// Reads what the server wrote until the pipe is empty, routing each complete line.
    /// Returns `false` at end of file (or a read error): the server's output is over.
    pub(super) fn read_available(&mut self, shared: &Shared, cx: &mut Context<'_>) -> bool {
        self.ready.on_event(false);
        while self.ready.ready() {
            let spare = self.lines.spare();
            let asked = spare.len();
            match self.ready.after_read(self.pipe.read(spare), asked) {
                Ok((Fill::Bytes(n), _)) => {
                    self.lines.commit(n);
                    while let Some(line) = self.lines.next_line() {
                        take_line(shared, cx, line);
                    }
                }
                Ok((Fill::WouldBlock, _)) => {}
                Ok((Fill::Eof, _)) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.ready.set_eof(),
            }
        }
        if self.ready.is_eof() {
            while let Some(line) = self.lines.finish() {
                take_line(shared, cx, line);
            }
            return false;
        }
        true
    }

    /// Reads and drops what the server still writes once nobody listens (the loop ended):
    /// it must not block on a full pipe while it shuts down. `false` at end of file.
    pub(super) fn discard_available(&mut self) -> bool {
        let mut scratch = [0u8; 8192];
        loop {
            match self.pipe.read(&mut scratch) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
}

fn take_line(shared: &Shared, cx: &mut Context<'_>, line: Line<'_>) {
    match line {
        Line::Complete(bytes) => route(shared, cx, bytes),
        Line::Oversize => diagnostics::line(&format!(
            "{}: a line over {MAX_LINE} bytes on stdout was dropped",
            shared.config.name
        )),
    }
}

fn route(shared: &Shared, cx: &mut Context<'_>, line: &[u8]) {
    if let Some((id, result)) = plain_result(line) {
        if forward(shared, cx, &id, result) {
            return;
        }
    }
    match Message::from_slice(line) {
        Ok(Message::Response(response)) => answer(shared, cx, response),
        Ok(message) => {
            let _ = cx.send(&message);
        }
        Err(_) => match serde_json::from_slice::<Vec<Value>>(line) {
            // A batch (2025-03-26): each item on its own.
            Ok(items) if !items.is_empty() => {
                for item in items {
                    route(shared, cx, item.to_string().as_bytes());
                }
            }
            _ => {
                let name = &shared.config.name;
                let text = String::from_utf8_lossy(line);
                diagnostics::line(&format!("{name} (stdout, not JSON-RPC): {text}"));
            }
        },
    }
}

/// A line that is exactly a result response (`jsonrpc`, `id`, `result`, nothing else), read
/// only as far as routing needs: its id, and its result as the text it came as. Anything else
/// (an error, a request, escapes in a key, ...) is `None` and takes the full parse.
fn plain_result(line: &[u8]) -> Option<(RequestId, &str)> {
    let fields = json_read::top_level_spans(line)?;
    // Three members, each once (a duplicate makes four).
    if fields.len() != 3 || fields.get("jsonrpc")? != "\"2.0\"" {
        return None;
    }
    let result = fields.get("result")?;
    let id = relayed::plain_id(fields.get("id")?)?;
    Some((id, result))
}

/// Answers a client's request with the server's result as it came (no `Value` in between).
/// `false` when the answer needs more than that (the wrapper's own requests, the handshake, a
/// list it remembers): the caller takes the full path.
fn forward(shared: &Shared, cx: &mut Context<'_>, id: &RequestId, result: &str) -> bool {
    if ids::is_reserved(id) {
        return false; // renamed, or the wrapper's own: the full path
    }
    let Some(pending) = shared.take_pending_if(id, |p| !p.first_page && p.method != "initialize")
    else {
        return false;
    };
    shared.answered(id);
    cx.respond_raw(pending.responder, result);
    true
}

fn answer(shared: &Shared, cx: &mut Context<'_>, response: Response) {
    let name = &shared.config.name;
    let Some(id) = response.id.clone() else {
        diagnostics::line(&format!(
            "{name}: an error response without an id: {:?}",
            response.result.err()
        ));
        return;
    };
    shared.answered(&id);
    let renamed;
    let client = if !ids::is_reserved(&id) {
        &id
    } else if let Some(client) = ids::client_id(&id) {
        renamed = client;
        &renamed
    } else {
        return own_answer(shared, cx, id.as_str().unwrap_or_default(), response.result);
    };
    let Some(pending) = shared.take_pending(client) else {
        // A late answer to a request given up on is dropped quietly: the cancellation may
        // cross it on the wire, as MCP allows.
        if !shared.given_up(client) {
            diagnostics::line(&format!(
                "{name}: an answer to no request in flight (id {id})"
            ));
        }
        return;
    };
    if pending.first_page {
        if let Ok(result) = &response.result {
            shared.remember_list(&pending.method, result.clone());
        }
    }
    if pending.method == "initialize" {
        if let Ok(result) = &response.result {
            shared.remember_capabilities(result["capabilities"].clone());
        }
        let version = response
            .result
            .as_ref()
            .ok()
            .and_then(|r| r.get("protocolVersion"));
        let batches = version.and_then(Value::as_str) == Some("2025-03-26");
        shared.batches.store(batches, Ordering::Release);
    }
    cx.respond(pending.responder, response.result);
}

/// The server's answer to one of the wrapper's own requests (`tag`, its id): the replayed
/// `initialize` it waits for, a list fetched again, a ping (dropped). Anything else under the
/// wrapper's prefix answers nothing it sent.
fn own_answer(
    shared: &Shared,
    cx: &mut Context<'_>,
    tag: &str,
    result: Result<Value, ErrorObject>,
) {
    let name = &shared.config.name;
    let replay = lock(&shared.replay).as_ref().and_then(|r| r.id.as_str()) == Some(tag);
    if replay {
        shared.replay_answered();
        if let Err(e) = result {
            diagnostics::line(&format!("{name}: the replayed initialize failed: {e}"));
        }
    } else if let Some(method) = tag
        .strip_prefix(RELIST_PREFIX)
        .filter(|m| is_remembered_list(m))
    {
        relisted(shared, cx, method, result.ok());
    } else if !tag.starts_with(NUDGE_PREFIX) {
        diagnostics::line(&format!(
            "{name}: an answer to no request in flight (id {tag})"
        ));
    }
}

/// A restarted server's answer to a list the client had seen: when it differs, the client is
/// told the list changed (and the new one is remembered).
fn relisted(shared: &Shared, cx: &mut Context<'_>, method: &str, result: Option<Value>) {
    let Some(result) = result else { return };
    let changed = shared.remember_list(method, result);
    // Only where the server declared it may send the notice (capability discipline).
    let kind = method.trim_end_matches("/list");
    if changed && shared.declared_list_changed(kind) {
        if let Some((_, notification)) = LISTS.iter().find(|(m, _)| *m == method) {
            let _ = cx.notify(notification, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_result_response_takes_the_short_path() {
        let (id, result) =
            plain_result(br#"{"jsonrpc":"2.0","id":7,"result":{"a":[1, 2.50]}}"#).unwrap();
        assert_eq!(id, RequestId::from(7));
        assert_eq!(result, r#"{"a":[1, 2.50]}"#, "the result's text as it came");
        let (id, _) = plain_result(br#"{"result":null,"id":"x","jsonrpc":"2.0"}"#).unwrap();
        assert_eq!(id, RequestId::from("x"));
        for line in [
            &br#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#,
            br#"{"jsonrpc":"1.0","id":7,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{},"extra":1}"#,
            br#"{"jsonrpc":"2.0","\u0069d":7,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{}"#,
            br#"[{"jsonrpc":"2.0","id":7,"result":{}}]"#,
        ] {
            assert!(
                plain_result(line).is_none(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
