//! Counters of what a loop has seen.

/// Counters of what a loop has seen, readable from a handler through [`Context::stats`](crate::Context::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Requests handed to the handler.
    pub requests: u64,
    /// Notifications handed to the handler.
    pub notifications: u64,
    /// Responses handed to the handler.
    pub responses: u64,
    /// Lines that were not valid messages (each answered with an error), oversize ones included.
    pub bad_messages: u64,
    /// Lines longer than the message limit.
    pub oversize_messages: u64,
    /// Handler calls that panicked.
    pub handler_panics: u64,
    /// Times the idle hook ran.
    pub idle_hooks: u64,
    /// Requests the peer cancelled: dropped before they started, or answered by nobody.
    pub cancelled: u64,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
    /// Requests whose answer was handed to a [`Responder`](crate::Responder) (answered later,
    /// from any thread).
    pub answered_later: u64,
    /// Times the loop stopped reading input because the read-ahead queue held its byte limit
    /// ([`Server::max_read_ahead_bytes`](crate::Server::max_read_ahead_bytes)).
    pub read_ahead_full: u64,
    /// Lines of this process's diagnostics that stderr could not take (full, or not being
    /// read) and that were dropped instead of blocking the loop.
    pub stderr_lines_dropped: u64,
    /// Times a pipe's input (bytes or end of file) was found only by the read the loop makes
    /// after a quiet wait that followed a short read, each up to 10 ms late. Stays 0 unless
    /// the writer sends packets (`O_DIRECT`), where a short read does not empty the pipe.
    pub late_input: u64,
}
