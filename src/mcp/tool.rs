//! Tools: how one is described, what it returns, and how it fails.

use std::fmt;

use serde_json::{json, Map, Value};

use crate::error::Error;
use crate::json_text;
use crate::mcp::resource::ResourceContents;
use crate::message::ErrorObject;
use crate::protocol::SERVER_INFO_KEY;

/// Lists `name` once in the schema's `required` (where it already stood, if it did), or takes
/// it out; a list emptied here goes too, so the schema equals one never told of `name`.
fn set_required(schema: &mut Map<String, Value>, name: &str, required: bool) {
    let listed = |v: &Value| v.as_str() == Some(name);
    if required {
        let list = schema
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            if !list.iter().any(listed) {
                list.push(Value::String(name.to_owned()));
            }
        }
    } else if let Some(Value::Array(list)) = schema.get_mut("required") {
        let before = list.len();
        list.retain(|v| !listed(v));
        if list.is_empty() && before > 0 {
            schema.remove("required");
        }
    }
}

/// A tool's description, as `tools/list` shows it: a name, a description, an input schema, and
/// any other field (title, output schema, annotations, icons, `_meta`).
///
/// # Example
/// ```
/// use mcpipe::Tool;
/// let tool = Tool::new("add", "Adds two integers")
///     .arg("a", "integer", "The first term")
///     .arg("b", "integer", "The second term")
///     .optional_arg("note", "string", "Ignored");
/// assert_eq!(tool.name(), "add");
/// assert_eq!(tool.to_value()["inputSchema"]["required"], serde_json::json!(["a", "b"]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Invariant: holds `name` (a string) and `inputSchema` (an object with `"type":"object"`).
    fields: Map<String, Value>,
    /// Invariant: `fields["name"]`, kept apart because every call looks it up.
    name: String,
    /// Invariant: what `fields` says under `execution.taskSupport`, read once per call.
    task_support: TaskSupport,
}

impl Tool {
    /// A tool taking no arguments (input schema `{"type":"object"}`) until some are added.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Tool {
        let name = name.into();
        let mut fields = Map::new();
        fields.insert("name".into(), Value::String(name.clone()));
        fields.insert("description".into(), Value::String(description.into()));
        fields.insert("inputSchema".into(), json!({ "type": "object" }));
        Tool {
            fields,
            name,
            task_support: TaskSupport::Forbidden,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the human-readable title (MCP 2025-06-18 on; older clients ignore it).
    pub fn title(self, title: impl Into<String>) -> Tool {
        self.field("title", Value::String(title.into()))
    }

    /// Replaces the input schema (arguments added before are dropped; those added after, with
    /// [`Tool::arg`] and the like, join it). A schema that is not an object with
    /// `"type":"object"` is given that type, since MCP requires it.
    pub fn input_schema(mut self, schema: Value) -> Tool {
        let mut schema = match schema {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        schema.insert("type".into(), Value::String("object".into()));
        self.fields
            .insert("inputSchema".into(), Value::Object(schema));
        self
    }

    /// Adds a required argument of JSON type `json_type` (`"string"`, `"integer"`,
    /// `"number"`, `"boolean"`, `"array"`, `"object"`) to the input schema. An argument of
    /// the same name given before is replaced (a schema lists each name once). For an `enum`,
    /// the items of an array, a `default` or bounds, see [`Tool::arg_schema`].
    pub fn arg(self, name: &str, json_type: &str, description: &str) -> Tool {
        self.add_arg(name, json_type, description, true)
    }

    /// Adds an optional argument to the input schema, replacing one of the same name (which is
    /// then no longer required).
    pub fn optional_arg(self, name: &str, json_type: &str, description: &str) -> Tool {
        self.add_arg(name, json_type, description, false)
    }

    /// Adds a required argument described by its own JSON Schema: what [`Tool::arg`] cannot
    /// say, such as an `enum`, the `items` of an array, a `default`, or bounds. It goes into
    /// the input schema beside the other arguments (also those of a schema set with
    /// [`Tool::input_schema`] before), replacing one of the same name.
    ///
    /// # Example
    /// ```
    /// use mcpipe::Tool;
    /// use serde_json::json;
    /// let tool = Tool::new("add_note", "Adds a note")
    ///     .arg("text", "string", "The note")
    ///     .arg_schema("kind", json!({ "type": "string", "enum": ["todo", "idea"] }))
    ///     .optional_arg_schema("tags", json!({ "type": "array", "items": { "type": "string" } }))
    ///     .optional_arg_schema("priority", json!({ "type": "integer", "default": 3 }));
    /// let schema = &tool.to_value()["inputSchema"];
    /// assert_eq!(schema["properties"]["kind"]["enum"], json!(["todo", "idea"]));
    /// assert_eq!(schema["required"], json!(["text", "kind"]));
    /// ```
    pub fn arg_schema(self, name: &str, schema: Value) -> Tool {
        self.add_property(name, schema, true)
    }

    /// Adds an optional argument described by its own JSON Schema (see
    /// [`Tool::arg_schema`]), replacing one of the same name (which is then no longer
    /// required).
    pub fn optional_arg_schema(self, name: &str, schema: Value) -> Tool {
        self.add_property(name, schema, false)
    }

    fn add_arg(self, name: &str, json_type: &str, description: &str, required: bool) -> Tool {
        let property = json!({ "type": json_type, "description": description });
        self.add_property(name, property, required)
    }

    fn add_property(mut self, name: &str, property: Value, required: bool) -> Tool {
        if let Some(Value::Object(schema)) = self.fields.get_mut("inputSchema") {
            let properties = schema
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(properties) = properties {
                properties.insert(name.to_owned(), property);
            }
            set_required(schema, name, required);
        }
        self
    }

    /// Sets the output schema (MCP 2025-06-18 on): results should then carry matching
    /// structured content ([`ToolResult::structured`]).
    pub fn output_schema(self, schema: Value) -> Tool {
        self.field("outputSchema", schema)
    }

    /// Sets the annotations (`readOnlyHint`, `destructiveHint`, ...).
    pub fn annotations(self, annotations: Value) -> Tool {
        self.field("annotations", annotations)
    }

    /// Whether clients may (or must) call the tool as a task (`execution.taskSupport`;
    /// [`TaskSupport::Forbidden`] by default). A server with such a tool declares tasks (the
    /// `tasks` capability under 2025-11-25, the `io.modelcontextprotocol/tasks` extension under
    /// 2026-07-28); see [`McpServer`](crate::McpServer) for how a task runs.
    ///
    /// # Example
    /// ```
    /// use mcpipe::{TaskSupport, Tool};
    /// let tool = Tool::new("build", "Builds the project").task_support(TaskSupport::Optional);
    /// assert_eq!(tool.to_value()["execution"]["taskSupport"], "optional");
    /// assert_eq!(tool.task_support_level(), TaskSupport::Optional);
    /// ```
    pub fn task_support(mut self, support: TaskSupport) -> Tool {
        let execution = self.fields.entry("execution").or_insert_with(|| json!({}));
        if !execution.is_object() {
            *execution = json!({});
        }
        if let Value::Object(map) = execution {
            map.insert("taskSupport".into(), json!(support.as_str()));
        }
        self.task_support = support;
        self
    }

    /// The tool's `execution.taskSupport` ([`TaskSupport::Forbidden`] when absent or unknown).
    pub fn task_support_level(&self) -> TaskSupport {
        self.task_support
    }

    /// What `fields` says under `execution.taskSupport`.
    fn task_support_of_fields(&self) -> TaskSupport {
        match self
            .fields
            .get("execution")
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
        {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }

    /// Sets any other field (`icons`, `_meta`, `execution`, ...). `name` cannot be changed
    /// this way; `inputSchema` goes through [`Tool::input_schema`].
    pub fn field(mut self, key: &str, value: Value) -> Tool {
        match key {
            "name" => {}
            "inputSchema" => return self.input_schema(value),
            _ => {
                self.fields.insert(key.to_owned(), value);
                if key == "execution" {
                    self.task_support = self.task_support_of_fields();
                }
            }
        }
        self
    }

    /// The description as JSON, as `tools/list` shows it.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

/// Whether a tool may be called as a task (MCP 2025-11-25 tasks, the 2026-07-28 tasks
/// extension): the tool's `execution.taskSupport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Never as a task (the default): a task-augmented call is refused (`-32601` under
    /// 2025-11-25; under 2026-07-28 the call simply runs as a plain call).
    #[default]
    Forbidden,
    /// As a task when the client wants one (2025-11-25: the call carries `task`; 2026-07-28:
    /// the client declared the extension), else as a plain call.
    Optional,
    /// Only as a task: a plain call is refused (`-32601` under 2025-11-25, `-32021` naming
    /// the extension under 2026-07-28). A handshake client of an older revision, which has no
    /// tasks, is not shown the tool, and calling it is `-32602` (an unknown tool).
    Required,
}

impl TaskSupport {
    /// The wire name: `forbidden`, `optional` or `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// One content block of a tool result or a prompt message: text, image, audio, an embedded
/// resource, a resource link, or any other block given as JSON.
#[derive(Debug, Clone)]
pub struct Content(Block);

/// How a block is kept: a text block as its text alone (the common case, written without
/// building its JSON object), anything else as JSON.
#[derive(Debug, Clone)]
enum Block {
    Text(String),
    Json(Value),
}

impl PartialEq for Content {
    /// Blocks are equal when their JSON is.
    fn eq(&self, other: &Content) -> bool {
        match (&self.0, &other.0) {
            (Block::Text(a), Block::Text(b)) => a == b,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Content {
        Content(Block::Text(text.into()))
    }

    /// An image block from base64 data (see [`ResourceContents::blob`] for encoding bytes).
    pub fn image(base64_data: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::from_value(
            json!({ "type": "image", "data": base64_data.into(), "mimeType": mime_type.into() }),
        )
    }

    /// An audio block from base64 data (MCP 2025-03-26 on).
    pub fn audio(base64_data: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::from_value(
            json!({ "type": "audio", "data": base64_data.into(), "mimeType": mime_type.into() }),
        )
    }

    /// An embedded resource.
    pub fn resource(contents: ResourceContents) -> Content {
        Content::from_value(json!({ "type": "resource", "resource": contents.to_value() }))
    }

    /// A link to a resource (MCP 2025-06-18 on).
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Content {
        Content::from_value(
            json!({ "type": "resource_link", "uri": uri.into(), "name": name.into() }),
        )
    }

    /// Any block given as JSON (it should carry a `type`).
    pub fn from_value(value: Value) -> Content {
        Content(Block::Json(value))
    }

    /// Adds `annotations` (`audience`, `priority`, `lastModified`) to the block.
    pub fn with_annotations(self, annotations: Value) -> Content {
        let mut value = self.into_value();
        if let Value::Object(map) = &mut value {
            map.insert("annotations".into(), annotations);
        }
        Content::from_value(value)
    }

    /// The block as JSON.
    pub fn to_value(&self) -> Value {
        match &self.0 {
            Block::Text(text) => text_block(text.clone()),
            Block::Json(value) => value.clone(),
        }
    }

    fn into_value(self) -> Value {
        match self.0 {
            Block::Text(text) => text_block(text),
            Block::Json(value) => value,
        }
    }

    /// Appends the block as JSON text: the bytes of writing [`Content::to_value`].
    fn write_json(&self, out: &mut Vec<u8>) {
        match &self.0 {
            // The members in the order of serde_json's sorted map: "text" < "type".
            Block::Text(text) => {
                out.extend_from_slice(b"{\"text\":");
                json_text::write_str(out, text);
                out.extend_from_slice(b",\"type\":\"text\"}");
            }
            Block::Json(value) => json_text::write_value(out, value),
        }
    }
}

/// A text block's JSON.
fn text_block(text: String) -> Value {
    json!({ "type": "text", "text": text })
}

/// What a tool call returns: content blocks, optional structured content, and whether it is a
/// tool error (`isError`).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The content blocks (may be empty).
    pub content: Vec<Content>,
    /// Structured content (MCP 2025-06-18 on), matching the tool's output schema if it has one.
    pub structured_content: Option<Value>,
    /// The call failed in the tool (as opposed to a protocol error).
    pub is_error: bool,
}

impl ToolResult {
    /// A successful result with these blocks.
    pub fn new(content: Vec<Content>) -> ToolResult {
        ToolResult {
            content,
            structured_content: None,
            is_error: false,
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> ToolResult {
        ToolResult::new(vec![Content::text(text)])
    }

    /// A successful result with structured content, mirrored as JSON text in a text block (for
    /// clients older than 2025-06-18).
    pub fn structured(value: Value) -> ToolResult {
        ToolResult {
            content: vec![Content::text(value.to_string())],
            structured_content: Some(value),
            is_error: false,
        }
    }

    /// A tool error: `isError: true` with the message as text.
    pub fn error(message: impl Into<String>) -> ToolResult {
        ToolResult {
            content: vec![Content::text(message)],
            structured_content: None,
            is_error: true,
        }
    }

    /// The result as JSON, as `tools/call` answers it.
    pub fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert(
            "content".into(),
            Value::Array(self.content.iter().map(Content::to_value).collect()),
        );
        if let Some(structured) = &self.structured_content {
            map.insert("structuredContent".into(), structured.clone());
        }
        if self.is_error {
            map.insert("isError".into(), Value::Bool(true));
        }
        Value::Object(map)
    }

    pub(crate) fn into_value(self) -> Value {
        let mut map = Map::new();
        map.insert(
            "content".into(),
            Value::Array(self.content.into_iter().map(Content::into_value).collect()),
        );
        if let Some(structured) = self.structured_content {
            map.insert("structuredContent".into(), structured);
        }
        if self.is_error {
            map.insert("isError".into(), Value::Bool(true));
        }
        Value::Object(map)
    }

    /// Appends the result as JSON text, as `tools/call` answers it: the bytes of writing
    /// [`ToolResult::to_value`], or under MCP 2026-07-28 (`server_info` given) the bytes of
    /// that value completed by `modern_result` (`resultType` and the server's info in
    /// `_meta`), without building either value.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>, server_info: Option<&Value>) {
        // The members in the order of serde_json's map (sorted by bytes): "_meta" < "content"
        // < "isError" < "resultType" < "structuredContent". The tests compare with the
        // `Value` path for every shape.
        out.push(b'{');
        if let Some(info) = server_info {
            out.extend_from_slice(b"\"_meta\":{");
            json_text::write_str(out, SERVER_INFO_KEY);
            out.push(b':');
            json_text::write_value(out, info);
            out.extend_from_slice(b"},");
        }
        out.extend_from_slice(b"\"content\":[");
        for (i, block) in self.content.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            block.write_json(out);
        }
        out.push(b']');
        if self.is_error {
            out.extend_from_slice(b",\"isError\":true");
        }
        if server_info.is_some() {
            out.extend_from_slice(b",\"resultType\":\"complete\"");
        }
        if let Some(structured) = &self.structured_content {
            out.extend_from_slice(b",\"structuredContent\":");
            json_text::write_value(out, structured);
        }
        out.push(b'}');
    }
}

/// Why a tool call failed. Usually a tool error, answered as a result with `isError: true` and
/// the message, so the model sees it; [`ToolError::protocol`] makes a JSON-RPC error instead.
///
/// Any [`Error`] converts into one, so `cx.checkpoint()?` works in a tool: a cancelled call gets
/// no response at all, and an interrupted one an `isError` result saying why.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    message: String,
    protocol: Option<ErrorObject>,
}

impl ToolError {
    /// A tool error with this message.
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
            protocol: None,
        }
    }

    /// A protocol error: the call is answered with this JSON-RPC error, not a result.
    pub fn protocol(error: ErrorObject) -> ToolError {
        ToolError {
            message: error.message.clone(),
            protocol: Some(error),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The response a failed call gets.
    pub(crate) fn into_response(self) -> Result<Value, ErrorObject> {
        match self.protocol {
            Some(error) => Err(error),
            None => Ok(ToolResult::error(self.message).into_value()),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<Error> for ToolError {
    fn from(error: Error) -> ToolError {
        ToolError::new(error.to_string())
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> ToolError {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> ToolError {
        ToolError::new(message)
    }
}

impl From<ToolError> for ErrorObject {
    /// A tool error where a protocol error is needed (a resource or prompt handler using the
    /// argument helpers) becomes `-32602` with the message.
    fn from(error: ToolError) -> ErrorObject {
        error
            .protocol
            .unwrap_or_else(|| ErrorObject::invalid_params(error.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_without_arguments_has_an_object_schema() {
        let tool = Tool::new("t", "d").to_value();
        assert_eq!(tool["inputSchema"], json!({ "type": "object" }));
    }

    #[test]
    fn a_non_object_input_schema_becomes_an_object_schema() {
        let tool = Tool::new("t", "d").input_schema(json!(null)).to_value();
        assert_eq!(tool["inputSchema"]["type"], "object");
    }

    #[test]
    fn arguments_with_their_own_schema_join_those_of_input_schema_and_arg() {
        let tool = Tool::new("t", "d")
            .input_schema(json!({ "properties": { "a": { "type": "string" } },
                                  "required": ["a"] }))
            .arg_schema("kind", json!({ "type": "string", "enum": ["x", "y"] }))
            .optional_arg_schema(
                "tags",
                json!({ "type": "array", "items": { "type": "string" } }),
            )
            .arg("n", "integer", "a count")
            .optional_arg_schema("a", json!({ "type": "string", "default": "z" }));
        assert_eq!(
            tool.to_value()["inputSchema"],
            json!({ "type": "object",
                    "properties": {
                        "a": { "type": "string", "default": "z" },
                        "kind": { "type": "string", "enum": ["x", "y"] },
                        "tags": { "type": "array", "items": { "type": "string" } },
                        "n": { "type": "integer", "description": "a count" } },
                    "required": ["kind", "n"] })
        );
    }

    #[test]
    fn an_argument_defined_twice_keeps_the_later_definition_and_one_required_entry() {
        let schema = |tool: Tool| tool.to_value()["inputSchema"].clone();
        let twice = Tool::new("twice", "d")
            .arg("a", "string", "x")
            .arg("b", "string", "b")
            .arg("a", "integer", "y");
        assert_eq!(
            schema(twice),
            json!({ "type": "object",
                    "properties": { "a": { "type": "integer", "description": "y" },
                                    "b": { "type": "string", "description": "b" } },
                    "required": ["a", "b"] })
        );
        // Required, then optional: no longer required (and no empty list left behind).
        let relaxed = Tool::new("t", "d")
            .arg("a", "string", "x")
            .optional_arg("a", "integer", "y");
        assert_eq!(
            schema(relaxed),
            schema(Tool::new("t", "d").optional_arg("a", "integer", "y"))
        );
        // Optional, then required: listed once.
        let strict = Tool::new("t", "d")
            .optional_arg("a", "string", "x")
            .arg("b", "string", "b")
            .arg("a", "integer", "y")
            .arg("a", "integer", "z");
        assert_eq!(schema(strict)["required"], json!(["b", "a"]));
    }

    #[test]
    fn error_results_carry_is_error_and_successes_do_not() {
        assert_eq!(ToolResult::error("x").to_value()["isError"], true);
        assert!(ToolResult::text("x").to_value().get("isError").is_none());
    }

    #[test]
    fn the_task_support_read_per_call_is_what_the_fields_say() {
        let tools = [
            Tool::new("t", "d"),
            Tool::new("t", "d").task_support(TaskSupport::Optional),
            Tool::new("t", "d").task_support(TaskSupport::Required),
            Tool::new("t", "d")
                .task_support(TaskSupport::Required)
                .task_support(TaskSupport::Forbidden),
            Tool::new("t", "d").field("execution", json!({ "taskSupport": "optional" })),
            Tool::new("t", "d")
                .task_support(TaskSupport::Required)
                .field("execution", json!({ "taskSupport": "bogus" })),
            Tool::new("t", "d")
                .task_support(TaskSupport::Optional)
                .field("execution", json!(7))
                .task_support(TaskSupport::Required),
            Tool::new("t", "d")
                .field("execution", json!({}))
                .task_support(TaskSupport::Optional)
                .field("title", json!("x")),
        ];
        let expected = [
            TaskSupport::Forbidden,
            TaskSupport::Optional,
            TaskSupport::Required,
            TaskSupport::Forbidden,
            TaskSupport::Optional,
            TaskSupport::Forbidden,
            TaskSupport::Required,
            TaskSupport::Optional,
        ];
        for (tool, expected) in tools.iter().zip(expected) {
            assert_eq!(tool.task_support_level(), expected, "{tool:?}");
            assert_eq!(tool.task_support_of_fields(), expected, "{tool:?}");
        }
    }

    #[test]
    fn the_name_is_the_one_listed_and_cannot_be_changed() {
        let tool = Tool::new("add", "d")
            .field("name", json!("other"))
            .title("T");
        assert_eq!(tool.name(), "add");
        assert_eq!(tool.to_value()["name"], "add");
    }

    /// Every shape of result the direct writer must match: text (with escapes), every kind of
    /// block, annotations, structured content, `isError`, empty content.
    fn shapes() -> Vec<ToolResult> {
        let resource = ResourceContents::text("mcpipe://r", Some("text/plain"), "body");
        let mut shapes = vec![
            ToolResult::text(""),
            ToolResult::text("plain"),
            ToolResult::text("héllo 🦀\nline\t\"q\" \\ \u{1}\u{7f}\u{2028}"),
            ToolResult::new(Vec::new()),
            ToolResult::new(vec![
                Content::text("a"),
                Content::image("aGk=", "image/png"),
                Content::audio("aGk=", "audio/wav"),
                Content::resource(resource),
                Content::resource_link("mcpipe://x", "x"),
                Content::from_value(json!({ "type": "custom", "z": [1, 2.5, null] })),
                Content::text("b").with_annotations(json!({ "audience": ["user"] })),
            ]),
            ToolResult::structured(json!({ "a": 1, "b": { "c": "d" }, "_meta": {} })),
            ToolResult::error("it failed"),
        ];
        let mut both = ToolResult::structured(json!([1, "two"]));
        both.is_error = true;
        shapes.push(both);
        let mut error_only = ToolResult::error("e");
        error_only.content.clear();
        shapes.push(error_only);
        shapes
    }

    #[test]
    fn direct_json_is_the_bytes_of_the_value_path_in_the_handshake_era() {
        for result in shapes() {
            let mut direct = Vec::new();
            result.write_json(&mut direct, None);
            let by_value = serde_json::to_vec(&result.clone().into_value()).unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(by_value).unwrap()
            );
        }
    }

    #[test]
    fn direct_json_is_the_bytes_of_the_completed_value_in_2026_07_28() {
        let info = json!({ "name": "srv \"x\"", "version": "1.0", "icons": [{ "src": "a" }] });
        for result in shapes() {
            let mut direct = Vec::new();
            result.write_json(&mut direct, Some(&info));
            let mut value = result.clone().into_value();
            crate::mcp::server::modern_result(&mut value, &info, None);
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                serde_json::to_string(&value).unwrap()
            );
        }
    }

    #[test]
    fn a_text_block_equals_the_same_block_given_as_json() {
        let text = Content::text("x");
        let json = Content::from_value(json!({ "type": "text", "text": "x" }));
        assert_eq!(text, json);
        assert_eq!(text.to_value(), json.to_value());
        assert_ne!(text, Content::text("y"));
        assert_ne!(
            text,
            Content::from_value(json!({ "type": "text", "text": "y" }))
        );
    }

    #[test]
    fn structured_results_mirror_the_json_as_text() {
        let v = ToolResult::structured(json!({"a": 1})).to_value();
        assert_eq!(v["structuredContent"], json!({"a": 1}));
        assert_eq!(v["content"][0]["text"], "{\"a\":1}");
    }
}
