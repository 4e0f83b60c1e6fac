//! What an MCP tool, resource or prompt handler works through: cancellation, progress,
//! logging, requests to the client, child processes.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::child::ChildOutput;
use crate::error::Error;
use crate::handler::{Context, Stats};
use crate::mcp::logging::LogLevel;
use crate::mcp::server::Session;

/// The context of one MCP request: the loop's [`Context`] plus the session (negotiated
/// version, client capabilities, log level) and the request's progress token.
///
/// Everything it sends goes out at once, not when the handler returns.
#[derive(Debug)]
pub struct McpContext<'a> {
    cx: Context<'a>,
    session: &'a Session,
    progress_token: Option<Value>,
    /// The last progress value sent: the next one must be greater.
    last_progress: Option<f64>,
}

impl<'a> McpContext<'a> {
    pub(crate) fn new(
        cx: Context<'a>,
        session: &'a Session,
        progress_token: Option<Value>,
    ) -> McpContext<'a> {
        McpContext {
            cx,
            session,
            progress_token,
            last_progress: None,
        }
    }

    /// Whether the client cancelled this request (or the server must stop). Cheap: see
    /// [`Context::is_cancelled`].
    pub fn is_cancelled(&mut self) -> bool {
        self.cx.is_cancelled()
    }

    /// `Err` once the request is cancelled or the server must stop; see
    /// [`Context::checkpoint`].
    ///
    /// # Errors
    /// [`Error::Cancelled`], [`Error::Shutdown`] or [`Error::PeerGone`].
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        self.cx.checkpoint()
    }

    /// Sleeps, waking at once on cancellation or shutdown; see [`Context::sleep`].
    ///
    /// # Errors
    /// As [`McpContext::checkpoint`].
    pub fn sleep(&mut self, duration: Duration) -> Result<(), Error> {
        self.cx.sleep(duration)
    }

    /// The request's `_meta.progressToken`, when the client asked for progress.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress_token.as_ref()
    }

    /// Sends `notifications/progress` now, when the client asked for progress (otherwise does
    /// nothing). `progress` must increase from one call to the next: a value not greater than
    /// the last one sent is not sent. Nothing is sent once the request is cancelled.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<(), Error> {
        let Some(token) = &self.progress_token else {
            return Ok(());
        };
        if !progress.is_finite()
            || self.last_progress.is_some_and(|last| progress <= last)
            || self.cx.connection().interrupted()
        {
            return Ok(());
        }
        let mut params = Map::new();
        params.insert("progressToken".into(), token.clone());
        params.insert("progress".into(), json!(progress));
        if let Some(total) = total.filter(|t| t.is_finite()) {
            params.insert("total".into(), json!(total));
        }
        // `message` arrived with 2025-03-26; older clients ignore unknown fields anyway.
        if let Some(message) = message {
            params.insert("message".into(), Value::String(message.to_owned()));
        }
        self.last_progress = Some(progress);
        self.cx
            .notify("notifications/progress", Some(Value::Object(params)))
    }

    /// Sends a log message (`notifications/message`) now, when `level` is at least the level
    /// the client set with `logging/setLevel` (`info` until it sets one).
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn log(&mut self, level: LogLevel, logger: Option<&str>, data: Value) -> Result<(), Error> {
        if level < self.session.log_level {
            return Ok(());
        }
        let mut params = Map::new();
        params.insert("level".into(), Value::String(level.as_str().into()));
        if let Some(logger) = logger {
            params.insert("logger".into(), Value::String(logger.into()));
        }
        params.insert("data".into(), data);
        self.cx
            .notify("notifications/message", Some(Value::Object(params)))
    }

    /// Sends any notification now.
    ///
    /// # Errors
    /// [`Error::PeerGone`] when the client is gone.
    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), Error> {
        self.cx.notify(method, params)
    }

    /// Sends a request to the client and waits up to `timeout` for its result, reading input
    /// meanwhile (see [`Context::call`]). Requests that need a client capability
    /// (`sampling/createMessage`, `elicitation/create`, `roots/list`) are only sent when the
    /// client declared it.
    ///
    /// # Errors
    /// [`Error::Unsupported`] (nothing sent) when the client lacks the capability;
    /// [`Error::Rpc`], [`Error::Timeout`], [`Error::Cancelled`], [`Error::Shutdown`],
    /// [`Error::PeerGone`] as in [`Context::call`].
    pub fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        let needed = match method {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        };
        if let Some(capability) = needed {
            let declared = self.session.client_capabilities.get(capability);
            if declared.is_none() {
                return Err(Error::Unsupported(format!(
                    "the client did not declare the {capability:?} capability needed for {method}"
                )));
            }
            let url_mode = params
                .as_ref()
                .and_then(|p| p.get("mode"))
                .and_then(Value::as_str)
                == Some("url");
            if method == "elicitation/create"
                && url_mode
                && declared.and_then(|d| d.get("url")).is_none()
            {
                return Err(Error::Unsupported(
                    "the client did not declare URL-mode elicitation".to_owned(),
                ));
            }
        }
        self.cx.call(method, params, timeout)
    }

    /// Asks the client's model for a completion (`sampling/createMessage`); needs the client's
    /// `sampling` capability.
    ///
    /// # Errors
    /// As [`McpContext::request`].
    pub fn create_message(&mut self, params: Value, timeout: Duration) -> Result<Value, Error> {
        self.request("sampling/createMessage", Some(params), timeout)
    }

    /// Asks the user for input (`elicitation/create`); needs the client's `elicitation`
    /// capability.
    ///
    /// # Errors
    /// As [`McpContext::request`].
    pub fn elicit(&mut self, params: Value, timeout: Duration) -> Result<Value, Error> {
        self.request("elicitation/create", Some(params), timeout)
    }

    /// Asks the client for its roots (`roots/list`); needs the client's `roots` capability.
    ///
    /// # Errors
    /// As [`McpContext::request`].
    pub fn list_roots(&mut self, timeout: Duration) -> Result<Value, Error> {
        self.request("roots/list", None, timeout)
    }

    /// Runs a command, cancellably, leaving no process behind; see [`Context::run_command`].
    ///
    /// # Errors
    /// As [`Context::run_command`].
    pub fn run_command(
        &mut self,
        command: Command,
        max_output: usize,
        timeout: Option<Duration>,
    ) -> Result<ChildOutput, Error> {
        self.cx.run_command(command, max_output, timeout)
    }

    /// The negotiated protocol version.
    pub fn protocol_version(&self) -> &str {
        self.session.version.as_deref().unwrap_or_default()
    }

    /// The capabilities the client declared in `initialize`.
    pub fn client_capabilities(&self) -> &Value {
        &self.session.client_capabilities
    }

    /// The client's `clientInfo` from `initialize`.
    pub fn client_info(&self) -> &Value {
        &self.session.client_info
    }

    /// The loop's counters.
    pub fn stats(&self) -> &Stats {
        self.cx.stats()
    }

    /// The loop's context, for anything not wrapped here.
    pub fn context(&mut self) -> &mut Context<'a> {
        &mut self.cx
    }
}
