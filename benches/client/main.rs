//! The client load benchmark: mcpipe's `Client` and `SharedClient` making `tools/call` echo
//! calls to a real server process over pipes, against `mcpipe demo` and against the ceiling
//! yardstick (`examples/line_echo_ceiling --client`, which answers with no JSON work, so the
//! client's own cost shows). See BENCHMARKS.md, "The client under load".
//!
//! Run: `cargo bench --bench client` (about a minute), `cargo bench --bench client -- --test`
//! (smoke mode: tiny counts). Options after `--`: `--rounds N`, `--calls N` (timed calls per
//! scenario), `--sdk` (also the official Python and TypeScript SDK clients, from the
//! installs of `scripts/setup-interop.sh` in `interop/`), `--pin` (this process, all its
//! threads, and so the servers and SDK clients it starts, on CPU 0: `taskset -a -p -c 0`; on
//! this VM a wake-up across CPUs costs tens of microseconds, see BENCHMARKS.md), and words that
//! filter the scenarios by name (`ping-pong`, `shared-4`, `pipelined-64`, `ceiling`, `demo`).

#[path = "../shared/release_build.rs"]
mod release_build;
mod scenarios;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::scenarios::{Figures, Server};

/// Calls in flight in the pipelined scenario.
const WINDOW: usize = 64;

/// Caller threads of the shared scenarios.
const THREADS: [usize; 4] = [1, 2, 4, 8];

#[derive(Debug)]
struct Options {
    rounds: usize,
    calls: u64,
    warmup: u64,
    sdk: bool,
    pin: bool,
    filters: Vec<String>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        rounds: 3,
        calls: 20_000,
        warmup: 1_000,
        sdk: false,
        pin: false,
        filters: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // Cargo passes `--bench` to bench targets it runs with `cargo bench`.
            "--bench" => {}
            "--test" | "--smoke" => {
                options.rounds = 1;
                options.calls = 64;
                options.warmup = 8;
            }
            "--rounds" | "--calls" => {
                let n: u64 = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .ok_or_else(|| format!("{arg} takes a number"))?;
                if arg == "--rounds" {
                    options.rounds = n.max(1) as usize;
                } else {
                    options.calls = n.max(8);
                }
            }
            "--sdk" => options.sdk = true,
            "--pin" => options.pin = true,
            word if !word.starts_with('-') => options.filters.push(word.to_owned()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(options)
}

/// Builds the servers with `cargo build --release`; their paths by target name.
fn build_servers() -> Result<HashMap<String, String>, String> {
    let targets = ["--example", "line_echo_ceiling", "--bin", "mcpipe"];
    release_build::release_build("client", &targets)
}

/// One row of the table: a scenario on one server, by one client, over the rounds.
#[derive(Debug, Default)]
struct Row {
    runs: Vec<Figures>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Row {
    fn line(&self, key: &str) -> String {
        let rates: Vec<f64> = self.runs.iter().map(Figures::calls_per_s).collect();
        let rate = median(rates.clone());
        let spread = rates.iter().cloned().fold(f64::MIN, f64::max)
            - rates.iter().cloned().fold(f64::MAX, f64::min);
        let of = |f: &dyn Fn(&Figures) -> f64| median(self.runs.iter().map(f).collect());
        let server = of(&|f| micros(f.server_cpu_per_call()));
        format!(
            "| {key} | {:.0} | {:.1} | {:.1} | {:.2} | {} | {:.0} % |",
            rate,
            of(&|f| micros(f.percentile(0.5))),
            of(&|f| micros(f.percentile(0.99))),
            of(&|f| micros(f.client_cpu_per_call())),
            if server > 0.0 {
                format!("{server:.2}")
            } else {
                "–".to_owned()
            },
            100.0 * spread / rate,
        )
    }
}

/// An SDK client's run: `interop/bench_client.{py,mjs}`, one JSON line per scenario.
fn run_sdk(
    runner: &[String],
    warmup: u64,
    calls: u64,
    server: &Server,
) -> Result<Vec<(String, Figures)>, String> {
    let output = Command::new(&runner[0])
        .args(&runner[1..])
        .args([
            warmup.to_string(),
            calls.to_string(),
            WINDOW.to_string(),
            "--".to_owned(),
        ])
        .arg(&server.program)
        .args(&server.args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running {}: {e}", runner.join(" ")))?;
    if !output.status.success() {
        return Err(format!("{} failed: {}", runner.join(" "), output.status));
    }
    let mut runs = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let secs = |key: &str| Duration::from_secs_f64(v[key].as_f64().unwrap_or(0.0));
        let us = |key: &str| Duration::from_secs_f64(v[key].as_f64().unwrap_or(0.0) / 1e6);
        runs.push((
            v["scenario"].as_str().unwrap_or("?").to_owned(),
            Figures {
                calls: v["calls"].as_u64().unwrap_or(0),
                wall: secs("wall_s"),
                latencies: Vec::new(),
                quantiles: Some((us("p50_us"), us("p99_us"))),
                client_cpu: secs("cpu_s"),
                server_cpu: Duration::ZERO,
            },
        ));
    }
    Ok(runs)
}

/// Pins this process, every thread it has and will have, to CPU 0.
fn pin() -> Result<(), String> {
    let pid = std::process::id().to_string();
    let status = Command::new("taskset")
        .args(["-a", "-p", "-c", "0", &pid])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("taskset: {e}"))?;
    if !status.success() {
        return Err(format!("taskset -a -p -c 0 {pid}: {status}"));
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let options = options()?;
    if options.pin {
        pin()?;
    }
    let paths = build_servers()?;
    let path = |name: &str| {
        paths
            .get(name)
            .cloned()
            .ok_or_else(|| format!("cargo built no {name}"))
    };
    let servers = [
        Server {
            name: "ceiling".to_owned(),
            program: path("line_echo_ceiling")?,
            args: vec!["--client".to_owned()],
        },
        Server {
            name: "demo".to_owned(),
            program: path("mcpipe")?,
            args: vec!["demo".to_owned()],
        },
    ];
    let wanted = |name: &str| {
        options.filters.is_empty() || options.filters.iter().any(|f| name.contains(f.as_str()))
    };
    let interop = Path::new(env!("CARGO_MANIFEST_DIR")).join("interop");
    let mut sdks: Vec<(&str, Vec<String>)> = Vec::new();
    if options.sdk {
        let python = interop.join(".venv/bin/python");
        if python.exists() {
            sdks.push((
                "Python SDK",
                vec![
                    python.display().to_string(),
                    interop.join("bench_client.py").display().to_string(),
                ],
            ));
        } else {
            eprintln!(
                "client: no {}: run scripts/setup-interop.sh",
                python.display()
            );
        }
        if interop
            .join("node_modules/@modelcontextprotocol/sdk")
            .exists()
        {
            sdks.push((
                "TypeScript SDK",
                vec![
                    "node".to_owned(),
                    interop.join("bench_client.mjs").display().to_string(),
                ],
            ));
        } else {
            eprintln!("client: no interop/node_modules: run scripts/setup-interop.sh");
        }
    }
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut failed = Vec::new();
    let shared_names: Vec<String> = THREADS.iter().map(|t| format!("shared-{t}")).collect();
    let pipelined_name = format!("pipelined-{WINDOW}");
    for round in 0..options.rounds {
        eprintln!("client: round {} of {}", round + 1, options.rounds);
        for server in &servers {
            let mut record = |scenario: &str, client: &str, figures: Result<Figures, String>| {
                let key = format!("{scenario}, {}, {client}", server.name);
                match figures {
                    Ok(figures) => rows.entry(key).or_default().runs.push(figures),
                    Err(e) => {
                        eprintln!("client: {key}: {e}");
                        failed.push(key);
                    }
                }
            };
            let (calls, warmup) = (options.calls, options.warmup);
            let name = |scenario: &str| format!("{scenario} {}", server.name);
            if wanted(&name("ping-pong")) {
                record(
                    "ping-pong",
                    "mcpipe",
                    scenarios::ping_pong(server, warmup, calls),
                );
            }
            for (threads, scenario) in THREADS.iter().zip(&shared_names) {
                if wanted(&name(scenario)) {
                    let figures = scenarios::shared(server, *threads, warmup, calls);
                    record(scenario, "mcpipe", figures);
                }
            }
            if wanted(&name(&pipelined_name)) {
                let figures = scenarios::pipelined(server, WINDOW, warmup, calls);
                record(&pipelined_name, "mcpipe", figures);
            }
            for (sdk, runner) in &sdks {
                // The SDKs are 10 to 100 times slower: fewer calls keep a round short.
                let sdk_calls = calls.min(2_000);
                match run_sdk(runner, warmup.min(200), sdk_calls, server) {
                    Ok(runs) => {
                        for (scenario, figures) in runs {
                            if wanted(&name(&scenario)) {
                                record(&scenario, sdk, Ok(figures));
                            }
                        }
                    }
                    Err(e) => record("sdk", sdk, Err(e)),
                }
            }
        }
    }
    print_report(&options, &rows);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed: {}", failed.join("; ")))
    }
}

/// The table of the run, in Markdown.
#[allow(clippy::print_stdout)] // The report is the bench's output.
fn print_report(options: &Options, rows: &BTreeMap<String, Row>) {
    println!(
        "\n{} rounds, {} timed calls a scenario (SDKs: {}), medians over rounds{}\n",
        options.rounds,
        options.calls,
        options.calls.min(2_000),
        if options.pin { ", pinned to CPU 0" } else { "" }
    );
    println!(
        "| scenario, server, client | calls/s | p50 µs | p99 µs | client CPU µs/call | server \
         CPU µs/call | spread of calls/s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (key, row) in rows {
        println!("{}", row.line(key));
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("client: {e}");
            ExitCode::FAILURE
        }
    }
}
