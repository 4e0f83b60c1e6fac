//! The scenarios: each spawns a fresh server, measures one thing over real pipes, checks every
//! response, and ends the server by closing its stdin.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::process::{ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::session::{pin_this_thread, send, Session, Subject};
use crate::wire::{
    check_any_response, check_response, excerpt, push_request, response_id, Protocol, Texts,
    DEEP_CHECK_EVERY, INITIALIZE, INITIALIZED, INIT_BURST,
};

/// What every scenario needs to know.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) protocol: Protocol,
    pub(crate) log: File,
    pub(crate) ticks_per_second: f64,
    pub(crate) smoke: bool,
    /// The most one scenario run may take before its server is killed.
    pub(crate) limit: Duration,
}

/// N requests, generated once and sent to every subject.
#[derive(Debug)]
pub(crate) struct Workload {
    pub(crate) texts: Texts,
    /// All requests, each a line.
    bytes: Vec<u8>,
    /// Where each request ends in `bytes`.
    ends: Vec<usize>,
}

impl Workload {
    /// `n` echo requests with ids `1..=n` and texts of `text_len` bytes.
    pub(crate) fn new(protocol: Protocol, n: u64, text_len: usize) -> Workload {
        let texts = Texts::new(text_len);
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(n as usize);
        for id in 1..=n {
            push_request(protocol, id, &texts, &mut bytes);
            ends.push(bytes.len());
        }
        Workload { texts, bytes, ends }
    }

    fn len(&self) -> u64 {
        self.ends.len() as u64
    }
}

/// What a throughput run measured.
#[derive(Debug, Clone)]
pub(crate) struct Throughput {
    pub(crate) requests_per_second: f64,
    /// Request plus response bytes per second, in MB (10^6 bytes).
    pub(crate) megabytes_per_second: f64,
    /// VmHWM at the end of the run, in bytes.
    pub(crate) peak_rss: Option<f64>,
    /// Server CPU seconds (user + system) per 1,000 requests.
    pub(crate) cpu_per_thousand: Option<f64>,
    pub(crate) eof_to_exit: Duration,
}

/// Latency percentiles of sequential round trips.
#[derive(Debug, Clone)]
pub(crate) struct Latency {
    pub(crate) p50: Duration,
    pub(crate) p90: Duration,
    pub(crate) p99: Duration,
    /// The server's CPU time per timed round trip (all its threads).
    pub(crate) cpu_per_round_trip: Option<Duration>,
}

/// The init burst on a fresh server.
#[derive(Debug, Clone)]
pub(crate) struct InitBurst {
    /// From just before the spawn to the `tools/list` answer.
    pub(crate) spawn_to_answer: Duration,
    /// VmRSS just after the answer, in bytes.
    pub(crate) idle_rss: Option<f64>,
    /// From closing the idle server's stdin to its exit.
    pub(crate) eof_to_exit: Duration,
}

type Pipes = (ChildStdin, BufReader<ChildStdout>);

fn take_pipes(session: &mut Session) -> Result<Pipes, String> {
    match (session.stdin.take(), session.stdout.take()) {
        (Some(i), Some(o)) => Ok((i, o)),
        _ => Err("the server's pipes are gone".to_owned()),
    }
}

fn put_pipes(session: &mut Session, (stdin, stdout): Pipes) {
    session.stdin = Some(stdin);
    session.stdout = Some(stdout);
}

/// Reads one line into `line` (cleared first), without its newline; an error at end of output.
fn read_line(stdout: &mut BufReader<ChildStdout>, line: &mut Vec<u8>) -> Result<usize, String> {
    line.clear();
    let n = stdout
        .read_until(b'\n', line)
        .map_err(|e| format!("reading from the server: {e}"))?;
    if n == 0 {
        return Err("the server closed its output early".to_owned());
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(n)
}

/// Reads lines until the response with `id`, skipping lines without an id (server
/// notifications); returns the bytes read.
fn read_response(
    stdout: &mut BufReader<ChildStdout>,
    line: &mut Vec<u8>,
    id: u64,
) -> Result<usize, String> {
    let mut total = 0;
    loop {
        total += read_line(stdout, line)?;
        match response_id(line) {
            Some(got) if got == id => return Ok(total),
            Some(_) => {
                return Err(format!(
                    "expected the response to {id}, got {}",
                    excerpt(line)
                ))
            }
            None if memchr::memmem::find(line, b"\"id\":").is_some() => {
                return Err(format!("a response without a usable id: {}", excerpt(line)))
            }
            None => {}
        }
    }
}

/// The MCP handshake (nothing for raw JSON-RPC).
fn handshake(protocol: Protocol, pipes: &mut Pipes) -> Result<(), String> {
    if protocol == Protocol::Raw {
        return Ok(());
    }
    let (stdin, stdout) = pipes;
    send(stdin, INITIALIZE)?;
    let mut line = Vec::new();
    read_response(stdout, &mut line, 0)?;
    check_any_response(&line, 0)?;
    send(stdin, INITIALIZED)
}

/// Whether `subject` answers an MCP `initialize` within a few seconds.
pub(crate) fn answers_mcp(subject: &Subject, log: &File) -> bool {
    let Ok(mut session) = Session::spawn(subject, false, log) else {
        return false;
    };
    let Ok(mut pipes) = take_pipes(&mut session) else {
        return false;
    };
    let answered = session.within(Duration::from_secs(5), move || {
        handshake(Protocol::Mcp, &mut pipes)?;
        Ok(pipes)
    });
    match answered {
        Ok(pipes) => {
            put_pipes(&mut session, pipes);
            session.close_and_wait(Duration::from_secs(5)).is_ok()
        }
        Err(_) => false,
    }
}

/// Sends every request of `work` from a writer thread while this thread reads and checks the
/// responses. With `window`, at most that many requests are unanswered at any time.
pub(crate) fn pipelined(
    env: &Env,
    subject: &Subject,
    work: &Arc<Workload>,
    window: Option<u64>,
) -> Result<Throughput, String> {
    let mut session = Session::spawn(subject, false, &env.log)?;
    let mut pipes = take_pipes(&mut session)?;
    let protocol = env.protocol;
    pipes = session.within(env.limit, move || {
        handshake(protocol, &mut pipes)?;
        Ok(pipes)
    })?;
    let cpu_before = session.cpu_seconds(env.ticks_per_second);
    let work_for_run = Arc::clone(work);
    let deep_all = env.smoke;
    let (pipes, elapsed, response_bytes) = session.within(env.limit, move || {
        let work = work_for_run;
        let (stdin, mut stdout) = pipes;
        let n = work.len();
        let answered = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let writer = {
            let work = Arc::clone(&work);
            let answered = Arc::clone(&answered);
            thread::spawn(move || write_requests(stdin, &work, window, &answered))
        };
        let writer_thread = writer.thread().clone();
        let mut seen = vec![false; n as usize + 1];
        let mut line = Vec::new();
        let mut response_bytes = 0u64;
        let mut got = 0u64;
        let mut failure = None;
        while got < n {
            let read = match read_line(&mut stdout, &mut line) {
                Ok(read) => read,
                Err(e) => {
                    failure = Some(format!("{e} (after {got} of {n} responses)"));
                    break;
                }
            };
            response_bytes += read as u64;
            let Some(id) = response_id(&line) else {
                continue; // A notification from the server.
            };
            if id == 0 || id > n || seen[id as usize] {
                failure = Some(format!("an unexpected response: {}", excerpt(&line)));
                break;
            }
            seen[id as usize] = true;
            let deep = (deep_all || id % DEEP_CHECK_EVERY == 0).then_some(protocol);
            if let Err(e) = check_response(&line, id, &work.texts, deep) {
                failure = Some(e);
                break;
            }
            got += 1;
            answered.store(got, Ordering::Release);
            if window.is_some() {
                writer_thread.unpark();
            }
        }
        let elapsed = started.elapsed();
        if let Some(failure) = failure {
            // The server is killed by the caller's drop; the writer then stops on EPIPE.
            return Err(failure);
        }
        let stdin = writer
            .join()
            .map_err(|_| "the writer thread panicked".to_owned())??;
        Ok(((stdin, stdout), elapsed, response_bytes))
    })?;
    let peak_rss = session.status_bytes("VmHWM:");
    let cpu = session
        .cpu_seconds(env.ticks_per_second)
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    put_pipes(&mut session, pipes);
    let eof_to_exit = session.close_and_wait(Duration::from_secs(10))?;
    let n = work.len() as f64;
    let secs = elapsed.as_secs_f64();
    Ok(Throughput {
        requests_per_second: n / secs,
        megabytes_per_second: (work.bytes.len() as f64 + response_bytes as f64) / secs / 1e6,
        peak_rss,
        cpu_per_thousand: cpu.map(|c| c / n * 1000.0),
        eof_to_exit,
    })
}

/// The writer thread: all requests in large writes, or with a window, as many as it allows.
fn write_requests(
    mut stdin: ChildStdin,
    work: &Workload,
    window: Option<u64>,
    answered: &AtomicU64,
) -> Result<ChildStdin, String> {
    const CHUNK: usize = 64 * 1024;
    let Some(window) = window else {
        for chunk in work.bytes.chunks(CHUNK) {
            send(&mut stdin, chunk)?;
        }
        return Ok(stdin);
    };
    let n = work.len();
    let mut sent = 0u64;
    while sent < n {
        let mut in_flight = sent - answered.load(Ordering::Acquire);
        while in_flight >= window {
            // The reader unparks this thread after each response; the timeout only guards
            // against a lost wake-up.
            thread::park_timeout(Duration::from_millis(10));
            in_flight = sent - answered.load(Ordering::Acquire);
        }
        let upto = (sent + window - in_flight).min(n);
        let from = if sent == 0 {
            0
        } else {
            work.ends[sent as usize - 1]
        };
        send(&mut stdin, &work.bytes[from..work.ends[upto as usize - 1]])?;
        sent = upto;
    }
    Ok(stdin)
}

/// Sequential round trips of 100-byte echoes; with `pin`, the driver's thread and the server
/// share CPU 0.
pub(crate) fn ping_pong(
    env: &Env,
    subject: &Subject,
    pin: bool,
    warmup: u64,
    count: u64,
) -> Result<Latency, String> {
    let mut session = Session::spawn(subject, pin, &env.log)?;
    let mut pipes = take_pipes(&mut session)?;
    let protocol = env.protocol;
    let smoke = env.smoke;
    let pid = session.pid;
    let (pipes, mut times, cpu) = session.within(env.limit, move || {
        if pin {
            pin_this_thread()?;
        }
        handshake(protocol, &mut pipes)?;
        let texts = Texts::new(100);
        let (stdin, stdout) = &mut pipes;
        let mut request = Vec::new();
        let mut line = Vec::new();
        let mut times = Vec::with_capacity(count as usize);
        let mut cpu_before = None;
        for id in 1..=warmup + count {
            if id == warmup + 1 {
                cpu_before = Session::cpu_nanos(pid);
            }
            request.clear();
            push_request(protocol, id, &texts, &mut request);
            let sent_at = Instant::now();
            send(stdin, &request)?;
            read_response(stdout, &mut line, id)?;
            let took = sent_at.elapsed();
            let deep = (smoke || id % DEEP_CHECK_EVERY == 0).then_some(protocol);
            check_response(&line, id, &texts, deep)?;
            if id > warmup {
                times.push(took);
            }
        }
        let cpu = Session::cpu_nanos(pid)
            .zip(cpu_before)
            .map(|(after, before)| {
                Duration::from_nanos(after.saturating_sub(before) / count.max(1))
            });
        Ok((pipes, times, cpu))
    })?;
    put_pipes(&mut session, pipes);
    // Its exit is checked, not timed: the time from EOF to exit grows with the round trips
    // before it, for every server (BENCHMARKS.md, "Method"), and peers make fewer; the idle
    // server's EOF to exit is timed after the init burst, the same for every column.
    session.close_and_wait(Duration::from_secs(10))?;
    times.sort_unstable();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Ok(Latency {
        p50: at(0.50),
        p90: at(0.90),
        p99: at(0.99),
        cpu_per_round_trip: cpu,
    })
}

/// Spawns a server and sends `initialize`, `notifications/initialized` and `tools/list` in one
/// write; times spawn to the `tools/list` answer. A raw JSON-RPC server answers both requests
/// with `-32601`: still a round trip each.
pub(crate) fn init_burst(env: &Env, subject: &Subject) -> Result<InitBurst, String> {
    let mut session = Session::spawn(subject, false, &env.log)?;
    let spawned_at = session.spawned_at;
    let mut pipes = take_pipes(&mut session)?;
    let (pipes, answered_at) = session.within(env.limit, move || {
        let (stdin, stdout) = &mut pipes;
        send(stdin, INIT_BURST)?;
        let mut line = Vec::new();
        for id in [1, 2] {
            read_response(stdout, &mut line, id)?;
            check_any_response(&line, id)?;
        }
        Ok((pipes, Instant::now()))
    })?;
    let idle_rss = session.status_bytes("VmRSS:");
    put_pipes(&mut session, pipes);
    let eof_to_exit = session.close_and_wait(Duration::from_secs(10))?;
    Ok(InitBurst {
        spawn_to_answer: answered_at - spawned_at,
        idle_rss,
        eof_to_exit,
    })
}

/// `calls` `tools/call` of the demo's `sleep` (`ms` each) in one write, after the handshake:
/// the time to the last answer. A server that runs tools concurrently takes about `ms`; one
/// that runs them one after another, `calls × ms`. Only for MCP subjects with a `sleep` tool
/// (the baselines have none); every answer is checked for its id and text.
pub(crate) fn slow_calls(
    env: &Env,
    subject: &Subject,
    calls: u64,
    ms: u64,
) -> Result<Duration, String> {
    let mut session = Session::spawn(subject, false, &env.log)?;
    let mut pipes = take_pipes(&mut session)?;
    let (pipes, took) = session.within(env.limit, move || {
        handshake(Protocol::Mcp, &mut pipes)?;
        let (stdin, stdout) = &mut pipes;
        let mut burst = Vec::new();
        for id in 1..=calls {
            burst.extend_from_slice(
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":\
                     {{\"name\":\"sleep\",\"arguments\":{{\"ms\":{ms}}}}}}}\n"
                )
                .as_bytes(),
            );
        }
        let started = Instant::now();
        send(stdin, &burst)?;
        let mut seen = vec![false; calls as usize + 1];
        let mut line = Vec::new();
        let want = format!("slept {ms} ms");
        for _ in 0..calls {
            // Answers come in any order: take whichever is next.
            let id = loop {
                read_line(stdout, &mut line)?;
                if let Some(id) = response_id(&line) {
                    break id;
                }
            };
            let fresh = seen
                .get_mut(id as usize)
                .map(|s| !std::mem::replace(s, true));
            if fresh != Some(true) || memchr::memmem::find(&line, want.as_bytes()).is_none() {
                return Err(format!("unexpected answer: {}", excerpt(&line)));
            }
        }
        Ok((pipes, started.elapsed()))
    })?;
    put_pipes(&mut session, pipes);
    session.close_and_wait(Duration::from_secs(10))?;
    Ok(took)
}
