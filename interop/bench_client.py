"""The official Python SDK's client doing the client benchmark's echo calls (`cargo bench --bench
client -- --sdk`, see BENCHMARKS.md "The client under load").

    interop/.venv/bin/python interop/bench_client.py WARMUP CALLS WINDOW -- SERVER ARGS...

Connects with `mcp.Client` over stdio, makes WARMUP untimed `call_tool("echo")` calls, then CALLS
sequential ones (ping-pong), then CALLS more with up to WINDOW in flight (pipelined), checking
each result's text. Prints one JSON line per scenario: calls, wall seconds, p50 and p99 in
microseconds, and this process's CPU seconds (all threads) over the timed calls.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


def text_of(i: int) -> str:
    return f"{i:010}" + "x" * 90


def summary(name: str, calls: int, wall: float, latencies: list[float], cpu: float) -> None:
    latencies.sort()
    pick = lambda p: latencies[round((len(latencies) - 1) * p)] * 1e6
    print(json.dumps({"scenario": name, "calls": calls, "wall_s": wall, "p50_us": pick(0.5),
                      "p99_us": pick(0.99), "cpu_s": cpu}), flush=True)


async def echo(client: Client, i: int) -> None:
    text = text_of(i)
    result = await client.call_tool("echo", {"text": text})
    got = result.content[0].text
    if got != text:
        raise SystemExit(f"wrong echo result for {text[:10]}: {got[:40]}")


async def main(warmup: int, calls: int, window: int, command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=60, cache=None) as client:
        for i in range(warmup):
            await echo(client, i)
        latencies = []
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(calls):
            at = time.perf_counter()
            await echo(client, i)
            latencies.append(time.perf_counter() - at)
        summary("ping-pong", calls, time.perf_counter() - t0, latencies, time.process_time() - cpu0)

        latencies = []
        in_flight: set[asyncio.Task] = set()

        async def timed(i: int) -> None:
            at = time.perf_counter()
            await echo(client, i)
            latencies.append(time.perf_counter() - at)

        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(calls):
            if len(in_flight) >= window:
                done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            in_flight.add(asyncio.create_task(timed(i)))
        for task in in_flight:
            await task
        summary(f"pipelined-{window}", calls, time.perf_counter() - t0, latencies,
                time.process_time() - cpu0)


if __name__ == "__main__":
    split = sys.argv.index("--")
    warmup, calls, window = (int(a) for a in sys.argv[1:split])
    anyio.run(main, warmup, calls, window, sys.argv[split + 1:])
