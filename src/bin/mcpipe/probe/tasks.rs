//! The tasks check: when a server advertises MCP tasks (2025-11-25's `tasks` capability), a
//! read-only tool that allows tasks is run as one: started, its status read, its result
//! fetched; and a second one is started and cancelled.

use std::time::Duration;

use mcpipe::{Error, TaskOptions, TaskStart};
use serde_json::Value;

use super::format::ms;
use super::grading::{failure, pass, short, skip, unread_since, Outcome};
use super::target::Target;
use super::tools::survey;

/// The states a task may be in (MCP 2025-11-25).
const STATES: [&str; 5] = [
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

/// Whether the tool's definition allows or requires a task.
fn allows_tasks(tool: &Value) -> bool {
    matches!(
        tool["execution"]["taskSupport"].as_str(),
        Some("optional" | "required")
    )
}

pub(crate) fn tasks(target: &Target) -> Outcome {
    let mut client = match target.connect() {
        Ok(c) => c,
        Err(o) => return o,
    };
    if client.initialize_result()["capabilities"]
        .get("tasks")
        .is_none()
    {
        return skip("the server does not advertise tasks");
    }
    let mark = client.stats().bad_lines;
    let survey = survey(target);
    // A tool the survey called safely (read-only), that allows tasks, with the arguments that
    // worked there.
    let candidate = survey.entries.iter().find_map(|entry| {
        let called = entry.called.as_ref()?;
        (allows_tasks(&entry.tool) && called.answer.is_ok())
            .then(|| (entry.name().to_owned(), called.arguments.clone()))
    });
    let Some((name, arguments)) = candidate else {
        return skip("no read-only tool that allows tasks was called safely");
    };
    let deadline = target.t(Duration::from_secs(20));
    let started = std::time::Instant::now();
    let result = client.call_tool_as_task(
        &name,
        arguments.clone(),
        TaskOptions::new().deadline(deadline),
    );
    match result {
        Ok(result) if result.get("content").is_some() => {}
        Ok(other) => {
            return short(format!(
                "{name}'s task gave a result without content: {other}"
            ))
        }
        Err(e) => {
            return failed(
                &format!("{name} as a task"),
                &e,
                unread_since(&client, mark),
            )
        }
    }
    let round_trip = started.elapsed();
    // A second one, cancelled at once: it must end, `cancelled` (or already finished).
    let task = match client.start_task(&name, arguments, None) {
        Ok(TaskStart::Task(task)) => task,
        Ok(TaskStart::Done(_)) => {
            return short(format!(
                "{name} allows tasks but was answered without one when a task was asked for"
            ))
        }
        Err(e) => {
            return failed(
                &format!("starting {name} as a task"),
                &e,
                unread_since(&client, mark),
            )
        }
    };
    let Some(id) = task["taskId"].as_str().map(str::to_owned) else {
        return short(format!("a task without a taskId: {task}"));
    };
    let cancelled = match client.cancel_task(&id) {
        Ok(()) => true,
        // The task may have finished before the cancellation reached it.
        Err(Error::Rpc(e)) if e.code.0 == -32602 => false,
        Err(e) => return failed("tasks/cancel", &e, unread_since(&client, mark)),
    };
    let status = match client.get_task(&id) {
        Ok(status) => status,
        Err(e) => {
            return failed(
                "tasks/get after tasks/cancel",
                &e,
                unread_since(&client, mark),
            )
        }
    };
    let state = status["status"].as_str().unwrap_or_default();
    if !STATES.contains(&state) {
        return short(format!("tasks/get gave no known status: {status}"));
    }
    if cancelled && state != "cancelled" {
        return short(format!("a cancelled task is {state:?}, not \"cancelled\""));
    }
    pass(format!(
        "{name}: start, status, result in {}; a second task {}",
        ms(round_trip),
        if cancelled {
            "cancelled"
        } else {
            "had ended before its cancellation"
        }
    ))
}

/// A task request that failed: a dead or silent server is graded by [`failure`] (with the
/// `unread` lines of the check); an error answer or a malformed result falls short of the
/// tasks rule (the check's own).
fn failed(what: &str, e: &Error, unread: u64) -> Outcome {
    match e {
        Error::Rpc(_) | Error::Protocol { .. } if e.unreadable_answer().is_none() => {
            short(format!("{what} failed: {e}"))
        }
        _ => failure(what, e, unread).outcome(),
    }
}
