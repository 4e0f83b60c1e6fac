//! How calls reach the registered functions: tools (on the loop's thread, or on the worker
//! pool for concurrent tools), resource reads, prompts and completions, and the delivery of the
//! changes they announce.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{modern_result, McpServer, Runner, ToolRunner};
use crate::diagnostics;
use crate::handler::{catch_panic, Context};
use crate::mcp::arguments::Arguments;
use crate::mcp::context::{Change, McpContext, Scope};
use crate::mcp::era;
use crate::mcp::input::{self, Rounds};
use crate::mcp::logging::LogLevel;
use crate::mcp::prompt::PromptMessage;
use crate::mcp::resource::{Resource, ResourceContents, RESOURCE_NOT_FOUND};
use crate::mcp::tool::{ToolError, ToolResult};
use crate::message::{Apart, ApartMember, ErrorObject, ParamsApart};
use crate::worker_pool::WorkerPool;

/// The most values a `completion/complete` result may hold (the spec's limit).
const MAX_COMPLETIONS: usize = 100;

/// What a concurrent tool, resource read or prompt takes to its worker thread.
struct WorkerJob {
    /// The server's info, for a 2026-07-28 result.
    info: Option<Value>,
    /// The caching hints of a 2026-07-28 result that may be cached.
    cache: Option<(u64, bool)>,
    scope: Scope,
    binding: String,
    token: Option<Value>,
    rounds: Rounds,
}

/// The answer of a resource read or a prompt run on the worker pool, as the loop would give
/// it: an `input_required` round or `-32021` under 2026-07-28 when the inputs say so, `-32603`
/// for a panic.
fn handler_answer(
    outcome: Result<Result<Value, ErrorObject>, String>,
    scope: &Scope,
    rounds: &Rounds,
    binding: &str,
) -> Result<Value, ErrorObject> {
    match outcome {
        Ok(result) => round_outcome(scope, rounds, binding, result.is_err()).unwrap_or(result),
        Err(panic) => {
            diagnostics::line(&format!("mcpipe: a concurrent handler panicked: {panic}"));
            Err(ErrorObject::internal(
                "internal error: the handler panicked",
            ))
        }
    }
}

/// A `tools/call`'s `name` and `arguments`, in this order, read apart from its params as its
/// line is read ([`crate::Handler`]'s `params_apart`): neither the params object holding them
/// nor their names are built, and the call looks neither up.
pub(crate) const TOOL_CALL_APART: ParamsApart = ParamsApart {
    method: "tools/call",
    names: ["name", "arguments"],
    object_text: Some(1),
};

/// The `name` of a `tools/call` or `prompts/get`.
fn call_name<'p>(params: &'p Map<String, Value>, method: &str) -> Result<&'p str, ErrorObject> {
    string_name(params.get("name"), method)
}

/// A call's `name` member, which must be a string.
fn string_name<'v>(name: Option<&'v Value>, method: &str) -> Result<&'v str, ErrorObject> {
    name.and_then(Value::as_str).ok_or_else(|| {
        ErrorObject::invalid_params(format!("invalid params: {method} needs a string \"name\""))
    })
}

/// The `arguments` of a `tools/call` or `prompts/get`, taken out of the params: an object,
/// or none.
fn arguments_object(
    arguments: Option<Value>,
    method: &str,
) -> Result<Map<String, Value>, ErrorObject> {
    match arguments {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(_) => Err(ErrorObject::invalid_params(format!(
            "invalid params: {method} \"arguments\" must be an object"
        ))),
    }
}

/// A `resources/read` result; under 2026-07-28 an empty `contents` is "not found", never an
/// empty result.
fn read_result(
    uri: &str,
    contents: &[ResourceContents],
    modern: bool,
) -> Result<Value, ErrorObject> {
    if contents.is_empty() && modern {
        return Err(Resource::not_found(uri));
    }
    let contents: Vec<Value> = contents.iter().map(ResourceContents::to_value).collect();
    Ok(json!({ "contents": contents }))
}

/// A `prompts/get` result.
fn prompt_result(description: Option<Value>, messages: &[PromptMessage]) -> Value {
    let mut result = Map::new();
    if let Some(description) = description {
        result.insert("description".into(), description);
    }
    result.insert(
        "messages".into(),
        Value::Array(messages.iter().map(PromptMessage::to_value).collect()),
    );
    Value::Object(result)
}

/// Changes a concurrent tool announced, posted back to the loop for delivery.
pub(super) struct Announced(pub(super) Vec<Change>);

impl<S: 'static> McpServer<S> {
    /// Sends the notifications for what a handler announced.
    pub(super) fn deliver(&mut self, changes: Vec<Change>, cx: &mut Context<'_>) {
        if !self.change_notifications {
            return;
        }
        let legacy = self.session.version.is_some();
        for change in changes {
            let (method, uri) = match &change {
                Change::Tools => ("notifications/tools/list_changed", None),
                Change::Prompts => ("notifications/prompts/list_changed", None),
                Change::Resources => ("notifications/resources/list_changed", None),
                Change::ResourceUpdated(uri) => {
                    ("notifications/resources/updated", Some(uri.as_str()))
                }
            };
            if legacy {
                match uri {
                    None => {
                        let _ = cx.notify(method, None);
                    }
                    Some(uri) if self.session.subscribed.contains(uri) => {
                        let _ = cx.notify(method, Some(json!({ "uri": uri })));
                    }
                    Some(_) => {}
                }
            }
            for listener in &self.listeners {
                let wants = match &change {
                    Change::Tools => listener.tools,
                    Change::Prompts => listener.prompts,
                    Change::Resources => listener.resources,
                    Change::ResourceUpdated(uri) => listener.uris.iter().any(|u| u == uri),
                };
                if !wants {
                    continue;
                }
                let mut params = Map::new();
                if let Some(uri) = uri {
                    params.insert("uri".into(), json!(uri));
                }
                params.insert(
                    "_meta".into(),
                    json!({ era::SUBSCRIPTION_ID_KEY: listener.id.to_value() }),
                );
                let _ = cx.notify(method, Some(Value::Object(params)));
            }
        }
    }

    /// `tools/call`. The arguments are moved out of `params` (the request's own, dropped
    /// afterwards), never copied: a 10 MB argument is not duplicated on its way to the tool.
    /// A concurrent tool runs on the worker pool: its answer is taken out of the loop's hands
    /// (a [`Responder`]) and the value returned here is ignored.
    pub(super) fn call_tool(
        &mut self,
        params: &mut Map<String, Value>,
        mut apart: Option<Box<Apart>>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        // The arguments are moved out of the params (the request's own), never copied; `take`
        // leaves `null` rather than removing the member, which would rebalance the map. Read
        // apart (`TOOL_CALL_APART`), name and arguments are not in `params`.
        // A small object's arguments come as its text (`Arguments` reads what the tool asks for).
        let arguments = match apart.as_deref_mut() {
            Some([_, arguments]) => match arguments.take() {
                Some(ApartMember::ObjectText(object)) => Arguments::from_object_text(object),
                other => Arguments::from_map(arguments_object(
                    other.map(ApartMember::into_value),
                    "tools/call",
                )?),
            },
            None => Arguments::from_map(arguments_object(
                params.get_mut("arguments").map(Value::take),
                "tools/call",
            )?),
        };
        let name = match apart.as_deref() {
            Some([Some(ApartMember::Value(name)), _]) => string_name(Some(name), "tools/call")?,
            Some([_, _]) => string_name(None, "tools/call")?,
            None => call_name(params, "tools/call")?,
        };
        let Some((tool, run)) = self.tools.iter_mut().find(|(t, _)| t.name() == name) else {
            return Err(ErrorObject::invalid_params(format!("unknown tool: {name}"))
                .with_data(json!({ "name": name })));
        };
        let wanted = Self::task_wanted(name, tool.task_support_level(), params, scope)?;
        // The call's binding is for 2026-07-28 rounds only: the handshake era has one round.
        let binding = if scope.modern {
            input::binding_of_map("tools/call", name, arguments.as_map())
        } else {
            String::new()
        };
        let rounds = rounds_for(scope, params, &binding)?;
        let token = progress_token(params);
        let run = match run {
            ToolRunner::Concurrent(run) => {
                let run = Arc::clone(run);
                if let Some(wanted) = wanted {
                    let name = name.to_owned();
                    let arguments = arguments.into_map();
                    return self
                        .start_task(wanted, &name, run, arguments, rounds, scope, token, cx);
                }
                let mut arguments = arguments;
                let name = name.to_owned();
                let job = self.worker_job(scope, binding, token, rounds, None);
                self.start_job(
                    job,
                    cx,
                    move |mcx| run(&mut arguments, mcx),
                    move |outcome, scope, rounds, binding| {
                        tool_answer(&name, scope, rounds, binding, outcome)
                    },
                );
                return Ok(Value::Null);
            }
            ToolRunner::OnLoop(run) => run,
        };
        let state = &mut self.state;
        let mut arguments = arguments;
        let mut mcx = McpContext::new(child_context(cx), scope, token, rounds);
        let outcome = catch_panic(|| run(state, &mut arguments, &mut mcx));
        let (rounds, changes) = mcx.into_parts();
        self.deliver(changes, cx);
        if let (Ok(Ok(result)), None) = (&outcome, &wanted) {
            if round_outcome(scope, &rounds, &binding, false).is_none() {
                // The common answer, written as JSON text without a `Value` (the loop sends it
                // and ignores the `Null`); under 2026-07-28 completed as `handle_modern` would.
                if let Some(out) = cx.answer_text() {
                    result.write_json(out, scope.modern.then_some(&self.info));
                    return Ok(Value::Null);
                }
            }
        }
        let answer = tool_answer(name, scope, &rounds, &binding, outcome);
        match wanted {
            // A quick tool's task is made when it returns (after any input rounds).
            Some(wanted) => self.task_of_answer(wanted, answer, scope),
            None => answer,
        }
    }

    pub(super) fn read_resource(
        &mut self,
        params: &Map<String, Value>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: resources/read needs a string \"uri\"",
            ));
        };
        let vars;
        let read = if let Some((_, read)) = self.resources.iter_mut().find(|(r, _)| r.uri() == uri)
        {
            vars = Arguments::default();
            read
        } else {
            let found = self
                .templates
                .iter_mut()
                .find_map(|(t, read)| t.matches(uri).map(|v| (v, read)));
            let Some((matched, read)) = found else {
                return Err(Resource::not_found(uri));
            };
            vars = Arguments::from_map(matched);
            read
        };
        let binding = if scope.modern {
            input::binding("resources/read", uri, &Value::Null)
        } else {
            String::new()
        };
        let rounds = rounds_for(scope, params, &binding)?;
        let read = match read {
            Runner::Concurrent(read) => {
                let read = Arc::clone(read);
                let (uri, modern) = (uri.to_owned(), scope.modern);
                let cache = Some((self.cache_ttl_ms, self.cache_public));
                let job = self.worker_job(scope, binding, progress_token(params), rounds, cache);
                let work = move |mcx: &mut McpContext<'_>| {
                    let contents = read(&uri, &vars, mcx).map_err(|e| {
                        // 2026-07-28: a missing resource is invalid params, never -32002.
                        if modern && e.code == RESOURCE_NOT_FOUND {
                            ErrorObject {
                                code: crate::message::ErrorCode::INVALID_PARAMS,
                                ..e
                            }
                        } else {
                            e
                        }
                    })?;
                    read_result(&uri, &contents, modern)
                };
                self.start_job(job, cx, work, handler_answer);
                return Ok(Value::Null);
            }
            Runner::OnLoop(read) => read,
        };
        let mut mcx = McpContext::new(child_context(cx), scope, progress_token(params), rounds);
        let outcome = read(&mut self.state, uri, &vars, &mut mcx);
        let (rounds, changes) = mcx.into_parts();
        self.deliver(changes, cx);
        if let Some(answer) = round_outcome(scope, &rounds, &binding, outcome.is_err()) {
            return answer;
        }
        read_result(uri, &outcome?, scope.modern)
    }

    pub(super) fn get_prompt(
        &mut self,
        params: &mut Map<String, Value>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        // The arguments are moved out of `params` (the request's own), never copied.
        let arguments = params.get_mut("arguments").map(Value::take);
        let name = call_name(params, "prompts/get")?;
        let arguments = arguments_object(arguments, "prompts/get")?;
        let Some((prompt, get)) = self.prompts.iter_mut().find(|(p, _)| p.name() == name) else {
            return Err(
                ErrorObject::invalid_params(format!("unknown prompt: {name}"))
                    .with_data(json!({ "name": name })),
            );
        };
        if let Some(missing) = prompt
            .required_arguments()
            .find(|a| arguments.get(*a).is_none_or(Value::is_null))
        {
            return Err(ErrorObject::invalid_params(format!(
                "invalid params: prompt {name} needs the argument \"{missing}\""
            )));
        }
        let description = prompt.description_value().cloned();
        let binding = if scope.modern {
            input::binding_of_map("prompts/get", name, &arguments)
        } else {
            String::new()
        };
        let rounds = rounds_for(scope, params, &binding)?;
        let arguments = Arguments::from_map(arguments);
        let get = match get {
            Runner::Concurrent(get) => {
                let get = Arc::clone(get);
                let job = self.worker_job(scope, binding, progress_token(params), rounds, None);
                let work = move |mcx: &mut McpContext<'_>| {
                    let messages = get(&arguments, mcx)?;
                    Ok(prompt_result(description, &messages))
                };
                self.start_job(job, cx, work, handler_answer);
                return Ok(Value::Null);
            }
            Runner::OnLoop(get) => get,
        };
        let mut mcx = McpContext::new(child_context(cx), scope, progress_token(params), rounds);
        let outcome = get(&mut self.state, &arguments, &mut mcx);
        let (rounds, changes) = mcx.into_parts();
        self.deliver(changes, cx);
        if let Some(answer) = round_outcome(scope, &rounds, &binding, outcome.is_err()) {
            return answer;
        }
        let messages = outcome?;
        Ok(prompt_result(description, &messages))
    }

    /// What a resource read or a prompt run on the worker pool takes there.
    fn worker_job(
        &self,
        scope: &Scope,
        binding: String,
        token: Option<Value>,
        rounds: Rounds,
        cache: Option<(u64, bool)>,
    ) -> WorkerJob {
        WorkerJob {
            info: scope.modern.then(|| self.info.clone()),
            cache,
            scope: scope.clone(),
            binding,
            token,
            rounds,
        }
    }

    /// Runs `work` on the worker pool with the request's responder, then answers what
    /// `finish` makes of its outcome (`Err`: it panicked), completed with the 2026-07-28 result
    /// fields when the request had them; changes the work announced are posted to the loop
    /// first (it owns the subscriptions), so they are delivered before the answer.
    fn start_job<R: 'static>(
        &mut self,
        job: WorkerJob,
        cx: &mut Context<'_>,
        work: impl FnOnce(&mut McpContext<'_>) -> R + Send + 'static,
        finish: impl FnOnce(Result<R, String>, &Scope, &Rounds, &str) -> Result<Value, ErrorObject>
            + Send
            + 'static,
    ) {
        let Some(responder) = cx.responder() else {
            // Not reachable for a request (the answer was not taken before).
            diagnostics::line("mcpipe: a concurrent call had no responder");
            return;
        };
        let stats = cx.stats().clone();
        let pool = self
            .pool
            .get_or_insert_with(|| WorkerPool::new(self.workers, self.worker_keep_alive));
        let room = match pool.make_room() {
            Ok(room) => room,
            Err(e) => {
                // Queued, the call would wait for a thread that never comes.
                responder.respond(Err(no_worker(&e)));
                return;
            }
        };
        pool.submit(
            room,
            Box::new(move || {
                let WorkerJob {
                    info,
                    cache,
                    scope,
                    binding,
                    token,
                    rounds,
                } = job;
                let mut mcx = McpContext::on_worker(responder, stats, &scope, token, rounds);
                let outcome = catch_panic(|| work(&mut mcx));
                // Always a worker's context: it was made so two lines up.
                let Some((rounds, changes, responder)) = mcx.into_worker_parts() else {
                    return;
                };
                if !changes.is_empty() {
                    let _ = responder.post(Box::new(Announced(changes)));
                }
                let mut answer = finish(outcome, &scope, &rounds, &binding);
                if let (Ok(result), Some(info)) = (&mut answer, &info) {
                    // What `handle_modern` does for a call answered on the loop.
                    modern_result(result, info, cache);
                }
                responder.respond(answer);
            }),
        );
    }

    pub(super) fn complete(
        &mut self,
        params: &Map<String, Value>,
        scope: &Scope,
        cx: &mut Context<'_>,
    ) -> Result<Value, ErrorObject> {
        let reference = match params.get("ref") {
            Some(r @ Value::Object(_)) => r.clone(),
            _ => {
                return Err(ErrorObject::invalid_params(
                    "invalid params: completion/complete needs a \"ref\" object",
                ))
            }
        };
        let argument = params.get("argument").and_then(Value::as_object);
        let (Some(name), Some(value)) = (
            argument.and_then(|a| a.get("name")).and_then(Value::as_str),
            argument
                .and_then(|a| a.get("value"))
                .and_then(Value::as_str),
        ) else {
            return Err(ErrorObject::invalid_params(
                "invalid params: completion/complete needs \"argument\" with string \"name\" \
                 and \"value\"",
            ));
        };
        let Some(complete) = self.completion.as_mut() else {
            return Err(ErrorObject::method_not_found("completion/complete"));
        };
        let mut mcx = McpContext::new(
            child_context(cx),
            scope,
            progress_token(params),
            Rounds::default(),
        );
        let mut values = complete(&mut self.state, &reference, name, value, &mut mcx)?;
        let (_, changes) = mcx.into_parts();
        self.deliver(changes, cx);
        let total = values.len();
        let has_more = total > MAX_COMPLETIONS;
        values.truncate(MAX_COMPLETIONS);
        Ok(json!({ "completion": { "values": values, "total": total, "hasMore": has_more } }))
    }

    pub(super) fn set_level(&mut self, params: &Map<String, Value>) -> Result<Value, ErrorObject> {
        let level = params.get("level").and_then(Value::as_str);
        match level.and_then(LogLevel::from_name) {
            Some(level) => {
                self.session.log_level = level;
                Ok(json!({}))
            }
            None => Err(ErrorObject::invalid_params(format!(
                "invalid params: unknown log level {}; expected one of debug, info, notice, \
                 warning, error, critical, alert, emergency",
                params.get("level").unwrap_or(&Value::Null)
            ))),
        }
    }
}

/// The inputs of this round: parsed from the request under 2026-07-28, none in the handshake
/// era (where a call has one round and inputs are asked for live). Inlined, as
/// [`progress_token`]: the result is built in the call's own place, not returned through memory
/// and copied at once (a stall; see `json_read`'s `Reader::value_into`).
#[inline]
pub(super) fn rounds_for(
    scope: &Scope,
    params: &Map<String, Value>,
    binding: &str,
) -> Result<Rounds, ErrorObject> {
    if scope.modern {
        Rounds::from_params(params, binding)
    } else {
        Ok(Rounds::default())
    }
}

/// Under 2026-07-28, what overrides the handler's own answer: `input_required` while an input
/// is missing, `-32021` when it failed for want of a client capability.
pub(super) fn round_outcome(
    scope: &Scope,
    rounds: &Rounds,
    binding: &str,
    failed: bool,
) -> Option<Result<Value, ErrorObject>> {
    if !scope.modern {
        return None;
    }
    if !rounds.pending.is_empty() {
        return Some(Ok(rounds.input_required(binding)));
    }
    match (&rounds.missing_capability, failed) {
        (Some(required), true) => Some(Err(ErrorObject::new(
            era::MISSING_CLIENT_CAPABILITY,
            "missing required client capability: the request needs a capability the client \
             did not declare in io.modelcontextprotocol/clientCapabilities",
        )
        .with_data(json!({ "requiredCapabilities": required })))),
        _ => None,
    }
}

pub(super) fn subscription_uri(
    params: &Map<String, Value>,
    method: &str,
) -> Result<String, ErrorObject> {
    params
        .get("uri")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            ErrorObject::invalid_params(format!("invalid params: {method} needs a string \"uri\""))
        })
}

/// A fresh context for the same request, so an [`McpContext`] can own one.
pub(super) fn child_context<'b>(cx: &'b mut Context<'_>) -> Context<'b> {
    cx.reborrow()
}

/// The request's `_meta.progressToken`, when it is a string or an integer.
#[inline]
pub(super) fn progress_token(params: &Map<String, Value>) -> Option<Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .cloned()
}

/// The answer to work that cannot run: the pool has no thread and none can start.
pub(super) fn no_worker(e: &std::io::Error) -> ErrorObject {
    diagnostics::line(&format!("mcpipe: no worker thread could be started: {e}"));
    ErrorObject::internal(format!(
        "internal error: no worker thread could be started: {e}"
    ))
}

/// The answer of a tool call, from what its function returned: under 2026-07-28 an
/// `input_required` round or `-32021` may override it; an `Err` becomes an `isError` result
/// (or a JSON-RPC error, for [`ToolError::protocol`]); a panic becomes an `isError` result.
pub(super) fn tool_answer(
    name: &str,
    scope: &Scope,
    rounds: &Rounds,
    binding: &str,
    outcome: Result<Result<ToolResult, ToolError>, String>,
) -> Result<Value, ErrorObject> {
    if let Ok(returned) = &outcome {
        if let Some(answer) = round_outcome(scope, rounds, binding, returned.is_err()) {
            return answer;
        }
    }
    match outcome {
        Ok(Ok(result)) => Ok(result.into_value()),
        Ok(Err(error)) => error.into_response(),
        Err(panic) => {
            diagnostics::line(&format!("mcpipe: the tool {name} panicked: {panic}"));
            Ok(
                ToolResult::error(format!("internal error: the tool {name} panicked: {panic}"))
                    .into_value(),
            )
        }
    }
}
