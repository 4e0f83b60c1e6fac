//! The bytes the driver sends, and how it checks every response it gets back.
//!
//! Every request carries a distinct integer id and a text whose first ten bytes are that id, so
//! a response that carries the wrong text, or the right text under the wrong id, fails. The
//! check of every response is a byte scan (finding the id and comparing the text), cheap enough
//! not to slow the driver down at a million responses a second; every [`DEEP_CHECK_EVERY`]th
//! response (and every one in smoke mode) is also parsed as JSON and checked field by field.

use serde_json::Value;

/// One response in this many is also parsed as JSON and checked field by field.
pub(crate) const DEEP_CHECK_EVERY: u64 = 64;

/// What the server under test speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Raw JSON-RPC: `echo` returns its params (`examples/echo_server`).
    Raw,
    /// MCP: `tools/call` of the `echo` tool, after `initialize` (`mcpipe demo`).
    Mcp,
}

impl Protocol {
    /// The flag that puts a baseline into this protocol's shape.
    pub(crate) fn baseline_args(self) -> Vec<String> {
        match self {
            Protocol::Raw => Vec::new(),
            Protocol::Mcp => vec!["--mcp".to_owned()],
        }
    }
}

/// The texts of a workload: a 10-digit id followed by a fixed filler, `len` bytes in all.
#[derive(Debug, Clone)]
pub(crate) struct Texts {
    filler: Vec<u8>,
}

/// The width of the id that starts every text.
const ID_DIGITS: usize = 10;

impl Texts {
    /// Texts of `len` bytes (at least [`ID_DIGITS`]), plain ASCII that JSON never escapes.
    pub(crate) fn new(len: usize) -> Texts {
        let len = len.max(ID_DIGITS);
        let filler = (0..len - ID_DIGITS)
            .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[i % 36])
            .collect();
        Texts { filler }
    }

    fn write(&self, id: u64, out: &mut Vec<u8>) {
        push_padded(id, out);
        out.extend_from_slice(&self.filler);
    }

    fn matches(&self, id: u64, text: &[u8]) -> bool {
        let mut want = [0u8; ID_DIGITS];
        let mut v = id;
        for d in want.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        text.len() == ID_DIGITS + self.filler.len()
            && text[..ID_DIGITS] == want
            && text[ID_DIGITS..] == self.filler[..]
    }

    /// The text for `id`, as a string (for the deep check).
    fn string(&self, id: u64) -> String {
        let mut out = Vec::new();
        self.write(id, &mut out);
        // The text is ASCII by construction.
        String::from_utf8(out).expect("texts are ASCII")
    }
}

fn push_padded(id: u64, out: &mut Vec<u8>) {
    let mut digits = [b'0'; ID_DIGITS];
    let mut v = id;
    for d in digits.iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&digits);
}

fn push_u64(v: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = v;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Appends the echo request with this id and its text, with its newline.
pub(crate) fn push_request(protocol: Protocol, id: u64, texts: &Texts, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    push_u64(id, out);
    match protocol {
        Protocol::Raw => out.extend_from_slice(b",\"method\":\"echo\",\"params\":{\"text\":\""),
        Protocol::Mcp => out.extend_from_slice(
            b",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"",
        ),
    }
    texts.write(id, out);
    match protocol {
        Protocol::Raw => out.extend_from_slice(b"\"}}\n"),
        Protocol::Mcp => out.extend_from_slice(b"\"}}}\n"),
    }
}

/// The MCP handshake's first message (id 0).
pub(crate) const INITIALIZE: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"mcpipe-bench\",\"version\":\"0\"}}}\n";

/// The MCP handshake's closing notification.
pub(crate) const INITIALIZED: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

/// The init burst: `initialize` (id 1), `notifications/initialized`, `tools/list` (id 2), in
/// one write.
pub(crate) const INIT_BURST: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"mcpipe-bench\",\"version\":\"0\"}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n";

/// The id of a response line (`None` for a line without `"id":<integer>`, such as a
/// notification from the server).
pub(crate) fn response_id(line: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(line, b"\"id\":")? + 5;
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let mut v = 0u64;
    for &b in &line[at..at + digits] {
        v = v * 10 + u64::from(b - b'0');
    }
    Some(v)
}

/// Checks that `line` (without its newline) answers request `id` with its text.
///
/// # Errors
/// What is wrong, with an excerpt of the line.
pub(crate) fn check_response(
    line: &[u8],
    id: u64,
    texts: &Texts,
    deep: Option<Protocol>,
) -> Result<(), String> {
    let fail = |why: &str| {
        Err(format!(
            "response to request {id}: {why}: {}",
            excerpt(line)
        ))
    };
    if response_id(line) != Some(id) {
        return fail("wrong or missing id");
    }
    if memchr::memmem::find(line, b"\"jsonrpc\":\"2.0\"").is_none() {
        return fail("no \"jsonrpc\":\"2.0\"");
    }
    let Some(result) = memchr::memmem::find(line, b"\"result\":") else {
        return fail("not a result");
    };
    let rest = &line[result..];
    let Some(text_at) = memchr::memmem::find(rest, b"\"text\":\"") else {
        return fail("no text in the result");
    };
    let text = &rest[text_at + 8..];
    let Some(close) = memchr::memchr(b'"', text) else {
        return fail("unterminated text");
    };
    if !texts.matches(id, &text[..close]) {
        return fail("the text is not the one sent");
    }
    if let Some(protocol) = deep {
        deep_check(line, id, texts, protocol).or_else(|why| fail(&why))?;
    }
    Ok(())
}

/// Parses the line as JSON and checks the envelope and the text field by field.
fn deep_check(line: &[u8], id: u64, texts: &Texts, protocol: Protocol) -> Result<(), String> {
    let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    if v["jsonrpc"] != "2.0" || v["id"] != id || v.get("error").is_some() {
        return Err("bad envelope".to_owned());
    }
    let text = match protocol {
        Protocol::Raw => &v["result"]["text"],
        Protocol::Mcp => &v["result"]["content"][0]["text"],
    };
    if text.as_str() != Some(texts.string(id).as_str()) {
        return Err("the parsed text is not the one sent".to_owned());
    }
    Ok(())
}

/// Checks that `line` is a response (result or error) to request `id`; for the init burst,
/// where a raw JSON-RPC server answers the MCP methods with errors.
///
/// # Errors
/// What is wrong, with an excerpt of the line.
pub(crate) fn check_any_response(line: &[u8], id: u64) -> Result<(), String> {
    let v: Value = serde_json::from_slice(line)
        .map_err(|e| format!("response {id}: not JSON ({e}): {}", excerpt(line)))?;
    let answered = v.get("result").is_some() || v["error"]["code"].is_i64();
    if v["jsonrpc"] != "2.0" || v["id"] != id || !answered {
        return Err(format!(
            "response {id}: not a response to it: {}",
            excerpt(line)
        ));
    }
    Ok(())
}

/// The start of a line, for error messages.
pub(crate) fn excerpt(line: &[u8]) -> String {
    let shown = &line[..line.len().min(160)];
    let more = if line.len() > shown.len() {
        format!("… ({} bytes)", line.len())
    } else {
        String::new()
    };
    format!("{}{more}", String::from_utf8_lossy(shown))
}
