//! `mcpipe wrap [OPTIONS] -- COMMAND ARGS...`: runs any stdio MCP server behind mcpipe's loop
//! (see `mcpipe::Wrapper` and docs/wrap.md).

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use mcpipe::Wrapper;

pub(crate) const USAGE: &str = "usage: mcpipe wrap [options] -- COMMAND [ARGS...]

Runs a stdio MCP server behind mcpipe: only JSON-RPC reaches the client (other stdout lines go
to stderr), bad input is answered without reaching the server, lines reach it one at a time, a
crash answers the requests in flight and restarts it with the client's handshake, and the end
leaves none of its processes behind. Put it in a client's configuration in place of the
server's command.

options:
  --name NAME              prefix of the server's stderr lines (default: the program's name)
  --no-pacing              write lines as fast as the server's pipe takes them
  --timeout-ms N           answer a request with an error after N ms (and cancel it)
  --replay-timeout-ms N    how long a restarted server may take to answer the replayed
                           initialize before it is ended and restarted (default 10000)
  --max-restarts N         restarts allowed within the window (default 5)
  --restart-window-ms N    the window (default 60000)
  --grace-ms N             after the client is done: from closing the server's stdin to
                           SIGTERM (default 2000; SIGKILL follows 1 s later)
  -h, --help               show this help

exit status: 0 when the client finished, 1 on an error (stdout cannot be written), 2 on a
usage error, 3 when the server could not be kept running, 128+N after signal N";

fn number(value: Option<String>, flag: &str) -> Result<u64, String> {
    let value = value.ok_or_else(|| format!("{flag} needs a number"))?;
    value
        .parse()
        .map_err(|_| format!("{flag} needs a non-negative integer, got {value:?}"))
}

fn parse(args: Vec<OsString>) -> Result<Option<Wrapper>, String> {
    let mut args = args.into_iter();
    let mut name = None;
    let mut pacing = true;
    let mut timeout = None;
    let mut replay_timeout = 10_000;
    let mut max_restarts = 5;
    let mut window = 60_000;
    let mut grace = 2_000;
    let command: Vec<OsString> = loop {
        let Some(arg) = args.next() else {
            return Err("no command: put it after --".to_owned());
        };
        if arg == "--" {
            break args.by_ref().collect();
        }
        let arg = crate::text_arg(arg)?;
        // `--flag value` or `--flag=value`, as `demo` and `probe` take them.
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = || match inline.clone() {
            Some(value) => Ok(Some(value)),
            None => args.next().map(crate::text_arg).transpose(),
        };
        match flag {
            "-h" | "--help" if inline.is_none() => return Ok(None),
            "--name" => name = Some(value()?.ok_or("--name needs a name")?),
            "--no-pacing" if inline.is_none() => pacing = false,
            "--timeout-ms" => match number(value()?, "--timeout-ms")? {
                // Every request would be failed before the server could answer it.
                0 => return Err("--timeout-ms must be at least 1".to_owned()),
                ms => timeout = Some(ms),
            },
            "--replay-timeout-ms" => match number(value()?, "--replay-timeout-ms")? {
                // Every restarted server would be ended before it could answer.
                0 => return Err("--replay-timeout-ms must be at least 1".to_owned()),
                ms => replay_timeout = ms,
            },
            "--max-restarts" => {
                max_restarts = u32::try_from(number(value()?, "--max-restarts")?)
                    .map_err(|_| "--max-restarts is too large")?;
            }
            "--restart-window-ms" => window = number(value()?, "--restart-window-ms")?,
            "--grace-ms" => grace = number(value()?, "--grace-ms")?,
            _ => return Err(format!("unknown option {arg:?}")),
        }
    };
    let Some((program, rest)) = command.split_first() else {
        return Err("-- must be followed by a command".to_owned());
    };
    let mut wrapper = Wrapper::new(program, rest)
        .pacing(pacing)
        .request_timeout(timeout.map(Duration::from_millis))
        .replay_timeout(Duration::from_millis(replay_timeout))
        .restarts(max_restarts, Duration::from_millis(window))
        .shutdown_grace(Duration::from_millis(grace));
    if let Some(name) = name {
        wrapper = wrapper.name(name);
    }
    Ok(Some(wrapper))
}

/// Runs `mcpipe wrap` with the arguments after the subcommand.
pub(crate) fn run(args: Vec<OsString>) -> ExitCode {
    let wrapper = match parse(args) {
        Ok(Some(wrapper)) => wrapper,
        Ok(None) => return crate::print_out(USAGE),
        Err(why) => {
            eprintln!("mcpipe wrap: {why}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match wrapper.run() {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(e) => {
            // Never `eprintln!` once serving: stderr may be full or closed.
            mcpipe::stderr_line(&format!("mcpipe wrap: {e}"));
            ExitCode::FAILURE
        }
    }
}
