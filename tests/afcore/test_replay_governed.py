"""Replaying governed runs: tool middleware walked again (or its recorded decisions kept
when the tools' results are served), a run that paused for a person replayed through its
pause with the answer the person gave, and each way a replay departs from such a run named."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, Paused, RecordingConfig, ToolMiddleware, allow, ask, deny, mock
from afcore import recording as rec
from afcore.replay import replay
from tests.afcore.test_governance import AMOUNT, REFUND_250, Script
from tests.conftest import fixed_recording

REFUND_40 = {"id": "c2", "name": "refund", "args": {"amount": 40}}


def fresh(tmp_path: Path, name: str) -> RecordingConfig:
    return dataclasses.replace(fixed_recording(tmp_path / name), run_id=None)


def refunds(
    record: RecordingConfig, paid: list[Any], *links: ToolMiddleware, calls: tuple[Any, ...] = ()
) -> Agent:
    from afcore import define_tool

    def execute(args: dict[str, Any], ctx: Any) -> str:
        paid.append(dict(args))
        return f"refunded {args['amount']} to card 4111 1111 1111 1111"

    script = Script(*(calls or (REFUND_250,)))
    return (
        Agent.create(provider=mock(respond=script), model="m", name="refunds", record=record)
        .tool(define_tool("refund", "Refund an amount.", AMOUNT, execute))
        .tool_middleware(*links)
        .build()
    )


def ceiling(limit: int) -> ToolMiddleware:
    def check(call: Any) -> Any:
        if call.args["amount"] > limit:
            return allow({"amount": limit}, f"capped at {limit}")
        return allow()

    return ToolMiddleware("ceiling", on_tool_call=check)


def masked(seen: list[str]) -> ToolMiddleware:
    def mask(result: Any) -> Any:
        seen.append(result.content)
        return allow(result.content.replace("4111 1111 1111 1111", "card ending 1111"), "masked")

    return ToolMiddleware("mask", on_tool_result=mask)


def approval(question: str = "Refund {}?") -> ToolMiddleware:
    return ToolMiddleware("approval", on_tool_call=lambda c: ask(question.format(c.args["amount"])))


def verified(path: Path | None) -> None:
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, [str(p) for p in report.problems]


# -- tool middleware ---------------------------------------------------------------------------


@pytest.fixture
def governed(tmp_path: Path) -> Path:
    """A run whose first call's arguments a link changed, whose second a link denied, and
    whose results a link masked."""
    no_small = ToolMiddleware(
        "no-small", on_tool_call=lambda c: deny("too small") if c.args["amount"] < 50 else allow()
    )
    paid: list[Any] = []
    agent = refunds(
        fresh(tmp_path, "run"),
        paid,
        ceiling(100),
        no_small,
        masked([]),
        calls=(REFUND_250, REFUND_40),
    )
    assert agent.run("refund") == "read: too small"
    assert paid == [{"amount": 100}]
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        assert r.message(3)["content"] == "refunded 100 to card card ending 1111"
    return path


def links(seen: list[str], limit: int = 100) -> tuple[ToolMiddleware, ...]:
    no_small = ToolMiddleware(
        "no-small", on_tool_call=lambda c: deny("too small") if c.args["amount"] < 50 else allow()
    )
    return ceiling(limit), no_small, masked(seen)


def test_a_governed_run_replays_identical_with_its_tools_run_again(
    governed: Path, tmp_path: Path
) -> None:
    paid: list[Any] = []
    seen: list[str] = []
    agent = refunds(fresh(tmp_path, "x"), paid, *links(seen), calls=(REFUND_250, REFUND_40))
    report = replay(governed, agent, out=tmp_path / "r")
    assert report.summary() == "3 calls, identical"
    # The links decided again: the capped call ran, the denied one did not.
    assert paid == [{"amount": 100}] and len(seen) == 1
    verified(report.recording)


def test_served_results_are_not_walked_through_the_result_chain_again(
    governed: Path, tmp_path: Path
) -> None:
    paid: list[Any] = []
    seen: list[str] = []
    agent = refunds(fresh(tmp_path, "x"), paid, *links(seen), calls=(REFUND_250, REFUND_40))
    report = replay(governed, agent, out=tmp_path / "r", tools="recorded")
    assert report.summary() == "3 calls, identical"
    assert paid == [] and seen == []  # nothing ran, and the masked result was not masked again
    with rec.open_recording(governed) as theirs, rec.open_recording(report.recording) as mine:  # type: ignore[arg-type]
        # What the result chain decided then is in the replay's recording too.
        assert mine.message(3) == theirs.message(3)
        keys = {w.key for _, c in mine.records() if isinstance(c, rec.Commit) for w in c.writes}
        assert "govern:refund#1.result" in keys
    verified(report.recording)


def test_a_changed_link_stops_a_replay_with_served_results_at_the_arguments(
    governed: Path, tmp_path: Path
) -> None:
    paid: list[Any] = []
    agent = refunds(fresh(tmp_path, "x"), paid, *links([], 50), calls=(REFUND_250, REFUND_40))
    report = replay(governed, agent, out=tmp_path / "r", tools="recorded")
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.path) == (1, "tool_args", "tool:refund#1: args.amount")
    assert (d.recorded, d.replayed, d.why_key) == (100, 50, "tool:refund#1.args")
    assert report.summary() == (
        "diverged at call 1, tool arguments, tool:refund#1: args.amount: differs"
    )
    assert paid == []


def test_a_changed_link_stops_a_replay_that_runs_its_tools_at_the_result(
    governed: Path, tmp_path: Path
) -> None:
    agent = refunds(fresh(tmp_path, "x"), [], *links([], 50), calls=(REFUND_250, REFUND_40))
    d = replay(governed, agent, out=tmp_path / "r").divergence
    assert d is not None and (d.call, d.slot, d.path) == (1, "tool_result", "tool:refund#1")
    assert (d.recorded, d.replayed) == (
        "refunded 100 to card card ending 1111",
        "refunded 50 to card card ending 1111",
    )


# -- a pause for a person ------------------------------------------------------------------------


@pytest.fixture
def approved(tmp_path: Path) -> Path:
    """A run that paused on the refund, which jo approved."""
    agent = refunds(fresh(tmp_path, "run"), [], approval())
    paused = agent.run("refund")
    assert isinstance(paused, Paused)
    assert "refunded 250" in str(agent.resume(paused, approve=True, why="known", by="jo"))
    return paused.recording


@pytest.mark.parametrize("tools", ["run", "recorded"])
def test_a_paused_run_replays_through_its_pause_with_the_recorded_answer(
    approved: Path, tmp_path: Path, tools: Any
) -> None:
    paid: list[Any] = []
    report = replay(approved, refunds(fresh(tmp_path, "x"), paid, approval()), tools=tools)
    assert report.summary() == "2 calls, identical; paused and approved by jo: known"
    assert paid == ([{"amount": 250}] if tools == "run" else [])
    lines = [x for _, x in rec.open_recording(report.recording).records()]  # type: ignore[arg-type]
    ends = [x.status for x in lines if isinstance(x, rec.RunEnd)]
    resumes = [x for x in lines if isinstance(x, rec.Resume)]
    assert ends == ["paused", "answer"] and [(r.verb, r.by) for r in resumes] == [("approve", "jo")]
    verified(report.recording)


def test_a_declined_call_is_declined_again(tmp_path: Path) -> None:
    paid: list[Any] = []
    agent = refunds(fresh(tmp_path, "run"), paid, approval())
    paused = agent.run("refund")
    assert isinstance(paused, Paused)
    agent.resume(paused, approve=False, why="over the limit", by="ana")
    report = replay(paused.recording, refunds(fresh(tmp_path, "x"), paid, approval()))
    assert report.summary() == "2 calls, identical; paused and declined by ana: over the limit"
    assert paid == []


def test_a_recording_that_ends_paused_replays_to_the_same_question(tmp_path: Path) -> None:
    agent = refunds(fresh(tmp_path, "run"), [], approval())
    paused = agent.run("refund")
    assert isinstance(paused, Paused)
    report = replay(paused.recording, refunds(fresh(tmp_path, "x"), [], approval()))
    assert report.status == "identical" and report.paused == "Refund 250?"
    assert report.summary() == "1 call, identical; paused, as recorded: Refund 250?"


def test_a_replay_that_no_longer_asks_stops_where_the_recording_paused(
    approved: Path, tmp_path: Path
) -> None:
    paid: list[Any] = []
    report = replay(approved, refunds(fresh(tmp_path, "x"), paid))
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.path, d.kind) == (1, "run", "pause: approval asks", "removed")
    assert (d.recorded, d.replayed, d.why_key) == ("Refund 250?", None, "govern:refund#1")
    assert "call 1, run, pause: approval asks: only in the recording" in report.summary()


def test_a_replay_that_asks_where_the_recorded_run_did_not_stops_there(tmp_path: Path) -> None:
    agent = refunds(fresh(tmp_path, "run"), [])
    agent.run("refund")
    report = replay(agent.last_recording, refunds(fresh(tmp_path, "x"), [], approval()))  # type: ignore[arg-type]
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.path, d.kind) == (1, "run", "pause: approval asks", "added")
    assert (d.recorded, d.replayed, d.why_key) == (None, "Refund 250?", "govern:refund#1")


def test_a_changed_question_stops_the_replay_at_the_pause(approved: Path, tmp_path: Path) -> None:
    agent = refunds(fresh(tmp_path, "x"), [], approval("Refund {} EUR?"))
    d = replay(approved, agent).divergence
    assert d is not None and (d.call, d.slot, d.path) == (1, "run", "pause: question")
    assert (d.recorded, d.replayed) == ("Refund 250?", "Refund 250 EUR?")


def test_code_that_resumes_a_replaying_agent_itself_replays_through_the_pause(
    approved: Path, tmp_path: Path
) -> None:
    # As a test with af_cassette does: the code runs, gets the pause, and answers it.
    from afcore.replay import replaying

    agent = replaying(refunds(fresh(tmp_path, "x"), [], approval()), approved, tools="recorded")
    paused = agent.run("refund")
    assert isinstance(paused, Paused) and paused.question == "Refund 250?"
    assert str(agent.resume(paused, approve=True, by="jo")).startswith("read: refunded 250")
    assert agent.replayer is not None and agent.replayer.divergence is None  # type: ignore[attr-defined]


def test_code_that_pauses_where_the_recording_did_not_fails_when_it_goes_on(
    tmp_path: Path,
) -> None:
    from afcore import ReplayDivergedError
    from afcore.replay import replaying

    plain = refunds(fresh(tmp_path, "run"), [])
    plain.run("refund")
    agent = replaying(refunds(fresh(tmp_path, "x"), [], approval()), plain.last_recording)  # type: ignore[arg-type]
    paused = agent.run("refund")
    assert isinstance(paused, Paused)
    with pytest.raises(ReplayDivergedError, match="pause: approval asks"):
        agent.resume(paused, approve=True)
