"""The MCP server ``bench.mcp_call`` calls: the SDK's own MCPServer with one trivial tool,
over stdio. Run: ``python -m bench.peers.mcp_echo_server``."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("echo-server")


@server.tool()
def echo(n: int) -> str:
    """Echo the number back."""
    return f"echo {n}"


if __name__ == "__main__":
    server.run("stdio")
