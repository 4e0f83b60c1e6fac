//! The MCP context in a server of our own, served in-process over a socket pair: requests to
//! the client (sampling, elicitation, roots) with capability checks, deadlines and
//! cancellation; logging levels; progress rules; tight-loop checkpoints; pagination; content
//! kinds.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use mcpipe::{Content, LogLevel, McpServer, ResourceContents, Server, Tool, ToolError, ToolResult};
use serde_json::{json, Value};

/// A client end of an in-process server; reads time out, so nothing can hang.
struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Client {
    fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).unwrap();
    }

    fn request(&mut self, id: i64, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
    }

    fn call(&mut self, id: i64, tool: &str, arguments: Value) {
        self.request(
            id,
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
        );
    }

    /// The next message; the socket's read timeout fails the test instead of hanging.
    fn next(&mut self) -> Value {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).unwrap(),
            other => panic!("no message from the server: {other:?}"),
        }
    }

    /// Nothing arrives within `quiet`.
    fn silent(&mut self, quiet: Duration) {
        self.reader.get_ref().set_read_timeout(Some(quiet)).unwrap();
        let mut line = String::new();
        let got = self.reader.read_line(&mut line);
        assert!(
            got.is_err() || got.as_ref().is_ok_and(|n| *n == 0),
            "unexpected: {line}"
        );
        self.reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
    }
}

/// Serves the server `build` makes in a thread of its own (McpServer need not be `Send`: its
/// handlers may hold `Rc`s, so it is built where it runs).
fn serve(build: impl FnOnce() -> McpServer<u64> + Send + 'static, capabilities: Value) -> Client {
    let (ours, theirs) = UnixStream::pair().unwrap();
    thread::spawn(move || {
        let mut server = build();
        let _ = Server::new()
            .handle_signals(false)
            .idle_timeout(None)
            .serve(theirs.as_fd(), theirs.as_fd(), &mut server);
    });
    ours.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut client = Client {
        reader: BufReader::new(ours.try_clone().unwrap()),
        writer: ours,
    };
    client.request(
        0,
        "initialize",
        json!({ "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": { "name": "t", "version": "0" } }),
    );
    assert!(client.next()["result"].is_object());
    client.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    client
}

fn server() -> McpServer<u64> {
    McpServer::new("ctx-test", "0", 0u64)
        .tool(Tool::new("ask", "Samples"), |_n, _args, cx| {
            let answer = cx.create_message(
                json!({ "messages": [], "maxTokens": 10 }),
                Duration::from_secs(5),
            )?;
            Ok(ToolResult::text(format!(
                "LLM response: {}",
                answer["content"]["text"].as_str().unwrap_or("?")
            )))
        })
        .tool(
            Tool::new("ask_briefly", "Samples, waiting 200 ms"),
            |_n, _args, cx| {
                let answer =
                    cx.create_message(json!({ "messages": [] }), Duration::from_millis(200))?;
                Ok(ToolResult::text(answer.to_string()))
            },
        )
        .tool(Tool::new("elicit", "Elicits"), |_n, _args, cx| {
            let answer = cx.elicit(json!({ "message": "?" }), Duration::from_secs(5))?;
            Ok(ToolResult::text(answer["action"].as_str().unwrap_or("?")))
        })
        .tool(Tool::new("roots", "Lists roots"), |_n, _args, cx| {
            let answer = cx.list_roots(Duration::from_secs(5))?;
            Ok(ToolResult::text(answer.to_string()))
        })
        .tool(Tool::new("log", "Logs at three levels"), |_n, _args, cx| {
            cx.log(LogLevel::Debug, Some("t"), json!("debug line"))?;
            cx.log(LogLevel::Info, Some("t"), json!("info line"))?;
            cx.log(LogLevel::Error, None, json!({ "what": "error line" }))?;
            Ok(ToolResult::text("logged"))
        })
        .tool(
            Tool::new("progress", "Reports progress, not always increasing"),
            |_n, _args, cx| {
                for p in [1.0, 2.0, 2.0, 1.5, 3.0] {
                    cx.progress(p, None, None)?;
                }
                Ok(ToolResult::text("done"))
            },
        )
        .tool(
            Tool::new("spin", "Checkpoints in a tight loop until cancelled"),
            |count, _args, cx| {
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(30) {
                    cx.checkpoint()?;
                    *count += 1;
                }
                Ok(ToolResult::text("spun out"))
            },
        )
        .tool(
            Tool::new("stubborn", "Returns a result even when cancelled"),
            |_n, _args, cx| {
                let start = Instant::now();
                while start.elapsed() < Duration::from_secs(30) {
                    if cx.is_cancelled() {
                        return Ok(ToolResult::text("cancelled, answered anyway"));
                    }
                    thread::sleep(Duration::from_millis(1));
                }
                Ok(ToolResult::text("never cancelled"))
            },
        )
        .tool(
            Tool::new("count", "Checkpoints a million times"),
            |_n, _args, cx| {
                for _ in 0..1_000_000 {
                    cx.checkpoint()?;
                }
                Ok(ToolResult::text("counted"))
            },
        )
        .tool(
            Tool::new("kinds", "Every content kind"),
            |_n, _args, _cx| {
                Ok(ToolResult::new(vec![
                    Content::text("t"),
                    Content::image("aGkh", "image/png"),
                    Content::audio("aGkh", "audio/wav"),
                    Content::resource(ResourceContents::blob("mem://b", None, b"hi!")),
                    Content::resource_link("mem://l", "link"),
                ]))
            },
        )
        .tool(
            Tool::new("protocol_error", "Fails as a protocol error"),
            |_n, _args, _cx| {
                Err(ToolError::protocol(mcpipe::ErrorObject::invalid_params(
                    "nope",
                )))
            },
        )
}

#[test]
fn sampling_waits_for_the_answer_and_keeps_other_messages_in_order() {
    let mut client = serve(server, json!({ "sampling": {} }));
    client.call(1, "ask", json!({}));
    let request = client.next();
    assert_eq!(request["method"], "sampling/createMessage");
    // While the server waits: a ping, a notification, then the answer.
    client.request(50, "ping", json!({}));
    client.send(json!({ "jsonrpc": "2.0", "method": "notifications/whatever" }));
    client.send(json!({ "jsonrpc": "2.0", "id": request["id"],
        "result": { "role": "assistant", "model": "m", "content": { "type": "text", "text": "hi" } } }));
    let first = client.next();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["content"][0]["text"], "LLM response: hi");
    assert_eq!(client.next()["id"], 50);
}

#[test]
fn an_error_answer_becomes_a_tool_error() {
    let mut client = serve(server, json!({ "sampling": {} }));
    client.call(1, "ask", json!({}));
    let request = client.next();
    client.send(json!({ "jsonrpc": "2.0", "id": request["id"],
        "error": { "code": -1, "message": "User rejected sampling request" } }));
    let result = client.next();
    assert_eq!(result["result"]["isError"], true);
    assert!(result["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("rejected"));
}

#[test]
fn requests_needing_undeclared_capabilities_are_not_sent() {
    let mut client = serve(server, json!({}));
    for (id, tool, capability) in [
        (1, "ask", "sampling"),
        (2, "elicit", "elicitation"),
        (3, "roots", "roots"),
    ] {
        client.call(id, tool, json!({}));
        let response = client.next();
        assert_eq!(response["id"], id, "nothing may be sent first: {response}");
        assert_eq!(response["result"]["isError"], true);
        let text = response["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(capability), "{text}");
    }
}

#[test]
fn elicitation_and_roots_work_when_declared() {
    let mut client = serve(server, json!({ "elicitation": {}, "roots": {} }));
    client.call(1, "elicit", json!({}));
    let request = client.next();
    assert_eq!(request["method"], "elicitation/create");
    client
        .send(json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "action": "decline" } }));
    assert_eq!(client.next()["result"]["content"][0]["text"], "decline");
    client.call(2, "roots", json!({}));
    let request = client.next();
    assert_eq!(request["method"], "roots/list");
    client.send(json!({ "jsonrpc": "2.0", "id": request["id"], "result": { "roots": [] } }));
    assert_eq!(client.next()["id"], 2);
}

#[test]
fn a_client_request_times_out_and_is_cancelled() {
    let mut client = serve(server, json!({ "sampling": {} }));
    client.call(1, "ask_briefly", json!({}));
    let request = client.next();
    let cancel = client.next();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    let result = client.next();
    assert_eq!(result["id"], 1);
    assert_eq!(result["result"]["isError"], true);
    // A late answer is ignored.
    client.send(json!({ "jsonrpc": "2.0", "id": request["id"], "result": {} }));
    client.request(2, "ping", json!({}));
    assert_eq!(client.next()["id"], 2);
}

#[test]
fn cancelling_the_call_ends_the_wait_for_the_client() {
    let mut client = serve(server, json!({ "sampling": {} }));
    client.call(1, "ask", json!({}));
    let asked = client.next();
    assert_eq!(asked["method"], "sampling/createMessage");
    client.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } }));
    client.request(2, "ping", json!({}));
    // The client is told its sampling request is moot, and the cancelled call gets no response.
    let told = client.next();
    assert_eq!(told["method"], "notifications/cancelled", "{told}");
    assert_eq!(told["params"]["requestId"], asked["id"], "{told}");
    let next = client.next();
    assert_eq!(next["id"], 2, "the cancelled call gets no response: {next}");
}

#[test]
fn log_messages_respect_the_level_and_come_before_the_result() {
    let mut client = serve(server, json!({}));
    client.call(1, "log", json!({}));
    let info = client.next();
    assert_eq!(info["method"], "notifications/message");
    assert_eq!(
        info["params"],
        json!({ "level": "info", "logger": "t", "data": "info line" })
    );
    assert_eq!(client.next()["params"]["level"], "error");
    assert_eq!(client.next()["id"], 1);

    client.request(2, "logging/setLevel", json!({ "level": "debug" }));
    client.next();
    client.call(3, "log", json!({}));
    assert_eq!(client.next()["params"]["level"], "debug");
    assert_eq!(client.next()["params"]["level"], "info");
    assert_eq!(client.next()["params"]["level"], "error");
    assert_eq!(client.next()["id"], 3);

    client.request(4, "logging/setLevel", json!({ "level": "emergency" }));
    client.next();
    client.call(5, "log", json!({}));
    assert_eq!(client.next()["id"], 5);
}

#[test]
fn progress_only_increases_and_only_with_a_token() {
    let mut client = serve(server, json!({}));
    client.call(1, "progress", json!({}));
    assert_eq!(client.next()["id"], 1);
    client.request(
        2,
        "tools/call",
        json!({ "name": "progress", "_meta": { "progressToken": "p" } }),
    );
    let mut seen = Vec::new();
    loop {
        let msg = client.next();
        if msg["id"] == 2 {
            break;
        }
        seen.push(msg["params"]["progress"].as_f64().unwrap());
    }
    assert_eq!(seen, [1.0, 2.0, 3.0]);
}

#[test]
fn a_tight_checkpoint_loop_is_cheap_and_cancellable() {
    let mut client = serve(server, json!({}));
    client.call(1, "count", json!({}));
    assert_eq!(client.next()["result"]["content"][0]["text"], "counted");
    client.call(2, "spin", json!({}));
    thread::sleep(Duration::from_millis(100));
    client.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 2 } }));
    client.request(3, "ping", json!({}));
    let next = client.next();
    assert_eq!(next["id"], 3, "{next}");
    client.silent(Duration::from_millis(100));
}

#[test]
fn a_result_returned_after_cancellation_is_not_sent_nor_given_to_the_next_request() {
    let mut client = serve(server, json!({}));
    client.call(1, "stubborn", json!({}));
    thread::sleep(Duration::from_millis(100));
    client.send(json!({ "jsonrpc": "2.0", "method": "notifications/cancelled", "params": { "requestId": 1 } }));
    client.request(2, "ping", json!({}));
    assert_eq!(
        client.next(),
        json!({ "jsonrpc": "2.0", "id": 2, "result": {} })
    );
    client.call(3, "kinds", json!({}));
    assert_eq!(client.next()["result"]["content"][0]["text"], "t");
    client.silent(Duration::from_millis(100));
}

#[test]
fn every_content_kind_is_returned_as_given() {
    let mut client = serve(server, json!({}));
    client.call(1, "kinds", json!({}));
    let content = client.next()["result"]["content"].clone();
    let kinds: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["text", "image", "audio", "resource", "resource_link"]
    );
    assert_eq!(content[3]["resource"]["blob"], "aGkh");
    client.call(2, "protocol_error", json!({}));
    assert_eq!(client.next()["error"]["code"], -32602);
}

#[test]
fn long_lists_are_paginated_with_cursors() {
    let big = || {
        let mut big = McpServer::new("many", "0", 0u64).page_size(3);
        for i in 0..10 {
            big = big.tool(Tool::new(format!("t{i}"), "a tool"), |_n, _a, _cx| {
                Ok(ToolResult::text(""))
            });
        }
        big
    };
    let mut client = serve(big, json!({}));
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    for id in 1..20 {
        let params = if cursor.is_null() {
            json!({})
        } else {
            json!({ "cursor": cursor })
        };
        client.request(id, "tools/list", params);
        let result = client.next()["result"].clone();
        let page = result["tools"].as_array().unwrap();
        assert!(page.len() <= 3);
        names.extend(page.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        cursor = result.get("nextCursor").cloned().unwrap_or(Value::Null);
        if cursor.is_null() {
            break;
        }
    }
    let want: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    assert_eq!(names, want);
    // Only a cursor the server handed out is accepted: not one it never writes.
    for (id, bad) in (20..).zip(["mcpipe:+3", "mcpipe:03", "mcpipe:4"]) {
        client.request(id, "tools/list", json!({ "cursor": bad }));
        assert_eq!(client.next()["error"]["code"], -32602, "{bad}");
    }
}

#[test]
fn a_server_without_prompts_or_resources_does_not_offer_them() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    thread::spawn(move || {
        let mut bare = McpServer::new("bare", "0", 0u64)
            .tool(Tool::new("t", "a tool"), |_n, _a, _cx| {
                Ok(ToolResult::text(""))
            });
        let _ =
            Server::new()
                .handle_signals(false)
                .serve(theirs.as_fd(), theirs.as_fd(), &mut bare);
    });
    ours.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut client = Client {
        reader: BufReader::new(ours.try_clone().unwrap()),
        writer: ours,
    };
    client.request(
        0,
        "initialize",
        json!({ "protocolVersion": "2025-06-18", "capabilities": {} }),
    );
    let caps = client.next()["result"]["capabilities"].clone();
    assert_eq!(
        caps.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["logging", "tools"]
    );
    client.request(1, "prompts/list", json!({}));
    assert_eq!(client.next()["error"]["code"], -32601);
    client.request(2, "resources/read", json!({ "uri": "x" }));
    assert_eq!(client.next()["error"]["code"], -32601);
}
