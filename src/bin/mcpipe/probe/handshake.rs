//! The handshake check, and what a failed handshake says about the server: one that echoes its
//! input, or one that wrote lines the client could not read (a pretty-printed answer, a log
//! line on stdout), found on a second, bare connection since the failed client is gone.

use std::time::{Duration, Instant};

use super::grading::{pass, short, Outcome};
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
            let unread = match diagnosis.unread {
                0 => String::new(),
                1 => String::from(" (asked again: 1 line could not be read)"),
                n => format!(" (asked again: {n} lines could not be read)"),
            };
            return short(format!("could not connect: {e}{unread}"));
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
