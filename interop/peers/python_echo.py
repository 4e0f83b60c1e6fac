"""The benchmark's `echo` tool on the official MCP Python SDK (mcp 2.x, `MCPServer`), over stdio.

A peer for `scripts/bench-peers.sh`: the load driver (benches/pipe) calls `tools/call echo`
with `{"text": ...}` and checks that the text comes back as the result's first text content.
Written the way the SDK's documentation shows a tool, nothing tuned.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-sdk-echo")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Returns its text."""
    return text


if __name__ == "__main__":
    server.run("stdio")
