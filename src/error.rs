//! What a Rust caller gets back: why a loop ended, or what went wrong.

use std::fmt;
use std::io;

/// Why [`Server::serve`](crate::Server::serve) returned normally.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The input reached end of file: every message was handled and every response written.
    Eof,
    /// SIGTERM, SIGINT or SIGHUP arrived (the signal number).
    Signal(i32),
    /// The peer closed our output (EPIPE, or its read end hung up): nobody is listening.
    PeerGone,
    /// The parent process went away (the orphan check is on).
    Orphaned,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Eof => write!(f, "the input reached end of file"),
            Outcome::Signal(n) => write!(f, "signal {n} arrived"),
            Outcome::PeerGone => write!(f, "the peer closed the output"),
            Outcome::Orphaned => write!(f, "the parent process went away"),
        }
    }
}

/// An error returned to the Rust caller (never sent to the peer: that is
/// [`ErrorObject`](crate::ErrorObject)).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed while setting up, polling, reading or writing.
    Io {
        /// What the crate was doing, as a phrase ("polling for events").
        doing: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The peer is gone: a message could not be sent because the output is closed.
    PeerGone,
    /// The peer cancelled the request being handled (see [`Context::checkpoint`]).
    ///
    /// [`Context::checkpoint`]: crate::Context::checkpoint
    Cancelled,
    /// A shutdown signal (SIGTERM, SIGINT, SIGHUP) arrived while a handler was working: it should
    /// stop, and the loop ends once it returns.
    Shutdown,
    /// A request sent to the peer got no response before its deadline.
    Timeout,
    /// The peer answered a request we sent with an error.
    Remote(crate::ErrorObject),
    /// The peer did not declare the capability a request needs, so it was not sent.
    Unsupported(String),
    /// The client must answer a question first (MCP 2026-07-28, which has no server-to-client
    /// requests): the MCP layer ends the call with an `input_required` result naming the
    /// missing inputs, and runs the handler again when the client retries with the answers.
    /// Return it with `?`; see [`McpContext::input`](crate::McpContext::input).
    InputRequired,
    /// A child process could not be started or waited for.
    Child {
        /// The program that was run.
        program: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(doing: &'static str, source: io::Error) -> Error {
        Error::Io { doing, source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { doing, source } => write!(f, "i/o error while {doing}: {source}"),
            Error::PeerGone => write!(f, "the peer closed the connection"),
            Error::Cancelled => write!(f, "the request was cancelled"),
            Error::Shutdown => write!(f, "the server is shutting down"),
            Error::Timeout => write!(f, "no response before the deadline"),
            Error::Remote(e) => write!(f, "the peer answered with an error: {e}"),
            Error::Unsupported(why) => write!(f, "not supported by the peer: {why}"),
            Error::InputRequired => write!(f, "the client's input is needed first"),
            Error::Child { program, source } => write!(f, "running {program}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Child { source, .. } => Some(source),
            Error::Remote(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Error> for crate::ErrorObject {
    /// An error met while handling a request, as the peer should see it: `-32603` with the
    /// message. (It lets an MCP prompt or resource handler write `cx.input(..)?`; the layer
    /// answers a pending input with an `input_required` result, not with this error.)
    fn from(error: Error) -> crate::ErrorObject {
        crate::ErrorObject::internal(format!("internal error: {error}"))
    }
}
