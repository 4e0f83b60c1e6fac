//! Slow tools next to fast ones: `mcpipe demo`'s `sleep` and `run` run on the worker pool, so
//! nothing waits behind them; cancellation, shutdown and read-ahead keep their guarantees.
//! Every wait has a deadline (tests/util), and bounds are generous: exact figures are for the
//! benchmarks.

mod util;

use std::time::{Duration, Instant};

use serde_json::json;
use util::mcp::{text, Proc};
use util::watchdog;

fn ready() -> Proc {
    let mut demo = Proc::demo(&["--allow-run"]);
    demo.initialize();
    demo
}

#[test]
fn an_echo_behind_a_long_sleep_is_answered_at_once() {
    let _w = watchdog("echo_behind_sleep", Duration::from_secs(60));
    let mut demo = ready();
    let started = Instant::now();
    demo.call(1, "sleep", json!({ "ms": 1500 }));
    demo.call(2, "echo", json!({ "text": "not waiting" }));
    let echo = demo.result(2);
    let took = started.elapsed();
    assert_eq!(text(&echo), "not waiting");
    assert!(took < Duration::from_millis(200), "echo took {took:?}");
    assert_eq!(text(&demo.result(1)), "slept 1500 ms");
}

#[test]
fn twenty_one_second_sleeps_in_one_write_all_end_within_three_seconds() {
    let _w = watchdog("twenty_sleeps", Duration::from_secs(60));
    let mut demo = ready();
    let mut burst = Vec::new();
    for id in 1..=20 {
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": { "name": "sleep", "arguments": { "ms": 1000 } } });
        burst.extend(serde_json::to_vec(&line).unwrap());
        burst.push(b'\n');
    }
    let started = Instant::now();
    demo.write_raw(&burst);
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 20 {
        let msg = demo.next();
        if let Some(id) = msg.get("id").and_then(|v| v.as_i64()) {
            assert_eq!(text(&msg["result"]), "slept 1000 ms");
            assert!(answered.insert(id), "id {id} answered twice");
        }
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "20 concurrent sleeps took {took:?}"
    );
}

#[test]
fn a_cancelled_concurrent_sleep_is_not_answered_and_the_others_finish() {
    let _w = watchdog("cancel_concurrent", Duration::from_secs(60));
    let mut demo = ready();
    demo.call(1, "sleep", json!({ "ms": 30_000 }));
    demo.call(2, "sleep", json!({ "ms": 300 }));
    std::thread::sleep(Duration::from_millis(100));
    demo.cancel(1);
    demo.request(3, "ping", json!({}));
    // Only 2 and 3 are answered; 1 never is (its answer would come first if it were, as the
    // sleep ends at once on cancellation).
    let mut ids = Vec::new();
    while ids.len() < 2 {
        let msg = demo.next();
        if let Some(id) = msg.get("id").and_then(|v| v.as_i64()) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    assert_eq!(ids, [2, 3]);
    assert!(demo.next_within(Duration::from_millis(300)).is_none());
}

#[test]
fn progress_of_a_concurrent_call_comes_before_its_answer() {
    let _w = watchdog("progress_concurrent", Duration::from_secs(60));
    let mut demo = ready();
    demo.request(
        1,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 350 }, "_meta": { "progressToken": "p" } }),
    );
    let (before, answer) = demo.until_response(1);
    assert_eq!(text(&answer["result"]), "slept 350 ms");
    let progress: Vec<f64> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(progress.len() >= 2, "progress: {before:?}");
    assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
}

#[test]
fn end_of_input_waits_for_running_calls_and_answers_them() {
    let _w = watchdog("eof_waits", Duration::from_secs(60));
    let mut demo = ready();
    demo.call(1, "sleep", json!({ "ms": 400 }));
    demo.call(2, "sleep", json!({ "ms": 200 }));
    demo.close_stdin();
    let mut ids = vec![
        demo.next()["id"].as_i64().unwrap(),
        demo.next()["id"].as_i64().unwrap(),
    ];
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);
    assert_eq!(demo.wait_exit(), Some(0));
}

#[test]
fn sigterm_with_calls_in_flight_answers_each_and_exits_within_a_second() {
    let _w = watchdog("sigterm_in_flight", Duration::from_secs(60));
    let mut demo = ready();
    for id in 1..=10 {
        demo.call(id, "sleep", json!({ "ms": 60_000 }));
    }
    // They are running (the echo behind them was answered, so they were all dispatched).
    demo.call(99, "echo", json!({ "text": "x" }));
    demo.result(99);
    let started = Instant::now();
    demo.signal("TERM");
    assert_eq!(demo.wait_exit(), Some(0));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    let mut answered = Vec::new();
    while let Some(msg) = demo.next_within(Duration::from_millis(200)) {
        if let Some(id) = msg.get("id").and_then(|v| v.as_i64()) {
            answered.push(id);
        }
    }
    answered.sort_unstable();
    assert_eq!(
        answered,
        (1..=10).collect::<Vec<_>>(),
        "every owed answer is written"
    );
}

#[test]
fn large_echoes_behind_a_slow_call_are_answered_with_flat_memory() {
    let _w = watchdog("large_echoes", Duration::from_secs(120));
    let mut demo = ready();
    demo.call(1, "sleep", json!({ "ms": 4000 }));
    let text_4mib = "x".repeat(4 << 20);
    // Writes and reads interleaved (a reader thread drains stdout), as a client does.
    for id in 2..42 {
        demo.call(id, "echo", json!({ "text": text_4mib }));
    }
    // Answers come in any order (the sleep's may come between echoes): collect them all.
    let mut answered = std::collections::BTreeMap::new();
    while answered.len() < 41 {
        let msg = demo.next();
        if let Some(id) = msg.get("id").and_then(|v| v.as_i64()) {
            answered.insert(id, msg);
        }
    }
    for id in 2..42 {
        assert_eq!(text(&answered[&id]["result"]).len(), 4 << 20);
    }
    assert_eq!(text(&answered[&1]["result"]), "slept 4000 ms");
    // The memory bound: Linux only (/proc).
    if let Some(peak) = util::procs::peak_rss_kib(demo.pid()) {
        assert!(peak < 128 * 1024, "peak RSS {peak} kB");
    }
}

#[test]
fn a_flood_of_unknown_cancellations_and_bad_lines_does_not_delay_a_ping() {
    let _w = watchdog("cancel_flood", Duration::from_secs(60));
    let mut demo = ready();
    let mut flood = Vec::new();
    for i in 0..10_000 {
        let line = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": { "requestId": 1_000_000 + i } });
        flood.extend(serde_json::to_vec(&line).unwrap());
        flood.push(b'\n');
        if i % 5 == 0 {
            flood.extend_from_slice(b"{not json\n");
        }
    }
    flood.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
    let started = Instant::now();
    demo.write_raw(&flood);
    let mut errors = 0;
    loop {
        let msg = demo.next();
        if msg["id"] == json!(7) {
            break;
        }
        assert_eq!(msg["error"]["code"], json!(-32700), "unexpected: {msg}");
        errors += 1;
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "ping took {took:?}");
    assert_eq!(errors, 2000);
    assert!(demo.next_within(Duration::from_millis(200)).is_none());
    // The memory bound: Linux only (/proc).
    if let Some(peak) = util::procs::peak_rss_kib(demo.pid()) {
        assert!(peak < 64 * 1024, "peak RSS {peak} kB");
    }
}

/// An in-process MCP server with a concurrent tool that panics on demand, served over pipes
/// on a thread of this test; returns the thread's handle.
fn in_process_server(
    input: std::io::PipeReader,
    output: std::io::PipeWriter,
) -> std::thread::JoinHandle<()> {
    use mcpipe::{
        Content, McpServer, Prompt, PromptMessage, Resource, ResourceContents, ResourceTemplate,
        Server, Tool, ToolResult,
    };
    use std::os::fd::AsFd;
    std::thread::spawn(move || {
        let mut server = McpServer::new("pool-test", "0", ())
            .workers(2)
            .concurrent_tool(Tool::new("boom", "Panics"), |_args, _cx| {
                panic!("a concurrent tool panics on purpose")
            })
            .concurrent_tool(
                Tool::new("nap", "Sleeps ms").arg("ms", "integer", "How long"),
                |args, cx| {
                    let ms = args.integer("ms")?.max(0) as u64;
                    cx.sleep(Duration::from_millis(ms))?;
                    Ok(ToolResult::text(format!("napped {ms}")))
                },
            )
            .tool(
                Tool::new("doze", "Sleeps ms on the loop's thread")
                    .arg("ms", "integer", "How long"),
                |_state, args, cx| {
                    let ms = args.integer("ms")?.max(0) as u64;
                    cx.sleep(Duration::from_millis(ms))?;
                    Ok(ToolResult::text(format!("dozed {ms}")))
                },
            )
            .concurrent_resource(Resource::new("slow://one", "one"), |uri, cx| {
                cx.sleep(Duration::from_millis(1000))
                    .map_err(|e| mcpipe::ErrorObject::internal(e.to_string()))?;
                Ok(vec![ResourceContents::text(uri, None, "slowly read")])
            })
            .concurrent_resource_template(
                ResourceTemplate::new("slow://t/{name}", "t"),
                |uri, vars, _cx| {
                    if vars.string("name").is_ok_and(|n| n == "missing") {
                        return Err(Resource::not_found(uri));
                    }
                    Ok(vec![ResourceContents::text(uri, None, "templated")])
                },
            )
            .concurrent_prompt(Prompt::new("slow", "A slow prompt"), |_args, cx| {
                cx.sleep(Duration::from_millis(1000))
                    .map_err(|e| mcpipe::ErrorObject::internal(e.to_string()))?;
                Ok(vec![PromptMessage::user(Content::text("slowly made"))])
            });
        let outcome = Server::new()
            .handle_signals(false)
            .log_bad_input(false)
            .idle_timeout(None)
            .serve(input.as_fd(), output.as_fd(), &mut server);
        assert!(outcome.is_ok(), "{outcome:?}");
    })
}

/// The in-process server of [`in_process_server`] on fresh pipes: our end of its input, its
/// output lines, and its thread.
fn in_process_pipes() -> (
    std::io::PipeWriter,
    std::sync::mpsc::Receiver<Vec<u8>>,
    std::thread::JoinHandle<()>,
) {
    let (in_r, in_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = std::io::pipe().unwrap();
    let server = in_process_server(in_r, out_w);
    (in_w, util::line_channel(out_r), server)
}

/// [`in_process_pipes`] after the handshake (2025-11-25).
fn initialized_in_process() -> (
    std::io::PipeWriter,
    std::sync::mpsc::Receiver<Vec<u8>>,
    std::thread::JoinHandle<()>,
) {
    let (mut in_w, lines, server) = in_process_pipes();
    send_json(
        &mut in_w,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert!(util::recv_json(&lines)["result"].is_object());
    (in_w, lines, server)
}

/// Writes one message as a line.
fn send_json(input: &mut std::io::PipeWriter, message: &serde_json::Value) {
    use std::io::Write;
    input.write_all(format!("{message}\n").as_bytes()).unwrap();
}

/// The tests that run a worker pool in this process take turns: the pool check counts this
/// process's worker threads, which another test's pool would add to.
static POOL_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Worker-pool threads of this test process (named `mcpipe-worker-N`), from /proc: Linux
/// only, `None` elsewhere (the thread counts are then left unchecked). (The tests that run a
/// pool in this process hold [`POOL_TESTS`]; the others drive `mcpipe demo` processes.)
fn worker_threads() -> Option<usize> {
    worker_threads_in("self")
}

/// Worker-pool threads of process `pid` ("self": this one), from /proc (Linux only).
fn worker_threads_in(pid: &str) -> Option<usize> {
    util::threads_of(pid, |name| name.starts_with("mcpipe-worker"))
}

#[test]
fn a_panicking_concurrent_tool_is_an_error_result_and_the_pool_goes_on_and_ends_with_the_server() {
    let _w = watchdog("worker_panic", Duration::from_secs(60));
    let _only_pool = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let (mut in_w, lines, server) = initialized_in_process();
    let mut send = |v: serde_json::Value| send_json(&mut in_w, &v);
    // More panics than threads: each is an isError result, and the two threads survive them.
    for id in 1..=5 {
        send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"boom"}}));
    }
    for _ in 1..=5 {
        let answer = util::recv_json(&lines);
        assert_eq!(answer["result"]["isError"], true, "{answer}");
    }
    // Two naps in parallel on the same two threads: both done in about one nap (a generous
    // bound: one after the other would take 2 s).
    let started = Instant::now();
    for id in 6..=7 {
        send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                    "params":{"name":"nap","arguments":{"ms":1000}}}));
    }
    for _ in 6..=7 {
        assert_eq!(text(&util::recv_json(&lines)["result"]), "napped 1000");
    }
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "{:?}",
        started.elapsed()
    );
    if let Some(threads) = worker_threads() {
        assert_eq!(
            threads, 2,
            "the pool kept its two threads through five panics"
        );
    }
    // End of input: the loop ends, the server (and its pool) is dropped, its threads joined.
    drop(in_w);
    server.join().unwrap();
    if let Some(threads) = worker_threads() {
        assert_eq!(threads, 0, "no worker thread outlives the server");
    }
}

#[test]
fn concurrent_resources_and_prompts_run_on_the_pool_in_both_eras() {
    use std::io::Write;
    let _w = watchdog("concurrent_reads", Duration::from_secs(60));
    let _only_pool = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let (mut in_w, lines, server) = in_process_pipes();
    let mut send = |v: serde_json::Value| {
        in_w.write_all(format!("{v}\n").as_bytes()).unwrap();
    };
    // 2026-07-28 first (no handshake), then the handshake era.
    let meta = json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {} });
    send(json!({"jsonrpc":"2.0","id":"m1","method":"resources/read",
                "params":{"uri":"slow://one","_meta":meta}}));
    send(json!({"jsonrpc":"2.0","id":"m2","method":"resources/read",
                "params":{"uri":"slow://t/missing","_meta":meta}}));
    let mut modern = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let msg = util::recv_json(&lines);
        modern.insert(msg["id"].as_str().unwrap().to_owned(), msg);
    }
    let read = &modern["m1"]["result"];
    assert_eq!(read["contents"][0]["text"], "slowly read", "{read}");
    assert_eq!(read["resultType"], "complete", "{read}");
    assert!(
        read["ttlMs"].is_number(),
        "a read carries caching hints: {read}"
    );
    assert_eq!(modern["m2"]["error"]["code"], -32602, "{}", modern["m2"]);

    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert!(util::recv_json(&lines)["result"].is_object());
    let started = Instant::now();
    send(json!({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"slow://one"}}));
    send(json!({"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"slow"}}));
    send(json!({"jsonrpc":"2.0","id":3,"method":"ping"}));
    let first = util::recv_json(&lines);
    assert_eq!(first["id"], 3, "the ping waits for neither: {first}");
    assert!(
        started.elapsed() < Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    let mut rest = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let msg = util::recv_json(&lines);
        rest.insert(msg["id"].as_i64().unwrap(), msg);
    }
    assert_eq!(rest[&1]["result"]["contents"][0]["text"], "slowly read");
    assert!(
        rest[&1]["result"].get("resultType").is_none(),
        "not in the handshake era"
    );
    assert_eq!(
        rest[&2]["result"]["messages"][0]["content"]["text"],
        "slowly made"
    );
    // Both slow ones ran at once: about 1 s, not 2 (a generous bound).
    assert!(
        started.elapsed() < Duration::from_millis(1800),
        "{:?}",
        started.elapsed()
    );
    send(
        json!({"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"slow://t/missing"}}),
    );
    assert_eq!(util::recv_json(&lines)["error"]["code"], -32002);
    drop(in_w);
    server.join().unwrap();
}

#[test]
fn a_worker_answers_while_a_tool_waits_on_the_loops_thread() {
    let _w = watchdog("worker_beside_loop_wait", Duration::from_secs(60));
    let _only_pool = POOL_TESTS.lock().unwrap_or_else(|p| p.into_inner());
    let (mut in_w, lines, server) = initialized_in_process();
    let mut send = |v: serde_json::Value| send_json(&mut in_w, &v);
    // A nap starts on a worker; then a doze holds the loop's thread for 1.5 s. The nap's
    // answer must not wait for the doze (it did: both came at 1.5 s).
    let started = Instant::now();
    send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                "params":{"name":"nap","arguments":{"ms":100}}}));
    send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                "params":{"name":"doze","arguments":{"ms":1500}}}));
    let first = util::recv_json(&lines);
    let took = started.elapsed();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(text(&first["result"]), "napped 100");
    assert!(
        took < Duration::from_millis(1000),
        "the nap's answer took {took:?}"
    );
    let second = util::recv_json(&lines);
    assert_eq!(text(&second["result"]), "dozed 1500", "{second}");
    drop(in_w);
    server.join().unwrap();
}

/// Polls [`worker_threads_in`] until `want` holds (true at once where /proc is missing);
/// fails after `limit`, with the last count.
fn wait_for_worker_threads(pid: u32, want: impl Fn(usize) -> bool, limit: Duration) -> usize {
    let until = Instant::now() + limit;
    loop {
        let Some(threads) = worker_threads_in(&pid.to_string()) else {
            return 0;
        };
        if want(threads) {
            return threads;
        }
        assert!(
            Instant::now() < until,
            "still {threads} worker threads after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The id of the task a `tools/call` result stands for.
fn task_id(result: &serde_json::Value) -> String {
    result["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("not a task: {result}"))
        .to_owned()
}

#[test]
fn idle_worker_threads_end_after_the_keep_alive_and_a_later_call_starts_one() {
    let _w = watchdog("worker_keep_alive", Duration::from_secs(60));
    let mut demo = Proc::demo(&["--worker-keep-alive-ms", "200"]);
    demo.initialize();
    let pid = demo.pid();
    // A burst: six concurrent sleeps and a task, in one write.
    let mut burst = Vec::new();
    for id in 1..=7 {
        let mut params = json!({ "name": "sleep", "arguments": { "ms": 1000 } });
        if id == 7 {
            params["task"] = json!({ "ttl": 60000 });
        }
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
        burst.extend(serde_json::to_vec(&line).unwrap());
        burst.push(b'\n');
    }
    demo.write_raw(&burst);
    // A thread each while they sleep.
    wait_for_worker_threads(pid, |n| n == 7, Duration::from_secs(5));
    let mut answered = std::collections::BTreeMap::new();
    while answered.len() < 7 {
        let msg = demo.next();
        if let Some(id) = msg.get("id").and_then(|v| v.as_i64()) {
            assert!(answered.insert(id, msg).is_none(), "id {id} answered twice");
        }
    }
    for id in 1..=6 {
        assert_eq!(text(&answered[&id]["result"]), "slept 1000 ms");
    }
    let task = task_id(&answered[&7]["result"]);
    demo.request(8, "tasks/result", json!({ "taskId": task }));
    assert_eq!(text(&demo.result(8)), "slept 1000 ms");
    // Idle, every thread ends after the 200 ms keep-alive (a generous bound).
    wait_for_worker_threads(pid, |n| n == 0, Duration::from_secs(10));
    // A later call, and a later task, start a thread again.
    demo.call(9, "sleep", json!({ "ms": 10 }));
    assert_eq!(text(&demo.result(9)), "slept 10 ms");
    demo.request(
        10,
        "tools/call",
        json!({ "name": "sleep", "arguments": { "ms": 10 }, "task": { "ttl": 60000 } }),
    );
    let task = task_id(&demo.result(10));
    demo.request(11, "tasks/result", json!({ "taskId": task }));
    assert_eq!(text(&demo.result(11)), "slept 10 ms");
    wait_for_worker_threads(pid, |n| n == 0, Duration::from_secs(10));
    demo.close_stdin();
    assert_eq!(demo.wait_exit(), Some(0));
}
