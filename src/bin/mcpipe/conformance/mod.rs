//! `mcpipe demo --conformance`: the fixtures the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server mode) calls by name, at 2025-11-25 (handshake
//! era) and at 2026-07-28 (stateless, input-required results).
//!
//! The contract (names, arguments, what each must return) was read from the suite's scenario
//! sources; `shared/CONFORMANCE-FIXTURES.md` summarises it. Every fixture is written once
//! against the crate's API and served in both eras by the MCP layer: the tools that ask the
//! client something use `McpContext::input` (or `elicit` / `create_message` / `list_roots`),
//! which sends a request and waits in the handshake era and ends the round with an
//! `input_required` result under 2026-07-28.
//!
//! One module per group of fixtures: `tools` (the 2025-11-25 tool scenarios), `modern` (the
//! 2026-07-28 stateless and input-required scenarios), `catalog` (resources and prompts) and
//! `tasks` (the `tasks-*` scenarios of the tasks extension, which 2025-11-25 clients can call
//! as tasks too).

mod catalog;
mod modern;
mod tasks;
mod tools;

use std::time::Duration;

use mcpipe::{LogLevel, McpContext, McpServer, ToolError, ToolResult};
use serde_json::{json, Value};

/// A 1×1 RGBA PNG (made for these fixtures).
const PNG: [u8; 70] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf0, 0x9a, 0x70, 0xf3,
    0x3f, 0x00, 0x05, 0x8e, 0x02, 0xb3, 0x22, 0x8b, 0xca, 0x3e, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];
/// A complete WAV file: 8 kHz mono 16-bit, one silent sample (made for these fixtures).
const WAV: [u8; 46] = [
    0x52, 0x49, 0x46, 0x46, 0x26, 0x00, 0x00, 0x00, 0x57, 0x41, 0x56, 0x45, 0x66, 0x6d, 0x74, 0x20,
    0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x40, 0x1f, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00,
    0x02, 0x00, 0x10, 0x00, 0x64, 0x61, 0x74, 0x61, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// How long a handshake-era request to the client may take (the suite's client answers at once;
/// its own per-request timeout is 60 s).
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause between the notifications of the logging and progress fixtures.
const STEP: Duration = Duration::from_millis(50);

/// The conformance profile's state: nothing but a counter of list changes announced.
#[derive(Debug, Default)]
pub(crate) struct Fixtures {
    changes: u64,
}

fn text_schema(property: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { property: { "type": "string", "description": description } },
        "required": [property]
    })
}

/// An elicitation asking for one field.
fn elicitation(message: &str, property: &str, kind: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { property: { "type": kind } },
            "required": [property]
        }
    })
}

/// A sampling request with one user message.
fn sampling(prompt: &str, max_tokens: u64) -> Value {
    json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": max_tokens
    })
}

/// The text of a sampling answer (`CreateMessageResult.content`, a block or a list of them).
fn sampled_text(answer: &Value) -> String {
    let content = &answer["content"];
    let block = if content.is_array() {
        &content[0]
    } else {
        content
    };
    block["text"].as_str().unwrap_or_default().to_owned()
}

/// A field of an accepted elicitation, or a word saying why there is none.
fn elicited(answer: &Value, field: &str) -> String {
    match answer["action"].as_str() {
        Some("accept") => match &answer["content"][field] {
            Value::String(s) => s.clone(),
            Value::Null => format!("(no {field})"),
            other => other.to_string(),
        },
        Some(action) => format!("({action})"),
        None => "(no action)".to_owned(),
    }
}

/// The roots of a `ListRootsResult`, as a comma-separated list of URIs.
fn root_uris(answer: &Value) -> String {
    let uris: Vec<&str> = answer["roots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    if uris.is_empty() {
        "(none)".to_owned()
    } else {
        uris.join(", ")
    }
}

/// The JSON Schema 2020-12 input schema of `json_schema_2020_12_tool`, with the keywords both
/// suite lines look for (`$schema`, `$defs`, `$anchor`, `additionalProperties`, `allOf`,
/// `anyOf`, `if`/`then`/`else`).
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "address",
                "type": "object",
                "properties": {
                    "street": { "type": "string" },
                    "city": { "type": "string" }
                }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

fn sep1034_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "description": "Your name", "default": "John Doe" },
            "age": { "type": "integer", "description": "Your age", "default": 30 },
            "score": { "type": "number", "description": "A score", "default": 95.5 },
            "status": {
                "type": "string",
                "description": "Account status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": { "type": "boolean", "description": "Verified?", "default": true }
        },
        "required": []
    })
}

fn sep1330_schema() -> Value {
    let titled = |values: [(&str, &str); 3]| -> Value {
        values
            .iter()
            .map(|(v, t)| json!({ "const": v, "title": t }))
            .collect()
    };
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Pick one",
                "enum": ["option1", "option2", "option3"]
            },
            "titledSingle": {
                "type": "string",
                "description": "Pick one (titled)",
                "oneOf": titled([("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")])
            },
            "legacyEnum": {
                "type": "string",
                "description": "Pick one (enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {
                "type": "array",
                "description": "Pick some",
                "minItems": 1,
                "maxItems": 3,
                "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
            },
            "titledMulti": {
                "type": "array",
                "description": "Pick some (titled)",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": titled([("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")])
                }
            }
        },
        "required": []
    })
}

/// An elicitation with a given schema, reported as `Elicitation completed: ...`.
fn elicit_schema(
    cx: &mut McpContext<'_>,
    key: &str,
    message: &str,
    schema: Value,
) -> Result<ToolResult, ToolError> {
    let answer = cx.input(
        key,
        "elicitation/create",
        json!({ "message": message, "requestedSchema": schema }),
        ASK_TIMEOUT,
    )?;
    Ok(ToolResult::text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").unwrap_or(&Value::Null)
    )))
}

/// Three log messages, ~50 ms apart (sent only as the client asked: `logging/setLevel`, or the
/// request's `_meta` logLevel under 2026-07-28).
fn three_logs(cx: &mut McpContext<'_>, logger: &str) -> Result<ToolResult, ToolError> {
    for (i, text) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            cx.sleep(STEP)?;
        }
        cx.log(LogLevel::Info, Some(logger), json!(text))?;
    }
    Ok(ToolResult::text("Logging test completed"))
}

/// Completion values for the arguments of `test_prompt_with_arguments` (and any other).
const SUGGESTIONS: [&str; 4] = ["test", "testValue1", "testValue2", "other"];

/// The conformance profile: every fixture of both suite lines.
pub(crate) fn server() -> McpServer<Fixtures> {
    let server = McpServer::new(
        "mcpipe-conformance",
        env!("CARGO_PKG_VERSION"),
        Fixtures::default(),
    )
    .instructions("The fixtures of the official MCP conformance suite (mcpipe demo --conformance).")
    .change_notifications()
    .completion(|_, _reference, _argument, value, _| {
        Ok(SUGGESTIONS
            .iter()
            .filter(|s| s.starts_with(value))
            .map(|s| (*s).to_owned())
            .collect())
    });
    let server = tasks::tools(modern::tools(tools::tools(server)));
    catalog::prompts(catalog::resources(server))
}
