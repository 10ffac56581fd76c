"""Real MCP servers the tests run as subprocesses:

python -m tests.afcore.mcp_servers sdk stdio        the SDK's own MCPServer, over stdio
python -m tests.afcore.mcp_servers sdk http PORT    ... over streamable HTTP on loopback
python -m tests.afcore.mcp_servers af stdio         af tools served by mcp_serve
python -m tests.afcore.mcp_servers af http PORT
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from afcore import ResultCeiling, absent, coverage, define_tool, described_result, mcp_serve

EXPORTED_AT = "2026-08-19T10:12:00Z"
GROUND: dict[str, Any] = {
    "checked": [f"every backup job in the export of {EXPORTED_AT}"],
    "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
}


def sdk_server() -> MCPServer:
    server = MCPServer("order-desk")

    @server.tool()
    def lookup_order(order_id: str) -> str:
        """Look up an order by id; returns its status and amount."""
        return f"Order {order_id}: shipped, $299"

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool()
    def crash() -> str:
        """Ends the server's process in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    @server.tool()
    def fail(reason: str) -> str:
        """Fails with the reason given."""
        raise ValueError(reason)

    @server.tool()
    async def steps(count: int, ctx: Context) -> str:
        """Reports its progress, then answers."""
        for i in range(count):
            await ctx.report_progress(i + 1, count, f"step {i + 1} of {count}")
        await ctx.report_progress(count, count)
        return f"{count} steps done"

    @server.tool()
    def slow(seconds: float) -> str:
        """Answers after some seconds."""
        time.sleep(seconds)
        return "late"

    return server


def af_tools() -> list[Any]:
    def vm_backups(args: dict[str, Any], ctx: Any) -> Any:
        vm = args["vm"]
        if vm != "vm-01":
            return absent(what=f"backup runs for {vm}", **GROUND)
        if args.get("summary"):
            return coverage(f"{vm}: 2 of 2 backup runs succeeded", **GROUND)
        return described_result(
            facts=[{"entity": vm, "day": "2026-08-18", "ok": True}],
            provenance={"measured_at": EXPORTED_AT, "source": "Cohesity API export"},
            coverage=GROUND,
        )

    async def empty_rows(args: dict[str, Any], ctx: Any) -> Any:
        return described_result(facts=[], provenance={"measured_at": EXPORTED_AT, "source": "x"})

    def export_orders(args: dict[str, Any], ctx: Any) -> str:
        return "order,amount\n" * int(args.get("limit", 1000))

    return [
        define_tool(
            "vm_backups",
            "Backup runs for one VM, or a one-line verdict with summary: true.",
            {
                "type": "object",
                "properties": {"vm": {"type": "string"}, "summary": {"type": "boolean"}},
                "required": ["vm"],
            },
            vm_backups,
        ),
        define_tool("empty_rows", "Rows that never come.", {"type": "object"}, empty_rows),
        define_tool(
            "export_orders",
            "Export orders as CSV rows. Pass limit to bound the export.",
            {"type": "object", "properties": {"limit": {"type": "integer"}}},
            export_orders,
            result_ceiling=ResultCeiling(max_chars=2_000, narrow_by=["limit"]),
        ),
    ]


def main(argv: list[str]) -> None:
    kind, transport = argv[0], argv[1]
    port = int(argv[2]) if len(argv) > 2 else 0
    if kind == "sdk":
        server = sdk_server()
        if transport == "stdio":
            server.run("stdio")
        else:
            server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        if transport == "stdio":
            mcp_serve(af_tools(), name="backup-desk")
        else:
            mcp_serve(af_tools(), name="backup-desk", transport="http", port=port)


if __name__ == "__main__":
    main(sys.argv[1:])
