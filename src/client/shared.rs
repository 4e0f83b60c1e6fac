//! Many requests in flight on one connection: [`SharedClient`], a `Send + Sync` handle whose IO
//! thread (`io_thread.rs`) owns the [`Client`], and its API; [`Call`] (`link.rs`) is one
//! request started now and waited for later.
//!
//! Callers never touch the pipes: they send commands over a channel and wake the IO thread
//! (a `mio::Waker` in the server's poll); answers and progress come back on a channel per
//! request (`call_events.rs`). So a slow call never delays another's answer, each request keeps its own deadline
//! (enforced on the IO thread, which sends `notifications/cancelled` when it passes), and
//! progress callbacks run on the thread that waits.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::call_events;
use super::era::{Asked, Era};
use super::exchange::{self, Exchange};
use super::link::{self, Call, Command, Link, LinkState, Plan, View};
use super::options::RequestOptions;
use super::process::{Shutdown, ShutdownStage};
use super::retry::{self, RetryPolicy};
use super::tasks::{self, TaskOptions, TaskStart, Tasks};
use super::{Client, ClientBuilder, ClientStats};
use crate::deadline;
use crate::error::Error;
use crate::handler::catch_panic;
use crate::lock::lock;
use crate::message::Notification;

/// A client of one MCP server that many threads can use at once: `Send + Sync` and cheap to
/// clone (clones share the connection).
///
/// Made by [`ClientBuilder::spawn_shared`] or
/// [`Client::into_shared`] once the connection step is done. An IO thread then owns the server
/// process: it writes requests, reads answers, answers the server's requests (the callbacks
/// run on it), drains stderr and runs the heartbeat. Each request waits on its caller's thread
/// and has its own deadline, progress, cancellation and retry policy, so a slow call never
/// delays another's answer. [`SharedClient::start`] starts a request and returns a [`Call`] to
/// wait for or cancel later.
///
/// [`close`](SharedClient::close) (or dropping the last clone) fails every request still
/// waiting with [`Error::Closed`], shuts the server down as [`Client::close`] does, and joins
/// the IO thread. A callback that needs its own client holds a [`WeakClient`]: a clone would
/// keep the client open for as long as the client keeps the callback, which is for ever.
///
/// # Example
/// ```no_run
/// use mcpipe::Client;
/// use serde_json::json;
///
/// let client = Client::builder("mcpipe").arg("demo").spawn_shared()?;
/// let calls: Vec<_> = (0..4)
///     .map(|_| client.start("tools/call", Some(json!({"name": "sleep", "arguments": {"ms": 500}})), &Default::default()))
///     .collect::<Result<_, _>>()?;
/// for call in calls {
///     eprintln!("{}", call.wait()?["content"][0]["text"]);
/// }
/// client.close();
/// # Ok::<(), mcpipe::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SharedClient {
    inner: Arc<Inner>,
}

/// The handles' common part: its drop (the last handle's) closes the client.
#[derive(Debug)]
struct Inner {
    link: Link,
    closed: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    shutdown: Mutex<Option<Shutdown>>,
    retry: RetryPolicy,
    max_input_rounds: u32,
}

/// A handle to a [`SharedClient`] that does not keep it open, made by
/// [`SharedClient::downgrade`].
///
/// The client owns its callbacks, so a callback holding a [`SharedClient`] would keep its own
/// client open after every other handle is gone (the server and the IO thread with it). Give
/// callbacks a `WeakClient` instead:
///
/// ```no_run
/// use std::sync::{Arc, OnceLock};
/// use mcpipe::{Client, WeakClient};
/// use serde_json::json;
///
/// let me: Arc<OnceLock<WeakClient>> = Arc::default();
/// let cell = Arc::clone(&me);
/// let client = Client::builder("mcpipe")
///     .arg("demo")
///     .on_notification(move |n| {
///         if let Some(client) = cell.get().and_then(WeakClient::upgrade) {
///             eprintln!("{} from server {:?}", n.method, client.pid());
///         }
///     })
///     .spawn_shared()?;
/// let _ = me.set(client.downgrade());
/// client.call_tool("echo", json!({"text": "hi"}))?;
/// drop(client); // the last handle: the client closes
/// # Ok::<(), mcpipe::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct WeakClient {
    inner: Weak<Inner>,
}

impl WeakClient {
    /// The client, while any [`SharedClient`] handle to it lives.
    pub fn upgrade(&self) -> Option<SharedClient> {
        self.inner.upgrade().map(|inner| SharedClient { inner })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        close(self, None);
    }
}

impl SharedClient {
    /// A handle that does not keep the client open (for its own callbacks).
    pub fn downgrade(&self) -> WeakClient {
        WeakClient {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Starts the IO thread, which spawns the server (so the server's lifetime is tied to
    /// that thread, see `PR_SET_PDEATHSIG` in docs/client.md) and connects.
    pub(super) fn spawn(builder: ClientBuilder) -> Result<SharedClient, Error> {
        let retry = builder.settings.retry.clone();
        let max_input_rounds = builder.settings.max_input_rounds;
        SharedClient::run(retry, max_input_rounds, move || Client::start(builder))
    }

    /// Starts the IO thread, hands it the client `start` makes, and waits until it serves.
    pub(super) fn run(
        retry: RetryPolicy,
        max_input_rounds: u32,
        start: impl FnOnce() -> Result<Client, Error> + Send + 'static,
    ) -> Result<SharedClient, Error> {
        let (commands, receiver) = mpsc::channel();
        let link = Link(Arc::new(LinkState {
            commands,
            waker: Mutex::new(None),
            wake_pending: AtomicBool::new(false),
            view: Mutex::new(View::default()),
            notifications: Mutex::new(VecDeque::new()),
            notified: Condvar::new(),
            next_key: AtomicU64::new(1),
            io_thread: OnceLock::new(),
            ended: Mutex::new(None),
        }));
        let (ready, started) = mpsc::channel();
        let thread_link = link.clone();
        let thread = std::thread::Builder::new()
            .name(String::from("mcpipe-client"))
            .spawn(move || {
                let _ = thread_link.0.io_thread.set(std::thread::current().id());
                let mut client = match start() {
                    Ok(client) => client,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                *lock(&thread_link.0.waker) = client.process.as_ref().map(|p| p.waker());
                *thread_link.view() = client.view();
                client.publish(&thread_link);
                let _ = ready.send(Ok(()));
                if let Err(panic) = catch_panic(|| client.serve(&receiver, &thread_link)) {
                    client.end_after_panic(panic, &thread_link);
                }
            })
            .map_err(|e| Error::io("starting the client's IO thread", e))?;
        let outcome = started.recv().unwrap_or(Err(Error::Closed));
        let inner = Inner {
            link,
            closed: AtomicBool::new(false),
            thread: Mutex::new(Some(thread)),
            shutdown: Mutex::new(None),
            retry,
            max_input_rounds,
        };
        if let Err(e) = outcome {
            // The thread has ended (or is ending): join it, and drop `inner` unclosed.
            inner.closed.store(true, Ordering::SeqCst);
            if let Some(thread) = lock(&inner.thread).take() {
                let _ = thread.join();
            }
            *lock(&inner.shutdown) = Some(Shutdown {
                status: None,
                stage: ShutdownStage::AlreadyExited,
                elapsed: Duration::ZERO,
            });
            return Err(e);
        }
        Ok(SharedClient {
            inner: Arc::new(inner),
        })
    }
}

impl Client {
    /// Hands the connection to an IO thread and returns a [`SharedClient`] for many threads
    /// and many requests in flight. Queued notifications move to
    /// [`SharedClient::next_notification`]; stray responses are dropped.
    ///
    /// The server stays tied to the thread that spawned it (Linux kills it when that thread
    /// ends): prefer [`ClientBuilder::spawn_shared`](super::ClientBuilder::spawn_shared), which spawns it on the IO thread.
    ///
    /// # Errors
    /// [`Error::Io`] when the thread cannot be started (the server is then shut down).
    pub fn into_shared(self) -> Result<SharedClient, Error> {
        let retry = self.settings.retry.clone();
        let max_input_rounds = self.settings.max_input_rounds;
        SharedClient::run(retry, max_input_rounds, move || Ok(self))
    }
}

/// Sends `Close` and joins the IO thread; later calls return the first one's result.
fn close(inner: &Inner, terminate: Option<Duration>) -> Shutdown {
    let unknown = Shutdown {
        status: None,
        stage: ShutdownStage::AlreadyExited,
        elapsed: Duration::ZERO,
    };
    if inner.link.on_io_thread() {
        // From a callback: the IO thread cannot wait for itself. It closes once the callback
        // returns; a later `close` from another thread joins it and reports.
        inner.closed.store(true, Ordering::SeqCst);
        let (reply, _) = mpsc::channel();
        let _ = inner
            .link
            .0
            .commands
            .send(Command::Close { terminate, reply });
        return unknown;
    }
    let mut shutdown = lock(&inner.shutdown);
    if let Some(done) = *shutdown {
        return done;
    }
    inner.closed.store(true, Ordering::SeqCst);
    let (reply, answer) = mpsc::channel();
    let sent = inner.link.send(Command::Close { terminate, reply }).is_ok();
    // The thread ends after replying. If it ended before (closed from a callback, or a
    // callback panicked), it left word of how it shut the server down.
    let done = sent
        .then(|| answer.recv().ok())
        .flatten()
        .or_else(|| inner.link.ended().map(|ended| ended.shutdown))
        .unwrap_or(unknown);
    if let Some(thread) = lock(&inner.thread).take() {
        let _ = thread.join();
    }
    *shutdown = Some(done);
    done
}

impl SharedClient {
    /// Starts a request and returns at once: the [`Call`] waits for its answer, or cancels it.
    /// One attempt and one round: no retry policy, and under MCP 2026-07-28 an
    /// `input_required` result is returned as it is ([`SharedClient::request`] does both).
    ///
    /// `options` gives the timeout and the hard maximum (enforced on the IO thread whether or
    /// not anyone waits); a progress callback in it only asks the server for progress, which
    /// [`Call::wait_with_progress`] receives.
    ///
    /// # Errors
    /// [`Error::Closed`] when the client was closed.
    pub fn start(
        &self,
        method: &str,
        params: Option<Value>,
        options: &RequestOptions<'_>,
    ) -> Result<Call, Error> {
        self.start_attempt(method, params, Plan::of(options), false)
    }

    fn start_attempt(
        &self,
        method: &str,
        params: Option<Value>,
        plan: Plan,
        retrying: bool,
    ) -> Result<Call, Error> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let link = &self.inner.link;
        let key = link.0.next_key.fetch_add(1, Ordering::Relaxed);
        let (events, receiver) = call_events::channel();
        link.send(Command::Start {
            key,
            method: method.to_owned(),
            params,
            plan,
            retrying,
            events,
        })?;
        Ok(Call::new(key, receiver, link.clone()))
    }

    /// Sends a request and waits for its result, as [`Client::request`] does (retry policy,
    /// `input_required` rounds, progress callback on this thread), while other threads' requests
    /// go on.
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn request(
        &self,
        method: &str,
        params: Option<Value>,
        mut options: RequestOptions<'_>,
    ) -> Result<Value, Error> {
        let mut caller = Caller {
            client: self,
            seed: None,
        };
        caller.not_on_io_thread()?;
        exchange::request(&mut caller, method, params, &mut options)
    }

    /// Shuts the server down in order (as [`SharedClient::close`] does, stdin first) and
    /// starts it again with a fresh handshake, as [`Client::restart`] does: what a shared
    /// client without a [retry policy](crate::ClientBuilder::retry) needs after its server
    /// died, or to pick up a new version of it. Calls in flight when it starts fail with
    /// [`Error::Closed`] (their requests are cancelled on the wire); calls started after it
    /// returns go to the new server. A client that was closed stays closed.
    ///
    /// # Errors
    /// As [`ClientBuilder::spawn`](crate::ClientBuilder::spawn) when the server cannot be
    /// started again (the client is then unusable until a restart succeeds);
    /// [`Error::Closed`] after [`SharedClient::close`]; an error when called from the
    /// client's own callbacks (the IO thread cannot wait for itself).
    pub fn restart(&self) -> Result<(), Error> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let (reply, answer) = mpsc::channel();
        self.inner.link.send(Command::Restart { reply })?;
        answer.recv().unwrap_or(Err(Error::Closed))
    }

    /// Sends a notification.
    ///
    /// # Errors
    /// [`Error::Closed`], or the error that made the server unusable.
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), Error> {
        let (reply, answer) = mpsc::channel();
        self.inner.link.send(Command::Notify {
            method: method.to_owned(),
            params,
            reply,
        })?;
        answer.recv().unwrap_or(Err(Error::Closed))
    }

    /// As [`Client::ping`].
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn ping(&self) -> Result<(), Error> {
        let method = match self.era() {
            Some(Era::Modern) => "server/discover",
            _ => "ping",
        };
        self.request(method, None, RequestOptions::new()).map(drop)
    }

    /// As [`Client::list_tools`].
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_tools(&self) -> Result<Vec<Value>, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        exchange::list_all(&mut caller, "tools/list", "tools")
    }

    /// As [`Client::call_tool`].
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        self.call_tool_with(name, arguments, RequestOptions::new())
    }

    /// As [`Client::call_tool_with`].
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        options: RequestOptions<'_>,
    ) -> Result<Value, Error> {
        let params = exchange::named_params(name, arguments);
        self.request("tools/call", Some(params), options)
    }

    /// As [`Client::list_resources`].
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resources(&self) -> Result<Vec<Value>, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        exchange::list_all(&mut caller, "resources/list", "resources")
    }

    /// As [`Client::list_resource_templates`].
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_resource_templates(&self) -> Result<Vec<Value>, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        exchange::list_all(&mut caller, "resources/templates/list", "resourceTemplates")
    }

    /// As [`Client::read_resource`].
    ///
    /// # Errors
    /// As [`Client::read_resource`].
    pub fn read_resource(&self, uri: &str) -> Result<Value, Error> {
        let params = serde_json::json!({ "uri": uri });
        self.request("resources/read", Some(params), RequestOptions::new())
    }

    /// As [`Client::list_prompts`].
    ///
    /// # Errors
    /// As [`Client::list_tools`].
    pub fn list_prompts(&self) -> Result<Vec<Value>, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        exchange::list_all(&mut caller, "prompts/list", "prompts")
    }

    /// As [`Client::get_prompt`].
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn get_prompt(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        let params = exchange::named_params(name, arguments);
        self.request("prompts/get", Some(params), RequestOptions::new())
    }

    /// As [`Client::call_tool_as_task`]: starts the tool as a task, polls it on this thread
    /// (backing off, never faster than the server's poll interval; other threads' requests go
    /// on meanwhile, and the IO thread answers a 2025-11-25 task's live questions through the
    /// callbacks), and returns its result; past the deadline the task is cancelled.
    ///
    /// # Errors
    /// As [`Client::call_tool_as_task`].
    ///
    /// # Example
    /// ```no_run
    /// use std::time::Duration;
    /// use mcpipe::{Client, TaskOptions};
    /// use serde_json::json;
    ///
    /// let client = Client::builder("mcpipe").arg("demo").spawn_shared()?;
    /// let threads: Vec<_> = (0..3)
    ///     .map(|_| {
    ///         let client = client.clone();
    ///         std::thread::spawn(move || {
    ///             let options = TaskOptions::new().deadline(Duration::from_secs(60));
    ///             client.call_tool_as_task("sleep", json!({"ms": 1000}), options)
    ///         })
    ///     })
    ///     .collect();
    /// for thread in threads {
    ///     let result = thread.join().expect("no panic")?;
    ///     eprintln!("{}", result["content"][0]["text"]);
    /// }
    /// # Ok::<(), mcpipe::Error>(())
    /// ```
    pub fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Value,
        options: TaskOptions,
    ) -> Result<Value, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        tasks::call_as_task(&mut caller, name, arguments, &options)
    }

    /// As [`Client::start_task`].
    ///
    /// # Errors
    /// As [`Client::start_task`].
    pub fn start_task(
        &self,
        name: &str,
        arguments: Value,
        ttl: Option<Duration>,
    ) -> Result<TaskStart, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        tasks::start(&mut caller, name, arguments, ttl)
    }

    /// As [`Client::get_task`].
    ///
    /// # Errors
    /// As [`Client::get_task`].
    pub fn get_task(&self, task_id: &str) -> Result<Value, Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        tasks::get(&mut caller, task_id)
    }

    /// As [`Client::cancel_task`].
    ///
    /// # Errors
    /// As [`Client::cancel_task`].
    pub fn cancel_task(&self, task_id: &str) -> Result<(), Error> {
        let mut caller = self.caller();
        caller.not_on_io_thread()?;
        tasks::cancel(&mut caller, task_id)
    }

    /// The next notification from the server, waiting up to `timeout` for one (none arrive
    /// here when a notification callback is set). From a callback of this client, which
    /// runs on the thread that would deliver it, it takes one already queued and never waits.
    pub fn next_notification(&self, timeout: Duration) -> Option<Notification> {
        let link = &self.inner.link;
        let end = deadline::from_now(timeout);
        let waits = !link.on_io_thread();
        let mut queue = lock(&link.0.notifications);
        loop {
            if let Some(n) = queue.pop_front() {
                return Some(n);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero()
                || !waits
                || self.inner.closed.load(Ordering::SeqCst)
                || lock(&link.0.ended).is_some()
            {
                return None;
            }
            queue = link
                .0
                .notified
                .wait_timeout(queue, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Every queued notification, oldest first.
    pub fn take_notifications(&self) -> Vec<Notification> {
        lock(&self.inner.link.0.notifications).drain(..).collect()
    }

    /// Counters of what the client has seen (as of the IO thread's last turn).
    pub fn stats(&self) -> ClientStats {
        self.inner.link.view().stats.clone()
    }

    /// The era of the connection; `None` when the handshake was turned off.
    pub fn era(&self) -> Option<Era> {
        self.inner.link.view().era
    }

    /// The negotiated protocol version (empty when the handshake was turned off).
    pub fn protocol_version(&self) -> String {
        self.inner.link.view().protocol_version.clone()
    }

    /// The server's `initialize` result, as [`Client::initialize_result`].
    pub fn initialize_result(&self) -> Value {
        self.inner.link.view().initialize_result.clone()
    }

    /// The server's `server/discover` result, as [`Client::discover_result`].
    pub fn discover_result(&self) -> Value {
        self.inner.link.view().discover_result.clone()
    }

    /// The server's process id while it runs (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.inner.link.view().pid
    }

    /// Ends everything in order: every request still waiting fails with [`Error::Closed`],
    /// the server is shut down as by [`Client::close`], and the IO thread is joined. Every
    /// clone is closed with it; closing again returns the first result. Dropping the last
    /// clone does the same.
    pub fn close(&self) -> Shutdown {
        close(&self.inner, None)
    }

    /// As [`close`](SharedClient::close), without the end-of-input step (as
    /// [`Client::terminate`]).
    pub fn terminate(&self, grace: Duration) -> Shutdown {
        close(&self.inner, Some(grace))
    }

    fn caller(&self) -> Caller<'_> {
        Caller {
            client: self,
            seed: None,
        }
    }
}

/// A [`SharedClient`] seen by the layers above one attempt.
struct Caller<'a> {
    client: &'a SharedClient,
    /// The jitter's state, made at the first retry (`retry::seed` asks for the pid).
    seed: Option<u64>,
}

impl fmt::Debug for Caller<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller").finish_non_exhaustive()
    }
}

impl Caller<'_> {
    /// The deadlock error, before any retry policy can apply to it (see [`Link::send`]).
    fn not_on_io_thread(&self) -> Result<(), Error> {
        if self.client.inner.link.on_io_thread() {
            return Err(link::deadlock());
        }
        Ok(())
    }
}

impl Exchange for Caller<'_> {
    fn attempt(
        &mut self,
        method: &str,
        params: Option<Value>,
        options: &mut RequestOptions<'_>,
        retrying: bool,
    ) -> Result<Value, Error> {
        let plan = Plan::of(options);
        let call = self.client.start_attempt(method, params, plan, retrying)?;
        match options.progress.as_deref_mut() {
            Some(on_progress) => call.wait_with_progress(on_progress),
            None => call.wait(),
        }
    }

    fn fulfil(&mut self, input: &Asked) -> Result<Value, String> {
        let (reply, answer) = mpsc::channel();
        let command = Command::Fulfil {
            input: input.clone(),
            reply,
        };
        if self.client.inner.link.send(command).is_err() {
            return Err(String::from("the client is closed"));
        }
        answer
            .recv()
            .unwrap_or_else(|_| Err(String::from("the client is closed")))
    }

    fn pause(&mut self, delay: Duration) {
        // Only this caller waits; the IO thread goes on serving everyone else.
        std::thread::sleep(delay);
    }

    fn default_retry(&self) -> RetryPolicy {
        self.client.inner.retry.clone()
    }

    fn max_input_rounds(&self) -> u32 {
        self.client.inner.max_input_rounds
    }

    fn is_modern(&self) -> bool {
        self.client.era() == Some(Era::Modern)
    }

    fn seed(&mut self) -> &mut u64 {
        self.seed.get_or_insert_with(retry::seed)
    }
}

impl Tasks for Caller<'_> {
    fn capabilities(&self) -> Value {
        self.client.inner.link.view().capabilities.clone()
    }
}
