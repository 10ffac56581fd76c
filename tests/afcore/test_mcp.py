"""MCP both ways, against real servers run as subprocesses: the SDK's own MCPServer and af
tools served by mcp_serve, over stdio and over streamable HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, McpError, UsageError, mcp_tools, mock
from afcore import recording as rec
from afcore.messages import Request
from afcore.replay import replay
from afcore.tools import ABSENCE_NOTE, McpTools, mcp_server, read_result
from tests.conftest import fixed_recording

ROOT = Path(__file__).resolve().parents[2]


def server_command(kind: str) -> list[str]:
    return [sys.executable, "-m", "tests.afcore.mcp_servers", kind, "stdio"]


def stdio_tools(kind: str, **kwargs: Any) -> McpTools:
    return mcp_tools(command=server_command(kind), cwd=ROOT, stderr=subprocess.DEVNULL, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpServer:
    def __init__(self, kind: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.afcore.mcp_servers", kind, "http", str(self.port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the {kind} MCP server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def sdk_stdio() -> Iterator[McpTools]:
    with stdio_tools("sdk") as tools:
        yield tools


@pytest.fixture
def sdk_http() -> Iterator[HttpServer]:
    server = HttpServer("sdk")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def af_http() -> Iterator[HttpServer]:
    server = HttpServer("af")
    yield server
    server.stop()


def by_name(tools: McpTools) -> dict[str, Any]:
    return {t.name: t for t in tools}


async def call(tools: McpTools, name: str, args: dict[str, Any]) -> Any:
    return await by_name(tools)[name].execute(args, None)


def mcp_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("af-mcp:")]


# -- an MCP server's tools as af tools ----------------------------------------------------


def test_stdio_server_tools_become_af_tools_named_by_their_server(sdk_stdio: McpTools) -> None:
    assert sdk_stdio.server == "order-desk"
    assert [t.name for t in sdk_stdio] == ["lookup_order", "pid", "crash", "fail", "steps", "slow"]
    lookup = by_name(sdk_stdio)["lookup_order"]
    assert lookup.source == "mcp:order-desk"
    assert lookup.description == "Look up an order by id; returns its status and amount."
    assert lookup.input_schema["required"] == ["order_id"]
    assert lookup.is_async
    assert asyncio.run(call(sdk_stdio, "lookup_order", {"order_id": "A-7"})) == (
        "Order A-7: shipped, $299"
    )


def test_a_tool_error_from_the_server_is_an_error_naming_the_server(sdk_stdio: McpTools) -> None:
    with pytest.raises(McpError, match="Error executing tool fail") as caught:
        asyncio.run(call(sdk_stdio, "fail", {"reason": "no such order"}))
    assert caught.value.server == "order-desk"


def test_a_call_over_its_timeout_is_an_error_and_the_session_goes_on() -> None:
    # The session's next call must answer within the same timeout on a loaded machine: a
    # timeout of seconds, and a call that takes several times as long.
    with stdio_tools("sdk", timeout=2) as tools:
        with pytest.raises(McpError, match=r"did not answer within 2 s"):
            asyncio.run(call(tools, "slow", {"seconds": 8}))
        assert asyncio.run(call(tools, "lookup_order", {"order_id": "B"})).startswith("Order B")


def test_a_stdio_server_that_dies_mid_call_is_an_error_then_starts_again() -> None:
    with stdio_tools("sdk") as tools:
        first = asyncio.run(call(tools, "pid", {}))
        with pytest.raises(McpError, match="stopped during the call") as caught:
            asyncio.run(call(tools, "crash", {}))
        assert "started again at the next call" in str(caught.value)
        second = asyncio.run(call(tools, "pid", {}))
        assert second.isdigit() and second != first


def test_several_calls_at_once_share_one_session(sdk_stdio: McpTools) -> None:
    async def many() -> list[Any]:
        return await asyncio.gather(
            *(call(sdk_stdio, "lookup_order", {"order_id": str(i)}) for i in range(8)),
            call(sdk_stdio, "pid", {}),
            call(sdk_stdio, "pid", {}),
        )

    out = asyncio.run(many())
    assert out[:8] == [f"Order {i}: shipped, $299" for i in range(8)]
    assert out[8] == out[9]


def test_http_server_tools_and_a_server_that_dies_mid_call(sdk_http: HttpServer) -> None:
    with mcp_tools(url=sdk_http.url, headers={"X-Trace": "t1"}) as tools:
        assert tools.server == "order-desk"
        assert by_name(tools)["pid"].source == "mcp:order-desk"
        assert asyncio.run(call(tools, "lookup_order", {"order_id": "H"})) == (
            "Order H: shipped, $299"
        )
        with pytest.raises(McpError, match="stopped during the call"):
            asyncio.run(call(tools, "crash", {}))
        sdk_http.process.wait(60)
        with pytest.raises(McpError, match="could not be reached"):
            asyncio.run(call(tools, "pid", {}))


def test_include_prefix_and_name(sdk_stdio: McpTools) -> None:
    with stdio_tools("sdk", include=["pid", "lookup_order"], prefix="desk_", name="orders") as t:
        assert [x.name for x in t] == ["desk_pid", "desk_lookup_order"]
        assert t.server == "orders" and t[0].source == "mcp:orders"
        assert asyncio.run(call(t, "desk_lookup_order", {"order_id": "P"})).startswith("Order P")
    with pytest.raises(UsageError, match="has no tool 'nope'; it has lookup_order, pid"):
        stdio_tools("sdk", include=["nope"])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({}, "one of them"),
        ({"command": ["x"], "url": "http://127.0.0.1:1/mcp"}, "one of them"),
        ({"command": "python server.py"}, "as a list"),
        ({"command": []}, "as a list"),
        ({"url": "127.0.0.1:8000/mcp"}, "http"),
        ({"command": ["x"], "timeout": 0}, "seconds > 0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    kwargs: dict[str, Any], words: str
) -> None:
    before = len(mcp_threads())
    with pytest.raises(UsageError, match=words):
        mcp_tools(**kwargs)
    assert len(mcp_threads()) == before


def test_a_server_that_cannot_start_is_an_error_and_leaves_nothing_running() -> None:
    before = len(mcp_threads())
    with pytest.raises(McpError, match="'no-such-mcp-server' could not be started"):
        mcp_tools(command=["no-such-mcp-server"], stderr=subprocess.DEVNULL)
    with pytest.raises(McpError, match="could not be reached"):
        mcp_tools(url=f"http://127.0.0.1:{free_port()}/mcp", connect_timeout=5)
    assert len(mcp_threads()) == before


def test_close_stops_the_server_and_later_calls_are_errors() -> None:
    before = set(mcp_threads())
    tools = stdio_tools("sdk")
    pid = int(asyncio.run(call(tools, "pid", {})))
    (thread,) = set(mcp_threads()) - before
    assert thread.name == "af-mcp:order-desk"
    tools.close()
    tools.close()
    assert tools.closed and not thread.is_alive()
    deadline = time.monotonic() + 60  # a guard, not a measure
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    with pytest.raises(McpError, match="were closed"):
        asyncio.run(call(tools, "pid", {}))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


# -- an agent calling MCP tools, end to end ---------------------------------------------------


def _timeless(outcome: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in outcome.items() if k != "ms"}


def test_an_agent_calls_mcp_tools_across_runs_sync_and_async(tmp_path: Path) -> None:
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            return {
                "tool_calls": [
                    {"id": "c1", "name": "lookup_order", "args": {"order_id": "A-1"}},
                    {"id": "c2", "name": "pid", "args": {}},
                ]
            }
        seen.append([m.content for m in request.messages if m.role == "tool"])
        if len(request.messages) == 4:
            return {"tool_calls": [{"id": "c3", "name": "crash", "args": {}}]}
        return "Order A-1 has shipped."

    with stdio_tools("sdk") as tools:
        agent = (
            Agent.create(
                provider=mock(respond=respond), model="mock", record=fixed_recording(tmp_path)
            )
            .system("You answer order questions with the MCP tools provided.")
            .tools(tools)
            .build()
        )
        assert agent.run("Where is order A-1?") == "Order A-1 has shipped."
        assert seen[0][0] == "Order A-1: shipped, $299"
        pid = seen[0][1]
        path = agent.last_recording
        assert path is not None
        report = rec.verify(rec.open_recording(path))
        assert report.ok, report
        lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
        statuses = [r["tool"]["status"] for r in lines if r.get("tool")]
        assert statuses == ["ok", "ok", "error"]  # the crash is an error result, not a crash
        # Each call is recorded with the server's name as its source, and its result status.
        outcomes = [r["tool"] for r in lines if r.get("tool")]
        assert {o["source"] for o in outcomes} == {"mcp:order-desk"}
        assert [o["result_status"] for o in outcomes] == ["success", "success", "failure"]
        crashed = seen[1][2]
        assert "The tool crash failed: McpError: the MCP server 'order-desk' stopped" in crashed
        # Replayed with the recorded results served (no server asked): each call is written
        # again as recorded, its server as source and its result status included.
        replayed = replay(path, agent, tools="recorded", out=tmp_path / "replayed")
        assert replayed.ok, replayed.summary()
        assert replayed.recording is not None
        again = [orjson.loads(x) for x in Path(replayed.recording).read_bytes().splitlines()]
        assert [_timeless(r["tool"]) for r in again if r.get("tool")] == [
            _timeless(o) for o in outcomes
        ]
        # the same agent again, async this time: the server was started again after the crash
        agent2 = (
            Agent.create(provider=mock(respond=respond), model="mock", record=tmp_path)
            .tools(tools)
            .build()
        )
        seen.clear()
        assert asyncio.run(agent2.arun("Where is order A-1?")) == "Order A-1 has shipped."
        assert seen[0][1] != pid and seen[0][1].isdigit()
        assert rec.verify(rec.open_recording(agent2.last_recording)).ok  # type: ignore[arg-type]


def test_limits_declared_by_an_af_tool_travel_over_mcp_as_data(
    af_http: HttpServer, tmp_path: Path
) -> None:
    seen: list[str] = []

    def respond(request: Request) -> Any:
        if request.messages[-1].role == "user":
            return {"tool_calls": [{"id": "c1", "name": "vm_backups", "args": {"vm": "vm-99"}}]}
        seen.append(request.messages[-1].content)
        return "No backup runs for vm-99."

    with mcp_tools(url=af_http.url) as tools:
        assert tools.server == "backup-desk"
        agent = (
            Agent.create(provider=mock(respond=respond), model="mock", record=tmp_path)
            .tools(tools)
            .build()
        )
        assert agent.run("Backups of vm-99?") == "No backup runs for vm-99."
        served = json.loads(seen[0])
        assert served["af_absent"] is True and served["note"] == ABSENCE_NOTE
        # Read inside the run by the one rule: an absence, its limits kept on the record.
        assert agent.last_recording is not None
        lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
        [tool] = [r for r in lines if r.get("tool")]
        assert tool["tool"]["result_status"] == "absent"
        assert tool["tool"]["source"] == "mcp:backup-desk"
        assert any(w["key"] == "limits:vm_backups#1" for w in tool["writes"])
        assert read_result(asyncio.run(call(tools, "vm_backups", {"vm": "vm-99"}))).status == (
            "absent"
        )
        described = asyncio.run(call(tools, "vm_backups", {"vm": "vm-01"}))
        assert described["not_covered"] == ["PPDM — not collected on this install"]


def test_a_refusal_inside_a_served_tool_reaches_the_model_as_a_refusal(
    tmp_path: Path,
) -> None:
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if request.messages[-1].role == "user":
            return {
                "tool_calls": [
                    {"id": "c1", "name": "empty_rows", "args": {}},
                    {"id": "c2", "name": "export_orders", "args": {}},
                ]
            }
        seen.extend(m for m in request.messages if m.role == "tool")
        return "ok"

    with stdio_tools("af") as tools:
        agent = Agent.create(provider=mock(respond=respond), model="mock").tools(tools).build()
        agent.run("rows?")
    refusal, ceiling = seen
    assert refusal.is_error and refusal.content == (
        "refused: `facts` is empty — if nothing matched, return absent(what=..., checked=[...]) "
        "instead. (field: facts)"
    )
    assert ceiling.is_error and ceiling.content.endswith(
        "Result too large: export_orders returned 13000 chars, over its declared 2000-char "
        "ceiling. Narrow the request and call again — e.g. pass 'limit'. No data was returned."
    )


def test_a_servers_progress_is_recorded_as_the_tools_progress(tmp_path: Path) -> None:
    replies = [
        {"tool_calls": [{"id": "c1", "name": "steps", "args": {"count": 3}}]},
        "Done in three steps.",
    ]
    with stdio_tools("sdk", include=["steps"]) as tools:
        agent = (
            Agent.create(provider=mock(replies=replies), model="mock", record=tmp_path)
            .tools(tools)
            .build()
        )
        assert agent.run("go") == "Done in three steps."
    assert agent.last_recording is not None
    lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
    kinds = [r["t"] for r in lines if r["t"].startswith("tool_")]
    assert kinds == [
        "tool_progress",
        "tool_progress",
        "tool_progress",
        "tool_progress",
    ]
    reports = [r for r in lines if r["t"] == "tool_progress"]
    # MCP's own fields, kept as the server sent them; `message` is what a person reads, and
    # a report with none is shown as the tool having reported, never as its numbers.
    assert [r["message"] for r in reports] == [
        "step 1 of 3",
        "step 2 of 3",
        "step 3 of 3",
        "steps reported progress (4 times)",
    ]
    assert [r["payload"] for r in reports][2:] == [
        {"progress": 3.0, "total": 3.0, "message": "step 3 of 3"},
        {"progress": 3.0, "total": 3.0},
    ]
    assert rec.verify(rec.open_recording(agent.last_recording)).ok


# -- af tools served to any MCP host: the SDK's own client as the host ------------------------


def test_mcp_serve_over_stdio_to_the_sdks_own_client() -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def host() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=server_command("af")[1:], cwd=str(ROOT)
        )
        async with Client(stdio_client(params, errlog=subprocess.DEVNULL)) as client:  # type: ignore[arg-type]
            assert client.server_info is not None and client.server_info.name == "backup-desk"
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == ["vm_backups", "empty_rows", "export_orders"]
            assert listed[0].input_schema["required"] == ["vm"]
            found = await client.call_tool("vm_backups", {"vm": "vm-99"})
            assert not found.is_error
            assert found.structured_content["af_absent"] is True
            assert json.loads(found.content[0].text) == found.structured_content  # type: ignore[union-attr]
            summary = await client.call_tool("vm_backups", {"vm": "vm-01", "summary": True})
            assert summary.structured_content["result"] == "vm-01: 2 of 2 backup runs succeeded"
            bad = await client.call_tool("vm_backups", {"vm": 7})
            assert bad.is_error
            assert "at $.vm: expected string" in bad.content[0].text  # type: ignore[union-attr]
            small = await client.call_tool("export_orders", {"limit": 2})
            assert small.content[0].text == "order,amount\norder,amount\n"  # type: ignore[union-attr]
            assert small.structured_content is None

    asyncio.run(host())


def test_mcp_serve_over_http_to_the_sdks_own_client(af_http: HttpServer) -> None:
    from mcp import Client, MCPError

    async def host() -> None:
        async with Client(af_http.url) as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == {"vm_backups", "empty_rows", "export_orders"}
            refused = await client.call_tool("empty_rows", {})
            assert refused.is_error
            assert refused.content[0].text.startswith("refused: `facts` is empty")  # type: ignore[union-attr]
            with pytest.raises(MCPError, match="there is no tool named 'nope'"):
                await client.call_tool("nope", {})

    asyncio.run(host())


def test_mcp_server_refuses_what_it_cannot_serve() -> None:
    from afcore import define_tool

    t = define_tool("x", "d", {"type": "object"}, lambda a, c: "")
    with pytest.raises(UsageError, match="two tools are named 'x'"):
        mcp_server([t, t])
    with pytest.raises(UsageError, match="made by define_tool"):
        mcp_server([lambda a, c: ""])  # type: ignore[list-item]


def test_the_mcp_benchmark_runs_both_sides_and_checks_every_answer() -> None:
    from bench.mcp_call import bench

    af, sdk = asyncio.run(bench(calls=3, rounds=2))
    assert len(af) == len(sdk) == 2 and all(x > 0 for x in af + sdk)
