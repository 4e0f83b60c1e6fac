//! The dual-era client: it probes with `server/discover` (MCP 2026-07-28) and falls back to the
//! `initialize` handshake. Against real third-party servers (`mcp-server-time`, modern;
//! `server-everything`, handshake era), against `mcpipe demo`, and against fixtures that are
//! modern-only, answer `-32022`, ignore unknown requests, or start slowly.
//!
//! The third-party tests fail (they do not skip) when the servers are not installed: run
//! `scripts/setup-interop.sh` first.

mod util;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpipe::{Client, ClientBuilder, Era, Error, ErrorCode, RequestOptions, ShutdownStage};
use serde_json::{json, Map, Value};
use util::client::{demo, first_text, fixture, interop, process_alive, watchdog};

const LIMIT: Duration = Duration::from_secs(60);
const MODERN: &str = "2026-07-28";

fn time_server() -> ClientBuilder {
    Client::builder(interop(".venv/bin/mcp-server-time"))
        .args(["--local-timezone", "UTC"])
        .init_timeout(Duration::from_secs(30))
        // A cold Python start on a busy machine can take seconds: give the probe time, so
        // that the test is about the server's answer, not about its start-up time.
        .discover_timeout(Duration::from_secs(30))
        .log_bad_lines(false)
}

fn everything() -> ClientBuilder {
    Client::builder(interop("node_modules/.bin/mcp-server-everything"))
        .arg("stdio")
        .init_timeout(Duration::from_secs(30))
        .discover_timeout(Duration::from_secs(30))
        .log_bad_lines(false)
}

fn modern(args: &[&str]) -> ClientBuilder {
    fixture("modern_server.py")
        .args(args)
        .init_timeout(Duration::from_secs(10))
        .discover_timeout(Duration::from_secs(10))
}

/// What the modern fixture saw (its `stats` tool).
fn seen(client: &mut Client) -> Value {
    client.call_tool("stats", json!({})).unwrap()["structuredContent"].clone()
}

fn methods(seen: &Value) -> Vec<&str> {
    seen["methods"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// The era a server's own answer to a modern `server/discover` points to, asked without the
/// client's negotiation (plain JSON-RPC): a result listing 2026-07-28, or `-32022` whose
/// `data.supported` lists it, means modern; anything else, legacy.
fn era_the_server_claims(builder: ClientBuilder) -> Era {
    let mut raw = builder.initialize(false).spawn().unwrap();
    let params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "0"},
    }});
    let answer = raw.request(
        "server/discover",
        Some(params),
        RequestOptions::new().timeout(Duration::from_secs(10)),
    );
    let lists_modern = |v: &Value| {
        v.as_array()
            .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(MODERN)))
    };
    let era = match &answer {
        Ok(result) if lists_modern(&result["supportedVersions"]) => Era::Modern,
        Err(Error::Rpc(e))
            if e.code == ErrorCode(-32022)
                && e.data
                    .as_ref()
                    .is_some_and(|d| lists_modern(&d["supported"])) =>
        {
            Era::Modern
        }
        _ => Era::Legacy,
    };
    raw.close();
    era
}

// --- third-party servers -------------------------------------------------------------------

#[test]
fn mcp_server_time_is_modern_lists_calls_and_closes() {
    watchdog(LIMIT, || {
        let mut client = time_server().spawn().unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(client.protocol_version(), MODERN);
        assert!(client.initialize_result().is_null());
        let discover = client.discover_result();
        assert_eq!(
            discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcp-time",
            "{discover}"
        );
        let tools = client.list_tools().unwrap();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(names.contains(&"get_current_time"), "{names:?}");
        let result = client
            .call_tool("get_current_time", json!({"timezone": "UTC"}))
            .unwrap();
        assert_ne!(result["isError"], true, "{result}");
        assert!(first_text(&result).contains("UTC"), "{result}");
        // No ping under 2026-07-28 (the server answers it -32601): ping() maps to discover.
        client.ping().unwrap();
        assert_eq!(client.stats().bad_lines, 0);
        let pid = client.pid().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
        assert!(!process_alive(pid));
    });
}

#[test]
fn mcp_server_time_answers_an_unknown_version_with_32022_and_the_client_picks_its_own() {
    watchdog(LIMIT, || {
        let mut client = time_server()
            .modern_protocol_version("2099-01-01")
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(client.protocol_version(), MODERN);
        let result = client
            .call_tool("get_current_time", json!({"timezone": "UTC"}))
            .unwrap();
        assert!(first_text(&result).contains("UTC"), "{result}");
    });
}

#[test]
fn server_everything_rejects_discover_and_the_client_falls_back_to_initialize() {
    watchdog(LIMIT, || {
        let started = Instant::now();
        let mut client = everything().spawn().unwrap();
        assert_eq!(client.era(), Some(Era::Legacy));
        assert!(!client.protocol_version().is_empty());
        assert!(client.discover_result().is_null());
        assert!(client.initialize_result()["serverInfo"].is_object());
        // It answers discover with -32601 at once: the fallback costs no timeout.
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "{:?}",
            started.elapsed()
        );
        let result = client.call_tool("echo", json!({"message": "hi"})).unwrap();
        assert!(first_text(&result).contains("hi"), "{result}");
        client.ping().unwrap();
        assert_eq!(client.stats().bad_lines, 0);
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
    });
}

// --- mcpipe demo ---------------------------------------------------------------------------

#[test]
fn the_demo_gets_the_era_its_own_discover_answer_points_to() {
    watchdog(LIMIT, || {
        let claimed = era_the_server_claims(demo());
        let mut client = demo().spawn().unwrap();
        assert_eq!(client.era(), Some(claimed));
        match claimed {
            Era::Modern => {
                assert_eq!(client.protocol_version(), MODERN);
                assert!(client.discover_result().is_object());
            }
            _ => assert!(client.initialize_result()["serverInfo"].is_object()),
        }
        let echo = client.call_tool("echo", json!({"text": "hi"})).unwrap();
        assert_eq!(first_text(&echo), "hi");
        client.ping().unwrap();
        let shutdown = client.close();
        assert_eq!(shutdown.stage, ShutdownStage::StdinClosed, "{shutdown:?}");
    });
}

#[test]
fn the_demo_can_be_forced_into_the_handshake_era() {
    watchdog(LIMIT, || {
        let mut client = demo().era(Era::Legacy).spawn().unwrap();
        assert_eq!(client.era(), Some(Era::Legacy));
        assert!(!client.protocol_version().is_empty());
        let echo = client.call_tool("echo", json!({"text": "x"})).unwrap();
        assert_eq!(first_text(&echo), "x");
    });
}

// --- a modern-only fixture -----------------------------------------------------------------

#[test]
fn a_modern_server_gets_meta_on_every_request_and_no_handshake() {
    watchdog(LIMIT, || {
        let mut client = modern(&[]).client_info("dual-test", "9.9").spawn().unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(client.protocol_version(), MODERN);
        assert_eq!(
            client.discover_result()["instructions"],
            "a modern-only fixture"
        );
        let tools = client.list_tools().unwrap();
        assert!(tools.iter().any(|t| t["name"] == "wizard"));
        // A result without resultType is complete.
        let echo = client.call_tool("echo", json!({"text": "héllo"})).unwrap();
        assert_eq!(first_text(&echo), "héllo");
        let readme = client.read_resource("mcpipe://modern/readme").unwrap();
        assert_eq!(readme["contents"][0]["text"], "modern\n");
        // -32602 is how 2026-07-28 says "no such resource".
        let missing = client.read_resource("mcpipe://modern/none").unwrap_err();
        assert!(missing.is_resource_not_found(), "{missing}");
        client.ping().unwrap();
        let seen = seen(&mut client);
        let methods = methods(&seen);
        assert_eq!(methods[0], "server/discover", "{methods:?}");
        for forbidden in ["initialize", "ping", "<response>"] {
            assert!(!methods.contains(&forbidden), "{forbidden} in {methods:?}");
        }
        assert_eq!(seen["notifications"], json!([]), "{seen}");
        assert_eq!(seen["meta_ok"], true, "{seen}");
        assert_eq!(seen["client_info"]["name"], "dual-test");
        assert_eq!(seen["client_info"]["version"], "9.9");
        assert!(seen["versions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v == MODERN));
    });
}

#[test]
fn input_required_rounds_are_fulfilled_with_new_ids_and_the_state_echoed_verbatim() {
    watchdog(LIMIT, || {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (asked.clone(), asked.clone());
        let mut client = modern(&[])
            .root("file:///tmp/project", Some("project"))
            .on_elicitation(move |params| {
                a.lock().unwrap().push(params["message"].clone());
                Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
            })
            .on_sampling(move |params| {
                b.lock().unwrap().push(params["maxTokens"].clone());
                Ok(json!({"role": "assistant", "model": "test-model",
                          "content": {"type": "text", "text": "ok"}}))
            })
            .spawn()
            .unwrap();
        let result = client.call_tool("wizard", json!({})).unwrap();
        assert_eq!(
            first_text(&result),
            "name=Ada model=test-model roots=file:///tmp/project rounds=3",
            "{result}"
        );
        assert_eq!(
            *asked.lock().unwrap(),
            vec![json!("Who are you?"), json!(10)]
        );
        let seen = seen(&mut client);
        let caps = &seen["client_capabilities"];
        for cap in ["roots", "sampling", "elicitation"] {
            assert!(caps[cap].is_object(), "{cap} missing from {caps}");
        }
        let ids = seen["ids"].as_array().unwrap();
        let mut unique = ids.clone();
        unique.sort_by_key(|v| v.to_string());
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "an id was reused: {ids:?}");
    });
}

#[test]
fn a_result_with_only_request_state_is_retried_after_a_pause() {
    watchdog(LIMIT, || {
        let mut client = modern(&[]).spawn().unwrap();
        let result = client.call_tool("state_only", json!({})).unwrap();
        assert_eq!(first_text(&result), "ready");
    });
}

#[test]
fn inputs_the_client_cannot_give_end_the_call_and_the_caller_can_go_on() {
    watchdog(LIMIT, || {
        let mut client = modern(&[]).root("file:///r", None).spawn().unwrap();
        // No elicitation callback: the first round comes back to the caller.
        let params = json!({"name": "wizard", "arguments": {}});
        let err = client
            .request("tools/call", Some(params.clone()), RequestOptions::new())
            .unwrap_err();
        let Error::InputUnanswered { method, result, .. } = err else {
            panic!("{err}");
        };
        assert_eq!(method, "tools/call");
        assert!(result["inputRequests"]["who"].is_object(), "{result}");
        let mut answers = Map::new();
        answers.insert(
            "who".into(),
            json!({"action": "accept", "content": {"name": "Bo"}}),
        );
        // Round two asks for sampling (no callback either) and roots (configured).
        let err = client
            .continue_request(
                "tools/call",
                Some(params.clone()),
                &result,
                answers,
                RequestOptions::new(),
            )
            .unwrap_err();
        let Error::InputUnanswered { result, reason, .. } = err else {
            panic!("{err}");
        };
        assert!(reason.contains("sampling/createMessage"), "{reason}");
        let mut answers = Map::new();
        answers.insert(
            "model".into(),
            json!({"role": "assistant", "model": "by-hand",
            "content": {"type": "text", "text": "ok"}}),
        );
        answers.insert("where".into(), json!({"roots": [{"uri": "file:///r"}]}));
        let done = client
            .continue_request(
                "tools/call",
                Some(params),
                &result,
                answers,
                RequestOptions::new(),
            )
            .unwrap();
        assert_eq!(
            first_text(&done),
            "name=Bo model=by-hand roots=file:///r rounds=3"
        );

        let err = client.call_tool("ask_unknown", json!({})).unwrap_err();
        assert!(
            matches!(&err, Error::InputUnanswered { reason, .. } if reason.contains("tasks/get")),
            "{err}"
        );
    });
}

#[test]
fn the_number_of_input_rounds_is_bounded() {
    watchdog(LIMIT, || {
        let mut client = modern(&[])
            .root("file:///r", None)
            .max_input_rounds(3)
            .spawn()
            .unwrap();
        let err = client.call_tool("forever", json!({})).unwrap_err();
        let Error::InputUnanswered { reason, result, .. } = err else {
            panic!("{err}");
        };
        assert!(reason.contains("3 rounds"), "{reason}");
        assert!(result["requestState"].is_string());
        let calls = methods(&seen(&mut client))
            .iter()
            .filter(|m| **m == "tools/call")
            .count();
        assert_eq!(calls, 5, "the first call, 3 retries, and the stats call");
    });
}

#[test]
fn a_timed_out_modern_request_is_cancelled() {
    watchdog(LIMIT, || {
        let mut client = modern(&[]).spawn().unwrap();
        let err = client
            .call_tool_with(
                "sleep",
                json!({"ms": 3000}),
                RequestOptions::new().timeout(Duration::from_millis(300)),
            )
            .unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let seen = seen(&mut client);
        assert_eq!(seen["notifications"], json!(["notifications/cancelled"]));
        assert_eq!(seen["cancelled"].as_array().unwrap().len(), 1, "{seen}");
    });
}

#[test]
fn the_heartbeat_uses_discover_under_the_modern_era() {
    watchdog(LIMIT, || {
        let mut client = modern(&[])
            .heartbeat(Duration::from_millis(50), Duration::from_secs(2))
            .spawn()
            .unwrap();
        client.pump(Duration::from_millis(400)).unwrap();
        assert!(client.stats().heartbeats >= 2, "{:?}", client.stats());
        let seen = seen(&mut client);
        let methods = methods(&seen);
        let discovers = methods.iter().filter(|m| **m == "server/discover").count();
        assert!(discovers >= 3, "{methods:?}");
        assert!(!methods.contains(&"ping"), "{methods:?}");
        assert_eq!(seen["meta_ok"], true);
    });
}

// --- -32022, no common version, slow and silent probes ------------------------------------

#[test]
fn unsupported_version_makes_the_client_pick_a_common_one_from_supported() {
    watchdog(LIMIT, || {
        let mut client = modern(&["--versions", "2027-06-01,2026-07-28"])
            .modern_protocol_version("2099-01-01")
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(client.protocol_version(), MODERN);
        let seen = seen(&mut client);
        let versions = seen["versions"].as_array().unwrap();
        assert_eq!(versions[0], "2099-01-01");
        assert!(versions[1..].iter().all(|v| v == MODERN), "{versions:?}");
        assert!(!methods(&seen).contains(&"initialize"));
    });
}

#[test]
fn a_modern_server_with_no_version_in_common_is_an_error() {
    watchdog(LIMIT, || {
        let err = modern(&["--versions", "2027-06-01"]).spawn().unwrap_err();
        assert!(matches!(err, Error::Protocol { .. }), "{err}");
        assert!(err.to_string().contains("2027-06-01"), "{err}");
    });
}

#[test]
fn a_server_that_ignores_discover_costs_the_discover_timeout_then_falls_back() {
    watchdog(LIMIT, || {
        // The default discover timeout: 2 s.
        let started = Instant::now();
        let mut client = fixture("good_server.py")
            .arg("--ignore-unknown")
            .spawn()
            .unwrap();
        let took = started.elapsed();
        assert_eq!(client.era(), Some(Era::Legacy));
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(8),
            "{took:?}"
        );
        assert_eq!(
            first_text(&client.call_tool("echo", json!({"text": "a"})).unwrap()),
            "a"
        );

        let started = Instant::now();
        let client = fixture("good_server.py")
            .arg("--ignore-unknown")
            .discover_timeout(Duration::from_millis(300))
            .spawn()
            .unwrap();
        let took = started.elapsed();
        assert_eq!(client.era(), Some(Era::Legacy));
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_secs(5),
            "{took:?}"
        );
    });
}

#[test]
fn a_late_discover_answer_still_makes_a_slow_modern_server_modern() {
    watchdog(LIMIT, || {
        // The probe gives up after 200 ms; the server reads nothing for 1 s, then answers the
        // probe (late) and rejects the fallback initialize with -32022.
        let mut client = modern(&["--start-delay", "1"])
            .discover_timeout(Duration::from_millis(200))
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(client.protocol_version(), MODERN);
        let echo = client.call_tool("echo", json!({"text": "late"})).unwrap();
        assert_eq!(first_text(&echo), "late");
    });
}

#[test]
fn unsupported_version_to_initialize_after_a_silent_probe_makes_the_client_probe_again() {
    watchdog(LIMIT, || {
        let mut client = modern(&["--drop-first-discover"])
            .discover_timeout(Duration::from_millis(300))
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        let seen = seen(&mut client);
        let methods = methods(&seen);
        assert_eq!(
            methods[..3],
            ["server/discover", "initialize", "server/discover"],
            "{methods:?}"
        );
    });
}

// --- forced eras and restarts --------------------------------------------------------------

#[test]
fn forcing_an_era_skips_the_probe_and_never_falls_back() {
    watchdog(LIMIT, || {
        // Forced legacy: no probe, so a server that ignores discover costs nothing.
        let started = Instant::now();
        let client = fixture("good_server.py")
            .args(["--ignore-unknown", "--log-methods"])
            .era(Era::Legacy)
            .spawn()
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(client.era(), Some(Era::Legacy));
        let mut client = client;
        client.pump(Duration::from_millis(100)).unwrap();
        let tail = client.stderr_tail();
        assert!(tail.starts_with("method: initialize\n"), "{tail}");
        assert!(!tail.contains("server/discover"), "{tail}");
        drop(client);

        // Forced legacy against a modern-only server: its -32022 to initialize is the error.
        let err = modern(&[]).era(Era::Legacy).spawn().unwrap_err();
        assert!(
            matches!(&err, Error::Rpc(e) if e.code == ErrorCode(-32022)),
            "{err}"
        );

        // Forced modern against a handshake-era server: its -32601 to discover is the error.
        let err = fixture("good_server.py")
            .era(Era::Modern)
            .spawn()
            .unwrap_err();
        assert!(
            matches!(&err, Error::Rpc(e) if e.code == ErrorCode::METHOD_NOT_FOUND),
            "{err}"
        );

        let client = modern(&[]).era(Era::Modern).spawn().unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
    });
}

#[test]
fn a_restart_reuses_a_legacy_verdict_without_probing_and_probes_a_modern_server_again() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py")
            .args(["--log-methods"])
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Legacy));
        client.pump(Duration::from_millis(100)).unwrap();
        assert!(client
            .stderr_tail()
            .starts_with("method: server/discover\n"));
        client.restart().unwrap();
        assert_eq!(client.era(), Some(Era::Legacy));
        client.pump(Duration::from_millis(100)).unwrap();
        let tail = client.stderr_tail();
        assert!(tail.starts_with("method: initialize\n"), "{tail}");
        assert!(!tail.contains("server/discover"), "{tail}");

        let mut client = modern(&[]).spawn().unwrap();
        client.restart().unwrap();
        assert_eq!(client.era(), Some(Era::Modern));
        assert_eq!(methods(&seen(&mut client))[0], "server/discover");
    });
}

#[test]
fn legacy_server_requests_for_sampling_and_elicitation_go_to_the_callbacks() {
    watchdog(LIMIT, || {
        let mut client = fixture("good_server.py")
            .on_sampling(|_| {
                Ok(json!({"role": "assistant", "model": "m",
                                       "content": {"type": "text", "text": "sampled"}}))
            })
            .spawn()
            .unwrap();
        assert_eq!(client.era(), Some(Era::Legacy));
        let result = client.call_tool("ask_unsupported", json!({})).unwrap();
        let answer: Value = serde_json::from_str(first_text(&result)).unwrap();
        assert_eq!(answer["result"]["model"], "m", "{answer}");
        assert_eq!(client.stats().server_requests, 1);
    });
}
