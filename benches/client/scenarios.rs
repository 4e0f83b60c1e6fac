//! The client's scenarios: each spawns the server under test through the client, warms up,
//! then times its calls one by one, and takes the CPU time of this process (every thread: the
//! callers and the shared client's IO thread) and of the server around the timed part.

use std::collections::VecDeque;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use mcpipe::{Client, ClientBuilder, RequestOptions, SharedClient};
use serde_json::{json, Value};

/// A server command line.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
}

impl Server {
    fn builder(&self) -> ClientBuilder {
        Client::builder(&self.program).args(&self.args)
    }
}

/// What one run of a scenario measured.
#[derive(Debug, Clone)]
pub(crate) struct Figures {
    pub(crate) calls: u64,
    pub(crate) wall: Duration,
    /// Each call's latency (from its start to its answer in the caller's hands), sorted.
    pub(crate) latencies: Vec<Duration>,
    /// p50 and p99 when only they are known (an SDK client's run reports no more).
    pub(crate) quantiles: Option<(Duration, Duration)>,
    /// CPU time of this process, all its threads, over the timed calls.
    pub(crate) client_cpu: Duration,
    /// CPU time of the server, all its threads, over the timed calls.
    pub(crate) server_cpu: Duration,
}

impl Figures {
    /// The figures of `calls` timed calls: their latencies (sorted here), the wall time, and
    /// the CPU each side used between the two readings (`(client, server)`).
    fn measured(
        calls: u64,
        wall: Duration,
        mut latencies: Vec<Duration>,
        before: (Duration, Duration),
        after: (Duration, Duration),
    ) -> Figures {
        latencies.sort_unstable();
        Figures {
            calls,
            wall,
            latencies,
            quantiles: None,
            client_cpu: after.0.saturating_sub(before.0),
            server_cpu: after.1.saturating_sub(before.1),
        }
    }

    pub(crate) fn calls_per_s(&self) -> f64 {
        self.calls as f64 / self.wall.as_secs_f64()
    }

    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if let Some((p50, p99)) = self.quantiles {
            return if p <= 0.5 { p50 } else { p99 };
        }
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let at = ((self.latencies.len() - 1) as f64 * p).round() as usize;
        self.latencies[at]
    }

    pub(crate) fn client_cpu_per_call(&self) -> Duration {
        self.client_cpu / self.calls.max(1) as u32
    }

    pub(crate) fn server_cpu_per_call(&self) -> Duration {
        self.server_cpu / self.calls.max(1) as u32
    }
}

/// The sum of the on-CPU time (nanoseconds, the first field of `schedstat`) of every thread of
/// process `pid` (`self` for this one). Threads that ended are not counted: the scenarios read
/// it while every thread that worked is still alive.
pub(crate) fn cpu_of(pid: &str) -> Duration {
    let mut total = 0u64;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}

/// The text of call `i`: 100 bytes, the first ten the call's number, checked in the answer.
pub(crate) fn text_of(i: u64) -> String {
    let mut text = format!("{i:010}");
    text.push_str(&"x".repeat(90));
    text
}

/// Checks an echo result against the text sent.
fn check(result: &Value, text: &str) -> Result<(), String> {
    match result["content"][0]["text"].as_str() {
        Some(got) if got == text => Ok(()),
        _ => Err(format!("wrong echo result for {text:.10}: {result}")),
    }
}

fn server_pid(pid: Option<u32>) -> Result<String, String> {
    pid.map(|p| p.to_string())
        .ok_or_else(|| "the server has no pid".to_owned())
}

/// Echo calls `from..to` made one after another through `call`, each answer checked; each
/// one's latency goes to `latencies` when given.
fn echo_calls(
    range: std::ops::Range<u64>,
    mut call: impl FnMut(Value) -> Result<Value, mcpipe::Error>,
    mut latencies: Option<&mut Vec<Duration>>,
) -> Result<(), String> {
    for i in range {
        let text = text_of(i);
        let t = Instant::now();
        let result = call(json!({ "text": text })).map_err(|e| e.to_string())?;
        if let Some(latencies) = latencies.as_deref_mut() {
            latencies.push(t.elapsed());
        }
        check(&result, &text)?;
    }
    Ok(())
}

/// `Client` ping-pong: `calls` sequential `call_tool("echo")` after `warmup` untimed ones.
pub(crate) fn ping_pong(server: &Server, warmup: u64, calls: u64) -> Result<Figures, String> {
    let mut client = server
        .builder()
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let pid = server_pid(client.pid())?;
    echo_calls(0..warmup, |args| client.call_tool("echo", args), None)?;
    let mut latencies = Vec::with_capacity(calls as usize);
    let (cpu0, server0) = (cpu_of("self"), cpu_of(&pid));
    let started = Instant::now();
    echo_calls(
        0..calls,
        |args| client.call_tool("echo", args),
        Some(&mut latencies),
    )?;
    let wall = started.elapsed();
    let (cpu1, server1) = (cpu_of("self"), cpu_of(&pid));
    client.close();
    Ok(Figures::measured(
        calls,
        wall,
        latencies,
        (cpu0, server0),
        (cpu1, server1),
    ))
}

/// `SharedClient`: `threads` caller threads, `calls` blocking `call_tool("echo")` in all.
pub(crate) fn shared(
    server: &Server,
    threads: usize,
    warmup: u64,
    calls: u64,
) -> Result<Figures, String> {
    let client = server
        .builder()
        .spawn_shared()
        .map_err(|e| format!("spawn_shared: {e}"))?;
    let pid = server_pid(client.pid())?;
    echo_calls(0..warmup, |args| client.call_tool("echo", args), None)?;
    let per_thread = calls / threads as u64;
    // Every thread is alive while the CPU time is read, before and after the timed calls.
    let ready = Arc::new(Barrier::new(threads + 1));
    let done = Arc::new(Barrier::new(threads + 1));
    let measured = Arc::new(Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for t in 0..threads {
        let (client, ready, done, measured) = (
            client.clone(),
            ready.clone(),
            done.clone(),
            measured.clone(),
        );
        handles.push(std::thread::spawn(
            move || -> Result<Vec<Duration>, String> {
                ready.wait();
                let mut latencies = Vec::with_capacity(per_thread as usize);
                let first = t as u64 * per_thread;
                let outcome = echo_calls(
                    first..first + per_thread,
                    |args| client.call_tool("echo", args),
                    Some(&mut latencies),
                );
                done.wait();
                measured.wait();
                outcome.map(|()| latencies)
            },
        ));
    }
    let (cpu0, server0) = (cpu_of("self"), cpu_of(&pid));
    let started = Instant::now();
    ready.wait();
    done.wait();
    let wall = started.elapsed();
    let (cpu1, server1) = (cpu_of("self"), cpu_of(&pid));
    measured.wait();
    let mut latencies = Vec::with_capacity(calls as usize);
    let mut failure = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(mine)) => latencies.extend(mine),
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some("a caller thread panicked".to_owned()),
        }
    }
    client.close();
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(Figures::measured(
        per_thread * threads as u64,
        wall,
        latencies,
        (cpu0, server0),
        (cpu1, server1),
    ))
}

/// `SharedClient::start` from one thread with up to `window` calls in flight, each waited for
/// in the order started (its latency: from its start to the return of its wait).
pub(crate) fn pipelined(
    server: &Server,
    window: usize,
    warmup: u64,
    calls: u64,
) -> Result<Figures, String> {
    let client = server
        .builder()
        .spawn_shared()
        .map_err(|e| format!("spawn_shared: {e}"))?;
    let pid = server_pid(client.pid())?;
    let run = |client: &SharedClient, from: u64, count: u64, latencies: &mut Vec<Duration>| {
        let mut in_flight = VecDeque::with_capacity(window);
        let options = RequestOptions::new();
        let mut next = from;
        while next < from + count || !in_flight.is_empty() {
            while next < from + count && in_flight.len() < window {
                let text = text_of(next);
                let params = json!({ "name": "echo", "arguments": { "text": text } });
                let call = client
                    .start("tools/call", Some(params), &options)
                    .map_err(|e| e.to_string())?;
                in_flight.push_back((call, text, Instant::now()));
                next += 1;
            }
            if let Some((call, text, at)) = in_flight.pop_front() {
                let result = call.wait().map_err(|e| e.to_string())?;
                latencies.push(at.elapsed());
                check(&result, &text)?;
            }
        }
        Ok::<(), String>(())
    };
    run(&client, 0, warmup, &mut Vec::new())?;
    let mut latencies = Vec::with_capacity(calls as usize);
    let (cpu0, server0) = (cpu_of("self"), cpu_of(&pid));
    let started = Instant::now();
    run(&client, warmup, calls, &mut latencies)?;
    let wall = started.elapsed();
    let (cpu1, server1) = (cpu_of("self"), cpu_of(&pid));
    client.close();
    Ok(Figures::measured(
        calls,
        wall,
        latencies,
        (cpu0, server0),
        (cpu1, server1),
    ))
}
