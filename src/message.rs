//! JSON-RPC 2.0 messages: what a line becomes, and the bytes a message is written as.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

pub use crate::request_id::RequestId;

use crate::json_read::{IndexedObject, ValueAt};

/// A JSON-RPC error code. Open-ended: codes this crate does not name round-trip unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// The line is not valid JSON (or not valid UTF-8).
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// Valid JSON that is not a valid JSON-RPC message.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// The method exists but its parameters are wrong.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// The handler failed (or panicked) while handling the request.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The error object of a JSON-RPC error response: what the peer sees.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorObject {
    /// The error code.
    pub code: ErrorCode,
    /// One short sentence.
    pub message: String,
    /// Free-form detail.
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error object with a code and a message and no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32601`, naming the method.
    pub fn method_not_found(method: &str) -> ErrorObject {
        ErrorObject::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: {method}"),
        )
    }

    /// `-32602` with a message saying what is wrong with the params.
    pub fn invalid_params(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INVALID_PARAMS, message)
    }

    /// `-32603` with a message.
    pub fn internal(message: impl Into<String>) -> ErrorObject {
        ErrorObject::new(ErrorCode::INTERNAL_ERROR, message)
    }

    /// Adds `data`.
    pub fn with_data(mut self, data: Value) -> ErrorObject {
        self.data = Some(data);
        self
    }

    /// The error object as a JSON value.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("code".into(), Value::from(self.code.0));
        map.insert("message".into(), Value::from(self.message.as_str()));
        if let Some(data) = &self.data {
            map.insert("data".into(), data.clone());
        }
        Value::Object(map)
    }

    fn from_value(value: &Value) -> Option<ErrorObject> {
        let obj = value.as_object()?;
        let code = obj.get("code")?.as_i64()?;
        let message = obj.get("message")?.as_str()?;
        Some(ErrorObject {
            code: ErrorCode(code),
            message: message.to_owned(),
            data: obj.get("data").cloned(),
        })
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}

/// A request: a method call that expects exactly one response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id the response must carry.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params: an object or an array, when present.
    pub params: Option<Value>,
}

/// A notification: a method call that never gets a response, not even an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params: an object or an array, when present.
    pub params: Option<Value>,
}

/// A response: the result of, or the error from, a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered; `None` is JSON `null`, for errors about a message whose
    /// id could not be read.
    pub id: Option<RequestId>,
    /// The result, or the error object.
    pub result: Result<Value, ErrorObject>,
}

impl Response {
    /// A successful response.
    pub fn ok(id: RequestId, result: Value) -> Response {
        Response {
            id: Some(id),
            result: Ok(result),
        }
    }

    /// An error response; `id` is `None` when the request's id could not be read.
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Response {
        Response {
            id,
            result: Err(error),
        }
    }
}

/// One JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

impl From<Request> for Message {
    fn from(r: Request) -> Message {
        Message::Request(r)
    }
}

impl From<Notification> for Message {
    fn from(n: Notification) -> Message {
        Message::Notification(n)
    }
}

impl From<Response> for Message {
    fn from(r: Response) -> Message {
        Message::Response(r)
    }
}

impl Message {
    /// Parses one message from the bytes of a line (no newline).
    ///
    /// # Errors
    /// Returns the error response the peer should get: `-32700` (id null) for bytes that are
    /// not JSON or not UTF-8, `-32600` for JSON that is not a single valid message, with the id
    /// when one can be read. A batch (array) is also `-32600` here; see [`Server::batches`].
    ///
    /// # Example
    /// ```
    /// use mcpipe::{Message, ErrorCode};
    /// let msg = Message::from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
    /// assert!(matches!(msg, Message::Request(ref r) if r.method == "ping"));
    /// let err = Message::from_slice(b"{oops").unwrap_err();
    /// assert_eq!(err.result.unwrap_err().code, ErrorCode::PARSE_ERROR);
    /// ```
    ///
    /// [`Server::batches`]: crate::Server::batches
    pub fn from_slice(bytes: &[u8]) -> Result<Message, Response> {
        if let Some(classified) = classify_envelope(bytes, None) {
            return classified.map(|(message, _)| message);
        }
        match parse_value(bytes)? {
            Value::Array(_) => Err(invalid(None, "batches are not accepted here")),
            value => classify(value),
        }
    }

    /// Appends the message as one line of compact JSON, with its `\n`, to `out`.
    ///
    /// The line never contains a raw newline: JSON escapes newlines inside strings.
    pub fn write_line(&self, out: &mut Vec<u8>) {
        self.write_json(out);
        out.push(b'\n');
    }

    /// Appends the message as compact JSON (no newline) to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Message::Request(r) => write_call(out, Some(&r.id), &r.method, r.params.as_ref()),
            Message::Notification(n) => write_call(out, None, &n.method, n.params.as_ref()),
            Message::Response(r) => write_response(out, r),
        }
    }

    /// The message as a compact JSON line, with its `\n`.
    pub fn to_line(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_line(&mut out);
        out
    }
}

/// A line after parsing, before dispatch.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// One valid message.
    Single(Message),
    /// An array: each element a message, or the error response its element gets.
    Batch(Vec<Result<Message, Response>>),
    /// Not a valid message: the error response to send.
    Invalid(Response),
}

/// Parses a line that may be a batch.
pub(crate) fn parse_line(bytes: &[u8]) -> Parsed {
    parse_line_apart(bytes, None).0
}

/// Members of one method's params read apart from the params object, for a handler that takes
/// them so: the MCP layer, a `tools/call`'s `name` and `arguments` (then neither the object
/// holding them nor their names are built, and the call looks neither up). Only this crate's
/// handlers ask for it: the type cannot be named elsewhere (see `Handler::params_apart`).
#[derive(Debug, Clone, Copy)]
pub struct ParamsApart {
    pub(crate) method: &'static str,
    pub(crate) names: [&'static str; 2],
    /// Which of `names` is kept as its JSON text (checked, nothing built) when it is an object
    /// on a line of at most [`OBJECT_TEXT_LINE`] bytes: a tool's arguments, read from that text
    /// by what the tool asks for (`Arguments`).
    pub(crate) object_text: Option<usize>,
}

/// Lines up to this long may keep a member read apart as text ([`ParamsApart::object_text`]).
/// A longer one builds it: its large strings are then moved to the tool, never copied (a
/// 10 MB text taken from text would be copied once more).
pub(crate) const OBJECT_TEXT_LINE: usize = 4096;

/// A member read apart: its value, or an object's JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ApartMember {
    /// The value, built.
    Value(Value),
    /// An object's text, checked by the reader as it would have built it, and where its
    /// members are.
    ObjectText(Box<IndexedObject>),
}

impl ApartMember {
    /// The value, built from the text where it was kept as text.
    pub(crate) fn into_value(self) -> Value {
        match self {
            ApartMember::Value(value) => value,
            // Checked when read: serde_json reads it as the crate's reader would have.
            ApartMember::ObjectText(object) => {
                serde_json::from_str(&object.text).unwrap_or(Value::Null)
            }
        }
    }
}

/// The members read apart, in the order of [`ParamsApart::names`] (`None`: absent).
pub(crate) type Apart = [Option<ApartMember>; 2];

/// A message with the members of its params read apart (when they were), or the error
/// response its line gets.
type ReadMessage = Result<(Message, Option<Box<Apart>>), Response>;

/// [`parse_line`], with the members `apart` names read apart from the params of a request of
/// its method whose line the crate's reader reads (they come back beside it, and its `params`
/// hold the others). Otherwise (a batch, a line serde_json reads, a method or an id after the
/// params, …) `None` beside the message, whose params hold everything.
// Always inlined: the loop's reading of a line must not pay a call for this wrapper, and
// without the hint whether it is inlined turns on unrelated changes (43 instructions a
// request more when a change elsewhere in the session tipped it, stop 31).
#[inline(always)]
pub(crate) fn parse_line_apart(
    bytes: &[u8],
    apart: Option<ParamsApart>,
) -> (Parsed, Option<Box<Apart>>) {
    match classify_envelope(bytes, apart) {
        Some(Ok((message, apart))) => (Parsed::Single(message), apart),
        Some(Err(response)) => (Parsed::Invalid(response), None),
        None => (parse_line_by_value(bytes), None),
    }
}

/// The common case, read without building a map for the top level: one object whose member
/// names have no escapes. Its members are read as the `Value` path reads them (the crate's
/// reader, which builds the values serde_json builds, or serde_json itself where that reader
/// declines; one pass over the bytes, the last of duplicate names winning) and classified by
/// the same rules, so the outcome is the same. `None` for anything else (another JSON type,
/// an escaped name, bytes that are not valid JSON): the caller then takes the `Value` path,
/// which decides, and words the errors, exactly as before.
///
/// The line's UTF-8 is checked once, whole, so that neither reader checks each string again; a
/// line that is not UTF-8 takes the `Value` path, which reports it.
///
/// With `apart`, see [`parse_line_apart`].
fn classify_envelope(bytes: &[u8], apart: Option<ParamsApart>) -> Option<ReadMessage> {
    let text = crate::json_read::line_text(bytes)?;
    // Read in place, not returned (see `Reader::value_into`).
    let mut envelope = Envelope::default();
    if envelope.read(text, apart).is_none() {
        envelope = Envelope::of(serde_json::from_str::<BTreeMap<&str, Value>>(text).ok()?);
    }
    // Boxed: moved on with the message, 8 bytes and not 64 (each move of a value just
    // written is a stall, see `Reader::value_into`).
    let apart = envelope.apart.take().map(Box::new);
    Some(classify_members(&mut envelope).map(|message| (message, apart)))
}

/// Parses a line that may be a batch through a [`Value`] (the reference the fast path
/// matches; see [`classify_envelope`]).
pub(crate) fn parse_line_by_value(bytes: &[u8]) -> Parsed {
    let value = match parse_value(bytes) {
        Ok(v) => v,
        Err(response) => return Parsed::Invalid(response),
    };
    match value {
        Value::Array(items) if items.is_empty() => {
            Parsed::Invalid(invalid(None, "an empty batch is not a valid request"))
        }
        Value::Array(items) => Parsed::Batch(items.into_iter().map(classify).collect()),
        value => match classify(value) {
            Ok(m) => Parsed::Single(m),
            Err(r) => Parsed::Invalid(r),
        },
    }
}

fn parse_value(bytes: &[u8]) -> Result<Value, Response> {
    serde_json::from_slice(bytes).map_err(|e| {
        Response::error(
            None,
            ErrorObject::new(ErrorCode::PARSE_ERROR, format!("parse error: {e}")),
        )
    })
}

fn invalid(id: Option<RequestId>, why: &str) -> Response {
    Response::error(
        id,
        ErrorObject::new(
            ErrorCode::INVALID_REQUEST,
            format!("invalid request: {why}"),
        ),
    )
}

/// The members of a JSON object, however the object was read.
trait Members {
    fn member(&self, name: &str) -> Option<&Value>;
    /// Moves a member's value out; what the member reads as afterwards is unspecified.
    fn take_member(&mut self, name: &str) -> Option<Value>;
    /// Whether `jsonrpc` is `"2.0"`.
    fn is_version_2(&self) -> bool {
        self.member("jsonrpc").and_then(Value::as_str) == Some("2.0")
    }
}

impl Members for Map<String, Value> {
    fn member(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }

    fn take_member(&mut self, name: &str) -> Option<Value> {
        self.remove(name)
    }
}

/// The members [`classify_members`] reads (`jsonrpc`, `id`, `method`, `params`, `result`,
/// `error`), picked out of a top level in one pass over it rather than by a search of the map
/// per name; any other member is dropped.
/// A `"jsonrpc": "2.0"` as it nearly always comes is recognised, not built (`version_2`).
/// The params of a request whose method [`ParamsApart`] names may have members read apart
/// (`apart`; the params then hold the others).
#[derive(Default)]
struct Envelope {
    members: [Option<Value>; 6],
    version_2: bool,
    apart: Option<Apart>,
}

/// Where [`Envelope`] keeps `id`, `method` and `params`.
const ID: usize = 1;
const METHOD: usize = 2;
const PARAMS: usize = 3;

impl Envelope {
    /// Reads the envelope (`self` is empty) with the crate's own reader (`json_read`), which
    /// declines what it does not read as serde_json would; serde_json then reads the line
    /// (`Envelope::of`). Each value is read in its place.
    fn read(&mut self, text: &str, apart: Option<ParamsApart>) -> Option<()> {
        let envelope = self;
        crate::json_read::top_level_members(text, |name, mut value| {
            let index = Envelope::index(name);
            if index == Some(0) {
                // The last `jsonrpc` member decides, whichever way it was read.
                envelope.version_2 = value.is_plain("2.0");
                if envelope.version_2 {
                    envelope.members[0] = None;
                    return Some(());
                }
            }
            if index == Some(PARAMS) {
                // The last `params` member decides, whichever way it was read.
                envelope.apart = None;
                if let Some(apart) = apart.filter(|a| envelope.method_is(a.method)) {
                    return envelope.read_params_apart(value, apart);
                }
            }
            match index {
                Some(i) => value.read_into(envelope.members[i].insert(Value::Null)),
                None => value.read().map(drop),
            }
        })?;
        // A method, or the lack of an id, that makes members read apart belong elsewhere: the
        // line is read again by serde_json, params whole.
        if let (Some(_), Some(apart)) = (&envelope.apart, apart) {
            if !envelope.method_is(apart.method) || envelope.members[ID].is_none() {
                return None;
            }
        }
        Some(())
    }

    /// Reads the params (an object, or the reader declines) with the members `apart` names
    /// apart from the others.
    fn read_params_apart(&mut self, value: ValueAt<'_, '_>, apart: ParamsApart) -> Option<()> {
        let taken = self.apart.insert([None, None]);
        let Value::Object(others) = self.members[PARAMS].insert(Value::Object(Map::new())) else {
            return None; // Not reached: just written.
        };
        value.members(|name, mut value| {
            // Of duplicate names the last counts, as in a map.
            let Some(i) = apart.names.iter().position(|n| *n == name) else {
                return value.read_into(others.entry(name).or_insert(Value::Null));
            };
            if apart.object_text == Some(i) {
                if let Some((text, index)) = value.object_text(OBJECT_TEXT_LINE)? {
                    let text = text.to_owned();
                    taken[i] = Some(ApartMember::ObjectText(Box::new(IndexedObject {
                        text,
                        index,
                    })));
                    return Some(());
                }
            }
            let ApartMember::Value(slot) = taken[i].insert(ApartMember::Value(Value::Null)) else {
                return None; // Not reached: just written.
            };
            value.read_into(slot)
        })
    }

    /// Whether the method read so far is `method`.
    fn method_is(&self, method: &str) -> bool {
        matches!(&self.members[METHOD], Some(Value::String(m)) if m == method)
    }

    fn of(members: BTreeMap<&str, Value>) -> Envelope {
        let mut envelope = Envelope::default();
        for (name, value) in members {
            if let Some(i) = Envelope::index(name) {
                envelope.members[i] = Some(value);
            }
        }
        envelope
    }

    /// Where a member read by `classify_members` is kept; `None` for any other name (not
    /// asked for: the `message` fuzz target checks this path against the `Value` one).
    fn index(name: &str) -> Option<usize> {
        // A `match`, not a search of a list: compared by length first (74 instructions a
        // name searched).
        match name {
            "jsonrpc" => Some(0),
            "id" => Some(ID),
            "method" => Some(METHOD),
            "params" => Some(PARAMS),
            "result" => Some(4),
            "error" => Some(5),
            _ => None,
        }
    }
}

impl Members for Envelope {
    fn member(&self, name: &str) -> Option<&Value> {
        self.members[Envelope::index(name)?].as_ref()
    }

    fn take_member(&mut self, name: &str) -> Option<Value> {
        self.members[Envelope::index(name)?].take()
    }

    fn is_version_2(&self) -> bool {
        self.version_2 || self.member("jsonrpc").and_then(Value::as_str) == Some("2.0")
    }
}

/// Classifies one JSON value as a message, per JSON-RPC 2.0 with MCP's id rules.
fn classify(value: Value) -> Result<Message, Response> {
    let Value::Object(mut obj) = value else {
        return Err(invalid(None, "a message must be a JSON object"));
    };
    classify_members(&mut obj)
}

/// Classifies the members of one JSON object as a message.
fn classify_members(obj: &mut impl Members) -> Result<Message, Response> {
    // The id is recovered first, so that every later complaint can carry it.
    let id = match obj.member("id") {
        None => None,
        Some(v) => match RequestId::from_value(v) {
            Some(id) => Some(id),
            None if v.is_null() && obj.member("method").is_none() => None,
            None => return Err(invalid(None, "id must be a string or an integer")),
        },
    };
    if !obj.is_version_2() {
        return Err(invalid(id, "\"jsonrpc\" must be \"2.0\""));
    }
    if let Some(method) = obj.take_member("method") {
        let Value::String(method) = method else {
            return Err(invalid(id, "method must be a string"));
        };
        let params = match obj.take_member("params") {
            None => None,
            Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
            Some(_) => return Err(invalid(id, "params must be an object or an array")),
        };
        return Ok(match id {
            Some(id) => Message::Request(Request { id, method, params }),
            None => Message::Notification(Notification { method, params }),
        });
    }
    let has_id = obj.member("id").is_some();
    match (obj.take_member("result"), obj.take_member("error")) {
        (Some(_), Some(_)) => Err(invalid(
            id,
            "a response has either result or error, not both",
        )),
        (Some(result), None) => match id {
            Some(id) => Ok(Message::Response(Response::ok(id, result))),
            None => Err(invalid(
                None,
                "a result response needs a string or integer id",
            )),
        },
        (None, Some(error)) => match ErrorObject::from_value(&error) {
            // An error response may carry a null (or, from MCP 2025-11-25, no) id.
            Some(error) => Ok(Message::Response(Response::error(id, error))),
            None => Err(invalid(
                id,
                "error must be an object with an integer code and a string message",
            )),
        },
        (None, None) if has_id || id.is_some() => Err(invalid(
            id,
            "a message needs a method, a result or an error",
        )),
        (None, None) => Err(invalid(
            None,
            "a message needs a method, a result or an error",
        )),
    }
}

fn write_json_value(out: &mut Vec<u8>, value: &Value) {
    crate::json_text::write_value(out, value);
}

/// Appends a string as a JSON string, without building a `Value`.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    crate::json_text::write_str(out, s);
}

fn write_call(out: &mut Vec<u8>, id: Option<&RequestId>, method: &str, params: Option<&Value>) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\"");
    if let Some(id) = id {
        out.extend_from_slice(b",\"id\":");
        id.write_json(out);
    }
    out.extend_from_slice(b",\"method\":");
    write_json_str(out, method);
    if let Some(params) = params {
        out.extend_from_slice(b",\"params\":");
        write_json_value(out, params);
    }
    out.push(b'}');
}

/// Appends the opening of a success response to `id`, up to where its result's JSON goes:
/// for answers whose result is written as text (the closing `}` and newline are the caller's).
pub(crate) fn write_result_opening(out: &mut Vec<u8>, id: &RequestId) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    id.write_json(out);
    out.extend_from_slice(b",\"result\":");
}

fn write_response(out: &mut Vec<u8>, response: &Response) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    match &response.id {
        Some(id) => id.write_json(out),
        None => out.extend_from_slice(b"null"),
    }
    match &response.result {
        Ok(result) => {
            out.extend_from_slice(b",\"result\":");
            write_json_value(out, result);
        }
        Err(error) => {
            out.extend_from_slice(b",\"error\":");
            write_json_value(out, &error.to_value());
        }
    }
    out.push(b'}');
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
