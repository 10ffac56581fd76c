"""``af replay`` of a run whose tool results say more than their text (their status, limits
that travel with the answer, a ceiling's refusal, the agent's cap, the repeated-call nudge,
a required instruction, an agent called as a tool): identical with the tools run again and
with their recorded results served, each commit written again as recorded."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import recording
from tests.afcli.conftest import Invoke

AGENT = """
from pathlib import Path

from afcore import Agent, agent_tool, define_tool, mock
from afcore.tools import ResultCeiling, coverage

HERE = Path(__file__).parent
OPEN = {"type": "object", "properties": {}}
BIG = "".join(f"{i:05d}\\n" for i in range(1000))


def tool(name, fn, **kw):
    return define_tool(name, f"The {name} tool.", OPEN, fn, **kw)


def health(args, ctx):
    return coverage(
        "healthy",
        checked=["pair state on all 4 arrays"],
        not_checked=[{"what": "migration sessions", "why": "the API timed out"}],
    )


def refund(args, ctx):
    return {
        "content": "refund refused: outside the window",
        "status": "denied",
        "effects": [
            {"kind": "require-instruction", "instruction_id": "playbook", "lease": "next-call"}
        ],
    }


def batch(*calls):
    args = {"translate": {"message": "Hello"}}
    return {
        "tool_calls": [
            {"id": f"c{n}", "name": name, "args": args.get(name, {})} for n, name in calls
        ]
    }


def make():
    inner = (
        Agent.create(
            provider=mock(replies=["Hola"]), model="m", name="translator", record=HERE / "inner"
        )
        .system("Translate to Spanish.")
        .build()
    )
    replies = [
        batch((1, "health"), (2, "export"), (3, "dump")),
        batch((4, "search"), (5, "refund")),
        batch((6, "search"), (7, "translate")),
        "All fine.",
    ]
    return (
        Agent.create(
            provider=mock(replies=replies),
            model="m",
            name="desk",
            record=HERE / "runs",
            max_tool_result_chars=600,
        )
        .tool(tool("health", health))
        .tool(tool("export", lambda a, c: BIG, result_ceiling=ResultCeiling(max_chars=2000)))
        .tool(tool("dump", lambda a, c: BIG))
        .tool(tool("search", lambda a, c: "3 rows"))
        .tool(tool("refund", refund))
        .tool(agent_tool(inner, name="translate", description="Translate text to Spanish."))
        .instruction("Name the policy.", id="playbook", when=lambda s: False)
        .limits_travel_with_the_answer()
        .build()
    )
"""


def records(path: Path) -> list[dict[str, Any]]:
    return [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r["t"] != "seal"]


def outcomes(path: Path) -> list[dict[str, Any]]:
    """Each tool commit's outcome, but for what differs between any two runs (the time a
    tool took, the id and file of the run an agent tool made)."""
    out = []
    for r in records(path):
        if r["t"] == "commit" and "tool" in r:
            tool = {k: v for k, v in r["tool"].items() if k != "ms"}
            if "run" in tool:
                tool["run"] = {k: tool["run"][k] for k in ("agent", "status")}
            out.append(tool)
    return out


def writes(path: Path, prefix: str) -> dict[str, Any]:
    with recording.open_recording(path) as rec:
        return {
            w.key: rec.value(w)
            for _, r in rec.records(blobs=False)
            for w in getattr(r, "writes", ())
            if w.key.startswith(prefix)
        }


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path]:
    module = tmp_path / "desk.py"
    module.write_text(AGENT)
    spec = importlib.util.spec_from_file_location("desk_for_replay", module)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    agent = loaded.make()
    answer = agent.run("is everything healthy?")
    assert answer.startswith("All fine.\n\n---\n\n")  # the limits travelled
    assert agent.last_recording is not None
    return module, agent.last_recording


def test_the_run_holds_what_the_replay_must_keep(recorded: tuple[Path, Path]) -> None:
    _, path = recorded
    got = {o["name"]: o for o in outcomes(path)}
    assert got["health"]["result_status"] == "success"
    assert got["export"]["result_status"] == "invalid" and "ceiling" in got["export"]
    assert got["dump"]["result_status"] == "partial" and "truncated" in got["dump"]
    assert [o.get("repeat") is not None for o in outcomes(path) if o["name"] == "search"] == [
        False,
        True,
    ]
    assert got["refund"]["effects"][0]["outcome"] == "accepted"
    assert got["translate"]["run"] == {"agent": "translator", "status": "answer"}
    assert set(writes(path, "limits:")) == {"limits:health#1"}


@pytest.mark.parametrize("tools", ["run", "recorded"])
def test_af_replay_of_it_is_identical(
    invoke: Invoke, recorded: tuple[Path, Path], tmp_path: Path, tools: str
) -> None:
    module, path = recorded
    out = tmp_path / f"replayed-{tools}"
    ran = invoke("replay", path, f"{module}:make", "--tools", tools, "--json", "--out", out)
    assert ran.code == 0, ran.out + ran.err
    data = ran.json()
    assert data["status"] == "identical" and data["divergence"] is None, data
    assert data["calls"] == data["identical_calls"] == 4
    again = Path(data["recording"])
    # Each commit written again as recorded: the result's status, the ceiling, the cut, the
    # nudge, the effect and the agent tool's run; the limits, and the answer they end.
    assert outcomes(again) == outcomes(path)
    assert writes(again, "limits:") == writes(path, "limits:")
    assert writes(again, "answer") == writes(path, "answer")
    assert recording.verify(recording.open_recording(again)).ok


def test_a_tool_that_now_reads_otherwise_is_a_difference(
    invoke: Invoke, recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    module, path = recorded
    changed = tmp_path / "changed.py"
    changed.write_text(
        module.read_text().replace(
            '"refund refused: outside the window",\n        "status": "denied"',
            '"refund refused: outside the window",\n        "status": "pending"',
        )
    )
    assert changed.read_text() != module.read_text()
    ran = invoke("replay", path, f"{changed}:make", "--json", "--out", tmp_path / "r")
    assert ran.code == 1, ran.out + ran.err
    d = ran.json()["divergence"]
    assert (d["slot"], d["path"]) == ("tool_result", "tool:refund#1: result_status")
    assert (d["recorded"], d["replayed"]) == ("denied", "pending")
