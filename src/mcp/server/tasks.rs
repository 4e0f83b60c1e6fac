//! Tasks on the server: which `tools/call` becomes a task, how a task's work runs on the
//! worker pool and reports back, and the `tasks/*` methods of both revisions.
//!
//! - 2025-11-25 (`tasks` capability): the client asks for a task with `params.task`; the call
//!   answers `{"task": Task}` at once; `tasks/get`, `tasks/result` (answered when the task
//!   ends, without holding up the loop), `tasks/list`, `tasks/cancel`;
//!   `notifications/tasks/status` on every change; a request the work sends the client names
//!   the task and makes it `input_required` until answered.
//! - 2026-07-28 (extension `io.modelcontextprotocol/tasks`): the server decides: a call of a
//!   task-supporting tool from a client that declared the extension answers a flat
//!   `CreateTaskResult` (`resultType: "task"`); `tasks/get` inlines the `result`, `error` or
//!   `inputRequests`; `tasks/update` brings inputs; `tasks/cancel` acknowledges. A client that
//!   did not declare the extension gets `-32021` from the `tasks/*` methods and from a tool
//!   that requires a task.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::calls::{no_worker, tool_answer, Announced};
use super::{ConcurrentToolFn, McpServer};
use crate::handler::{catch_panic, Context};
use crate::mcp::arguments::Arguments;
use crate::mcp::context::{McpContext, Scope};
use crate::mcp::era;
use crate::mcp::input::Rounds;
use crate::mcp::tasks::{EventKind, Status, Task, TaskEvent, EXTENSION};
use crate::mcp::tool::TaskSupport;
use crate::message::{ErrorCode, ErrorObject, RequestId};
use crate::responder::{CancelToken, Outbox};
use crate::stats::Stats;
use crate::worker_pool::WorkerPool;

/// The first revision with tasks (2025-11-25); earlier handshake versions have none.
const FIRST_TASKS_VERSION: &str = "2025-11-25";

/// What it takes to run a concurrent tool's task (again, under 2026-07-28, once inputs came).
#[derive(Clone)]
pub(super) struct Resume {
    name: String,
    run: ConcurrentToolFn,
    arguments: Map<String, Value>,
    scope: Scope,
    token: Option<Value>,
}

impl std::fmt::Debug for Resume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resume")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A call that is to become a task: the TTL a 2025-11-25 client asked for.
#[derive(Debug)]
pub(super) struct TaskWanted {
    ttl: Option<Duration>,
}

/// Whether the client of this request can use tasks: a 2025-11-25 session (any client; its
/// own `tasks` capability is about tasks it runs), or a 2026-07-28 request whose client
/// capabilities declare the extension.
fn client_has_tasks(scope: &Scope) -> bool {
    if scope.modern {
        scope
            .client_capabilities
            .get("extensions")
            .and_then(|e| e.get(EXTENSION))
            .is_some()
    } else {
        scope.version.as_str() >= FIRST_TASKS_VERSION
    }
}

/// `-32021` naming the tasks extension (2026-07-28).
fn missing_extension(what: &str) -> ErrorObject {
    ErrorObject::new(
        era::MISSING_CLIENT_CAPABILITY,
        format!(
            "missing required client capability: {what} needs the extension {EXTENSION} in \
             io.modelcontextprotocol/clientCapabilities.extensions"
        ),
    )
    .with_data(json!({ "requiredCapabilities": { "extensions": { EXTENSION: {} } } }))
}

fn task_id(params: &Map<String, Value>, method: &str) -> Result<String, ErrorObject> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "invalid params: {method} needs a string \"taskId\""
            ))
        })
}

impl<S: 'static> McpServer<S> {
    /// Whether a registered tool allows tasks (what the capabilities declare).
    pub(super) fn has_task_tools(&self) -> bool {
        self.tools
            .iter()
            .any(|(t, _)| t.task_support_level() != TaskSupport::Forbidden)
    }

    /// Adds the tasks capability for a handshake session of `version`, or the extension for
    /// `server/discover`, when a tool allows tasks.
    pub(super) fn declare_tasks(&self, caps: &mut Value, version: Option<&str>) {
        let Value::Object(caps) = caps else { return };
        if !self.has_task_tools() {
            return;
        }
        match version {
            Some(v) if v >= FIRST_TASKS_VERSION => {
                caps.insert(
                    "tasks".into(),
                    json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
                );
            }
            Some(_) => {}
            None => {
                let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
                if let Value::Object(extensions) = extensions {
                    extensions.insert(EXTENSION.into(), json!({}));
                }
            }
        }
    }

    /// Whether `tools/list` shows a tool with `support` to the client of this request: not a
    /// tool that runs only as a task to a handshake session of a revision without tasks
    /// (before 2025-11-25). Such a server declares no tasks there, and a receiver that declares
    /// none must process `tools/call` normally (2025-11-25, tasks, "Task Support and
    /// Handling"): for that client the tool does not exist. (A 2026-07-28 list is the same
    /// for every request; a client without the extension learns from `-32021` what it lacks.)
    pub(super) fn offered(support: TaskSupport, scope: &Scope) -> bool {
        scope.modern || support != TaskSupport::Required || client_has_tasks(scope)
    }

    /// Whether this `tools/call` of a tool with `support` becomes a task, or must be refused.
    pub(super) fn task_wanted(
        name: &str,
        support: TaskSupport,
        params: &Map<String, Value>,
        scope: &Scope,
    ) -> Result<Option<TaskWanted>, ErrorObject> {
        let tasks = client_has_tasks(scope);
        if scope.modern {
            // The server decides; a `task` hint of a 2025-11-25 client is ignored.
            return match support {
                TaskSupport::Forbidden => Ok(None),
                TaskSupport::Optional => Ok(tasks.then_some(TaskWanted { ttl: None })),
                TaskSupport::Required if tasks => Ok(Some(TaskWanted { ttl: None })),
                TaskSupport::Required => Err(missing_extension(&format!(
                    "the tool {name} (it runs only as a task)"
                ))),
            };
        }
        let asked = match params.get("task") {
            None | Some(Value::Null) => None,
            Some(Value::Object(task)) => Some(task),
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: tools/call \"task\" must be an object",
                ))
            }
        };
        let asked = asked.filter(|_| tasks);
        match (support, asked) {
            // Not listed to this session (see `offered`): an unknown tool, saying why.
            (TaskSupport::Required, _) if !tasks => Err(ErrorObject::invalid_params(format!(
                "unknown tool: {name} (it runs only as a task, and MCP {} has no tasks; \
                 it is offered from 2025-11-25 on)",
                scope.version
            ))
            .with_data(json!({ "name": name }))),
            (TaskSupport::Forbidden, Some(_)) => Err(ErrorObject::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: the tool {name} cannot be called as a task"),
            )
            .with_data(json!({ "name": name, "taskSupport": "forbidden" }))),
            (TaskSupport::Required, None) => Err(ErrorObject::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "method not found: the tool {name} can only be called as a task (with \
                     \"task\" in the params; MCP 2025-11-25)"
                ),
            )
            .with_data(json!({ "name": name, "taskSupport": "required" }))),
            (_, None) => Ok(None),
            (_, Some(task)) => Ok(Some(TaskWanted {
                ttl: task
                    .get("ttl")
                    .and_then(Value::as_u64)
                    .map(Duration::from_millis),
            })),
        }
    }

    /// The answer to a call that made a task: `{"task": Task}` (2025-11-25) or a flat
    /// `CreateTaskResult` (2026-07-28).
    fn created(&self, id: &str, scope: &Scope) -> Value {
        let poll = self.tasks.poll_interval;
        let Some(task) = self.tasks.peek(id) else {
            return json!({});
        };
        let mut value = task.to_value(scope.modern, poll);
        if scope.modern {
            if let Value::Object(map) = &mut value {
                map.insert("resultType".into(), json!("task"));
            }
            value
        } else {
            json!({ "task": value })
        }
    }

    /// A task for a tool that ran on the loop's thread and returned `answer`: created
    /// finished. Under 2026-07-28 an `input_required` round stays a plain answer (the task is
    /// only made once the inputs are in).
    pub(super) fn task_of_answer(
        &mut self,
        wanted: TaskWanted,
        answer: Result<Value, ErrorObject>,
        scope: &Scope,
    ) -> Result<Value, ErrorObject> {
        if let Ok(result) = &answer {
            if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
                return answer;
            }
        }
        let task = self.tasks.create(wanted.ttl, scope.modern)?;
        task.finish(answer);
        let id = task.id.clone();
        // No status notification: the answer itself tells the task's (final) status.
        Ok(self.created(&id, scope))
    }

    /// A task for a concurrent tool: made now (so that a `tasks/get` right after the answer
    /// finds it), its work handed to the worker pool.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start_task(
        &mut self,
        wanted: TaskWanted,
        name: &str,
        run: ConcurrentToolFn,
        arguments: Map<String, Value>,
        mut rounds: Rounds,
        scope: &Scope,
        token: Option<Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let task = self.tasks.create(wanted.ttl, scope.modern)?;
        // Answers the call itself brought (2026-07-28 rounds before the task) carry over.
        task.answers = std::mem::take(&mut rounds.answers);
        let id = task.id.clone();
        let resume = Resume {
            name: name.to_owned(),
            run,
            arguments,
            scope: scope.clone(),
            token,
        };
        // Only a 2026-07-28 task runs again (for inputs); keep nothing for the others.
        if scope.modern {
            task.resume = Some(resume.clone());
        }
        let job = TaskJob::new(task, resume, cx);
        self.submit_task(job);
        Ok(self.created(&id, scope))
    }

    fn submit_task(&mut self, job: TaskJob) {
        let pool = self
            .pool
            .get_or_insert_with(|| WorkerPool::new(self.workers, self.worker_keep_alive));
        let room = match pool.make_room() {
            Ok(room) => room,
            Err(e) => {
                // Queued, the task would stay `working` for want of a thread: it fails instead.
                let failed = TaskEvent {
                    id: job.id.clone(),
                    kind: EventKind::Finished(Err(no_worker(&e))),
                };
                let _ = job.outbox.post(Box::new(failed));
                return;
            }
        };
        pool.submit(room, Box::new(move || job.run()));
    }

    /// A task's work reported (on the loop's thread, through a post).
    pub(super) fn task_event(&mut self, event: TaskEvent, cx: &mut Context<'_>) {
        let Some(task) = self.tasks.find(&event.id) else {
            return; // Expired or evicted meanwhile: nobody can ask for it any more.
        };
        let changed = match event.kind {
            EventKind::Waiting(true) => task.set_status(
                Status::InputRequired,
                Some("waiting for the client's answer".into()),
            ),
            EventKind::Waiting(false) => {
                task.status == Status::InputRequired && task.set_status(Status::Working, None)
            }
            EventKind::NeedsInput(pending) => {
                if task.status.is_terminal() {
                    false
                } else if task.resume.is_none() {
                    task.finish(Err(ErrorObject::internal(
                        "internal error: the task needs inputs but cannot run again",
                    )))
                } else {
                    task.inputs = pending;
                    task.set_status(
                        Status::InputRequired,
                        Some("waiting for inputs (tasks/update)".into()),
                    )
                }
            }
            EventKind::Finished(answer) => task.finish(answer),
        };
        if changed {
            task.answer_waiters();
            self.status_changed(&event.id, cx);
        }
    }

    /// `notifications/tasks/status` for a handshake session (2026-07-28 clients poll; their
    /// notifications would go on a `subscriptions/listen` stream, which mcpipe does not send
    /// task notifications on).
    fn status_changed(&mut self, id: &str, cx: &mut Context<'_>) {
        if self.session.version.is_none() {
            return;
        }
        let poll = self.tasks.poll_interval;
        if let Some(task) = self.tasks.peek(id) {
            let _ = cx.notify(
                "notifications/tasks/status",
                Some(task.to_value(false, poll)),
            );
        }
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, `tasks/update`.
    pub(super) fn serve_task_method(
        &mut self,
        method: &str,
        params: &Map<String, Value>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        if !client_has_tasks(scope) {
            if scope.modern {
                return Err(missing_extension(method));
            }
            return Err(ErrorObject::method_not_found(method));
        }
        let poll = self.tasks.poll_interval;
        match method {
            "tasks/list" => {
                let items = self.tasks.list().map(|t| t.to_value(false, poll)).collect();
                super::methods::page(items, params, "tasks", self.page_size)
            }
            "tasks/get" => {
                let task = self.tasks.get(&task_id(params, method)?)?;
                Ok(if scope.modern {
                    task.detailed(poll)
                } else {
                    task.to_value(false, poll)
                })
            }
            "tasks/result" => {
                let task = self.tasks.get(&task_id(params, method)?)?;
                if task.status.is_terminal() {
                    return task.result_answer();
                }
                // Answered when the task ends; the loop goes on meanwhile (and the wait does
                // not count toward the in-flight bound: the task it waits for must run).
                if let Some(responder) = cx.waiting_responder() {
                    task.waiters.push(responder);
                }
                Ok(Value::Null)
            }
            "tasks/cancel" => {
                let id = task_id(params, method)?;
                let task = self.tasks.get(&id)?;
                if task.status.is_terminal() {
                    if scope.modern {
                        return Ok(json!({})); // Idempotent under 2026-07-28.
                    }
                    return Err(ErrorObject::invalid_params(format!(
                        "invalid params: the task {id:?} already ended ({}); it cannot be \
                         cancelled",
                        task.status.as_str()
                    ))
                    .with_data(json!({ "taskId": id, "status": task.status.as_str() })));
                }
                task.cancel.cancel_by_peer();
                task.set_status(Status::Cancelled, Some("cancelled by the client".into()));
                task.answer_waiters();
                let answer = if scope.modern {
                    json!({})
                } else {
                    task.to_value(false, poll)
                };
                self.status_changed(&id, cx);
                Ok(answer)
            }
            "tasks/update" => self.update_task(params, cx),
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }

    /// `tasks/update` (2026-07-28): takes the answers to pending inputs; once none is missing
    /// the work runs again with every answer so far. Keys that name no pending input are
    /// ignored, and the answer is always an empty acknowledgement.
    fn update_task(
        &mut self,
        params: &Map<String, Value>,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let id = task_id(params, "tasks/update")?;
        let Some(Value::Object(responses)) = params.get("inputResponses") else {
            return Err(ErrorObject::invalid_params(
                "invalid params: tasks/update needs an \"inputResponses\" object",
            ));
        };
        let task = self.tasks.get(&id)?;
        if task.status != Status::InputRequired || task.inputs.is_empty() {
            return Ok(json!({}));
        }
        for (key, response) in responses {
            if !task.inputs.contains_key(key) {
                continue;
            }
            if !response.is_object() {
                return Err(ErrorObject::invalid_params(format!(
                    "invalid params: inputResponses[{key:?}] must be an object (the result of \
                     the request that was asked for)"
                ))
                .with_data(json!({ "key": key })));
            }
            task.inputs.remove(key);
            task.answers.insert(key.clone(), response.clone());
        }
        if !task.inputs.is_empty() {
            return Ok(json!({}));
        }
        let Some(resume) = task.resume.clone() else {
            return Ok(json!({}));
        };
        task.set_status(Status::Working, None);
        let job = TaskJob::new(task, resume, cx);
        self.submit_task(job);
        Ok(json!({}))
    }

    /// `initialize` made the process a handshake session for good: the tasks 2026-07-28
    /// requests made are stopped and forgotten. No 2026-07-28 request is served from now on,
    /// so nobody could poll them (`tasks/get` of the extension) or bring their inputs
    /// (`tasks/update`) again, and they are not the session's to show: its `tasks/list`
    /// lists the requestor's own tasks (2025-11-25, tasks, "Task Isolation and Access
    /// Control"), and its client would wait in `tasks/result` for one parked on inputs that
    /// can never come. Their work is cancelled as by `tasks/cancel` (a command it runs ends
    /// with its process group).
    pub(super) fn forget_modern_tasks(&mut self) {
        self.tasks.forget(|task| task.modern);
    }

    /// Drops the `tasks/result` waiter of a request the client cancelled.
    pub(super) fn forget_waiter(&mut self, request: &RequestId) {
        for task in self.tasks.all_mut() {
            task.waiters.retain(|w| w.id() != request);
        }
    }

    /// Stops every running task (the server is ending) and answers whoever waits for one.
    pub(super) fn stop_tasks(&mut self) {
        for task in self.tasks.all_mut() {
            if task.status.is_terminal() {
                continue;
            }
            task.cancel.cancel_for_shutdown();
            for waiter in std::mem::take(&mut task.waiters) {
                waiter.respond(Err(ErrorObject::internal(
                    "internal error: the server is shutting down before the task ended",
                )
                .with_data(json!({ "taskId": task.id }))));
            }
        }
    }
}

/// One run of a task's work on a worker thread.
struct TaskJob {
    id: String,
    cancel: CancelToken,
    answers: Map<String, Value>,
    resume: Resume,
    outbox: Outbox,
    stats: Stats,
}

impl TaskJob {
    /// The work of `task` (a run, or a run again after its inputs came), for the pool.
    fn new<R>(task: &Task<R>, resume: Resume, cx: &mut Context<'_>) -> TaskJob {
        TaskJob {
            id: task.id.clone(),
            cancel: task.cancel.clone(),
            answers: task.answers.clone(),
            resume,
            outbox: cx.connection().outbox().clone(),
            stats: cx.stats().clone(),
        }
    }

    fn run(self) {
        let TaskJob {
            id,
            cancel,
            answers,
            resume,
            outbox,
            stats,
        } = self;
        let Resume {
            name,
            run,
            arguments,
            scope,
            token,
        } = resume;
        let mut rounds = Rounds::first();
        rounds.answers = answers;
        let mut mcx = McpContext::for_task(
            outbox.clone(),
            cancel,
            stats,
            id.clone(),
            &scope,
            token,
            rounds,
        );
        let mut arguments = Arguments::from_map(arguments);
        let outcome = catch_panic(|| run(&mut arguments, &mut mcx));
        let (mut rounds, changes) = mcx.into_parts();
        if !changes.is_empty() {
            let _ = outbox.post(Box::new(Announced(changes)));
        }
        let kind = if scope.modern && !rounds.pending.is_empty() {
            EventKind::NeedsInput(std::mem::take(&mut rounds.pending))
        } else {
            EventKind::Finished(tool_answer(&name, &scope, &rounds, "", outcome))
        };
        // A loop that ended meanwhile has stopped the task already.
        let _ = outbox.post(Box::new(TaskEvent { id, kind }));
    }
}

impl std::fmt::Debug for TaskJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskJob")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
