//! The line-echo ceiling: the least work a JSON-RPC stdio server can do per message, as a
//! yardstick for the benchmarks (`cargo bench --bench pipe`; see BENCHMARKS.md).
//!
//! Run: `cargo run --release --example line_echo_ceiling [-- --mcp|--client --poll --parse
//! value|ours]`
//! (each option may be left out), then type
//! `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}`.
//!
//! It reads stdin in 1 MiB pieces, splits lines with memchr, and answers each line that has an
//! `"id":` with a response of a fixed shape, without parsing JSON: the id's bytes are copied as
//! they are, and so are the params (raw mode: `result` is the params, as `echo_server`'s `echo`
//! returns them) or the text (`--mcp`: `result` is `{"content":[{"type":"text","text":…}]}`, the
//! shape of the demo server's `echo` tool). The answers to one read go out in one write.
//!
//! With `--poll` (after `--mcp` or alone) it first waits in `epoll` before each read, as any
//! loop that must also wake for something other than its input does (signals, other threads'
//! answers, a closed output): the ceiling of such a loop, which is what `mcpipe`'s is. It is
//! not one of the benchmark's baselines; BENCHMARKS.md uses it to show what one wait per
//! round trip costs in ping-pong.
//!
//! With `--parse value` or `--parse ours` it first reads each line as JSON and throws the
//! result away, then answers as before: into a `serde_json::Value` (the least a typical server
//! does), or apart as mcpipe's loop reads a `tools/call` for its MCP layer, the echo tool's
//! `text` taken from the arguments (`mcpipe::internals::classify_call`). The ceiling of a
//! server that reads its requests, whatever its loop: BENCHMARKS.md ("Why ping-pong stays above
//! 1.1× the ceiling") uses it to show what reading alone costs in ping-pong.
//!
//! With `--client` it stands in for an MCP server in front of a client under test (`cargo bench
//! --bench client`): it answers the handshake (`server/discover` and any unknown method with
//! `-32601`, `initialize` with the protocol version it was asked for, `tools/list` with the echo
//! tool, `ping` with `{}`), and `tools/call` with the echo result, whatever the order of the
//! members a client writes (the text is found by its key and ends at the next quote: the
//! benchmark's texts hold no escapes). One method lookup per line more than `--mcp`.
//!
//! It relies on the layout the benchmark driver sends (`"id"` before `"method"`, `"params"`
//! last, the text last in the params, no `"id":` or `"params":` inside strings), so it is no
//! server: it is the most any server could do on this machine, which is what the benchmarks
//! divide by.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::process::ExitCode;

/// How much one read asks for.
const READ_SIZE: usize = 1 << 20;

/// How replies are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `result` is the request's params.
    Raw,
    /// `result` is an MCP tool result holding the request's `text` argument.
    Mcp,
    /// An MCP server's answers to a client (`--client`).
    Client,
}

/// `--parse`: how each line is read before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parse {
    /// Not at all (the ceiling).
    None,
    /// Into a `serde_json::Value`.
    Value,
    /// Apart, as mcpipe's loop reads a `tools/call`, and the `text` argument taken.
    Ours,
}

/// Reads `line` as `parse` says and drops what was read. A line that is not what the mode
/// expects is an error: the yardstick must have read what it claims to.
fn read_line(line: &[u8], parse: Parse) -> io::Result<()> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    match parse {
        Parse::None => {}
        Parse::Value => {
            let value: serde_json::Value =
                serde_json::from_slice(line).map_err(|e| bad(&e.to_string()))?;
            std::hint::black_box(value);
        }
        Parse::Ours => {
            let (classified, apart) = mcpipe::internals::classify_call(line);
            // Only a `tools/call` is read apart; other lines (`initialize`, notifications) have
            // no text to take.
            if let Some(apart) = apart {
                let text = apart
                    .arguments()
                    .and_then(|mut arguments| arguments.take_string("text").ok())
                    .ok_or_else(|| bad("a tools/call without a text argument"))?;
                std::hint::black_box(text);
            }
            std::hint::black_box(classified);
        }
    }
    Ok(())
}

/// Appends the start of the reply to `line` to `out` (`{"jsonrpc":"2.0","id":ID`), its id copied
/// as it came; false for a notification, which gets none.
#[inline(always)]
fn open_reply(line: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(at) = memchr::memmem::find(line, b"\"id\":") else {
        return false;
    };
    let id_start = at + 5;
    let id_len = memchr::memchr2(b',', b'}', &line[id_start..]).unwrap_or(0);
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(&line[id_start..id_start + id_len]);
    true
}

/// Appends the reply to one line (if it needs one) to `out`.
fn answer(line: &[u8], shape: Shape, out: &mut Vec<u8>) {
    if shape == Shape::Client {
        return answer_client(line, out);
    }
    if !open_reply(line, out) {
        return; // A notification: no reply.
    }
    out.extend_from_slice(b",\"result\":");
    // The params run to the envelope's closing brace, the line's last byte.
    let params = memchr::memmem::find(line, b"\"params\":")
        .map(|p| &line[p + 9..line.len().saturating_sub(1).max(p + 9)])
        .unwrap_or(b"{}");
    match shape {
        Shape::Raw | Shape::Client => out.extend_from_slice(params),
        Shape::Mcp => {
            // The text string runs from its opening quote to the `}}` that close the arguments
            // and the params.
            let text = memchr::memmem::find(params, b"\"text\":")
                .map(|t| &params[t + 7..params.len().saturating_sub(2).max(t + 7)])
                .unwrap_or(b"\"\"");
            out.extend_from_slice(b"{\"content\":[{\"type\":\"text\",\"text\":");
            out.extend_from_slice(text);
            out.extend_from_slice(b"}]}");
        }
    }
    out.extend_from_slice(b"}\n");
}

/// The bytes of the string value of `key` (a `"name":` pattern) in `line`, without its quotes,
/// up to the next quote (no escapes expected).
fn string_value<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let at = memchr::memmem::find(line, key)? + key.len();
    let rest = line.get(at..)?.strip_prefix(b"\"")?;
    let len = memchr::memchr(b'"', rest)?;
    Some(&rest[..len])
}

/// `--client`: appends the reply to one line of a client's to `out`.
fn answer_client(line: &[u8], out: &mut Vec<u8>) {
    if !open_reply(line, out) {
        return; // A notification: no reply.
    }
    let method = string_value(line, b"\"method\":").unwrap_or(b"");
    match method {
        b"tools/call" => {
            let text = string_value(line, b"\"text\":").unwrap_or(b"");
            out.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"");
            out.extend_from_slice(text);
            out.extend_from_slice(b"\"}]}");
        }
        b"initialize" => {
            let version = string_value(line, b"\"protocolVersion\":").unwrap_or(b"2025-06-18");
            out.extend_from_slice(b",\"result\":{\"protocolVersion\":\"");
            out.extend_from_slice(version);
            out.extend_from_slice(
                b"\",\"capabilities\":{\"tools\":{}},\"serverInfo\":{\"name\":\"line_echo_ceiling\",\
                  \"version\":\"0\"}}",
            );
        }
        b"tools/list" => out.extend_from_slice(
            b",\"result\":{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\",\
              \"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}}]}",
        ),
        b"ping" => out.extend_from_slice(b",\"result\":{}"),
        _ => {
            out.extend_from_slice(b",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}")
        }
    }
    out.extend_from_slice(b"}\n");
}

/// `--poll`: an `epoll` instance watching stdin, which stays blocking and is read once per
/// wait. mio's `epoll` is edge-triggered; one read takes all a pipe holds (64 KiB unless it was
/// enlarged, and a read asks for 1 MiB), so no input is left behind a wait.
struct InputPoll {
    poll: mio::Poll,
    events: mio::Events,
    /// The writer hung up: its edge has come and gone, so the reads go on without waits until
    /// end of file.
    hung_up: bool,
}

impl InputPoll {
    fn new() -> io::Result<InputPoll> {
        let poll = mio::Poll::new()?;
        let stdin = io::stdin().as_raw_fd();
        poll.registry().register(
            &mut mio::unix::SourceFd(&stdin),
            mio::Token(0),
            mio::Interest::READABLE,
        )?;
        Ok(InputPoll {
            poll,
            events: mio::Events::with_capacity(4),
            hung_up: false,
        })
    }

    fn wait(&mut self) -> io::Result<()> {
        while !self.hung_up {
            match self.poll.poll(&mut self.events, None) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            self.hung_up = self.events.iter().any(|e| e.is_read_closed());
            if !self.events.is_empty() {
                break;
            }
        }
        Ok(())
    }
}

fn run() -> io::Result<()> {
    let mut shape = Shape::Raw;
    let mut poll = None;
    let mut parse = Parse::None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--mcp" => shape = Shape::Mcp,
            "--client" => shape = Shape::Client,
            "--poll" => poll = Some(InputPoll::new()?),
            "--parse" => {
                parse = match args.next().as_deref() {
                    Some("value") => Parse::Value,
                    Some("ours") => Parse::Ours,
                    _ => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "--parse takes value or ours",
                        ))
                    }
                }
            }
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown argument {other}"),
                ))
            }
        }
    }
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    let mut buf = vec![0u8; READ_SIZE];
    // `buf[..end]` holds read bytes; `buf[..start]` has been answered.
    let mut end = 0;
    let mut out = Vec::with_capacity(READ_SIZE);
    loop {
        if buf.len() - end < READ_SIZE {
            buf.resize(end + READ_SIZE, 0);
        }
        if let Some(poll) = &mut poll {
            poll.wait()?;
        }
        let n = match input.read(&mut buf[end..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        // Only the new bytes can hold the newline that ends a pending line.
        let mut scan_from = end;
        end += n;
        let mut start = 0;
        while let Some(nl) = memchr::memchr(b'\n', &buf[scan_from..end]) {
            let line_end = scan_from + nl;
            read_line(&buf[start..line_end], parse)?;
            answer(&buf[start..line_end], shape, &mut out);
            start = line_end + 1;
            scan_from = start;
        }
        if !out.is_empty() {
            output.write_all(&out)?;
            out.clear();
        }
        if start > 0 {
            buf.copy_within(start..end, 0);
            end -= start;
        }
    }
    if end > 0 {
        read_line(&buf[..end], parse)?;
        answer(&buf[..end], shape, &mut out);
        output.write_all(&out)?;
    }
    output.flush()
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("line_echo_ceiling: {e}");
            ExitCode::from(2)
        }
    }
}
