//! Prompts: how one is described and the messages getting it returns.

use serde_json::{json, Map, Value};

use crate::mcp::tool::Content;

/// A prompt as `prompts/list` shows it: a name, a description and its arguments.
///
/// # Example
/// ```
/// use mcpipe::Prompt;
/// let p = Prompt::new("greet", "Greets someone").argument("name", "Who to greet", true);
/// assert_eq!(p.to_value()["arguments"][0]["required"], true);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// Invariant: holds `name` (a string) and `arguments` (an array of objects with a `name`).
    fields: Map<String, Value>,
}

impl Prompt {
    /// A prompt without arguments.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Prompt {
        let mut fields = Map::new();
        fields.insert("name".into(), Value::String(name.into()));
        fields.insert("description".into(), Value::String(description.into()));
        fields.insert("arguments".into(), Value::Array(Vec::new()));
        Prompt { fields }
    }

    /// The prompt's name.
    pub fn name(&self) -> &str {
        self.fields["name"].as_str().unwrap_or_default()
    }

    /// Adds an argument. A required one missing from `prompts/get` gets `-32602`.
    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Prompt {
        if let Some(Value::Array(list)) = self.fields.get_mut("arguments") {
            list.push(json!({ "name": name, "description": description, "required": required }));
        }
        self
    }

    /// Sets any other field (`title`, `icons`, `_meta`).
    pub fn field(mut self, key: &str, value: Value) -> Prompt {
        if key != "name" && key != "arguments" {
            self.fields.insert(key.to_owned(), value);
        }
        self
    }

    /// Names of the required arguments.
    pub(crate) fn required_arguments(&self) -> impl Iterator<Item = &str> {
        self.fields["arguments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["required"] == Value::Bool(true))
            .filter_map(|a| a["name"].as_str())
    }

    /// The description, if any.
    pub(crate) fn description_value(&self) -> Option<&Value> {
        self.fields.get("description")
    }

    /// The prompt as JSON.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

/// One message of a prompt: a role and one content block.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    /// `"user"` or `"assistant"`.
    pub role: &'static str,
    /// The content block.
    pub content: Content,
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: Content) -> PromptMessage {
        PromptMessage {
            role: "user",
            content,
        }
    }

    /// A message from the assistant.
    pub fn assistant(content: Content) -> PromptMessage {
        PromptMessage {
            role: "assistant",
            content,
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        json!({ "role": self.role, "content": self.content.to_value() })
    }
}
