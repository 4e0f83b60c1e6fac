//! Checks that call tools, safe by default: only tools annotated `readOnlyHint: true` (and not
//! `destructiveHint: true`) are called, with arguments built from their input schema, plus any
//! tool the user names with `--call`. MCP's defaults make an unannotated tool one that may
//! change things (`readOnlyHint` false, `destructiveHint` true), so it is never called unasked.

use std::time::{Duration, Instant};

use mcpipe::{Client, Error, ErrorCode, RequestOptions};
use serde_json::{json, Map, Value};

use super::format::ms;
use super::grading::undeclared;
use super::grading::{
    broken, failure, pass, rules, short, skip, unread_note, unread_since, Failure, Item, Level,
    Outcome,
};
use super::listing;
use super::survey::{Called, Entry, Survey};
use super::target::{survives, Target};

/// At most this many tools are called, so a server with hundreds stays quick to probe.
const MAX_CALLS: usize = 16;

/// Whether the probe may call `tool` unasked; `Err` says why not.
pub(crate) fn safety(tool: &Value) -> Result<(), &'static str> {
    let annotations = &tool["annotations"];
    if annotations.is_null() {
        return Err("no annotations, so it may change things (readOnlyHint defaults to false)");
    }
    if annotations["destructiveHint"] == true {
        return Err("destructiveHint: true");
    }
    if annotations["readOnlyHint"] != true {
        return Err("not annotated readOnlyHint: true");
    }
    Ok(())
}

/// Arguments a tool should accept, built from its input schema: every required property,
/// from its `const`, `default`, `enum` or `examples`, else the simplest value of its type.
/// Always an object (`tools/call` takes no other arguments): `{}` when the schema does not
/// describe one (a finding of its own, see `listing`).
pub(crate) fn arguments(schema: &Value) -> Value {
    match value_for(schema, 0) {
        object @ Value::Object(_) if schema.is_object() => object,
        _ => Value::Object(Map::new()),
    }
}

fn value_for(schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    for key in ["const", "default"] {
        if let Some(v) = schema.get(key) {
            return v.clone();
        }
    }
    if let Some(v) = schema["enum"].get(0).or_else(|| schema["examples"].get(0)) {
        return v.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema[key].get(0) {
            return value_for(first, depth + 1);
        }
    }
    let kind = match &schema["type"] {
        Value::String(s) => s.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut object = Map::new();
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            for name in required.iter().filter_map(Value::as_str) {
                let property = &schema["properties"][name];
                object.insert(name.to_owned(), value_for(property, depth + 1));
            }
            Value::Object(object)
        }
        "array" => {
            let n = schema["minItems"].as_u64().unwrap_or(0).min(4) as usize;
            Value::Array(vec![value_for(&schema["items"], depth + 1); n])
        }
        "integer" | "number" => {
            let low = schema["minimum"].as_f64().unwrap_or(1.0);
            let n = schema["maximum"].as_f64().map_or(low, |high| low.min(high));
            if kind == "integer" {
                json!(n.ceil() as i64)
            } else {
                json!(n)
            }
        }
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => {
            let min = schema["minLength"].as_u64().unwrap_or(0).min(64) as usize;
            let mut text = String::from("mcpipe-probe");
            while text.len() < min {
                text.push('x');
            }
            Value::String(text)
        }
    }
}

/// The survey of `target`'s tools, made on first use.
pub(crate) fn survey(target: &Target) -> Survey {
    if let Some(done) = &*target.survey.borrow() {
        return done.clone();
    }
    let made = make_survey(target);
    *target.survey.borrow_mut() = Some(made.clone());
    made
}

fn make_survey(target: &Target) -> Survey {
    let mut survey = Survey::default();
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => {
            survey.failure = Some(Failure::of(o));
            return survey;
        }
    };
    let declared = client.initialize_result()["capabilities"].clone();
    if declared.get("tools").is_none() {
        survey.no_tools = true;
        return survey;
    }
    let mark = client.stats().bad_lines;
    let listed = match client.list_tools() {
        Ok(listed) => listed,
        Err(e) => {
            survey.failure = Some(failure("tools/list", &e, unread_since(&client, mark)));
            return survey;
        }
    };
    let mut calls = 0;
    for tool in listed {
        let mut entry = Entry {
            skipped: None,
            named: false,
            called: None,
            flaws: Vec::new(),
            tool,
        };
        let name = listing::name(&entry.tool).map(str::to_owned);
        if let Err(why) = &name {
            entry.flaws.push((why.clone(), rules::TOOL_NAME));
        }
        if let Some(flaw) = listing::schema_flaw(&entry.tool) {
            entry.flaws.push((flaw, rules::INPUT_SCHEMA));
        }
        let name = match name {
            Ok(name) => name,
            Err(why) => {
                entry.skipped = Some(format!("{why}: it cannot be called"));
                survey.entries.push(entry);
                continue;
            }
        };
        let named = target.calls.iter().find(|c| c.name == name);
        entry.named = named.is_some();
        let args = match (named, safety(&entry.tool)) {
            (Some(call), _) => Some(call.arguments.clone()),
            (None, Ok(())) => Some(arguments(&entry.tool["inputSchema"])),
            (None, Err(why)) => {
                entry.skipped = Some(why.to_owned());
                None
            }
        };
        if let Some(args) = args {
            if calls == MAX_CALLS && !entry.named {
                entry.skipped = Some(format!(
                    "read-only, but the probe calls at most {MAX_CALLS}"
                ));
            } else {
                calls += 1;
                let called = call(&mut client, target, &name, args);
                let after = format!("calling {name}");
                let gone = survives(&mut client, target, &after).err();
                entry.called = Some(called);
                if let Some(o) = gone {
                    survey.failure = Some(Failure::of(o));
                    survey.entries.push(entry);
                    break;
                }
            }
        }
        survey.entries.push(entry);
    }
    if client.protocol_version() >= "2025-11-25" {
        let names = survey
            .entries
            .iter()
            .filter_map(|e| listing::name(&e.tool).ok());
        survey.name_advice = listing::name_advice(names);
    }
    for name in target.calls.iter().map(|c| &c.name) {
        if !survey.entries.iter().any(|e| e.name() == name) {
            survey.unlisted.push(name.clone());
        }
    }
    let _ = client.pump(target.t(Duration::from_millis(100)));
    let seen = client.take_notifications();
    survey.notifications = seen.len();
    survey.undeclared = undeclared(&declared, &seen);
    let stats = client.stats();
    survey.server_requests = stats.server_requests - stats.server_pings;
    survey
}

/// Calls one tool with a progress token and a 3 s deadline (scaled).
fn call(client: &mut Client, target: &Target, name: &str, arguments: Value) -> Called {
    let mut progress = 0;
    let mut on_progress = |_: &mcpipe::Progress| progress += 1;
    let started = Instant::now();
    let deadline = target.t(Duration::from_secs(3));
    let mark = client.stats().bad_lines;
    let result = client.call_tool_with(
        name,
        arguments.clone(),
        RequestOptions::new()
            .timeout(deadline)
            .reset_on_progress(false)
            .on_progress(&mut on_progress),
    );
    let took = started.elapsed();
    let mut timed_out = false;
    let answer = match result {
        Ok(result) if !result["content"].is_array() => {
            Err(String::from("a result without a content array"))
        }
        Ok(result) if result["isError"] == true => Ok(format!(
            "an isError result: {}",
            result["content"][0]["text"].as_str().unwrap_or("")
        )),
        Ok(_) => Ok(String::from("a result")),
        Err(Error::Rpc(e)) => Ok(format!("error {}: {}", e.code, e.message)),
        Err(Error::Timeout { .. }) => {
            timed_out = true;
            Ok(format!(
                "no answer within {}: cancelled{}",
                ms(deadline),
                unread_note(unread_since(client, mark))
            ))
        }
        Err(e) => Err(e.to_string()),
    };
    Called {
        arguments,
        answer,
        took,
        progress,
        timed_out,
    }
}

pub(crate) fn tools(target: &Target) -> Outcome {
    let survey = survey(target);
    if survey.no_tools {
        return skip("the server declares no tools");
    }
    let mut items = Vec::new();
    let mut called = Vec::new();
    // Each shortfall with the rule it breaks: the survey's end, the listing, the calls.
    let mut findings: Vec<(String, String)> = Vec::new();
    if let Some(failure) = &survey.failure {
        findings.push((failure.detail.clone(), failure.rule.clone()));
    }
    let mut skipped = 0;
    for entry in &survey.entries {
        for (flaw, rule) in &entry.flaws {
            let finding = if *rule == rules::TOOL_NAME {
                format!("a tool with {flaw}")
            } else {
                format!("{}: {flaw}", entry.label())
            };
            findings.push((finding, (*rule).to_owned()));
        }
        let (action, detail) = match (&entry.skipped, &entry.called) {
            (Some(why), _) => {
                skipped += 1;
                ("skipped", why.clone())
            }
            (None, Some(c)) => {
                called.push(entry.name());
                let how = if entry.named { "--call" } else { "read-only" };
                match &c.answer {
                    Ok(summary) if c.timed_out => {
                        ("called", format!("{how}, {} → {summary}", c.arguments))
                    }
                    Ok(summary) => (
                        "called",
                        format!("{how}, {} → {summary} in {}", c.arguments, ms(c.took)),
                    ),
                    Err(why) => {
                        findings.push((
                            format!("{}: {why}", entry.name()),
                            rules::TOOL_RESULT.to_owned(),
                        ));
                        ("failed", format!("{how}, {} → {why}", c.arguments))
                    }
                }
            }
            (None, None) => ("skipped", String::from("not reached")),
        };
        // The row's detail may be cut: each tool's line says what is wrong with it too (a
        // missing name already does, in the reason it was skipped).
        let mut detail = detail;
        for (flaw, rule) in &entry.flaws {
            if *rule != rules::TOOL_NAME {
                detail = format!("{detail}; {flaw}");
            }
        }
        items.push(Item {
            name: entry.label(),
            action,
            detail,
        });
    }
    let summary = format!(
        "called {} of {} tools ({}), skipped {skipped}",
        called.len(),
        survey.entries.len(),
        if called.is_empty() {
            String::from("none safe")
        } else {
            called.join(", ")
        }
    );
    let mut outcome = if !findings.is_empty() {
        let details: Vec<&str> = findings.iter().map(|(d, _)| d.as_str()).collect();
        let mut cited: Vec<&str> = Vec::new();
        for (_, rule) in &findings {
            if !cited.contains(&rule.as_str()) {
                cited.push(rule);
            }
        }
        short(format!("{}; {summary}", details.join("; "))).by(Level::Must, cited.join("; "))
    } else if !survey.name_advice.is_empty() {
        short(format!("{}; {summary}", survey.name_advice.join("; ")))
            .by(Level::Should, rules::TOOL_NAME_ADVICE)
    } else if !survey.unlisted.is_empty() {
        short(format!(
            "--call names tools the server does not list: {}; {summary}",
            survey.unlisted.join(", ")
        ))
        .by(Level::Info, "the command line: --call names a listed tool")
    } else {
        pass(summary)
    };
    outcome.items = items;
    outcome
}

/// A tool the probe may call (read-only or named), with arguments that should make it fail:
/// `fail` with a message, else a tool with a required argument, called without it.
fn failing_call(survey: &Survey) -> Option<(String, Value)> {
    let callable = || survey.entries.iter().filter(|e| e.called.is_some());
    if let Some(e) = callable().find(|e| e.name() == "fail") {
        return Some((e.name().to_owned(), json!({"message": "mcpipe probe"})));
    }
    callable()
        .find(|e| {
            e.tool["inputSchema"]["required"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        })
        .map(|e| (e.name().to_owned(), json!({})))
}

pub(crate) fn tool_error(target: &Target) -> Outcome {
    let survey = survey(target);
    if survey.no_tools {
        return skip("the server declares no tools");
    }
    let Some((name, arguments)) = failing_call(&survey) else {
        return skip("no safe tool can be made to fail (none read-only with a required argument)");
    };
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mark = client.stats().bad_lines;
    let verdict = match client.call_tool(&name, arguments.clone()) {
        Ok(result) if result["isError"] == true => {
            pass(format!("{name} {arguments} answered with an isError result"))
        }
        Ok(_) => skip(format!("{name} {arguments} succeeded; no way to make it fail")),
        Err(Error::Rpc(e)) if e.code == ErrorCode::INVALID_PARAMS => pass(format!(
            "{name} {arguments} answered -32602 (before 2025-11-25 the usual answer; isError is preferred now)"
        )),
        Err(Error::Rpc(e)) => short(format!("{name} {arguments} answered with error {}", e.code)),
        Err(e) => failure("tools/call", &e, unread_since(&client, mark)).outcome(),
    };
    match survives(&mut client, target, "the tool error") {
        Ok(()) => verdict,
        Err(o) => o,
    }
}

pub(crate) fn unknown_tool(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    if client.initialize_result()["capabilities"]
        .get("tools")
        .is_none()
    {
        return skip("the server declares no tools");
    }
    let mark = client.stats().bad_lines;
    match client.call_tool("mcpipe-probe-no-such-tool", json!({})) {
        Err(Error::Rpc(e)) if e.code == ErrorCode::INVALID_PARAMS => {
            pass(format!("answered -32602 ({})", e.message))
        }
        Ok(result) if result["isError"] == true => {
            pass("answered with an isError result (the spec's example is -32602)")
        }
        Ok(_) => short("an unknown tool was answered with a successful result"),
        Err(Error::Rpc(e)) => short(format!("answered with error {} instead of -32602", e.code)),
        Err(e) => failure("tools/call", &e, unread_since(&client, mark)).outcome(),
    }
}

/// Integer arguments that read as a duration, set so the call would take 2 s (scaled). Not
/// for a tool whose schema is no object schema: its properties describe no arguments.
fn slow_arguments(entry: &Entry, scale: f64) -> Option<Value> {
    if listing::schema_flaw(&entry.tool).is_some() {
        return None;
    }
    let schema = &entry.tool["inputSchema"];
    let mut args = arguments(schema);
    let props = schema["properties"].as_object()?;
    let mut found = false;
    for (name, prop) in props {
        if prop["type"] != "integer" && prop["type"] != "number" {
            continue;
        }
        let lower = name.to_ascii_lowercase();
        let seconds = 2.0 * scale;
        let value = if lower == "ms" || lower.ends_with("_ms") || lower.contains("milli") {
            (seconds * 1000.0).round() as u64
        } else if ["seconds", "secs", "duration", "delay", "wait"]
            .iter()
            .any(|w| lower.contains(w))
        {
            seconds.ceil() as u64
        } else {
            continue;
        };
        args[name.as_str()] = json!(value);
        found = true;
    }
    found.then_some(args)
}

/// The tool to cancel: the one the user named, else a safe tool that sent progress or outlasted
/// its deadline in the survey, else a safe tool with a duration argument, set to 2 s.
fn cancel_candidate(target: &Target, survey: &Survey) -> Option<(String, Value, &'static str)> {
    if let Some(named) = &target.cancel {
        return Some((
            named.name.clone(),
            named.arguments.clone(),
            "named by --cancel",
        ));
    }
    let called = || {
        survey
            .entries
            .iter()
            .filter(|e| e.called.is_some() && !e.named)
    };
    if let Some(e) = called().find(|e| {
        e.called
            .as_ref()
            .is_some_and(|c| c.progress > 0 || c.timed_out)
    }) {
        let args = e
            .called
            .as_ref()
            .map_or(Value::Null, |c| c.arguments.clone());
        return Some((
            e.name().to_owned(),
            args,
            "slow or sent progress when called",
        ));
    }
    called().find_map(|e| {
        slow_arguments(e, target.scale).map(|args| {
            (
                e.name().to_owned(),
                args,
                "read-only with a duration argument",
            )
        })
    })
}

pub(crate) fn cancellation(target: &Target) -> Outcome {
    let survey = survey(target);
    if survey.no_tools {
        return skip("the server declares no tools");
    }
    let Some((name, arguments, why)) = cancel_candidate(target, &survey) else {
        return skip("no slow read-only tool to cancel (name one with --cancel NAME --args JSON)");
    };
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    let mut progress = 0;
    let mut on_progress = |_: &mcpipe::Progress| progress += 1;
    let wait = target.t(Duration::from_millis(400));
    let mark = client.stats().bad_lines;
    let result = client.call_tool_with(
        &name,
        arguments.clone(),
        RequestOptions::new()
            .timeout(wait)
            .reset_on_progress(false)
            .on_progress(&mut on_progress),
    );
    match result {
        Err(Error::Timeout { .. }) => {}
        Ok(_) | Err(Error::Rpc(_)) => {
            return skip(format!(
                "{name} {arguments} answered within {}: nothing to cancel",
                ms(wait)
            ))
        }
        Err(e) => return failure("tools/call", &e, unread_since(&client, mark)).outcome(),
    }
    // The client sent the cancellation as the call timed out.
    let cancelled = client.stats().bad_lines;
    // Past the time the call would have ended, nothing more may arrive for it.
    if let Err(e) = client.pump(target.t(Duration::from_millis(2300))) {
        return broken(format!("the server failed after the cancellation: {e}"));
    }
    let stats = client.stats().clone();
    let unread = unread_since(&client, cancelled);
    if unread > 0 {
        // A late answer the client cannot read (pretty-printed, a log line in its place) is
        // counted as neither a late answer nor progress, yet it is worse than either: not an
        // MCP message on stdout breaks the transport's MUST, beside which the cancellation's
        // SHOULD is the lesser finding.
        let lines = match unread {
            1 => String::from("1 line"),
            n => format!("{n} lines"),
        };
        let late = if stats.late_responses > 0 {
            "; it was also answered anyway"
        } else {
            ""
        };
        return short(format!(
            "{lines} written after the cancellation of {name} could not be read (not JSON-RPC messages){late}"
        ))
            .by(Level::Must, rules::STDOUT);
    }
    if stats.late_responses > 0 {
        return short(format!("{name} was answered anyway after its cancellation"));
    }
    // One progress notification may cross the cancellation on the wire.
    if stats.late_progress > 1 {
        return short(format!(
            "{} progress notifications after the cancellation of {name}",
            stats.late_progress
        ));
    }
    if let Err(o) = survives(&mut client, target, "the cancellation") {
        return o;
    }
    pass(format!(
        "{name} ({why}) stopped after {progress} progress notifications; no late answer"
    ))
}
