//! What `tools/list` says about each tool, read against the `Tool` of schema.ts: a name (the
//! only way to call it) and an input schema whose root is an object. A tool that breaks either
//! is a MUST failure of the `tools` check, whatever the probe does with it next.

use serde_json::Value;

/// A tool's name, or why it has none the probe can call: missing, not a string, empty.
pub(crate) fn name(tool: &Value) -> Result<&str, String> {
    match tool.get("name") {
        None | Some(Value::Null) => Err(String::from("no name")),
        Some(Value::String(name)) if name.is_empty() => Err(String::from("an empty name")),
        Some(Value::String(name)) => Ok(name),
        Some(other) => Err(format!("a name that is not a string ({})", excerpt(other))),
    }
}

/// How the report shows a tool: its name, or what stands in for a missing or unusable one.
pub(crate) fn label(tool: &Value) -> String {
    match tool.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        None | Some(Value::Null) => String::from("(no name)"),
        Some(Value::String(_)) => String::from("(empty name)"),
        Some(other) => format!("(name {})", excerpt(other)),
    }
}

/// What is wrong with the tool's `inputSchema`, when something is: it is required, and is a
/// JSON Schema object whose `type` is `"object"` (the arguments are always an object).
pub(crate) fn schema_flaw(tool: &Value) -> Option<String> {
    let schema = match tool.get("inputSchema") {
        None | Some(Value::Null) => return Some(String::from("no inputSchema")),
        Some(schema) => schema,
    };
    if !schema.is_object() {
        return Some(format!(
            "inputSchema {} is not a JSON Schema object",
            excerpt(schema)
        ));
    }
    match schema.get("type") {
        Some(t) if t == "object" => None,
        None => Some(String::from("inputSchema has no \"type\": \"object\"")),
        Some(other) => Some(format!(
            "inputSchema has type {}, not \"object\"",
            excerpt(other)
        )),
    }
}

/// What the tool names break of MCP 2025-11-25's advice (SHOULD): 1 to 128 characters of
/// `A-Za-z0-9_-.`, unique within the server. One finding a name, in listing order.
pub(crate) fn name_advice<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut advice = Vec::new();
    for name in names {
        let shown = excerpt(&Value::from(name));
        if seen.contains(&name) {
            if !advice.contains(&format!("tool name {shown} is listed more than once")) {
                advice.push(format!("tool name {shown} is listed more than once"));
            }
            continue;
        }
        seen.push(name);
        let length = name.chars().count();
        if length > 128 {
            advice.push(format!(
                "tool name {shown} has {length} characters (at most 128)"
            ));
        } else if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            advice.push(format!(
                "tool name {shown} has characters outside A-Za-z0-9_-."
            ));
        }
    }
    advice
}

/// A value of the server's as a short excerpt for a detail line.
fn excerpt(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 40 {
        return text;
    }
    let mut cut: String = text.chars().take(37).collect();
    cut.push_str("...");
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_needs_a_non_empty_string_name() {
        assert_eq!(name(&json!({"name": "look"})), Ok("look"));
        assert_eq!(name(&json!({})), Err(String::from("no name")));
        assert_eq!(name(&json!({"name": null})), Err(String::from("no name")));
        assert_eq!(
            name(&json!({"name": ""})),
            Err(String::from("an empty name"))
        );
        assert_eq!(
            name(&json!({"name": 42})),
            Err(String::from("a name that is not a string (42)"))
        );
        assert_eq!(label(&json!({"name": 42})), "(name 42)");
        assert_eq!(label(&json!({"name": ""})), "(empty name)");
        assert_eq!(label(&json!({})), "(no name)");
    }

    #[test]
    fn tool_names_follow_the_advice_of_2025_11_25() {
        assert!(name_advice(["echo", "get-time", "a.b_c", "x"]).is_empty());
        let long = "n".repeat(129);
        assert_eq!(
            name_advice(["echo", "has space", "echo", "echo", long.as_str()]),
            [
                "tool name \"has space\" has characters outside A-Za-z0-9_-.",
                "tool name \"echo\" is listed more than once",
                &format!(
                    "tool name \"{}... has 129 characters (at most 128)",
                    "n".repeat(36)
                ),
            ]
        );
    }

    #[test]
    fn an_input_schema_is_an_object_schema() {
        let flaw = |schema: Value| schema_flaw(&json!({"name": "t", "inputSchema": schema}));
        assert_eq!(flaw(json!({"type": "object"})), None);
        assert_eq!(
            flaw(json!({"type": "object", "properties": {"a": {"type": "string"}}})),
            None
        );
        assert_eq!(
            flaw(json!("string")),
            Some(String::from(
                "inputSchema \"string\" is not a JSON Schema object"
            ))
        );
        assert_eq!(
            flaw(json!({"type": "string"})),
            Some(String::from(
                "inputSchema has type \"string\", not \"object\""
            ))
        );
        assert_eq!(
            flaw(json!({"properties": {}})),
            Some(String::from("inputSchema has no \"type\": \"object\""))
        );
        assert_eq!(flaw(Value::Null), Some(String::from("no inputSchema")));
        assert_eq!(
            schema_flaw(&json!({"name": "t"})),
            Some(String::from("no inputSchema"))
        );
    }
}
