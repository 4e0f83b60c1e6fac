//! What a Rust caller gets back: why a loop ended, or what went wrong.

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use crate::message::{ErrorCode, ErrorObject};
use crate::protocol::RESOURCE_NOT_FOUND;

/// Why [`Server::serve`](crate::Server::serve) returned normally.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The input reached end of file: every message was handled and every response written.
    Eof,
    /// SIGTERM, SIGINT or SIGHUP arrived (the signal number).
    Signal(i32),
    /// The peer closed our output (EPIPE, or its read end hung up): nobody is listening.
    /// (Another write error, such as a full disk, ends the loop the same way, and the handler's
    /// [`on_shutdown`](crate::Handler::on_shutdown) is told `PeerGone`; but
    /// [`Server::serve`](crate::Server::serve) then returns [`Error::Io`].)
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
    /// A system call failed while setting up, polling, reading or writing (for the loop,
    /// `doing` "writing the output": the output refused a write for a reason other than the
    /// peer going away, such as a full disk).
    Io {
        /// What the crate was doing, as a phrase ("polling for events").
        doing: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The peer is gone: a message could not be sent because the output is closed.
    PeerGone,
    /// The peer cancelled the request being handled (see [`Context::checkpoint`]); in a
    /// client, the caller cancelled the request it waits for ([`Call::cancel`]).
    ///
    /// [`Context::checkpoint`]: crate::Context::checkpoint
    /// [`Call::cancel`]: crate::Call::cancel
    Cancelled,
    /// The handler that took this request's [`Responder`](crate::Responder) panicked after
    /// handing it away: the loop answered the request with `-32603` itself, so the holder's
    /// answer will be dropped. It should stop (the peer did not cancel anything).
    HandlerPanicked,
    /// The loop is ending while a handler works: a shutdown signal (SIGTERM, SIGINT, SIGHUP)
    /// arrived, or the input ended and the handler outlasted `Server::shutdown_grace`. It
    /// should stop; the loop ends once it returns.
    Shutdown,
    /// The peer's input ended (end of file) while a handler waited for the peer to answer a
    /// request ([`Context::call`](crate::Context::call)): no answer can come.
    InputEnded,
    /// The peer did not declare the capability a request needs, so it was not sent.
    Unsupported(String),
    /// The client must answer a question first (MCP 2026-07-28, which has no server-to-client
    /// requests): the MCP layer ends the call with an `input_required` result naming the
    /// missing inputs, and runs the handler again when the client retries with the answers.
    /// Return it with `?`; see [`McpContext::input`](crate::McpContext::input).
    InputRequired,
    /// A program could not be started (the client's server, a handler's child process) or
    /// waited for.
    Spawn {
        /// The program that was to run.
        program: String,
        /// Why it could not start.
        source: io::Error,
    },
    /// A request got no answer in time: its timeout passed with no progress to reset it, or its
    /// hard maximum passed. The sender sent `notifications/cancelled` for it (except for
    /// `initialize`, which must not be cancelled) and drops any late answer.
    Timeout {
        /// The method of the request.
        method: String,
        /// How long the client waited: for a connection step (`stderr_tail` is `Some`), the
        /// whole step, a `server/discover` probe before `initialize` included.
        elapsed: Duration,
        /// When a client's connection step (`initialize`, or a `server/discover` that had to
        /// succeed) timed out: the last lines the server wrote on stderr meanwhile (at most
        /// 64 KiB), often the reason it never answered ("missing API key"). The client shuts
        /// such a server down, so this is the one place left to read them. `None` for every
        /// other timeout ([`Client::stderr_tail`](crate::Client::stderr_tail) has them).
        stderr_tail: Option<String>,
    },
    /// The server exited, or closed its stdout, while the client needed it. Every request
    /// waiting at that moment fails at once with this error.
    ServerExited {
        /// How the server ended; `None` when it closed its stdout but was still running.
        status: Option<ExitStatus>,
        /// The last lines the server wrote on stderr (at most 64 KiB).
        stderr_tail: String,
    },
    /// The heartbeat found the server silent: no answer to a `ping`, and nothing else either,
    /// for longer than the heartbeat allows. The client killed it.
    Unresponsive {
        /// How long the server had been silent.
        silence: Duration,
    },
    /// The server broke the protocol: an unusable `initialize` result, an unsupported protocol
    /// version, a malformed result.
    Protocol {
        /// What is wrong, as a phrase.
        reason: String,
        /// The offending message, truncated (may be empty).
        line: String,
    },
    /// The peer answered a request with a JSON-RPC error object.
    Rpc(ErrorObject),
    /// A retry policy ran out of attempts.
    RetriesExhausted {
        /// How many attempts were made.
        attempts: u32,
        /// The error of the last attempt.
        last: Box<Error>,
    },
    /// The client was closed, or its server could not be restarted: no more requests.
    Closed,
    /// A callback of a [`SharedClient`](crate::SharedClient) (elicitation, sampling, roots,
    /// notification, stderr) panicked on the client's IO thread. The client shut its server
    /// down and is closed: every call waiting then, and every later one, fails with this
    /// error. The text is the panic's message and location.
    CallbackPanicked(String),
    /// A request under MCP 2026-07-28 ended with an `input_required` result that the client
    /// did not fulfil: it asks for an input the client has no callback for, a callback refused,
    /// the result was malformed, or the request took more rounds than allowed. `result` is
    /// that result as received (`inputRequests`, `requestState`): the caller can fulfil it
    /// and go on with [`Client::continue_request`](crate::Client::continue_request).
    InputUnanswered {
        /// The method of the request.
        method: String,
        /// Why the client did not go on, as a phrase.
        reason: String,
        /// The last `input_required` result.
        result: serde_json::Value,
    },
}

/// How [`Error::Protocol`]'s reason opens for an answer the client could not read.
pub(crate) const UNREADABLE_ANSWER: &str = "the server's answer could not be read: ";

impl Error {
    /// Why the server's answer to a request could not be read (valid JSON past serde_json's
    /// limits, or broken after its id), when that is what this error says.
    pub fn unreadable_answer(&self) -> Option<&str> {
        match self {
            Error::Protocol { reason, .. } => reason.strip_prefix(UNREADABLE_ANSWER),
            _ => None,
        }
    }

    pub(crate) fn io(doing: &'static str, source: io::Error) -> Error {
        Error::Io { doing, source }
    }

    /// Whether this is a server saying that a resource does not exist: an [`Error::Rpc`]
    /// with `-32002` (the handshake era's code) or `-32602` (MCP 2026-07-28's, which is also
    /// its code for other invalid params, a malformed URI among them).
    pub fn is_resource_not_found(&self) -> bool {
        matches!(self, Error::Rpc(e) if e.code == RESOURCE_NOT_FOUND || e.code == ErrorCode::INVALID_PARAMS)
    }

    /// Whether trying again may help: a timeout, an I/O failure, a server that exited or went
    /// silent. Never an RPC or protocol error (the server would answer the same again).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Io { .. }
                | Error::PeerGone
                | Error::Timeout { .. }
                | Error::ServerExited { .. }
                | Error::Unresponsive { .. }
        )
    }
}

/// The end of `text`, at most `max` bytes, cut at a character boundary.
fn tail_of(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The end of a server's stderr tail, as the end of an error's sentence.
fn write_stderr_tail(f: &mut fmt::Formatter<'_>, stderr_tail: &str) -> fmt::Result {
    let tail = stderr_tail.trim_end();
    if tail.is_empty() {
        write!(f, "; its stderr was empty")
    } else {
        // The whole tail is in the field; a sentence shows its end.
        write!(f, "; its stderr ended with: {}", tail_of(tail, 1000))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { doing, source } => write!(f, "i/o error while {doing}: {source}"),
            Error::PeerGone => write!(f, "the peer closed the connection"),
            Error::Cancelled => write!(f, "the request was cancelled"),
            Error::HandlerPanicked => write!(
                f,
                "the request's handler panicked after handing its responder away, \
                 and the loop answered the request with an error"
            ),
            Error::Shutdown => write!(f, "the server is shutting down"),
            Error::InputEnded => write!(f, "the peer ended its input: no answer can come"),
            Error::Unsupported(why) => write!(f, "not supported by the peer: {why}"),
            Error::InputRequired => write!(f, "the client's input is needed first"),
            Error::Spawn { program, source } => {
                write!(f, "could not run {program:?}: {source}")
            }
            Error::Timeout {
                method,
                elapsed,
                stderr_tail,
            } => {
                write!(
                    f,
                    "the peer did not answer {method} within {:.3} s",
                    elapsed.as_secs_f64()
                )?;
                if stderr_tail.is_some() {
                    // The connection step: the time counts from its start, not from this
                    // request's (a probe may have waited first).
                    f.write_str(" of connecting")?;
                }
                match stderr_tail {
                    Some(tail) => write_stderr_tail(f, tail),
                    None => Ok(()),
                }
            }
            Error::ServerExited {
                status,
                stderr_tail,
            } => {
                match status {
                    Some(status) => write!(f, "the server exited ({status})")?,
                    None => write!(f, "the server closed its stdout")?,
                }
                write_stderr_tail(f, stderr_tail)
            }
            Error::Unresponsive { silence } => write!(
                f,
                "the server was silent for {:.3} s, not even answering a ping",
                silence.as_secs_f64()
            ),
            Error::Protocol { reason, line } if line.is_empty() => {
                write!(f, "protocol error: {reason}")
            }
            Error::Protocol { reason, line } => write!(f, "protocol error: {reason}: {line}"),
            Error::Rpc(error) => write!(f, "the peer answered with an error: {error}"),
            Error::RetriesExhausted { attempts, last } => {
                write!(f, "gave up after {attempts} attempts: {last}")
            }
            Error::Closed => write!(f, "the client is closed"),
            Error::CallbackPanicked(panic) => write!(
                f,
                "the client is closed: one of its callbacks panicked ({panic})"
            ),
            Error::InputUnanswered { method, reason, .. } => {
                write!(
                    f,
                    "{method} needs input that the client did not give: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Spawn { source, .. } => Some(source),
            Error::Rpc(error) => Some(error),
            Error::RetriesExhausted { last, .. } => Some(&**last),
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
