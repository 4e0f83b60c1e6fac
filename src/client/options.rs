//! Per-request settings: timeouts, progress, retries.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::retry::RetryPolicy;

/// A progress notification the server sent for a request (`notifications/progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// How far along the work is; increases with every notification.
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// A human-readable message, when the server sent one.
    pub message: Option<String>,
}

impl Progress {
    pub(crate) fn from_params(params: &Value) -> Option<Progress> {
        Some(Progress {
            progress: params.get("progress")?.as_f64()?,
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }
}

/// How one request is sent and waited for. Every setting left alone takes the client's default.
///
/// # Example
/// ```no_run
/// # fn demo(client: &mut mcpipe::Client) -> Result<(), mcpipe::Error> {
/// use std::time::Duration;
/// use mcpipe::RequestOptions;
/// use serde_json::json;
///
/// let mut on_progress = |p: &mcpipe::Progress| eprintln!("{} of {:?}", p.progress, p.total);
/// let options = RequestOptions::new()
///     .timeout(Duration::from_secs(2)) // reset by each progress notification
///     .max_total(Duration::from_secs(60)) // never longer than this, progress or not
///     .on_progress(&mut on_progress);
/// let params = json!({"name": "sleep", "arguments": {"ms": 5000}});
/// let result = client.request("tools/call", Some(params), options)?;
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct RequestOptions<'a> {
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_total: Option<Duration>,
    pub(crate) reset_on_progress: Option<bool>,
    pub(crate) progress: Option<&'a mut dyn FnMut(&Progress)>,
    pub(crate) idempotent: Option<bool>,
    pub(crate) retry: Option<RetryPolicy>,
}

impl fmt::Debug for RequestOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestOptions")
            .field("timeout", &self.timeout)
            .field("max_total", &self.max_total)
            .field("reset_on_progress", &self.reset_on_progress)
            .field("progress", &self.progress.is_some())
            .field("idempotent", &self.idempotent)
            .field("retry", &self.retry)
            .finish()
    }
}

impl<'a> RequestOptions<'a> {
    /// The client's defaults.
    pub fn new() -> RequestOptions<'a> {
        RequestOptions::default()
    }

    /// How long to wait for the answer. A progress notification for this request starts the
    /// wait over (unless [`reset_on_progress`](RequestOptions::reset_on_progress) is off).
    pub fn timeout(mut self, timeout: Duration) -> RequestOptions<'a> {
        self.timeout = Some(timeout);
        self
    }

    /// The hard maximum: the request fails after this long whatever progress it makes.
    pub fn max_total(mut self, max: Duration) -> RequestOptions<'a> {
        self.max_total = Some(max);
        self
    }

    /// Whether progress notifications reset the timeout (the default).
    pub fn reset_on_progress(mut self, reset: bool) -> RequestOptions<'a> {
        self.reset_on_progress = Some(reset);
        self
    }

    /// Called with each progress notification for this request. Asks the server for progress
    /// (a `progressToken` in `params._meta`).
    pub fn on_progress(mut self, callback: &'a mut dyn FnMut(&Progress)) -> RequestOptions<'a> {
        self.progress = Some(callback);
        self
    }

    /// Whether repeating the request is harmless, so a retry policy may apply. By default every
    /// method is, except `tools/call`.
    pub fn idempotent(mut self, idempotent: bool) -> RequestOptions<'a> {
        self.idempotent = Some(idempotent);
        self
    }

    /// The retry policy for this request, instead of the client's.
    pub fn retry(mut self, policy: RetryPolicy) -> RequestOptions<'a> {
        self.retry = Some(policy);
        self
    }
}
