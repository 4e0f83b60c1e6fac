//! The `SharedClient` half of the soak test (`scripts/soak.py` runs it and samples it).
//!
//! Run: `cargo run --release --example soak_client -- --seconds 600 --threads 6 --seed 1 --
//!       target/release/mcpipe demo`
//!
//! One `SharedClient` over the server command, used from `--threads` threads for `--seconds`:
//! echo calls (their text must come back), `sleep` calls with progress that are waited for,
//! cancelled at a random time, dropped, or given a timeout shorter than the sleep; tasks;
//! lists, resources and pings; and now and then `restart()`. A retry policy restarts a
//! server that died (the soak kills it from outside). Each call's wait is checked against its
//! timeout plus the retry policy's budget: a call that waits longer is a hang.
//!
//! On stderr, as lines `soak_client: {json}`: a status every 10 s, each invariant breach
//! (`{"violation": ...}`) as it happens, and a final summary (`{"final": true, ...}`) after
//! `close`, with the threads and fds the process holds then against those it held before the
//! client existed. Exit status 1 when a breach was seen.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpipe::{Client, Error, RequestOptions, RetryPolicy, SharedClient, TaskOptions};
use serde_json::{json, Value};

/// The client's default timeout for each request.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The longest any one call may wait: a timeout, the retry policy's attempts and pauses, a
/// restart's handshake and shutdown (at most 2 + 2 + 1 s), and slack for a loaded machine.
const HANG: Duration = Duration::from_secs(60);

/// A small deterministic generator (xorshift64*), so a seed repeats a thread's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What all threads count.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    ok: AtomicU64,
    violations: AtomicU64,
    restarts: AtomicU64,
    notifications: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    /// The first few messages of each kind of error, for the summary.
    samples: Mutex<BTreeMap<String, Vec<String>>>,
}

impl Tally {
    fn error(&self, what: &str, e: &Error) {
        let kind = match e {
            Error::Timeout { .. } => "timeout",
            Error::ServerExited { .. } => "server_exited",
            Error::Closed => "closed",
            Error::Cancelled => "cancelled",
            Error::RetriesExhausted { .. } => "retries_exhausted",
            Error::Rpc(_) => "rpc",
            Error::Io { .. } => "io",
            Error::Protocol { .. } => "protocol",
            _ => "other",
        };
        let key = format!("{what}:{kind}");
        *self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        let kept = samples.entry(key).or_default();
        if kept.len() < 3 {
            kept.push(e.to_string());
        }
        // A protocol error or an unexpected kind means the client misread something; an error
        // answer means the server did, but for a task its restarted server never knew.
        let lost_task = what == "task" && e.to_string().contains("unknown task");
        if matches!(kind, "protocol" | "other" | "io") || (kind == "rpc" && !lost_task) {
            self.violation(&format!("{what} failed with {kind}: {e}"));
        }
    }

    fn violation(&self, what: &str) {
        self.violations.fetch_add(1, Ordering::Relaxed);
        say(&json!({ "violation": what }));
    }
}

fn say(value: &Value) {
    mcpipe::stderr_line(&format!("soak_client: {value}"));
}

struct Options {
    seconds: u64,
    threads: usize,
    seed: u64,
    command: Vec<String>,
}

fn parse() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        seconds: 600,
        threads: 6,
        seed: 1,
        command: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--seconds" => options.seconds = number("--seconds")?,
            "--threads" => options.threads = number("--threads")?.clamp(1, 64) as usize,
            "--seed" => options.seed = number("--seed")?,
            "--" => {
                options.command = args.by_ref().collect();
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if options.command.is_empty() {
        return Err("no server command after --".into());
    }
    Ok(options)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            mcpipe::stderr_line(&format!("soak_client: {e}"));
            ExitCode::from(2)
        }
    }
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// The process's open fds and what each names, for a report.
fn fd_list() -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    let target = std::fs::read_link(e.path()).unwrap_or_default();
                    format!("{}->{}", e.file_name().to_string_lossy(), target.display())
                })
                .collect()
        })
        .unwrap_or_default();
    fds.sort();
    fds
}

fn run() -> Result<bool, String> {
    let options = parse()?;
    // The first line on stderr opens the sink's own description of it, kept for the process's
    // life: counted before, so that the count after close compares like with like.
    say(&json!({"started": true}));
    let threads_before = count("/proc/self/task");
    let fds_before = count("/proc/self/fd");
    let fd_list_before = fd_list();
    let tally = Arc::new(Tally::default());
    let counter = Arc::clone(&tally);
    let client = Client::builder(&options.command[0])
        .args(&options.command[1..])
        .timeout(TIMEOUT)
        .retry(RetryPolicy::default())
        .on_notification(move |_n| {
            counter.notifications.fetch_add(1, Ordering::Relaxed);
        })
        .spawn_shared()
        .map_err(|e| format!("spawn: {e}"))?;
    let start = Instant::now();
    let end = start + Duration::from_secs(options.seconds);
    std::thread::scope(|s| {
        for index in 0..options.threads {
            let client = &client;
            let tally = &tally;
            let seed = options.seed ^ ((index as u64 + 1) * 0x9E37_79B9_7F4A_7C15) | 1;
            s.spawn(move || worker(client, tally, Rng(seed), index, end));
        }
        s.spawn(|| {
            while Instant::now() < end {
                std::thread::sleep(Duration::from_secs(10).min(end - Instant::now()));
                status(&client, &tally, start, false, Value::Null);
            }
        });
    });
    let shutdown = client.close();
    drop(client);
    // The IO thread is joined by close; the spawner thread ends once its last server is
    // reaped: give it a moment.
    let mut threads_after = count("/proc/self/task");
    for _ in 0..50 {
        if threads_after <= threads_before {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        threads_after = count("/proc/self/task");
    }
    let fds_after = count("/proc/self/fd");
    if threads_after > threads_before {
        tally.violation(&format!(
            "{threads_after} threads after close, {threads_before} before the client"
        ));
    }
    if fds_after > fds_before {
        tally.violation(&format!(
            "{fds_after} fds after close, {fds_before} before the client: {:?}, before {:?}",
            fd_list(),
            fd_list_before
        ));
    }
    let extra = json!({
        "shutdown": format!("{shutdown:?}"),
        "threads_before": threads_before, "threads_after": threads_after,
        "fds_before": fds_before, "fds_after": fds_after,
    });
    status_of(&tally, start, None, true, extra);
    Ok(tally.violations.load(Ordering::Relaxed) == 0)
}

fn status(client: &SharedClient, tally: &Tally, start: Instant, last: bool, extra: Value) {
    status_of(tally, start, Some(client), last, extra);
}

fn status_of(
    tally: &Tally,
    start: Instant,
    client: Option<&SharedClient>,
    last: bool,
    extra: Value,
) {
    let errors = tally
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let samples = if last {
        json!(*tally.samples.lock().unwrap_or_else(|p| p.into_inner()))
    } else {
        Value::Null
    };
    let stats = client.map(|c| format!("{:?}", c.stats()));
    say(&json!({
        "final": last,
        "t": start.elapsed().as_secs_f64(),
        "calls": tally.calls.load(Ordering::Relaxed),
        "ok": tally.ok.load(Ordering::Relaxed),
        "restarts": tally.restarts.load(Ordering::Relaxed),
        "notifications": tally.notifications.load(Ordering::Relaxed),
        "violations": tally.violations.load(Ordering::Relaxed),
        "errors": errors,
        "error_samples": samples,
        "stats": stats,
        "extra": extra,
    }));
}

/// Runs one call, checking that it returns within `HANG`, and counts its outcome.
fn timed<T>(tally: &Tally, what: &str, f: impl FnOnce() -> Result<T, Error>) -> Option<T> {
    tally.calls.fetch_add(1, Ordering::Relaxed);
    let began = Instant::now();
    let outcome = f();
    let took = began.elapsed();
    if took > HANG {
        tally.violation(&format!("{what} took {took:?}"));
    }
    match outcome {
        Ok(v) => {
            tally.ok.fetch_add(1, Ordering::Relaxed);
            Some(v)
        }
        Err(e) => {
            tally.error(what, &e);
            None
        }
    }
}

fn worker(client: &SharedClient, tally: &Tally, mut rng: Rng, index: usize, end: Instant) {
    let mut next_restart = Instant::now() + Duration::from_secs(15 + rng.below(30));
    while Instant::now() < end {
        if index == 0 && Instant::now() >= next_restart {
            next_restart = Instant::now() + Duration::from_secs(15 + rng.below(30));
            if timed(tally, "restart", || client.restart()).is_some() {
                tally.restarts.fetch_add(1, Ordering::Relaxed);
            }
            continue;
        }
        match rng.below(20) {
            0..=7 => {
                let text = format!("t{index}-{}", rng.next());
                let options = RequestOptions::new().idempotent(true);
                let params = json!({"name": "echo", "arguments": {"text": text}});
                if let Some(result) = timed(tally, "echo", || {
                    client.request("tools/call", Some(params), options)
                }) {
                    if result["content"][0]["text"] != json!(text) {
                        tally.violation(&format!("echo {text:?} answered with {result}"));
                    }
                }
            }
            8..=11 => sleep_call(client, tally, &mut rng),
            12..=13 => {
                let ms = [50, 300, 900][rng.below(3) as usize];
                let options = TaskOptions::new().deadline(Duration::from_secs(20));
                let args = json!({ "ms": ms });
                if let Some(result) = timed(tally, "task", || {
                    client.call_tool_as_task("sleep", args, options)
                }) {
                    if result["content"][0]["text"] != json!(format!("slept {ms} ms")) {
                        tally.violation(&format!("task sleep {ms} answered with {result}"));
                    }
                }
            }
            14 => {
                timed(tally, "list_tools", || client.list_tools());
            }
            15 => {
                timed(tally, "read_resource", || {
                    client.read_resource("mcpipe://demo/echo/soak")
                });
            }
            16 => {
                timed(tally, "ping", || client.ping());
            }
            17 => {
                // A burst of starts, all waited for.
                let calls: Vec<_> = (0..rng.below(20) + 1)
                    .filter_map(|i| {
                        let params =
                            json!({"name": "echo", "arguments": {"text": format!("b{i}")}});
                        timed(tally, "start", || {
                            client.start("tools/call", Some(params), &RequestOptions::new())
                        })
                        .map(|call| (i, call))
                    })
                    .collect();
                for (i, call) in calls {
                    if let Some(result) = timed(tally, "burst", || call.wait()) {
                        if result["content"][0]["text"] != json!(format!("b{i}")) {
                            tally.violation(&format!("burst echo b{i} answered with {result}"));
                        }
                    }
                }
            }
            _ => {
                timed(tally, "fail", || {
                    client.call_tool("fail", json!({"message": "soak"}))
                });
            }
        }
        std::thread::sleep(Duration::from_millis(rng.below(30)));
    }
}

/// A `sleep` call: waited for with progress, cancelled at a random time, dropped unfinished,
/// or given a timeout shorter than the sleep.
fn sleep_call(client: &SharedClient, tally: &Tally, rng: &mut Rng) {
    let ms = [20, 200, 800, 2000][rng.below(4) as usize];
    let params = json!({"name": "sleep", "arguments": {"ms": ms}});
    match rng.below(4) {
        0 => {
            let mut progress = 0u64;
            let mut on_progress = |_: &mcpipe::Progress| progress += 1;
            let options = RequestOptions::new().on_progress(&mut on_progress);
            timed(tally, "sleep", || {
                client.request("tools/call", Some(params), options)
            });
        }
        1 => {
            let Some(call) = timed(tally, "start", || {
                client.start("tools/call", Some(params), &RequestOptions::new())
            }) else {
                return;
            };
            std::thread::sleep(Duration::from_millis(rng.below(ms + 100)));
            call.cancel();
            // Cancelled, or answered before the cancel: either way one outcome, at once.
            timed(tally, "cancelled", || match call.wait() {
                Err(Error::Cancelled) => Ok(Value::Null),
                other => other,
            });
        }
        2 => {
            let call = timed(tally, "start", || {
                client.start("tools/call", Some(params), &RequestOptions::new())
            });
            std::thread::sleep(Duration::from_millis(rng.below(100)));
            drop(call);
        }
        _ => {
            let options = RequestOptions::new()
                .timeout(Duration::from_millis(ms / 2 + 1))
                .reset_on_progress(false);
            timed(tally, "short_timeout", || {
                match client.request("tools/call", Some(params), options) {
                    Err(Error::Timeout { .. }) => Ok(Value::Null),
                    other => other,
                }
            });
        }
    }
}
