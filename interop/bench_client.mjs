// The official TypeScript SDK's client doing the client benchmark's echo calls (`cargo bench
// --bench client -- --sdk`, see BENCHMARKS.md "The client under load").
//
//   node interop/bench_client.mjs WARMUP CALLS WINDOW -- SERVER ARGS...
//
// Connects with `Client` + `StdioClientTransport`, makes WARMUP untimed `callTool` echo calls,
// then CALLS sequential ones (ping-pong), then CALLS more with up to WINDOW in flight
// (pipelined), checking each result's text. Prints one JSON line per scenario: calls, wall
// seconds, p50 and p99 in microseconds, and this process's CPU seconds over the timed calls.
import process from 'node:process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const split = process.argv.indexOf('--');
const [warmup, calls, windowSize] = process.argv.slice(2, split).map(Number);
const [command, ...args] = process.argv.slice(split + 1);

const textOf = (i) => String(i).padStart(10, '0') + 'x'.repeat(90);
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1e6; };
const now = () => Number(process.hrtime.bigint()) / 1e9;

function summary(scenario, wall, latencies, cpuS) {
  latencies.sort((a, b) => a - b);
  const pick = (p) => latencies[Math.round((latencies.length - 1) * p)] * 1e6;
  console.log(JSON.stringify({ scenario, calls, wall_s: wall, p50_us: pick(0.5), p99_us: pick(0.99), cpu_s: cpuS }));
}

const client = new Client({ name: 'mcpipe-bench', version: '0.0.0' }, { capabilities: {} });
const transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
await client.connect(transport);

async function echo(i) {
  const text = textOf(i);
  const result = await client.callTool({ name: 'echo', arguments: { text } });
  if (result.content[0].text !== text) throw new Error(`wrong echo result for ${text.slice(0, 10)}`);
}

for (let i = 0; i < warmup; i++) await echo(i);

let latencies = [];
let cpu0 = cpu(), t0 = now();
for (let i = 0; i < calls; i++) {
  const at = now();
  await echo(i);
  latencies.push(now() - at);
}
summary('ping-pong', now() - t0, latencies, cpu() - cpu0);

latencies = [];
cpu0 = cpu(); t0 = now();
let next = 0;
async function lane() {
  while (next < calls) {
    const i = next++;
    const at = now();
    await echo(i);
    latencies.push(now() - at);
  }
}
await Promise.all(Array.from({ length: windowSize }, lane));
summary(`pipelined-${windowSize}`, now() - t0, latencies, cpu() - cpu0);

await client.close();
