//! The line-echo ceiling: the least work a JSON-RPC stdio server can do per message, as a
//! yardstick for the benchmarks (`cargo bench --bench pipe`; see BENCHMARKS.md).
//!
//! Run: `cargo run --release --example line_echo_ceiling [-- --mcp]`, then type
//! `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}`.
//!
//! It reads stdin in 1 MiB pieces, splits lines with memchr, and answers each line that has an
//! `"id":` with a response of a fixed shape, without parsing JSON: the id's bytes are copied as
//! they are, and so are the params (raw mode: `result` is the params, as `echo_server`'s `echo`
//! returns them) or the text (`--mcp`: `result` is `{"content":[{"type":"text","text":…}]}`, the
//! shape of the demo server's `echo` tool). The answers to one read go out in one write.
//!
//! It relies on the layout the benchmark driver sends (`"id"` before `"method"`, `"params"`
//! last, the text last in the params, no `"id":` or `"params":` inside strings), so it is no
//! server: it is the most any server could do on this machine, which is what the benchmarks
//! divide by.

use std::io::{self, Read, Write};
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
}

/// Appends the reply to one line (if it needs one) to `out`.
fn answer(line: &[u8], shape: Shape, out: &mut Vec<u8>) {
    let Some(at) = memchr::memmem::find(line, b"\"id\":") else {
        return; // A notification: no reply.
    };
    let id_start = at + 5;
    let id_len = memchr::memchr2(b',', b'}', &line[id_start..]).unwrap_or(0);
    let id = &line[id_start..id_start + id_len];
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"result\":");
    // The params run to the envelope's closing brace, the line's last byte.
    let params = memchr::memmem::find(line, b"\"params\":")
        .map(|p| &line[p + 9..line.len().saturating_sub(1).max(p + 9)])
        .unwrap_or(b"{}");
    match shape {
        Shape::Raw => out.extend_from_slice(params),
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

fn run() -> io::Result<()> {
    let shape = match std::env::args().nth(1).as_deref() {
        None => Shape::Raw,
        Some("--mcp") => Shape::Mcp,
        Some(other) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown argument {other}"),
            ))
        }
    };
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
