"""An agent's runs share what frames their calls (the system and tools lists, the tool
specs): each run's file holds them whole, as a fresh agent's run writes them, and a run
whose redactor replaces more (a secret its inputs named) makes its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from afcore import Agent, RecordingConfig, define_tool, mock
from afcore import recording as rec

SECRET = "Zq8vN3xLp2Wd7Ry5"


def _agent(folder: Path) -> Agent:
    replies: list[Any] = [{"tool_calls": [{"id": "c1", "name": "echo", "args": {"n": 1}}]}, "done"]
    echo = define_tool(
        "echo",
        "Echo the number.",
        {"type": "object", "properties": {"n": {"type": "integer"}}},
        lambda a, c: f"ok {a['n']}",
    )
    return (
        Agent.create(
            provider=mock(respond=lambda r: replies[sum(m.role == "tool" for m in r.messages)]),
            model="m",
            record=RecordingConfig(dir=folder),
        )
        .system(f"You echo. Greet {SECRET} first.")
        .tool(echo)
        .build()
    )


def _stored(path: Path) -> tuple[list[Any], int]:
    """The header (but what is the run's own), the blobs a file stores, in order, and how
    many values its run replaced."""
    stored, redactions = [], -1
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["t"] == "header":
            for own in ("run_id", "started_at", "seed"):
                del record[own]
            stored.append(record)
        if record["t"] == "blob":
            stored.append(record)
        elif record["t"] == "run_end":
            redactions = record["redactions"]
    return stored, redactions


def _run(agent: Agent, **kwargs: Any) -> Path:
    assert agent.run("go", **kwargs) == "done"
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.ok and report.calls == report.verified == 2, report.problems
    return path


def test_every_run_of_an_agent_stores_its_frame_as_a_fresh_agent_does(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "a")
    first, second, third = (_stored(_run(agent)) for _ in range(3))
    fresh = _stored(_run(_agent(tmp_path / "b")))
    assert first == second == third == fresh
    assert fresh[0][0]["config"]["tools"][0]["name"] == "echo"
    assert len(fresh[0]) == 4  # the header; the tool's spec, the system list, the tools list


def test_a_run_that_learned_a_secret_redacts_the_frame_it_shares(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    plain = _run(agent)
    assert SECRET.encode() in plain.read_bytes()
    # The run's state names the secret: it is replaced wherever it appears, the system
    # prompt the runs before stored included.
    learned = _run(agent, state={"password": SECRET})
    assert SECRET.encode() not in learned.read_bytes()
    blobs, redactions = _stored(learned)
    assert redactions > 0
    again = _run(agent)
    assert _stored(again) == _stored(plain)
