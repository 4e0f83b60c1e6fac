#!/usr/bin/env python3
"""A stand-in for `mcpipe demo`: the demo contract over stdio, in plain Python (stdlib only).

It exists to self-test interop/py_client.py and interop/ts_client.mjs while the real demo
server is being written, and doubles as an executable statement of the contract they check:

    python3 interop/fake_demo_server.py                  # speaks MCP on stdin/stdout
    node interop/ts_client.mjs -- python3 interop/fake_demo_server.py
    python3 interop/py_client.py -- python3 interop/fake_demo_server.py

Handshake era only (2025-11-25 and older): `server/discover` gets -32601, so SDK clients in
auto mode fall back to `initialize`. Exits 0 on stdin EOF. Not part of the crate.
"""

import json
import sys
import threading
import time

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
README = "mcpipe demo server (fake stand-in): tools echo, fail, sleep, stats, panic.\n"

write_lock = threading.Lock()
stats = {"requests": 0, "idle_evictions": 0, "cache_entries": 0}


def send(message):
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
    with write_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def result(rid, value):
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid, code, message):
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


def text(value, is_error=False):
    out = {"content": [{"type": "text", "text": value}]}
    if is_error:
        out["isError"] = True
    return out


TOOLS = [
    {"name": "echo", "description": "Echo text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "fail", "description": "Return a tool error carrying the message.",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "sleep", "description": "Wait ms milliseconds, reporting progress every 100 ms.",
     "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}},
    {"name": "stats", "description": "Server counters.", "inputSchema": {"type": "object"},
     "outputSchema": {"type": "object", "properties": {k: {"type": "integer"} for k in stats},
                      "required": list(stats)}},
    {"name": "panic", "description": "Fail inside the handler; the server survives.",
     "inputSchema": {"type": "object"}},
]


def sleep_tool(rid, ms, token):
    deadline = time.monotonic() + ms / 1000
    step = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(0.1, left))
        step += 1
        if token is not None and time.monotonic() < deadline:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": step, "total": max(1, ms // 100)}})
    result(rid, text(f"slept {ms} ms"))


def call_tool(rid, params):
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        return result(rid, text(str(args.get("text", ""))))
    if name == "fail":
        return result(rid, text(f"failed: {args.get('message', '')}", is_error=True))
    if name == "sleep":
        token = (params.get("_meta") or {}).get("progressToken")
        threading.Thread(target=sleep_tool, args=(rid, int(args.get("ms", 0)), token), daemon=True).start()
        return None
    if name == "stats":
        snapshot = dict(stats)
        return result(rid, {"content": [{"type": "text", "text": json.dumps(snapshot)}],
                            "structuredContent": snapshot})
    if name == "panic":
        return result(rid, text("handler panicked: demo panic", is_error=True))
    return error(rid, -32602, f"unknown tool: {name}")


def handle(msg):
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if method is None or rid is None:
        return  # a response or a notification: nothing to answer
    stats["requests"] += 1
    if method == "initialize":
        asked = params.get("protocolVersion")
        return result(rid, {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
            "serverInfo": {"name": "fake-mcpipe-demo", "version": "0.0.0"},
        })
    if method == "ping":
        return result(rid, {})
    if method == "tools/list":
        return result(rid, {"tools": TOOLS})
    if method == "tools/call":
        return call_tool(rid, params)
    if method == "resources/list":
        return result(rid, {"resources": [{"uri": "mcpipe://demo/readme", "name": "readme",
                                           "mimeType": "text/plain"}]})
    if method == "resources/templates/list":
        return result(rid, {"resourceTemplates": [{"uriTemplate": "mcpipe://demo/echo/{text}", "name": "echo"}]})
    if method == "resources/read":
        uri = params.get("uri", "")
        if uri == "mcpipe://demo/readme":
            return result(rid, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": README}]})
        if uri.startswith("mcpipe://demo/echo/"):
            return result(rid, {"contents": [{"uri": uri, "text": uri[len("mcpipe://demo/echo/"):]}]})
        return send({"jsonrpc": "2.0", "id": rid,
                     "error": {"code": -32002, "message": "Resource not found", "data": {"uri": uri}}})
    if method == "prompts/list":
        return result(rid, {"prompts": [{"name": "greet", "description": "Greet someone.",
                                         "arguments": [{"name": "name", "required": True}]}]})
    if method == "prompts/get":
        if params.get("name") != "greet":
            return error(rid, -32602, "unknown prompt")
        who = (params.get("arguments") or {}).get("name", "world")
        return result(rid, {"messages": [{"role": "user", "content": {"type": "text", "text": f"Say hello to {who}."}}]})
    return error(rid, -32601, f"method not found: {method}")


def main():
    sys.stdin.reconfigure(encoding="utf-8", newline="\n")
    sys.stdout.reconfigure(encoding="utf-8", newline="\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            continue
        if isinstance(msg, dict):
            handle(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
