//! `mcpipe probe` against the odd servers field tests found mishandled: server text that must
//! not reach the terminal raw, a server that pings, answers that cannot be read, malformed tool
//! listings, tools without names or object schemas. Each test is named for the finding.

mod util;

use std::time::Duration;

use util::client::{fixture_path, watchdog};
use util::probe::{check, detail_of, probe, probe_json_with, status_of, tool_names};

/// Field test: a server's names reached the terminal raw: a tool named `x\n::error ...` printed
/// a line GitHub Actions runs as a workflow command, and ESC and NUL went through. Every text
/// from the server is printed with its control characters as visible escapes.
#[test]
fn server_text_cannot_start_a_line_or_reach_the_terminal_raw() {
    watchdog(Duration::from_secs(60), || {
        let path = fixture_path("field_hazards.py");
        let (output, _) = probe(&[
            "--github",
            "--only",
            "handshake,tools",
            "--",
            "python3",
            path.to_str().unwrap(),
            "names",
        ]);
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(output.status.success(), "{text}");
        // The only workflow commands are the probe's own annotations (its names have the
        // naming advice's warning); the server's `::error` stays inside an escaped name.
        let own = |l: &str| {
            l.starts_with("::warning title=mcpipe probe ")
                || l.starts_with("::error title=mcpipe probe ")
        };
        assert!(
            !text.lines().any(|l| l.starts_with("::") && !own(l)),
            "{text}"
        );
        for raw in ['\x1b', '\0', '\u{9b}'] {
            assert!(!text.contains(raw), "{raw:?} in {text}");
        }
        assert!(
            text.contains("x\\n::error title=injected::this line"),
            "{text}"
        );
        assert!(text.contains("server evil\\u{1b}[2J\\u{0}name"), "{text}");
        assert!(text.contains("clear\\u{1b}[2J\\u{0}\\u{9b}"), "{text}");

        // The JSON report keeps the names as they are (JSON escapes them itself).
        let (report, _, _) =
            probe_json_with(&[], "field_hazards.py", &["names"], Some("handshake,tools"));
        let names = tool_names(&report);
        assert_eq!(
            names[0],
            "x\n::error title=injected::this line was written by the probed server"
        );
    });
}

/// Field test: a server that pings the client was warned of "requests to a client that
/// declared no capabilities (only ping is allowed)". Pings are not counted there.
#[test]
fn a_server_that_only_pings_the_client_passes_the_capabilities_check() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json_with(&[], "field_hazards.py", &["pings"], Some("capabilities"));
        assert_eq!(status_of(&report, "capabilities"), "PASS", "{report:#}");
        assert_eq!(code, 0);
    });
}

/// Field test: mcp-cron 0.9.1 (official Go SDK) answers nothing after a line that is not JSON,
/// and the capabilities check, which sends such a line first, failed on its own `tools/list`
/// ("no answer to tools/list within 10,007 ms"): malformed-json's failure counted twice. The
/// same for a server that dies on the line. Now that check skips, naming malformed-json.
#[test]
fn a_server_stopped_by_a_bad_line_fails_malformed_json_once() {
    watchdog(Duration::from_secs(90), || {
        let only = Some("handshake,malformed-json,capabilities");
        for (fixture, args) in [
            ("field_hazards.py", &["deaf-after-bad-line"][..]),
            ("dies_on_bad_line.py", &[][..]),
        ] {
            let (report, code, _) = probe_json_with(&[], fixture, args, only);
            assert_eq!(code, 1, "{report:#}");
            assert_eq!(status_of(&report, "malformed-json"), "FAIL", "{report:#}");
            assert_eq!(status_of(&report, "capabilities"), "SKIP", "{report:#}");
            assert!(
                detail_of(&report, "capabilities").contains("did not survive the bad lines"),
                "{report:#}"
            );
        }
    });
}

/// Field test: an answer serde_json cannot read (`"minimum": -1e400` in a tools/list schema)
/// was reported as no answer within the timeout. stdout-clean says the answer came and could
/// not be read, and claims no clean stdout.
#[test]
fn an_answer_that_cannot_be_read_is_reported_as_such() {
    watchdog(Duration::from_secs(60), || {
        let (report, _, _) = probe_json_with(
            &[],
            "field_hazards.py",
            &["tiny-minimum"],
            Some("handshake,stdout-clean"),
        );
        let detail = detail_of(&report, "stdout-clean");
        assert_eq!(status_of(&report, "stdout-clean"), "FAIL", "{report:#}");
        assert!(
            detail.starts_with("tools/list answered, but the answer could not be read: "),
            "{detail}"
        );
        assert!(detail.contains("number out of range"), "{detail}");
        assert!(!detail.contains("every stdout line"), "{detail}");
    });
}

/// The rule the liveness findings cite: "the server serves until the client ends the session".
const ALIVE_RULE: &str = "serves until the client ends the session";

/// Field test: a live server whose `tools/list` result has no `tools` array (or not an array)
/// was failed with the liveness rule. The finding cites the shape of the result; stdout is
/// clean (the answer is a message); the liveness rule stays for a server that really exits.
#[test]
fn a_malformed_tools_list_cites_its_shape_not_the_liveness_rule() {
    watchdog(Duration::from_secs(90), || {
        for mode in ["no-tools-array", "tools-not-array"] {
            let (report, code, _) = probe_json_with(
                &[],
                "odd_tools.py",
                &[mode],
                Some("handshake,stdout-clean,tools,capabilities"),
            );
            assert_eq!(code, 1, "{report:#}");
            let tools = check(&report, "tools");
            assert_eq!(tools["status"], "FAIL", "{report:#}");
            assert_eq!(tools["level"], "MUST", "{report:#}");
            let rule = tools["rule"].as_str().unwrap();
            assert!(rule.contains("tools/list result"), "{mode}: {rule}");
            assert!(
                detail_of(&report, "tools").contains("no tools array"),
                "{report:#}"
            );
            assert_eq!(status_of(&report, "stdout-clean"), "PASS", "{report:#}");
            assert_eq!(status_of(&report, "capabilities"), "PASS", "{report:#}");
            assert!(!report.to_string().contains(ALIVE_RULE), "{report:#}");
        }
        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["exits-on-list"], Some("tools"));
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert!(
            tools["rule"].as_str().unwrap().contains(ALIVE_RULE),
            "{report:#}"
        );
        assert!(
            detail_of(&report, "tools").contains("exit status: 3"),
            "{report:#}"
        );
    });
}

/// Field test: tools without a name (none, a number, an empty string) got no finding, and were
/// called with the name "". Each is a MUST failure (`Tool.name` is a required string) and is
/// not called; the named tool beside them still is.
#[test]
fn tools_without_a_name_fail_and_are_not_called() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["nameless"], Some("handshake,tools"));
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert_eq!(tools["level"], "MUST", "{report:#}");
        assert!(
            tools["rule"]
                .as_str()
                .unwrap()
                .contains("every tool has a name"),
            "{report:#}"
        );
        let detail = detail_of(&report, "tools");
        for flaw in [
            "a tool with no name",
            "a tool with a name that is not a string (42)",
            "a tool with an empty name",
        ] {
            assert!(detail.contains(flaw), "{flaw}: {detail}");
        }
        let items = tools["tools"].as_array().unwrap();
        assert_eq!(items.len(), 4, "{report:#}");
        for item in &items[..3] {
            assert_eq!(item["action"], "skipped", "{item}");
            assert!(
                item["detail"]
                    .as_str()
                    .unwrap()
                    .contains("cannot be called"),
                "{item}"
            );
        }
        assert_eq!(items[3]["name"], "ok");
        assert_eq!(items[3]["action"], "called");
    });
}

/// Field test: a tool whose `inputSchema` is not an object schema (`"string"`, `{"type":
/// "string"}`, none) got no finding and was called with the string "mcpipe-probe" as its
/// arguments; with a `properties` beside `"type": "string"`, the cancellation check panicked
/// on it. Each is a MUST failure; the tools are called with `{}` (tools/call arguments are an
/// object), and none is made a cancellation candidate from its properties.
#[test]
fn an_input_schema_that_is_not_an_object_schema_fails_and_gets_empty_arguments() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json_with(
            &[],
            "odd_tools.py",
            &["bad-schemas"],
            Some("handshake,tools,cancellation"),
        );
        assert_eq!(code, 1, "{report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "FAIL", "{report:#}");
        assert_eq!(tools["level"], "MUST", "{report:#}");
        let rule = tools["rule"].as_str().unwrap();
        assert!(
            rule.contains("inputSchema is a JSON Schema object"),
            "{rule}"
        );
        let detail = detail_of(&report, "tools");
        for flaw in [
            "plain: inputSchema \"string\" is not a JSON Schema object",
            "typed: inputSchema has type \"string\", not \"object\"",
            "absent: no inputSchema",
        ] {
            assert!(detail.contains(flaw), "{flaw}: {detail}");
        }
        assert!(!detail.contains("fine:"), "{detail}");
        for item in tools["tools"].as_array().unwrap() {
            assert_eq!(item["action"], "called", "{item}");
            let detail = item["detail"].as_str().unwrap();
            assert!(detail.starts_with("read-only, {} → a result"), "{item}");
        }
        assert_eq!(status_of(&report, "cancellation"), "SKIP", "{report:#}");
    });
}

/// Field test: a check that ended with "no answer within N ms" did not say that the server had
/// written lines meanwhile that the client could not read (a log line, a pretty-printed
/// answer), which is why no answer came. The finding counts them; the handshake, whose client
/// is gone when it fails, counts them on a second try.
#[test]
fn a_wait_in_vain_counts_the_lines_that_could_not_be_read() {
    watchdog(Duration::from_secs(90), || {
        let (report, _, _) = probe_json_with(
            &[],
            "odd_tools.py",
            &["unreadable"],
            Some("handshake,unknown-tool,tools"),
        );
        // Each call: "calling slow..." and the 12 lines of its answer printed with indent=2.
        let tools = check(&report, "tools");
        let slow = &tools["tools"][0];
        let detail = slow["detail"].as_str().unwrap();
        assert!(detail.contains("no answer within 3,000 ms"), "{slow}");
        assert!(detail.contains("(13 lines could not be read)"), "{slow}");
        let unknown = check(&report, "unknown-tool");
        let detail = unknown["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("no answer to tools/call within"),
            "{unknown}"
        );
        assert!(
            detail.ends_with("(13 lines could not be read)"),
            "{unknown}"
        );
        assert!(
            !unknown["rule"].as_str().unwrap().contains(ALIVE_RULE),
            "{unknown}"
        );

        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["pretty"], Some("handshake"));
        assert_eq!(code, 1, "{report:#}");
        let detail = detail_of(&report, "handshake");
        assert!(detail.contains("did not answer initialize"), "{detail}");
        assert!(detail.contains("lines could not be read"), "{detail}");
    });
}

/// Field test: a server that speaks only MCP 2026-07-28 (no `initialize`: it answers it with
/// -32022 naming its versions, or -32601) was graded as a failed handshake, a MUST. The probe
/// tells it apart: the handshake row names the versions the server offered, as a warning of
/// INFO level (the specification allows such a server; the probe's checks are of the
/// handshake era), every other check is skipped saying why, and the run does not fail.
#[test]
fn a_server_of_the_2026_era_only_is_told_apart_with_the_versions_it_offered() {
    watchdog(Duration::from_secs(90), || {
        let (report, code, _) = probe_json_with(&[], "modern_server.py", &[], None);
        assert_eq!(code, 0, "{report:#}");
        let handshake = check(&report, "handshake");
        assert_eq!(handshake["status"], "WARN", "{report:#}");
        assert_eq!(handshake["level"], "INFO", "{report:#}");
        let detail = handshake["detail"].as_str().unwrap();
        assert!(
            detail.contains("speaks only protocol version 2026-07-28"),
            "{detail}"
        );
        assert!(detail.contains("-32022"), "{detail}");
        assert!(
            handshake["rule"].as_str().unwrap().contains("2026-07-28"),
            "{report:#}"
        );
        assert_eq!(report["warned"], 1, "{report:#}");
        assert_eq!(report["skipped"], 19, "{report:#}");
        assert!(
            detail_of(&report, "tools").contains("2026-07-28"),
            "{report:#}"
        );

        // Its likelier answer to initialize, -32601: the versions come from server/discover.
        let (report, code, _) = probe_json_with(
            &[],
            "modern_server.py",
            &["--initialize-unknown"],
            Some("handshake"),
        );
        assert_eq!(code, 0, "{report:#}");
        assert_eq!(status_of(&report, "handshake"), "WARN", "{report:#}");
        let detail = detail_of(&report, "handshake");
        assert!(
            detail.contains("speaks only protocol version 2026-07-28"),
            "{detail}"
        );
        assert!(detail.contains("-32601"), "{detail}");

        // Versions the probe does not know at all are named too.
        let (report, _, _) = probe_json_with(
            &[],
            "modern_server.py",
            &["--versions", "2027-06-01,2027-12-01"],
            Some("handshake"),
        );
        assert_eq!(status_of(&report, "handshake"), "WARN", "{report:#}");
        let detail = detail_of(&report, "handshake");
        assert!(
            detail.contains("speaks only protocol versions 2027-06-01, 2027-12-01"),
            "{detail}"
        );
    });
}

/// Tool names against MCP 2025-11-25's advice (1 to 128 characters of `A-Za-z0-9_-.`, unique
/// within the server): a SHOULD finding, so a warning, not a failure.
#[test]
fn tool_names_against_the_naming_advice_are_a_should_finding() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) =
            probe_json_with(&[], "odd_tools.py", &["odd-names"], Some("handshake,tools"));
        assert_eq!(code, 0, "a SHOULD finding is not a failure: {report:#}");
        let tools = check(&report, "tools");
        assert_eq!(tools["status"], "WARN", "{report:#}");
        assert_eq!(tools["level"], "SHOULD", "{report:#}");
        let detail = detail_of(&report, "tools");
        for advice in [
            "tool name \"has space\" has characters outside A-Za-z0-9_-.",
            "tool name \"echo\" is listed more than once",
        ] {
            assert!(detail.contains(advice), "{advice}: {detail}");
        }
        let (report, code, _) = probe_json_with(
            &["--strict"],
            "odd_tools.py",
            &["odd-names"],
            Some("handshake,tools"),
        );
        assert_eq!(code, 1, "--strict fails on a SHOULD: {report:#}");
    });
}

/// Field review: the cancellation check passed a server that answered the cancelled call with
/// lines the client cannot read (here a pretty-printed answer): it counted only late answers
/// and late progress. Such lines break the stdio transport's MUST (nothing but MCP messages
/// on stdout), which outweighs the cancellation's SHOULD: a failure.
#[test]
fn lines_that_cannot_be_read_after_a_cancellation_fail_the_cancellation_check() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json_with(
            &[],
            "odd_tools.py",
            &["late-garbage"],
            Some("handshake,cancellation"),
        );
        let cancellation = check(&report, "cancellation");
        assert_eq!(cancellation["status"], "FAIL", "{report:#}");
        assert_eq!(cancellation["level"], "MUST", "{report:#}");
        let rule = cancellation["rule"].as_str().unwrap();
        assert!(
            rule.contains("MUST NOT write non-MCP data to stdout"),
            "{rule}"
        );
        let detail = detail_of(&report, "cancellation");
        assert!(
            detail.contains("lines written after the cancellation of sleep could not be read"),
            "{detail}"
        );
        assert_eq!(code, 1, "{report:#}");
    });
}

/// Field review: a row's detail is cut at 200 characters (on one line) in the table, the
/// annotations, JUnit and the JSON report alike, so a long error message from the server
/// (a traceback) was lost everywhere past its first lines. The JSON report keeps the whole
/// text, as the check found it, in `full_detail`.
#[test]
fn the_json_report_keeps_the_whole_detail_of_a_row_cut_at_200_characters() {
    watchdog(Duration::from_secs(60), || {
        let (report, code, _) = probe_json_with(
            &[],
            "field_hazards.py",
            &["long-error"],
            Some("handshake,unknown-method"),
        );
        assert_eq!(code, 0, "{report:#}");
        let row = check(&report, "unknown-method");
        assert_eq!(row["status"], "PASS", "{report:#}");
        let detail = row["detail"].as_str().unwrap();
        assert_eq!(detail.chars().count(), 200, "{detail}");
        assert!(
            detail.starts_with(
                "answered -32601 (method not found: mcpipe/no-such-method | Traceback"
            ),
            "{detail}"
        );
        assert!(detail.ends_with("..."), "{detail}");
        let full = row["full_detail"]
            .as_str()
            .unwrap_or_else(|| panic!("no full_detail: {row:#}"));
        let traceback: String = (0..8)
            .map(|i| {
                format!(
                    "  File \"server.py\", line {}, in handle_{i}\n    return table[method]\n",
                    100 + i
                )
            })
            .collect();
        assert_eq!(
            full,
            format!(
                "answered -32601 (method not found: mcpipe/no-such-method\n\
                 Traceback (most recent call last):\n{traceback}\
                 KeyError: 'mcpipe/no-such-method' (the end of the message))"
            )
        );
        // A detail short enough is the same in both.
        let handshake = check(&report, "handshake");
        assert_eq!(handshake["full_detail"], handshake["detail"], "{report:#}");
    });
}
