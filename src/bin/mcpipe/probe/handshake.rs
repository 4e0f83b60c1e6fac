//! The handshake check, and what a failed handshake says about the server: one that echoes its
//! input, or one that wrote lines the client could not read (a pretty-printed answer, a log
//! line on stdout), found on a second, bare connection since the failed client is gone; or one
//! of the stateless era (MCP 2026-07-28), which has no `initialize`: its versions are named,
//! and the checks, which are of the handshake era, do not run.

use std::time::{Duration, Instant};

use mcpipe::{
    Error, ErrorCode, ErrorObject, RequestOptions, MODERN_PROTOCOL_VERSIONS, PROTOCOL_VERSIONS,
};
use serde_json::{json, Value};

use super::grading::{pass, rules, short, Level, Outcome};
use super::target::{raw_initialize, survives, Target};

/// The method of the notification an echoing server sends back.
const ECHO_PROBE: &str = "notifications/mcpipe-probe-echo";

pub(crate) fn handshake(target: &Target) -> Outcome {
    let mut client = match target.builder().spawn() {
        Ok(c) => c,
        Err(e) => {
            let diagnosis = diagnose(target);
            if diagnosis.echoes {
                return short(format!(
                    "the server echoes its input back (it returned the probe's own messages): {e}"
                ));
            }
            let offer = match &e {
                Error::Rpc(refusal) => versions_offered(target, refusal),
                _ => None,
            };
            if let Some(offer) = &offer {
                if !offer
                    .versions
                    .iter()
                    .any(|v| PROTOCOL_VERSIONS.contains(&v.as_str()))
                {
                    return other_era(offer, &e);
                }
            }
            let unread = match diagnosis.unread {
                0 => String::new(),
                1 => String::from(" (asked again: 1 line could not be read)"),
                n => format!(" (asked again: {n} lines could not be read)"),
            };
            let offered = offer.map_or(String::new(), |o| {
                format!("; it offers protocol versions {}", o.versions.join(", "))
            });
            return short(format!("could not connect: {e}{unread}{offered}"));
        }
    };
    let info = &client.initialize_result()["serverInfo"];
    let detail = format!(
        "protocol {}, server {} {}",
        client.protocol_version(),
        info["name"].as_str().unwrap_or("(unnamed)"),
        info["version"].as_str().unwrap_or("")
    );
    match survives(&mut client, target, "the handshake") {
        Ok(()) => pass(detail),
        Err(o) => o,
    }
}

/// What a bare connection (no handshake by the client) shows within 1 s (scaled) of an
/// `initialize` and a notification sent as raw lines.
#[derive(Debug, Default)]
struct Diagnosis {
    /// The server sent back the notification it was sent: it echoes its input. (Its echo of
    /// `initialize` is a request, which the probe's client answers with -32601, which comes
    /// back as the answer to `initialize`: without this the handshake would blame the server
    /// for "method not found: initialize".)
    echoes: bool,
    /// Lines on its stdout that the client could not read: why `initialize` got no answer.
    unread: u64,
}

fn diagnose(target: &Target) -> Diagnosis {
    let Ok(mut client) = target.builder().initialize(false).spawn() else {
        return Diagnosis::default();
    };
    let mut lines = raw_initialize("mcpipe-probe-diagnose");
    lines.extend(
        format!("{{\"jsonrpc\":\"2.0\",\"method\":\"{ECHO_PROBE}\",\"params\":{{}}}}\n").bytes(),
    );
    if client.send_raw(&lines).is_err() {
        return Diagnosis::default();
    }
    let mut echoes = false;
    let deadline = Instant::now() + target.t(Duration::from_secs(1));
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match client.next_notification(left) {
            Ok(Some(n)) if n.method == ECHO_PROBE => {
                echoes = true;
                break;
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    Diagnosis {
        echoes,
        unread: client.stats().bad_lines,
    }
}

/// The protocol versions a server that refused `initialize` says it speaks, and who said so.
#[derive(Debug)]
struct Offer {
    versions: Vec<String>,
    /// `server/discover` (with the server's name, when it gave one) or the refusal itself.
    source: String,
}

/// Asks the server, with a plain `server/discover` of the newest stateless revision, which
/// versions it speaks: its result's `supportedVersions`, or the `data.supported` of its -32022.
/// Failing that, the `data.supported` of its refusal of `initialize` (-32022, or the -32602
/// the handshake era's example shows). `None` when nobody named a version.
fn versions_offered(target: &Target, refusal: &ErrorObject) -> Option<Offer> {
    if let Some(offer) = discover(target) {
        return Some(offer);
    }
    let versions = strings(refusal.data.as_ref().map(|d| &d["supported"]))?;
    Some(Offer {
        versions,
        source: String::from("its answer to initialize"),
    })
}

fn discover(target: &Target) -> Option<Offer> {
    let mut client = target.builder().initialize(false).spawn().ok()?;
    let version = MODERN_PROTOCOL_VERSIONS[MODERN_PROTOCOL_VERSIONS.len() - 1];
    let params = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {
            "name": "mcpipe-probe",
            "version": env!("CARGO_PKG_VERSION"),
        },
    }});
    let answer = client.request(
        "server/discover",
        Some(params),
        RequestOptions::new().timeout(target.t(Duration::from_secs(2))),
    );
    client.close();
    let (versions, server) = match answer {
        Ok(result) => {
            let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
            let server = info["name"]
                .as_str()
                .map(|name| format!("{name} {}", info["version"].as_str().unwrap_or_default()));
            (strings(Some(&result["supportedVersions"]))?, server)
        }
        Err(Error::Rpc(e)) if e.code == ErrorCode(-32022) => {
            (strings(e.data.as_ref().map(|d| &d["supported"]))?, None)
        }
        Err(_) => return None,
    };
    let source = match server {
        Some(server) => format!("server/discover of {}", server.trim_end()),
        None => String::from("server/discover"),
    };
    Some(Offer { versions, source })
}

/// A non-empty list of strings (other elements skipped).
fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    let versions: Vec<String> = value?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    (!versions.is_empty()).then_some(versions)
}

/// A server that speaks none of the handshake-era versions: the specification allows it (the
/// stateless revisions have no `initialize`), so it is not a failure, but nothing was probed,
/// which a CI gate must show: a warning of INFO level, and the other checks skipped.
fn other_era(offer: &Offer, refusal: &Error) -> Outcome {
    let versions = match offer.versions.as_slice() {
        [one] => format!("protocol version {one}"),
        many => format!("protocol versions {}", many.join(", ")),
    };
    let refusal = match refusal {
        Error::Rpc(e) => format!("error {}: {}", e.code, e.message),
        other => other.to_string(),
    };
    short(format!(
        "the server speaks only {versions} ({}), none of the handshake era the probe checks: \
         not probed; initialize got {refusal}",
        offer.source
    ))
    .by(Level::Info, rules::OTHER_ERA)
    .skipping_the_rest(format!(
        "the server speaks only {versions}, which the probe does not check (see handshake)"
    ))
}
