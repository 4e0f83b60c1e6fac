//! Tasks where the eras meet, against `mcpipe demo` over pipes: a tool that runs only as a task
//! offered to a handshake client whose revision has no tasks (before 2025-11-25), and a
//! 2026-07-28 task still running when the client switches the process to the handshake era
//! with `initialize`. Every wait is bounded (`util::mcp`), and each test has a watchdog.

mod util;

use std::time::Duration;

use serde_json::json;
use util::mcp::Proc;
use util::watchdog;

const LIMIT: Duration = Duration::from_secs(60);

/// The names `tools/list` shows (one page: the demo has fewer than 100 tools).
fn tool_names(p: &mut Proc, id: i64) -> Vec<String> {
    p.request(id, "tools/list", json!({}));
    let result = p.result(id);
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_tool_that_runs_only_as_a_task_is_not_offered_before_2025_11_25() {
    let _w = watchdog("required_before_tasks", LIMIT);
    // The conformance fixtures have two tools that require a task (`failing_job` on the pool,
    // `test_tool_with_task` on the loop's thread) and optional ones (`slow_compute`).
    for version in ["2024-11-05", "2025-03-26", "2025-06-18"] {
        let mut p = Proc::demo(&["--conformance"]);
        let caps = p.initialize_with(version, json!({}))["capabilities"].clone();
        assert!(caps.get("tasks").is_none(), "{version}: {caps}");
        let names = tool_names(&mut p, 1);
        for required in ["failing_job", "test_tool_with_task"] {
            assert!(
                !names.iter().any(|n| n == required),
                "{version}: {required} runs only as a task, which this revision lacks, yet \
                 tools/list offers it: {names:?}"
            );
        }
        assert!(names.iter().any(|n| n == "slow_compute"), "{names:?}");
        // Called anyway (by name, from an old listing): an unknown tool for this session, with
        // a message that says why; the tool does not run.
        for (id, required) in [(2, "failing_job"), (3, "test_tool_with_task")] {
            p.call(id, required, json!({}));
            let answer = p.response(id);
            assert_eq!(answer["error"]["code"], -32602, "{version}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains(required) && message.contains("task"),
                "{version}: {answer}"
            );
            assert_eq!(answer["error"]["data"]["name"], required, "{answer}");
        }
        // An optional tool runs as a plain call.
        p.call(4, "slow_compute", json!({ "seconds": 0 }));
        let result = p.result(4);
        assert!(result.get("task").is_none(), "{result}");
    }
    // At 2025-11-25 the same tools are listed, and a call without a task is -32601 (the
    // spec's rule for `required`), as before.
    let mut p = Proc::demo(&["--conformance"]);
    p.initialize_with("2025-11-25", json!({}));
    let names = tool_names(&mut p, 1);
    assert!(names.iter().any(|n| n == "failing_job"), "{names:?}");
    assert!(
        names.iter().any(|n| n == "test_tool_with_task"),
        "{names:?}"
    );
    p.call(2, "failing_job", json!({}));
    assert_eq!(p.error_code(2), -32601);
}
