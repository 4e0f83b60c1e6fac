//! The load driver: spawns servers and measures them over real pipes, side by side with two
//! baselines, checking every response. See BENCHMARKS.md for the method.
//!
//! Run: `cargo bench` (everything), `cargo bench --bench pipe` (this driver only), or
//! `cargo bench -- --test` (smoke mode: each scenario once, tiny; what CI runs).
//!
//! Options (after `--`): `--test` or `--smoke`, `--rounds N`, `--server 'CMD ARGS'` (measure
//! another stdio server instead of mcpipe's; with `--mcp` it gets `tools/call echo` after
//! `initialize`, else raw `echo`), `--name NAME` (its column title), `--peer 'NAME=CMD ARGS'`
//! (repeatable: another MCP server measured in a column of its own beside mcpipe's, on capped
//! small-message workloads, see [`Sizes::for_peers`]; `scripts/bench-peers.sh` runs the
//! official SDKs' echo servers this way), `--full-peers` (the peers run mcpipe's own
//! workloads: for a peer as fast as mcpipe, such as `mcpipe wrap -- mcpipe demo`), and words
//! that filter the scenarios by name.
//!
//! The driver builds the servers it measures with `cargo build --release`: `examples/echo_server`
//! (raw `echo`), `mcpipe demo` (the MCP demo server, used with `tools/call echo` once it answers
//! `initialize`), and the two baselines, `examples/line_echo_ceiling` and `examples/naive_loop`.

#[path = "../shared/release_build.rs"]
mod release_build;
mod report;
mod scenarios;
mod session;
mod wire;

use std::collections::HashMap;
use std::fs::File;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use crate::report::{
    median, print_issue_13_targets, print_peers, print_table, print_targets, Better, Table,
    EOF_EXIT, IDLE_RSS, LARGE_100K, LARGE_10M, MIB, PIPELINED, PIPELINED_RSS, SLOW_CALLS,
};
use crate::scenarios::{Env, Workload};
use crate::session::Subject;
use crate::wire::Protocol;

/// How the run is sized.
#[derive(Debug, Clone)]
struct Sizes {
    rounds: usize,
    pipelined: u64,
    large_100k: u64,
    large_10m: u64,
    ping_warmup: u64,
    ping_pinned: u64,
    ping_unpinned: u64,
    bursts: usize,
}

impl Sizes {
    fn full() -> Sizes {
        Sizes {
            rounds: 7,
            pipelined: 500_000,
            large_100k: 2_000,
            large_10m: 40,
            ping_warmup: 1_000,
            ping_pinned: 50_000,
            ping_unpinned: 10_000,
            bursts: 10,
        }
    }

    /// The sizes for a peer (`--peer`): the official SDKs answer small requests 10 to 1,000
    /// times slower than mcpipe, so the small-message workloads are capped to keep a round
    /// within minutes (rates and percentiles do not depend on the count; the warm-up still comes
    /// first). The large messages are the same as mcpipe's: their peak RSS depends on the count.
    fn for_peers(&self) -> Sizes {
        Sizes {
            rounds: self.rounds,
            pipelined: self.pipelined.min(20_000),
            large_100k: self.large_100k,
            large_10m: self.large_10m,
            ping_warmup: self.ping_warmup.min(200),
            ping_pinned: self.ping_pinned.min(5_000),
            ping_unpinned: self.ping_unpinned.min(2_000),
            bursts: self.bursts.min(3),
        }
    }

    fn smoke() -> Sizes {
        Sizes {
            rounds: 1,
            pipelined: 300,
            large_100k: 3,
            large_10m: 1,
            ping_warmup: 10,
            ping_pinned: 50,
            ping_unpinned: 50,
            bursts: 1,
        }
    }
}

#[derive(Debug, Default)]
struct Options {
    smoke: bool,
    rounds: Option<usize>,
    server: Option<String>,
    name: Option<String>,
    mcp: bool,
    /// `--peer NAME=CMD`: columns after the naive loop's.
    peers: Vec<Subject>,
    /// `--full-peers`: the peers run mcpipe's workloads, not the capped ones (for a peer as
    /// fast as mcpipe: another build, or the demo behind `mcpipe wrap`).
    full_peers: bool,
    filters: Vec<String>,
}

impl Options {
    fn parse() -> Result<Options, String> {
        let mut opts = Options::default();
        let mut args = std::env::args().skip(1);
        let mut bench_flag = false;
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--test" | "--smoke" => opts.smoke = true,
                // Cargo passes `--bench` to bench targets it runs with `cargo bench`.
                "--bench" => bench_flag = true,
                "--rounds" => {
                    opts.rounds = Some(
                        args.next()
                            .and_then(|v| v.parse().ok())
                            .filter(|&r| r > 0)
                            .ok_or("--rounds needs a positive number")?,
                    )
                }
                "--server" => opts.server = Some(args.next().ok_or("--server needs a command")?),
                "--name" => opts.name = Some(args.next().ok_or("--name needs a name")?),
                "--mcp" => opts.mcp = true,
                "--full-peers" => opts.full_peers = true,
                "--peer" => {
                    let spec = args.next().ok_or("--peer needs NAME=COMMAND")?;
                    let (name, command) = spec
                        .split_once('=')
                        .filter(|(name, command)| !name.is_empty() && !command.trim().is_empty())
                        .ok_or_else(|| format!("--peer {spec:?}: expected NAME=COMMAND"))?;
                    opts.peers.push(Subject {
                        name: name.to_owned(),
                        argv: command.split_whitespace().map(str::to_owned).collect(),
                    });
                }
                flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
                filter => opts.filters.push(filter.to_owned()),
            }
        }
        // `cargo test --benches` runs bench targets without `--bench`: a smoke run then.
        if !bench_flag {
            opts.smoke = true;
        }
        Ok(opts)
    }
}

/// Builds the servers with `cargo build --release`; their paths by target name.
fn build_servers() -> Result<HashMap<String, String>, String> {
    let mut targets = Vec::new();
    for example in ["echo_server", "line_echo_ceiling", "naive_loop"] {
        targets.extend(["--example", example]);
    }
    targets.extend(["--bin", "mcpipe"]);
    release_build::release_build("pipe", &targets)
}

/// The output of a command, trimmed, or `?`.
fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".to_owned())
}

fn machine() -> String {
    let model = command_output("lscpu", &[])
        .lines()
        .find_map(|l| l.strip_prefix("Model name:").map(|m| m.trim().to_owned()))
        .unwrap_or_else(|| "?".to_owned());
    format!(
        "nproc {}, {model}, kernel {}, load average {}",
        command_output("nproc", &[]),
        command_output("uname", &["-r"]),
        load_average()
    )
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_owned())
}

/// The scenarios in the order they run (and are filtered by).
const SCENARIOS: [&str; 7] = [
    "pipelined",
    "windowed",
    "large",
    "ping-pong-pinned",
    "ping-pong",
    "init-burst",
    "slow-calls",
];

/// The column of the first `--peer`: after the ceiling, the subject and the naive loop.
const FIRST_PEER: usize = 3;

/// The requests of one size set, built once and sent in every round.
struct Workloads {
    sizes: Sizes,
    small: Arc<Workload>,
    large: [(&'static str, Arc<Workload>); 2],
}

impl Workloads {
    fn new(protocol: Protocol, sizes: Sizes, large_text: usize) -> Workloads {
        let small = Arc::new(Workload::new(protocol, sizes.pipelined, 100));
        let large = [
            (
                LARGE_100K,
                Arc::new(Workload::new(protocol, sizes.large_100k, 100_000)),
            ),
            (
                LARGE_10M,
                Arc::new(Workload::new(protocol, sizes.large_10m, large_text)),
            ),
        ];
        Workloads {
            sizes,
            small,
            large,
        }
    }
}

#[allow(clippy::too_many_lines)]
fn run() -> Result<(), String> {
    let opts = Options::parse()?;
    let mut sizes = if opts.smoke {
        Sizes::smoke()
    } else {
        Sizes::full()
    };
    if let Some(rounds) = opts.rounds {
        sizes.rounds = rounds;
    }
    let bins = build_servers()?;
    let bin = |name: &str| {
        bins.get(name)
            .cloned()
            .ok_or_else(|| format!("cargo built no {name}"))
    };
    let log_path = std::env::temp_dir().join(format!("mcpipe-bench-{}.log", std::process::id()));
    let log = File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let ticks_per_second = command_output("getconf", &["CLK_TCK"])
        .parse()
        .map_err(|_| "getconf CLK_TCK gave no number")?;

    let demo = Subject {
        name: "mcpipe demo".to_owned(),
        argv: vec![bin("mcpipe")?, "demo".to_owned()],
    };
    let (subject, protocol) = match &opts.server {
        Some(command) => (
            Subject {
                name: opts.name.clone().unwrap_or_else(|| command.clone()),
                argv: command.split_whitespace().map(str::to_owned).collect(),
            },
            if opts.mcp {
                Protocol::Mcp
            } else {
                Protocol::Raw
            },
        ),
        None if scenarios::answers_mcp(&demo, &log) => (demo, Protocol::Mcp),
        None => (
            Subject {
                name: "mcpipe echo_server".to_owned(),
                argv: vec![bin("echo_server")?],
            },
            Protocol::Raw,
        ),
    };
    let baseline = |name: &str, example: &str| -> Result<Subject, String> {
        let mut argv = vec![bin(example)?];
        argv.extend(protocol.baseline_args());
        Ok(Subject {
            name: name.to_owned(),
            argv,
        })
    };
    if !opts.peers.is_empty() && protocol != Protocol::Mcp {
        return Err("--peer measures MCP servers: it needs an MCP subject (`--mcp`)".to_owned());
    }
    let mut subjects = vec![
        baseline("line-echo ceiling", "line_echo_ceiling")?,
        subject,
        baseline("naive loop", "naive_loop")?,
    ];
    subjects.extend(opts.peers.iter().cloned());
    let names: Vec<String> = subjects.iter().map(|s| s.name.clone()).collect();
    let env = Env {
        protocol,
        log,
        ticks_per_second,
        smoke: opts.smoke,
        limit: Duration::from_secs(if opts.smoke { 60 } else { 300 }),
    };
    let wanted = |scenario: &str| {
        opts.filters.is_empty() || opts.filters.iter().any(|f| scenario.contains(f.as_str()))
    };

    eprintln!("pipe: machine: {}", machine());
    eprintln!(
        "pipe: protocol {protocol:?}; subjects: {}",
        subjects
            .iter()
            .map(|s| format!("{} = `{}`", s.name, s.argv.join(" ")))
            .collect::<Vec<_>>()
            .join("; ")
    );
    eprintln!(
        "pipe: sizes {sizes:?}; server stderr in {}",
        log_path.display()
    );

    let large_text = 10_000_000;
    let ours = Workloads::new(protocol, sizes.clone(), large_text);
    let for_peers = (!opts.peers.is_empty() && !opts.full_peers)
        .then(|| Workloads::new(protocol, sizes.for_peers(), large_text));
    if let Some(work) = &for_peers {
        eprintln!("pipe: peers' sizes {:?}", work.sizes);
    }
    let mut table = Table {
        subjects: subjects.len(),
        rows: Vec::new(),
    };
    let ms = |d: Duration| Some(d.as_secs_f64() * 1e3);
    let us = |d: Duration| Some(d.as_secs_f64() * 1e6);
    for round in 0..sizes.rounds {
        eprintln!("pipe: round {} of {}", round + 1, sizes.rounds);
        for scenario in SCENARIOS.into_iter().filter(|s| wanted(s)) {
            for (i, subject) in subjects.iter().enumerate() {
                let work = match &for_peers {
                    Some(work) if i >= FIRST_PEER => work,
                    _ => &ours,
                };
                let fail = |e: String| format!("{scenario} on {}: {e}", subject.name);
                let mut rec = |name: &str, unit, better, value| {
                    table.record(round, i, name, unit, better, value);
                };
                match scenario {
                    "pipelined" | "windowed" => {
                        let window = (scenario == "windowed").then_some(64);
                        let t = scenarios::pipelined(&env, subject, &work.small, window)
                            .map_err(fail)?;
                        let name = if window.is_some() {
                            "pipelined 100 B, ≤ 64 in flight"
                        } else {
                            PIPELINED
                        };
                        rec(name, "req/s", Better::Higher, Some(t.requests_per_second));
                        if window.is_none() {
                            // With peers, every column's EOF to exit comes after the peers'
                            // load: it grows with the load before it, for every server
                            // (BENCHMARKS.md, "Method"), so unequal loads would compare nothing.
                            let eof_to_exit = match &for_peers {
                                Some(peers) if i < FIRST_PEER => {
                                    scenarios::pipelined(&env, subject, &peers.small, None)
                                        .map_err(fail)?
                                        .eof_to_exit
                                }
                                _ => t.eof_to_exit,
                            };
                            rec(
                                PIPELINED_RSS,
                                "MiB",
                                Better::Lower,
                                t.peak_rss.map(|b| b / MIB),
                            );
                            rec(
                                "server CPU per 1,000 requests",
                                "ms",
                                Better::Lower,
                                t.cpu_per_thousand.map(|s| s * 1e3),
                            );
                            rec(
                                "stdin EOF to exit, after pipelined load",
                                "ms",
                                Better::Lower,
                                ms(eof_to_exit),
                            );
                        }
                    }
                    "large" => {
                        for (name, workload) in &work.large {
                            let t = scenarios::pipelined(&env, subject, workload, None)
                                .map_err(fail)?;
                            rec(name, "MB/s", Better::Higher, Some(t.megabytes_per_second));
                            let rss_name = format!("peak RSS, {name}");
                            rec(&rss_name, "MiB", Better::Lower, t.peak_rss.map(|b| b / MIB));
                        }
                    }
                    "ping-pong-pinned" | "ping-pong" => {
                        let pinned = scenario == "ping-pong-pinned";
                        let count = if pinned {
                            work.sizes.ping_pinned
                        } else {
                            work.sizes.ping_unpinned
                        };
                        let l = scenarios::ping_pong(
                            &env,
                            subject,
                            pinned,
                            work.sizes.ping_warmup,
                            count,
                        )
                        .map_err(fail)?;
                        let which = if pinned { "pinned" } else { "unpinned" };
                        rec(
                            &format!("ping-pong p50, {which}"),
                            "µs",
                            Better::Lower,
                            us(l.p50),
                        );
                        rec(
                            &format!("ping-pong p90, {which}"),
                            "µs",
                            Better::Lower,
                            us(l.p90),
                        );
                        rec(
                            &format!("ping-pong p99, {which}"),
                            "µs",
                            Better::Lower,
                            us(l.p99),
                        );
                        rec(
                            &format!("ping-pong server CPU per round trip, {which}"),
                            "µs",
                            Better::Lower,
                            l.cpu_per_round_trip.and_then(us),
                        );
                    }
                    "init-burst" => {
                        let mut times = Vec::new();
                        let mut rss = Vec::new();
                        let mut exits = Vec::new();
                        for _ in 0..work.sizes.bursts {
                            let b = scenarios::init_burst(&env, subject).map_err(fail)?;
                            times.push(b.spawn_to_answer.as_secs_f64() * 1e3);
                            rss.extend(b.idle_rss.map(|r| r / MIB));
                            exits.push(b.eof_to_exit.as_secs_f64() * 1e3);
                        }
                        rec(
                            "init burst, spawn to tools/list answer",
                            "ms",
                            Better::Lower,
                            median(times),
                        );
                        rec(IDLE_RSS, "MiB", Better::Lower, median(rss));
                        rec(EOF_EXIT, "ms", Better::Lower, median(exits));
                    }
                    "slow-calls" => {
                        // Only subjects that are MCP servers with a `sleep` tool: not the
                        // baselines (their column stays empty).
                        if protocol != Protocol::Mcp || i != 1 {
                            continue;
                        }
                        let (calls, each) = if env.smoke { (4, 20) } else { (20, 200) };
                        // A server without the demo's `sleep` tool (`--server`) is skipped,
                        // not failed.
                        match scenarios::slow_calls(&env, subject, calls, each) {
                            Ok(took) => rec(SLOW_CALLS, "ms", Better::Lower, ms(took)),
                            Err(e) => eprintln!("pipe: {}", fail(e)),
                        }
                    }
                    _ => unreachable!("every scenario is handled"),
                }
            }
        }
    }
    eprintln!("pipe: load average at the end {}", load_average());
    print_table(&table, &names, sizes.rounds);
    print_targets(&table, large_text as f64);
    print_issue_13_targets(&table, large_text as f64);
    if !opts.peers.is_empty() {
        print_peers(&table, &names, FIRST_PEER, opts.smoke);
    }
    // Kept only when something failed, for the error message that points to it.
    let _ = std::fs::remove_file(&log_path);
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipe: {e}");
            ExitCode::FAILURE
        }
    }
}
