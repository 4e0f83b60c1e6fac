//! `mcpipe wrap` in front of the misbehaving servers of tests/fixtures/wrap_hazards.py: the
//! wrapper spawned with a fixture mode, a scratch file for pids, and process checks.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use super::mcp::Proc;
use super::Scratch;

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

/// The files of a `held` or `deaf-first` fixture: its log, and the file whose existence lets
/// it read on ([`HeldFiles::release`]); both removed when dropped, a failed test's too.
pub struct HeldFiles {
    pub log: Scratch,
    pub go: Scratch,
}

impl HeldFiles {
    pub fn new(test: &str) -> HeldFiles {
        let log = pid_file(test);
        let go = Scratch::at(log.with_extension("go"));
        HeldFiles { log, go }
    }

    /// Lets the fixture read on.
    pub fn release(&self) {
        std::fs::write(&self.go, b"").unwrap();
    }
}

/// A scratch file for a fixture's pids (or a log, or a directory), removed when dropped: a
/// failed test leaves nothing behind either ([`Scratch`]).
pub fn pid_file(test: &str) -> Scratch {
    Scratch::new(&format!("mcpipe-wrap-{test}"))
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
    super::procs::alive(pid)
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

/// The messages a `held` or `deaf-first` fixture logged to `path` (its pids skipped).
pub fn received(path: &PathBuf) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(serde_json::Value::is_object)
        .collect()
}

/// Waits up to `limit` until the fixture logged a message that `wanted` picks; its log then.
pub fn received_until(
    path: &PathBuf,
    limit: Duration,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let until = Instant::now() + limit;
    loop {
        let got = received(path);
        if got.iter().any(&wanted) || Instant::now() >= until {
            return got;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The responses to `ids`, in the order of the ids, whatever order they came in.
pub fn responses(
    p: &mut Proc,
    ids: std::ops::RangeInclusive<i64>,
    within: Duration,
) -> Vec<(i64, serde_json::Value)> {
    let until = Instant::now() + within;
    let mut got = std::collections::BTreeMap::new();
    while got.len() < ids.clone().count() {
        let left = until.saturating_duration_since(Instant::now());
        let Some(msg) = p.next_within(left) else {
            panic!(
                "answers {got:?} of {ids:?}; stderr: {}",
                p.stderr.lock().unwrap()
            );
        };
        if let Some(id) = msg["id"].as_i64().filter(|id| ids.contains(id)) {
            got.insert(id, msg);
        }
    }
    got.into_iter().collect()
}
