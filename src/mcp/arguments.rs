//! Reading a call's arguments: small typed getters whose errors name the argument and the
//! expected type, so a tool can answer a bad call with a useful `isError` result.
//!
//! A `tools/call` on a line of up to 4 KiB brings its arguments as JSON text (checked when the
//! line was read, nothing built): each getter reads the member it is asked for from that text,
//! and the map of all members is built only for what needs it whole ([`Arguments::as_map`],
//! [`Arguments::get`], a string with escapes to lend). Building the map, its names and its
//! values was a tenth of a small call's work.

use std::fmt;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::json_read::{IndexedObject, MemberSpan};
use crate::mcp::tool::ToolError;

/// The arguments of a tool call, a prompt request, or the variables of a resource template.
///
/// A `null` value counts as missing. The getters return a [`ToolError`] that names the
/// argument and the expected type, so `?` in a tool turns a bad argument into an `isError`
/// result (the behaviour MCP 2025-11-25 asks for).
///
/// # Example
/// ```
/// use mcpipe::Arguments;
/// use serde_json::json;
/// let args = Arguments::from_value(json!({ "text": "hi", "times": 3 }));
/// assert_eq!(args.string("text").unwrap(), "hi");
/// assert_eq!(args.integer_or("times", 1).unwrap(), 3);
/// assert_eq!(args.integer_or("width", 80).unwrap(), 80);
/// let err = args.integer("text").unwrap_err();
/// assert_eq!(err.message(), "argument \"text\" must be an integer, got a string");
/// ```
#[derive(Clone, Default)]
pub struct Arguments {
    /// The members. Built from `text` the first time something needs them whole; once built,
    /// the only truth (`text` is then ignored).
    map: OnceLock<Map<String, Value>>,
    /// The object as JSON text, while `map` is not built.
    text: Option<ObjectText>,
}

/// An arguments object's JSON text, checked when its line was read, and the members taken out
/// of it so far.
#[derive(Clone)]
struct ObjectText {
    /// Boxed as the line's reader made it: moved with the arguments, 8 bytes. Indexed: an
    /// object the reader could not index is built into the map at once.
    object: Box<IndexedObject>,
    /// Bit `i`: the `i`-th member (in order, duplicates counted) was taken.
    taken: u8,
}

/// What the text says of one name.
enum Found<'a> {
    /// No member of that name (or it was taken).
    Absent,
    /// The last member of that name: its value's text, its contents when it is a string
    /// without escapes, and a bit for each member of that name.
    Member(&'a str, Option<&'a str>, u8),
}

impl ObjectText {
    /// The members, as the line's reader indexed them.
    fn members(&self) -> impl Iterator<Item = (u8, &MemberSpan)> {
        let members = self.object.index.members().unwrap_or_default();
        (0..)
            .zip(members)
            .filter(|(i, _)| self.taken & (1 << i) == 0)
    }

    fn find(&self, name: &str) -> Found<'_> {
        let text = &self.object.text;
        let mut found = None;
        let mut bits = 0;
        // A plain loop: with iterator adaptors this search cost 40 instructions a call more.
        let members = self.object.index.members().unwrap_or_default();
        for (i, member) in members.iter().enumerate() {
            if self.taken & (1 << i) == 0 && member.is_named(text, name) {
                found = Some(member);
                bits |= 1 << i;
            }
        }
        match found {
            None => Found::Absent,
            Some(member) => {
                let (value, plain_string) = member.value(text);
                Found::Member(value, plain_string, bits)
            }
        }
    }

    /// The members not taken, as a map (of duplicate names the last counts).
    fn build(&self) -> Map<String, Value> {
        if self.taken == 0 {
            return serde_json::from_str(&self.object.text).unwrap_or_default();
        }
        let text = &self.object.text;
        let members = self.members().map(|(_, member)| {
            let (value, _) = member.value(text);
            (member.name(text).to_owned(), parse(value))
        });
        members.collect()
    }
}

/// A member's value from its text (checked when its line was read).
fn parse(value: &str) -> Value {
    serde_json::from_str(value).unwrap_or(Value::Null)
}

impl fmt::Debug for Arguments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arguments")
            .field("map", self.as_map())
            .finish()
    }
}

/// Equal when their members are, however each was read.
impl PartialEq for Arguments {
    fn eq(&self, other: &Arguments) -> bool {
        self.as_map() == other.as_map()
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn missing(name: &str, expected: &str) -> ToolError {
    ToolError::new(format!("missing argument \"{name}\": expected {expected}"))
}

fn wrong(name: &str, expected: &str, got: &Value) -> ToolError {
    // A number is named by its value: "must be an integer, got a number" reads as a
    // contradiction, "got 2.5" does not.
    let got = match got {
        Value::Number(n) => n.to_string(),
        other => kind(other).to_owned(),
    };
    ToolError::new(format!("argument \"{name}\" must be {expected}, got {got}"))
}

/// `"a", "b", "c"`: the choices as a message lists them.
fn quoted(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices
        .iter()
        .map(|c| Value::from(*c).to_string())
        .collect();
    quoted.join(", ")
}

fn as_integer(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| {
        // JavaScript clients may send 3.0 for 3.
        let f = value.as_f64()?;
        (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
    })
}

impl Arguments {
    /// Arguments from a JSON object; anything else (`null`, a missing `arguments`) gives none.
    pub fn from_value(value: Value) -> Arguments {
        match value {
            Value::Object(map) => Arguments::from_map(map),
            _ => Arguments::default(),
        }
    }

    /// Arguments from a map.
    pub fn from_map(map: Map<String, Value>) -> Arguments {
        Arguments {
            map: OnceLock::from(map),
            text: None,
        }
    }

    /// Arguments from an object's JSON text that the crate's reader checked (see
    /// `ParamsApart::object_text`).
    pub(crate) fn from_object_text(object: Box<IndexedObject>) -> Arguments {
        let text = ObjectText { object, taken: 0 };
        if text.object.index.members().is_none() {
            // Over six members, or a name with an escape: read whole, as any other call's.
            return Arguments::from_map(text.build());
        }
        Arguments {
            map: OnceLock::new(),
            text: Some(text),
        }
    }

    /// The whole map (built now if the arguments came as text).
    pub fn as_map(&self) -> &Map<String, Value> {
        self.map
            .get_or_init(|| self.text.as_ref().map_or_else(Map::new, ObjectText::build))
    }

    /// The whole map, owned.
    pub(crate) fn into_map(mut self) -> Map<String, Value> {
        std::mem::take(self.map_mut())
    }

    /// The map, built, for a change.
    fn map_mut(&mut self) -> &mut Map<String, Value> {
        self.as_map();
        self.text = None;
        self.map.get_mut().expect("built just now")
    }

    /// The text, while the map is not built.
    fn text(&self) -> Option<&ObjectText> {
        self.text.as_ref().filter(|_| self.map.get().is_none())
    }

    /// The text, while the map is not built, for a member to be taken from it.
    fn text_mut(&mut self) -> Option<&mut ObjectText> {
        self.text.as_mut().filter(|_| self.map.get().is_none())
    }

    /// The raw value of an argument; `None` when missing or `null`. (Builds the map when the
    /// arguments came as text; the typed getters read from the text.)
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.as_map().get(name).filter(|v| !v.is_null())
    }

    /// Moves an argument's value out (it is missing afterwards); `None` when missing or
    /// `null`. Moving rather than copying matters for large values (see
    /// [`McpServer::tool_mut`](crate::McpServer::tool_mut)).
    pub fn take(&mut self, name: &str) -> Option<Value> {
        if let Some(text) = self.text_mut() {
            match text.find(name) {
                Found::Absent => return None,
                Found::Member(value, _, members) => {
                    let value = parse(value);
                    text.taken |= members;
                    return Some(value).filter(|v| !v.is_null());
                }
            }
        }
        self.map_mut().remove(name).filter(|v| !v.is_null())
    }

    /// A required string, moved out of the arguments (it is missing afterwards).
    ///
    /// # Errors
    /// As [`Arguments::string`]; the arguments are left as they were then.
    pub fn take_string(&mut self, name: &str) -> Result<String, ToolError> {
        if let Some(text) = self.text_mut() {
            match text.find(name) {
                Found::Absent => return Err(missing(name, "a string")),
                Found::Member(_, plain_string, members) => {
                    // A string without escapes, the common case; anything else as below.
                    if let Some(string) = plain_string {
                        let string = string.to_owned();
                        text.taken |= members;
                        return Ok(string);
                    }
                }
            }
        }
        let map = self.map_mut();
        // One search: what is not a string is put back as it was (its error as `string`'s).
        match map.remove_entry(name) {
            Some((_, Value::String(s))) => Ok(s),
            Some((key, value)) => {
                let error = match value {
                    Value::Null => missing(name, "a string"),
                    _ => wrong(name, "a string", &value),
                };
                map.insert(key, value);
                Err(error)
            }
            None => Err(missing(name, "a string")),
        }
    }

    fn typed<'a, T>(
        &'a self,
        name: &str,
        expected: &str,
        read: impl Fn(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => read(v).map(Some).ok_or_else(|| wrong(name, expected, v)),
        }
    }

    /// [`Arguments::typed`] for a value that is copied out (a number, a boolean): read from
    /// the text when the arguments came as text, without building the map.
    fn scalar<T>(
        &self,
        name: &str,
        expected: &str,
        read: impl Fn(&Value) -> Option<T>,
    ) -> Result<Option<T>, ToolError> {
        if let Some(text) = self.text() {
            match text.find(name) {
                Found::Absent => return Ok(None),
                Found::Member(value, _, _) => {
                    let value = parse(value);
                    if value.is_null() {
                        return Ok(None);
                    }
                    return read(&value)
                        .map(Some)
                        .ok_or_else(|| wrong(name, expected, &value));
                }
            }
        }
        self.typed(name, expected, read)
    }

    /// A required string.
    ///
    /// # Errors
    /// When the argument is missing or not a string.
    pub fn string(&self, name: &str) -> Result<&str, ToolError> {
        self.optional_string(name)?
            .ok_or_else(|| missing(name, "a string"))
    }

    /// An optional string: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a string.
    pub fn optional_string(&self, name: &str) -> Result<Option<&str>, ToolError> {
        if let Some(text) = self.text() {
            match text.find(name) {
                Found::Absent => return Ok(None),
                // Lent from the text when it has no escapes; otherwise from the map.
                Found::Member("null", _, _) => return Ok(None),
                Found::Member(_, Some(string), _) => return Ok(Some(string)),
                Found::Member(..) => {}
            }
        }
        self.typed(name, "a string", Value::as_str)
    }

    /// A string, or `default` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a string.
    pub fn string_or<'a>(&'a self, name: &str, default: &'a str) -> Result<&'a str, ToolError> {
        Ok(self.optional_string(name)?.unwrap_or(default))
    }

    /// A required integer (a number with no fractional part).
    ///
    /// # Errors
    /// When the argument is missing or not an integer.
    pub fn integer(&self, name: &str) -> Result<i64, ToolError> {
        self.optional_integer(name)?
            .ok_or_else(|| missing(name, "an integer"))
    }

    /// An optional integer: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not an integer.
    pub fn optional_integer(&self, name: &str) -> Result<Option<i64>, ToolError> {
        self.scalar(name, "an integer", as_integer)
    }

    /// An integer, or `default` when missing.
    ///
    /// # Errors
    /// When the argument is present but not an integer.
    pub fn integer_or(&self, name: &str, default: i64) -> Result<i64, ToolError> {
        Ok(self.optional_integer(name)?.unwrap_or(default))
    }

    /// A required number.
    ///
    /// # Errors
    /// When the argument is missing or not a number.
    pub fn number(&self, name: &str) -> Result<f64, ToolError> {
        self.optional_number(name)?
            .ok_or_else(|| missing(name, "a number"))
    }

    /// An optional number: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a number.
    pub fn optional_number(&self, name: &str) -> Result<Option<f64>, ToolError> {
        self.scalar(name, "a number", Value::as_f64)
    }

    /// A required boolean.
    ///
    /// # Errors
    /// When the argument is missing or not a boolean.
    pub fn boolean(&self, name: &str) -> Result<bool, ToolError> {
        self.optional_boolean(name)?
            .ok_or_else(|| missing(name, "a boolean"))
    }

    /// An optional boolean: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a boolean.
    pub fn optional_boolean(&self, name: &str) -> Result<Option<bool>, ToolError> {
        self.scalar(name, "a boolean", Value::as_bool)
    }

    /// A boolean, or `default` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a boolean.
    pub fn boolean_or(&self, name: &str, default: bool) -> Result<bool, ToolError> {
        Ok(self.optional_boolean(name)?.unwrap_or(default))
    }

    /// A required string that must be one of `choices` (an argument whose schema has an
    /// `enum`).
    ///
    /// # Errors
    /// When the argument is missing, not a string, or none of the choices; the message lists
    /// them, so the model can correct its call.
    ///
    /// # Example
    /// ```
    /// use mcpipe::Arguments;
    /// use serde_json::json;
    /// const KINDS: [&str; 3] = ["todo", "idea", "memo"];
    /// let args = Arguments::from_value(json!({ "kind": "idea", "other": "bogus" }));
    /// assert_eq!(args.one_of("kind", &KINDS).unwrap(), "idea");
    /// assert_eq!(
    ///     args.one_of("other", &KINDS).unwrap_err().message(),
    ///     "argument \"other\" must be one of \"todo\", \"idea\", \"memo\"; got \"bogus\""
    /// );
    /// assert_eq!(args.optional_one_of("sort", &KINDS).unwrap().unwrap_or("memo"), "memo");
    /// ```
    pub fn one_of(&self, name: &str, choices: &[&str]) -> Result<&str, ToolError> {
        self.optional_one_of(name, choices)?
            .ok_or_else(|| missing(name, &format!("one of {}", quoted(choices))))
    }

    /// An optional string that must be one of `choices` when present: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a string, or none of the choices.
    pub fn optional_one_of(&self, name: &str, choices: &[&str]) -> Result<Option<&str>, ToolError> {
        match self.optional_string(name)? {
            Some(value) if !choices.contains(&value) => Err(ToolError::new(format!(
                "argument \"{name}\" must be one of {}; got {}",
                quoted(choices),
                Value::from(value)
            ))),
            found => Ok(found),
        }
    }

    /// An optional array of strings: `None` when missing.
    ///
    /// # Errors
    /// When the argument is present but not an array, or holds something other than strings.
    pub fn optional_string_list(&self, name: &str) -> Result<Option<Vec<&str>>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(_) => self.string_list(name).map(Some),
        }
    }

    /// A required array of strings.
    ///
    /// # Errors
    /// When the argument is missing, not an array, or holds something other than strings.
    pub fn string_list(&self, name: &str) -> Result<Vec<&str>, ToolError> {
        let expected = "an array of strings";
        let value = self.get(name).ok_or_else(|| missing(name, expected))?;
        let items = value
            .as_array()
            .ok_or_else(|| wrong(name, expected, value))?;
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_str().ok_or_else(|| {
                    ToolError::new(format!(
                        "argument \"{name}\" must be {expected}, but item {i} is {}",
                        kind(item)
                    ))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_read::ObjectIndex;
    use crate::message::ApartMember;
    use serde_json::json;

    #[test]
    fn a_missing_argument_names_itself_and_the_expected_type() {
        let args = Arguments::from_value(json!({}));
        assert_eq!(
            args.string("text").unwrap_err().message(),
            "missing argument \"text\": expected a string"
        );
        assert_eq!(
            args.integer("ms").unwrap_err().message(),
            "missing argument \"ms\": expected an integer"
        );
    }

    #[test]
    fn a_wrong_type_names_what_it_got() {
        let args = Arguments::from_value(json!({"ms": "soon", "argv": ["a", 1], "f": 1.5}));
        assert_eq!(
            args.integer("ms").unwrap_err().message(),
            "argument \"ms\" must be an integer, got a string"
        );
        assert!(args
            .string_list("argv")
            .unwrap_err()
            .message()
            .contains("array of strings"));
        assert_eq!(
            args.integer("f").unwrap_err().message(),
            "argument \"f\" must be an integer, got 1.5"
        );
    }

    #[test]
    fn a_list_item_of_the_wrong_type_is_named_by_its_position() {
        let args = Arguments::from_value(json!({"tags": ["a", 1], "more": ["a", "b", null]}));
        assert_eq!(
            args.string_list("tags").unwrap_err().message(),
            "argument \"tags\" must be an array of strings, but item 1 is an integer"
        );
        assert_eq!(
            args.string_list("more").unwrap_err().message(),
            "argument \"more\" must be an array of strings, but item 2 is null"
        );
    }

    #[test]
    fn a_choice_outside_the_list_names_the_choices() {
        let args = Arguments::from_value(json!({"kind": "memo", "bad": "x\"y", "n": 3}));
        assert_eq!(args.one_of("kind", &["todo", "memo"]).unwrap(), "memo");
        assert_eq!(
            args.one_of("bad", &["todo", "memo"]).unwrap_err().message(),
            "argument \"bad\" must be one of \"todo\", \"memo\"; got \"x\\\"y\""
        );
        assert_eq!(
            args.one_of("gone", &["todo", "memo"])
                .unwrap_err()
                .message(),
            "missing argument \"gone\": expected one of \"todo\", \"memo\""
        );
        assert_eq!(
            args.one_of("n", &["todo"]).unwrap_err().message(),
            "argument \"n\" must be a string, got 3"
        );
        assert_eq!(args.optional_one_of("gone", &["todo"]).unwrap(), None);
        assert!(args.optional_one_of("bad", &["todo"]).is_err());
    }

    #[test]
    fn an_optional_list_is_none_when_missing_or_null_and_checked_when_present() {
        let args = Arguments::from_value(json!({"tags": ["a", "b"], "none": null, "bad": [1]}));
        assert_eq!(
            args.optional_string_list("tags").unwrap(),
            Some(vec!["a", "b"])
        );
        assert_eq!(args.optional_string_list("none").unwrap(), None);
        assert_eq!(args.optional_string_list("gone").unwrap(), None);
        assert!(args.optional_string_list("bad").is_err());
    }

    #[test]
    fn null_counts_as_missing_and_defaults_apply() {
        let args = Arguments::from_value(json!({"a": null, "n": 2.0}));
        assert_eq!(args.optional_string("a").unwrap(), None);
        assert_eq!(args.string_or("a", "d").unwrap(), "d");
        assert_eq!(args.integer("n").unwrap(), 2);
    }

    #[test]
    fn taken_values_move_out_and_errors_leave_them_in_place() {
        let mut args = Arguments::from_value(json!({"t": "hi", "n": 3, "z": null}));
        assert_eq!(
            args.take_string("n").unwrap_err().message(),
            "argument \"n\" must be a string, got 3"
        );
        assert_eq!(args.take("n"), Some(json!(3)));
        assert_eq!(args.take_string("t").unwrap(), "hi");
        assert!(args.take_string("t").is_err());
        assert_eq!(
            args.take_string("z").unwrap_err().message(),
            "missing argument \"z\": expected a string"
        );
        assert!(args.as_map().contains_key("z"), "a null stays where it was");
        assert_eq!(args.take("z"), None);
        assert!(args.as_map().is_empty());
    }

    /// Arguments from an object's text as a `tools/call` line brings them (indexed when the
    /// line's reader could), or, with `unindexed`, as when it could not.
    fn from_text(text: &str) -> Arguments {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"arguments":{text}}}}}"#
        );
        let apart = crate::mcp::server::TOOL_CALL_APART;
        let (_, taken) = crate::message::parse_line_apart(line.as_bytes(), Some(apart));
        match taken.map(|taken| *taken) {
            Some([_, Some(ApartMember::ObjectText(object))]) => Arguments::from_object_text(object),
            _ => panic!("kept as text: {text}"),
        }
    }

    fn unindexed(text: &str) -> Arguments {
        Arguments::from_object_text(Box::new(IndexedObject {
            text: text.to_owned(),
            index: ObjectIndex::default(),
        }))
    }

    /// Every getter, and takes in between, give the same from an object's text as from its
    /// map: the arguments of a short `tools/call` come as text.
    #[test]
    fn arguments_read_from_text_answer_as_the_map_does() {
        let mut many = String::from("{");
        for i in 0..70 {
            many += &format!(r#""k{i}":{i},"#);
        }
        many += r#""s":"last"}"#;
        let texts = [
            r#"{"t":"hi","n":3,"f":1.5,"b":true,"z":null,"l":["a","b"],"o":{"x":1}}"#,
            r#"{ "t" : "a\"b\u00e9" , "n" : 3.0 , "n" : -7 , "big": 18446744073709551615 }"#,
            r#"{"t\u0031":"escaped name","t":"plain","e":1e2,"m":-0}"#,
            r#"{}"#,
            many.as_str(),
        ];
        let names = [
            "t", "t1", "n", "f", "b", "z", "l", "o", "big", "e", "m", "s", "k3", "none",
        ];
        type Op = fn(&mut Arguments, &str) -> String;
        let ops: [Op; 10] = [
            |a, n| format!("{:?}", a.optional_string(n)),
            |a, n| format!("{:?}", a.string(n)),
            |a, n| format!("{:?}", a.optional_integer(n)),
            |a, n| format!("{:?}", a.number(n)),
            |a, n| format!("{:?}", a.optional_boolean(n)),
            |a, n| format!("{:?}", a.get(n)),
            |a, n| format!("{:?}", a.string_list(n)),
            |a, n| format!("{:?}", a.take_string(n)),
            |a, n| format!("{:?}", a.take(n)),
            |a, _| format!("{:?}", a.as_map()),
        ];
        for text in texts {
            let map: Map<String, Value> = serde_json::from_str(text).unwrap();
            // Each op on each name, then the same after each kind of take of each name.
            for first in [None, Some(7), Some(8)] {
                for taken in names {
                    for (i, op) in ops.iter().enumerate() {
                        for name in names {
                            let mut lazy = if first == Some(7) {
                                unindexed(text)
                            } else {
                                from_text(text)
                            };
                            let mut built = Arguments::from_map(map.clone());
                            if let Some(take) = first {
                                let (a, b) =
                                    (ops[take](&mut lazy, taken), ops[take](&mut built, taken));
                                assert_eq!(a, b, "{text}: take {taken}");
                            }
                            assert_eq!(
                                op(&mut lazy, name),
                                op(&mut built, name),
                                "{text}: op {i} on {name} after {first:?} of {taken}"
                            );
                            assert_eq!(lazy, built, "{text}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_string_taken_from_text_is_gone_and_the_rest_stays() {
        let mut args = from_text(r#"{"t":"a","t":"b","n":1}"#);
        assert_eq!(
            args.take_string("t").unwrap(),
            "b",
            "the last of duplicates"
        );
        assert!(
            args.text().is_some(),
            "taken from the text, the map not built"
        );
        assert_eq!(args.optional_string("t").unwrap(), None);
        assert_eq!(args.integer("n").unwrap(), 1);
        assert!(args.text().is_some());
        assert_eq!(
            args.as_map(),
            &serde_json::from_str::<Map<String, Value>>(r#"{"n":1}"#).unwrap()
        );
    }

    #[test]
    fn non_object_arguments_are_empty() {
        assert!(Arguments::from_value(json!([1])).as_map().is_empty());
    }
}
