//! Replays every committed fuzz input through the fuzz targets' own property functions, on
//! stable Rust: the seed corpus (`fuzz/corpus/<target>/`) and the minimised crashes that were
//! fixed (`fuzz/artifacts/<target>/`, when present). `cargo test` thus guards every regression
//! the fuzzers found, without nightly.

#[path = "../fuzz/properties.rs"]
mod properties;

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// One input taking longer than this is a hang (the slowest, `server_loop`, takes milliseconds).
const PER_INPUT: Duration = Duration::from_secs(30);

/// A fuzz target's property: panics when the input breaks it.
type Property = fn(&[u8]);

const TARGETS: [(&str, Property); 7] = [
    ("framing", properties::framing),
    ("message", properties::message),
    ("server_loop", properties::server_loop),
    ("server_loop_mcp", properties::server_loop_mcp),
    ("server_session", properties::server_session),
    ("client_responses", properties::client_responses),
    ("client_session", properties::client_session),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files directly in `dir`, sorted; none when it does not exist.
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("reading a corpus directory").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .starts_with('.')
        })
        .collect();
    files.sort();
    files
}

/// Runs `property` on each file in a worker thread, one file at a time under a watchdog;
/// fails naming every file whose property failed, or the first that hung.
fn replay(target: &str, property: Property) {
    let mut files = files_in(&fuzz_dir().join("corpus").join(target));
    files.extend(files_in(&fuzz_dir().join("artifacts").join(target)));
    let count = files.len();
    let (tx, rx) = mpsc::channel::<(PathBuf, Result<(), String>)>();
    thread::spawn(move || {
        for file in files {
            let data = fs::read(&file).expect("reading a corpus file");
            let result = panic::catch_unwind(AssertUnwindSafe(|| property(&data)))
                .map_err(|payload| panic_text(payload.as_ref()));
            if tx.send((file, result)).is_err() {
                return;
            }
        }
    });
    let mut failures = Vec::new();
    for _ in 0..count {
        match rx.recv_timeout(PER_INPUT) {
            Ok((_, Ok(()))) => {}
            Ok((file, Err(why))) => failures.push(format!("{}: {why}", file.display())),
            Err(_) => panic!(
                "{target}: an input hung for {PER_INPUT:?} (the one after the last reported); \
                 failures so far: {failures:#?}"
            ),
        }
    }
    assert!(failures.is_empty(), "{target}: {failures:#?}");
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[test]
fn framing_corpus_and_regressions_hold() {
    replay("framing", properties::framing);
}

#[test]
fn message_corpus_and_regressions_hold() {
    replay("message", properties::message);
}

#[test]
fn server_loop_corpus_and_regressions_hold() {
    replay("server_loop", properties::server_loop);
}

#[test]
fn server_loop_mcp_corpus_and_regressions_hold() {
    replay("server_loop_mcp", properties::server_loop_mcp);
}

#[test]
fn server_session_corpus_and_regressions_hold() {
    replay("server_session", properties::server_session);
}

#[test]
fn client_responses_corpus_and_regressions_hold() {
    replay("client_responses", properties::client_responses);
}

#[test]
fn client_session_corpus_and_regressions_hold() {
    replay("client_session", properties::client_session);
}

/// The replay must not pass by testing nothing: every target has seeds.
#[test]
fn every_target_has_a_seed_corpus() {
    for (target, _) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let n = files_in(&dir).len();
        assert!(n > 0, "{} holds no seeds", dir.display());
    }
}

/// Each fuzz target has its corpus and its property here, so a new target cannot be left out
/// of the replay.
#[test]
fn every_fuzz_target_is_replayed() {
    let targets = files_in(&fuzz_dir().join("fuzz_targets"));
    let mut names: Vec<String> = targets
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            p.file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    let mut replayed: Vec<String> = TARGETS.iter().map(|(t, _)| (*t).to_owned()).collect();
    replayed.sort();
    assert_eq!(names, replayed, "fuzz_targets/ and the replay disagree");
}

/// The committed seeds include the inputs the loop's contract names.
#[test]
fn seed_corpus_covers_the_contract() {
    let message = fuzz_dir().join("corpus").join("message");
    for seed in [
        "bad-not-json",
        "bad-jsonrpc-1.0",
        "bad-id-float",
        "bad-params-string",
        "bad-result-and-error",
        "batch-empty",
        "id-u64-max",
        "deep-nesting-arrays",
        "nul-raw-in-string",
        "utf8-invalid-in-string",
        "surrogate-lone-high",
    ] {
        assert!(message.join(seed).is_file(), "seed {seed} is missing");
    }
    let burst = fs::read(
        fuzz_dir()
            .join("corpus")
            .join("server_loop")
            .join("burst-claude-code-2.1.80"),
    )
    .expect("the real client burst is a seed");
    assert_eq!(burst.iter().filter(|&&b| b == b'\n').count(), 3);
}
