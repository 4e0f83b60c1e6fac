//! Many requests in flight on one connection: [`SharedClient`], a `Send + Sync` handle whose IO
//! thread owns the [`Client`], and [`Call`], one request started now and waited for later.
//!
//! Callers never touch the pipes: they send commands over a channel and wake the IO thread
//! (a `mio::Waker` in the server's poll); answers and progress come back on a channel per
//! request. So a slow call never delays another's answer, each request keeps its own deadline
//! (enforced on the IO thread, which sends `notifications/cancelled` when it passes), and
//! progress callbacks run on the thread that waits.

use std::collections::VecDeque;
use std::fmt;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::Waker;
use serde_json::Value;

use super::era::{Asked, Era};
use super::exchange::{self, Exchange};
use super::options::{Progress, RequestOptions};
use super::process::{Shutdown, ShutdownStage};
use super::retry::{self, RetryPolicy};
use super::{
    dead_error, server_has_exited, Client, ClientBuilder, ClientStats, Dead, Timing, Until,
};
use crate::error::Error;
use crate::message::{Notification, RequestId};

/// A request of the shared client, waiting on the IO thread for its answer.
#[derive(Debug)]
pub(super) struct Detached {
    /// The caller's name for it (ids are given out on the IO thread).
    key: u64,
    method: String,
    /// The progress token sent with it, if any.
    pub(super) token: Option<Value>,
    timing: Timing,
    events: Sender<Event>,
}

impl Detached {
    /// Hands the outcome to the waiting caller (gone already: nothing to do).
    pub(super) fn answer(self, outcome: Result<Value, Error>) {
        let _ = self.events.send(Event::Done(outcome));
    }

    /// A progress notification for this request: starts its timeout over and passes it on.
    pub(super) fn progress(&mut self, params: &Value, now: Instant) {
        self.timing.progressed(now);
        if let Some(progress) = Progress::from_params(params) {
            let _ = self.events.send(Event::Progress(progress));
        }
    }
}

/// What the IO thread tells the caller of one request.
#[derive(Debug)]
enum Event {
    Progress(Progress),
    /// The last event of a request.
    Done(Result<Value, Error>),
}

/// The parts of [`RequestOptions`] the IO thread needs (the progress callback stays with the
/// caller).
#[derive(Debug, Clone, Copy)]
struct Plan {
    timeout: Option<Duration>,
    max_total: Option<Duration>,
    reset_on_progress: Option<bool>,
    wants_progress: bool,
}

impl Plan {
    fn of(options: &RequestOptions<'_>) -> Plan {
        Plan {
            timeout: options.timeout,
            max_total: options.max_total,
            reset_on_progress: options.reset_on_progress,
            wants_progress: options.progress.is_some(),
        }
    }

    fn options(self) -> RequestOptions<'static> {
        RequestOptions {
            timeout: self.timeout,
            max_total: self.max_total,
            reset_on_progress: self.reset_on_progress,
            ..RequestOptions::default()
        }
    }
}

/// What a caller asks of the IO thread.
#[derive(Debug)]
enum Command {
    Start {
        key: u64,
        method: String,
        params: Option<Value>,
        plan: Plan,
        /// An earlier attempt failed: restart a dead server first.
        retrying: bool,
        events: Sender<Event>,
    },
    Cancel {
        key: u64,
    },
    Notify {
        method: String,
        params: Option<Value>,
        reply: Sender<Result<(), Error>>,
    },
    Fulfil {
        input: Asked,
        reply: Sender<Result<Value, String>>,
    },
    /// `Some(grace)`: terminate without the end-of-input step.
    Close {
        terminate: Option<Duration>,
        reply: Sender<Shutdown>,
    },
}

/// What callers may read about the connection, refreshed by the IO thread.
#[derive(Debug, Clone, Default)]
struct View {
    stats: ClientStats,
    era: Option<Era>,
    protocol_version: String,
    pid: Option<u32>,
    initialize_result: Value,
    discover_result: Value,
}

/// What the handles, the calls and the IO thread share.
#[derive(Debug)]
struct LinkState {
    commands: Sender<Command>,
    /// Wakes the IO thread's poll; replaced when the server is restarted.
    waker: Mutex<Option<Arc<Waker>>>,
    view: Mutex<View>,
    notifications: Mutex<VecDeque<Notification>>,
    notified: Condvar,
    next_key: AtomicU64,
}

/// The callers' end of the IO thread.
#[derive(Debug, Clone)]
struct Link(Arc<LinkState>);

impl Link {
    /// Queues a command and wakes the IO thread. `Err(Closed)` once the thread has ended.
    fn send(&self, command: Command) -> Result<(), Error> {
        self.0.commands.send(command).map_err(|_| Error::Closed)?;
        if let Some(waker) = lock(&self.0.waker).as_ref() {
            // A failed wake leaves the command queued; the thread's next wake-up sees it.
            let _ = waker.wake();
        }
        Ok(())
    }

    fn view(&self) -> MutexGuard<'_, View> {
        lock(&self.0.view)
    }
}

/// A mutex that a panicking holder did not make unusable: every value guarded here is valid
/// at every step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

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
/// the IO thread.
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

impl Drop for Inner {
    fn drop(&mut self) {
        close(self, None);
    }
}

impl SharedClient {
    /// Starts the IO thread, which spawns the server (so the server's lifetime is tied to
    /// that thread, see `PR_SET_PDEATHSIG` in docs/client.md) and connects.
    pub(super) fn spawn(builder: ClientBuilder) -> Result<SharedClient, Error> {
        let retry = builder.settings.retry.clone();
        let max_input_rounds = builder.settings.max_input_rounds;
        SharedClient::run(retry, max_input_rounds, move || Client::start(builder))
    }

    /// Starts the IO thread, hands it the client `start` makes, and waits until it serves.
    fn run(
        retry: RetryPolicy,
        max_input_rounds: u32,
        start: impl FnOnce() -> Result<Client, Error> + Send + 'static,
    ) -> Result<SharedClient, Error> {
        let (commands, receiver) = mpsc::channel();
        let link = Link(Arc::new(LinkState {
            commands,
            waker: Mutex::new(None),
            view: Mutex::new(View::default()),
            notifications: Mutex::new(VecDeque::new()),
            notified: Condvar::new(),
            next_key: AtomicU64::new(1),
        }));
        let (ready, started) = mpsc::channel();
        let thread_link = link.clone();
        let thread = std::thread::Builder::new()
            .name(String::from("mcpipe-client"))
            .spawn(move || {
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
                client.serve(&receiver, &thread_link);
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
    /// ends): prefer [`ClientBuilder::spawn_shared`], which spawns it on the IO thread.
    ///
    /// # Errors
    /// [`Error::Io`] when the thread cannot be started (the server is then shut down).
    pub fn into_shared(self) -> Result<SharedClient, Error> {
        let retry = self.settings.retry.clone();
        let max_input_rounds = self.settings.max_input_rounds;
        SharedClient::run(retry, max_input_rounds, move || Ok(self))
    }

    fn view(&self) -> View {
        View {
            stats: self.stats.clone(),
            era: self.era,
            protocol_version: self.protocol_version.clone(),
            pid: self.pid(),
            initialize_result: self.initialize_result.clone(),
            discover_result: self.discover_result.clone(),
        }
    }

    /// The IO thread: obeys commands, routes answers and progress to the calls waiting for
    /// them, expires their deadlines, and sleeps in the server's poll between events.
    fn serve(mut self, commands: &Receiver<Command>, link: &Link) {
        let mut waker_pid = self.pid();
        loop {
            loop {
                match commands.try_recv() {
                    Ok(command) => {
                        if self.obey(command, link).is_break() {
                            return;
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.stop_serving(None, link),
                }
            }
            if self.pid() != waker_pid {
                // A new server process (restarted for a retry): wake its poll from now on,
                // and look at the queue again, since a command may have woken the old one.
                waker_pid = self.pid();
                *lock(&link.0.waker) = self.process.as_ref().map(|p| p.waker());
                *link.view() = self.view();
                continue;
            }
            self.handle_buffered(&mut None);
            self.publish(link);
            if self.check_usable().is_err() {
                // Closed or dead: nothing to wait for but the next command.
                self.fail_detached();
                self.publish(link);
                match commands.recv() {
                    Ok(command) => {
                        if self.obey(command, link).is_break() {
                            return;
                        }
                    }
                    Err(_) => return self.stop_serving(None, link),
                }
                continue;
            }
            let Some(process) = self.process.as_mut() else {
                continue;
            };
            process.flush();
            if server_has_exited(process) {
                // Takes what it wrote before it went (routed to the calls), then marks it dead.
                let _ = self.settle_death(&mut None, Until::Deadline);
                continue;
            }
            let Ok(mut wake) = self.heartbeat_tick() else {
                continue;
            };
            let now = Instant::now();
            self.expire_detached(now);
            for call in self.detached.values() {
                let due = call.timing.due();
                wake = Some(wake.map_or(due, |w| w.min(due)));
            }
            let Client {
                process, on_stderr, ..
            } = &mut self;
            let Some(process) = process.as_mut() else {
                continue;
            };
            let mut sink = |line: &[u8]| {
                if let Some(callback) = on_stderr {
                    callback(line);
                }
            };
            if process.read_available(&mut sink) || process.may_have_input() {
                continue;
            }
            // THE ONE PLACE THE IO THREAD SLEEPS. The command queue was empty (a command sent
            // since then has woken the poll through the waker), every buffered line has been
            // handled, and both pipes said `WouldBlock`, so sleeping cannot leave an answer
            // unread or a request unsent. The sleep ends at the first deadline.
            let timeout = wake.map(|d| d.saturating_duration_since(Instant::now()));
            if process.wait(timeout).is_err() {
                // Polling itself failed: this connection cannot go on.
                process.kill();
                self.dead = Some(Dead::Exited {
                    status: process.check_exit(),
                    stderr_tail: process.stderr_tail(),
                });
            }
        }
    }

    /// Carries out one command; `Break` once the client is closed.
    fn obey(&mut self, command: Command, link: &Link) -> ControlFlow<()> {
        match command {
            Command::Start {
                key,
                method,
                params,
                plan,
                retrying,
                events,
            } => {
                let usable = self
                    .restart_if_dead(retrying)
                    .and_then(|()| self.check_usable());
                if let Err(e) = usable {
                    let _ = events.send(Event::Done(Err(e)));
                    return ControlFlow::Continue(());
                }
                let (id, token) = self.send_request(&method, params, plan.wants_progress);
                let timing = self.timing(&plan.options(), Instant::now());
                let call = Detached {
                    key,
                    method,
                    token,
                    timing,
                    events,
                };
                self.detached.insert(id, call);
            }
            Command::Cancel { key } => {
                let id = self
                    .detached
                    .iter()
                    .find(|(_, call)| call.key == key)
                    .map(|(id, _)| id.clone());
                if let Some(id) = id {
                    if let Some(call) = self.detached.remove(&id) {
                        self.give_up(id, &call.method, "cancelled by the client");
                        call.answer(Err(Error::Cancelled));
                    }
                }
            }
            Command::Notify {
                method,
                params,
                reply,
            } => {
                let _ = reply.send(self.notify(&method, params));
            }
            Command::Fulfil { input, reply } => {
                let _ = reply.send(self.fulfil(&input));
            }
            Command::Close { terminate, reply } => {
                self.stop_serving(Some((terminate, reply)), link);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }

    /// Fails every waiting call with [`Error::Closed`] first, then shuts the server down.
    fn stop_serving(&mut self, close: Option<(Option<Duration>, Sender<Shutdown>)>, link: &Link) {
        self.closed = true;
        self.fail_detached();
        let shutdown = match close.as_ref().and_then(|(terminate, _)| *terminate) {
            Some(grace) => self.terminate(grace),
            None => self.close(),
        };
        let mut view = link.view();
        view.stats = self.stats.clone();
        view.pid = None;
        drop(view);
        if let Some((_, reply)) = close {
            let _ = reply.send(shutdown);
        }
    }

    /// Times out every call whose deadline has passed: `notifications/cancelled`, late answer
    /// dropped, [`Error::Timeout`] to the caller.
    fn expire_detached(&mut self, now: Instant) {
        let due: Vec<RequestId> = self
            .detached
            .iter()
            .filter(|(_, call)| call.timing.due() <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let Some(call) = self.detached.remove(&id) else {
                continue;
            };
            let elapsed = call.timing.started.elapsed();
            let reason = format!("timed out after {} ms", elapsed.as_millis());
            self.give_up(id, &call.method, &reason);
            let method = call.method.clone();
            call.answer(Err(Error::Timeout { method, elapsed }));
        }
    }

    /// Fails every waiting call: the server died, or the client is closing.
    fn fail_detached(&mut self) {
        for (_, call) in self.detached.drain() {
            let error = match (&self.dead, self.closed) {
                (Some(dead), false) => dead_error(dead),
                _ => Error::Closed,
            };
            call.answer(Err(error));
        }
    }

    /// Publishes counters and queued notifications to the handles.
    fn publish(&mut self, link: &Link) {
        if !self.notifications.is_empty() {
            let mut queue = lock(&link.0.notifications);
            for notification in self.notifications.drain(..) {
                if queue.len() >= self.settings.max_queued_notifications {
                    queue.pop_front();
                    self.stats.notifications_dropped += 1;
                }
                queue.push_back(notification);
            }
            link.0.notified.notify_all();
        }
        let mut view = link.view();
        if view.stats != self.stats {
            view.stats = self.stats.clone();
        }
    }
}

/// Sends `Close` and joins the IO thread; later calls return the first one's result.
fn close(inner: &Inner, terminate: Option<Duration>) -> Shutdown {
    let mut shutdown = lock(&inner.shutdown);
    if let Some(done) = *shutdown {
        return done;
    }
    inner.closed.store(true, Ordering::SeqCst);
    let (reply, answer) = mpsc::channel();
    let sent = inner.link.send(Command::Close { terminate, reply }).is_ok();
    // The thread ends after replying; if it ended before (a callback panicked), the server
    // was shut down as the client was dropped.
    let done = match sent.then(|| answer.recv().ok()).flatten() {
        Some(done) => done,
        None => Shutdown {
            status: None,
            stage: ShutdownStage::AlreadyExited,
            elapsed: Duration::ZERO,
        },
    };
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
        let (events, receiver) = mpsc::channel();
        link.send(Command::Start {
            key,
            method: method.to_owned(),
            params,
            plan,
            retrying,
            events,
        })?;
        Ok(Call {
            key,
            events: receiver,
            link: link.clone(),
            finished: false,
        })
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
            seed: retry::seed(),
        };
        exchange::request(&mut caller, method, params, &mut options)
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
        exchange::list_all(&mut self.caller(), "tools/list", "tools")
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
        exchange::list_all(&mut self.caller(), "resources/list", "resources")
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
        exchange::list_all(&mut self.caller(), "prompts/list", "prompts")
    }

    /// As [`Client::get_prompt`].
    ///
    /// # Errors
    /// As [`Client::request`].
    pub fn get_prompt(&self, name: &str, arguments: Value) -> Result<Value, Error> {
        let params = exchange::named_params(name, arguments);
        self.request("prompts/get", Some(params), RequestOptions::new())
    }

    /// The next notification from the server, waiting up to `timeout` for one (none arrive
    /// here when a notification callback is set).
    pub fn next_notification(&self, timeout: Duration) -> Option<Notification> {
        let state = &self.inner.link.0;
        let end = Instant::now() + timeout;
        let mut queue = lock(&state.notifications);
        loop {
            if let Some(n) = queue.pop_front() {
                return Some(n);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() || self.inner.closed.load(Ordering::SeqCst) {
                return None;
            }
            queue = state
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
            seed: retry::seed(),
        }
    }
}

/// One request in flight on a [`SharedClient`]: wait for its answer, or cancel it.
///
/// Dropping a call that has not finished cancels it.
#[derive(Debug)]
pub struct Call {
    key: u64,
    events: Receiver<Event>,
    link: Link,
    finished: bool,
}

impl Call {
    /// Waits for the answer. Ends by the request's deadline at the latest (then
    /// [`Error::Timeout`]); [`Error::Cancelled`] when it was cancelled first; the server's
    /// error as [`Error::Rpc`]; [`Error::Closed`] when the client was closed.
    ///
    /// # Errors
    /// As above, and [`Error::ServerExited`] / [`Error::Unresponsive`] when the server died.
    pub fn wait(self) -> Result<Value, Error> {
        self.wait_with_progress(&mut |_| {})
    }

    /// [`wait`](Call::wait), calling `on_progress` (on this thread) with each progress
    /// notification the server sends for the request.
    ///
    /// # Errors
    /// As [`Call::wait`].
    pub fn wait_with_progress(
        mut self,
        on_progress: &mut dyn FnMut(&Progress),
    ) -> Result<Value, Error> {
        loop {
            match self.events.recv() {
                Ok(Event::Progress(progress)) => on_progress(&progress),
                Ok(Event::Done(outcome)) => {
                    self.finished = true;
                    return outcome;
                }
                // The IO thread dropped the request without an answer: it is gone.
                Err(_) => {
                    self.finished = true;
                    return Err(Error::Closed);
                }
            }
        }
    }

    /// Cancels the request: the server is sent `notifications/cancelled`, a late answer is
    /// dropped, and the wait ends with [`Error::Cancelled`] (unless the answer came first).
    pub fn cancel(&self) {
        self.canceller().cancel();
    }

    /// A handle that cancels this request from any thread (while another waits on it).
    pub fn canceller(&self) -> Canceller {
        Canceller {
            key: self.key,
            link: self.link.clone(),
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.finished {
            // Nobody will wait for it: stop it (a closed client has nothing to stop).
            let _ = self.link.send(Command::Cancel { key: self.key });
        }
    }
}

/// Cancels one [`Call`] from any thread.
#[derive(Debug, Clone)]
pub struct Canceller {
    key: u64,
    link: Link,
}

impl Canceller {
    /// As [`Call::cancel`]; harmless once the call has ended.
    pub fn cancel(&self) {
        let _ = self.link.send(Command::Cancel { key: self.key });
    }
}

/// A [`SharedClient`] seen by the layers above one attempt.
struct Caller<'a> {
    client: &'a SharedClient,
    seed: u64,
}

impl fmt::Debug for Caller<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Caller").finish_non_exhaustive()
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
        &mut self.seed
    }
}
