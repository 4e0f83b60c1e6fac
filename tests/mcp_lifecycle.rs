//! The MCP lifecycle against `mcpipe demo`: version negotiation, capabilities, requests before
//! `initialize`, a second `initialize`, ping, logging levels, batches by version.

mod util;

use serde_json::json;
use util::mcp::Proc;

#[test]
fn initialize_echoes_every_supported_version() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut demo = Proc::demo(&[]);
        let result = demo.initialize_with(version, json!({}));
        assert_eq!(result["protocolVersion"], version);
        assert_eq!(result["serverInfo"]["name"], "mcpipe-demo");
        assert!(result["serverInfo"]["version"].is_string());
        assert!(result["instructions"].is_string());
        demo.request(1, "ping", json!({}));
        assert_eq!(demo.result(1), json!({}));
    }
}

#[test]
fn initialize_with_an_unknown_version_offers_the_latest() {
    for version in ["1999-01-01", "2026-07-28", ""] {
        let mut demo = Proc::demo(&[]);
        let result = demo.initialize_with(version, json!({}));
        assert_eq!(result["protocolVersion"], "2025-11-25");
    }
}

#[test]
fn capabilities_list_what_is_registered() {
    let mut demo = Proc::demo(&[]);
    let caps = demo.initialize()["capabilities"].clone();
    for key in ["tools", "resources", "prompts", "logging"] {
        assert!(
            caps.get(key).is_some_and(|v| v.is_object()),
            "{key} in {caps}"
        );
    }
    assert!(caps.get("completions").is_none());
    demo.request(1, "completion/complete", json!({}));
    assert_eq!(demo.error_code(1), -32601);
}

#[test]
fn initialize_without_a_version_is_invalid_params() {
    let mut demo = Proc::demo(&[]);
    demo.request(0, "initialize", json!({ "capabilities": {} }));
    assert_eq!(demo.error_code(0), -32602);
    // The session is still open for a proper initialize.
    assert_eq!(demo.initialize()["protocolVersion"], "2025-11-25");
}

#[test]
fn requests_before_initialize_get_a_clear_error_but_ping_is_answered() {
    let mut demo = Proc::demo(&[]);
    demo.request(1, "ping", json!({}));
    assert_eq!(demo.result(1), json!({}));
    // Neither a handshake nor the per-request `_meta` of 2026-07-28: invalid params, with a
    // message that names both ways in.
    demo.request(2, "tools/list", json!({}));
    let response = demo.response(2);
    assert_eq!(response["error"]["code"], -32602);
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("initialize"), "{message}");
    assert!(message.contains("protocolVersion"), "{message}");
    demo.call(3, "echo", json!({ "text": "early" }));
    assert_eq!(demo.error_code(3), -32602);
    // An unknown method is unknown whatever the state.
    demo.request(4, "no/such/method", json!({}));
    assert_eq!(demo.error_code(4), -32601);
    // `server/discover` exists (2026-07-28), but not without its `_meta`.
    demo.request(5, "server/discover", json!({}));
    assert_eq!(demo.error_code(5), -32602);
    demo.initialize();
    demo.request(6, "tools/list", json!({}));
    assert!(demo.result(6)["tools"].is_array());
    // A handshake session does not speak 2026-07-28 any more.
    demo.request(7, "server/discover", json!({}));
    assert_eq!(demo.error_code(7), -32601);
}

#[test]
fn a_second_initialize_is_rejected() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo.request(
        1,
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {} }),
    );
    assert_eq!(demo.error_code(1), -32600);
}

#[test]
fn unknown_methods_are_method_not_found_and_notifications_get_no_answer() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo.notify("notifications/whatever", json!({}));
    demo.request(1, "no/such/method", json!({}));
    let response = demo.response(1);
    assert_eq!(response["error"]["code"], -32601);
}

#[test]
fn params_that_are_not_an_object_are_invalid_params() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo.send(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1] }));
    assert_eq!(demo.error_code(1), -32602);
}

#[test]
fn set_level_accepts_the_eight_levels_and_rejects_others() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    let levels = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    for (i, level) in levels.iter().enumerate() {
        demo.request(i as i64 + 1, "logging/setLevel", json!({ "level": level }));
        assert_eq!(demo.result(i as i64 + 1), json!({}));
    }
    demo.request(20, "logging/setLevel", json!({ "level": "loud" }));
    assert_eq!(demo.error_code(20), -32602);
    demo.request(21, "logging/setLevel", json!({}));
    assert_eq!(demo.error_code(21), -32602);
}

#[test]
fn batches_are_answered_only_under_2025_03_26() {
    let batch = json!([
        { "jsonrpc": "2.0", "id": 10, "method": "ping" },
        { "jsonrpc": "2.0", "method": "notifications/whatever" },
        { "jsonrpc": "2.0", "id": 11, "method": "tools/call",
          "params": { "name": "echo", "arguments": { "text": "in a batch" } } }
    ]);
    let mut demo = Proc::demo(&[]);
    demo.initialize_with("2025-03-26", json!({}));
    demo.send(&batch);
    let reply = demo.next();
    let items = reply.as_array().expect("a batch reply is an array");
    assert_eq!(items.len(), 2, "{reply}");
    let echo = items.iter().find(|r| r["id"] == 11).unwrap();
    assert_eq!(echo["result"]["content"][0]["text"], "in a batch");
    // A batch of notifications only gets no reply at all.
    demo.send(&json!([{ "jsonrpc": "2.0", "method": "notifications/whatever" }]));
    demo.request(12, "ping", json!({}));
    assert_eq!(demo.next()["id"], 12);

    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut demo = Proc::demo(&[]);
        demo.initialize_with(version, json!({}));
        demo.send(&batch);
        let reply = demo.next();
        assert_eq!(reply["error"]["code"], -32600, "{version}: {reply}");
        assert!(reply["id"].is_null());
        demo.request(12, "ping", json!({}));
        assert_eq!(demo.result(12), json!({}));
    }
}

#[test]
fn a_batch_before_initialize_is_refused() {
    let mut demo = Proc::demo(&[]);
    demo.send(&json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }]));
    assert_eq!(demo.next()["error"]["code"], -32600);
}

#[test]
fn end_of_input_ends_the_server_cleanly() {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo.close_stdin();
    assert_eq!(demo.wait_exit(), Some(0));
}
