//! `mcpipe wrap` in front of the misbehaving servers of tests/fixtures/wrap_hazards.py: the
//! wrapper spawned with a fixture mode, a scratch file for pids, and process checks on /proc.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use super::mcp::Proc;

pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `mcpipe wrap [flags] -- python3 wrap_hazards.py MODE [ARG]`.
pub fn wrapped(flags: &[&str], mode: &str, arg: Option<&str>) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcpipe"));
    cmd.arg("wrap").args(flags).args(["--name", "hazard", "--"]);
    cmd.arg("python3").arg(fixture("wrap_hazards.py")).arg(mode);
    cmd.args(arg);
    Proc::spawn(cmd)
}

/// A scratch file for a fixture's pids.
pub fn pid_file(test: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcpipe-wrap-{test}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

pub fn pids_in(path: &PathBuf) -> Vec<u32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Whether `pid` is a live process (not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Waits up to `limit` for `pid` to be gone.
pub fn gone_within(pid: u32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The handshake and `tools/list` in one write (the burst real clients send).
pub fn burst(p: &mut Proc) {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list"});
    p.write_raw(format!("{init}\n{initialized}\n{list}\n").as_bytes());
}
