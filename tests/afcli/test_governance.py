"""Governance through the command line: af run pauses, af resume continues the run in
another process after the first has exited, af show and af why say what was decided."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

from afcore import recording as rec
from tests.afcli.conftest import Invoke

BOT = dedent(
    """
    from pathlib import Path

    from afcore import Agent, ToolMiddleware, allow, ask, define_tool, mock

    AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}},
              "required": ["amount"]}
    LOG = Path(__file__).with_name("paid.log")


    def refund(args, ctx):
        with LOG.open("a") as f:
            f.write(f"{args['amount']}\\n")
        return f"refunded {args['amount']}"


    def ceiling(call):
        if call.args["amount"] > 100:
            return allow({"amount": 100}, "capped at the ceiling of 100")
        return allow()


    def make():
        return (
            Agent.create(
                provider=mock(replies=[
                    {"tool_calls": [{"id": "c1", "name": "refund", "args": {"amount": 250}}]},
                    "Refunded 100, the ceiling.",
                ]),
                model="mock",
                name="refunds",
            )
            .tool(define_tool("refund", "Refund an amount.", AMOUNT, refund))
            .tool_middleware(
                ToolMiddleware("ceiling", on_tool_call=ceiling),
                ToolMiddleware("approval", on_tool_call=lambda c: ask(
                    f"Refund {c.args['amount']} EUR?")),
            )
            .build()
        )
    """
)


def af(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``af ARGS`` in a process of its own, as a person runs it."""
    return subprocess.run(
        [sys.executable, "-c", "from afcli import main; main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_paused_run_is_resumed_by_another_process(tmp_path: Path) -> None:
    (tmp_path / "bot.py").write_text(BOT)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, AF_RECORDINGS=str(tmp_path / "recs"), PYTHONPATH=str(root))
    first = af("run", "bot.py:make", "refund me", "--json", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    outcome = json.loads(first.stdout)
    assert outcome["status"] == "paused"
    assert outcome["paused"]["question"] == "Refund 100 EUR?"
    assert outcome["paused"]["args"] == {"amount": 100}
    assert not (tmp_path / "paid.log").exists()  # the first process exited: nothing paid
    run_id = outcome["run_id"]

    asked = af("resume", run_id, cwd=tmp_path, env=env)
    assert asked.returncode == 2 and "approval asks: Refund 100 EUR?" in asked.stderr

    second = af(
        "resume",
        run_id,
        "--approve",
        "--why",
        "known customer",
        "--by",
        "jo",
        "--json",
        cwd=tmp_path,
        env=env,
    )
    assert second.returncode == 0, second.stderr
    done = json.loads(second.stdout)
    assert done["status"] == "answer" and done["answer"] == "Refunded 100, the ceiling."
    assert done["run_id"] == run_id and done["calls"] == 2
    assert (tmp_path / "paid.log").read_text() == "100\n"

    path = Path(outcome["recording"])
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok and report.calls == 2

    again = af("resume", run_id, "--approve", cwd=tmp_path, env=env)
    assert again.returncode == 2 and "is not paused (it is answer)" in again.stderr

    shown = af("show", run_id, cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "ceiling changed the arguments: capped at the ceiling of 100" in shown.stdout
    assert "⏸ paused: approval asks a person: Refund 100 EUR?" in shown.stdout
    assert "resumed: approved by jo at" in shown.stdout and "known customer" in shown.stdout

    why = af("why", run_id, "tool:refund#1.args", "--json", cwd=tmp_path, env=env)
    assert why.returncode == 0, why.stderr
    answer = json.loads(why.stdout)
    root = answer["nodes"][answer["writer"]]
    assert root["stage"] == "govern:refund"
    assert "ceiling changed the arguments: capped at the ceiling of 100" in root["decisions"]

    # Replayed in a third process: through the ceiling and the pause, answered as jo did.
    replayed = af(
        "replay", run_id, "--tools", "recorded", "--out", "replays", cwd=tmp_path, env=env
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.strip() == (
        "2 calls, identical; paused and approved by jo: known customer"
    )
    assert (tmp_path / "paid.log").read_text() == "100\n"  # served: nothing paid again
    replayed = af("replay", run_id, "--json", "--out", "replays", cwd=tmp_path, env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["resumed"] == ["approved by jo: known customer"]
    assert (tmp_path / "paid.log").read_text() == "100\n100\n"  # the tool ran again


def test_decline_through_the_command_and_show_json(tmp_path: Path, invoke: Invoke) -> None:
    (tmp_path / "bot.py").write_text(BOT)
    env = {"AF_RECORDINGS": str(tmp_path / "recs")}
    first = invoke("run", f"{tmp_path / 'bot.py'}:make", "refund me", "--json", env=env)
    assert first.code == 0
    run_id = first.json()["run_id"]
    both = invoke("resume", run_id, "--approve", "--decline", env=env)
    assert both.code == 2 and "not both" in both.err
    declined = invoke(
        "resume",
        run_id,
        "--decline",
        "--why",
        "over budget",
        "--agent",
        f"{tmp_path / 'bot.py'}:make",
        "--json",
        env=env,
    )
    assert declined.code == 0, declined.err
    assert not (tmp_path / "paid.log").exists()
    shown = invoke("show", run_id, "--json", env=env)
    assert shown.code == 0
    data = shown.json()
    governed = data["calls"][0]["governed"]
    kinds = [g["kind"] for g in governed]
    assert kinds == ["rules", "pause", "resume"]
    assert governed[2]["verb"] == "decline" and governed[2]["value"]["why"] == "over budget"
    result = data["calls"][0]["results"][0]
    assert (result["status"], result["content"]) == (
        "denied",
        "A person declined this call: over budget",
    )
