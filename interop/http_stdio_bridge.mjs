// A stdio MCP server made of a remote Streamable HTTP MCP server: the other direction of
// one_process_bridge.mjs. It lets a stdio client (ours) be run against the conformance suite's
// *client* scenarios, which start an HTTP MCP server and append its URL to the client command.
//
//   node interop/http_stdio_bridge.mjs URL
//
// What it does, and only that (no dependencies beyond Node's own `fetch`):
// - Every line on stdin is one JSON-RPC message, POSTed at once (never waiting for earlier
//   POSTs: a tool call's response stream may carry a server request that the client answers
//   by a later POST) with `Accept: application/json, text/event-stream`, the session id the
//   server gave (`Mcp-Session-Id`), `MCP-Protocol-Version` (the message's own
//   `_meta["io.modelcontextprotocol/protocolVersion"]` under 2026-07-28, else the version the
//   `initialize` answer named) and the SEP-2243 routing headers `Mcp-Method` / `Mcp-Name`.
// - The answer: `application/json` (a message or a batch) or `text/event-stream` (each event's
//   data is one message, read as it arrives) is written to stdout, one message per line;
//   202/204 without a body writes nothing.
// - A request whose POST fails (network error, an HTTP error without a JSON-RPC body) gets a
//   JSON-RPC error answer (-32603, the HTTP status and body in the message), so the client
//   never waits for an answer that cannot come.
// - Once `initialize` is answered with a session id, one GET stream for the server's messages
//   outside any POST (the SDK's servers send requests there), written to stdout like the rest.
// - Not done (see docs/revisions.md, "Our client against the suite's client scenarios"): no
//   reconnection of the GET stream, no SSE resumption (`Last-Event-ID`, `retry`),
//   no OAuth, no `Mcp-Param` headers from `x-mcp-header` tool annotations. These are the HTTP
//   transport's duties; a stdio client has none of them, so scenarios testing them would test
//   this bridge, not the client.
//
// Lifetime: at stdin EOF it waits for the POSTs still open (at most 5 s), ends the session with
// DELETE when it has one, and exits 0. SIGTERM/SIGINT/SIGHUP exit at once.
import readline from 'node:readline';

const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const DRAIN_MS = 5_000;

const url = process.argv[2];
if (!url || process.argv.length !== 3) {
  console.error('usage: node http_stdio_bridge.mjs URL');
  process.exit(2);
}

const log = (...words) => console.error('http_stdio_bridge:', ...words);

let sessionId = null;
let negotiatedVersion = null;
let lastMetaVersion = null;
const open = new Set();

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function headersFor(message) {
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  if (sessionId) headers['mcp-session-id'] = sessionId;
  const first = Array.isArray(message) ? message[0] : message;
  const params = first && typeof first === 'object' ? first.params : undefined;
  const metaVersion = params?._meta?.[VERSION_KEY];
  if (typeof metaVersion === 'string') lastMetaVersion = metaVersion;
  const version = typeof metaVersion === 'string' ? metaVersion : negotiatedVersion ?? lastMetaVersion;
  if (version) headers['mcp-protocol-version'] = version;
  if (typeof first?.method === 'string') {
    headers['mcp-method'] = first.method;
    const name = params?.name ?? params?.uri;
    if (typeof name === 'string') headers['mcp-name'] = name;
  }
  return headers;
}

// The ids of the requests in `message` (to answer them when the POST fails).
function requestIds(message) {
  const all = Array.isArray(message) ? message : [message];
  return all.filter((m) => m && typeof m.method === 'string' && m.id !== undefined).map((m) => m.id);
}

function failRequests(message, reason) {
  for (const id of requestIds(message)) {
    send({ jsonrpc: '2.0', id, error: { code: -32603, message: `bridge: ${reason}` } });
  }
}

function deliver(payload, initializeIds) {
  for (const m of Array.isArray(payload) ? payload : [payload]) {
    if (
      m &&
      initializeIds.includes(m.id) &&
      typeof m.result?.protocolVersion === 'string'
    ) {
      negotiatedVersion = m.result.protocolVersion;
    }
    send(m);
  }
}

// Reads an event stream as it arrives; each event's data lines make one message.
async function readEvents(body, initializeIds) {
  const decoder = new TextDecoder();
  let buffer = '';
  let data = [];
  const dispatch = () => {
    const text = data.join('\n');
    data = [];
    if (text.trim() === '') return; // a priming or keep-alive event
    try {
      deliver(JSON.parse(text), initializeIds);
    } catch (e) {
      log(`dropped an event that is not JSON: ${text.slice(0, 200)}`);
    }
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, end).replace(/\r$/, '');
      buffer = buffer.slice(end + 1);
      if (line === '') dispatch();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
  }
  dispatch();
}

async function post(message) {
  const all = Array.isArray(message) ? message : [message];
  const initializeIds = all.filter((m) => m?.method === 'initialize').map((m) => m.id);
  let response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: headersFor(message),
      body: JSON.stringify(message),
    });
  } catch (e) {
    failRequests(message, `POST failed: ${e.cause?.message ?? e.message}`);
    return;
  }
  const session = response.headers.get('mcp-session-id');
  if (session) sessionId = session;
  if (initializeIds.length > 0 && response.ok) {
    // After this answer: the client sends `notifications/initialized`; the server may then
    // send requests on the session's GET stream (open it once the handshake answer is in).
    setImmediate(listen);
  }
  const type = response.headers.get('content-type') ?? '';
  try {
    if (type.includes('text/event-stream')) {
      await readEvents(response.body, initializeIds);
      return;
    }
    const text = await response.text();
    if (text.trim() === '') {
      if (!response.ok) failRequests(message, `HTTP ${response.status}`);
      return;
    }
    let payload;
    try {
      payload = JSON.parse(text);
    } catch {
      failRequests(message, `HTTP ${response.status}: ${text.slice(0, 200)}`);
      return;
    }
    const isRpc = (m) => m && typeof m === 'object' && m.jsonrpc === '2.0';
    const rpc = Array.isArray(payload) ? payload.every(isRpc) : isRpc(payload);
    if (!rpc) {
      failRequests(message, `HTTP ${response.status}: ${text.slice(0, 200)}`);
      return;
    }
    // An error for the whole POST with a null id answers the request(s) that were in it.
    const ids = requestIds(message);
    if (!Array.isArray(payload) && payload.error && payload.id == null && ids.length === 1) {
      payload.id = ids[0];
    }
    deliver(payload, initializeIds);
  } catch (e) {
    failRequests(message, `reading the answer failed: ${e.message}`);
  }
}

// The session's GET stream: server requests and notifications outside any POST (the SDK's
// servers send `elicitation/create` there when it is not tied to a request). Opened once, at
// most; a server without one (405) or without a session is fine.
let listening = null;
async function listen() {
  if (listening || !sessionId) return;
  listening = new AbortController();
  const headers = { accept: 'text/event-stream', 'mcp-session-id': sessionId };
  if (negotiatedVersion) headers['mcp-protocol-version'] = negotiatedVersion;
  try {
    const response = await fetch(url, { method: 'GET', headers, signal: listening.signal });
    const type = response.headers.get('content-type') ?? '';
    if (response.ok && type.includes('text/event-stream')) {
      await readEvents(response.body, []);
    } else {
      await response.body?.cancel();
    }
  } catch (e) {
    if (e.name !== 'AbortError') log(`the GET stream ended: ${e.cause?.message ?? e.message}`);
  }
}

async function endSession() {
  listening?.abort();
  if (!sessionId) return;
  const headers = { 'mcp-session-id': sessionId };
  if (negotiatedVersion) headers['mcp-protocol-version'] = negotiatedVersion;
  try {
    await fetch(url, { method: 'DELETE', headers, signal: AbortSignal.timeout(2_000) });
  } catch {
    // The server may not support DELETE or may be gone: nothing left to do.
  }
}

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(signal, () => process.exit(0));
}

const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on('line', (line) => {
  if (line.trim() === '') return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'bridge: parse error' } });
    return;
  }
  const done = post(message).finally(() => open.delete(done));
  open.add(done);
});
input.on('close', async () => {
  const drained = Promise.allSettled([...open]);
  await Promise.race([drained, new Promise((r) => setTimeout(r, DRAIN_MS))]);
  await endSession();
  process.exit(0);
});
