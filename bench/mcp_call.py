"""What af adds to an MCP tool call: an af tool from ``mcp_tools(command=...)`` against the
``mcp`` SDK's own ``Client.call_tool`` on the same kind of server, both over stdio.

The server (``bench/peers/mcp_echo_server.py``, the SDK's MCPServer) answers at once, so
what is timed is the call's path: for af, handing the call from the caller's event loop to
the loop that owns the session, the SDK's request and response, and reading the result
into what the model is served; for the SDK alone, ``await client.call_tool(...)`` on a
client opened in the caller's loop. Each side has its own server process, started once and
kept, as an application keeps it; rounds alternate which side goes first.

Run: ``python -m bench.mcp_call``. Target: af / SDK <= 1.25 per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from afcore import mcp_tools
from bench._report import print_table, verdict

TARGET = 1.25
SERVER = [sys.executable, "-m", "bench.peers.mcp_echo_server"]


async def bench(calls: int, rounds: int) -> tuple[list[float], list[float]]:
    tools = mcp_tools(command=SERVER, stderr=subprocess.DEVNULL)
    echo = tools[0]
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    af: list[float] = []
    sdk: list[float] = []
    try:
        async with Client(stdio_client(params, errlog=subprocess.DEVNULL)) as client:  # type: ignore[arg-type]

            async def via_af() -> float:
                start = time.perf_counter()
                for i in range(calls):
                    out = await echo.execute({"n": i}, None)  # type: ignore[arg-type]
                    assert out == f"echo {i}", out
                return (time.perf_counter() - start) / calls

            async def via_sdk() -> float:
                start = time.perf_counter()
                for i in range(calls):
                    result = await client.call_tool("echo", {"n": i})
                    assert result.content[0].text == f"echo {i}"  # type: ignore[union-attr]
                return (time.perf_counter() - start) / calls

            await via_af()  # warm-up, off the clock
            await via_sdk()
            for r in range(rounds):
                if r % 2:
                    sdk.append(await via_sdk())
                    af.append(await via_af())
                else:
                    af.append(await via_af())
                    sdk.append(await via_sdk())
    finally:
        tools.close()
    return af, sdk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per timed run")
    parser.add_argument("--rounds", type=int, default=15, help="timed runs per side")
    args = parser.parse_args()
    af, sdk = asyncio.run(bench(args.calls, args.rounds))
    ratio = min(af) / min(sdk)
    us = 1e6
    print_table(
        f"MCP tool call over stdio, {args.calls} calls x {args.rounds} runs (µs per call)",
        ["", "best", "median"],
        [
            ["af mcp_tools", f"{min(af) * us:.0f}", f"{statistics.median(af) * us:.0f}"],
            ["mcp SDK Client", f"{min(sdk) * us:.0f}", f"{statistics.median(sdk) * us:.0f}"],
            [
                "af / SDK",
                f"{ratio:.2f}",
                f"{statistics.median(af) / statistics.median(sdk):.2f}",
            ],
        ],
    )
    print(f"target af / SDK <= {TARGET}: {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
