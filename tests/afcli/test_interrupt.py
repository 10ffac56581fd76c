"""Ctrl-C while a tool blocks: the first one says the run is stopping and what it waits
for, the run stops without waiting for the tool, exits 130, and its recording verifies with
the tool's call recorded as interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from afcore import recording as rec

AGENTS = textwrap.dedent(
    """
    import asyncio, pathlib, time
    from afcore import Agent, define_tool, mock

    HERE = pathlib.Path(__file__).parent

    def _nap(args, ctx):
        (HERE / "started").write_text("sync")
        time.sleep(600)
        return "rested"

    async def _anap(args, ctx):
        (HERE / "started").write_text("async")
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            (HERE / "cancelled").write_text("yes")
            raise
        return "rested"

    def _agent(execute):
        nap = define_tool(name="nap", description="Sleeps.", input_schema={"type": "object"},
                          execute=execute)
        replies = [{"tool_calls": [{"id": "c1", "name": "nap", "args": {}}]}, {"content": "up"}]
        return Agent.create(provider=mock(replies=replies), model="mock").tool(nap).build()

    def sync_tool():
        return _agent(_nap)

    def async_tool():
        return _agent(_anap)
    """
)

AF = [sys.executable, "-c", "from afcli import main; main()"]


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    (tmp_path / "naps.py").write_text(AGENTS)
    env = {**os.environ, "AF_RECORDINGS": str(tmp_path / "runs"), "COLUMNS": "200"}
    return subprocess.Popen(
        [*AF, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _wait_for(path: Path, process: subprocess.Popen[bytes]) -> None:
    """Until ``path`` exists (the tool began); a guard against a hang, not a measurement."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", ["sync_tool", "async_tool"])
def test_the_first_ctrl_c_stops_a_run_whose_tool_blocks(tmp_path: Path, kind: str) -> None:
    process = _start(tmp_path, "run", f"naps.py:{kind}", "rest a while")
    _wait_for(tmp_path / "started", process)
    process.send_signal(signal.SIGINT)
    # The tool sleeps for ten minutes: ending well within one shows the run did not wait.
    out, err = process.communicate(timeout=60)
    said = err.decode()
    assert process.returncode == 130, said
    assert "stopping: cancelling nap (running" in said, said
    assert said.index("stopping:") < said.index("← nap interrupted"), said
    assert "Traceback" not in said
    assert out == b""
    if kind == "async_tool":
        assert (tmp_path / "cancelled").exists(), "the async tool was not cancelled"

    (path,) = (tmp_path / "runs").glob("*.jsonl")
    with rec.open_recording(path) as opened:
        report = rec.verify(opened)
        assert report.ok, report.problems
        assert opened.end is not None and opened.end.status == "interrupted"
        (commit,) = opened.tool_commits()
        assert commit.tool is not None and commit.tool.status == "interrupted"
        result = opened.value(commit.writes[0])
    assert result["role"] == "tool" and result["is_error"] is True
    assert "did not finish" in result["content"]


def test_a_second_ctrl_c_quits_at_once(tmp_path: Path) -> None:
    process = _start(tmp_path, "run", "naps.py:sync_tool", "rest a while")
    _wait_for(tmp_path / "started", process)
    # Both before the loop can act on the first: the second is not waited on.
    os.kill(process.pid, signal.SIGINT)
    os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()


LIBRARY = textwrap.dedent(
    """
    import sys
    from naps import sync_tool
    agent = sync_tool()
    try:
        agent.run("rest a while")
    except KeyboardInterrupt:
        print(agent.last_result.status, agent.last_result.recording)
        sys.exit(0)
    print("not interrupted")
    """
)


def test_agent_run_is_stopped_by_ctrl_c_while_a_sync_tool_blocks(tmp_path: Path) -> None:
    """The library alone: Agent.run's event loop takes the first Ctrl-C as a cancel, and a
    sync tool in its thread does not hold it."""
    (tmp_path / "naps.py").write_text(AGENTS)
    (tmp_path / "main.py").write_text(LIBRARY)
    env = {**os.environ, "AF_RECORDINGS": str(tmp_path / "runs")}
    process = subprocess.Popen(
        [sys.executable, "main.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_for(tmp_path / "started", process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()
    status, path = out.decode().split()
    assert status == "interrupted"
    with rec.open_recording(Path(path)) as opened:
        assert rec.verify(opened).ok
