//! The client's properties: `client_responses` (the client against a process whose output
//! is arbitrary bytes) and `client_session` (the client's sans-IO session, driven directly).

use serde_json::Value;

/// `client_responses`: the first byte picks the mode (bit 0: the server stays until its stdin
/// closes instead of exiting at once; bit 1: the modern era instead of the handshake era;
/// bit 2: the request is `call_tool_as_task`, which polls, fetches the outcome and cancels at
/// its deadline, instead of `list_tools`), the rest is everything the server writes on stdout.
/// The client must not panic, must return from the handshake, a request and `close` within
/// their deadlines, must only report a handshake-era connection when the output held an
/// `initialize` result with a version it speaks, and must leave no process behind.
pub(crate) fn client_responses(data: &[u8]) {
    use mcpipe::{Client, Era};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (mode, output) = data.split_first().map_or((0, data), |(m, rest)| (*m, rest));
    let path = std::env::temp_dir().join(format!(
        "mcpipe-fuzz-client-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, output).expect("writing the server's output");
    let script = if mode & 1 == 0 {
        "cat \"$0\""
    } else {
        "cat \"$0\"; exec cat >/dev/null"
    };
    let era = if mode & 2 == 0 {
        Era::Legacy
    } else {
        Era::Modern
    };
    let started = Instant::now();
    let spawned = Client::builder("sh")
        .args(["-c", script])
        .arg(&path)
        .era(era)
        .init_timeout(Duration::from_millis(100))
        .timeout(Duration::from_millis(100))
        .max_total(Duration::from_millis(300))
        .close_timeouts(Duration::from_millis(200), Duration::from_millis(200))
        .log_bad_lines(false)
        .spawn();
    // Generous bounds: they catch a hang, not a slow machine.
    let bound = Duration::from_secs(5);
    match spawned {
        Ok(mut client) => {
            if era == Era::Legacy {
                // A response may also arrive inside a batch (an array), which the client accepts.
                let is_handshake = |v: &Value| {
                    v["result"]["protocolVersion"]
                        .as_str()
                        .is_some_and(|pv| mcpipe::PROTOCOL_VERSIONS.contains(&pv))
                };
                let real_handshake = output.split(|&b| b == b'\n').any(|line| {
                    match serde_json::from_slice::<Value>(line) {
                        Ok(Value::Array(items)) => items.iter().any(is_handshake),
                        Ok(v) => is_handshake(&v),
                        Err(_) => false,
                    }
                });
                assert!(
                    real_handshake,
                    "the client reported a handshake the server never made"
                );
            }
            let began = Instant::now();
            let outcome = if mode & 4 == 0 {
                client.list_tools().map(drop)
            } else {
                let options = mcpipe::TaskOptions::new()
                    .deadline(Duration::from_millis(300))
                    .max_poll_interval(Duration::from_millis(50));
                client
                    .call_tool_as_task("t", serde_json::json!({}), options)
                    .map(drop)
            };
            if let Err(e) = outcome {
                assert!(!e.to_string().is_empty());
            }
            assert!(
                began.elapsed() < bound,
                "the request took {:?}",
                began.elapsed()
            );
            let pid = client.pid();
            let shutdown = client.close();
            assert!(
                shutdown.elapsed < bound,
                "close took {:?}",
                shutdown.elapsed
            );
            if let Some(pid) = pid {
                assert!(!alive(pid), "the server outlived close");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty(), "an error without a message"),
    }
    assert!(
        started.elapsed() < 2 * bound,
        "the whole exchange took {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_file(&path);
}

/// Whether `pid` is a live process (not a zombie): its state letter from `/proc/PID/stat` on
/// Linux, from `ps -o stat=` elsewhere (macOS has no `/proc`).
fn alive(pid: u32) -> bool {
    let state = if cfg!(target_os = "linux") {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
    } else {
        std::process::Command::new("ps")
            .args(["-o", "stat=", "-p", &pid.to_string()])
            .output()
            .ok()
            .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().chars().next())
    };
    state.is_some_and(|s| !matches!(s, 'Z' | 'X'))
}

// ---------------------------------------------------------------------------------------------
// client_session: the client's sans-IO session, driven by a program of operations
// ---------------------------------------------------------------------------------------------

/// `client_session`: every request the client session starts ends exactly once (answered,
/// timed out, cancelled, or failed with the connection), whatever the server writes and
/// whenever time passes; progress and answers name only pending requests; no request id is
/// sent twice; nothing panics. The property itself lives with the session
/// (`mcpipe::internals::check_session`, behind the `internals` feature), where the
/// crate's unit tests sweep it too.
pub(crate) fn client_session(data: &[u8]) {
    mcpipe::internals::check_session(data);
}
