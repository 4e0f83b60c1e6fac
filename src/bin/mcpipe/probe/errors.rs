//! Checks of how the server treats bad input and what it may send: parse errors, invalid
//! requests, unknown methods, notifications, and capability discipline.

use std::time::Duration;

use mcpipe::{Error, ErrorCode, RequestOptions, Response};
use serde_json::json;

use super::grading::{
    broken, failure, pass, rules, short, skip, undeclared, unread_note, unread_since, Level,
    Outcome,
};
use super::target::{raw_request, survives, Target};
use super::tools;

/// Sends one bad line and returns the first response within 2 s (scaled), or `None`, with the
/// lines meanwhile that the client could not read; a MUST failure when the server dies on it.
fn send_bad_line(
    client: &mut mcpipe::Client,
    target: &Target,
    line: &[u8],
) -> Result<(Option<Response>, u64), Outcome> {
    let mark = client.stats().bad_lines;
    if let Err(e) = client.send_raw(line) {
        return Err(broken(format!("could not write: {e}")));
    }
    let response = match client.next_stray_response(target.t(Duration::from_secs(2))) {
        Ok(response) => response,
        Err(e) => return Err(broken(format!("the server died on the bad line: {e}"))),
    };
    let unread = unread_since(client, mark);
    survives(client, target, "the bad line")?;
    Ok((response, unread))
}

pub(crate) fn malformed_json(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":\"bad-json\",\"method\":\"ping\",\n";
    match send_bad_line(&mut client, target, line) {
        Err(o) => o,
        Ok((None, unread)) => pass(format!(
            "skipped the line without an answer (allowed: log and skip){}",
            unread_note(unread)
        )),
        Ok((Some(Response { result: Ok(_), .. }), _)) => {
            short("answered with a result, not an error")
        }
        Ok((
            Some(Response {
                id,
                result: Err(error),
            }),
            _,
        )) => {
            if error.code != ErrorCode::PARSE_ERROR {
                short(format!(
                    "answered with error {} instead of -32700",
                    error.code
                ))
            } else if let Some(id) = id {
                short(format!(
                    "answered -32700 with id {id}; an unreadable id is null"
                ))
                .by(Level::Should, rules::ERROR_ID)
            } else {
                pass(format!("answered -32700 ({})", error.message))
            }
        }
    }
}

pub(crate) fn invalid_request(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let line = b"{\"jsonrpc\":\"2.0\",\"id\":\"bad-request\",\"method\":42}\n";
    match send_bad_line(&mut client, target, line) {
        Err(o) => o,
        Ok((None, unread)) => short(format!(
            "dropped without an answer (the server survived){}",
            unread_note(unread)
        )),
        Ok((Some(Response { result: Ok(_), .. }), _)) => {
            short("answered with a result, not an error")
        }
        Ok((
            Some(Response {
                id,
                result: Err(error),
            }),
            _,
        )) => {
            let id_ok = match &id {
                None => true,
                Some(id) => id.as_str() == Some("bad-request"),
            };
            if !id_ok {
                let shown = id.map_or(String::from("null"), |i| i.to_string());
                short(format!(
                    "error {} carried id {shown}, not the request's",
                    error.code
                ))
                .by(Level::Must, rules::ERROR_ID)
            } else if error.code != ErrorCode::INVALID_REQUEST {
                short(format!(
                    "answered with error {} instead of -32600",
                    error.code
                ))
            } else {
                let which = if id.is_some() {
                    "the request's id"
                } else {
                    "id null"
                };
                pass(format!("answered -32600 with {which} ({})", error.message))
            }
        }
    }
}

pub(crate) fn unknown_method(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mark = client.stats().bad_lines;
    match client.request(
        "mcpipe/no-such-method",
        Some(json!({})),
        RequestOptions::new(),
    ) {
        Err(Error::Rpc(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
            pass(format!("answered -32601 ({})", e.message))
        }
        Err(Error::Rpc(e)) => short(format!("answered with error {} instead of -32601", e.code)),
        Err(e) => failure("mcpipe/no-such-method", &e, unread_since(&client, mark)).outcome(),
        Ok(_) => short("an unknown method was answered with a result"),
    }
}

pub(crate) fn notifications(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let lines = concat!(
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/mcpipe-probe\",\"params\":{}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":987654321}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"nobody\",\"progress\":1}}\n",
        "{\"jsonrpc\":\"2.0\",\"method\":\"mcpipe/probe-unknown\"}\n",
    );
    if let Err(e) = client.send_raw(lines.as_bytes()) {
        return broken(format!("could not write: {e}"));
    }
    if let Err(o) = survives(&mut client, target, "the notifications") {
        return o;
    }
    if let Err(e) = client.pump(target.t(Duration::from_millis(300))) {
        return broken(format!("the server failed: {e}"));
    }
    match client.next_stray_response(Duration::ZERO) {
        Ok(None) => pass("4 notifications, no response"),
        Ok(Some(r)) => short(format!(
            "a notification was answered: {}",
            mcpipe::Message::Response(r).to_line().escape_ascii()
        )),
        Err(e) => broken(format!("the server failed: {e}")),
    }
}

pub(crate) fn capabilities(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let declared = client.initialize_result()["capabilities"].clone();
    let mark = client.stats().bad_lines;
    // What provoked log lines on real servers: a bad line, an invalid request, an unknown
    // method; then the lists the server declares.
    let mut burst = b"{not json\n{\"jsonrpc\":\"2.0\",\"id\":\"cap-1\",\"method\":42}\n".to_vec();
    burst.extend(raw_request("cap-2", "mcpipe/no-such-method", json!({})));
    if let Err(e) = client.send_raw(&burst) {
        return broken(format!("could not write: {e}"));
    }
    // Before the lists: a server the bad lines stopped would fail them too, one failure of
    // malformed-json or invalid-request counted twice.
    if survives(&mut client, target, "the bad lines").is_err() {
        return skip("the server did not survive the bad lines (see malformed-json)");
    }
    for (capability, method) in [
        ("tools", "tools/list"),
        ("resources", "resources/list"),
        ("prompts", "prompts/list"),
    ] {
        if declared.get(capability).is_some() {
            match client.request(method, Some(json!({})), RequestOptions::new()) {
                // Any answer will do: what it says is graded by other checks.
                Ok(_) | Err(Error::Rpc(_) | Error::Protocol { .. }) => {}
                Err(e) => return failure(method, &e, unread_since(&client, mark)).outcome(),
            }
        }
    }
    if let Err(e) = client.pump(target.t(Duration::from_millis(300))) {
        return broken(format!("the server failed: {e}"));
    }
    let seen = client.take_notifications();
    let mut found = undeclared(&declared, &seen);
    let survey = tools::survey(target);
    for v in &survey.undeclared {
        if !found.contains(v) {
            found.push(v.clone());
        }
    }
    let stats = client.stats();
    // A server may always ping: only its other requests need a declared capability.
    let server_requests = stats.server_requests - stats.server_pings + survey.server_requests;
    if !found.is_empty() {
        return short(found.join("; "));
    }
    if server_requests > 0 {
        return short(format!(
            "{server_requests} requests to a client that declared no capabilities (only ping is allowed)"
        ))
        .by(Level::Should, rules::SERVER_REQUESTS);
    }
    pass(format!(
        "notifications seen: {}, all within the declared capabilities",
        seen.len() + survey.notifications
    ))
}
