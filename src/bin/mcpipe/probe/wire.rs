//! Checks of the transport and the session: clean stdout, bursts, split and large messages,
//! exiting on EOF and SIGTERM, and the two measurements.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use mcpipe::{Error, RequestOptions, ShutdownStage};
use serde_json::json;

use super::format::{count, ms, rate};
use super::grading::{broken, failure, pass, short, unread_note, unread_since, Level, Outcome};
use super::target::{collect, raw_initialize, raw_request, Target};
use super::tools;

pub(crate) fn stdout_clean(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mut exchanged = 2;
    let mark = client.stats().bad_lines;
    if let Err(e) = client.ping() {
        return failure("ping", &e, unread_since(&client, mark)).outcome();
    }
    match client.list_tools() {
        // An answer of the wrong shape is still a message (the tools check grades its shape).
        Ok(_) | Err(Error::Rpc(_)) => exchanged += 1,
        Err(e @ Error::Protocol { .. }) if e.unreadable_answer().is_none() => exchanged += 1,
        Err(e) => return failure("tools/list", &e, unread_since(&client, mark)).outcome(),
    }
    if let Err(e) = client.pump(target.t(Duration::from_millis(200))) {
        return broken(format!("the server failed: {e}"));
    }
    match client.stats().bad_lines {
        0 => pass(format!(
            "{exchanged} exchanges, every stdout line a message"
        )),
        n => short(format!("{n} lines on stdout were not JSON-RPC messages")),
    }
}

pub(crate) fn init_burst(target: &Target) -> Outcome {
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
        Err(e) => return broken(format!("could not start the server: {e}")),
    };
    let mut burst = raw_initialize("burst-init");
    burst.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    burst.extend(raw_request("burst-list", "tools/list", json!({})));
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return broken(format!("could not write the burst: {e}"));
    }
    let ids: HashSet<String> = ["burst-init", "burst-list"].map(String::from).into();
    let bound = target.t(Duration::from_secs(1));
    let deadline = started + bound + startup;
    let (got, _) = match collect(&mut client, &ids, deadline) {
        Ok(r) => r,
        Err(e) => return broken(format!("the server failed during the burst: {e}")),
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
        (false, n) if n > 0 => short("initialize was answered with an error")
            .by(Level::Must, super::grading::rules::HANDSHAKE),
        (_, n) => short(format!(
            "{n} of 2 requests answered within {} (plus {} for startup){}",
            ms(bound),
            ms(startup),
            unread_note(client.stats().bad_lines)
        )),
    }
}

pub(crate) fn ping_burst(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const N: usize = 1000;
    let mark = client.stats().bad_lines;
    let mut burst = Vec::new();
    let mut ids = HashSet::new();
    for i in 0..N {
        let id = format!("burst-{i}");
        burst.extend(raw_request(&id, "ping", json!({})));
        ids.insert(id);
    }
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return broken(format!("could not write the burst: {e}"));
    }
    let bound = target.t(Duration::from_secs(10));
    let (got, duplicates) = match collect(&mut client, &ids, started + bound) {
        Ok(r) => r,
        Err(e) => return broken(format!("the server failed during the burst: {e}")),
    };
    let took = started.elapsed();
    let errors = got.iter().filter(|r| r.result.is_err()).count();
    if got.len() < N {
        return short(format!(
            "{} of {} pings answered within {}{}",
            count(got.len() as u64),
            count(N as u64),
            ms(bound),
            unread_note(unread_since(&client, mark))
        ));
    }
    if duplicates > 0 {
        return short(format!("{duplicates} pings were answered more than once"));
    }
    if errors > 0 {
        return short(format!("{errors} pings were answered with an error"));
    }
    pass(format!(
        "{} pings answered once each in {}",
        count(N as u64),
        ms(took)
    ))
}

pub(crate) fn split_message(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mark = client.stats().bad_lines;
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
            return broken(format!("could not write: {e}"));
        }
        rest = &rest[n..];
        writes += 1;
        size = size % 7 + 1;
        // A pause, so each piece reaches the server in its own read.
        if let Err(e) = client.pump(Duration::from_millis(2)) {
            return broken(format!("the server failed mid-message: {e}"));
        }
    }
    let ids: HashSet<String> = ["split-1".to_owned()].into();
    let bound = target.t(Duration::from_secs(5));
    match collect(&mut client, &ids, Instant::now() + bound) {
        Ok((got, _)) if got.len() == 1 => pass(format!("answered after {writes} writes")),
        Ok(_) => short(format!(
            "no answer within {} to a request sent in {writes} writes{}",
            ms(bound),
            unread_note(unread_since(&client, mark))
        )),
        Err(e) => broken(format!("the server failed: {e}")),
    }
}

pub(crate) fn eof_exit(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let grace = ms(target.t(Duration::from_secs(1)));
    let shutdown = client.close();
    match shutdown.stage {
        ShutdownStage::StdinClosed | ShutdownStage::AlreadyExited => pass(format!(
            "exited {} after stdin closed ({})",
            ms(shutdown.elapsed),
            shutdown
                .status
                .map_or(String::from("status unknown"), |s| s.to_string())
        )),
        ShutdownStage::Terminated => short(format!(
            "still running {grace} after stdin closed; SIGTERM ended it"
        )),
        _ => short(format!(
            "still running {grace} after stdin closed and {grace} after SIGTERM; SIGKILL ended it"
        )),
    }
}

pub(crate) fn sigterm_exit(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let grace = target.t(Duration::from_secs(1));
    let shutdown = client.terminate(grace);
    match shutdown.stage {
        ShutdownStage::Terminated | ShutdownStage::AlreadyExited => pass(format!(
            "exited {} after SIGTERM ({})",
            ms(shutdown.elapsed),
            shutdown
                .status
                .map_or(String::from("status unknown"), |s| s.to_string())
        )),
        _ => short(format!(
            "still running {} after SIGTERM; SIGKILL ended it",
            ms(grace)
        )),
    }
}

pub(crate) fn large_message(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const SIZE: usize = 1 << 20;
    let text: String = "0123456789abcdef".repeat(SIZE / 16);
    // A read-only `echo` tool's string argument: `text` (the demo's), else its first string
    // property. Tools that may change things are never called.
    let echo_arg = match client.list_tools() {
        Ok(list) => list
            .iter()
            .find(|t| t["name"] == "echo" && tools::safety(t).is_ok())
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
    let mark = client.stats().bad_lines;
    if let Some(arg) = echo_arg {
        match client.call_tool("echo", json!({ arg: text })) {
            Ok(result)
                if result["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(text.as_str())) =>
            {
                pass(format!("1 MiB echoed in {}", ms(started.elapsed())))
            }
            Ok(_) => short("the 1 MiB echo came back without the text sent"),
            Err(e) => short(format!(
                "echo of 1 MiB failed: {e}{}",
                unread_note(unread_since(&client, mark))
            )),
        }
    } else {
        let params = json!({"_meta": {"mcpipe/padding": text}});
        match client.request("ping", Some(params), RequestOptions::new()) {
            Ok(_) => pass(format!("1 MiB ping answered in {}", ms(started.elapsed()))),
            Err(e) => short(format!(
                "a 1 MiB ping failed: {e}{}",
                unread_note(unread_since(&client, mark))
            )),
        }
    }
}

pub(crate) fn latency(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mut samples = Vec::with_capacity(200);
    let mark = client.stats().bad_lines;
    for _ in 0..200 {
        let started = Instant::now();
        if let Err(e) = client.ping() {
            return failure("ping", &e, unread_since(&client, mark)).outcome();
        }
        samples.push(started.elapsed());
    }
    samples.sort();
    let p50 = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    pass(format!("p50 {}, p99 {}", ms(p50), ms(p99)))
}

pub(crate) fn throughput(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    const N: usize = 10_000;
    let mark = client.stats().bad_lines;
    let mut burst = Vec::new();
    let mut ids = HashSet::new();
    for i in 0..N {
        let id = format!("t-{i}");
        burst.extend(raw_request(&id, "ping", json!({})));
        ids.insert(id);
    }
    let started = Instant::now();
    if let Err(e) = client.send_raw(&burst) {
        return broken(format!("could not write: {e}"));
    }
    let bound = target.t(Duration::from_secs(20));
    match collect(&mut client, &ids, started + bound) {
        Ok((got, _)) if got.len() == N => {
            let took = started.elapsed();
            pass(format!(
                "{} ({} pings in {})",
                rate(N as f64 / took.as_secs_f64()),
                count(N as u64),
                ms(took)
            ))
        }
        Ok((got, _)) => short(format!(
            "{} of {} pings answered within {}{}",
            count(got.len() as u64),
            count(N as u64),
            ms(bound),
            unread_note(unread_since(&client, mark))
        )),
        Err(e) => broken(format!("the server failed: {e}")),
    }
}
