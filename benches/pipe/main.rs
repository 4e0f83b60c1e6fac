//! The load driver: spawns servers and measures them over real pipes, side by side with two
//! baselines, checking every response. See BENCHMARKS.md for the method.
//!
//! Run: `cargo bench` (everything), `cargo bench --bench pipe` (this driver only), or
//! `cargo bench -- --test` (smoke mode: each scenario once, tiny; what CI runs).
//!
//! Options (after `--`): `--test` or `--smoke`, `--rounds N`, `--server 'CMD ARGS'` (measure
//! another stdio server instead of mcpipe's; with `--mcp` it gets `tools/call echo` after
//! `initialize`, else raw `echo`), `--name NAME` (its column title), and words that filter the
//! scenarios by name.
//!
//! The driver builds the servers it measures with `cargo build --release`: `examples/echo_server`
//! (raw `echo`), `mcpipe demo` (the MCP demo server, used with `tools/call echo` once it answers
//! `initialize`), and the two baselines, `examples/line_echo_ceiling` and `examples/naive_loop`.

mod scenarios;
mod session;
mod wire;

use std::collections::HashMap;
use std::fs::File;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

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
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec![
        "build",
        "--release",
        "--message-format=json-render-diagnostics",
    ];
    for example in ["echo_server", "line_echo_ceiling", "naive_loop"] {
        args.extend(["--example", example]);
    }
    args.extend(["--bin", "mcpipe"]);
    eprintln!("pipe: cargo {}", args.join(" "));
    let output = Command::new(&cargo)
        .args(&args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {cargo}: {e}"))?;
    if !output.status.success() {
        return Err(format!("cargo build failed: {}", output.status));
    }
    let mut paths = HashMap::new();
    for line in output.stdout.split(|&b| b == b'\n') {
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (v["target"]["name"].as_str(), v["executable"].as_str()) {
            paths.insert(name.to_owned(), exe.to_owned());
        }
    }
    Ok(paths)
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

/// Whether a bigger or a smaller figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Better {
    Higher,
    Lower,
}

/// One table row: a figure per round per subject.
#[derive(Debug)]
struct Row {
    name: String,
    unit: &'static str,
    better: Better,
    /// `values[round][subject]`.
    values: Vec<Vec<Option<f64>>>,
}

#[derive(Debug)]
struct Table {
    subjects: usize,
    rows: Vec<Row>,
}

impl Table {
    fn record(
        &mut self,
        round: usize,
        subject: usize,
        name: &str,
        unit: &'static str,
        better: Better,
        value: Option<f64>,
    ) {
        let index = match self.rows.iter().position(|r| r.name == name) {
            Some(i) => i,
            None => {
                self.rows.push(Row {
                    name: name.to_owned(),
                    unit,
                    better,
                    values: Vec::new(),
                });
                self.rows.len() - 1
            }
        };
        let row = &mut self.rows[index];
        while row.values.len() <= round {
            row.values.push(vec![None; self.subjects]);
        }
        row.values[round][subject] = value;
    }

    fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

impl Row {
    fn of(&self, subject: usize) -> Vec<f64> {
        self.values.iter().filter_map(|r| r[subject]).collect()
    }

    fn median(&self, subject: usize) -> Option<f64> {
        median(self.of(subject))
    }

    /// The median over rounds of the subject's figure divided by the ceiling's in that round.
    fn ratio(&self, subject: usize) -> Option<f64> {
        median(
            self.values
                .iter()
                .filter_map(|r| Some(r[subject]? / r[0]?))
                .filter(|x| x.is_finite())
                .collect(),
        )
    }

    /// (max − min) / median of the subject's figures, as a percentage.
    fn spread(&self, subject: usize) -> Option<f64> {
        let values = self.of(subject);
        let min = values.iter().copied().reduce(f64::min)?;
        let max = values.iter().copied().reduce(f64::max)?;
        Some((max - min) / self.median(subject)? * 100.0).filter(|s| s.is_finite())
    }
}

fn show(value: f64, unit: &str) -> String {
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else if value >= 1.0 {
        2
    } else {
        3
    };
    if unit.is_empty() {
        format!("{value:.digits$}")
    } else {
        format!("{value:.digits$} {unit}")
    }
}

/// Prints the table as Markdown: the median per subject with its ratio to the ceiling, and the
/// spread of the subject under test across rounds.
#[allow(clippy::print_stdout)] // The report is the bench's output.
fn print_table(table: &Table, names: &[String], rounds: usize) {
    println!(
        "\n| scenario (median of {rounds}) | {} | spread of {} |",
        names.join(" | "),
        names[1]
    );
    println!("|{}", "---|".repeat(names.len() + 2));
    for row in &table.rows {
        let mut cells = vec![format!("{} ({})", row.name, row.unit)];
        for subject in 0..names.len() {
            cells.push(match (row.median(subject), row.ratio(subject)) {
                (Some(m), Some(r)) if subject > 0 => format!("{} ({r:.2}×)", show(m, "")),
                (Some(m), _) => show(m, ""),
                _ => "–".to_owned(),
            });
        }
        cells.push(
            row.spread(1)
                .map(|s| format!("{s:.0} %"))
                .unwrap_or_else(|| "–".to_owned()),
        );
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        println!("| {arrow} {} |", cells.join(" | "));
    }
}

/// Prints each target of issue 5 with the figure that decides it.
#[allow(clippy::print_stdout)] // The report is the bench's output.
fn print_targets(table: &Table, large_bytes: f64) {
    println!("\n| target (issue 5) | measured | met |");
    println!("|---|---|---|");
    let line = |target: String, measured: Option<f64>, ok: &dyn Fn(f64) -> bool, unit: &str| {
        let (shown, met) = match measured {
            Some(m) => (show(m, unit), if ok(m) { "yes" } else { "no" }),
            None => ("–".to_owned(), "not measured"),
        };
        println!("| {target} | {shown} | {met} |");
    };
    let ratio = |name: &str| table.row(name).and_then(|r| r.ratio(1));
    let value = |name: &str| table.row(name).and_then(|r| r.median(1));
    line(
        "pipelined small-message throughput ≥ 0.60× ceiling".into(),
        ratio(PIPELINED),
        &|r| r >= 0.60,
        "×",
    );
    line(
        "ping-pong p50 (pinned) ≤ 1.2× ceiling".into(),
        ratio(PING_P50),
        &|r| r <= 1.2,
        "×",
    );
    for name in [LARGE_100K, LARGE_10M] {
        line(
            format!("{name} throughput ≥ 0.80× ceiling"),
            ratio(name),
            &|r| r >= 0.80,
            "×",
        );
    }
    line(
        format!(
            "peak RSS with {} MB messages < 3× the message size",
            large_bytes / 1e6
        ),
        value(LARGE_10M_RSS).map(|mib| mib * MIB / large_bytes),
        &|r| r < 3.0,
        "× message size",
    );
    line(
        "idle RSS ≤ 3 MiB".into(),
        value(IDLE_RSS),
        &|m| m <= 3.0,
        "MiB",
    );
    line(
        "RSS under pipelined small messages ≤ 16 MiB".into(),
        value(PIPELINED_RSS),
        &|m| m <= 16.0,
        "MiB",
    );
    line(
        "stdin EOF to exit ≤ 2 ms".into(),
        value(EOF_EXIT),
        &|m| m <= 2.0,
        "ms",
    );
}

/// Prints each target of issue 13 (performance) with the figure that decides it.
#[allow(clippy::print_stdout)] // The report is the bench's output.
fn print_issue_13_targets(table: &Table, large_bytes: f64) {
    println!("\n| target (issue 13) | measured | met |");
    println!("|---|---|---|");
    let verdict = |target: &str, measured: Option<(String, bool)>| {
        let (shown, met) = match measured {
            Some((shown, ok)) => (shown, if ok { "yes" } else { "no" }),
            None => ("–".to_owned(), "not measured"),
        };
        println!("| {target} | {shown} | {met} |");
    };
    let ratio = |name: &str, ok: &dyn Fn(f64) -> bool| {
        let r = table.row(name)?.ratio(1)?;
        Some((show(r, "×"), ok(r)))
    };
    verdict(
        "pipelined 100 B ≥ 0.60× ceiling",
        ratio(PIPELINED, &|r| r >= 0.60),
    );
    verdict(
        "ping-pong p50 (pinned) ≤ 1.1× ceiling",
        ratio(PING_P50, &|r| r <= 1.1),
    );
    let ping = table.row(PING_P50);
    verdict(
        "ping-pong p50 (pinned) ≤ the naive loop's",
        ping.and_then(|row| {
            let (ours, naive) = (row.median(1)?, row.median(2)?);
            Some((
                format!("{} against {}", show(ours, "µs"), show(naive, "µs")),
                ours <= naive,
            ))
        }),
    );
    for name in [LARGE_100K, LARGE_10M] {
        verdict(
            &format!("{name} ≥ 1.0× the ceiling's MB/s"),
            ratio(name, &|r| r >= 1.0),
        );
    }
    verdict(
        &format!(
            "peak RSS with {} MB messages ≤ 2.5× the message",
            large_bytes / 1e6
        ),
        table.row(LARGE_10M_RSS).and_then(|row| {
            let r = row.median(1)? * MIB / large_bytes;
            Some((show(r, "× message size"), r <= 2.5))
        }),
    );
}

const PIPELINED: &str = "pipelined 100 B";
const PIPELINED_RSS: &str = "peak RSS, pipelined 100 B";
const LARGE_100K: &str = "100 KB messages";
const LARGE_10M: &str = "10 MB messages";
const LARGE_10M_RSS: &str = "peak RSS, 10 MB messages";
const PING_P50: &str = "ping-pong p50, pinned";
const IDLE_RSS: &str = "idle RSS after init burst";
/// 20 `sleep` calls of 200 ms in one write (smoke: 4 of 20 ms), to the last answer.
const SLOW_CALLS: &str = "20 concurrent 200 ms sleep calls, to the last answer";
const EOF_EXIT: &str = "stdin EOF to exit";
const MIB: f64 = 1024.0 * 1024.0;

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
    let subjects = [
        baseline("line-echo ceiling", "line_echo_ceiling")?,
        subject,
        baseline("naive loop", "naive_loop")?,
    ];
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
                let fail = |e: String| format!("{scenario} on {}: {e}", subject.name);
                let mut rec = |name: &str, unit, better, value| {
                    table.record(round, i, name, unit, better, value);
                };
                match scenario {
                    "pipelined" | "windowed" => {
                        let window = (scenario == "windowed").then_some(64);
                        let t =
                            scenarios::pipelined(&env, subject, &small, window).map_err(fail)?;
                        let name = if window.is_some() {
                            "pipelined 100 B, ≤ 64 in flight"
                        } else {
                            PIPELINED
                        };
                        rec(name, "req/s", Better::Higher, Some(t.requests_per_second));
                        if window.is_none() {
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
                                ms(t.eof_to_exit),
                            );
                        }
                    }
                    "large" => {
                        for (name, work) in &large {
                            let t =
                                scenarios::pipelined(&env, subject, work, None).map_err(fail)?;
                            rec(name, "MB/s", Better::Higher, Some(t.megabytes_per_second));
                            let rss_name = format!("peak RSS, {name}");
                            rec(&rss_name, "MiB", Better::Lower, t.peak_rss.map(|b| b / MIB));
                        }
                    }
                    "ping-pong-pinned" | "ping-pong" => {
                        let pinned = scenario == "ping-pong-pinned";
                        let count = if pinned {
                            sizes.ping_pinned
                        } else {
                            sizes.ping_unpinned
                        };
                        let l =
                            scenarios::ping_pong(&env, subject, pinned, sizes.ping_warmup, count)
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
                        if !pinned {
                            rec(EOF_EXIT, "ms", Better::Lower, ms(l.eof_to_exit));
                        }
                    }
                    "init-burst" => {
                        let mut times = Vec::new();
                        let mut rss = Vec::new();
                        for _ in 0..sizes.bursts {
                            let b = scenarios::init_burst(&env, subject).map_err(fail)?;
                            times.push(b.spawn_to_answer.as_secs_f64() * 1e3);
                            rss.extend(b.idle_rss.map(|r| r / MIB));
                        }
                        rec(
                            "init burst, spawn to tools/list answer",
                            "ms",
                            Better::Lower,
                            median(times),
                        );
                        rec(IDLE_RSS, "MiB", Better::Lower, median(rss));
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
