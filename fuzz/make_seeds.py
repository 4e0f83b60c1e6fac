#!/usr/bin/env python3
"""Writes the seed corpus under fuzz/corpus/<target>/ (run from anywhere; idempotent).

Seeds are named after what they hold. `message` gets single lines, `server_loop` whole
streams (every message line on its own too), `framing` the streams behind a 4-byte header
(line limit, three piece sizes; see fuzz/properties.rs).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def line(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


BURST = (
    b'{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{},'
    b'"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"claude-code","version":"2.1.80"}},'
    b'"jsonrpc":"2.0","id":0}\n'
    b'{"method":"notifications/initialized","jsonrpc":"2.0"}\n'
    b'{"method":"tools/list","jsonrpc":"2.0","id":1}\n'
)

# Single lines: valid messages, then every bad input of the loop's contract (issue 2, point 4).
LINES = {
    "request-echo": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}',
    "request-echo-array-params": b'{"jsonrpc":"2.0","id":"a","method":"echo","params":[1,2.5,"x",null,true]}',
    "request-fail": b'{"jsonrpc":"2.0","id":2,"method":"fail"}',
    "request-panic": b'{"jsonrpc":"2.0","id":3,"method":"panic"}',
    "request-notify": b'{"jsonrpc":"2.0","id":4,"method":"notify","params":{"n":1}}',
    "request-unknown-method": b'{"jsonrpc":"2.0","id":5,"method":"no/such/method"}',
    # MCP's tools/call, whose name and arguments the loop reads apart from the params.
    "request-tools-call": b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    "request-tools-call-meta-task": b'{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"_meta":{"progressToken":1},"arguments":{},"name":"e","task":{"ttl":9},"name":"f"}}',
    "request-tools-call-method-last": b'{"jsonrpc":"2.0","params":{"name":"echo","arguments":[1]},"id":6,"method":"tools/call"}',
    "request-tools-call-escaped": b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"n\\u0061me":"\\u0065cho","arguments":null}}',
    "notification": b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
    "notification-with-params": b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
    "response-result": b'{"jsonrpc":"2.0","id":7,"result":{"roots":[]}}',
    "response-error": b'{"jsonrpc":"2.0","id":8,"error":{"code":-32601,"message":"nope","data":[1]}}',
    "response-error-null-id": b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}',
    "response-error-no-id": b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}',
    # Bad input.
    "bad-not-json": b"{oops",
    "bad-trailing-comma": b'{"jsonrpc":"2.0","method":"m"},',
    "bad-truncated": b'{"jsonrpc":"2.0","id":1,"method":"ec',
    "bad-scalar-number": b"42",
    "bad-scalar-string": b'"hello"',
    "bad-scalar-null": b"null",
    "bad-scalar-true": b"true",
    "bad-no-method": b'{"jsonrpc":"2.0","id":1}',
    "bad-no-jsonrpc": b'{"id":1,"method":"echo"}',
    "bad-jsonrpc-1.0": b'{"jsonrpc":"1.0","id":1,"method":"echo"}',
    "bad-jsonrpc-number": b'{"jsonrpc":2.0,"id":1,"method":"echo"}',
    "bad-method-number": b'{"jsonrpc":"2.0","id":1,"method":3}',
    "bad-method-null": b'{"jsonrpc":"2.0","id":1,"method":null}',
    "bad-method-object": b'{"jsonrpc":"2.0","id":1,"method":{"a":1}}',
    "bad-method-array": b'{"jsonrpc":"2.0","id":1,"method":["echo"]}',
    "bad-method-bool": b'{"jsonrpc":"2.0","id":1,"method":false}',
    "bad-id-object": b'{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}',
    "bad-id-array": b'{"jsonrpc":"2.0","id":[1],"method":"echo"}',
    "bad-id-bool": b'{"jsonrpc":"2.0","id":true,"method":"echo"}',
    "bad-id-float": b'{"jsonrpc":"2.0","id":1.5,"method":"echo"}',
    "bad-id-exponent": b'{"jsonrpc":"2.0","id":1e3,"method":"echo"}',
    "bad-id-null-request": b'{"jsonrpc":"2.0","id":null,"method":"echo"}',
    "bad-params-string": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":"s"}',
    "bad-params-number": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":5}',
    "bad-params-null": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":null}',
    "bad-result-and-error": b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}',
    "bad-result-without-id": b'{"jsonrpc":"2.0","result":1}',
    "bad-error-not-object": b'{"jsonrpc":"2.0","id":1,"error":"boom"}',
    "bad-error-code-float": b'{"jsonrpc":"2.0","id":1,"error":{"code":1.5,"message":"m"}}',
    "bad-empty-object": b"{}",
    "bad-unknown-members": b'{"foo":"bar"}',
    "batch-empty": b"[]",
    "batch-mixed": b'[{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":"x","method":"fail"},1,{"jsonrpc":"2.0","id":9,"result":0}]',
    "batch-notifications-only": b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]',
    "batch-garbage": b'[1,"a",null,{},[]]',
    "batch-nested": b"[[]]",
    # Ids.
    "id-zero": b'{"jsonrpc":"2.0","id":0,"method":"echo"}',
    "id-negative": b'{"jsonrpc":"2.0","id":-1,"method":"echo"}',
    "id-negative-zero": b'{"jsonrpc":"2.0","id":-0,"method":"echo"}',
    "id-above-2-53": b'{"jsonrpc":"2.0","id":9007199254740993,"method":"echo"}',
    "id-u64-max": b'{"jsonrpc":"2.0","id":18446744073709551615,"method":"echo"}',
    "id-i64-min": b'{"jsonrpc":"2.0","id":-9223372036854775808,"method":"echo"}',
    "id-above-u64": b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"echo"}',
    "id-string-escapes": b'{"jsonrpc":"2.0","id":"a\\"b\\\\c\\n\\u0000\\u2028","method":"echo"}',
    "id-empty-string": b'{"jsonrpc":"2.0","id":"","method":"echo"}',
    # Numbers, duplicates, strings.
    "number-10000-digits": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[' + b"9" * 10000 + b"]}",
    "number-10000-digit-fraction": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[0.' + b"1" * 10000 + b"]}",
    "number-huge-exponent": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1e400,-1e-400]}',
    "number-float-edge": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1.7976931348623157e308,5e-324,0.1,2.2250738585072014e-308]}',
    "duplicate-keys": b'{"jsonrpc":"2.0","id":1,"id":2,"method":"fail","method":"echo"}',
    "duplicate-keys-bad-last": b'{"jsonrpc":"2.0","id":1,"method":"echo","method":5}',
    "nul-escaped": b'{"jsonrpc":"2.0","id":1,"method":"echo\\u0000","params":{"\\u0000":"\\u0000"}}',
    "nul-raw-in-string": b'{"jsonrpc":"2.0","id":1,"method":"ec\x00ho"}',
    "nul-raw-outside": b'\x00{"jsonrpc":"2.0","id":1,"method":"echo"}',
    "utf8-invalid-in-string": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["\xff\xfe"]}',
    "utf8-invalid-overlong": b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"echo"}',
    "utf8-truncated": b'{"jsonrpc":"2.0","id":1,"method":"\xe2\x82"}',
    "utf8-valid-multibyte": '{"jsonrpc":"2.0","id":"é漢🎉","method":"echo","params":{"ключ":"値"}}'.encode(),
    "surrogate-lone-high": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["\\ud800"]}',
    "surrogate-lone-low": b'{"jsonrpc":"2.0","id":"\\udc00","method":"echo"}',
    "surrogate-high-then-letter": b'{"jsonrpc":"2.0","id":1,"method":"\\ud800\\u0041"}',
    "surrogate-pair": b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"echo"}',
    "deep-nesting-arrays": b"[" * 3000 + b"]" * 3000,
    "deep-nesting-in-params": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}",
    "deep-nesting-127": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":' + b"[" * 126 + b"]" * 126 + b"}",
    "deep-nesting-unclosed": b"[" * 5000,
    "whitespace-inside": b' \t{ "jsonrpc" : "2.0" ,\t"id" : 1 , "method" : "echo" } \t',
}

# Whole streams (framing and server_loop).
STREAMS = {
    "burst-claude-code-2.1.80": BURST,
    "burst-crlf": BURST.replace(b"\n", b"\r\n"),
    "burst-bom": b"\xef\xbb\xbf" + BURST,
    "burst-no-final-newline": BURST.rstrip(b"\n"),
    "blank-and-whitespace-lines": b"\n\n  \n\t\n\r\n \r\n" + LINES["request-echo"] + b"\n\n",
    "cr-cr-lf": LINES["request-echo"] + b"\r\r\n" + LINES["request-fail"] + b"\r\n",
    "bom-later-is-not-stripped": LINES["request-echo"] + b"\n\xef\xbb\xbf" + LINES["request-fail"] + b"\n",
    "oversize-then-valid": b'{"jsonrpc":"2.0","id":1,"method":"echo","params":"' + b"x" * 600 + b'"}\n' + LINES["request-echo"] + b"\n",
    "oversize-blank": b" " * 600 + b"\n" + LINES["request-echo"] + b"\n",
    "oversize-at-eof": LINES["request-echo"] + b"\n" + b"y" * 700,
    "limit-exact": b"[" + b" " * 510 + b"]\n" + LINES["request-echo"] + b"\n",
    "nul-lines": b"\x00\n\x00\x00\n" + LINES["request-echo"] + b"\n\x00",
    "every-bad-input-then-valid": b"\n".join(v for k, v in LINES.items() if k.startswith("bad-")) + b"\n" + LINES["request-echo"] + b"\n",
    "batches": b"\n".join(v for k, v in LINES.items() if k.startswith("batch-")) + b"\n",
    "many-requests": b"".join(line({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"i": i}}) + b"\n" for i in range(40)),
    "notify-then-echo": LINES["request-notify"] + b"\n" + LINES["request-echo"] + b"\n",
    "random-bytes-then-valid": bytes((i * 7919 + 13) % 256 for i in range(1500)) + b"\n" + LINES["request-echo"] + b"\n",
}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


for name, data in LINES.items():
    write("message", name, data)
    write("server_loop", "line-" + name, data + b"\n")
for name, data in STREAMS.items():
    write("server_loop", name, data)
    # Header: line limit, three piece sizes minus one (properties::framing_setup).
    write("framing", name + "-limit64-pieces-1-7-200", bytes([64, 0, 6, 199]) + data)
    write("framing", name + "-limit255-pieces-256", bytes([255, 255, 255, 255]) + data)
for name, data in LINES.items():
    write("framing", "line-" + name + "-limit16", bytes([16, 2, 0, 30]) + data + b"\r\n" + data)
# Lines split in message boundaries of every kind, small limits.
write("framing", "tiny-limit-zero", bytes([0, 0, 0, 0]) + b"\n \n\r\n\xef\xbb\xbf\nx\n")
write("framing", "bom-only-lines", bytes([3, 0, 1, 2]) + b"\xef\xbb\xbf\r\n\xef\xbb\xbf\nabc\r\r\n")
write("framing", "crlf-at-limit", bytes([4, 0, 3, 4]) + b"abcd\r\nabcde\r\nabcd\r\r\nabc")

# server_loop_mcp: the MCP layer behind the loop.
INIT = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}) + b"\n"
INIT_0326 = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}) + b"\n"
INITIALIZED = line({"jsonrpc": "2.0", "method": "notifications/initialized"}) + b"\n"
def call(i, name, args):
    return line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}) + b"\n"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MCP_STREAMS = {
    "burst": BURST,
    "session": INIT + INITIALIZED + line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}) + b"\n" + call(2, "echo", {"text": "hi"}) + call(3, "fail", {}) + call(4, "panic", {}) + call(5, "nope", {}) + call(6, "echo", {"text": 7}),
    "resources-prompts": INIT + INITIALIZED + line({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}) + b"\n" + line({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "fuzz://readme"}}) + b"\n" + line({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "fuzz://none"}}) + b"\n" + line({"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "greet"}}) + b"\n",
    "cancel-queued": INIT + call(1, "echo", {"text": "a"}) + line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}) + b"\n" + call(2, "echo", {"text": "b"}),
    "before-initialize": call(1, "echo", {"text": "a"}) + line({"jsonrpc": "2.0", "id": 2, "method": "ping"}) + b"\n" + INIT + INIT,
    "batch-2025-03-26": INIT_0326 + INITIALIZED + b"[" + line({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + b"," + line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + b"]\n",
    "batch-refused": INIT + b"[" + line({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + b"]\n",
    "modern": line({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": MODERN_META}}) + b"\n" + line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "m"}, "_meta": MODERN_META}}) + b"\n" + line({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}) + b"\n",
    "logging-progress": INIT + line({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}) + b"\n" + line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "p"}, "_meta": {"progressToken": "t"}}}) + b"\n",
    "bad-lines": b"\n".join(v for k, v in LINES.items() if k.startswith("bad-")) + b"\n" + INIT + call(1, "echo", {"text": "after"}),
    "concurrent": INIT + INITIALIZED + call(1, "nap", {"ms": 3}) + call(2, "echo", {"text": "fast"}) + call(3, "nap", {}) + call(4, "cpanic", {}) + call(5, "nap", {"ms": 1}),
    "concurrent-cancel": INIT + call(1, "nap", {"ms": 3}) + call(2, "nap", {"ms": 2}) + line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}) + b"\n" + line({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nap", "arguments": {}, "_meta": {"progressToken": 9}}}) + b"\n",
    "concurrent-modern": line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nap", "arguments": {"ms": 1}, "_meta": MODERN_META}}) + b"\n" + line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "cpanic", "arguments": {}, "_meta": MODERN_META}}) + b"\n",
}

# Tasks (issue 15): `nap` allows tasks, `ntask` requires one, `echo` forbids them. Task ids are
# made by the server (unguessable), so these reach the task store through the call that makes
# a task, `tasks/list`, and every error path (unknown or malformed ids, a client that did not
# declare tasks, a task on a tool that forbids one, bad `task` / `ttl` shapes), in both
# revisions. A task still running at end of input is cancelled and every waiting
# `tasks/result` answered, so the answer count holds.
INIT_TASKS = line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {"requests": {"elicitation": {"create": {}}}}}, "clientInfo": {"name": "fuzz", "version": "0"}}}) + b"\n"
def tcall(i, name, args, task, meta=None):
    params = {"name": name, "arguments": args}
    if task is not None:
        params["task"] = task
    if meta is not None:
        params["_meta"] = meta
    return line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}) + b"\n"
def treq(i, method, params, meta=None):
    if meta is not None:
        params = dict(params, _meta=meta)
    return line({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + b"\n"
TASKS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
EVERY_TASK_METHOD = ["tasks/get", "tasks/result", "tasks/cancel", "tasks/update"]
BAD_IDS = ["no-such-task", "", 7, None, {"a": 1}, ["task-1"], "task-1-" + "0" * 32, "\u0000"]
MCP_STREAMS.update({
    "tasks-legacy": INIT_TASKS + INITIALIZED + tcall(1, "nap", {"ms": 2}, {"ttl": 60000}) + tcall(2, "nap", {}, {}) + treq(3, "tasks/list", {}) + treq(4, "tasks/list", {"cursor": "zz"}) + tcall(5, "ntask", {}, {}) + tcall(6, "echo", {"text": "t"}, {}) + tcall(7, "ntask", {}, None),
    "tasks-legacy-bad-ids": INIT_TASKS + b"".join(treq(10 + i * 4 + j, m, {"taskId": tid}) for i, tid in enumerate(BAD_IDS) for j, m in enumerate(EVERY_TASK_METHOD)) + treq(99, "tasks/get", {}),
    "tasks-legacy-bad-shapes": INIT_TASKS + tcall(1, "nap", {}, {"ttl": -5}) + tcall(2, "nap", {}, {"ttl": "long"}) + tcall(3, "nap", {}, 5) + tcall(4, "nap", {}, []) + tcall(5, "nap", {}, {"ttl": 1e300}) + tcall(6, "nope", {}, {}) + tcall(7, "cpanic", {}, {}),
    "tasks-legacy-undeclared": INIT + INITIALIZED + tcall(1, "nap", {}, {}) + treq(2, "tasks/get", {"taskId": "x"}) + treq(3, "tasks/list", {}),
    "tasks-legacy-cancel-call": INIT_TASKS + tcall(1, "nap", {"ms": 3}, {}) + line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}) + b"\n" + treq(2, "tasks/result", {"taskId": "x"}) + treq(3, "tasks/list", {}),
    "tasks-modern": tcall(1, "nap", {"ms": 1}, None, TASKS_META) + tcall(2, "ntask", {}, None, TASKS_META) + tcall(3, "ntask", {}, None, MODERN_META) + treq(4, "tasks/list", {}, TASKS_META) + treq(5, "tasks/update", {"taskId": "x", "inputResponses": {"a": {}}}, TASKS_META) + treq(6, "tasks/get", {"taskId": "x"}, MODERN_META),
    # Two halves: fuzz.sh caps inputs at 4096 bytes.
    "tasks-modern-bad-ids-1": b"".join(treq(10 + i * 4 + j, m, {"taskId": tid}, TASKS_META) for i, tid in enumerate(BAD_IDS[:4]) for j, m in enumerate(EVERY_TASK_METHOD)),
    "tasks-modern-bad-ids-2": b"".join(treq(10 + i * 4 + j, m, {"taskId": tid}, TASKS_META) for i, tid in enumerate(BAD_IDS[4:]) for j, m in enumerate(EVERY_TASK_METHOD)),
    "tasks-modern-task-field": tcall(1, "nap", {}, {"ttl": 5}, TASKS_META) + tcall(2, "echo", {"text": "e"}, {}, TASKS_META) + treq(3, "tasks/update", {"taskId": "x", "inputResponses": 5}, TASKS_META) + treq(4, "tasks/cancel", {"taskId": "x"}, None),
})
for name, data in MCP_STREAMS.items():
    write("server_loop_mcp", name, data)

# server_session: a limit byte (64 + 4 x byte), two piece-size bytes (1 + byte), the stream.
def req(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    return line(m) + b"\n"
def cancel(i):
    return line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}}) + b"\n"
SESSION_STREAMS = {
    "later-and-now": req(1, "later", {"a": 1}) + req(2, "echo", {"b": 2}) + req(3, "later", "drop") + req(4, "echo") + req(5, "echo"),
    "cancel-later": req(1, "later", {"x": 1}) + cancel(1) + req(2, "echo", {}),
    "cancel-slow": req("s", "slow", {}) + cancel("s") + req(2, "echo", {}),
    "cancel-queued": req(1, "echo", {}) + req(2, "echo", {}) + cancel(2) + req(3, "later", [1]),
    "bad-and-batch": b"{oops\n" + b"[" + line({"jsonrpc": "2.0", "id": 7, "method": "later", "params": {}}) + b"," + line({"jsonrpc": "2.0", "id": 8, "method": "echo"}) + b"]\n" + b"[]\n" + req(9, "echo", {}),
    "response-and-unknown-cancel": line({"jsonrpc": "2.0", "id": 40, "result": {}}) + b"\n" + cancel(99) + req(1, "later", {}),
    # Task-shaped traffic (the session knows no tasks: each is one request, answered once).
    "task-shaped": req(1, "tools/call", {"name": "nap", "arguments": {}, "task": {"ttl": 1000}}) + req(2, "tasks/get", {"taskId": "t"}) + req(3, "tasks/result", {"taskId": "t"}) + cancel(3) + req(4, "tasks/list", {"cursor": None}) + req(5, "tasks/cancel", {"taskId": 5}) + req(6, "tasks/update", {"taskId": "t", "inputResponses": {}}),
    "task-shaped-later": req(1, "later", {"task": {"ttl": 5}}) + req(2, "later", "drop") + req("t", "slow", {"taskId": ""}) + cancel("t"),
}
for name, data in SESSION_STREAMS.items():
    write("server_session", name, bytes([60, 0, 6]) + data)
    write("server_session", name + "-bytewise", bytes([60, 0, 0]) + data)

# client_responses: a mode byte (bit 0: the server waits for stdin to close; bit 1: modern
# era), then the server's output. The client's first request has id 1.
INIT_RESULT = line({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "0"}}}) + b"\n"
TOOLS = line({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}], "nextCursor": "c"}}) + b"\n" + line({"jsonrpc": "2.0", "id": 3, "result": {"tools": []}}) + b"\n"
DISCOVER = line({"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete"}}) + b"\n"
CLIENT = {
    "nothing": b"",
    "handshake-then-exit": INIT_RESULT,
    "handshake-and-tools": INIT_RESULT + TOOLS,
    "garbage-then-handshake": b"not json\n\x00\xff\n" + INIT_RESULT + TOOLS,
    "server-requests": INIT_RESULT + line({"jsonrpc": "2.0", "id": "s1", "method": "ping"}) + b"\n" + line({"jsonrpc": "2.0", "id": "s2", "method": "roots/list"}) + b"\n" + line({"jsonrpc": "2.0", "id": "s3", "method": "sampling/createMessage", "params": {}}) + b"\n" + TOOLS,
    "notifications-and-progress": INIT_RESULT + line({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 2, "progress": 1}}) + b"\n" + line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}) + b"\n" + TOOLS,
    "unsupported-version": line({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": {"name": "s", "version": "0"}}}) + b"\n",
    "result-not-object": line({"jsonrpc": "2.0", "id": 1, "result": 5}) + b"\n",
    "error-to-initialize": line({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "no"}}) + b"\n",
    "null-id-error": line({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}) + b"\n" + INIT_RESULT,
    "duplicate-and-unknown-ids": INIT_RESULT + INIT_RESULT + line({"jsonrpc": "2.0", "id": 99, "result": {}}) + b"\n" + TOOLS,
    "huge-line": b"x" * 5000 + b"\n" + INIT_RESULT,
    "batch-answer": b"[" + INIT_RESULT.strip() + b"]\n",
    "no-newline": INIT_RESULT.strip(),
}
for name, data in CLIENT.items():
    write("client_responses", "exit-" + name, bytes([0]) + data)
    write("client_responses", "stay-" + name, bytes([1]) + data)
write("client_responses", "modern-discover", bytes([2]) + DISCOVER + TOOLS)
write("client_responses", "modern-discover-stay", bytes([3]) + DISCOVER + TOOLS)
write("client_responses", "modern-unsupported", bytes([3]) + line({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "v", "data": {"supported": ["2026-07-28"], "requested": "x"}}}) + b"\n")
write("client_responses", "modern-input-required", bytes([3]) + DISCOVER + line({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list", "params": {}}}, "requestState": "s"}}) + b"\n")

# Tasks (mode bit 2: the client calls tool "t" as a task). The client's ids: the handshake 1,
# the call 2, then one per poll / outcome / cancel. A status that is not final makes the client
# pause, which reads the rest of the output (answers to later ids then arrive too early), so the
# seeds that go further end the task at once.
def answer(i, result):
    return line({"jsonrpc": "2.0", "id": i, "result": result}) + b"\n"
DONE = {"content": [{"type": "text", "text": "ok"}]}
LEGACY_TASK = {
    "completed": answer(2, {"task": {"taskId": "t1", "status": "completed"}}) + answer(3, DONE),
    "failed": answer(2, {"task": {"taskId": "t1", "status": "failed"}}) + line({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "failed"}}) + b"\n",
    "cancelled": answer(2, {"task": {"taskId": "t1", "status": "cancelled"}}),
    "working-then-polls": answer(2, {"task": {"taskId": "t1", "status": "working", "pollInterval": 10}}) + answer(3, {"taskId": "t1", "status": "working"}) + answer(4, {"taskId": "t1", "status": "completed"}) + answer(5, DONE),
    "huge-poll-interval": answer(2, {"task": {"taskId": "t1", "status": "working", "pollInterval": 18446744073709551615}}),
    "bad-poll-interval": answer(2, {"task": {"taskId": "t1", "status": "working", "pollInterval": -1.5}}),
    "bad-task-id": answer(2, {"task": {"taskId": 7, "status": "working"}}),
    "task-not-object": answer(2, {"task": "t1"}),
    "no-task": answer(2, DONE),
    "unknown-status": answer(2, {"task": {"taskId": "t1", "status": "sleeping"}}),
    "refused": line({"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "no tasks"}}) + b"\n",
}
for name, data in LEGACY_TASK.items():
    write("client_responses", "task-" + name, bytes([4]) + INIT_RESULT + data)
    write("client_responses", "task-stay-" + name, bytes([5]) + INIT_RESULT + data)
MODERN_TASK = {
    "completed-inline": answer(2, {"resultType": "task", "taskId": "t", "status": "completed"}) + answer(3, {"resultType": "complete", "taskId": "t", "status": "completed", "result": DONE}),
    "failed-inline": answer(2, {"resultType": "task", "taskId": "t", "status": "failed", "error": {"code": -32000, "message": "x", "data": [1]}}),
    "failed-malformed-error": answer(2, {"resultType": "task", "taskId": "t", "status": "failed", "error": "boom"}),
    "ended-without-outcome": answer(2, {"resultType": "task", "taskId": "t", "status": "completed"}) + answer(3, {"resultType": "complete", "taskId": "t", "status": "completed"}),
    "input-required": answer(2, {"resultType": "task", "taskId": "t", "status": "input_required", "inputRequests": {"r": {"method": "roots/list", "params": {}}, "e": {"method": "elicitation/create", "params": {"message": "?"}}}}) + answer(3, {}),
    "input-required-malformed": answer(2, {"resultType": "task", "taskId": "t", "status": "input_required", "inputRequests": [1, 2]}),
    "plain-answer": answer(2, dict(DONE, resultType="complete")),
    "unknown-result-type": answer(2, {"resultType": "later", "taskId": "t"}),
    "refused": line({"jsonrpc": "2.0", "id": 2, "error": {"code": -32021, "message": "missing capability", "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}}) + b"\n",
}
for name, data in MODERN_TASK.items():
    write("client_responses", "task-modern-" + name, bytes([6]) + DISCOVER + data)
    write("client_responses", "task-modern-stay-" + name, bytes([7]) + DISCOVER + data)
