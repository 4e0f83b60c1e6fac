//! MCP tasks (2025-11-25 `tasks`, the 2026-07-28 extension `io.modelcontextprotocol/tasks`):
//! the store of the tasks a server keeps, their states, how they look on the wire in each
//! revision, and what a task's work reports back to the loop.
//!
//! The store belongs to the loop's thread (no lock): a task's work on a worker thread reports
//! through the loop's outbox ([`TaskEvent`], a post), and the loop updates the store, sends
//! status notifications and answers waiting `tasks/result` requests.
//!
//! # Bounds
//! A finished task is kept for its TTL, counted from the moment it finished (longer than the
//! spec's "from creation": a client may always fetch a result it was told to come back for).
//! At most `max_kept` tasks exist at once: a new one evicts the oldest finished task, and when
//! every kept task is still running the call is refused. So memory stays flat under a client
//! that starts tasks and never fetches their results.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use crate::deadline;
use crate::message::{ErrorCode, ErrorObject};
use crate::responder::{CancelToken, Responder};

/// The 2026-07-28 extension's name, in `capabilities.extensions`.
pub(crate) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key naming the task a message belongs to (2025-11-25).
pub(crate) const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// What a task's work reports to the loop (posted through the outbox).
#[derive(Debug)]
pub(crate) struct TaskEvent {
    pub(crate) id: String,
    pub(crate) kind: EventKind,
}

#[derive(Debug)]
pub(crate) enum EventKind {
    /// 2025-11-25: the work asked the client something and waits (`true`), or got its answer.
    Waiting(bool),
    /// 2026-07-28: the work ended for want of these inputs (by key); it runs again, from the
    /// start, once `tasks/update` has brought every one.
    NeedsInput(Map<String, Value>),
    /// The work ended: a result (`completed`) or a JSON-RPC error (`failed`).
    Finished(Result<Value, ErrorObject>),
}

impl TaskEvent {
    pub(crate) fn waiting(id: &str, waiting: bool) -> TaskEvent {
        TaskEvent {
            id: id.to_owned(),
            kind: EventKind::Waiting(waiting),
        }
    }
}

/// `params` with `_meta["io.modelcontextprotocol/related-task"]` naming the task.
pub(crate) fn with_related_task(params: Option<Value>, task_id: &str) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(RELATED_TASK_KEY.into(), json!({ "taskId": task_id }));
    }
    Value::Object(params)
}

/// One task. `R` is what it takes to run the work again (2026-07-28 inputs).
#[derive(Debug)]
pub(crate) struct Task<R> {
    pub(crate) id: String,
    /// Made by a 2026-07-28 request (the extension), not by the handshake session: the two
    /// never see each other's tasks (see [`TaskStore::forget`]).
    pub(crate) modern: bool,
    pub(crate) status: Status,
    pub(crate) message: Option<String>,
    created: SystemTime,
    updated: SystemTime,
    ttl: Duration,
    /// The outcome, once `completed` (a result) or `failed` (an error).
    pub(crate) outcome: Option<Result<Value, ErrorObject>>,
    /// Stops the work (`tasks/cancel`, shutdown).
    pub(crate) cancel: CancelToken,
    /// `tasks/result` requests waiting for the end (2025-11-25).
    pub(crate) waiters: Vec<Responder>,
    /// 2026-07-28: inputs the work waits for, by key (the `inputRequests` of `tasks/get`).
    pub(crate) inputs: Map<String, Value>,
    /// 2026-07-28: answers given so far, by key, for the next run of the work.
    pub(crate) answers: Map<String, Value>,
    /// What runs the work again (2026-07-28 inputs); `None` when it cannot run again.
    pub(crate) resume: Option<R>,
    /// When a finished task may be forgotten.
    expires: Option<Instant>,
}

impl<R> Task<R> {
    /// Moves to `status` (with a message), unless the task already ended.
    pub(crate) fn set_status(&mut self, status: Status, message: Option<String>) -> bool {
        if self.status.is_terminal() || (self.status == status && self.message == message) {
            return false;
        }
        self.status = status;
        self.message = message;
        self.updated = SystemTime::now();
        if status.is_terminal() {
            self.expires = Some(deadline::from_now(self.ttl));
            self.inputs.clear();
            self.resume = None;
        }
        true
    }

    /// Ends the task with its work's outcome: `completed` for a result, `failed` for an error.
    pub(crate) fn finish(&mut self, outcome: Result<Value, ErrorObject>) -> bool {
        let (status, message) = match &outcome {
            Ok(_) => (Status::Completed, None),
            Err(e) => (Status::Failed, Some(e.message.clone())),
        };
        if !self.set_status(status, message) {
            return false;
        }
        self.outcome = Some(outcome);
        true
    }

    /// The task as the wire shows it: `Task` (2025-11-25) or, when `modern`, the extension's
    /// base task fields (2026-07-28: `ttlMs`, `pollIntervalMs`).
    pub(crate) fn to_value(&self, modern: bool, poll_interval: Duration) -> Value {
        let mut task = Map::new();
        task.insert("taskId".into(), json!(self.id));
        task.insert("status".into(), json!(self.status.as_str()));
        if let Some(message) = &self.message {
            task.insert("statusMessage".into(), json!(message));
        }
        task.insert("createdAt".into(), json!(iso8601(self.created)));
        task.insert("lastUpdatedAt".into(), json!(iso8601(self.updated)));
        let ttl = millis(self.ttl);
        let poll = millis(poll_interval).max(1);
        if modern {
            task.insert("ttlMs".into(), json!(ttl));
            task.insert("pollIntervalMs".into(), json!(poll));
        } else {
            task.insert("ttl".into(), json!(ttl));
            task.insert("pollInterval".into(), json!(poll));
        }
        Value::Object(task)
    }

    /// 2026-07-28 `tasks/get`: the task with its `result`, `error` or `inputRequests`.
    pub(crate) fn detailed(&self, poll_interval: Duration) -> Value {
        let mut task = self.to_value(true, poll_interval);
        if let Value::Object(map) = &mut task {
            match (&self.status, &self.outcome) {
                (Status::Completed, Some(Ok(result))) => {
                    map.insert("result".into(), result.clone());
                }
                (Status::Failed, Some(Err(error))) => {
                    map.insert("error".into(), error.to_value());
                }
                (Status::InputRequired, _) if !self.inputs.is_empty() => {
                    map.insert("inputRequests".into(), Value::Object(self.inputs.clone()));
                }
                _ => {}
            }
        }
        task
    }

    /// 2025-11-25 `tasks/result` of a finished task: the call's own answer, naming the task.
    pub(crate) fn result_answer(&self) -> Result<Value, ErrorObject> {
        match &self.outcome {
            Some(Ok(result)) => {
                let mut result = result.clone();
                if let Value::Object(map) = &mut result {
                    let meta = map.entry("_meta").or_insert_with(|| json!({}));
                    if let Value::Object(meta) = meta {
                        meta.insert(RELATED_TASK_KEY.into(), json!({ "taskId": self.id }));
                    }
                }
                Ok(result)
            }
            Some(Err(error)) => Err(error.clone()),
            None => Err(ErrorObject::internal(format!(
                "the task {} was cancelled: it has no result",
                self.id
            ))
            .with_data(json!({ "taskId": self.id, "status": self.status.as_str() }))),
        }
    }

    /// Answers the `tasks/result` requests waiting for this (finished) task.
    pub(crate) fn answer_waiters(&mut self) {
        for waiter in std::mem::take(&mut self.waiters) {
            waiter.respond(self.result_answer());
        }
    }
}

/// The tasks a server keeps, oldest first.
#[derive(Debug)]
pub(crate) struct TaskStore<R> {
    /// By creation order, so that lists are stable and the oldest is evicted first.
    tasks: BTreeMap<u64, Task<R>>,
    /// Task id to its creation number.
    ids: HashMap<String, u64>,
    next: u64,
    ids_key: RandomState,
    /// The most tasks kept at once (at least 1).
    pub(crate) max_kept: usize,
    /// How long a finished task is kept; also the most a 2025-11-25 client may ask for.
    pub(crate) ttl: Duration,
    /// How often clients are told to poll.
    pub(crate) poll_interval: Duration,
}

impl<R> TaskStore<R> {
    pub(crate) fn new() -> TaskStore<R> {
        TaskStore {
            tasks: BTreeMap::new(),
            ids: HashMap::new(),
            next: 0,
            ids_key: RandomState::new(),
            max_kept: 1000,
            ttl: Duration::from_secs(600),
            poll_interval: Duration::from_millis(250),
        }
    }

    /// How many tasks are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tasks.len()
    }

    /// A new `working` task, made by a 2026-07-28 request when `modern`. `ttl` is what a
    /// 2025-11-25 client asked for (capped by the store's).
    ///
    /// # Errors
    /// `-32603` when `max_kept` tasks are still running.
    pub(crate) fn create(
        &mut self,
        ttl: Option<Duration>,
        modern: bool,
    ) -> Result<&mut Task<R>, ErrorObject> {
        self.sweep();
        while self.tasks.len() >= self.max_kept.max(1) {
            let oldest_finished = self
                .tasks
                .iter()
                .find(|(_, t)| t.status.is_terminal())
                .map(|(n, _)| *n);
            let Some(n) = oldest_finished else {
                return Err(ErrorObject::internal(format!(
                    "too many tasks: {} are still running; wait for one to end or cancel one",
                    self.tasks.len()
                ))
                .with_data(json!({ "running": self.tasks.len() })));
            };
            self.remove(n);
        }
        self.next += 1;
        let n = self.next;
        let mut h = self.ids_key.build_hasher();
        h.write_u64(n);
        let a = h.finish();
        h.write_u64(a);
        let id = format!("task-{n}-{a:016x}{:016x}", h.finish());
        let now = SystemTime::now();
        let task = Task {
            id: id.clone(),
            modern,
            status: Status::Working,
            message: None,
            created: now,
            updated: now,
            ttl: ttl.map_or(self.ttl, |t| t.min(self.ttl)),
            outcome: None,
            cancel: CancelToken::new(),
            waiters: Vec::new(),
            inputs: Map::new(),
            answers: Map::new(),
            resume: None,
            expires: None,
        };
        self.ids.insert(id, n);
        Ok(self.tasks.entry(n).or_insert(task))
    }

    /// The task `id`.
    ///
    /// # Errors
    /// `-32602` when no such task is kept (never was, or expired).
    pub(crate) fn get(&mut self, id: &str) -> Result<&mut Task<R>, ErrorObject> {
        self.sweep();
        self.find(id).ok_or_else(|| unknown_task(id))
    }

    /// The task `id`, read-only, without forgetting expired ones first.
    pub(crate) fn peek(&self, id: &str) -> Option<&Task<R>> {
        let n = self.ids.get(id)?;
        self.tasks.get(n)
    }

    /// The task `id`, without forgetting expired ones first (for the work's reports).
    pub(crate) fn find(&mut self, id: &str) -> Option<&mut Task<R>> {
        let n = self.ids.get(id)?;
        self.tasks.get_mut(n)
    }

    /// Every kept task, oldest first.
    pub(crate) fn list(&mut self) -> impl Iterator<Item = &Task<R>> {
        self.sweep();
        self.tasks.values()
    }

    /// Every kept task, to stop them all (shutdown).
    pub(crate) fn all_mut(&mut self) -> impl Iterator<Item = &mut Task<R>> {
        self.tasks.values_mut()
    }

    /// Forgets every task `gone` picks at once, whatever its state: the work of one still
    /// running is cancelled (as by `tasks/cancel`), and what it reports later finds no task.
    /// The number forgotten.
    pub(crate) fn forget(&mut self, gone: impl Fn(&Task<R>) -> bool) -> usize {
        let picked: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, t)| gone(t))
            .map(|(n, _)| *n)
            .collect();
        for &n in &picked {
            if let Some(task) = self.tasks.get(&n) {
                if !task.status.is_terminal() {
                    task.cancel.cancel_by_peer();
                }
            }
            self.remove(n);
        }
        picked.len()
    }

    /// Forgets finished tasks whose time is up.
    fn sweep(&mut self) {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.expires.is_some_and(|at| at <= now))
            .map(|(n, _)| *n)
            .collect();
        for n in expired {
            self.remove(n);
        }
    }

    fn remove(&mut self, n: u64) {
        if let Some(mut task) = self.tasks.remove(&n) {
            self.ids.remove(&task.id);
            // Not reachable (waiters exist only while the task runs), but never drop one
            // unanswered.
            task.answer_waiters();
        }
    }
}

/// `-32602` for a task id the store does not know.
pub(crate) fn unknown_task(id: &str) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::INVALID_PARAMS,
        format!("invalid params: unknown task {id:?} (never created, or expired)"),
    )
    .with_data(json!({ "taskId": id }))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC) for a time after 1970.
pub(crate) fn iso8601(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_date(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` days after 1970-01-01.
fn civil_date(days: u64) -> (u64, u64, u64) {
    // Count in 400-year eras from 0000-03-01, so that a leap day ends each year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_match_known_days() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(20_781), (2026, 11, 24));
        let t = UNIX_EPOCH + Duration::from_millis(1_795_555_200_123);
        assert_eq!(iso8601(t), "2026-11-24T21:20:00.123Z");
    }

    #[test]
    fn a_full_store_evicts_the_oldest_finished_task_and_refuses_when_all_run() {
        let mut store: TaskStore<()> = TaskStore::new();
        store.max_kept = 2;
        let a = store.create(None, false).unwrap().id.clone();
        let b = store.create(None, false).unwrap().id.clone();
        assert_eq!(
            store.create(None, false).unwrap_err().code,
            ErrorCode::INTERNAL_ERROR
        );
        store.get(&a).unwrap().finish(Ok(json!({})));
        let c = store.create(None, false).unwrap().id.clone();
        assert_eq!(store.len(), 2);
        assert_eq!(store.get(&a).unwrap_err().code, ErrorCode::INVALID_PARAMS);
        assert!(store.get(&b).is_ok() && store.get(&c).is_ok());
    }

    #[test]
    fn a_finished_task_expires_after_its_ttl_and_a_running_one_never() {
        let mut store: TaskStore<()> = TaskStore::new();
        let a = store
            .create(Some(Duration::ZERO), false)
            .unwrap()
            .id
            .clone();
        std::thread::sleep(Duration::from_millis(5));
        assert!(store.get(&a).is_ok(), "a running task does not expire");
        store
            .get(&a)
            .unwrap()
            .finish(Err(ErrorObject::internal("x")));
        assert_eq!(store.get(&a).unwrap_err().code, ErrorCode::INVALID_PARAMS);
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn forget_drops_the_picked_tasks_and_stops_the_running_ones() {
        let mut store: TaskStore<()> = TaskStore::new();
        let running = store.create(None, true).unwrap();
        let (running, token) = (running.id.clone(), running.cancel.clone());
        let done = store.create(None, true).unwrap();
        done.finish(Ok(json!({})));
        let done = done.id.clone();
        let kept = store.create(None, false).unwrap().id.clone();
        assert_eq!(store.forget(|t| t.modern), 2);
        assert!(matches!(token.reason(), Some(crate::Error::Cancelled)));
        for gone in [running, done] {
            assert_eq!(
                store.get(&gone).unwrap_err().code,
                ErrorCode::INVALID_PARAMS
            );
        }
        assert!(store.get(&kept).is_ok());
        assert_eq!(store.len(), 1);
    }

    #[test]
    fn wire_shapes_differ_by_revision() {
        let mut store: TaskStore<()> = TaskStore::new();
        let legacy = store
            .create(None, false)
            .unwrap()
            .to_value(false, store_poll());
        assert!(legacy.get("ttl").is_some() && legacy.get("ttlMs").is_none());
        let task = store.create(None, false).unwrap();
        task.finish(Ok(json!({ "content": [] })));
        let modern = task.detailed(store_poll());
        assert!(modern.get("ttlMs").is_some() && modern.get("ttl").is_none());
        assert_eq!(modern["status"], "completed");
        assert_eq!(modern["result"], json!({ "content": [] }));
    }

    fn store_poll() -> Duration {
        Duration::from_millis(250)
    }
}
