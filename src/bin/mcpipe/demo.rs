//! `mcpipe demo`: the demo MCP server on stdio that tests, the probe and benchmarks drive.
//!
//! Tools: `echo`, `fail`, `panic`, `sleep` (progress, cancellable), `stats`, and with
//! `--allow-run` also `run`; `sleep` and `run` may run as tasks (MCP tasks, both revisions).
//! Resource `mcpipe://demo/readme`, template `mcpipe://demo/echo/{text}`, prompt `greet`. Logs
//! go to stderr; stdout carries only protocol.
//! With `--conformance` it serves the conformance suite's fixtures instead (`conformance/`).

use std::collections::VecDeque;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use mcpipe::{
    Content, McpServer, Prompt, PromptMessage, Resource, ResourceContents, ResourceTemplate,
    Server, TaskSupport, Tool, ToolError, ToolResult,
};
use serde_json::json;

use crate::conformance;

/// `mcpipe demo --help`, also shown by `mcpipe help demo`.
pub(crate) const USAGE: &str = "usage: mcpipe demo [options]

Serves the demo MCP server on stdin/stdout (logs on stderr).

options:
  --idle-timeout-ms N     run the idle hook (cache eviction) after N ms without input
                          (default 60000; 0 turns it off)
  --max-message-bytes N   longest accepted message in bytes (default 64 MiB)
  --shutdown-grace-ms N   at end of input, how long running calls may finish before they
                          are cancelled (default 10000)
  --worker-keep-alive-ms N
                          how long an idle worker thread (of `sleep`, `run` and tasks)
                          stays before it ends (default 10000)
  --allow-run             add the `run` tool, which runs any command it is given
  --conformance           serve the fixtures of the official MCP conformance suite instead
                          (tools test_*, resources test://..., prompts test_*; both the
                          2025-11-25 handshake era and 2026-07-28)
  -h, --help              show this help";

const README: &str = "# mcpipe demo server

A small MCP server for tests and benchmarks. Tools:
- echo {text}: returns the text
- fail {message}: a tool error (isError) with the message
- panic {}: the tool panics; the server answers with an error result and goes on
- sleep {ms}: waits, with progress every ~100 ms, and stops at once when cancelled
- stats {}: request count, idle evictions, cache entries
- run {argv, timeout_ms?}: runs a command (only with --allow-run)
";

/// How many echoed texts the cache keeps.
const CACHE_LIMIT: usize = 1000;

/// How many bytes of echoed text the cache keeps in all; a longer text is not cached. The cache
/// is there to show the idle hook evicting something, not to hold on to large messages.
const CACHE_BYTES: usize = 64 << 10;

/// The most output `run` captures from each stream.
const RUN_OUTPUT_LIMIT: usize = 1 << 20;

/// The demo's state: a cache of recent echoes that the idle hook evicts.
#[derive(Debug, Default)]
struct Demo {
    /// Recent echoes, oldest first. Invariant: at most `CACHE_LIMIT` entries whose lengths add
    /// up to `cache_bytes <= CACHE_BYTES`.
    cache: VecDeque<String>,
    cache_bytes: usize,
    idle_evictions: u64,
}

impl Demo {
    /// Remembers an echoed text, evicting the oldest ones to stay within both bounds.
    fn remember(&mut self, text: &str) {
        if text.len() > CACHE_BYTES {
            return;
        }
        while self.cache.len() >= CACHE_LIMIT || self.cache_bytes + text.len() > CACHE_BYTES {
            match self.cache.pop_front() {
                Some(old) => self.cache_bytes -= old.len(),
                None => break,
            }
        }
        self.cache_bytes += text.len();
        self.cache.push_back(text.to_owned());
    }

    fn evict(&mut self) {
        self.cache.clear();
        self.cache_bytes = 0;
    }
}

struct Options {
    idle_timeout: Option<Duration>,
    max_message_bytes: Option<usize>,
    shutdown_grace: Option<Duration>,
    worker_keep_alive: Option<Duration>,
    allow_run: bool,
    conformance: bool,
}

fn parse(args: Vec<String>) -> Result<Option<Options>, String> {
    let mut options = Options {
        idle_timeout: Some(Duration::from_secs(60)),
        max_message_bytes: None,
        shutdown_grace: None,
        worker_keep_alive: None,
        allow_run: false,
        conformance: false,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let mut number = |flag: &str| -> Result<u64, String> {
            let value = inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a number"))?;
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} needs a non-negative integer, got {value:?}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--idle-timeout-ms" => {
                let ms = number("--idle-timeout-ms")?;
                options.idle_timeout = (ms > 0).then(|| Duration::from_millis(ms));
            }
            "--max-message-bytes" => {
                let n = number("--max-message-bytes")?;
                options.max_message_bytes = Some(usize::try_from(n).unwrap_or(usize::MAX));
            }
            "--shutdown-grace-ms" => {
                let ms = number("--shutdown-grace-ms")?;
                options.shutdown_grace = Some(Duration::from_millis(ms));
            }
            "--worker-keep-alive-ms" => {
                let ms = number("--worker-keep-alive-ms")?;
                options.worker_keep_alive = Some(Duration::from_millis(ms));
            }
            "--allow-run" if inline.is_none() => options.allow_run = true,
            "--conformance" if inline.is_none() => options.conformance = true,
            _ => return Err(format!("unknown option {arg:?}")),
        }
    }
    Ok(Some(options))
}

/// Runs `mcpipe demo` with the arguments after the subcommand.
pub(crate) fn run(args: Vec<String>) -> ExitCode {
    let options = match parse(args) {
        Ok(Some(options)) => options,
        Ok(None) => return crate::print_out(USAGE),
        Err(why) => {
            eprintln!("mcpipe demo: {why}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut loop_config = Server::new().idle_timeout(options.idle_timeout);
    if let Some(bytes) = options.max_message_bytes {
        loop_config = loop_config.max_message_bytes(bytes);
    }
    if let Some(grace) = options.shutdown_grace {
        loop_config = loop_config.shutdown_grace(grace);
    }
    let keep_alive = options.worker_keep_alive;
    let served = if options.conformance {
        let server = conformance::server();
        loop_config.serve_stdio(&mut with_keep_alive(server, keep_alive))
    } else {
        let server = demo_server(options.allow_run);
        loop_config.serve_stdio(&mut with_keep_alive(server, keep_alive))
    };
    match served {
        // Never `eprintln!` here: stderr may be full or closed, and the server must still exit.
        Ok(outcome) => {
            mcpipe::stderr_line(&format!("mcpipe demo: {outcome}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            mcpipe::stderr_line(&format!("mcpipe demo: {e}"));
            ExitCode::FAILURE
        }
    }
}

/// `--worker-keep-alive-ms` on either server; without it, the library's default.
fn with_keep_alive<S: 'static>(server: McpServer<S>, keep_alive: Option<Duration>) -> McpServer<S> {
    match keep_alive {
        Some(keep_alive) => server.worker_keep_alive(keep_alive),
        None => server,
    }
}

/// The annotation of the tools that change nothing, so clients (and `mcpipe probe`) know
/// they are safe to call; `run` has none, so it counts as one that may change things.
fn read_only() -> serde_json::Value {
    json!({"readOnlyHint": true})
}

fn demo_server(allow_run: bool) -> McpServer<Demo> {
    let mut server = McpServer::new("mcpipe-demo", env!("CARGO_PKG_VERSION"), Demo::default())
        .instructions(
            "A demo server: echo, fail, panic, sleep (cancellable, with progress) and stats.",
        )
        .tool_mut(
            Tool::new("echo", "Returns the text it is given")
                .arg("text", "string", "Text to return")
                .annotations(read_only()),
            |demo, args, _cx| {
                // Moved, not copied, into the result: a 10 MB text is not duplicated here.
                let text = args.take_string("text")?;
                demo.remember(&text);
                Ok(ToolResult::text(text))
            },
        )
        .tool(
            Tool::new(
                "fail",
                "Fails with the message it is given (an isError result)",
            )
            .arg("message", "string", "The error message")
            .annotations(read_only()),
            |_demo, args, _cx| {
                let message = args.string("message")?;
                Err(ToolError::new(format!("failed on purpose: {message}")))
            },
        )
        .tool(
            Tool::new(
                "panic",
                "Panics; the server answers with an error result and goes on",
            )
            .annotations(read_only()),
            |_demo, _args, _cx| panic!("the panic tool panics on purpose"),
        )
        .concurrent_tool(
            Tool::new(
                "sleep",
                "Waits ms milliseconds, sending progress every ~100 ms when asked; cancellable",
            )
            .arg("ms", "integer", "How long to wait, in milliseconds")
            .annotations(read_only())
            .task_support(TaskSupport::Optional),
            |args, cx| {
                let ms = args.integer("ms")?;
                let ms = u64::try_from(ms).map_err(|_| {
                    ToolError::new("argument \"ms\" must be a non-negative integer")
                })?;
                let start = Instant::now();
                let end = start + Duration::from_millis(ms);
                let tick = Duration::from_millis(100);
                let mut next = start + tick;
                loop {
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    if now >= next {
                        let done = now.duration_since(start).as_millis() as f64;
                        cx.progress(done, Some(ms as f64), Some("sleeping"))?;
                        next += tick;
                    }
                    cx.sleep(next.min(end).saturating_duration_since(now))?;
                }
                Ok(ToolResult::text(format!("slept {ms} ms")))
            },
        )
        .tool(
            Tool::new("stats", "Requests served, idle evictions and cache entries")
                .output_schema(json!({
                    "type": "object",
                    "properties": {
                        "requests": { "type": "integer" },
                        "idle_evictions": { "type": "integer" },
                        "cache_entries": { "type": "integer" },
                        "stderr_lines_dropped": { "type": "integer" }
                    },
                    "required": ["requests", "idle_evictions", "cache_entries", "stderr_lines_dropped"]
                }))
                .annotations(read_only()),
            |demo, _args, cx| {
                Ok(ToolResult::structured(json!({
                    "requests": cx.stats().requests,
                    "idle_evictions": demo.idle_evictions,
                    "cache_entries": demo.cache.len(),
                    "stderr_lines_dropped": cx.stats().stderr_lines_dropped,
                })))
            },
        )
        .resource(
            Resource::new("mcpipe://demo/readme", "readme")
                .description("What the demo server offers")
                .mime_type("text/markdown"),
            |_demo, uri, _cx| {
                Ok(vec![ResourceContents::text(
                    uri,
                    Some("text/markdown"),
                    README,
                )])
            },
        )
        .resource_template(
            ResourceTemplate::new("mcpipe://demo/echo/{text}", "echo")
                .description("A resource whose contents are the last part of its URI")
                .mime_type("text/plain"),
            |_demo, uri, vars, _cx| {
                let text = vars.string("text")?;
                Ok(vec![ResourceContents::text(uri, Some("text/plain"), text)])
            },
        )
        .prompt(
            Prompt::new("greet", "A prompt that asks to greet someone").argument(
                "name",
                "Who to greet",
                true,
            ),
            |_demo, args, _cx| {
                let name = args.string("name")?;
                Ok(vec![PromptMessage::user(Content::text(format!(
                    "Please greet {name} warmly."
                )))])
            },
        )
        .on_idle(|demo, _cx| {
            demo.evict();
            demo.idle_evictions += 1;
        });
    if allow_run {
        server = server.concurrent_tool(
            Tool::new(
                "run",
                "Runs a command and returns its exit code, stdout and stderr",
            )
            .arg("argv", "array", "The program and its arguments")
            .optional_arg("timeout_ms", "integer", "Stop the command after this long")
            .task_support(TaskSupport::Optional),
            |args, cx| {
                let argv = args.string_list("argv")?;
                let Some((program, rest)) = argv.split_first() else {
                    return Err(ToolError::new("argument \"argv\" must not be empty"));
                };
                let timeout = match args.optional_integer("timeout_ms")? {
                    Some(ms) => Some(Duration::from_millis(u64::try_from(ms).map_err(|_| {
                        ToolError::new("argument \"timeout_ms\" must be a non-negative integer")
                    })?)),
                    None => None,
                };
                let mut command = Command::new(program);
                command.args(rest);
                let out = cx.run_command(command, RUN_OUTPUT_LIMIT, timeout)?;
                // Both null: the status is unknown (something else reaped the command).
                let signal = out
                    .status
                    .and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
                Ok(ToolResult::structured(json!({
                    "exit_code": out.status.and_then(|s| s.code()),
                    "signal": signal,
                    "stdout": String::from_utf8_lossy(&out.stdout),
                    "stderr": String::from_utf8_lossy(&out.stderr),
                    "timed_out": out.timed_out,
                    "truncated": out.truncated,
                })))
            },
        );
    }
    server
}
