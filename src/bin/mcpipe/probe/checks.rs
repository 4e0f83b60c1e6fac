//! The probe's checks. Each one starts a fresh server, bounds every wait, and shuts the server
//! down (bounded) when it returns.

use std::collections::HashSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use mcpipe::{
    Client, ClientBuilder, Era, Error, ErrorCode, RequestOptions, Response, ShutdownStage,
};
use serde_json::{json, Value};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Pass,
    Fail,
    Skip,
}

impl Status {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// A verdict with its one-line reason.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) status: Status,
    pub(crate) detail: String,
}

fn pass(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Pass,
        detail: detail.into(),
    }
}

fn fail(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Fail,
        detail: detail.into(),
    }
}

fn skip(detail: impl Into<String>) -> Outcome {
    Outcome {
        status: Status::Skip,
        detail: detail.into(),
    }
}

/// One check of the battery.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) about: &'static str,
    /// Skipped when the handshake check failed (nothing else can work then).
    pub(crate) needs_handshake: bool,
    pub(crate) run: fn(&Target) -> Outcome,
}

/// Every check, in the order they run.
pub(crate) const CHECKS: &[Check] = &[
    Check {
        name: "handshake",
        about: "initialize, a supported protocol version, notifications/initialized",
        needs_handshake: false,
        run: handshake,
    },
    Check {
        name: "stdout-clean",
        about: "nothing but JSON-RPC messages on stdout (no banners, no logs)",
        needs_handshake: true,
        run: stdout_clean,
    },
    Check {
        name: "init-burst",
        about: "initialize, initialized and tools/list in one write: answered within 1 s",
        needs_handshake: true,
        run: init_burst,
    },
    Check {
        name: "ping-burst",
        about: "1,000 pings in one write: each answered exactly once",
        needs_handshake: true,
        run: ping_burst,
    },
    Check {
        name: "split-message",
        about: "a request arriving in many small writes is answered",
        needs_handshake: true,
        run: split_message,
    },
    Check {
        name: "malformed-json",
        about: "a line that is not JSON gets -32700 and the server survives",
        needs_handshake: true,
        run: malformed_json,
    },
    Check {
        name: "invalid-request",
        about: "valid JSON that is not a request gets -32600 and the server survives",
        needs_handshake: true,
        run: invalid_request,
    },
    Check {
        name: "unknown-method",
        about: "an unknown method gets -32601",
        needs_handshake: true,
        run: unknown_method,
    },
    Check {
        name: "tool-error",
        about: "a failing tool answers with isError (uses `fail`, else the first tool); the server survives",
        needs_handshake: true,
        run: tool_error,
    },
    Check {
        name: "notifications",
        about: "notifications (unknown, cancel of an unknown id, stray progress) get no response",
        needs_handshake: true,
        run: notifications,
    },
    Check {
        name: "eof-exit",
        about: "the server exits within 1 s of stdin closing",
        needs_handshake: true,
        run: eof_exit,
    },
    Check {
        name: "sigterm-exit",
        about: "the server exits within 1 s of SIGTERM",
        needs_handshake: true,
        run: sigterm_exit,
    },
    Check {
        name: "cancellation",
        about: "a cancelled `sleep` call stops: no late answer, no more progress (needs `sleep`)",
        needs_handshake: true,
        run: cancellation,
    },
    Check {
        name: "large-message",
        about: "a 1 MiB request is answered (echoed when the server has `echo`)",
        needs_handshake: true,
        run: large_message,
    },
    Check {
        name: "latency",
        about: "ping round-trip latency over 200 sequential pings (p50/p99)",
        needs_handshake: true,
        run: latency,
    },
    Check {
        name: "throughput",
        about: "pings answered per second, 10,000 pipelined",
        needs_handshake: true,
        run: throughput,
    },
];

/// The server command under test.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    command: Vec<OsString>,
}

impl Target {
    pub(crate) fn new(command: Vec<OsString>) -> Target {
        Target { command }
    }

    pub(crate) fn display(&self) -> String {
        self.command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A builder with the probe's deadlines: every wait is bounded, and closing takes at most
    /// about 2 s. The checks are about the handshake era (`initialize`, `ping`), so the client
    /// skips the `server/discover` probe and its timeout.
    fn builder(&self) -> ClientBuilder {
        Client::builder(&self.command[0])
            .args(&self.command[1..])
            .era(Era::Legacy)
            .client_info("mcpipe-probe", env!("CARGO_PKG_VERSION"))
            .init_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5))
            .max_total(Duration::from_secs(30))
            .close_timeouts(Duration::from_secs(1), Duration::from_secs(1))
            .log_bad_lines(false)
    }

    /// A fresh server, after the handshake.
    fn connect(&self) -> Result<Client, Outcome> {
        self.builder()
            .spawn()
            .map_err(|e| fail(format!("could not connect: {e}")))
    }
}

/// Waits for responses to the given ids among the stray responses, until all arrived or the
/// deadline passed. Returns the responses that arrived, by id, and how many arrived twice.
fn collect(
    client: &mut Client,
    ids: &HashSet<String>,
    deadline: Instant,
) -> Result<(Vec<Response>, usize), Error> {
    let mut got = Vec::new();
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    while seen.len() < ids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Some(response) = client.next_stray_response(left)? else {
            break;
        };
        let Some(id) = response.id.as_ref().and_then(|id| id.as_str()) else {
            continue;
        };
        if !ids.contains(id) {
            continue;
        }
        if !seen.insert(id.to_owned()) {
            duplicates += 1;
            continue;
        }
        got.push(response);
    }
    Ok((got, duplicates))
}

fn raw_request(id: &str, method: &str, params: Value) -> Vec<u8> {
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    line.into_bytes()
}

/// Whether the server still answers a ping, as a verdict on failure.
fn survives(client: &mut Client, after: &str) -> Result<(), Outcome> {
    match client.request(
        "ping",
        None,
        RequestOptions::new().timeout(Duration::from_secs(2)),
    ) {
        Ok(_) => Ok(()),
        // Any answer means the server is alive.
        Err(Error::Rpc(_)) => Ok(()),
        Err(e) => Err(fail(format!("the server did not survive {after}: {e}"))),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn handshake(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let info = &client.initialize_result()["serverInfo"];
    let detail = format!(
        "protocol {}, server {} {}",
        client.protocol_version(),
        info["name"].as_str().unwrap_or("(unnamed)"),
        info["version"].as_str().unwrap_or("")
    );
    match survives(&mut client, "the handshake") {
        Ok(()) => pass(detail),
        Err(o) => o,
    }
}

fn stdout_clean(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mut exchanged = 2;
    if let Err(e) = client.ping() {
        return fail(format!("ping failed: {e}"));
    }
    match client.list_tools() {
        Ok(_) | Err(Error::Rpc(_)) => exchanged += 1,
        Err(e) => return fail(format!("tools/list failed: {e}")),
    }
    if let Err(e) = client.pump(Duration::from_millis(200)) {
        return fail(format!("the server failed: {e}"));
    }
    match client.stats().bad_lines {
        0 => pass(format!(
            "{exchanged} exchanges, every stdout line a message"
        )),
        n => fail(format!("{n} lines on stdout were not JSON-RPC messages")),
    }
}

fn init_burst(target: &Target) -> Outcome {
    // Starting up is not part of the burst: measure it with a normal handshake first, and
    // allow it on top of the 1 s.
    let startup_began = Instant::now();
    let startup = match target.connect() {
        Ok(mut c) => {
            let startup = startup_began.elapsed();
            c.close();
            startup
        }
        Err(o) => return o,
    };
    let mut client = match target.builder().initialize(false).spawn() {
        Ok(c) => c,
        Err(e) => return fail(format!("could not start the server: {e}")),
    };
    let mut burst = raw_request(
        "burst-init",
        "initialize",
        json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "mcpipe-probe", "version": env!("CARGO_PKG_VERSION")},
        }),
    );
    burst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    burst.extend(raw_request("burst-list", "tools/list", json!({})));
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return fail(format!("could not write the burst: {e}"));
    }
    let ids: HashSet<String> = ["burst-init", "burst-list"].map(String::from).into();
    let deadline = started + Duration::from_secs(1) + startup;
    let (got, _) = match collect(&mut client, &ids, deadline) {
        Ok(r) => r,
        Err(e) => return fail(format!("the server failed during the burst: {e}")),
    };
    let took = started.elapsed();
    let init_ok = got
        .iter()
        .any(|r| r.id == Some("burst-init".into()) && r.result.is_ok());
    match (init_ok, got.len()) {
        (true, 2) => pass(format!(
            "initialize and tools/list answered in {} (startup about {})",
            ms(took),
            ms(startup)
        )),
        (false, n) if n > 0 => fail("initialize was answered with an error"),
        (_, n) => fail(format!(
            "{n} of 2 requests answered within 1 s (plus {} for startup)",
            ms(startup)
        )),
    }
}

fn ping_burst(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const N: usize = 1000;
    let mut burst = Vec::new();
    let mut ids = HashSet::new();
    for i in 0..N {
        let id = format!("burst-{i}");
        burst.extend(raw_request(&id, "ping", json!({})));
        ids.insert(id);
    }
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return fail(format!("could not write the burst: {e}"));
    }
    let (got, duplicates) = match collect(&mut client, &ids, started + Duration::from_secs(10)) {
        Ok(r) => r,
        Err(e) => return fail(format!("the server failed during the burst: {e}")),
    };
    let took = started.elapsed();
    let errors = got.iter().filter(|r| r.result.is_err()).count();
    if got.len() < N {
        return fail(format!("{} of {N} pings answered within 10 s", got.len()));
    }
    if duplicates > 0 {
        return fail(format!("{duplicates} pings were answered more than once"));
    }
    if errors > 0 {
        return fail(format!("{errors} pings were answered with an error"));
    }
    pass(format!("{N} pings answered once each in {}", ms(took)))
}

fn split_message(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let line = raw_request(
        "split-1",
        "ping",
        json!({"_meta": {"mcpipe/probe": "split"}}),
    );
    let mut writes = 0;
    let mut rest = &line[..];
    let mut size = 1;
    while !rest.is_empty() {
        let n = size.min(rest.len());
        if let Err(e) = client.send_raw(&rest[..n]) {
            return fail(format!("could not write: {e}"));
        }
        rest = &rest[n..];
        writes += 1;
        size = size % 7 + 1;
        // A pause, so each piece reaches the server in its own read.
        if let Err(e) = client.pump(Duration::from_millis(2)) {
            return fail(format!("the server failed mid-message: {e}"));
        }
    }
    let ids: HashSet<String> = ["split-1".to_owned()].into();
    match collect(&mut client, &ids, Instant::now() + Duration::from_secs(5)) {
        Ok((got, _)) if got.len() == 1 => pass(format!("answered after {writes} writes")),
        Ok(_) => fail(format!(
            "no answer within 5 s to a request sent in {writes} writes"
        )),
        Err(e) => fail(format!("the server failed: {e}")),
    }
}

/// Sends `line`, expects an error response with `code` (and, when given, the id), then a ping.
fn expect_error(target: &Target, line: &[u8], code: ErrorCode, id: Option<&str>) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    if let Err(e) = client.send_raw(line) {
        return fail(format!("could not write: {e}"));
    }
    let response = match client.next_stray_response(Duration::from_secs(2)) {
        Ok(response) => response,
        Err(e) => return fail(format!("the server did not survive: {e}")),
    };
    let verdict = match response {
        None => match survives(&mut client, "the bad line") {
            Ok(()) => fail("no error response within 2 s (the server survived)"),
            Err(o) => o,
        },
        Some(Response { result: Ok(_), .. }) => fail("answered with a result, not an error"),
        Some(Response {
            id: got_id,
            result: Err(error),
        }) => {
            if error.code != code {
                fail(format!("error code {} instead of {}", error.code, code))
            } else if id.is_some() && got_id.as_ref().and_then(|i| i.as_str()) != id {
                let shown = got_id.map_or(String::from("null"), |i| i.to_string());
                fail(format!(
                    "error {} carried id {shown}, not the request's",
                    code
                ))
            } else {
                pass(format!("error {}: {}", error.code, error.message))
            }
        }
    };
    if verdict.status == Status::Pass {
        if let Err(o) = survives(&mut client, "the bad line") {
            return o;
        }
    }
    verdict
}

fn malformed_json(target: &Target) -> Outcome {
    expect_error(
        target,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"bad-json\",\"method\":\"ping\",\n",
        ErrorCode::PARSE_ERROR,
        None,
    )
}

fn invalid_request(target: &Target) -> Outcome {
    expect_error(
        target,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"bad-request\",\"method\":42}\n",
        ErrorCode::INVALID_REQUEST,
        Some("bad-request"),
    )
}

fn unknown_method(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    match client.request(
        "mcpipe/no-such-method",
        Some(json!({})),
        RequestOptions::new(),
    ) {
        Err(Error::Rpc(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
            pass(format!("error -32601: {}", e.message))
        }
        Err(Error::Rpc(e)) => fail(format!("error code {} instead of -32601", e.code)),
        Err(e) => fail(e.to_string()),
        Ok(_) => fail("an unknown method was answered with a result"),
    }
}

fn tool_error(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let tools = match client.list_tools() {
        Ok(t) => t,
        Err(Error::Rpc(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
            return skip("the server has no tools")
        }
        Err(e) => return fail(format!("tools/list failed: {e}")),
    };
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    let (name, arguments) = if names.contains(&"fail") {
        ("fail", json!({"message": "probe"}))
    } else if let Some(first) = names.first() {
        // Arguments the tool cannot expect: a validation failure is the likely answer.
        (*first, json!({"mcpipe-probe-unexpected": true}))
    } else {
        return skip("the server lists no tools");
    };
    let verdict = match client.call_tool(name, arguments) {
        Ok(result) if result["isError"] == true => pass(format!("{name}: isError result")),
        Ok(_) if name == "fail" => fail("`fail` returned a result without isError"),
        Ok(_) => skip(format!(
            "{name} succeeded with unexpected arguments; no way to make it fail"
        )),
        Err(Error::Rpc(e)) if name != "fail" && e.code == ErrorCode::INVALID_PARAMS => pass(
            format!("{name}: -32602 for bad arguments (isError is preferred from 2025-11-25)"),
        ),
        Err(e) => fail(format!("{name}: {e}")),
    };
    match survives(&mut client, "the tool error") {
        Ok(()) => verdict,
        Err(o) => o,
    }
}

fn notifications(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let lines = concat!(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/mcpipe-probe\",\"params\":{}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":987654321}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"nobody\",\"progress\":1}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"mcpipe/probe-unknown\"}\n",
    );
    if let Err(e) = client.send_raw(lines.as_bytes()) {
        return fail(format!("could not write: {e}"));
    }
    if let Err(o) = survives(&mut client, "the notifications") {
        return o;
    }
    if let Err(e) = client.pump(Duration::from_millis(300)) {
        return fail(format!("the server failed: {e}"));
    }
    match client.next_stray_response(Duration::ZERO) {
        Ok(None) => pass("4 notifications, no response"),
        Ok(Some(r)) => fail(format!(
            "a notification was answered: {}",
            mcpipe::Message::Response(r).to_line().escape_ascii()
        )),
        Err(e) => fail(format!("the server failed: {e}")),
    }
}

fn eof_exit(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let shutdown = client.close();
    match shutdown.stage {
        ShutdownStage::StdinClosed | ShutdownStage::AlreadyExited => pass(format!(
            "exited {} after stdin closed ({})",
            ms(shutdown.elapsed),
            shutdown
                .status
                .map_or(String::from("status unknown"), |s| s.to_string())
        )),
        ShutdownStage::Terminated => fail("still running 1 s after stdin closed; SIGTERM ended it"),
        _ => fail("still running 1 s after stdin closed and 1 s after SIGTERM; SIGKILL ended it"),
    }
}

fn sigterm_exit(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let shutdown = client.terminate(Duration::from_secs(1));
    match shutdown.stage {
        ShutdownStage::Terminated | ShutdownStage::AlreadyExited => pass(format!(
            "exited {} after SIGTERM ({})",
            ms(shutdown.elapsed),
            shutdown
                .status
                .map_or(String::from("status unknown"), |s| s.to_string())
        )),
        _ => fail("still running 1 s after SIGTERM; SIGKILL ended it"),
    }
}

fn cancellation(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    match client.list_tools() {
        Ok(tools) if tools.iter().any(|t| t["name"] == "sleep") => {}
        Ok(_) | Err(Error::Rpc(_)) => return skip("the server has no `sleep` tool"),
        Err(e) => return fail(format!("tools/list failed: {e}")),
    }
    let mut progress = 0;
    let mut on_progress = |_: &mcpipe::Progress| progress += 1;
    let result = client.call_tool_with(
        "sleep",
        json!({"ms": 2000}),
        RequestOptions::new()
            .timeout(Duration::from_millis(400))
            .reset_on_progress(false)
            .on_progress(&mut on_progress),
    );
    match result {
        Err(Error::Timeout { .. }) => {}
        Ok(_) => return fail("sleep 2000 ms answered within 400 ms"),
        Err(e) => return fail(format!("sleep failed: {e}")),
    }
    // Past the time the call would have ended, nothing more may arrive for it.
    if let Err(e) = client.pump(Duration::from_millis(2200)) {
        return fail(format!("the server failed after the cancellation: {e}"));
    }
    let stats = client.stats().clone();
    if stats.late_responses > 0 {
        return fail("the cancelled call was answered anyway");
    }
    // One progress notification may cross the cancellation on the wire.
    if stats.late_progress > 1 {
        return fail(format!(
            "{} progress notifications after the cancellation",
            stats.late_progress
        ));
    }
    if let Err(o) = survives(&mut client, "the cancellation") {
        return o;
    }
    pass(format!(
        "stopped after {progress} progress notifications; no late answer"
    ))
}

fn large_message(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const SIZE: usize = 1 << 20;
    let text: String = "0123456789abcdef".repeat(SIZE / 16);
    // The echo tool's string argument: `text` (the demo's), else its first string property.
    let echo_arg = match client.list_tools() {
        Ok(tools) => tools
            .iter()
            .find(|t| t["name"] == "echo")
            .and_then(|t| t["inputSchema"]["properties"].as_object())
            .and_then(|props| {
                if props.contains_key("text") {
                    return Some(String::from("text"));
                }
                props
                    .iter()
                    .find(|(_, schema)| schema["type"] == "string")
                    .map(|(name, _)| name.clone())
            }),
        Err(_) => None,
    };
    let started = Instant::now();
    if let Some(arg) = echo_arg {
        match client.call_tool("echo", json!({ arg: text })) {
            Ok(result)
                if result["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(text.as_str())) =>
            {
                pass(format!("1 MiB echoed in {}", ms(started.elapsed())))
            }
            Ok(_) => fail("the 1 MiB echo came back without the text sent"),
            Err(e) => fail(format!("echo of 1 MiB failed: {e}")),
        }
    } else {
        let params = json!({"_meta": {"mcpipe/padding": text}});
        match client.request("ping", Some(params), RequestOptions::new()) {
            Ok(_) => pass(format!("1 MiB ping answered in {}", ms(started.elapsed()))),
            Err(e) => fail(format!("a 1 MiB ping failed: {e}")),
        }
    }
}

fn latency(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mut samples = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        if let Err(e) = client.ping() {
            return fail(format!("ping failed: {e}"));
        }
        samples.push(started.elapsed());
    }
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    pass(format!("p50 {}, p99 {}", ms_fine(p50), ms_fine(p99)))
}

fn ms_fine(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn throughput(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const N: usize = 10_000;
    let mut burst = Vec::new();
    let mut ids = HashSet::new();
    for i in 0..N {
        let id = format!("t-{i}");
        burst.extend(raw_request(&id, "ping", json!({})));
        ids.insert(id);
    }
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return fail(format!("could not write: {e}"));
    }
    match collect(&mut client, &ids, started + Duration::from_secs(20)) {
        Ok((got, _)) if got.len() == N => {
            let secs = started.elapsed().as_secs_f64();
            pass(format!(
                "{:.0} requests/s ({N} pings in {:.0} ms)",
                N as f64 / secs,
                secs * 1000.0
            ))
        }
        Ok((got, _)) => fail(format!("{} of {N} pings answered within 20 s", got.len())),
        Err(e) => fail(format!("the server failed: {e}")),
    }
}
