//! MCP tasks over pipes, both revisions: 2025-11-25 (`tasks` capability, `params.task`,
//! `tasks/get|result|list|cancel`, status notifications, live input inside a task) against
//! `mcpipe demo`, and the 2026-07-28 extension (`io.modelcontextprotocol/tasks`: server-directed
//! tasks, `tasks/get` with inlined outcomes, `tasks/update`, `tasks/cancel` acks, `-32021`)
//! against `mcpipe demo --conformance`. Each method and each error code; the bound on kept
//! tasks; cancellation reaching a command's process group; shutdown with tasks running.
//! Every wait is bounded (`util::mcp`), and each test has a watchdog.

mod util;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::mcp::{live_in_group, processes_where, text, Proc};
use util::watchdog;

const LIMIT: Duration = Duration::from_secs(60);
const EXTENSION: &str = "io.modelcontextprotocol/tasks";
const RELATED: &str = "io.modelcontextprotocol/related-task";

/// A server and the next request id.
struct Client {
    proc: Proc,
    next: i64,
    /// 2026-07-28: the client capabilities sent with each request; `None`: handshake era.
    modern: Option<Value>,
}

impl Client {
    /// `mcpipe demo ARGS` after a handshake at `version`.
    fn legacy(args: &[&str], version: &str, capabilities: Value) -> Client {
        let mut proc = Proc::demo(args);
        proc.initialize_with(version, capabilities);
        Client {
            proc,
            next: 1,
            modern: None,
        }
    }

    /// `mcpipe demo --conformance`, spoken to as a 2026-07-28 client with `capabilities`.
    fn modern(capabilities: Value) -> Client {
        Client {
            proc: Proc::demo(&["--conformance"]),
            next: 1,
            modern: Some(capabilities),
        }
    }

    fn send(&mut self, method: &str, mut params: Value) -> i64 {
        if let Some(caps) = &self.modern {
            let meta = params["_meta"].as_object().cloned().unwrap_or_default();
            let mut full = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": { "name": "mcpipe-tests", "version": "0" }
            });
            for (k, v) in meta {
                full[k] = v;
            }
            params["_meta"] = full;
        }
        let id = self.next;
        self.next += 1;
        self.proc.request(id, method, params);
        id
    }

    /// The whole response to a request.
    fn ask(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.proc.response(id)
    }

    fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.ask(method, params);
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method}: expected a result, got {response}"),
        }
    }

    fn error(&mut self, method: &str, params: Value) -> Value {
        let response = self.ask(method, params);
        match response.get("error") {
            Some(error) => error.clone(),
            None => panic!("{method}: expected an error, got {response}"),
        }
    }

    fn get(&mut self, task: &str) -> Value {
        self.result("tasks/get", json!({ "taskId": task }))
    }

    /// Polls `tasks/get` until `done` holds for the task (fails after 10 s).
    fn poll(&mut self, task: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.get(task);
            if done(&got) {
                return got;
            }
            assert!(Instant::now() < deadline, "task {task} stuck at {got}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn status_is(status: &'static str) -> impl Fn(&Value) -> bool {
    move |t| t["status"] == status
}

fn terminal(t: &Value) -> bool {
    ["completed", "failed", "cancelled"].contains(&t["status"].as_str().unwrap_or_default())
}

fn accept(content: Value) -> Value {
    json!({ "action": "accept", "content": content })
}

// ---------------------------------------------------------------------------------------------
// 2025-11-25
// ---------------------------------------------------------------------------------------------

#[test]
fn the_tasks_capability_is_declared_at_2025_11_25_only_and_tools_show_their_support() {
    let _w = watchdog("capability_2025", LIMIT);
    let mut c = Client::legacy(&["--allow-run"], "2025-11-25", json!({}));
    let mut init = Proc::demo(&[]);
    let caps = init.initialize_with("2025-11-25", json!({}))["capabilities"].clone();
    assert_eq!(
        caps["tasks"],
        json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        "{caps}"
    );
    let mut old = Proc::demo(&[]);
    let caps = old.initialize_with("2025-06-18", json!({}))["capabilities"].clone();
    assert!(caps.get("tasks").is_none(), "{caps}");
    let tools = c.result("tools/list", json!({}))["tools"].clone();
    let support = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["execution"]["taskSupport"].clone())
            .unwrap_or_else(|| panic!("no tool {name} in {tools}"))
    };
    assert_eq!(support("sleep"), "optional");
    assert_eq!(support("run"), "optional");
    assert_eq!(support("echo"), Value::Null);
}

#[test]
fn a_task_answers_at_once_and_tasks_result_waits_without_holding_up_the_loop() {
    let _w = watchdog("task_result_waits", LIMIT);
    let mut c = Client::legacy(&[], "2025-11-25", json!({}));
    let call = c.send(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 400 }, "task": { "ttl": 60000 },
                "_meta": { "progressToken": "p1" } }),
    );
    let started = Instant::now();
    let (_, created) = c.proc.until_response(call);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "not at once"
    );
    let task = created["result"]["task"].clone();
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000);
    assert!(task["pollInterval"].as_u64().unwrap() > 0);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    let id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(c.get(&id)["status"], "working");
    let waiting = c.send("tasks/result", json!({ "taskId": id }));
    // The loop goes on while tasks/result waits.
    let ping = c.send("ping", json!({}));
    let (before, _) = c.proc.until_response(ping);
    assert!(before.iter().all(|m| m.get("id") != Some(&json!(waiting))));
    let (seen, answer) = c.proc.until_response(waiting);
    let result = &answer["result"];
    assert_eq!(text(result), "slept 400 ms", "{answer}");
    assert_eq!(result["_meta"][RELATED]["taskId"], json!(id));
    // Progress kept flowing after the call was answered (the token lives until the end), and
    // the end was announced.
    let progress = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert!(progress >= 1, "no progress after the handle: {seen:?}");
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/tasks/status"
                && m["params"]["taskId"] == json!(id)
                && m["params"]["status"] == "completed"),
        "{seen:?}"
    );
    assert_eq!(c.get(&id)["status"], "completed");
    // A finished task's result is there at once, as often as asked.
    assert_eq!(
        text(&c.result("tasks/result", json!({ "taskId": id }))),
        "slept 400 ms"
    );
}

#[test]
fn tasks_cancel_stops_the_work_and_a_finished_task_cannot_be_cancelled() {
    let _w = watchdog("cancel_2025", LIMIT);
    let mut c = Client::legacy(&[], "2025-11-25", json!({}));
    let created = c.result(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 30000 }, "task": {} }),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let waiting = c.send("tasks/result", json!({ "taskId": id }));
    let cancelled = c.result("tasks/cancel", json!({ "taskId": id }));
    assert_eq!(cancelled["taskId"], json!(id));
    assert_eq!(cancelled["status"], "cancelled");
    // The waiting tasks/result is answered (an error: a cancelled task has no result).
    let answer = c.proc.response(waiting);
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(c.get(&id)["status"], "cancelled");
    let again = c.error("tasks/cancel", json!({ "taskId": id }));
    assert_eq!(again["code"], -32602, "{again}");
    // The worker was freed: a new task on it runs to the end.
    let quick = c.result(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 10 }, "task": {} }),
    );
    let quick = quick["task"]["taskId"].as_str().unwrap().to_owned();
    c.poll(&quick, status_is("completed"));
}

#[test]
fn cancelling_a_run_task_stops_its_process_group() {
    let _w = watchdog("cancel_run_task", LIMIT);
    let mut c = Client::legacy(&["--allow-run"], "2025-11-25", json!({}));
    let server = c.proc.pid();
    let created = c.result(
        "tools/call",
        json!({ "name": "run", "arguments": { "argv": ["sh", "-c", "sleep 120 & sleep 120"] },
                "task": {} }),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    let group = loop {
        let children = processes_where(|state, ppid, _| ppid == server && state != "Z");
        if let Some(&sh) = children.first() {
            if live_in_group(sh).len() >= 3 {
                break sh;
            }
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    c.result("tasks/cancel", json!({ "taskId": id }));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_in_group(group).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes survived the task's cancellation: {:?}",
            live_in_group(group)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_2025_error_code() {
    let _w = watchdog("errors_2025", LIMIT);
    let mut c = Client::legacy(&[], "2025-11-25", json!({}));
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let e = c.error(method, json!({ "taskId": "no-such-task" }));
        assert_eq!(e["code"], -32602, "{method}: {e}");
        let e = c.error(method, json!({}));
        assert_eq!(e["code"], -32602, "{method} without taskId: {e}");
    }
    // A tool that forbids tasks, called as one.
    let e = c.error(
        "tools/call",
        json!({ "name": "echo", "arguments": { "text": "x" }, "task": {} }),
    );
    assert_eq!(e["code"], -32601, "{e}");
    let e = c.error(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 1 }, "task": 5 }),
    );
    assert_eq!(e["code"], -32602, "{e}");
    // tasks/update is 2026-07-28 only; a bad cursor.
    assert_eq!(
        c.error(
            "tasks/update",
            json!({ "taskId": "x", "inputResponses": {} })
        )["code"],
        -32601
    );
    assert_eq!(
        c.error("tasks/list", json!({ "cursor": "bogus" }))["code"],
        -32602
    );
    // A tool that requires a task, called without one (the conformance fixtures have two).
    let mut f = Client::legacy(&["--conformance"], "2025-11-25", json!({}));
    let e = f.error(
        "tools/call",
        json!({ "name": "failing_job", "arguments": {} }),
    );
    assert_eq!(e["code"], -32601, "{e}");
    // As a task it runs: a tool error is a completed task with an isError result.
    let created = f.result(
        "tools/call",
        json!({ "name": "failing_job", "arguments": {}, "task": {} }),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let answer = f.ask("tasks/result", json!({ "taskId": id }));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(f.get(&id)["status"], "completed");
    // A JSON-RPC error is a failed task, and tasks/result gives that error.
    let created = f.result(
        "tools/call",
        json!({ "name": "protocol_error_job", "arguments": {}, "task": {} }),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let e = f.error("tasks/result", json!({ "taskId": id }));
    assert_eq!(e["code"], -32603, "{e}");
    assert_eq!(f.get(&id)["status"], "failed");
}

#[test]
fn before_2025_11_25_there_are_no_tasks() {
    let _w = watchdog("no_tasks_before", LIMIT);
    let mut c = Client::legacy(&[], "2025-06-18", json!({}));
    for method in ["tasks/get", "tasks/list", "tasks/cancel", "tasks/result"] {
        let e = c.error(method, json!({ "taskId": "x" }));
        assert_eq!(e["code"], -32601, "{method}: {e}");
    }
    // A `task` param means nothing there: the call runs as a plain one.
    let result = c.result(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 1 }, "task": {} }),
    );
    assert_eq!(text(&result), "slept 1 ms", "{result}");
}

#[test]
fn a_request_to_the_client_makes_the_task_input_required_and_names_it() {
    let _w = watchdog("input_2025", LIMIT);
    let mut c = Client::legacy(
        &["--conformance"],
        "2025-11-25",
        json!({ "elicitation": {} }),
    );
    let call = c.send(
        "tools/call",
        json!({ "name": "confirm_delete", "arguments": { "filename": "f.txt" }, "task": {} }),
    );
    let (_, created) = c.proc.until_response(call);
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The work asks the client; the request names the task.
    let ask = loop {
        let msg = c.proc.next();
        if msg["method"] == "elicitation/create" {
            break msg;
        }
    };
    assert_eq!(
        ask["params"]["_meta"][RELATED]["taskId"],
        json!(id),
        "{ask}"
    );
    c.poll(&id, status_is("input_required"));
    c.proc.send(
        &json!({ "jsonrpc": "2.0", "id": ask["id"], "result": accept(json!({ "confirm": true })) }),
    );
    let done = c.poll(&id, terminal);
    assert_eq!(done["status"], "completed");
    assert_eq!(
        text(&c.result("tasks/result", json!({ "taskId": id }))),
        "deleted f.txt"
    );
}

#[test]
fn kept_tasks_are_bounded_and_tasks_list_pages_through_them() {
    let _w = watchdog("bounded", LIMIT);
    let mut c = Client::legacy(&[], "2025-11-25", json!({}));
    // 1500 quick tasks whose results nobody fetches: the store keeps 1000 (the default).
    let mut first = None;
    for _ in 0..1500 {
        let created = c.result(
            "tools/call",
            json!({ "name": "sleep", "arguments": { "ms": 0 }, "task": {} }),
        );
        first.get_or_insert(created["task"]["taskId"].as_str().unwrap().to_owned());
    }
    let mut listed = 0;
    let mut pages = 0;
    let mut params = json!({});
    loop {
        let page = c.result("tasks/list", params.clone());
        pages += 1;
        listed += page["tasks"].as_array().unwrap().len();
        match page.get("nextCursor") {
            Some(cursor) => params = json!({ "cursor": cursor }),
            None => break,
        }
    }
    assert!(listed <= 1000, "{listed} tasks kept");
    assert!(listed >= 900, "only {listed} kept");
    assert!(pages >= 10, "{pages} pages of 100");
    // The oldest went first.
    let first = first.unwrap();
    assert_eq!(
        c.error("tasks/get", json!({ "taskId": first }))["code"],
        -32602
    );
}

#[test]
fn the_server_ends_promptly_with_tasks_still_running() {
    let _w = watchdog("shutdown_with_tasks", LIMIT);
    // End of input: nothing is owed, so the running tasks are stopped at once, a command's
    // process group with them.
    let mut c = Client::legacy(&["--allow-run"], "2025-11-25", json!({}));
    let server = c.proc.pid();
    c.result(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 60000 }, "task": {} }),
    );
    c.result(
        "tools/call",
        json!({ "name": "run", "arguments": { "argv": ["sleep", "120"] }, "task": {} }),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let child = loop {
        let children = processes_where(|state, ppid, _| ppid == server && state != "Z");
        if let Some(&pid) = children.first() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let started = Instant::now();
    c.proc.close_stdin();
    assert_eq!(c.proc.wait_exit(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live_in_group(child).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the task's command outlived the server"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // SIGTERM with a tasks/result waiting: it is answered with an error that says the task
    // was stopped (before the loop fails what is still owed), and the process ends. The same
    // path ends the shutdown grace after the end of input.
    let mut c = Client::legacy(&[], "2025-11-25", json!({}));
    let created = c.result(
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 60000 }, "task": {} }),
    );
    let id = created["task"]["taskId"].as_str().unwrap().to_owned();
    let waiting = c.send("tasks/result", json!({ "taskId": id }));
    c.result("ping", json!({})); // The waiter is registered.
    let started = Instant::now();
    c.proc.signal("TERM");
    let answer = c.proc.response(waiting);
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("before the task ended")),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["taskId"], id.as_str(), "{answer}");
    assert_eq!(c.proc.wait_exit(), Some(0));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// 2026-07-28: the extension io.modelcontextprotocol/tasks
// ---------------------------------------------------------------------------------------------

fn with_tasks() -> Value {
    json!({ "elicitation": {}, "extensions": { EXTENSION: {} } })
}

#[test]
fn discover_declares_the_extension_and_not_the_2025_capability() {
    let _w = watchdog("discover_tasks", LIMIT);
    let mut c = Client::modern(json!({}));
    let caps = c.result("server/discover", json!({}))["capabilities"].clone();
    assert_eq!(caps["extensions"][EXTENSION], json!({}), "{caps}");
    assert!(caps.get("tasks").is_none(), "{caps}");
}

#[test]
fn a_task_is_created_flat_inlines_its_outcome_and_cancels_with_an_ack() {
    let _w = watchdog("modern_lifecycle", LIMIT);
    let mut c = Client::modern(with_tasks());
    let created = c.result(
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 0.2, "label": "a" } }),
    );
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert!(created.get("task").is_none() && created.get("ttl").is_none());
    assert!(created["ttlMs"].as_u64().unwrap() > 0);
    assert!(created["pollIntervalMs"].as_u64().unwrap() > 0);
    let id = created["taskId"].as_str().unwrap().to_owned();
    let working = c.get(&id);
    assert_eq!(working["resultType"], "complete");
    assert!(working.get("result").is_none());
    let done = c.poll(&id, terminal);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(text(&done["result"]), "computed \"a\" after 0.2 s");
    assert!(done["result"].get("_meta").is_none(), "{done}");
    // Tool errors complete with isError; JSON-RPC errors fail with the error inlined.
    let failing = c.result(
        "tools/call",
        json!({ "name": "failing_job", "arguments": {} }),
    );
    let protocol = c.result(
        "tools/call",
        json!({ "name": "protocol_error_job", "arguments": {} }),
    );
    let failing = c.poll(failing["taskId"].as_str().unwrap(), terminal);
    assert_eq!(failing["status"], "completed");
    assert_eq!(failing["result"]["isError"], true, "{failing}");
    let protocol = c.poll(protocol["taskId"].as_str().unwrap(), terminal);
    assert_eq!(protocol["status"], "failed");
    assert_eq!(protocol["error"]["code"], -32603, "{protocol}");
    assert!(protocol.get("result").is_none());
    // Cancel: an empty ack, the status settles to cancelled, and again is the same ack.
    let long = c.result(
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 60 } }),
    );
    let long = long["taskId"].as_str().unwrap().to_owned();
    for _ in 0..2 {
        let ack = c.result("tasks/cancel", json!({ "taskId": long }));
        assert_eq!(ack["resultType"], "complete");
        assert!(
            ack.get("taskId").is_none() && ack.get("status").is_none(),
            "{ack}"
        );
        assert_eq!(c.get(&long)["status"], "cancelled");
    }
}

#[test]
fn inputs_inside_a_task_come_through_tasks_update_even_one_at_a_time() {
    let _w = watchdog("modern_inputs", LIMIT);
    let mut c = Client::modern(with_tasks());
    let created = c.result(
        "tools/call",
        json!({ "name": "multi_input", "arguments": {} }),
    );
    let id = created["taskId"].as_str().unwrap().to_owned();
    let parked = c.poll(&id, status_is("input_required"));
    let keys: Vec<String> = parked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 2, "{parked}");
    assert_eq!(
        parked["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    let answers = json!({ "name": accept(json!({ "name": "Ada" })),
                          "confirm": accept(json!({ "confirm": true })) });
    // One answer, and a key that names nothing: acked, still waiting for the other.
    let ack = c.result(
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { &keys[0]: answers[&keys[0]].clone(),
                                                  "unknown": { "x": 1 } } }),
    );
    assert_eq!(
        ack,
        json!({ "resultType": "complete", "_meta": ack["_meta"].clone() })
    );
    let still = c.get(&id);
    assert_eq!(still["status"], "input_required");
    let left: Vec<&String> = still["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(left, vec![&keys[1]], "{still}");
    c.result(
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { &keys[1]: answers[&keys[1]].clone() } }),
    );
    let done = c.poll(&id, terminal);
    assert_eq!(text(&done["result"]), "name Ada, confirmed true", "{done}");
    // A quick tool that requires a task asks first in plain rounds, then makes the task.
    let round = c.result(
        "tools/call",
        json!({ "name": "test_tool_with_task", "arguments": {} }),
    );
    assert_eq!(round["resultType"], "input_required", "{round}");
    assert!(round.get("taskId").is_none());
    let created = c.result(
        "tools/call",
        json!({ "name": "test_tool_with_task", "arguments": {},
                "inputResponses": { "user_name": accept(json!({ "name": "Alice" })) },
                "requestState": round["requestState"] }),
    );
    assert_eq!(created["resultType"], "task", "{created}");
    assert!(created.get("requestState").is_none());
    let done = c.poll(created["taskId"].as_str().unwrap(), terminal);
    assert!(text(&done["result"]).contains("Alice"), "{done}");
}

#[test]
fn every_2026_error_code() {
    let _w = watchdog("errors_2026", LIMIT);
    // A client that did not declare the extension.
    let mut plain = Client::modern(json!({ "elicitation": {} }));
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let e = plain.error(method, json!({ "taskId": "x", "inputResponses": {} }));
        assert_eq!(e["code"], -32021, "{method}: {e}");
        assert_eq!(
            e["data"]["requiredCapabilities"]["extensions"][EXTENSION],
            json!({}),
            "{e}"
        );
    }
    let e = plain.error(
        "tools/call",
        json!({ "name": "failing_job", "arguments": {} }),
    );
    assert_eq!(e["code"], -32021, "{e}");
    // An optional tool runs as a plain call for it.
    let sync = plain.result(
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 0 } }),
    );
    assert_eq!(sync["resultType"], "complete", "{sync}");
    assert!(sync.get("taskId").is_none());
    // Per-request opt-in works: the capabilities are per request.
    let opted = plain.result(
        "tools/call",
        json!({ "name": "slow_compute", "arguments": { "seconds": 0 },
                "_meta": { "io.modelcontextprotocol/clientCapabilities": with_tasks() } }),
    );
    assert_eq!(opted["resultType"], "task", "{opted}");
    // A declaring client.
    let mut c = Client::modern(with_tasks());
    for method in ["tasks/get", "tasks/cancel"] {
        let e = c.error(method, json!({ "taskId": "no-such-task" }));
        assert_eq!(e["code"], -32602, "{method}: {e}");
    }
    let e = c.error(
        "tasks/update",
        json!({ "taskId": "no-such-task", "inputResponses": {} }),
    );
    assert_eq!(e["code"], -32602, "{e}");
    let e = c.error("tasks/update", json!({ "taskId": "x" }));
    assert_eq!(e["code"], -32602, "{e}");
    for method in ["tasks/result", "tasks/list"] {
        let e = c.error(method, json!({ "taskId": "x" }));
        assert_eq!(e["code"], -32601, "{method} is gone in 2026-07-28: {e}");
    }
    // A sync tool with a 2025-style `task` hint stays sync.
    let greet = c.result(
        "tools/call",
        json!({ "name": "greet", "arguments": { "name": "x" }, "task": { "ttl": 1 } }),
    );
    assert_eq!(text(&greet), "Hello, x!", "{greet}");
    // A malformed answer to a pending input.
    let created = c.result(
        "tools/call",
        json!({ "name": "confirm_delete", "arguments": { "filename": "g" } }),
    );
    let id = created["taskId"].as_str().unwrap().to_owned();
    c.poll(&id, status_is("input_required"));
    let e = c.error(
        "tasks/update",
        json!({ "taskId": id, "inputResponses": { "confirm": "yes" } }),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert_eq!(c.get(&id)["status"], "input_required");
}
