#!/usr/bin/env node
// Interop check: drive a stdio MCP server with the official TypeScript SDK client.
//
// After scripts/setup-interop.sh has run `npm install` in interop/:
//
//   node interop/ts_client.mjs -- ./target/debug/mcpipe demo
//   node interop/ts_client.mjs --mode third-party -- interop/.venv/bin/mcp-server-time
//
// Modes:
//   demo         (default) checks the contract of mcpipe's demo server: tools echo, fail,
//                sleep (with progress), stats, panic; resource mcpipe://demo/readme; a
//                resource template; prompt greet.
//   third-party  a generic check for any server: handshake, list tools, call one tool, close.
//
// Output: one line per check, `ok <name>` or `FAIL <name>: <reason>`, then a final line
// `N passed, M failed`. The exit status is 0 only when nothing failed. A watchdog
// (--timeout, default 60 s) kills the server and fails the run instead of hanging.

import process from 'node:process';

const CALL_TIMEOUT_MS = 10_000;
const CLOSE_DEADLINE_MS = 5_000;
// The demo server's echo must round-trip this exactly: multi-byte UTF-8 of every length, a
// combining mark, an embedded newline and tab (escaped on the wire), quotes, a backslash and
// U+2028 (a line separator to Unicode-aware splitters, not to JSON line framing).
const UNICODE_TEXT = 'héllo wörld — 日本語 🦀 e\u0301\nsecond line\twith "quotes" \\ and \u2028 LS';
const DEMO_TOOLS = ['echo', 'fail', 'sleep', 'stats', 'panic'];
const DEMO_CHECKS = [
  'list-tools', 'echo-unicode', 'fail-is-error', 'panic-then-echo', 'sleep-progress',
  'stats-structured', 'read-resource', 'list-resource-templates', 'get-prompt-greet',
];
const THIRD_PARTY_CHECKS = ['list-tools', 'call-tool'];

// --- reporting ------------------------------------------------------------------------

let passed = 0;
let failed = 0;
let finished = false;
// Set when the watchdog gives up: whatever the abandoned run reports afterwards is dropped.
let stopped = false;

function ok(name, detail) {
  if (stopped) return;
  passed += 1;
  console.log(`ok ${name}${detail ? ` (${detail})` : ''}`);
}

function fail(name, reason) {
  if (stopped) return;
  failed += 1;
  const flat = String(reason).split(/\s+/).join(' ').trim() || 'unknown error';
  console.log(`FAIL ${name}: ${flat}`);
}

function summary() {
  if (!finished) {
    finished = true;
    console.log(`${passed} passed, ${failed} failed`);
  }
  return failed ? 1 : 0;
}

class CheckFailed extends Error {}

function expect(cond, reason) {
  if (!cond) throw new CheckFailed(reason);
}

function describe(err) {
  if (err instanceof CheckFailed) return err.message;
  if (err && err.code === 'ENOENT') return `${err.message}`;
  return err && err.message ? `${err.name || 'Error'}: ${err.message}` : String(err);
}

function texts(blocks) {
  return (blocks || []).filter((b) => b.type === 'text').map((b) => b.text);
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

// --- arguments ------------------------------------------------------------------------

function usage(message) {
  console.error(`${message}\nusage: node ts_client.mjs [--mode demo|third-party|inputs] [--timeout S] ` +
    '[--tool NAME --args JSON] -- COMMAND [ARGS...]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { mode: 'demo', timeout: 60, tool: null, args: null, command: [] };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      i += 1;
      return argv[i];
    };
    if (a === '--') { opts.command = argv.slice(i + 1); break; }
    else if (a === '--mode') opts.mode = value();
    else if (a.startsWith('--mode=')) opts.mode = a.slice(7);
    else if (a === '--third-party') opts.mode = 'third-party';
    else if (a === '--demo') opts.mode = 'demo';
    else if (a === '--timeout') opts.timeout = Number(value());
    else if (a === '--tool') opts.tool = value();
    else if (a === '--args') opts.args = JSON.parse(value());
    else if (a === '-h' || a === '--help') usage('interop check with the TypeScript SDK client');
    else { opts.command = argv.slice(i); break; }
  }
  if (!['demo', 'third-party', 'inputs'].includes(opts.mode)) usage(`unknown mode ${opts.mode}`);
  if (!(opts.timeout > 0)) usage('--timeout must be a positive number of seconds');
  if (opts.command.length === 0) usage('missing server command (put it after --)');
  return opts;
}

// --- checks ---------------------------------------------------------------------------

async function listAllTools(client) {
  const tools = [];
  let cursor;
  for (let page = 0; page < 100; page += 1) {
    const res = await client.listTools(cursor ? { cursor } : undefined, { timeout: CALL_TIMEOUT_MS });
    tools.push(...(res.tools || []));
    cursor = res.nextCursor;
    if (!cursor) return tools;
  }
  throw new CheckFailed('tools/list pagination did not end after 100 pages');
}

function demoChecks(client, CallToolResultSchema) {
  const call = (name, args, extra = {}) =>
    client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: CALL_TIMEOUT_MS, ...extra });

  return {
    'list-tools': async () => {
      const names = new Set((await listAllTools(client)).map((t) => t.name));
      const missing = DEMO_TOOLS.filter((n) => !names.has(n));
      expect(missing.length === 0, `tools/list lacks ${JSON.stringify(missing)}; got ${JSON.stringify([...names])}`);
      return `${names.size} tools`;
    },
    'echo-unicode': async () => {
      const res = await call('echo', { text: UNICODE_TEXT });
      expect(!res.isError, `isError is true: ${JSON.stringify(res)}`);
      const got = texts(res.content);
      expect(got.length === 1 && got[0] === UNICODE_TEXT,
        `expected one text block ${JSON.stringify(UNICODE_TEXT)}, got ${JSON.stringify(got)}`);
    },
    'fail-is-error': async () => {
      const message = 'intentional failure: ünïcode';
      const res = await call('fail', { message });
      expect(res.isError === true, `isError is not true: ${JSON.stringify(res)}`);
      const joined = texts(res.content).join('\n');
      expect(joined.includes(message), `text ${JSON.stringify(joined)} does not contain ${JSON.stringify(message)}`);
    },
    'panic-then-echo': async () => {
      const res = await call('panic', {});
      expect(res.isError === true, `panic: isError is not true: ${JSON.stringify(res)}`);
      const again = await call('echo', { text: 'still alive' });
      const got = texts(again.content);
      expect(got.length === 1 && got[0] === 'still alive', `echo after panic returned ${JSON.stringify(again)}`);
    },
    'sleep-progress': async () => {
      const seen = [];
      let done = false;
      let late = 0;
      const start = Date.now();
      const res = await call('sleep', { ms: 350 }, {
        onprogress: (p) => {
          if (done) late += 1;
          seen.push(p.progress);
        },
      });
      const elapsed = Date.now() - start;
      const before = [...seen];
      done = true;
      expect(!res.isError, `sleep returned isError: ${JSON.stringify(res)}`);
      expect(elapsed >= 300, `sleep ms=350 returned after ${elapsed} ms`);
      expect(before.length >= 2, `${before.length} progress notifications before the result, wanted >= 2`);
      expect(before.every((v, i) => i === 0 || before[i - 1] < v), `progress not increasing: ${JSON.stringify(before)}`);
      // The SDK drops the handler with the response; a late notification is then only
      // visible as an unknown-token error, so watch for that through onerror (set in run()).
      await sleep(150);
      expect(late === 0, `${late} progress notification(s) arrived after the result`);
      return `${before.length} notifications in ${elapsed} ms`;
    },
    'stats-structured': async () => {
      const res = await call('stats', {});
      const sc = res.structuredContent;
      expect(sc && typeof sc === 'object' && !Array.isArray(sc), `no structuredContent object: ${JSON.stringify(res)}`);
      const missing = ['requests', 'idle_evictions', 'cache_entries'].filter((k) => !(k in sc));
      expect(missing.length === 0, `structuredContent lacks ${JSON.stringify(missing)}: ${JSON.stringify(sc)}`);
      return JSON.stringify(sc);
    },
    'read-resource': async () => {
      const res = await client.readResource({ uri: 'mcpipe://demo/readme' }, { timeout: CALL_TIMEOUT_MS });
      const contents = res.contents || [];
      expect(contents.length > 0, 'resources/read returned no contents');
      const text = contents[0].text;
      expect(typeof text === 'string' && text.trim() !== '', `first content has no text: ${JSON.stringify(contents[0])}`);
    },
    'list-resource-templates': async () => {
      const res = await client.listResourceTemplates(undefined, { timeout: CALL_TIMEOUT_MS });
      const tpls = res.resourceTemplates || [];
      expect(tpls.length > 0, 'resources/templates/list returned no templates');
      expect(tpls.every((t) => t.uriTemplate), `a template has no uriTemplate: ${JSON.stringify(tpls)}`);
      return tpls.map((t) => t.uriTemplate).join(', ');
    },
    'get-prompt-greet': async () => {
      const res = await client.getPrompt({ name: 'greet', arguments: { name: 'Ada' } }, { timeout: CALL_TIMEOUT_MS });
      const messages = res.messages || [];
      expect(messages.length > 0, 'prompts/get returned no messages');
      expect(JSON.stringify(messages).includes('Ada'), `no message mentions Ada: ${JSON.stringify(messages)}`);
    },
  };
}

// inputs mode, against `mcpipe demo --conformance`: tools that ask the client for input. This
// SDK speaks the handshake era, so the server sends elicitation, sampling and roots requests
// while the call is pending, and the handlers below answer them.
const INPUT_ANSWERS = { name: 'Alice', color: 'blue', context: 'interop context', ok: true, text: 'hello' };
const SAMPLED_TEXT = 'Paris, says the TypeScript SDK';
const ROOT_URI = 'file:///interop/root';
const INPUT_CHECKS = ['input-elicitation', 'input-sampling', 'input-roots', 'input-several-at-once',
  'input-several-rounds', 'input-prompt'];

function installInputHandlers(client, sdk, calls) {
  client.setRequestHandler(sdk.ElicitRequestSchema, async (request) => {
    calls.elicitation += 1;
    const props = (request.params.requestedSchema || {}).properties || {};
    const content = Object.fromEntries(Object.keys(props).map((k) => [k, INPUT_ANSWERS[k] ?? 'x']));
    return { action: 'accept', content };
  });
  client.setRequestHandler(sdk.CreateMessageRequestSchema, async () => {
    calls.sampling += 1;
    return { role: 'assistant', content: { type: 'text', text: SAMPLED_TEXT }, model: 'ts-sdk-test', stopReason: 'endTurn' };
  });
  client.setRequestHandler(sdk.ListRootsRequestSchema, async () => {
    calls.roots += 1;
    return { roots: [{ uri: ROOT_URI, name: 'interop' }] };
  });
}

function inputsChecks(client, CallToolResultSchema, calls) {
  const toolCheck = (tool, wanted, callback, args = {}) => async () => {
    const before = calls[callback];
    const res = await client.callTool({ name: tool, arguments: args }, CallToolResultSchema, { timeout: CALL_TIMEOUT_MS });
    expect(!res.isError, `${tool} returned isError: ${JSON.stringify(res)}`);
    const joined = texts(res.content).join(' ');
    for (const want of wanted) expect(joined.includes(want), `${tool}: ${JSON.stringify(joined)} does not contain ${JSON.stringify(want)}`);
    expect(calls[callback] > before, `the ${callback} handler was not called`);
    return joined;
  };
  return {
    'input-elicitation': toolCheck('test_input_required_result_elicitation', ['Hello, Alice!'], 'elicitation'),
    'input-sampling': toolCheck('test_sampling', [`LLM response: ${SAMPLED_TEXT}`], 'sampling', { prompt: 'Capital of France?' }),
    'input-roots': toolCheck('test_input_required_result_list_roots', [ROOT_URI], 'roots'),
    'input-several-at-once': toolCheck('test_input_required_result_multiple_inputs', ['name=Alice', SAMPLED_TEXT, ROOT_URI], 'roots'),
    'input-several-rounds': toolCheck('test_input_required_result_multi_round', ['Alice likes blue'], 'elicitation'),
    'input-prompt': async () => {
      const res = await client.getPrompt({ name: 'test_input_required_result_prompt' }, { timeout: CALL_TIMEOUT_MS });
      const blob = JSON.stringify(res.messages || []);
      expect(blob.includes(INPUT_ANSWERS.context), `prompt messages lack the elicited context: ${blob}`);
      return 'prompt got its context';
    },
  };
}

function thirdPartyChecks(client, CallToolResultSchema, opts) {
  let names = null;
  return {
    'list-tools': async () => {
      const tools = await listAllTools(client);
      expect(tools.length >= 1, 'tools/list returned no tools');
      names = tools.map((t) => t.name);
      return `${tools.length} tools`;
    },
    'call-tool': async () => {
      if (!names) names = (await listAllTools(client)).map((t) => t.name);
      let name = opts.tool;
      let args = opts.args || {};
      let want = null;
      if (!name) {
        if (names.includes('get_current_time')) { // mcp-server-time
          [name, args, want] = ['get_current_time', { timezone: 'UTC' }, 'UTC'];
        } else if (names.includes('echo')) { // server-everything
          [name, args, want] = ['echo', { message: 'hi' }, 'hi'];
        } else {
          throw new CheckFailed(`no known tool among ${JSON.stringify(names)}; pass --tool NAME --args JSON`);
        }
      }
      const res = await client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: CALL_TIMEOUT_MS });
      expect(!res.isError, `${name} returned isError: ${JSON.stringify(res)}`);
      expect((res.content && res.content.length > 0) || res.structuredContent !== undefined, `${name} returned nothing`);
      const blob = JSON.stringify(res);
      if (want) expect(blob.includes(want), `${name} result does not mention ${want}: ${blob.slice(0, 300)}`);
      const shown = texts(res.content).join(' | ') || blob;
      return `${name} -> ${shown.split(/\s+/).join(' ').slice(0, 100)}`;
    },
  };
}

// --- main -----------------------------------------------------------------------------

async function run(opts, state) {
  let sdk;
  try {
    const [clientMod, stdioMod, typesMod] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/stdio.js'),
      import('@modelcontextprotocol/sdk/types.js'),
    ]);
    sdk = { ...clientMod, ...stdioMod, ...typesMod };
  } catch (err) {
    fail('setup', `cannot load @modelcontextprotocol/sdk (${describe(err)}); run scripts/setup-interop.sh`);
    return;
  }

  const [command, ...args] = opts.command;
  const planned = { demo: DEMO_CHECKS, 'third-party': THIRD_PARTY_CHECKS, inputs: INPUT_CHECKS }[opts.mode];
  const transport = new sdk.StdioClientTransport({
    command, args, env: { ...process.env }, stderr: 'inherit',
  });
  const inputCalls = { elicitation: 0, sampling: 0, roots: 0 };
  const capabilities = opts.mode === 'inputs' ? { elicitation: {}, sampling: {}, roots: {} } : {};
  const client = new sdk.Client({ name: 'mcpipe-interop-ts', version: '0.0.0' }, { capabilities });
  if (opts.mode === 'inputs') installInputHandlers(client, sdk, inputCalls);
  const protocolErrors = [];
  client.onerror = (err) => protocolErrors.push(describe(err));
  // The SDK keeps the child private and forgets it on close; note it as soon as it exists, so
  // the close check and the cleanup paths can always find it.
  const startTransport = transport.start.bind(transport);
  transport.start = async () => {
    await startTransport();
    state.pid = transport.pid;
    state.child = transport._process || null;
    if (state.child) {
      state.child.once('exit', (code, signal) => Object.assign(state.exit, { code, signal, seen: true }));
    }
  };

  try {
    await client.connect(transport, { timeout: CALL_TIMEOUT_MS });
  } catch (err) {
    let reason = describe(err);
    if (err && err.code === 'ENOENT') reason = `cannot start server '${command}': ${reason}`;
    if (state.exit.seen) {
      reason += ` (server exited with ${state.exit.signal ? `signal ${state.exit.signal}` : `status ${state.exit.code}`})`;
    }
    fail('initialize', reason);
    for (const name of [...planned, 'no-transport-errors', 'close']) fail(name, 'not run: no session');
    await killServer(state);
    return;
  }

  const { pid, exit } = state;

  const info = client.getServerVersion();
  ok('initialize', `${info ? `${info.name} ${info.version}` : '?'}, pid ${pid}`);

  const checks = opts.mode === 'demo'
    ? demoChecks(client, sdk.CallToolResultSchema)
    : opts.mode === 'inputs'
      ? inputsChecks(client, sdk.CallToolResultSchema, inputCalls)
      : thirdPartyChecks(client, sdk.CallToolResultSchema, opts);
  for (const name of planned) {
    const before = protocolErrors.length;
    try {
      const detail = await withTimeout(checks[name](), CALL_TIMEOUT_MS + 1000, name);
      const extra = protocolErrors.slice(before);
      if (extra.length) throw new CheckFailed(`client reported protocol errors: ${extra.join('; ')}`);
      ok(name, detail);
    } catch (err) {
      fail(name, describe(err));
    }
  }

  // Faults outside any check (a banner printed on stdout before the handshake, say).
  if (protocolErrors.length) {
    fail('no-transport-errors', `${protocolErrors.length} seen: ${protocolErrors.join('; ')}`);
  } else {
    ok('no-transport-errors');
  }

  const closedAt = Date.now();
  let closeError = null;
  try {
    await withTimeout(client.close(), CLOSE_DEADLINE_MS + 2000, 'client.close()');
  } catch (err) {
    closeError = describe(err);
  }
  while (pid && alive(pid) && Date.now() - closedAt < CLOSE_DEADLINE_MS) await sleep(20);
  const took = ((Date.now() - closedAt) / 1000).toFixed(2);
  if (!pid) {
    fail('close', 'could not identify the server process');
  } else if (alive(pid)) {
    fail('close', `server pid ${pid} still running ${CLOSE_DEADLINE_MS / 1000} s after close`);
    await killServer(state);
  } else if (closeError) {
    fail('close', `server exited but close failed: ${closeError}`);
  } else if (exit.signal && opts.mode !== 'third-party') {
    // Our own server must exit by itself on stdin EOF; being killed means it did not.
    fail('close', `server did not exit on stdin EOF; killed by ${exit.signal} after ${took} s`);
  } else {
    const how = exit.seen ? (exit.signal ? `killed by ${exit.signal}` : `exit status ${exit.code}`) : 'exit status unknown';
    ok('close', `server gone after ${took} s, ${how}`);
  }
}

// Kills the server outright and waits (bounded) until node has reaped it.
async function killServer(state) {
  const { pid } = state;
  if (!pid || !alive(pid)) return;
  try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  for (let i = 0; i < 50 && alive(pid); i += 1) await sleep(20);
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const state = { pid: null, child: null, exit: { code: null, signal: null, seen: false } };
  const watchdog = setTimeout(async () => {
    fail('watchdog', `run exceeded ${opts.timeout} s`);
    stopped = true;
    await killServer(state);
    process.exit(summary() || 1);
  }, opts.timeout * 1000);
  try {
    await run(opts, state);
  } catch (err) {
    fail('internal', describe(err));
  }
  clearTimeout(watchdog);
  process.exitCode = summary();
  // Leave even if a stray handle (a dead child's pipe, a timer) would keep the loop alive.
  setTimeout(() => process.exit(process.exitCode), 100).unref();
}

main();
