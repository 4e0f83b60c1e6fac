#!/usr/bin/env python3
"""Interop check: drive a stdio MCP server with the official Python SDK client.

Run it with the interpreter of the venv that scripts/setup-interop.sh makes:

    interop/.venv/bin/python interop/py_client.py -- ./target/debug/mcpipe demo
    interop/.venv/bin/python interop/py_client.py --mode third-party -- interop/.venv/bin/mcp-server-time

Modes:
  demo         (default) checks the contract of mcpipe's demo server: tools echo, fail,
               sleep (with progress), stats, panic; resource mcpipe://demo/readme; a
               resource template; prompt greet.
  third-party  a generic check for any server: handshake, list tools, call one tool, close.
  inputs       against `mcpipe demo --conformance`: tools and a prompt that need input from the
               client (elicitation, sampling, roots; one input, several at once, several
               rounds). The SDK's callbacks answer them: as requests from the server in the
               handshake era (--connect legacy), as `input_required` results it resolves and
               retries under 2026-07-28 (the default --connect auto negotiates it).

Output: one line per check, `ok <name>` or `FAIL <name>: <reason>`, then a final line
`N passed, M failed`. The exit status is 0 only when nothing failed. A watchdog turns a
hang into a failure: a soft deadline (--timeout, default 60 s) cancels the run, and a
hard one a few seconds later kills the server's process group and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Awaitable, Callable

try:
    import anyio
    import mcp.client.stdio as mcp_stdio
    import mcp_types
    from mcp import Client, ProgressNotification, StdioServerParameters
except ImportError as exc:
    # Run by another interpreter: switch to the venv that scripts/setup-interop.sh makes.
    _venv_python = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".venv", "bin", "python")
    if os.path.exists(_venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(
            os.path.join(os.path.dirname(_venv_python), "..")):
        os.execv(_venv_python, [_venv_python, os.path.abspath(__file__), *sys.argv[1:]])
    print(f"FAIL setup: cannot import the MCP Python SDK ({exc}); run scripts/setup-interop.sh", flush=True)
    print("0 passed, 1 failed", flush=True)
    sys.exit(1)

# Per-request bound; a check that needs longer says so explicitly.
CALL_TIMEOUT_S = 10.0
# How long the server may take to be gone after the client closes the session.
CLOSE_DEADLINE_S = 5.0
# The demo server's echo must round-trip this exactly: multi-byte UTF-8 of every length, a
# combining mark, an embedded newline and tab (which must be escaped on the wire), quotes,
# a backslash and U+2028 (a line separator to Unicode-aware splitters, not to JSON framing).
UNICODE_TEXT = 'héllo wörld — 日本語 🦀 e\u0301\nsecond line\twith "quotes" \\ and \u2028 LS'

DEMO_TOOLS = ("echo", "fail", "sleep", "stats", "panic")


class Report:
    """Collects check results and prints them as they come."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.lock = threading.Lock()
        self.finished = False

    def ok(self, name: str, detail: str = "") -> None:
        with self.lock:
            self.passed += 1
            print(f"ok {name}" + (f" ({detail})" if detail else ""), flush=True)

    def fail(self, name: str, reason: str) -> None:
        with self.lock:
            self.failed += 1
            reason = " ".join(str(reason).split()) or "unknown error"
            print(f"FAIL {name}: {reason}", flush=True)

    def summary(self) -> int:
        with self.lock:
            if self.finished:
                return 1 if self.failed else 0
            self.finished = True
            print(f"{self.passed} passed, {self.failed} failed", flush=True)
            return 1 if self.failed else 0


class CheckFailed(Exception):
    """Raised inside a check body to fail it with a readable reason."""


def expect(cond: bool, reason: str) -> None:
    if not cond:
        raise CheckFailed(reason)


def describe(exc: BaseException) -> str:
    if isinstance(exc, CheckFailed):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def dump(model: Any) -> Any:
    """An SDK result as plain JSON data with the wire's (camelCase) keys."""
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


def texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [b.get("text", "") for b in blocks if b.get("type") == "text"]


# --- spawning, with the process kept in sight ------------------------------------------

class ServerProcess:
    """Remembers the server process the SDK spawns, so the close check can see it exit."""

    def __init__(self) -> None:
        self.process: Any = None
        self.pid: int | None = None

    def install(self) -> None:
        # The SDK keeps its process private; wrap its spawn helper to see it. If a future SDK
        # renames the helper, the close check falls back to scanning /proc for our children.
        original = getattr(mcp_stdio, "_create_platform_compatible_process", None)
        if original is None:
            return

        async def spawn(*args: Any, **kwargs: Any) -> Any:
            proc = await original(*args, **kwargs)
            self.process = proc
            self.pid = getattr(proc, "pid", None)
            return proc

        mcp_stdio._create_platform_compatible_process = spawn

    def kill_group(self) -> None:
        """Last resort for the hard watchdog: the SDK starts the server in a new session."""
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def child_pids() -> set[int]:
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may contain spaces and parentheses; fields resume after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(me) and fields[0] != "Z":
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


# --- the checks -----------------------------------------------------------------------

class Events:
    """What the session saw besides responses: every progress notification, and transport
    faults (a stdout line that is not a valid JSON-RPC message, for one)."""

    def __init__(self) -> None:
        self.progress = 0
        self.errors: list[str] = []

    async def handler(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.errors.append(describe(message))
        elif isinstance(message, ProgressNotification):
            self.progress += 1


async def run_check(report: Report, name: str, body: Callable[[], Awaitable[str | None]],
                    timeout: float = CALL_TIMEOUT_S, events: Events | None = None) -> bool:
    seen = len(events.errors) if events else 0
    try:
        with anyio.fail_after(timeout):
            detail = await body()
        if events and len(events.errors) > seen:
            raise CheckFailed("client reported transport errors: " + "; ".join(events.errors[seen:]))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a FAIL line
        report.fail(name, describe(exc))
        return False
    report.ok(name, detail or "")
    return True


async def list_all_tools(client: Client) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(100):  # bounded: a server that never ends pagination fails the check
        page = dump(await client.list_tools(cursor=cursor))
        tools.extend(page.get("tools", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return tools
    raise CheckFailed("tools/list pagination did not end after 100 pages")


def demo_checks(client: Client, events: Events) -> list[tuple[str, Callable[[], Awaitable[str | None]], float]]:
    async def tools() -> str:
        names = {t.get("name") for t in await list_all_tools(client)}
        missing = [n for n in DEMO_TOOLS if n not in names]
        expect(not missing, f"tools/list lacks {missing}; got {sorted(n for n in names if n)}")
        return f"{len(names)} tools"

    async def echo() -> None:
        res = dump(await client.call_tool("echo", {"text": UNICODE_TEXT}))
        expect(not res.get("isError"), f"isError is true: {res}")
        got = texts(res.get("content", []))
        expect(got == [UNICODE_TEXT], f"expected one text block {UNICODE_TEXT!r}, got {got!r}")

    async def fail() -> None:
        message = "intentional failure: ünïcode"
        res = dump(await client.call_tool("fail", {"message": message}))
        expect(res.get("isError") is True, f"isError is not true: {res}")
        joined = "\n".join(texts(res.get("content", [])))
        expect(message in joined, f"text {joined!r} does not contain {message!r}")

    async def panic_then_echo() -> None:
        res = dump(await client.call_tool("panic", {}))
        expect(res.get("isError") is True, f"panic: isError is not true: {res}")
        again = dump(await client.call_tool("echo", {"text": "still alive"}))
        expect(texts(again.get("content", [])) == ["still alive"], f"echo after panic returned {again}")

    async def progress() -> str:
        seen: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(value)

        start = time.monotonic()
        res = dump(await client.call_tool("sleep", {"ms": 350}, progress_callback=on_progress))
        elapsed = time.monotonic() - start
        before = list(seen)
        wire_count = events.progress
        expect(not res.get("isError"), f"sleep returned isError: {res}")
        expect(elapsed >= 0.3, f"sleep ms=350 returned after {elapsed * 1000:.0f} ms")
        expect(len(before) >= 2, f"{len(before)} progress notifications before the result, wanted >= 2")
        expect(all(a < b for a, b in zip(before, before[1:])), f"progress not increasing: {before}")
        # Give a late notification the chance to show up (the spec forbids any after the
        # result). The SDK drops those silently, so count what reached the message handler.
        await anyio.sleep(0.15)
        late = events.progress - wire_count
        expect(late == 0, f"{late} progress notification(s) arrived after the result")
        return f"{len(before)} notifications in {elapsed * 1000:.0f} ms"

    async def stats() -> str:
        res = dump(await client.call_tool("stats", {}))
        sc = res.get("structuredContent")
        expect(isinstance(sc, dict), f"no structuredContent object: {res}")
        missing = [k for k in ("requests", "idle_evictions", "cache_entries") if k not in sc]
        expect(not missing, f"structuredContent lacks {missing}: {sc}")
        return json.dumps(sc, sort_keys=True)

    async def resource() -> None:
        res = dump(await client.read_resource("mcpipe://demo/readme"))
        contents = res.get("contents", [])
        expect(bool(contents), "resources/read returned no contents")
        text = contents[0].get("text")
        expect(isinstance(text, str) and text.strip() != "", f"first content has no text: {contents[0]}")

    async def templates() -> str:
        res = dump(await client.list_resource_templates())
        tpls = res.get("resourceTemplates", [])
        expect(bool(tpls), "resources/templates/list returned no templates")
        expect(all(t.get("uriTemplate") for t in tpls), f"a template has no uriTemplate: {tpls}")
        return ", ".join(t["uriTemplate"] for t in tpls)

    async def prompt() -> None:
        res = dump(await client.get_prompt("greet", {"name": "Ada"}))
        messages = res.get("messages", [])
        expect(bool(messages), "prompts/get returned no messages")
        expect("Ada" in json.dumps(messages, ensure_ascii=False), f"no message mentions Ada: {messages}")

    return [
        ("list-tools", tools, CALL_TIMEOUT_S),
        ("echo-unicode", echo, CALL_TIMEOUT_S),
        ("fail-is-error", fail, CALL_TIMEOUT_S),
        ("panic-then-echo", panic_then_echo, CALL_TIMEOUT_S),
        ("sleep-progress", progress, CALL_TIMEOUT_S),
        ("stats-structured", stats, CALL_TIMEOUT_S),
        ("read-resource", resource, CALL_TIMEOUT_S),
        ("list-resource-templates", templates, CALL_TIMEOUT_S),
        ("get-prompt-greet", prompt, CALL_TIMEOUT_S),
    ]


# Answers the SDK's callbacks give in inputs mode; the checks look for them in the results.
INPUT_ANSWERS = {"name": "Alice", "color": "blue", "context": "interop context", "ok": True,
                 "text": "hello"}
SAMPLED_TEXT = "Paris, says the Python SDK"
ROOT_URI = "file:///interop/root"


class InputCallbacks:
    """The SDK callbacks that answer elicitation, sampling and roots, counting each call."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {"elicitation": 0, "sampling": 0, "roots": 0}

    async def elicitation(self, context: Any, params: Any) -> Any:
        self.calls["elicitation"] += 1
        schema = getattr(params, "requested_schema", None) or {}
        if hasattr(schema, "model_dump"):
            schema = schema.model_dump(by_alias=True, exclude_none=True)
        props = (schema or {}).get("properties", {}) or {}
        content = {k: INPUT_ANSWERS.get(k, "x") for k in props}
        return mcp_types.ElicitResult(action="accept", content=content)

    async def sampling(self, context: Any, params: Any) -> Any:
        self.calls["sampling"] += 1
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(type="text", text=SAMPLED_TEXT),
            model="py-sdk-test", stopReason="endTurn")

    async def roots(self, context: Any) -> Any:
        self.calls["roots"] += 1
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=ROOT_URI, name="interop")])


def inputs_checks(client: Client, callbacks: InputCallbacks) -> list[tuple[str, Callable[[], Awaitable[str | None]], float]]:
    def tool_check(tool: str, wanted: list[str], callback: str, arguments: dict[str, Any] | None = None):
        async def body() -> str:
            before = callbacks.calls[callback]
            res = dump(await client.call_tool(tool, arguments or {}))
            expect(not res.get("isError"), f"{tool} returned isError: {res}")
            joined = " ".join(texts(res.get("content", [])))
            for want in wanted:
                expect(want in joined, f"{tool}: {joined!r} does not contain {want!r}")
            expect(callbacks.calls[callback] > before, f"the {callback} callback was not called")
            return joined
        return body

    async def prompt() -> str:
        res = dump(await client.get_prompt("test_input_required_result_prompt", {}))
        blob = json.dumps(res.get("messages", []), ensure_ascii=False)
        expect(INPUT_ANSWERS["context"] in blob, f"prompt messages lack the elicited context: {blob}")
        return "prompt got its context"

    return [
        ("input-elicitation", tool_check("test_input_required_result_elicitation", ["Hello, Alice!"], "elicitation"), CALL_TIMEOUT_S),
        ("input-sampling", tool_check("test_input_required_result_sampling", [SAMPLED_TEXT], "sampling"), CALL_TIMEOUT_S),
        ("input-roots", tool_check("test_input_required_result_list_roots", [ROOT_URI], "roots"), CALL_TIMEOUT_S),
        ("input-several-at-once", tool_check("test_input_required_result_multiple_inputs",
                                             ["name=Alice", SAMPLED_TEXT, ROOT_URI], "sampling"), CALL_TIMEOUT_S),
        ("input-several-rounds", tool_check("test_input_required_result_multi_round", ["Alice likes blue"], "elicitation"), CALL_TIMEOUT_S),
        ("input-request-state", tool_check("test_input_required_result_request_state", ["state-ok", "confirmed=true"], "elicitation"), CALL_TIMEOUT_S),
        ("input-sampling-tool", tool_check("test_sampling", ["LLM response: " + SAMPLED_TEXT], "sampling",
                                                          {"prompt": "What is the capital of France?"}), CALL_TIMEOUT_S),
        ("input-prompt", prompt, CALL_TIMEOUT_S),
    ]


def third_party_checks(client: Client, tool: str | None,
                       tool_args: dict[str, Any] | None) -> list[tuple[str, Callable[[], Awaitable[str | None]], float]]:
    state: dict[str, Any] = {}

    async def tools() -> str:
        listed = await list_all_tools(client)
        expect(len(listed) >= 1, "tools/list returned no tools")
        state["names"] = [t.get("name") for t in listed]
        return f"{len(listed)} tools"

    async def call() -> str:
        names = state.get("names") or [t.get("name") for t in await list_all_tools(client)]
        name, args, want = tool, tool_args, None
        if name is None:
            if "get_current_time" in names:  # mcp-server-time
                name, args, want = "get_current_time", {"timezone": "UTC"}, "UTC"
            elif "echo" in names:  # server-everything
                name, args, want = "echo", {"message": "hi"}, "hi"
            else:
                raise CheckFailed(f"no known tool among {names}; pass --tool NAME --args JSON")
        res = dump(await client.call_tool(name, args or {}))
        expect(not res.get("isError"), f"{name} returned isError: {res}")
        blob = json.dumps(res, ensure_ascii=False)
        expect(bool(res.get("content")) or "structuredContent" in res, f"{name} returned nothing: {res}")
        if want is not None:
            expect(want in blob, f"{name} result does not mention {want!r}: {blob[:300]}")
        shown = " | ".join(texts(res.get("content", []))) or blob
        return f"{name} -> {' '.join(shown.split())[:100]}"

    return [("list-tools", tools, CALL_TIMEOUT_S), ("call-tool", call, CALL_TIMEOUT_S)]


async def run(args: argparse.Namespace, report: Report, server: ServerProcess) -> None:
    command, *cmd_args = args.command
    params = StdioServerParameters(command=command, args=cmd_args, env=dict(os.environ))
    events = Events()
    callbacks = InputCallbacks()
    extra: dict[str, Any] = {}
    if args.mode == "inputs":
        extra = dict(elicitation_callback=callbacks.elicitation, sampling_callback=callbacks.sampling,
                     list_roots_callback=callbacks.roots)
    client = Client(params, mode=args.connect, read_timeout_seconds=CALL_TIMEOUT_S, cache=None,
                    message_handler=events.handler, **extra)

    # Names of the checks that run inside the session, so a failed connect can fail them too.
    planned = {
        "demo": ["list-tools", "echo-unicode", "fail-is-error", "panic-then-echo", "sleep-progress",
                 "stats-structured", "read-resource", "list-resource-templates", "get-prompt-greet"],
        "third-party": ["list-tools", "call-tool"],
        "inputs": ["input-elicitation", "input-sampling", "input-roots", "input-several-at-once",
                   "input-several-rounds", "input-request-state", "input-sampling-tool", "input-prompt"],
    }[args.mode]

    before = child_pids()
    connected = False
    closed_at: float | None = None
    close_error: str | None = None
    try:
        # The SDK's read timeout bounds the handshake. No cancel scope of ours may wrap only
        # the connect: the client's task group must nest inside scopes, not straddle them.
        async with client:
            connected = True
            info = client.server_info
            report.ok("initialize", f"{info.name if info else '?'} {info.version if info else ''}, "
                                    f"protocol {client.protocol_version}")
            if args.mode == "demo":
                checks = demo_checks(client, events)
            elif args.mode == "inputs":
                checks = inputs_checks(client, callbacks)
            else:
                checks = third_party_checks(client, args.tool, json.loads(args.args) if args.args else None)
            for name, body, timeout in checks:
                await run_check(report, name, body, timeout, events)
            # Faults outside any check (a banner printed on stdout before the handshake, say).
            if events.errors:
                report.fail("no-transport-errors", f"{len(events.errors)} seen: " + "; ".join(events.errors))
            else:
                report.ok("no-transport-errors")
            closed_at = time.monotonic()
    except Exception as exc:  # noqa: BLE001 - includes a spawn failure (missing command)
        reason = describe(exc)
        if not connected:
            if isinstance(exc, FileNotFoundError) or "No such file" in reason:
                reason = f"cannot start server {command!r}: {reason}"
            rc = getattr(server.process, "returncode", None)
            if rc is not None:
                reason += f" (server exited with {'status ' + str(rc) if rc >= 0 else 'signal ' + str(-rc)})"
            report.fail("initialize", reason)
            for name in planned + ["no-transport-errors", "close"]:
                report.fail(name, "not run: no session")
            server.kill_group()
            return
        close_error = reason

    spawned = server.pid
    if spawned is None:
        new = child_pids() - before
        spawned = min(new) if new else None
    if closed_at is None:
        closed_at = time.monotonic()
    # The SDK closes stdin, waits 2 s, then SIGTERMs the process group: poll until gone.
    deadline = closed_at + CLOSE_DEADLINE_S
    while spawned is not None and alive(spawned) and time.monotonic() < deadline:
        await anyio.sleep(0.02)
    took = time.monotonic() - closed_at
    rc = getattr(server.process, "returncode", None)
    if spawned is None:
        report.fail("close", "could not identify the server process")
    elif alive(spawned):
        report.fail("close", f"server pid {spawned} still running {CLOSE_DEADLINE_S:.0f} s after close")
        server.kill_group()
    elif close_error:
        report.fail("close", f"server exited but the session ended with {close_error}")
    elif rc is not None and rc < 0 and args.mode in ("demo", "inputs"):
        # Our own server must exit by itself on stdin EOF; being killed means it did not.
        report.fail("close", f"server did not exit on stdin EOF; killed by signal {-rc} after {took:.1f} s")
    else:
        how = f"exit status {rc}" if rc is None or rc >= 0 else f"killed by signal {-rc}"
        report.ok("close", f"server gone after {took:.2f} s, {how}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--mode demo|third-party|inputs] [options] -- COMMAND [ARGS...]")
    parser.add_argument("--mode", choices=("demo", "third-party", "inputs"), default="demo")
    parser.add_argument("--third-party", dest="mode", action="store_const", const="third-party",
                        help="shorthand for --mode third-party")
    parser.add_argument("--demo", dest="mode", action="store_const", const="demo",
                        help="shorthand for --mode demo")
    parser.add_argument("--connect", default="auto", choices=("auto", "legacy"),
                        help="SDK connect mode: auto (server/discover, then initialize; the SDK "
                             "default) or legacy (initialize only)")
    parser.add_argument("--timeout", type=float, default=60.0, help="overall watchdog in seconds")
    parser.add_argument("--tool", help="third-party: tool to call instead of the auto-detected one")
    parser.add_argument("--args", help="third-party: JSON object of arguments for --tool")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="server command, after --")
    args = parser.parse_args()
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        parser.error("missing server command (put it after --)")

    report = Report()
    server = ServerProcess()
    server.install()

    # Hard watchdog: if cancellation itself hangs, kill the server and leave anyway.
    def hard_stop() -> None:
        report.fail("watchdog", f"hard deadline of {args.timeout + 10:.0f} s passed; killing the server")
        server.kill_group()
        code = report.summary()
        os._exit(code or 1)

    hard = threading.Timer(args.timeout + 10, hard_stop)
    hard.daemon = True
    hard.start()

    async def guarded() -> None:
        with anyio.move_on_after(args.timeout) as scope:
            await run(args, report, server)
        if scope.cancelled_caught:
            report.fail("watchdog", f"run exceeded {args.timeout:.0f} s")
            server.kill_group()

    try:
        anyio.run(guarded)
    except KeyboardInterrupt:
        report.fail("interrupted", "KeyboardInterrupt")
        server.kill_group()
    except BaseException as exc:  # noqa: BLE001 - an SDK bug must still give a summary line
        report.fail("internal", describe(exc))
        server.kill_group()
    hard.cancel()
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
