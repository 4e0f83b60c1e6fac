#!/usr/bin/env python3
"""Soak and chaos test of the release builds: slow leaks and rare failures short tests miss.

Usage (from the repository root; Python 3 standard library only):

    cargo build --release --bin mcpipe --example soak_client
    nice -n 10 python3 scripts/soak.py [--minutes 10] [--seed N] [--sample-every 10]
                                       [--lanes demo,wrap-demo,wrap-fixture,client]
                                       [--client-threads 6] [--out DIR]
                                       [--target-dir DIR]

The binaries are taken from `--target-dir` (default `$CARGO_TARGET_DIR`, else `target/`).

It runs, side by side, for the whole run (`--minutes`, default 10), each lane one long-lived
process driven from a thread of this script:

- `demo`: `mcpipe demo --max-message-bytes 1048576` driven directly (protocol 2025-11-25);
- `wrap-demo`: `mcpipe wrap -- mcpipe demo` (the same mix), the demo killed at random
  (SIGKILL or SIGTERM, every 5-25 s) so the wrapper restarts it (`--restart-window-ms 10000`:
  a server that lived 10 s is restarted at once, one killed sooner after a growing pause);
- `wrap-fixture`: `mcpipe wrap -- python3 tests/fixtures/soak_server.py`, a misbehaving server
  (stray stdout lines, stderr chatter, a server-to-client `ping` per `ask` call, a
  single-threaded `nap`), protocol 2025-03-26 so batches are relayed, killed at random;
- `client`: `target/release/examples/soak_client`, a `SharedClient` over `mcpipe demo` used
  from 6 threads (timeouts, cancellations, tasks, `restart()`, a retry policy); this script
  kills its server at random.

The mix, drawn from one seed printed at start (`--seed` repeats a run's choices, not its
timing): pipelined bursts of `echo`, ping-pong, slow `sleep` calls with progress cancelled at
random times, bad lines (malformed JSON, invalid UTF-8, invalid requests with an id, oversize
lines just under and over the limit), batches, tasks (`tasks/get`, `tasks/result`,
`tasks/cancel`, `tasks/list`), resources and prompts, and the server's requests to the client
(answered by the lane).

Invariants checked as it goes (each breach is printed at once as `VIOLATION`): every line on
stdout is a valid JSON-RPC message; every request is answered exactly once (at most once
after the lane cancelled it); no answer carries an id nobody sent, nor the answer meant for
another request (an `echo` answer must carry its own text); every bad line gets exactly one
error with id null; progress names only requests still pending; a ping-pong request is
answered within 30 s. At the end: every pending request answered, the process exits on end of
input, every process ever seen in the lanes' trees is gone, and the private `TMPDIR` the lanes
ran with is empty.

Every `--sample-every` seconds each lane's long-lived process (and its current server child)
is sampled from /proc: VmRSS and VmHWM, open fds, threads, children and zombies among them,
plus what the lane has sent and received. The samples go to DIR/samples.jsonl, the summary to
DIR/summary.json (DIR defaults to a new directory under the system temp dir). The summary
lists per process the figures at start, after warm-up (a tenth of the run, at least 60 s) and
at the end, and flags a metric that keeps growing after the warm-up (its last third above its
middle third above its first third, by more than a margin) as a leak suspect. The exit status
is 0 only without violations and leak suspects.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time

from soak_lanes import (DEMO_LIMIT, ROOT, ClientLane, Lane, Report, WrapDemoLane,
                        WrapFixtureLane, all_stats, descendants, now)


def sample(pid, stats):
    """One process's figures, or None when it is gone (or a zombie)."""
    if pid not in stats or stats[pid][0] == "Z":
        return None
    try:
        status = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                key, _, value = line.partition(":")
                status[key] = value.strip()
        fds = len(os.listdir("/proc/%d/fd" % pid))
        threads = len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return None
    children = [p for p, (_, ppid, _) in stats.items() if ppid == pid]
    return {
        "rss_kb": int(status.get("VmRSS", "0 kB").split()[0]),
        "hwm_kb": int(status.get("VmHWM", "0 kB").split()[0]),
        "fds": fds,
        "threads": threads,
        "children": len(children),
        "zombies": sum(1 for p in children if stats[p][0] == "Z"),
    }


# ---------------------------------------------------------------------------- a JSON-RPC lane


def trend(values):
    """Whether a series keeps growing: last third > middle third > first third, by margins."""
    n = len(values)
    if n < 6:
        return False
    a, b, c = values[: n // 3], values[n // 3: 2 * n // 3], values[2 * n // 3:]
    ma, mb, mc = (sum(x) / len(x) for x in (a, b, c))
    margin = max(0.03 * ma, 1.0)
    return mb > ma + margin / 2 and mc > mb + margin / 2 and mc > ma + margin


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--lanes", default="demo,wrap-demo,wrap-fixture,client")
    parser.add_argument("--client-threads", type=int, default=6)
    parser.add_argument("--target-dir", default=os.environ.get(
        "CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    report = Report()
    report.note("soak: seed %d, %.1f minutes, lanes %s" % (seed, args.minutes, args.lanes))
    master = random.Random(seed)
    mcpipe = os.path.join(args.target_dir, "release", "mcpipe")
    client_bin = os.path.join(args.target_dir, "release", "examples", "soak_client")
    names = args.lanes.split(",")
    for binary in [mcpipe] + ([client_bin] if "client" in names else []):
        if not os.access(binary, os.X_OK):
            parser.error("%s is missing: build it first (see the header), or give --target-dir"
                         % binary)
    out = args.out or tempfile.mkdtemp(prefix="mcpipe-soak-")
    os.makedirs(out, exist_ok=True)
    private_tmp = tempfile.mkdtemp(prefix="mcpipe-soak-tmp-")
    env = dict(os.environ, TMPDIR=private_tmp)
    tmp_before = set(os.listdir("/tmp"))

    lanes = []
    for name in names:
        rng = random.Random(master.randrange(1 << 32))
        if name == "demo":
            lanes.append(Lane(name, [mcpipe, "demo", "--max-message-bytes", str(DEMO_LIMIT)],
                              env, rng, report))
        elif name == "wrap-demo":
            lanes.append(WrapDemoLane(name, [mcpipe, "wrap", "--max-restarts", "100000",
                                             "--restart-window-ms", "10000",
                                             "--", mcpipe, "demo"], env, rng, report))
        elif name == "wrap-fixture":
            lanes.append(WrapFixtureLane(name, [
                mcpipe, "wrap", "--max-restarts", "100000", "--restart-window-ms", "10000",
                "--name", "soak_server", "--",
                sys.executable, os.path.join(ROOT, "tests", "fixtures", "soak_server.py")],
                env, rng, report))
        elif name == "client":
            lanes.append(ClientLane(name, [
                client_bin, "--seconds", str(int(args.minutes * 60)), "--threads",
                str(args.client_threads), "--seed", str(master.randrange(1 << 32)), "--",
                mcpipe, "demo"], env, rng, report, args.minutes))
        else:
            parser.error("unknown lane %r" % name)

    for lane in lanes:
        lane.spawn()
    for lane in lanes:
        if isinstance(lane, Lane):
            lane.handshake()

    start = now()
    deadline = start + args.minutes * 60
    warmup = start + max(60.0, args.minutes * 6)
    seen = {}  # pid -> (starttime, lane) of every process ever in a lane's tree
    series = {}  # process label -> list of samples
    samples = open(os.path.join(out, "samples.jsonl"), "w")
    smaps_saved = []

    def save_smaps(when):
        """Each lane's memory map, to tell which mappings grew (heap, a thread's arena or
        stack) when RSS does."""
        for lane in lanes:
            try:
                shutil.copyfile("/proc/%d/smaps" % lane.proc.pid,
                                os.path.join(out, "smaps-%s-%s.txt" % (lane.name, when)))
            except OSError:
                pass

    def take_samples():
        stats = all_stats()
        t = round(now() - start, 1)
        if not smaps_saved and now() >= warmup:
            smaps_saved.append(t)
            save_smaps("warmup")
        for lane in lanes:
            root = lane.proc.pid
            for pid in [root] + descendants(root, stats):
                if pid in stats:
                    seen.setdefault(pid, (stats[pid][2], lane.name))
            figures = {lane.name: sample(root, stats)}
            spid = lane.server_pid(stats) if stats.get(root) else None
            if spid is not None:
                figures[lane.name + "/server"] = sample(spid, stats)
            for label, fig in figures.items():
                if fig is None:
                    continue
                fig = dict(fig, t=t, label=label)
                if label == lane.name:
                    fig["counts"] = dict(lane.counts)
                    if isinstance(lane, ClientLane):
                        fig["client"] = lane.last_status
                series.setdefault(label, []).append(fig)
                samples.write(json.dumps(fig) + "\n")
        samples.flush()
        line = "  ".join("%s rss=%d fds=%d thr=%d kids=%d z=%d" % (
            label, s[-1]["rss_kb"], s[-1]["fds"], s[-1]["threads"], s[-1]["children"],
            s[-1]["zombies"]) for label, s in series.items() if s[-1]["t"] == t)
        report.note(line)

    threads = [threading.Thread(target=lane.drive, args=(deadline,), daemon=True)
               for lane in lanes]
    for th in threads:
        th.start()
    take_samples()
    while now() < deadline:
        time.sleep(min(args.sample_every, max(deadline - now(), 0.01)))
        take_samples()
    for th in threads:
        th.join(120)
        if th.is_alive():
            report.violation("soak", "a lane's driver did not stop within 120 s")
    report.note("drive over; draining")
    for lane in lanes:
        lane.drain()
    take_samples()  # the last figures while the processes still live
    save_smaps("end")
    statuses = {}
    for lane in lanes:
        statuses[lane.name] = lane.finish()
        report.note("%s exited %s; counts %s" % (lane.name, statuses[lane.name], lane.counts))
    samples.close()

    # Every process ever seen in a lane's tree must be gone (a zombie is not gone).
    time.sleep(1)
    stats = all_stats()
    for pid, (starttime, lane) in seen.items():
        if pid in stats and stats[pid][2] == starttime:
            report.violation(lane, "process %d (state %s) outlived the run" % (pid, stats[pid][0]))
    # And any process started from the binaries under test, seen or not (a server restarted
    # and orphaned between two samples).
    ours = (mcpipe, client_bin, "soak_server.py")
    for pid in stats:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().decode("utf-8", "replace").split("\0")
            with open("/proc/%d/environ" % pid, "rb") as f:
                mine = ("TMPDIR=" + private_tmp).encode() in f.read().split(b"\0")
        except OSError:
            continue
        if mine and any(a in ours or a.endswith("soak_server.py") for a in argv):
            report.violation("soak", "process %d (%s) outlived the run" % (pid, " ".join(argv)))
    left = os.listdir(private_tmp)
    if left:
        report.violation("soak", "left in TMPDIR: %s" % left[:20])
    else:
        os.rmdir(private_tmp)
    tmp_new = sorted(set(os.listdir("/tmp")) - tmp_before - {os.path.basename(out)})
    if tmp_new:
        report.note("new in /tmp during the run (other sessions share it): %s" % tmp_new[:20])

    # Start, after warm-up and end of each long-lived process, and leak suspects.
    figures, suspects = {}, []
    for label, s in series.items():
        after = [x for x in s if x["t"] >= warmup - start]
        row = {"start": s[0], "warmup": after[0] if after else None, "end": s[-1],
               "max_rss_kb": max(x["rss_kb"] for x in s), "samples": len(s)}
        for x in ("start", "warmup", "end"):
            if row[x] is not None:
                row[x] = {k: row[x][k] for k in ("t", "rss_kb", "hwm_kb", "fds", "threads",
                                                 "children", "zombies")}
        figures[label] = row
        if "/server" in label:
            continue  # restarted at random: not one process
        for metric in ("rss_kb", "fds", "threads", "zombies"):
            if trend([x[metric] for x in after]):
                suspects.append("%s %s grows after warm-up: %s" % (
                    label, metric, [x[metric] for x in after][:: max(1, len(after) // 10)]))
    summary = {"seed": seed, "minutes": args.minutes, "lanes": names, "figures": figures,
               "statuses": statuses, "violations": report.violations, "leak_suspects": suspects,
               "counts": {lane.name: lane.counts for lane in lanes},
               "client_summary": next((lane.summary for lane in lanes
                                       if isinstance(lane, ClientLane)), None)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("\nseed %d, %.1f minutes; figures (t s, rss KiB, hwm KiB, fds, threads, children, "
          "zombies):" % (seed, args.minutes))
    for label, row in figures.items():
        cells = []
        for x in ("start", "warmup", "end"):
            r = row[x]
            cells.append("-" if r is None else "%s: t=%s rss=%d hwm=%d fds=%d thr=%d kids=%d z=%d"
                         % (x, r["t"], r["rss_kb"], r["hwm_kb"], r["fds"], r["threads"],
                            r["children"], r["zombies"]))
        print("  %-20s %s" % (label, " | ".join(cells)))
    for s in suspects:
        print("LEAK SUSPECT: " + s)
    print("violations: %d; leak suspects: %d; samples in %s" % (
        len(report.violations), len(suspects), out))
    return 0 if not report.violations and not suspects else 1


if __name__ == "__main__":
    sys.exit(main())
