//! Builds what a benchmark driver measures, with `cargo build --release`, and finds the
//! executables: shared by the `pipe` and `client` drivers (each includes it with `#[path]`).

use std::collections::HashMap;
use std::process::{Command, Stdio};

use serde_json::Value;

/// Builds `targets` (cargo's target options: `["--example", "naive_loop", "--bin", "mcpipe"]`)
/// in release mode, saying so on stderr under `label`; returns the executables by target name.
pub(crate) fn release_build(
    label: &str,
    targets: &[&str],
) -> Result<HashMap<String, String>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec![
        "build",
        "--release",
        "--message-format=json-render-diagnostics",
    ];
    args.extend_from_slice(targets);
    eprintln!("{label}: cargo {}", args.join(" "));
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
