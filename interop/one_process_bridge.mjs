// A stateless Streamable HTTP front for ONE long-lived stdio MCP server process, for the
// conformance suite's MCP 2026-07-28 scenarios that need state across requests (the `tasks-*`
// scenarios: a task made by one request is read, updated and cancelled by later ones).
//
//   node interop/one_process_bridge.mjs --port N [--path /mcp] --stdio "SHELL COMMAND"
//
// Why not supergateway: its 2026-07-28 path starts a fresh stdio process for every request (a
// stateless server may be run that way), so a task created by `tools/call` is gone when
// `tasks/get` arrives. Over stdio a client talks to one process for its whole life; this
// bridge gives the suite's HTTP client exactly that: every request goes to the same child.
//
// What it does, and only that (no dependencies beyond Node's own modules):
// - POST a JSON-RPC request: checks the SEP-2243 routing headers against the body (the
//   `MCP-Protocol-Version` header against `_meta["io.modelcontextprotocol/protocolVersion"]`,
//   `Mcp-Method` against `method`, `Mcp-Name` against `params.name` / `params.uri` /
//   `params.taskId`); a missing or different one is HTTP 400 with -32020 (HeaderMismatch). Then
//   writes the request to the child's stdin under an id of the bridge's own (so that
//   concurrent HTTP requests cannot collide), and answers the child's response as
//   `application/json` with the client's id. -32601 is HTTP 404 and -32020/-32021/-32022 are
//   HTTP 400, as supergateway does; everything else 200.
// - POST a notification: writes it to the child, answers 202.
// - The child's notifications are logged and dropped (the task scenarios poll), and so are its
//   requests (2026-07-28 servers send none).
// - Anything else (GET, DELETE, a request without the 2026-07-28 `_meta`): an error.
//
// Lifetime: the child starts in its own process group at startup; the bridge ends when its
// stdin closes or on SIGTERM/SIGINT/SIGHUP, and then stops the child's group (SIGTERM, and
// SIGKILL after 5 s). It also ends, with status 1, when the child exits.
import { spawn } from 'node:child_process';
import http from 'node:http';
import readline from 'node:readline';

const MODERN = '2026-07-28';
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const HEADER_MISMATCH = -32020;
const ANSWER_TIMEOUT_MS = 60_000;
const MAX_BODY = 16 * 1024 * 1024;

function parseArgs(argv) {
  const opts = { port: 0, path: '/mcp', stdio: '' };
  for (let i = 0; i < argv.length; i += 1) {
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
      i += 1;
      return argv[i];
    };
    if (argv[i] === '--port') opts.port = Number(next());
    else if (argv[i] === '--path') opts.path = next();
    else if (argv[i] === '--stdio') opts.stdio = next();
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!opts.stdio) throw new Error('--stdio "COMMAND" is required');
  if (!Number.isInteger(opts.port) || opts.port <= 0) throw new Error('--port N is required');
  return opts;
}

const log = (...words) => console.error(new Date().toISOString(), 'bridge:', ...words);

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (error) {
  log(`error: ${error.message}`);
  process.exit(2);
}

const child = spawn('/bin/sh', ['-c', opts.stdio], {
  stdio: ['pipe', 'pipe', 'pipe'],
  detached: true,
});
log(`child ${child.pid}: ${opts.stdio}`);
let stopping = false;

/** Pending requests by the bridge's id: the HTTP response to answer and the client's id. */
const pending = new Map();
let nextId = 1;

function stopChild() {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGTERM');
  } catch {
    // Already gone.
  }
  setTimeout(() => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }, 5000).unref();
}

function shutdown(status, why) {
  if (stopping) return;
  stopping = true;
  log(`stopping (${why})`);
  for (const { res } of pending.values()) reply(res, 503, { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'bridge stopping' } });
  pending.clear();
  server.close();
  stopChild();
  const done = () => process.exit(status);
  if (child.exitCode !== null || child.signalCode !== null) done();
  else {
    child.once('exit', done);
    setTimeout(done, 6000).unref();
  }
}

function reply(res, status, body) {
  if (res.headersSent) return;
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, body === undefined ? {} : { 'Content-Type': 'application/json' });
  res.end(text);
}

function statusFor(error) {
  if (!error) return 200;
  if (error.code === -32601) return 404;
  if ([-32020, -32021, -32022].includes(error.code)) return 400;
  return 200;
}

/** The name-shaped field SEP-2243 mirrors in `Mcp-Name`, for methods that have one. */
function nameOf(method, params) {
  if (method === 'tools/call' || method === 'prompts/get') return params?.name;
  if (method === 'resources/read') return params?.uri;
  if (['tasks/get', 'tasks/update', 'tasks/cancel'].includes(method)) return params?.taskId;
  return undefined;
}

/** A header's value without optional whitespace (RFC 9110 §5.5), or undefined. */
function header(req, name) {
  const value = req.headers[name];
  const joined = Array.isArray(value) ? value.join(', ') : value;
  return joined === undefined ? undefined : joined.trim();
}

/** Why the routing headers do not match the body, or undefined when they do. */
function headerMismatch(req, message) {
  const version = message.params?._meta?.[VERSION_KEY];
  const versionHeader = header(req, 'mcp-protocol-version');
  if (versionHeader === undefined) return 'missing MCP-Protocol-Version header';
  if (versionHeader !== version) return `MCP-Protocol-Version header ${versionHeader} does not match _meta ${version}`;
  const method = header(req, 'mcp-method');
  if (method === undefined) return 'missing Mcp-Method header';
  if (method !== message.method) return `Mcp-Method header ${method} does not match the body's method ${message.method}`;
  const name = nameOf(message.method, message.params);
  if (typeof name === 'string') {
    const nameHeader = header(req, 'mcp-name');
    if (nameHeader === undefined) return 'missing Mcp-Name header';
    if (nameHeader !== name) return `Mcp-Name header ${nameHeader} does not match the body (${name})`;
  }
  return undefined;
}

function handle(req, res, raw) {
  let message;
  try {
    message = JSON.parse(raw);
  } catch {
    reply(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
    return;
  }
  if (!message || typeof message !== 'object' || Array.isArray(message) || typeof message.method !== 'string') {
    reply(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request: one JSON-RPC request or notification per POST' } });
    return;
  }
  const isRequest = message.id !== undefined;
  if (!isRequest) {
    child.stdin.write(`${JSON.stringify(message)}\n`);
    reply(res, 202);
    return;
  }
  if (message.params?._meta?.[VERSION_KEY] !== MODERN) {
    reply(res, 400, { jsonrpc: '2.0', id: message.id, error: { code: -32600, message: `this bridge serves only MCP ${MODERN} requests (with the per-request _meta)` } });
    return;
  }
  const mismatch = headerMismatch(req, message);
  if (mismatch) {
    reply(res, 400, { jsonrpc: '2.0', id: message.id, error: { code: HEADER_MISMATCH, message: `header mismatch: ${mismatch}` } });
    return;
  }
  const id = nextId;
  nextId += 1;
  const timer = setTimeout(() => {
    pending.delete(id);
    reply(res, 504, { jsonrpc: '2.0', id: message.id, error: { code: -32603, message: 'the server did not answer in time' } });
  }, ANSWER_TIMEOUT_MS);
  pending.set(id, { res, clientId: message.id, timer });
  res.on('close', () => {
    // The client gave up: tell the server, as a stdio client would.
    if (pending.delete(id)) {
      clearTimeout(timer);
      child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'HTTP request closed' } })}\n`);
    }
  });
  child.stdin.write(`${JSON.stringify({ ...message, id })}\n`);
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname !== opts.path) {
    reply(res, 404, { jsonrpc: '2.0', id: null, error: { code: -32000, message: 'not found' } });
    return;
  }
  if (req.method !== 'POST') {
    res.writeHead(405, { Allow: 'POST' });
    res.end();
    return;
  }
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) {
      reply(res, 413, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'request too large' } });
      req.destroy();
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!res.headersSent) handle(req, res, Buffer.concat(chunks).toString('utf8'));
  });
});

readline.createInterface({ input: child.stdout }).on('line', (line) => {
  if (!line.trim()) return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    log(`child wrote a non-JSON line: ${line.slice(0, 200)}`);
    return;
  }
  if (message.method !== undefined) {
    log(`child ${message.id === undefined ? 'notification' : 'request'} dropped: ${message.method}`);
    return;
  }
  const entry = pending.get(message.id);
  if (!entry) {
    log(`answer to an unknown or abandoned request ${JSON.stringify(message.id)}`);
    return;
  }
  pending.delete(message.id);
  clearTimeout(entry.timer);
  reply(entry.res, statusFor(message.error), { ...message, id: entry.clientId });
});
readline.createInterface({ input: child.stderr }).on('line', (line) => log(`child stderr: ${line}`));

child.on('exit', (code, signal) => {
  if (!stopping) {
    log(`child exited (code ${code}, signal ${signal})`);
    shutdown(1, 'the child exited');
  }
});
child.on('error', (error) => {
  log(`child failed: ${error.message}`);
  shutdown(1, 'the child failed');
});

process.stdin.on('end', () => shutdown(0, 'stdin closed'));
process.stdin.on('error', () => shutdown(0, 'stdin failed'));
process.stdin.resume();
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.on(signal, () => shutdown(0, signal));

server.listen(opts.port, '127.0.0.1', () => log(`listening on http://127.0.0.1:${opts.port}${opts.path}`));
