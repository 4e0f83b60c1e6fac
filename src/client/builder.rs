//! Everything a client is configured with before it spawns its server.

use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use super::era::Era;
use super::process::Spawn;
use super::retry::RetryPolicy;
use super::{Client, SharedClient};
use crate::error::Error;
use crate::mcp::logging::LogLevel;
use crate::message::{ErrorObject, Notification};

use crate::protocol::{LATEST_MODERN_VERSION, LATEST_PROTOCOL_VERSION};

pub(crate) type StderrCallback = Box<dyn FnMut(&[u8]) + Send>;
pub(crate) type NotificationCallback = Box<dyn FnMut(Notification) + Send>;
pub(crate) type InputCallback = Box<dyn FnMut(&Value) -> Result<Value, ErrorObject> + Send>;

/// Settings that outlive one server process (a restart reuses them).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) client_name: String,
    pub(crate) client_version: String,
    pub(crate) protocol_version: String,
    /// The modern version the discover probe asks for first.
    pub(crate) modern_version: String,
    /// `None`: decide by probing; `Some`: use this era without probing.
    pub(crate) era: Option<Era>,
    pub(crate) discover_timeout: Duration,
    pub(crate) max_input_rounds: u32,
    pub(crate) roots: Option<Vec<Value>>,
    pub(crate) initialize: bool,
    pub(crate) init_timeout: Duration,
    pub(crate) timeout: Duration,
    pub(crate) max_total: Option<Duration>,
    pub(crate) heartbeat: Option<(Duration, Duration)>,
    pub(crate) retry: RetryPolicy,
    pub(crate) stdin_grace: Duration,
    pub(crate) term_grace: Duration,
    pub(crate) max_message_bytes: usize,
    pub(crate) log_bad_lines: bool,
    pub(crate) max_queued_notifications: usize,
    /// The least severe log message asked for, if any.
    pub(crate) log_level: Option<LogLevel>,
}

/// Configures and starts a [`Client`]: the server command, its environment, the handshake,
/// timeouts, the heartbeat, retries, and where stderr and notifications go.
///
/// Made by [`Client::builder`]; [`ClientBuilder::spawn`] starts the server and does the
/// handshake.
pub struct ClientBuilder {
    pub(crate) spawn: Spawn,
    pub(crate) settings: Settings,
    pub(crate) on_stderr: Option<StderrCallback>,
    pub(crate) on_notification: Option<NotificationCallback>,
    pub(crate) on_elicitation: Option<InputCallback>,
    pub(crate) on_sampling: Option<InputCallback>,
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("spawn", &self.spawn)
            .field("settings", &self.settings)
            .field("on_stderr", &self.on_stderr.is_some())
            .field("on_notification", &self.on_notification.is_some())
            .field("on_elicitation", &self.on_elicitation.is_some())
            .field("on_sampling", &self.on_sampling.is_some())
            .finish()
    }
}

/// The shortest heartbeat interval ([`ClientBuilder::heartbeat`]).
const MIN_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(10);

impl ClientBuilder {
    pub(crate) fn new(program: &OsStr) -> ClientBuilder {
        ClientBuilder {
            spawn: Spawn {
                program: program.to_owned(),
                args: Vec::new(),
                env_allowlist: None,
                envs: Vec::new(),
                cwd: None,
            },
            settings: Settings {
                client_name: String::from("mcpipe"),
                client_version: String::from(env!("CARGO_PKG_VERSION")),
                protocol_version: String::from(LATEST_PROTOCOL_VERSION),
                modern_version: String::from(LATEST_MODERN_VERSION),
                era: None,
                discover_timeout: Duration::from_secs(2),
                max_input_rounds: 10,
                roots: None,
                initialize: true,
                init_timeout: Duration::from_secs(10),
                timeout: Duration::from_secs(30),
                max_total: None,
                heartbeat: None,
                retry: RetryPolicy::none(),
                stdin_grace: Duration::from_secs(2),
                term_grace: Duration::from_secs(2),
                max_message_bytes: 64 << 20,
                log_bad_lines: true,
                max_queued_notifications: 10_000,
                log_level: None,
            },
            on_stderr: None,
            on_notification: None,
            on_elicitation: None,
            on_sampling: None,
        }
    }

    /// Adds one argument to the server command.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> ClientBuilder {
        self.spawn.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments to the server command.
    pub fn args<I, S>(mut self, args: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.spawn
            .args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable in the server's environment (on top of what is inherited or allowed).
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ClientBuilder {
        self.spawn
            .envs
            .push((name.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Passes only these variables of the client's environment to the server (plus those set
    /// with [`env`](ClientBuilder::env)), instead of all of them. Call it with an empty list
    /// to start from an empty environment.
    pub fn env_allowlist<I, S>(mut self, names: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let list = self.spawn.env_allowlist.get_or_insert_with(Vec::new);
        list.extend(names.into_iter().map(|n| n.as_ref().to_owned()));
        self
    }

    /// The server's working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> ClientBuilder {
        self.spawn.cwd = Some(dir.into());
        self
    }

    /// The `clientInfo` sent in `initialize`, and in every request's `_meta` under MCP
    /// 2026-07-28 (default: `mcpipe` and this crate's version).
    pub fn client_info(
        mut self,
        name: impl Into<String>,
        version: impl Into<String>,
    ) -> ClientBuilder {
        self.settings.client_name = name.into();
        self.settings.client_version = version.into();
        self
    }

    /// The handshake-era protocol version `initialize` asks for (default `2025-11-25`). The
    /// server may answer with another; the handshake fails unless the client supports it too.
    pub fn protocol_version(mut self, version: impl Into<String>) -> ClientBuilder {
        self.settings.protocol_version = version.into();
        self
    }

    /// The modern protocol version the `server/discover` probe asks for first (default
    /// `2026-07-28`, the only modern version the client knows). A server that does not speak
    /// it answers `-32022` with the versions it does, and the client asks again with one it
    /// knows. Another value is for a server known to speak the 2026-07-28 wire format under
    /// that name (a draft), and for tests of the `-32022` path.
    pub fn modern_protocol_version(mut self, version: impl Into<String>) -> ClientBuilder {
        self.settings.modern_version = version.into();
        self
    }

    /// Uses this era without probing, instead of deciding by `server/discover` (the
    /// default). [`Era::Legacy`] performs the `initialize` handshake exactly as a
    /// handshake-era client; [`Era::Modern`] sends `server/discover` and fails unless the
    /// server answers it as a modern server (no fallback to `initialize`).
    pub fn era(mut self, era: Era) -> ClientBuilder {
        self.settings.era = Some(era);
        self
    }

    /// How long the `server/discover` probe waits before the client decides the server is a
    /// handshake-era one (default 2 s, never longer than the
    /// [`init_timeout`](ClientBuilder::init_timeout)). A server that ignores requests it does
    /// not know costs this much at every connection; one that answers them with an error
    /// costs a round trip. Raise it for modern servers that are slow to start (an `npx`
    /// download, a cold Python import); a modern answer that arrives after it is still used
    /// when the `initialize` that follows fails.
    pub fn discover_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.settings.discover_timeout = timeout;
        self
    }

    /// How many `input_required` rounds one request may take under MCP 2026-07-28 before the
    /// client gives up with [`Error::InputUnanswered`] (default 10).
    pub fn max_input_rounds(mut self, rounds: u32) -> ClientBuilder {
        self.settings.max_input_rounds = rounds;
        self
    }

    /// Answers the server's elicitation requests: `elicitation/create` requests in the
    /// handshake era, and `elicitation/create` entries of `input_required` results under MCP
    /// 2026-07-28. The callback gets the request's params and returns its `ElicitResult`
    /// (`{"action": "accept", "content": {..}}`, or `decline` / `cancel`). Declares the
    /// `elicitation` capability (form mode).
    ///
    /// An error object is sent as the error response in the handshake era; under 2026-07-28,
    /// which has no way to send it, it ends the request with [`Error::InputUnanswered`].
    pub fn on_elicitation(
        mut self,
        callback: impl FnMut(&Value) -> Result<Value, ErrorObject> + Send + 'static,
    ) -> ClientBuilder {
        self.on_elicitation = Some(Box::new(callback));
        self
    }

    /// Answers the server's sampling requests (`sampling/createMessage`), in both eras as
    /// [`on_elicitation`](ClientBuilder::on_elicitation) does: the callback gets the params
    /// and returns a `CreateMessageResult` (`{"role", "content", "model", "stopReason"?}`).
    /// Declares the `sampling` capability.
    pub fn on_sampling(
        mut self,
        callback: impl FnMut(&Value) -> Result<Value, ErrorObject> + Send + 'static,
    ) -> ClientBuilder {
        self.on_sampling = Some(Box::new(callback));
        self
    }

    /// Adds a root the server may ask about (`roots/list`). With at least one root the client
    /// declares the `roots` capability and answers `roots/list` itself (a request in the
    /// handshake era, an `input_required` entry under 2026-07-28); without, it answers
    /// `roots/list` with `-32601` (and cannot fulfil it under 2026-07-28).
    pub fn root(mut self, uri: impl Into<String>, name: Option<&str>) -> ClientBuilder {
        let mut root = json!({ "uri": uri.into() });
        if let Some(name) = name {
            root["name"] = Value::from(name);
        }
        self.settings.roots.get_or_insert_with(Vec::new).push(root);
        self
    }

    /// Whether [`spawn`](ClientBuilder::spawn) connects as an MCP client (the default):
    /// decides the era and performs its handshake. Turn it off to speak plain JSON-RPC, or to
    /// probe a server's handshake by hand (no era then: no `_meta` is added to requests).
    pub fn initialize(mut self, initialize: bool) -> ClientBuilder {
        self.settings.initialize = initialize;
        self
    }

    /// How long the `initialize` exchange may take (default 10 s); also the bound of the
    /// `server/discover` exchange when the era is forced to [`Era::Modern`].
    pub fn init_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.settings.init_timeout = timeout;
        self
    }

    /// The default timeout of a request (default 30 s), reset by progress notifications.
    pub fn timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.settings.timeout = timeout;
        self
    }

    /// The default hard maximum of a request, whatever its progress (default none).
    pub fn max_total(mut self, max: Duration) -> ClientBuilder {
        self.settings.max_total = Some(max);
        self
    }

    /// Turns on the heartbeat: while the client waits (in a request or in
    /// [`Client::pump`]) and the server has sent nothing for `interval`, the client sends a
    /// `ping` (under MCP 2026-07-28, which has no `ping`, a `server/discover`). Any answer, even an error, counts as alive; only silence for `timeout` after a
    /// ping counts as dead, and then the client kills the server and fails what waits with
    /// [`Error::Unresponsive`]. An `interval` under 10 ms counts as 10 ms: a shorter one would
    /// keep the server busy answering pings.
    pub fn heartbeat(mut self, interval: Duration, timeout: Duration) -> ClientBuilder {
        self.settings.heartbeat = Some((interval.max(MIN_HEARTBEAT_INTERVAL), timeout));
        self
    }

    /// The default retry policy (default: [`RetryPolicy::none`]).
    pub fn retry(mut self, policy: RetryPolicy) -> ClientBuilder {
        self.settings.retry = policy;
        self
    }

    /// How long [`Client::close`] waits after closing the server's stdin, and then after
    /// SIGTERM, before the next step (default 2 s each).
    pub fn close_timeouts(
        mut self,
        after_stdin: Duration,
        after_sigterm: Duration,
    ) -> ClientBuilder {
        self.settings.stdin_grace = after_stdin;
        self.settings.term_grace = after_sigterm;
        self
    }

    /// The longest line accepted from the server, in bytes (default 64 MiB). A longer line is
    /// dropped as it arrives and counted as bad.
    pub fn max_message_bytes(mut self, bytes: usize) -> ClientBuilder {
        self.settings.max_message_bytes = bytes.max(1);
        self
    }

    /// Whether lines from the server that are not valid messages are described on stderr
    /// (rate-limited; on by default). They are counted in [`ClientStats`](crate::ClientStats)
    /// either way, and never answered. The client's other notices on stderr (a full
    /// notification queue, a server request MCP 2026-07-28 does not allow) follow this
    /// setting too.
    pub fn log_bad_lines(mut self, log: bool) -> ClientBuilder {
        self.settings.log_bad_lines = log;
        self
    }

    /// Asks the server for its log messages (`notifications/message`) of `level` and more
    /// severe, which then reach [`ClientBuilder::on_notification`] or the notification
    /// queue. Under MCP 2026-07-28 a server sends a request's log messages only when the
    /// request names a level, so every request then carries it in
    /// `params._meta["io.modelcontextprotocol/logLevel"]` (a level the caller put there
    /// stays); without this setting, such a server sends none. In the handshake era the
    /// client sends `logging/setLevel` after each handshake (a restarted server's too) to a
    /// server that declares `logging`; one that refuses it is reported on stderr and the
    /// connection goes on. Not set by default: a handshake-era server then sends what it
    /// chooses.
    pub fn log_level(mut self, level: LogLevel) -> ClientBuilder {
        self.settings.log_level = Some(level);
        self
    }

    /// Receives each line the server writes on stderr (without its newline). The last 64 KiB
    /// are kept either way, for error messages.
    pub fn on_stderr(mut self, callback: impl FnMut(&[u8]) + Send + 'static) -> ClientBuilder {
        self.on_stderr = Some(Box::new(callback));
        self
    }

    /// Receives the server's notifications (log messages, list changes, progress for requests
    /// no longer waiting) as they arrive, instead of the queue read by
    /// [`Client::take_notifications`].
    pub fn on_notification(
        mut self,
        callback: impl FnMut(Notification) + Send + 'static,
    ) -> ClientBuilder {
        self.on_notification = Some(Box::new(callback));
        self
    }

    /// Starts the server and, unless turned off, connects: decides the era (see
    /// [`Client`]) and performs its handshake.
    ///
    /// # Errors
    /// [`Error::Spawn`] when the command cannot start; for the handshake, [`Error::Timeout`]
    /// (with the server's stderr tail), [`Error::ServerExited`], [`Error::Rpc`], or
    /// [`Error::Protocol`] (an unsupported protocol version, or a modern server with no
    /// version in common). The server is shut down before the error is returned.
    pub fn spawn(self) -> Result<Client, Error> {
        Client::start(self)
    }

    /// Starts a [`SharedClient`]: a client that many threads can use at once, with many
    /// requests in flight. Its IO thread spawns the server and connects, so the server lives
    /// as long as that thread, whichever thread called this.
    ///
    /// # Errors
    /// As [`ClientBuilder::spawn`], and [`Error::Io`] when the thread cannot be started.
    pub fn spawn_shared(self) -> Result<SharedClient, Error> {
        SharedClient::spawn(self)
    }
}
