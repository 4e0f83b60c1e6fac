//! Resources and resource templates: how they are listed, what reading one returns, and how a
//! URI is matched against a template.

use serde_json::{json, Map, Value};

use crate::message::ErrorObject;

/// MCP's "resource not found" code (2024-11-05 to 2025-11-25).
pub(crate) use crate::protocol::RESOURCE_NOT_FOUND;

/// A resource as `resources/list` shows it: a URI, a name and any other field.
///
/// # Example
/// ```
/// use mcpipe::Resource;
/// let r = Resource::new("file:///notes.txt", "notes").mime_type("text/plain");
/// assert_eq!(r.uri(), "file:///notes.txt");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// Invariant: holds `uri` and `name`, both strings.
    fields: Map<String, Value>,
}

impl Resource {
    /// A resource with this URI and name.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Resource {
        let mut fields = Map::new();
        fields.insert("uri".into(), Value::String(uri.into()));
        fields.insert("name".into(), Value::String(name.into()));
        Resource { fields }
    }

    /// The URI.
    pub fn uri(&self) -> &str {
        self.fields["uri"].as_str().unwrap_or_default()
    }

    /// Sets the description.
    pub fn description(self, text: impl Into<String>) -> Resource {
        self.field("description", Value::String(text.into()))
    }

    /// Sets the MIME type.
    pub fn mime_type(self, mime: impl Into<String>) -> Resource {
        self.field("mimeType", Value::String(mime.into()))
    }

    /// Sets any other field (`title`, `size`, `annotations`, `icons`, `_meta`); `uri` and
    /// `name` stay as given.
    pub fn field(mut self, key: &str, value: Value) -> Resource {
        if key != "uri" && key != "name" {
            self.fields.insert(key.to_owned(), value);
        }
        self
    }

    /// The resource as JSON.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }

    /// The error a read of an unknown URI gets: `-32002` with `data.uri`.
    pub fn not_found(uri: &str) -> ErrorObject {
        ErrorObject::new(RESOURCE_NOT_FOUND, format!("resource not found: {uri}"))
            .with_data(json!({ "uri": uri }))
    }
}

/// A family of resources named by an RFC 6570 URI template, as `resources/templates/list`
/// shows it. Reads of URIs matching it go to its reader, with the template's variables.
///
/// Matching understands simple `{name}` expressions: each matches a non-empty run of
/// characters up to the literal text that follows it (and never a `/`, unless the expression
/// ends the template).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceTemplate {
    /// Invariant: holds `uriTemplate` and `name`, both strings.
    fields: Map<String, Value>,
}

impl ResourceTemplate {
    /// A template with this URI template and name.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> ResourceTemplate {
        let mut fields = Map::new();
        fields.insert("uriTemplate".into(), Value::String(uri_template.into()));
        fields.insert("name".into(), Value::String(name.into()));
        ResourceTemplate { fields }
    }

    /// The URI template.
    pub fn uri_template(&self) -> &str {
        self.fields["uriTemplate"].as_str().unwrap_or_default()
    }

    /// Sets the description.
    pub fn description(self, text: impl Into<String>) -> ResourceTemplate {
        self.field("description", Value::String(text.into()))
    }

    /// Sets the MIME type of the resources it names.
    pub fn mime_type(self, mime: impl Into<String>) -> ResourceTemplate {
        self.field("mimeType", Value::String(mime.into()))
    }

    /// Sets any other field; `uriTemplate` and `name` stay as given.
    pub fn field(mut self, key: &str, value: Value) -> ResourceTemplate {
        if key != "uriTemplate" && key != "name" {
            self.fields.insert(key.to_owned(), value);
        }
        self
    }

    /// The template as JSON.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }

    /// The variables of `uri` when it matches the template.
    ///
    /// # Example
    /// ```
    /// use mcpipe::ResourceTemplate;
    /// let t = ResourceTemplate::new("notes://{folder}/{id}", "note");
    /// let vars = t.matches("notes://work/42").unwrap();
    /// assert_eq!(vars["folder"], "work");
    /// assert_eq!(vars["id"], "42");
    /// assert!(t.matches("notes://work").is_none());
    /// ```
    pub fn matches(&self, uri: &str) -> Option<Map<String, Value>> {
        match_template(self.uri_template(), uri)
    }
}

fn match_template(template: &str, uri: &str) -> Option<Map<String, Value>> {
    let mut vars = Map::new();
    let mut rest_t = template;
    let mut rest_u = uri;
    loop {
        let Some(open) = rest_t.find('{') else {
            return (rest_t == rest_u).then_some(vars);
        };
        let literal = &rest_t[..open];
        rest_u = rest_u.strip_prefix(literal)?;
        let close = open + rest_t[open..].find('}')?;
        let name = &rest_t[open + 1..close];
        rest_t = &rest_t[close + 1..];
        let next_literal = &rest_t[..rest_t.find('{').unwrap_or(rest_t.len())];
        let value_end = if rest_t.is_empty() {
            rest_u.len()
        } else if next_literal.is_empty() {
            // Two adjacent expressions: split at the next `/` (ambiguous otherwise).
            rest_u.find('/').unwrap_or(rest_u.len())
        } else {
            rest_u.find(next_literal)?
        };
        let value = &rest_u[..value_end];
        if value.is_empty() || (!rest_t.is_empty() && value.contains('/')) {
            return None;
        }
        vars.insert(name.to_owned(), Value::String(value.to_owned()));
        rest_u = &rest_u[value_end..];
    }
}

/// One entry of a `resources/read` result (or an embedded resource): a URI, an optional MIME
/// type, and either text or a binary blob.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceContents {
    /// Invariant: holds `uri` and exactly one of `text` and `blob` (base64).
    fields: Map<String, Value>,
}

impl ResourceContents {
    /// Text contents.
    pub fn text(uri: impl Into<String>, mime_type: Option<&str>, text: impl Into<String>) -> Self {
        ResourceContents::build(uri.into(), mime_type, "text", text.into())
    }

    /// Binary contents, base64-encoded here.
    ///
    /// # Example
    /// ```
    /// use mcpipe::ResourceContents;
    /// let c = ResourceContents::blob("mem://x", Some("application/octet-stream"), b"hi!");
    /// assert_eq!(c.to_value()["blob"], "aGkh");
    /// ```
    pub fn blob(uri: impl Into<String>, mime_type: Option<&str>, bytes: &[u8]) -> Self {
        ResourceContents::build(uri.into(), mime_type, "blob", base64(bytes))
    }

    fn build(uri: String, mime_type: Option<&str>, key: &str, payload: String) -> Self {
        let mut fields = Map::new();
        fields.insert("uri".into(), Value::String(uri));
        if let Some(mime) = mime_type {
            fields.insert("mimeType".into(), Value::String(mime.to_owned()));
        }
        fields.insert(key.to_owned(), Value::String(payload));
        ResourceContents { fields }
    }

    /// The contents as JSON.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

/// Standard base64 with padding (RFC 4648), as MCP's `blob` and `data` fields want it.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn templates_match_their_variables_and_nothing_else() {
        let m = match_template("a://x/{v}", "a://x/hello world").unwrap();
        assert_eq!(m["v"], "hello world");
        assert!(match_template("a://x/{v}", "a://x/").is_none());
        assert!(match_template("a://x/{v}", "b://x/1").is_none());
        let m = match_template("a://{v}/tail", "a://one/tail").unwrap();
        assert_eq!(m["v"], "one");
        assert!(match_template("a://{v}/tail", "a://o/ne/tail").is_none());
        assert!(match_template("a://fixed", "a://fixed").unwrap().is_empty());
    }

    #[test]
    fn not_found_carries_the_uri() {
        let e = Resource::not_found("x://y");
        assert_eq!(e.code, RESOURCE_NOT_FOUND);
        assert_eq!(e.data.unwrap()["uri"], "x://y");
    }
}
