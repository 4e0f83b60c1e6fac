// The benchmark's `echo` tool on the official MCP TypeScript SDK (McpServer), over stdio.
//
// A peer for scripts/bench-peers.sh: the load driver (benches/pipe) calls `tools/call echo`
// with {"text": ...} and checks that the text comes back as the result's first text content.
// Written the way the SDK's documentation shows a tool, nothing tuned. Resolves the SDK from
// interop/node_modules (scripts/setup-interop.sh installs it).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'typescript-sdk-echo', version: '0.0.0' });

server.registerTool(
  'echo',
  { description: 'Returns its text.', inputSchema: { text: z.string() } },
  async ({ text }) => ({ content: [{ type: 'text', text }] }),
);

await server.connect(new StdioServerTransport());
