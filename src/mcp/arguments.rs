//! Reading a call's arguments: small typed getters whose errors name the argument and the
//! expected type, so a tool can answer a bad call with a useful `isError` result.

use serde_json::{Map, Value};

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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arguments {
    map: Map<String, Value>,
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
    ToolError::new(format!(
        "argument \"{name}\" must be {expected}, got {}",
        kind(got)
    ))
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
            Value::Object(map) => Arguments { map },
            _ => Arguments::default(),
        }
    }

    /// Arguments from a map.
    pub fn from_map(map: Map<String, Value>) -> Arguments {
        Arguments { map }
    }

    /// The whole map.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.map
    }

    /// The raw value of an argument; `None` when missing or `null`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// Moves an argument's value out (it is missing afterwards); `None` when missing or
    /// `null`. Moving rather than copying matters for large values (see
    /// [`McpServer::tool_mut`](crate::McpServer::tool_mut)).
    pub fn take(&mut self, name: &str) -> Option<Value> {
        self.map.remove(name).filter(|v| !v.is_null())
    }

    /// A required string, moved out of the arguments (it is missing afterwards).
    ///
    /// # Errors
    /// As [`Arguments::string`]; the arguments are left as they were then.
    pub fn take_string(&mut self, name: &str) -> Result<String, ToolError> {
        // One search: what is not a string is put back as it was (its error as `string`'s).
        match self.map.remove_entry(name) {
            Some((_, Value::String(s))) => Ok(s),
            Some((key, value)) => {
                let error = match value {
                    Value::Null => missing(name, "a string"),
                    _ => wrong(name, "a string", &value),
                };
                self.map.insert(key, value);
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
        self.typed(name, "an integer", as_integer)
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
        self.typed(name, "a number", Value::as_f64)
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
        self.typed(name, "a boolean", Value::as_bool)
    }

    /// A boolean, or `default` when missing.
    ///
    /// # Errors
    /// When the argument is present but not a boolean.
    pub fn boolean_or(&self, name: &str, default: bool) -> Result<bool, ToolError> {
        Ok(self.optional_boolean(name)?.unwrap_or(default))
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
            .map(|item| item.as_str().ok_or_else(|| wrong(name, expected, value)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert!(args.integer("f").is_err());
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
            "argument \"n\" must be a string, got an integer"
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

    #[test]
    fn non_object_arguments_are_empty() {
        assert!(Arguments::from_value(json!([1])).as_map().is_empty());
    }
}
