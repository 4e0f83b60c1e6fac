//! The client under test for the MCP conformance suite's *client* scenarios: a small program
//! driving `mcpipe::Client` that does what each scenario asks.
//!
//! Run: `scripts/conformance-client.sh` (it builds this example and runs the suite). By hand:
//! `conformance client --scenario tools_call --command "target/debug/examples/conformance_client
//! node interop/http_stdio_bridge.mjs"`: the suite appends its server's URL, so the arguments
//! are the stdio server command, here a Streamable-HTTP-to-stdio bridge to the suite's server.
//! The suite names the scenario in `MCP_CONFORMANCE_SCENARIO` and the revision in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` (2026-07-28 selects the modern era).
//!
//! Exit status 0 when every step the scenario asks for went through, 1 otherwise (the suite
//! judges the checks; the status only tells it the client did not crash).

use std::process::ExitCode;
use std::time::Duration;

use mcpipe::{Client, Era, Error, ErrorObject};
use serde_json::{json, Map, Value};

const MODERN: &str = "2026-07-28";

/// The scenarios this client knows; any other is refused (the suite then reports it).
const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "request-metadata",
    "sep-2322-client-request-state",
    "json-schema-2020-12-preservation",
    "json-schema-ref-no-deref",
];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO")
        .map_err(|_| String::from("MCP_CONFORMANCE_SCENARIO is not set"))?;
    if !SCENARIOS.contains(&scenario.as_str()) {
        return Err(format!("unknown scenario {scenario}"));
    }
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    let server: Vec<String> = std::env::args().skip(1).collect();
    let (program, args) = server
        .split_first()
        .ok_or("usage: conformance_client SERVER_COMMAND [ARGS...] (the URL comes last)")?;
    let mut builder = Client::builder(program)
        .args(args)
        .timeout(Duration::from_secs(10))
        .on_elicitation(accept_with_defaults)
        .on_sampling(|_| {
            Ok(json!({
                "role": "assistant",
                "content": { "type": "text", "text": "sampled" },
                "model": "conformance-client",
            }))
        })
        .root("file:///tmp/conformance", Some("conformance"));
    builder = if version == MODERN {
        builder.era(Era::Modern)
    } else {
        let builder = builder.era(Era::Legacy);
        match version.as_str() {
            "" => builder,
            v => builder.protocol_version(v),
        }
    };
    let mut client = builder.spawn().map_err(|e| format!("connecting: {e}"))?;
    let outcome = drive(&mut client, &scenario).map_err(|e| format!("{scenario}: {e}"));
    client.close();
    outcome
}

/// What each scenario asks of a client once it is connected.
fn drive(client: &mut Client, scenario: &str) -> Result<(), Error> {
    match scenario {
        "tools_call" => {
            client.list_tools()?;
            client.call_tool("add_numbers", json!({ "a": 5, "b": 3 }))?;
        }
        "elicitation-sep1034-client-defaults" => {
            client.list_tools()?;
            client.call_tool("test_client_elicitation_defaults", json!({}))?;
        }
        "sep-2322-client-request-state" => {
            client.list_tools()?;
            for tool in [
                "test_mrtr_echo_state",
                "test_mrtr_no_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_result_type",
            ] {
                client.call_tool(tool, json!({}))?;
            }
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.list_tools()?;
            let focal = tools
                .iter()
                .find(|t| t["name"] == "json_schema_2020_12_tool")
                .map(|t| t["inputSchema"].clone())
                .unwrap_or(Value::Null);
            client.call_tool("json_schema_echo", json!({ "schema": focal }))?;
        }
        // The handshake and a listing: the metadata checks look at every request.
        "initialize" | "request-metadata" | "json-schema-ref-no-deref" => {
            client.list_tools()?;
        }
        _ => {}
    }
    Ok(())
}

/// Accepts an elicitation with every field's schema default (SEP-1034), and `true` for a
/// boolean without one, so a form the client cannot show still gets a complete answer.
fn accept_with_defaults(params: &Value) -> Result<Value, ErrorObject> {
    let mut content = Map::new();
    if let Some(properties) = params["requestedSchema"]["properties"].as_object() {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            } else if property["type"] == "boolean" {
                content.insert(name.clone(), Value::Bool(true));
            }
        }
    }
    Ok(json!({ "action": "accept", "content": content }))
}
