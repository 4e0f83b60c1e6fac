//! The naive loop: the stdio JSON-RPC server most people write first, as a baseline for the
//! benchmarks (`cargo bench --bench pipe`; see BENCHMARKS.md).
//!
//! Run: `cargo run --release --example naive_loop [-- --mcp]`, then type
//! `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}`.
//!
//! `stdin.lock().lines()`, `serde_json::from_str::<Value>` per line, `println!` of a `json!`
//! response, `flush` — one write per response. Every request gets a result: its params (raw
//! mode, like `echo_server`'s `echo`), or with `--mcp` an MCP tool result holding the `text`
//! argument of a `tools/call` (other methods get their params back, which is enough for the
//! benchmark's init burst). It is deliberately plain; it is not an example to follow.

use std::io::{self, BufRead, Write};
use std::process::ExitCode;

use serde_json::{json, Value};

// The point of this baseline is the `println!` most servers use.
#[allow(clippy::print_stdout)]
fn run() -> Result<(), String> {
    let mcp = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--mcp") => true,
        Some(other) => return Err(format!("unknown argument {other}")),
    };
    let stdin = io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let request: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("naive_loop: bad line: {e}");
                continue;
            }
        };
        let Some(id) = request.get("id") else {
            continue; // A notification.
        };
        let params = request.get("params").cloned().unwrap_or(json!({}));
        let result = if mcp && request["method"] == "tools/call" {
            json!({ "content": [{ "type": "text", "text": params["arguments"]["text"] }] })
        } else {
            params
        };
        println!(
            "{}",
            json!({ "jsonrpc": "2.0", "id": id, "result": result })
        );
        io::stdout().flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("naive_loop: {e}");
            ExitCode::from(2)
        }
    }
}
