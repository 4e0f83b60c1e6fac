//! Calling a tool as a task (MCP 2025-11-25 tasks; the 2026-07-28 extension
//! `io.modelcontextprotocol/tasks`): start it, poll its status with a backoff that never polls
//! faster than the server's poll interval, give it the inputs it asks for, fetch its outcome,
//! and cancel it when the caller's deadline passes (which bounds every request inside).
//! Written once for [`Client`] and [`SharedClient`](super::SharedClient) over [`Exchange`]
//! (plus [`Tasks`] for the declared capabilities), as `exchange.rs` is for plain requests.
//!
//! Both eras behind one API:
//! - 2025-11-25: `tools/call` with `params.task` (`{ttl?}`); the answer holds `task`; polls
//!   with `tasks/get`; the outcome from `tasks/result`; inputs arrive as requests from the
//!   server, answered while the client polls (it serves the connection between polls) or,
//!   when the task says `input_required`, while a `tasks/result` waits (servers may hold
//!   them until then).
//! - 2026-07-28: the call declares the extension in its own
//!   `_meta["io.modelcontextprotocol/clientCapabilities"]`; the server decides; a task's answer
//!   has `resultType: "task"`; `tasks/get` inlines the outcome, or `inputRequests`, which the
//!   client fulfils (roots, the elicitation and sampling callbacks) with `tasks/update`.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::era::{self, Asked};
use super::exchange::{self, Exchange};
use super::options::RequestOptions;
use super::retry::RetryPolicy;
use super::Client;
use crate::deadline;
use crate::error::Error;
use crate::message::{ErrorCode, ErrorObject};

/// The extension's name, in `clientCapabilities.extensions`.
const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// What [`Client::start_task`] got back.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskStart {
    /// The server made a task: its status object (`taskId`, `status`, `pollInterval` or
    /// `pollIntervalMs`, ...) as the server sent it.
    Task(Value),
    /// The server answered the call at once, without a task (a server without tasks, a tool
    /// that does not take them, or a fast path the server chose): the tool's result.
    Done(Value),
}

/// How [`Client::call_tool_as_task`] waits for a task.
#[derive(Debug, Clone)]
pub struct TaskOptions {
    deadline: Duration,
    max_poll_interval: Duration,
    ttl: Option<Duration>,
}

impl Default for TaskOptions {
    fn default() -> TaskOptions {
        TaskOptions::new()
    }
}

impl TaskOptions {
    /// A deadline of 10 minutes, polls at most 5 s apart, no TTL asked for.
    pub fn new() -> TaskOptions {
        TaskOptions {
            deadline: Duration::from_secs(600),
            max_poll_interval: Duration::from_secs(5),
            ttl: None,
        }
    }

    /// The most the whole call may take, from the start to the outcome: each request inside
    /// gets at most the time left, and past it the task is cancelled (`tasks/cancel`, which may
    /// take up to 2 s more) and the call fails with [`Error::Timeout`]. A deadline of a century
    /// or more (`Duration::MAX`) is none.
    pub fn deadline(mut self, deadline: Duration) -> TaskOptions {
        self.deadline = deadline;
        self
    }

    /// The longest pause between two polls (the backoff grows up to it; a server's poll interval
    /// longer than this one wins).
    pub fn max_poll_interval(mut self, interval: Duration) -> TaskOptions {
        self.max_poll_interval = interval;
        self
    }

    /// How long the server should keep the task after it ends (2025-11-25 `task.ttl`; the
    /// server may keep it for less). Under 2026-07-28 the server alone decides.
    pub fn ttl(mut self, ttl: Duration) -> TaskOptions {
        self.ttl = Some(ttl);
        self
    }
}

/// The first pause when the server names no poll interval.
const DEFAULT_POLL: Duration = Duration::from_millis(100);

/// The server's poll interval in a task object (`pollInterval` or `pollIntervalMs`, ms).
fn poll_interval(task: &Value) -> Option<Duration> {
    task.get("pollIntervalMs")
        .or_else(|| task.get("pollInterval"))
        .and_then(Value::as_u64)
        .map(Duration::from_millis)
}

fn status(task: &Value) -> &str {
    task.get("status").and_then(Value::as_str).unwrap_or("")
}

fn task_id(task: &Value) -> Result<String, Error> {
    task.get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| Error::Protocol {
            reason: String::from("the task has no string taskId"),
            line: exchange::excerpt_of(task),
        })
}

/// A task's inlined `error` as an error object (`-32603` when it is malformed).
fn error_object(error: &Value) -> ErrorObject {
    let code = error.get("code").and_then(Value::as_i64);
    let message = error.get("message").and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => {
            let object = ErrorObject::new(ErrorCode(code), message);
            match error.get("data") {
                Some(data) => object.with_data(data.clone()),
                None => object,
            }
        }
        _ => ErrorObject::internal(format!("the task failed: {error}")),
    }
}

/// The pause before the next poll: the backoff, never shorter than the server's interval.
fn next_pause(backoff: Duration, server: Option<Duration>, max: Duration) -> Duration {
    let floor = server.unwrap_or(Duration::ZERO);
    backoff.min(max.max(floor)).max(floor)
}

/// What the task helpers need of a client beyond [`Exchange`]: its capabilities, declared
/// again (with the extension) in each 2026-07-28 task request's `_meta`.
pub(super) trait Tasks: Exchange {
    /// The capabilities the client declared.
    fn capabilities(&self) -> Value;
}

/// Under 2026-07-28, `params` with the client's capabilities plus the extension in its
/// `_meta` (each task request must declare it); as they are otherwise.
fn declaring_tasks<T: Tasks + ?Sized>(ex: &T, mut params: Value) -> Value {
    if !ex.is_modern() {
        return params;
    }
    let mut capabilities = ex.capabilities();
    if let Value::Object(caps) = &mut capabilities {
        let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
        if let Value::Object(extensions) = extensions {
            extensions.insert(EXTENSION.into(), json!({}));
        }
    }
    params["_meta"] = json!({ "io.modelcontextprotocol/clientCapabilities": capabilities });
    params
}

/// One whole request (retry policy, deadlines and input rounds as for any other).
fn request<T: Tasks + ?Sized>(ex: &mut T, method: &str, params: Value) -> Result<Value, Error> {
    exchange::request(ex, method, Some(params), &mut RequestOptions::new())
}

/// A `tasks/*` request about one task.
fn task_request<T: Tasks + ?Sized>(
    ex: &mut T,
    method: &str,
    params: Value,
) -> Result<Value, Error> {
    let params = declaring_tasks(ex, params);
    request(ex, method, params)
}

/// See [`Client::start_task`].
pub(super) fn start<T: Tasks + ?Sized>(
    ex: &mut T,
    name: &str,
    arguments: Value,
    ttl: Option<Duration>,
) -> Result<TaskStart, Error> {
    let mut params = exchange::named_params(name, arguments);
    if ex.is_modern() {
        params = declaring_tasks(ex, params);
    } else {
        let mut task = Map::new();
        if let Some(ttl) = ttl {
            let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            task.insert("ttl".into(), json!(ms));
        }
        params["task"] = Value::Object(task);
    }
    let result = request(ex, "tools/call", params)?;
    let task = if result.get("resultType").and_then(Value::as_str) == Some("task") {
        let mut task = result;
        if let Value::Object(map) = &mut task {
            map.remove("resultType");
            map.remove("_meta");
        }
        task
    } else if let Some(task) = result.get("task").filter(|t| t.is_object()) {
        task.clone()
    } else {
        return Ok(TaskStart::Done(result));
    };
    task_id(&task)?;
    Ok(TaskStart::Task(task))
}

/// See [`Client::get_task`].
pub(super) fn get<T: Tasks + ?Sized>(ex: &mut T, task_id: &str) -> Result<Value, Error> {
    task_request(ex, "tasks/get", json!({ "taskId": task_id }))
}

/// See [`Client::cancel_task`].
pub(super) fn cancel<T: Tasks + ?Sized>(ex: &mut T, task_id: &str) -> Result<(), Error> {
    task_request(ex, "tasks/cancel", json!({ "taskId": task_id })).map(drop)
}

/// How long the `tasks/cancel` sent when a task call fails may take (past the deadline, so
/// it has a bound of its own; best effort, never retried).
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// A deadline this far away is none: it is never reached, and instants near the end of what
/// the clock holds are kept out of every sum below it.
const NO_DEADLINE: Duration = deadline::CENTURY;

/// The requests of one task call, each bounded by the time left to the call's deadline: a
/// request that hangs must not outlast the call (the client's own timeout may be longer).
struct Bounded<'a, T: ?Sized> {
    ex: &'a mut T,
    /// `None`: none (a century or more away, or too far for the clock).
    deadline: Option<Instant>,
}

impl<T: ?Sized> Bounded<'_, T> {
    /// The time left; `None` without a deadline.
    fn left(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    fn past_deadline(&self) -> bool {
        self.left().is_some_and(|left| left.is_zero())
    }
}

impl<T: Tasks + ?Sized> Exchange for Bounded<'_, T> {
    fn attempt(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
        retrying: bool,
    ) -> Result<Value, Error> {
        if let Some(left) = self.left() {
            if left.is_zero() {
                return Err(Error::Timeout {
                    method: method.to_owned(),
                    elapsed: Duration::ZERO,
                    stderr_tail: None,
                });
            }
            options.max_total = Some(options.max_total.map_or(left, |max| max.min(left)));
        }
        self.ex.attempt(method, params, options, retrying)
    }

    fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
        self.ex.fulfil(input)
    }

    fn pause(&mut self, delay: Duration) {
        let delay = self.left().map_or(delay, |left| delay.min(left));
        self.ex.pause(delay);
    }

    fn default_retry(&self) -> RetryPolicy {
        self.ex.default_retry()
    }

    fn max_input_rounds(&self) -> u32 {
        self.ex.max_input_rounds()
    }

    fn is_modern(&self) -> bool {
        self.ex.is_modern()
    }

    fn seed(&mut self) -> &mut u64 {
        self.ex.seed()
    }
}

impl<T: Tasks + ?Sized> Tasks for Bounded<'_, T> {
    fn capabilities(&self) -> Value {
        self.ex.capabilities()
    }
}

/// Why following a task stopped short of its result.
enum Stop {
    /// The task ended (its error, or `cancelled`): nothing to cancel.
    Ended(Error),
    /// The task may still run: the call cancels it.
    Running(Error),
}

/// A timeout, also as the last error of a retry policy.
fn is_timeout(error: &Error) -> bool {
    match error {
        Error::Timeout { .. } => true,
        Error::RetriesExhausted { last, .. } => is_timeout(last),
        _ => false,
    }
}

/// See [`Client::call_tool_as_task`]. Between polls the client pauses through
/// [`Exchange::pause`]: a [`Client`] serves its connection meanwhile (so a 2025-11-25 task's
/// live questions are answered), a shared client's IO thread does that for every caller.
pub(super) fn call_as_task<T: Tasks + ?Sized>(
    ex: &mut T,
    name: &str,
    arguments: Value,
    options: &TaskOptions,
) -> Result<Value, Error> {
    let started = Instant::now();
    let deadline = Some(options.deadline)
        .filter(|&d| d < NO_DEADLINE)
        .and_then(|d| started.checked_add(d));
    let mut call = Bounded { ex, deadline };
    // Past the deadline, a timeout inside is the deadline's, and says so.
    let named = |call: &Bounded<'_, T>, error: Error, task: Option<&str>| {
        if !(call.past_deadline() && is_timeout(&error)) {
            return error;
        }
        let task = task.map_or_else(|| String::from("a task"), |id| format!("task {id}"));
        Error::Timeout {
            method: format!(
                "tools/call {name} as {task} (deadline {:.3} s)",
                options.deadline.as_secs_f64()
            ),
            elapsed: started.elapsed(),
            stderr_tail: None,
        }
    };
    let task = match start(&mut call, name, arguments, options.ttl) {
        Ok(TaskStart::Done(result)) => return Ok(result),
        Ok(TaskStart::Task(task)) => task,
        Err(error) => return Err(named(&call, error, None)),
    };
    let id = task_id(&task)?;
    match follow(&mut call, &id, task, options) {
        Ok(result) => Ok(result),
        Err(Stop::Ended(error)) => Err(named(&call, error, Some(&id))),
        Err(Stop::Running(error)) => {
            // Named first: `elapsed` is when the call gave up, not when the cancel ended.
            let error = named(&call, error, Some(&id));
            cancel_quietly(call.ex, &id);
            Err(error)
        }
    }
}

/// Polls the task until it ends, gives it what it asks for, and fetches its outcome.
fn follow<T: Tasks + ?Sized>(
    call: &mut Bounded<'_, T>,
    id: &str,
    mut task: Value,
    options: &TaskOptions,
) -> Result<Value, Stop> {
    let mut backoff = poll_interval(&task).unwrap_or(DEFAULT_POLL);
    let mut result_waits = true;
    loop {
        match status(&task) {
            "completed" | "failed" => return outcome(call, id, task).map_err(Stop::Ended),
            "cancelled" => return Err(Stop::Ended(Error::Cancelled)),
            "input_required" if task.get("inputRequests").is_some() => {
                answer_inputs(call, id, &task).map_err(Stop::Running)?;
                // Look again at once: the task runs again.
                task = get(call, id).map_err(Stop::Running)?;
                continue;
            }
            "input_required" if !call.is_modern() && result_waits => {
                match await_result(call, id)? {
                    Waited::Outcome(result) => return Ok(result),
                    Waited::TimedOut => {}
                    // Its status tells which: an ended task's outcome is fetched again; a
                    // server that does not wait is polled from here on.
                    Waited::Refused => result_waits = false,
                }
                task = get(call, id).map_err(Stop::Running)?;
                continue;
            }
            _ => {}
        }
        if call.past_deadline() {
            return Err(Stop::Running(Error::Timeout {
                method: String::from("tasks/get"),
                elapsed: Duration::ZERO,
                stderr_tail: None,
            }));
        }
        let server = poll_interval(&task);
        call.pause(next_pause(backoff, server, options.max_poll_interval));
        backoff = backoff.saturating_add(backoff / 2);
        task = get(call, id).map_err(Stop::Running)?;
    }
}

/// What a `tasks/result` sent for a task waiting for input came back with.
enum Waited {
    /// The task ended: its result.
    Outcome(Value),
    /// The client's timeout ended the wait first (a slow answer, a long task).
    TimedOut,
    /// An error: the task's own, or a server that answers `tasks/result` only for ended
    /// tasks (as drafts before 2025-11-25 had it).
    Refused,
}

/// A 2025-11-25 task waiting for input: its questions are sent while a `tasks/result` waits
/// (the spec's `input_required` flow; servers on the official SDKs queue them until then), and
/// the callbacks answer them meanwhile; `tasks/result` answers once the task ended.
fn await_result<T: Tasks + ?Sized>(call: &mut Bounded<'_, T>, id: &str) -> Result<Waited, Stop> {
    match task_request(call, "tasks/result", json!({ "taskId": id })) {
        Ok(result) => Ok(Waited::Outcome(result)),
        Err(error) if is_timeout(&error) && !call.past_deadline() => Ok(Waited::TimedOut),
        Err(Error::Rpc(_)) => Ok(Waited::Refused),
        Err(error) => Err(Stop::Running(error)),
    }
}

/// Sends `tasks/cancel` for a task the call gives up on, bounded by [`CANCEL_GRACE`] and
/// never retried; its failure changes nothing for the caller.
fn cancel_quietly<T: Tasks + ?Sized>(ex: &mut T, id: &str) {
    let params = declaring_tasks(ex, json!({ "taskId": id }));
    let mut options = RequestOptions::new()
        .max_total(CANCEL_GRACE)
        .retry(RetryPolicy::none());
    let _ = exchange::request(ex, "tasks/cancel", Some(params), &mut options);
}

/// The outcome of a finished task: inlined (2026-07-28) or from `tasks/result`.
fn outcome<T: Tasks + ?Sized>(ex: &mut T, id: &str, mut task: Value) -> Result<Value, Error> {
    if ex.is_modern() && task.get("result").is_none() && task.get("error").is_none() {
        // A task made finished: its handle carries no outcome, `tasks/get` does.
        task = get(ex, id)?;
    }
    if let Some(result) = task.get("result") {
        return Ok(result.clone());
    }
    if let Some(error) = task.get("error") {
        return Err(Error::Rpc(error_object(error)));
    }
    if ex.is_modern() {
        return Err(Error::Protocol {
            reason: format!("the ended task {id} has neither result nor error"),
            line: exchange::excerpt_of(&task),
        });
    }
    task_request(ex, "tasks/result", json!({ "taskId": id }))
}

/// Answers a 2026-07-28 task's `inputRequests` with one `tasks/update`.
fn answer_inputs<T: Tasks + ?Sized>(ex: &mut T, id: &str, task: &Value) -> Result<(), Error> {
    let unanswered = |reason: String| Error::InputUnanswered {
        method: String::from("tasks/update"),
        reason,
        result: task.clone(),
    };
    let asked = era::input_requests(task).map_err(unanswered)?;
    let mut responses = Map::new();
    for input in &asked {
        let answer = ex.fulfil(input).map_err(unanswered)?;
        responses.insert(input.key.clone(), answer);
    }
    task_request(
        ex,
        "tasks/update",
        json!({ "taskId": id, "inputResponses": responses }),
    )
    .map(drop)
}

impl Tasks for Client {
    fn capabilities(&self) -> Value {
        self.session.capabilities().clone()
    }
}

impl Client {
    /// Starts `name` as a task: see [`Client::call_tool_as_task`] for the whole round trip.
    ///
    /// # Errors
    /// As [`Client::request`]; [`Error::Protocol`] when the server's task has no `taskId`.
    pub fn start_task(
        &mut self,
        name: &str,
        arguments: Value,
        ttl: Option<Duration>,
    ) -> Result<TaskStart, Error> {
        start(self, name, arguments, ttl)
    }

    /// The task's status object (`tasks/get`). Under 2026-07-28 it also holds the outcome
    /// (`result` or `error`) once the task ended, or `inputRequests` while it waits for input.
    ///
    /// # Errors
    /// As [`Client::request`] (an unknown task is [`Error::Rpc`] with `-32602`).
    pub fn get_task(&mut self, task_id: &str) -> Result<Value, Error> {
        get(self, task_id)
    }

    /// Cancels a task (`tasks/cancel`).
    ///
    /// # Errors
    /// As [`Client::request`]. A 2025-11-25 server answers `-32602` for a task that already
    /// ended; a 2026-07-28 one acknowledges that too.
    pub fn cancel_task(&mut self, task_id: &str) -> Result<(), Error> {
        cancel(self, task_id)
    }

    /// Calls a tool as a task and waits for its outcome: starts it ([`Client::start_task`]),
    /// polls `tasks/get` with a backoff that starts at the server's poll interval (100 ms when
    /// it names none), grows by half each poll up to
    /// [`TaskOptions::max_poll_interval`], and never polls faster than the server asks;
    /// serves the connection between polls (the server's requests and notifications, so a
    /// 2025-11-25 task's questions are answered through the callbacks); on a 2025-11-25
    /// `input_required` waits in `tasks/result`, which brings the questions a server queued
    /// for it (the callbacks answer them) and then the outcome; fulfils a
    /// 2026-07-28 task's `inputRequests` with `tasks/update`; and returns the tool's result.
    /// A server that answers without a task gives its result at once.
    ///
    /// # Errors
    /// - [`Error::Rpc`]: the task failed (its error), the call was refused (`-32601` for a
    ///   tool that takes no tasks at 2025-11-25, `-32021` at 2026-07-28), or a task request
    ///   failed.
    /// - [`Error::Cancelled`]: the task ended `cancelled` (by someone else).
    /// - [`Error::Timeout`]: the deadline passed (its method names it); the task was
    ///   cancelled. A request inside that failed otherwise cancels the task too.
    /// - [`Error::InputUnanswered`]: the task asked for an input the client cannot give (the
    ///   task is cancelled).
    /// - As [`Client::request`] for the rest.
    ///
    /// # Example
    /// ```no_run
    /// use std::time::Duration;
    /// use mcpipe::{Client, TaskOptions};
    /// use serde_json::json;
    ///
    /// let mut client = Client::builder("mcpipe").arg("demo").spawn()?;
    /// let options = TaskOptions::new().deadline(Duration::from_secs(60));
    /// let result = client.call_tool_as_task("sleep", json!({"ms": 1500}), options)?;
    /// eprintln!("{}", result["content"][0]["text"]);
    /// # Ok::<(), mcpipe::Error>(())
    /// ```
    pub fn call_tool_as_task(
        &mut self,
        name: &str,
        arguments: Value,
        options: TaskOptions,
    ) -> Result<Value, Error> {
        call_as_task(self, name, arguments, &options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_back_off_but_never_faster_than_the_server_asks() {
        let ms = Duration::from_millis;
        assert_eq!(next_pause(ms(100), None, ms(5000)), ms(100));
        assert_eq!(next_pause(ms(9000), None, ms(5000)), ms(5000));
        assert_eq!(next_pause(ms(100), Some(ms(250)), ms(5000)), ms(250));
        // A server interval above the caller's maximum wins.
        assert_eq!(next_pause(ms(100), Some(ms(8000)), ms(5000)), ms(8000));
        assert_eq!(next_pause(ms(20000), Some(ms(8000)), ms(5000)), ms(8000));
    }

    #[test]
    fn task_fields_of_both_revisions_are_read() {
        assert_eq!(
            poll_interval(&json!({"pollIntervalMs": 250})),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            poll_interval(&json!({"pollInterval": 500})),
            Some(Duration::from_millis(500))
        );
        assert_eq!(poll_interval(&json!({})), None);
        assert!(task_id(&json!({"taskId": 5})).is_err());
    }
}
