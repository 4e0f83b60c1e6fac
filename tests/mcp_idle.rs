//! The demo's idle hook: it evicts the cache once per quiet period, and `stats` counts it.

mod util;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use util::mcp::Proc;

fn stats(demo: &mut Proc, id: i64) -> Value {
    demo.call(id, "stats", json!({}));
    demo.result(id)["structuredContent"].clone()
}

/// Polls `stats` until `idle_evictions` reaches `want` (bounded), then returns the stats.
fn wait_for_evictions(demo: &mut Proc, want: u64, first_id: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = first_id;
    loop {
        // Stay quiet long enough for the hook (idle timeout 100 ms) to run.
        std::thread::sleep(Duration::from_millis(300));
        let s = stats(demo, id);
        id += 1;
        if s["idle_evictions"].as_u64() >= Some(want) {
            return s;
        }
        assert!(Instant::now() < deadline, "no idle eviction: {s}");
    }
}

#[test]
fn idle_evictions_are_counted_once_per_quiet_period() {
    let mut demo = Proc::demo(&["--idle-timeout-ms", "100"]);
    demo.initialize();
    demo.call(1, "echo", json!({ "text": "cached" }));
    demo.result(1);
    assert_eq!(stats(&mut demo, 2)["cache_entries"], 1);

    // One long quiet period (several idle timeouts long) counts once.
    std::thread::sleep(Duration::from_millis(700));
    let s = stats(&mut demo, 3);
    assert_eq!(s["idle_evictions"], 1, "{s}");
    assert_eq!(s["cache_entries"], 0, "{s}");

    // Activity, then another quiet period: one more.
    demo.call(4, "echo", json!({ "text": "again" }));
    demo.result(4);
    let s = wait_for_evictions(&mut demo, 2, 5);
    assert_eq!(s["idle_evictions"], 2, "{s}");
}

#[test]
fn idle_timeout_zero_turns_the_hook_off() {
    let mut demo = Proc::demo(&["--idle-timeout-ms", "0"]);
    demo.initialize();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(stats(&mut demo, 1)["idle_evictions"], 0);
}
