//! The id of a request, kept as it came (an integer of its own JSON type, or a string), so that
//! the response carries it back exactly.

use std::fmt;

use serde_json::{Number, Value};

/// The id of a request: a string or an integer, echoed back exactly as received.
///
/// JSON-RPC also allows `null` and fractional numbers, but MCP forbids both, so a `RequestId`
/// cannot hold them: a message carrying one is rejected with `-32600`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(IdRepr);

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum IdRepr {
    // Integers keep their own JSON type, so `1` never comes back as `"1"`, and integers above
    // 2^53 survive (no trip through f64).
    Signed(i64),
    Unsigned(u64),
    Str(String),
}

impl RequestId {
    /// Reads an id from a JSON value: a string or an integer (not a float, not null).
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId(IdRepr::Str(s.clone()))),
            Value::Number(n) => RequestId::from_number(n),
            _ => None,
        }
    }

    fn from_number(n: &Number) -> Option<RequestId> {
        if let Some(i) = n.as_i64() {
            Some(RequestId(IdRepr::Signed(i)))
        } else {
            n.as_u64().map(|u| RequestId(IdRepr::Unsigned(u)))
        }
    }

    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match &self.0 {
            IdRepr::Signed(i) => Value::from(*i),
            IdRepr::Unsigned(u) => Value::from(*u),
            IdRepr::Str(s) => Value::from(s.as_str()),
        }
    }

    /// The id when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            IdRepr::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The id when it is an integer that fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match &self.0 {
            IdRepr::Signed(i) => Some(*i),
            _ => None,
        }
    }

    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        match &self.0 {
            // serde_json's integer writer: a fraction of `write!`'s formatting machinery.
            // Serialising an integer into a `Vec` cannot fail, as for a `Value`.
            IdRepr::Signed(i) => {
                serde_json::to_writer(&mut *out, i).expect("an integer into a Vec")
            }
            IdRepr::Unsigned(u) => {
                serde_json::to_writer(&mut *out, u).expect("an integer into a Vec")
            }
            IdRepr::Str(s) => crate::json_text::write_str(out, s),
        }
    }
}

impl From<i64> for RequestId {
    fn from(id: i64) -> RequestId {
        RequestId(IdRepr::Signed(id))
    }
}

impl From<i32> for RequestId {
    fn from(id: i32) -> RequestId {
        RequestId(IdRepr::Signed(id.into()))
    }
}

impl From<u64> for RequestId {
    fn from(id: u64) -> RequestId {
        match i64::try_from(id) {
            Ok(i) => RequestId(IdRepr::Signed(i)),
            Err(_) => RequestId(IdRepr::Unsigned(id)),
        }
    }
}

impl From<&str> for RequestId {
    fn from(id: &str) -> RequestId {
        RequestId(IdRepr::Str(id.to_owned()))
    }
}

impl From<String> for RequestId {
    fn from(id: String) -> RequestId {
        RequestId(IdRepr::Str(id))
    }
}

impl fmt::Display for RequestId {
    /// Formats the id as JSON (`7`, `"abc"`), so string and integer ids stay distinguishable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            IdRepr::Signed(i) => write!(f, "{i}"),
            IdRepr::Unsigned(u) => write!(f, "{u}"),
            IdRepr::Str(s) => write!(f, "{}", Value::from(s.as_str())),
        }
    }
}
