//! MCP 2026-07-28 (stateless, per-request `_meta`) against `mcpipe demo` and
//! `mcpipe demo --conformance` over pipes: discovery, envelope checks and every error code,
//! `resultType` and caching hints, multi-round-trip `input_required` (tampered, multi-round,
//! several inputs), logging per request, `subscriptions/listen`, and how a process that ran
//! the handshake treats later requests. Every wait is bounded (see `mcp_util`).

mod util;

use serde_json::{json, Value};
use util::mcp::{text, Proc};

const V: &str = "2026-07-28";

/// The per-request `_meta` of a 2026-07-28 client with these capabilities.
fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "mcpipe-tests", "version": "0" }
    })
}

/// `params` plus the full envelope (all input capabilities declared).
fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta(json!({ "sampling": {}, "elicitation": {}, "roots": {} }));
    params
}

fn conformance() -> Proc {
    Proc::demo(&["--conformance"])
}

fn call(proc: &mut Proc, id: i64, tool: &str, extra: Value) -> Value {
    let mut params = with_meta(json!({ "name": tool, "arguments": {} }));
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            params[k] = v;
        }
    }
    proc.request(id, "tools/call", params);
    proc.response(id)
}

fn accept(content: Value) -> Value {
    json!({ "action": "accept", "content": content })
}

#[test]
fn discover_lists_the_modern_version_capabilities_and_server_info() {
    let mut demo = Proc::demo(&[]);
    demo.request(1, "server/discover", with_meta(json!({})));
    let result = demo.result(1);
    assert_eq!(result["supportedVersions"], json!([V]));
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].as_u64().is_some(), "{result}");
    assert!(
        ["public", "private"].contains(&result["cacheScope"].as_str().unwrap()),
        "{result}"
    );
    for key in ["tools", "resources", "prompts"] {
        assert!(result["capabilities"][key].is_object(), "{result}");
    }
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "mcpipe-demo");
    assert!(info["version"].is_string());
    assert!(result["instructions"].is_string());
}

#[test]
fn the_envelope_is_checked_field_by_field() {
    let mut demo = Proc::demo(&[]);
    // No _meta at all: neither era.
    demo.request(1, "tools/list", json!({}));
    assert_eq!(demo.error_code(1), -32602);
    // _meta without the version.
    demo.request(
        2,
        "server/discover",
        json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities": {} } }),
    );
    assert_eq!(demo.error_code(2), -32602);
    // The version without capabilities.
    demo.request(
        3,
        "server/discover",
        json!({ "_meta": { "io.modelcontextprotocol/protocolVersion": V } }),
    );
    assert_eq!(demo.error_code(3), -32602);
    // An unknown version: -32022 naming what is supported and echoing what was asked.
    let mut params = with_meta(json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    demo.request(4, "server/discover", params);
    let response = demo.response(4);
    assert_eq!(response["error"]["code"], -32022, "{response}");
    assert_eq!(response["error"]["data"]["supported"], json!([V]));
    assert_eq!(response["error"]["data"]["requested"], "v999.0.0");
    // A handshake-era version is not a per-request version.
    let mut params = with_meta(json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    demo.request(5, "tools/list", params);
    assert_eq!(demo.error_code(5), -32022);
    // clientInfo is optional.
    let mut params = with_meta(json!({}));
    params["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    demo.request(6, "tools/list", params);
    assert!(demo.result(6)["tools"].is_array());
    // A log level that is not one.
    let mut params = with_meta(json!({}));
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("loud");
    demo.request(7, "tools/list", params);
    assert_eq!(demo.error_code(7), -32602);
}

#[test]
fn removed_and_unknown_methods_are_method_not_found() {
    let mut demo = conformance();
    for (id, method) in [
        (1, "initialize"),
        (2, "ping"),
        (3, "logging/setLevel"),
        (4, "resources/subscribe"),
        (5, "resources/unsubscribe"),
        (6, "unknown/method"),
    ] {
        demo.request(
            id,
            method,
            with_meta(json!({ "uri": "test://static-text" })),
        );
        assert_eq!(demo.error_code(id), -32601, "{method}");
    }
    // The process is still stateless afterwards: no handshake happened.
    demo.request(7, "tools/list", with_meta(json!({})));
    assert_eq!(demo.result(7)["resultType"], "complete");
}

#[test]
fn every_result_has_a_result_type_and_lists_and_reads_have_caching_hints() {
    let mut demo = conformance();
    let cacheable = [
        ("tools/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({ "uri": "test://static-text" })),
    ];
    for (i, (method, params)) in cacheable.into_iter().enumerate() {
        let id = i as i64 + 1;
        demo.request(id, method, with_meta(params));
        let result = demo.result(id);
        assert_eq!(result["resultType"], "complete", "{method}: {result}");
        assert!(result["ttlMs"].is_u64(), "{method}: {result}");
        assert!(result["cacheScope"].is_string(), "{method}: {result}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpipe-conformance",
            "{method}"
        );
    }
    let result = call(&mut demo, 10, "test_simple_text", json!({}))["result"].clone();
    assert_eq!(result["resultType"], "complete");
    assert!(result.get("ttlMs").is_none(), "{result}");
    assert_eq!(text(&result), "This is a simple text response for testing.");
    demo.request(
        11,
        "completion/complete",
        with_meta(json!({
            "ref": { "type": "ref/prompt", "name": "test_prompt_with_arguments" },
            "argument": { "name": "arg1", "value": "test" }
        })),
    );
    let result = demo.result(11);
    assert_eq!(result["resultType"], "complete");
    assert!(result["completion"]["values"].as_array().unwrap().len() >= 2);
}

#[test]
fn a_missing_resource_is_invalid_params_with_the_uri_under_2026_and_32002_before() {
    let uri = "test://nonexistent-resource-for-conformance-testing";
    let mut modern = conformance();
    modern.request(1, "resources/read", with_meta(json!({ "uri": uri })));
    let response = modern.response(1);
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert_eq!(response["error"]["data"]["uri"], uri);

    let mut legacy = conformance();
    legacy.initialize();
    legacy.request(1, "resources/read", json!({ "uri": uri }));
    let response = legacy.response(1);
    assert_eq!(response["error"]["code"], -32002, "{response}");
    assert_eq!(response["error"]["data"]["uri"], uri);
}

#[test]
fn an_elicitation_round_trip_returns_input_required_then_the_result() {
    let mut demo = conformance();
    let first = call(
        &mut demo,
        1,
        "test_input_required_result_elicitation",
        json!({}),
    )["result"]
        .clone();
    assert_eq!(first["resultType"], "input_required", "{first}");
    let asked = &first["inputRequests"]["user_name"];
    assert_eq!(asked["method"], "elicitation/create");
    assert!(asked["params"]["requestedSchema"].is_object());
    let state = first["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    assert!(first["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    // No request went to the client: the next line on stdout is the retry's answer.
    let second = call(
        &mut demo,
        2,
        "test_input_required_result_elicitation",
        json!({
            "inputResponses": { "user_name": accept(json!({ "name": "Alice" })) },
            "requestState": state
        }),
    );
    let result = &second["result"];
    assert_eq!(result["resultType"], "complete", "{second}");
    assert_eq!(text(result), "Hello, Alice!");
}

#[test]
fn a_tampered_or_foreign_request_state_is_invalid_params() {
    let mut demo = conformance();
    let first = call(
        &mut demo,
        1,
        "test_input_required_result_tampered_state",
        json!({}),
    )["result"]
        .clone();
    let state = first["requestState"].as_str().unwrap().to_owned();
    let answers = json!({ "confirm": accept(json!({ "ok": true })) });
    let tampered = [
        format!("{state}-TAMPERED"),
        state.replace("\"round\":1", "\"round\":7"),
        "mcpipe1.00000000000000000000000000000000.{\"answers\":{},\"round\":1}".to_owned(),
        "not a state".to_owned(),
    ];
    for (i, bad) in tampered.iter().enumerate() {
        let id = 10 + i as i64;
        let response = call(
            &mut demo,
            id,
            "test_input_required_result_tampered_state",
            json!({ "inputResponses": answers, "requestState": bad }),
        );
        assert_eq!(response["error"]["code"], -32602, "{bad}: {response}");
    }
    // A state made for one tool does not open another's call.
    let response = call(
        &mut demo,
        20,
        "test_input_required_result_request_state",
        json!({ "inputResponses": answers, "requestState": state }),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
    // The genuine one works, and the tool sees the state it saved.
    let response = call(
        &mut demo,
        21,
        "test_input_required_result_tampered_state",
        json!({ "inputResponses": answers, "requestState": state }),
    );
    assert!(
        text(&response["result"]).starts_with("state-ok"),
        "{response}"
    );
    // A state from another process (another key) is rejected too.
    let mut other = conformance();
    let response = call(
        &mut other,
        1,
        "test_input_required_result_tampered_state",
        json!({ "inputResponses": answers, "requestState": state }),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
}

#[test]
fn several_rounds_carry_earlier_answers_in_the_request_state() {
    let mut demo = conformance();
    let tool = "test_input_required_result_multi_round";
    let r1 = call(&mut demo, 1, tool, json!({}))["result"].clone();
    assert!(r1["inputRequests"]["step1"].is_object(), "{r1}");
    let r2 = call(
        &mut demo,
        2,
        tool,
        json!({
            "inputResponses": { "step1": accept(json!({ "name": "Ada" })) },
            "requestState": r1["requestState"]
        }),
    )["result"]
        .clone();
    assert_eq!(r2["resultType"], "input_required", "{r2}");
    assert!(r2["inputRequests"]["step2"].is_object(), "{r2}");
    assert!(r2["inputRequests"].get("step1").is_none(), "{r2}");
    assert_ne!(r2["requestState"], r1["requestState"]);
    // Only step2's answer comes with the last retry; step1's travels in the state.
    let r3 = call(
        &mut demo,
        3,
        tool,
        json!({
            "inputResponses": { "step2": accept(json!({ "color": "green" })) },
            "requestState": r2["requestState"]
        }),
    )["result"]
        .clone();
    assert_eq!(r3["resultType"], "complete", "{r3}");
    assert_eq!(text(&r3), "Ada likes green");
}

#[test]
fn several_inputs_are_asked_in_one_round_and_extra_answers_are_ignored() {
    let mut demo = conformance();
    let tool = "test_input_required_result_multiple_inputs";
    let first = call(&mut demo, 1, tool, json!({}))["result"].clone();
    let asked = first["inputRequests"].as_object().unwrap();
    let methods: Vec<&str> = asked
        .values()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(asked.len(), 3, "{first}");
    for m in ["elicitation/create", "sampling/createMessage", "roots/list"] {
        assert!(methods.contains(&m), "{first}");
    }
    assert_eq!(first["inputRequests"]["client_roots"]["params"], json!({}));
    let result = call(
        &mut demo,
        2,
        tool,
        json!({
            "inputResponses": {
                "user_name": accept(json!({ "name": "Ada" })),
                "greeting": {
                    "role": "assistant",
                    "content": { "type": "text", "text": "Hi!" },
                    "model": "m"
                },
                "client_roots": { "roots": [{ "uri": "file:///work", "name": "work" }] },
                "unrelated": { "action": "decline" }
            },
            "requestState": first["requestState"]
        }),
    )["result"]
        .clone();
    assert_eq!(
        text(&result),
        "name=Ada, greeting=Hi!, roots=file:///work",
        "{result}"
    );
}

#[test]
fn missing_or_malformed_input_responses_are_asked_again_or_rejected() {
    let mut demo = conformance();
    let tool = "test_input_required_result_elicitation";
    // The wrong key: asked again, not an error.
    let again = call(
        &mut demo,
        1,
        tool,
        json!({ "inputResponses": { "wrong_key": accept(json!({})) } }),
    )["result"]
        .clone();
    assert_eq!(again["resultType"], "input_required", "{again}");
    // Without requestState but with the right answer: served (answers come from the client).
    let done = call(
        &mut demo,
        2,
        tool,
        json!({ "inputResponses": { "user_name": accept(json!({ "name": "Bo" })) } }),
    );
    assert_eq!(text(&done["result"]), "Hello, Bo!");
    for (id, bad) in [
        (3, json!({ "inputResponses": { "user_name": 12345 } })),
        (4, json!({ "inputResponses": null })),
        (5, json!({ "inputResponses": [] })),
        (6, json!({ "requestState": 5 })),
    ] {
        let response = call(&mut demo, id, tool, bad.clone());
        assert_eq!(response["error"]["code"], -32602, "{bad}: {response}");
    }
}

#[test]
fn only_declared_capabilities_are_asked_for_and_a_missing_one_is_32021() {
    let mut demo = conformance();
    let mut params = json!({ "name": "test_input_required_result_capabilities", "arguments": {} });
    params["_meta"] = meta(json!({ "sampling": {} }));
    demo.request(1, "tools/call", params);
    let result = demo.result(1);
    let asked = result["inputRequests"].as_object().unwrap();
    assert_eq!(asked.len(), 1, "{result}");
    assert!(asked
        .values()
        .all(|r| r["method"] == "sampling/createMessage"));

    let mut params = json!({ "name": "test_missing_capability", "arguments": {} });
    params["_meta"] = meta(json!({}));
    demo.request(2, "tools/call", params);
    let response = demo.response(2);
    assert_eq!(response["error"]["code"], -32021, "{response}");
    assert_eq!(
        response["error"]["data"]["requiredCapabilities"],
        json!({ "sampling": {} })
    );
    // With the capability, the same tool asks for its input instead.
    let result = call(&mut demo, 3, "test_missing_capability", json!({}))["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
}

#[test]
fn a_prompt_can_need_input_too_and_list_methods_never_do() {
    let mut demo = conformance();
    demo.request(
        1,
        "prompts/get",
        with_meta(json!({ "name": "test_input_required_result_prompt" })),
    );
    let first = demo.result(1);
    assert_eq!(first["resultType"], "input_required", "{first}");
    demo.request(
        2,
        "prompts/get",
        with_meta(json!({
            "name": "test_input_required_result_prompt",
            "inputResponses": { "user_context": accept(json!({ "context": "tests" })) },
            "requestState": first["requestState"]
        })),
    );
    let second = demo.result(2);
    assert_eq!(second["resultType"], "complete");
    assert!(second["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("tests"));
    for (id, method) in [(3, "tools/list"), (4, "prompts/list")] {
        demo.request(id, method, with_meta(json!({})));
        assert_eq!(demo.result(id)["resultType"], "complete");
    }
}

#[test]
fn logs_are_sent_only_when_the_request_asks_for_a_level() {
    let mut demo = conformance();
    demo.request(
        1,
        "tools/call",
        with_meta(json!({ "name": "test_logging_tool", "arguments": {} })),
    );
    let (before, response) = demo.until_response(1);
    assert!(response["result"].is_object());
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "notifications/message"),
        "{before:?}"
    );
    let mut params = with_meta(json!({ "name": "test_logging_tool", "arguments": {} }));
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    demo.request(2, "tools/call", params);
    let (before, _) = demo.until_response(2);
    let logs = before
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 3, "{before:?}");
    let mut params = with_meta(json!({ "name": "test_logging_tool", "arguments": {} }));
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("error");
    demo.request(3, "tools/call", params);
    let (before, _) = demo.until_response(3);
    assert!(before.is_empty(), "{before:?}");
}

#[test]
fn progress_works_per_request() {
    let mut demo = conformance();
    let mut params = with_meta(json!({ "name": "test_tool_with_progress", "arguments": {} }));
    params["_meta"]["progressToken"] = json!("p-1");
    demo.request(1, "tools/call", params);
    let (before, response) = demo.until_response(1);
    assert_eq!(response["result"]["resultType"], "complete");
    let tokens: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progressToken"])
        .collect();
    assert_eq!(tokens.len(), 3, "{before:?}");
    assert!(tokens.iter().all(|t| **t == json!("p-1")));
}

#[test]
fn a_listen_stream_is_acknowledged_tagged_filtered_and_ended_at_shutdown() {
    let mut demo = conformance();
    // `resources.subscribe` is still a 2026-07-28 capability (schema: ServerCapabilities): it
    // now announces `resourceSubscriptions` on this stream, which is honoured below.
    demo.request(9, "server/discover", with_meta(json!({})));
    let caps = demo.result(9)["capabilities"].clone();
    assert_eq!(caps["resources"]["subscribe"], true, "{caps}");
    demo.request(
        1,
        "subscriptions/listen",
        with_meta(json!({ "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["test://watched-resource"] } })),
    );
    let ack = demo.next();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!(["test://watched-resource"])
    );
    // A second stream that wants only prompts.
    demo.request(
        2,
        "subscriptions/listen",
        with_meta(json!({ "notifications": { "promptsListChanged": true } })),
    );
    assert_eq!(
        demo.next()["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        2
    );
    // A change reaches the stream that asked for it, tagged, before the trigger's result.
    let mut params = with_meta(json!({ "name": "test_trigger_tool_change", "arguments": {} }));
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    demo.request(3, "tools/call", params);
    let (before, response) = demo.until_response(3);
    assert!(response["result"].is_object());
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["method"], "notifications/tools/list_changed");
    assert_eq!(
        before[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    demo.request(
        4,
        "tools/call",
        with_meta(json!({ "name": "test_trigger_prompt_change", "arguments": {} })),
    );
    let (before, _) = demo.until_response(4);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["method"], "notifications/prompts/list_changed");
    assert_eq!(
        before[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        2
    );
    // Cancelling stream 2 closes it without a response.
    demo.cancel(2);
    demo.request(
        5,
        "tools/call",
        with_meta(json!({ "name": "test_trigger_prompt_change", "arguments": {} })),
    );
    let (before, _) = demo.until_response(5);
    assert!(before.is_empty(), "{before:?}");
    // At end of input the open stream gets its (only) response.
    demo.close_stdin();
    let end = demo.next();
    assert_eq!(end["id"], 1, "{end}");
    assert_eq!(end["result"]["resultType"], "complete");
    assert_eq!(
        end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    assert_eq!(demo.wait_exit(), Some(0));
}

#[test]
fn after_initialize_a_process_stays_in_the_handshake_era() {
    let mut demo = conformance();
    // Modern requests first (a dual-era client probing), then the handshake.
    demo.request(1, "server/discover", with_meta(json!({})));
    assert!(demo.result(1)["supportedVersions"].is_array());
    let init = demo.initialize_with("2025-11-25", json!({ "elicitation": {} }));
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert!(init["capabilities"]["completions"].is_object());
    // `_meta`-bearing requests are now served under the negotiated version: no resultType,
    // no caching hints, and inputs are asked for live.
    demo.request(2, "tools/list", with_meta(json!({})));
    let result = demo.result(2);
    assert!(result.get("resultType").is_none(), "{result}");
    assert!(result.get("ttlMs").is_none(), "{result}");
    demo.request(3, "server/discover", with_meta(json!({})));
    assert_eq!(demo.error_code(3), -32601);
    demo.request(
        4,
        "tools/call",
        with_meta(json!({ "name": "test_input_required_result_elicitation", "arguments": {} })),
    );
    let asked = demo.next();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    demo.send(&json!({
        "jsonrpc": "2.0",
        "id": asked["id"],
        "result": accept(json!({ "name": "Live" }))
    }));
    let result = demo.result(4);
    assert_eq!(text(&result), "Hello, Live!");
    assert!(result.get("resultType").is_none());
}

#[test]
fn the_handshake_era_is_unchanged_for_the_conformance_fixtures() {
    let mut demo = conformance();
    let init = demo.initialize_with("2025-11-25", json!({ "sampling": {} }));
    let caps = &init["capabilities"];
    assert_eq!(caps["tools"]["listChanged"], true);
    assert_eq!(caps["resources"]["subscribe"], true);
    demo.request(
        1,
        "resources/subscribe",
        json!({ "uri": "test://watched-resource" }),
    );
    assert_eq!(demo.result(1), json!({}));
    demo.request(
        2,
        "resources/unsubscribe",
        json!({ "uri": "test://watched-resource" }),
    );
    assert_eq!(demo.result(2), json!({}));
    // A tool that needs a capability the client lacks: an isError result, as before.
    demo.call(3, "test_input_required_result_elicitation", json!({}));
    let result = demo.result(3);
    assert_eq!(result["isError"], true, "{result}");
    // Sampling is asked live.
    demo.call(4, "test_sampling", json!({ "prompt": "2+2?" }));
    let asked = demo.next();
    assert_eq!(asked["method"], "sampling/createMessage");
    demo.send(&json!({
        "jsonrpc": "2.0",
        "id": asked["id"],
        "result": { "role": "assistant", "content": { "type": "text", "text": "4" }, "model": "m" }
    }));
    assert_eq!(text(&demo.result(4)), "LLM response: 4");
    // A legacy list change notification, no subscription id.
    demo.call(5, "test_trigger_tool_change", json!({}));
    let (before, _) = demo.until_response(5);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0]["method"], "notifications/tools/list_changed");
    assert!(before[0].get("params").is_none());
}

#[test]
fn the_plain_demo_speaks_2026_with_the_same_tools() {
    let mut demo = Proc::demo(&[]);
    demo.request(
        1,
        "tools/call",
        with_meta(json!({ "name": "echo", "arguments": { "text": "hi" } })),
    );
    let result = demo.result(1);
    assert_eq!(text(&result), "hi");
    assert_eq!(result["resultType"], "complete");
    demo.request(
        2,
        "tools/call",
        with_meta(json!({ "name": "fail", "arguments": { "message": "x" } })),
    );
    let result = demo.result(2);
    assert_eq!(result["isError"], true);
    assert_eq!(result["resultType"], "complete");
    demo.request(
        3,
        "resources/read",
        with_meta(json!({ "uri": "mcpipe://demo/readme" })),
    );
    assert!(demo.result(3)["contents"][0]["text"].is_string());
    // The plain demo declares no change notifications: no listen.
    demo.request(
        4,
        "subscriptions/listen",
        with_meta(json!({ "notifications": {} })),
    );
    assert_eq!(demo.error_code(4), -32601);
}
