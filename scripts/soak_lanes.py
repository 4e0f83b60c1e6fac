"""The lanes of `scripts/soak.py` (see its header): each one long-lived process on pipes, the
random mix it is driven with, and the invariants checked over what it answers; with the /proc
readings the lanes need to find the server they kill."""

import json
import os
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_LIMIT = 1 << 20  # the direct demo's --max-message-bytes
WRAP_LIMIT = 64 << 20  # the wrapper's line limit (the loop's default)
PINGPONG_LIMIT = 30.0


def now():
    return time.monotonic()


class Report:
    """Violations, printed at once and kept for the summary."""

    def __init__(self):
        self.lock = threading.Lock()
        self.violations = []
        self.start = now()

    def violation(self, lane, text):
        with self.lock:
            self.violations.append({"lane": lane, "t": round(now() - self.start, 1), "what": text})
            if len(self.violations) <= 200:
                print("VIOLATION [%s] t=%.1f: %s" % (lane, now() - self.start, text), flush=True)

    def note(self, text):
        print("[%7.1f] %s" % (now() - self.start, text), flush=True)


# ---------------------------------------------------------------------------- /proc sampling


def proc_stat(pid):
    """(state, ppid, starttime) of a process, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()
    return rest[0], int(rest[1]), int(rest[19])


def all_stats():
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None:
                out[int(name)] = st
    return out


def descendants(root, stats):
    kids = {}
    for pid, (_, ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def key_of(id_value):
    return json.dumps(id_value, sort_keys=True)


class Lane:
    """One long-lived process on pipes, its requests and the invariants over its answers."""

    kill_server = False
    protocol = "2025-11-25"
    limit = DEMO_LIMIT
    server_name = None  # the comm of the server child to kill

    def __init__(self, name, argv, env, rng, report):
        self.name, self.argv, self.env, self.rng, self.report = name, argv, env, rng, report
        self.lock = threading.Condition()  # guards the request state below
        self.wlock = threading.Lock()  # one writer at a time on stdin
        self.pending = {}  # key -> entry
        self.answered = set()  # keys answered (for duplicates)
        self.cancelled = set()  # keys cancelled, not yet answered
        self.tokens = {}  # progress token -> key of a pending request
        self.token_of = {}  # and back
        self.next_id = 0
        self.bad_sent = 0
        self.null_errors = 0
        self.counts = {"sent": 0, "answers": 0, "errors": 0, "progress": 0, "server_requests": 0,
                       "notifications": 0, "cancels": 0, "kills": 0, "tasks": 0,
                       "late_cancelled": 0, "stray_stdout": 0, "stderr_lines": 0}
        self.timers = []  # (due, fn)
        self.stderr_tail = []
        self.proc = None
        self.stop = threading.Event()

    # -- process and pipes

    def spawn(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env, cwd=ROOT)
        self.reader = threading.Thread(target=self.read_stdout, daemon=True)
        self.reader.start()
        threading.Thread(target=self.read_stderr, daemon=True).start()

    def write(self, data):
        # Its own lock: the reader must never wait for a writer blocked on a full pipe.
        with self.wlock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                self.report.violation(self.name, "write failed: %r" % e)
                self.stop.set()

    def read_stderr(self):
        for line in self.proc.stderr:
            self.counts["stderr_lines"] += 1
            self.stderr_tail.append(line[:300])
            del self.stderr_tail[:-20]

    def read_stdout(self):
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                self.report.violation(self.name, "stdout line is not JSON: %r" % raw[:200])
                continue
            if isinstance(msg, list):
                if not msg:
                    self.report.violation(self.name, "empty batch answer")
                for item in msg:
                    self.on_message(item)
            else:
                self.on_message(msg)

    # -- requests

    def new_id(self):
        self.next_id += 1
        # Strings now and then, and integers of both signs, as clients send them.
        r = self.rng.random()
        if r < 0.2:
            return "s-%d" % self.next_id
        return self.next_id

    def request(self, method, params=None, expect_text=None, expect_error=False,
                on_answer=None, send=True, rid=None, raw=None):
        """Sends a request (or only records it, `send=False`); `raw` writes its own line."""
        rid = rid if rid is not None else self.new_id()
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        entry = {"method": method, "sent": now(), "text": expect_text,
                 "expect_error": expect_error, "on_answer": on_answer, "done": threading.Event()}
        with self.lock:
            self.pending[key_of(rid)] = entry
            self.counts["sent"] += 1
        line = raw if raw is not None else (json.dumps(msg) + "\n").encode()
        if send:
            self.write(line)
        return rid, entry, line

    def cancel(self, rid):
        k = key_of(rid)
        with self.lock:
            if k not in self.pending:
                self.counts["late_cancelled"] += 1
                return
            self.cancelled.add(k)
            self.counts["cancels"] += 1
        self.write((json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": rid, "reason": "soak"}}) + "\n").encode())

    def after(self, seconds, fn):
        with self.lock:
            self.timers.append((now() + seconds, fn))

    def run_timers(self):
        with self.lock:
            due = [t for t in self.timers if t[0] <= now()]
            self.timers = [t for t in self.timers if t[0] > now()]
        for _, fn in due:
            fn()

    def in_flight(self):
        with self.lock:
            return len(self.pending) - len(self.cancelled)

    # -- what comes back

    def on_message(self, msg):
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self.report.violation(self.name, "not a JSON-RPC 2.0 message: %.200s" % msg)
            return
        if "method" in msg:
            if not isinstance(msg["method"], str):
                self.report.violation(self.name, "method not a string: %.200s" % msg)
            elif "id" in msg:
                self.on_server_request(msg)
            else:
                self.on_notification(msg)
            return
        if "id" not in msg or (("result" in msg) == ("error" in msg)):
            self.report.violation(self.name, "malformed response: %.200s" % msg)
            return
        if "error" in msg:
            err = msg["error"]
            if (not isinstance(err, dict) or not isinstance(err.get("code"), int)
                    or isinstance(err.get("code"), bool) or not isinstance(err.get("message"), str)):
                self.report.violation(self.name, "malformed error object: %.200s" % msg)
        rid = msg["id"]
        if rid is None:
            if "error" not in msg:
                self.report.violation(self.name, "a result with id null: %.200s" % msg)
            with self.lock:
                self.null_errors += 1
            return
        k = key_of(rid)
        with self.lock:
            entry = self.pending.pop(k, None)
            was_cancelled = k in self.cancelled
            self.cancelled.discard(k)
            if entry is None:
                if k in self.answered:
                    what = "a second answer for id %s: %.200s" % (k, msg)
                else:
                    what = "an answer with an id nobody sent: %.200s" % msg
                self.report.violation(self.name, what)
                return
            self.answered.add(k)
            self.counts["answers"] += 1
            if "error" in msg:
                self.counts["errors"] += 1
            token = self.token_of.pop(k, None)
            if token is not None:
                del self.tokens[token]
            self.lock.notify_all()
        if entry["expect_error"] and "error" not in msg:
            self.report.violation(self.name, "a bad request got a result: %.200s" % msg)
        if entry["text"] is not None and "result" in msg and not was_cancelled:
            try:
                got = msg["result"]["content"][0]["text"]
            except (KeyError, IndexError, TypeError):
                got = None
            if got != entry["text"]:
                self.report.violation(self.name, "echo %s answered with another text: %r, not %r"
                                      % (k, str(got)[:80], entry["text"][:80]))
        entry["msg"] = msg
        entry["done"].set()
        if entry["on_answer"] is not None:
            try:
                entry["on_answer"](msg)
            except Exception as e:  # a lane bug, not the server's
                self.report.violation(self.name, "soak's own callback failed: %r" % e)

    def on_notification(self, msg):
        self.counts["notifications"] += 1
        if msg["method"] == "notifications/progress":
            self.counts["progress"] += 1
            token = (msg.get("params") or {}).get("progressToken")
            with self.lock:
                known = token in self.tokens
            if not known:
                self.report.violation(self.name, "progress for no pending request: %.200s" % msg)

    def on_server_request(self, msg):
        self.counts["server_requests"] += 1
        if msg["method"] == "ping":
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
        elif msg["method"] == "roots/list":
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"roots": []}}
        else:
            answer = {"jsonrpc": "2.0", "id": msg["id"],
                      "error": {"code": -32601, "message": "method not found"}}
        self.write((json.dumps(answer) + "\n").encode())

    # -- the mix

    def handshake(self):
        _, entry, _ = self.request("initialize", {
            "protocolVersion": self.protocol, "capabilities": {"roots": {}},
            "clientInfo": {"name": "soak", "version": "1"}})
        if not entry["done"].wait(30):
            self.report.violation(self.name, "no answer to initialize in 30 s")
        self.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def echo_params(self, text):
        return {"name": "echo", "arguments": {"text": text}}

    def random_text(self, n=None):
        n = n if n is not None else self.rng.choice([1, 8, 40, 200, 2000])
        alphabet = "abcdefghijklmnopqrstuvwxyz é√😀\"\\/\n\t"
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def burst(self):
        lines = []
        for _ in range(self.rng.choice([2, 10, 50, 200])):
            text = self.random_text(self.rng.choice([1, 8, 40]))
            _, _, line = self.request("tools/call", self.echo_params(text), expect_text=text,
                                      send=False)
            lines.append(line)
        self.write(b"".join(lines))

    def pingpong(self):
        text = self.random_text()
        _, entry, _ = self.request("tools/call", self.echo_params(text), expect_text=text)
        if not entry["done"].wait(PINGPONG_LIMIT):
            self.report.violation(self.name, "ping-pong echo unanswered after %d s (%d in flight)"
                                  % (PINGPONG_LIMIT, self.in_flight()))

    def slow(self):
        ms = self.rng.choice([50, 200, 700, 1500, 3000])
        rid = self.new_id()
        token = "p-%s" % rid
        with self.lock:
            self.tokens[token] = key_of(rid)
            self.token_of[key_of(rid)] = token
        self.request("tools/call", {"name": "sleep", "arguments": {"ms": ms},
                                    "_meta": {"progressToken": token}}, rid=rid)
        if self.rng.random() < 0.5:
            self.after(self.rng.uniform(0, ms / 1000.0 * 1.2), lambda: self.cancel(rid))

    def bad_line(self):
        kind = self.rng.randrange(6)
        if kind == 0:
            line = b'{"jsonrpc":"2.0","id":'
        elif kind == 1:
            line = b'\xff\xfe{"jsonrpc":"2.0","id":1,"method":"ping"}'
        elif kind == 2:
            line = b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo",'
        elif kind == 3:
            # An invalid request with an id (a method that is not a string): an error under
            # that id.
            rid = self.new_id()
            self.request("5", None, expect_error=True, rid=rid,
                         raw=b'{"jsonrpc":"2.0","id":%s,"method":5}\n' % json.dumps(rid).encode())
            return
        elif kind == 4:
            line = b'{"a":"\xc3\x28"}'
        else:
            line = b"garbage that is not json at all"
        with self.lock:
            self.bad_sent += 1
        self.write(line + b"\n")

    def oversize(self):
        """A line just under the limit (answered) or just over (one -32600, id null)."""
        over = self.rng.random() < 0.5
        text = "x" * (self.limit - 200 if not over else self.limit + 100)
        if over:
            with self.lock:
                self.bad_sent += 1
            self.write((json.dumps({"jsonrpc": "2.0", "id": "big", "method": "tools/call",
                                    "params": self.echo_params(text)}) + "\n").encode())
        else:
            self.request("tools/call", self.echo_params(text), expect_text=text)

    def batch(self):
        with self.lock:
            self.bad_sent += 1  # 2025-11-25 refuses batches: one error, id null
        items = [{"jsonrpc": "2.0", "id": "batch-%d" % i, "method": "ping"} for i in range(3)]
        self.write((json.dumps(items) + "\n").encode())

    def task(self):
        ms = self.rng.choice([100, 400, 1200])
        self.counts["tasks"] += 1

        def created(msg):
            task = (msg.get("result") or {}).get("task")
            if not task:
                return  # an error (the server was killed), or answered without a task
            tid = task["taskId"]
            self.request("tasks/get", {"taskId": tid})
            r = self.rng.random()
            if r < 0.3:
                self.after(self.rng.uniform(0, ms / 1000.0), lambda: self.request(
                    "tasks/cancel", {"taskId": tid}))
            self.request("tasks/result", {"taskId": tid})

        self.request("tools/call", {"name": "sleep", "arguments": {"ms": ms},
                                    "task": {"ttl": 60000}}, on_answer=created)
        if self.rng.random() < 0.2:
            self.request("tasks/list", {})

    def misc(self):
        choice = self.rng.randrange(6)
        if choice == 0:
            self.request("tools/list", {})
        elif choice == 1:
            self.request("resources/read", {"uri": "mcpipe://demo/echo/soak"})
        elif choice == 2:
            self.request("prompts/get", {"name": "greet", "arguments": {"name": "soak"}})
        elif choice == 3:
            self.request("ping")
        elif choice == 4:
            self.request("tools/call", {"name": "fail", "arguments": {"message": "soak"}})
        else:
            self.request("tools/call", {"name": "panic", "arguments": {}})

    def actions(self):
        return [(self.burst, 10), (self.pingpong, 15), (self.slow, 12), (self.bad_line, 6),
                (self.oversize, 0.3), (self.batch, 2), (self.task, 5), (self.misc, 8)]

    def step(self):
        actions = self.actions()
        total = sum(w for _, w in actions)
        r = self.rng.uniform(0, total)
        for fn, w in actions:
            r -= w
            if r <= 0:
                fn()
                return

    def server_pid(self, stats):
        """The server child this lane kills (the newest one named `server_name`)."""
        pids = [p for p in descendants(self.proc.pid, stats)
                if stats[p][1] == self.proc.pid and stats[p][0] != "Z"]
        return max(pids) if pids else None

    def kill(self):
        stats = all_stats()
        pid = self.server_pid(stats)
        if pid is None:
            return
        sig = signal.SIGKILL if self.rng.random() < 0.6 else signal.SIGTERM
        try:
            os.kill(pid, sig)
            self.counts["kills"] += 1
        except ProcessLookupError:
            pass

    def drive(self, deadline):
        next_kill = now() + self.rng.uniform(5, 25)
        while now() < deadline and not self.stop.is_set():
            self.run_timers()
            if self.in_flight() < 400:
                self.step()
            if self.kill_server and now() >= next_kill:
                self.kill()
                next_kill = now() + self.rng.uniform(5, 25)
            time.sleep(self.rng.choice([0.0, 0.005, 0.02, 0.05]))
        # Let the timers that remain (cancellations) run, then wait for the answers.
        end = now() + 5
        while now() < end and self.timers:
            self.run_timers()
            time.sleep(0.05)

    def drain(self, seconds=30):
        end = now() + seconds
        with self.lock:
            while len(self.pending) > len(self.cancelled) and now() < end:
                self.lock.wait(0.2)
            left = {k: v["method"] for k, v in self.pending.items() if k not in self.cancelled}
        for k, method in list(left.items())[:20]:
            self.report.violation(self.name, "request %s (%s) never answered" % (k, method))
        return left

    def finish(self):
        """End of input; the process must exit by itself."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            status = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.report.violation(self.name, "did not exit within 30 s of end of input")
            self.proc.kill()
            status = self.proc.wait()
        self.reader.join(10)
        if self.null_errors != self.bad_sent:
            self.report.violation(self.name, "%d bad lines sent, %d errors with id null"
                                  % (self.bad_sent, self.null_errors))
        return status


class WrapFixtureLane(Lane):
    protocol = "2025-03-26"  # batches allowed: the wrapper relays them
    limit = WRAP_LIMIT
    kill_server = True

    def echo_params(self, text):
        return {"name": "echo", "arguments": {"text": text}}

    def ask(self):
        self.request("tools/call", {"name": "ask", "arguments": {}})

    def nap(self):
        rid, _, _ = self.request("tools/call", {"name": "nap", "arguments": {
            "ms": self.rng.choice([10, 100, 500])}})
        if self.rng.random() < 0.3:
            self.after(self.rng.uniform(0, 0.5), lambda: self.cancel(rid))

    def batch(self):
        lines = []
        for _ in range(self.rng.randrange(1, 6)):
            text = self.random_text(8)
            rid, _, _ = self.request("tools/call", self.echo_params(text), expect_text=text,
                                     send=False)
            lines.append({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                          "params": self.echo_params(text)})
        self.write((json.dumps(lines) + "\n").encode())

    def oversize(self):
        # Near 1 MiB (the wrapper's limit is 64 MiB: an over-limit line is rare, see below).
        if self.rng.random() < 0.1:
            with self.lock:
                self.bad_sent += 1
            self.write(b'{"jsonrpc":"2.0","id":"big","method":"x","params":"'
                       + b"y" * WRAP_LIMIT + b'"}\n')
        else:
            text = "x" * (1 << 20)
            self.request("tools/call", self.echo_params(text), expect_text=text)

    def actions(self):
        return [(self.burst, 10), (self.pingpong, 15), (self.ask, 6), (self.nap, 4),
                (self.bad_line, 6), (self.oversize, 0.1), (self.batch, 4),
                (lambda: self.request("tools/list", {}), 2)]


class WrapDemoLane(Lane):
    limit = WRAP_LIMIT
    kill_server = True

    def oversize(self):
        text = "x" * ((1 << 20) - 200)
        self.request("tools/call", self.echo_params(text), expect_text=text)


class ClientLane:
    """The Rust `SharedClient` program: it checks itself; this lane samples and kills."""

    def __init__(self, name, argv, env, rng, report, minutes):
        self.name, self.argv, self.env, self.rng, self.report = name, argv, env, rng, report
        self.counts = {"kills": 0, "stderr_lines": 0}
        self.last_status = {}
        self.summary = None
        self.stop = threading.Event()
        self.stderr_tail = []

    def spawn(self):
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=self.env, cwd=ROOT)
        self.reader = threading.Thread(target=self.read_stderr, daemon=True)
        self.reader.start()

    def read_stderr(self):
        for raw in self.proc.stderr:
            self.counts["stderr_lines"] += 1
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("soak_client: {"):
                try:
                    data = json.loads(line[len("soak_client: "):])
                except ValueError:
                    self.report.violation(self.name, "unreadable status: %s" % line[:200])
                    continue
                if "violation" in data:
                    self.report.violation(self.name, data["violation"])
                elif data.get("final"):
                    self.summary = data
                else:
                    self.last_status = data
            else:
                self.stderr_tail.append(line[:300])
                del self.stderr_tail[:-20]

    def server_pid(self, stats):
        pids = [p for p in descendants(self.proc.pid, stats)
                if stats[p][1] == self.proc.pid and stats[p][0] != "Z"]
        return max(pids) if pids else None

    def drive(self, deadline):
        while now() < deadline:
            time.sleep(min(self.rng.uniform(5, 25), max(deadline - now(), 0)))
            if now() >= deadline:
                break
            pid = self.server_pid(all_stats())
            if pid is not None:
                sig = signal.SIGKILL if self.rng.random() < 0.6 else signal.SIGTERM
                try:
                    os.kill(pid, sig)
                    self.counts["kills"] += 1
                except ProcessLookupError:
                    pass

    def drain(self, seconds=30):
        return {}

    def finish(self):
        try:
            status = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.report.violation(self.name, "soak_client did not end within 60 s of its time")
            self.proc.kill()
            status = self.proc.wait()
        self.reader.join(10)
        if status != 0:
            self.report.violation(self.name, "soak_client exited with %s; stderr: %s"
                                  % (status, self.stderr_tail[-5:]))
        if self.summary is None:
            self.report.violation(self.name, "soak_client printed no final summary")
        return status


# ---------------------------------------------------------------------------- the run
