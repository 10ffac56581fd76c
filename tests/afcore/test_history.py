"""A run that continues a conversation: ``run(message, history=...)``."""

from __future__ import annotations

from pathlib import Path

import pytest

from afcore import Agent, RecordingConfig, UsageError, mock, sliding_window
from afcore import recording as rec
from afcore.messages import (
    AssistantMessage,
    Request,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

PRIOR = (
    UserMessage("What is 2 + 2?"),
    AssistantMessage(
        (
            ThinkingBlock("easy", signature="sig-1"),
            ToolCall("c1", "calc", {"expr": "2 + 2"}),
        )
    ),
    ToolResultMessage("c1", "calc", "4"),
    AssistantMessage((TextBlock("It is 4."),)),
)


def _agent(folder: Path, seen: list[Request], **kw: object) -> Agent:
    def respond(request: Request) -> str:
        seen.append(request)
        return f"reply {len(request.messages)}"

    return Agent.create(
        provider=mock(respond=respond),
        model="m",
        record=RecordingConfig(dir=folder),
        **kw,  # type: ignore[arg-type]
    ).build()


def test_a_run_given_history_sends_it_and_records_it_as_history(tmp_path: Path) -> None:
    seen: list[Request] = []
    agent = _agent(tmp_path, seen)
    answer = agent.run("And 3 + 3?", history=list(PRIOR))
    assert answer == "reply 5"
    assert list(seen[0].messages) == [*PRIOR, UserMessage("And 3 + 3?")]
    result = agent.last_result
    assert result is not None
    assert result.transcript[:5] == (*PRIOR, UserMessage("And 3 + 3?"))
    assert isinstance(result.transcript[-1], AssistantMessage)
    assert result.transcript[-1].text == "reply 5"
    r = rec.open_recording(result.recording)  # type: ignore[arg-type]
    report = rec.verify(r)
    assert report.ok, report.problems
    assert "session" not in r.raw(1)
    first, seed = [c for _, c in r.records() if isinstance(c, rec.Commit)][:2]
    assert (first.rsid, seed.rsid) == ("history#0", "seed#1")
    assert [w.key for w in first.writes] == ["message:1", "message:2", "message:3", "message:4"]
    assert all(w.source is not None and w.source.kind == "history" for w in first.writes)
    assert [w.key for w in seed.writes] == ["user_message", "message:5"]
    # The rebuilt call holds the thinking's signature and the tool call as they were.
    assert r.request(1)["messages"][1] == PRIOR[1].to_json()


def test_the_next_run_continues_from_the_transcript(tmp_path: Path) -> None:
    seen: list[Request] = []
    agent = _agent(tmp_path, seen)
    agent.run("one")
    first = agent.last_result
    assert first is not None
    agent.run("two", history=first.transcript)
    assert [m.role for m in seen[-1].messages] == ["user", "assistant", "user"]


def test_without_history_a_run_records_no_history_stage(tmp_path: Path) -> None:
    agent = _agent(tmp_path, [])
    agent.run("one")
    r = rec.open_recording(agent.last_recording)  # type: ignore[arg-type]
    assert [c.rsid for _, c in r.records() if isinstance(c, rec.Commit)][0] == "seed#0"


@pytest.mark.parametrize("bad", ["just text", [{"role": "user", "content": "x"}], 5])
def test_history_must_be_messages(bad: object, tmp_path: Path) -> None:
    agent = _agent(tmp_path, [])
    with pytest.raises(UsageError, match="history"):
        agent.run("one", history=bad)  # type: ignore[arg-type]


def test_a_window_strategy_leaves_the_continued_conversation_in_budget(tmp_path: Path) -> None:
    seen: list[Request] = []
    agent = (
        Agent.create(
            provider=mock(respond=lambda r: (seen.append(r), "ok")[1]),
            model="m",
            record=RecordingConfig(dir=tmp_path),
        )
        .window(sliding_window(keep_recent_turns=2))
        .build()
    )
    transcript: tuple = ()
    for k in range(10):
        agent.run(f"message {k}", history=transcript)
        result = agent.last_result
        assert result is not None
        transcript = result.transcript
        assert len(transcript) <= 3
        report = rec.verify(rec.open_recording(result.recording))  # type: ignore[arg-type]
        assert report.ok, report.problems
    assert seen[-1].messages[-1] == UserMessage("message 9")
    assert len(seen[-1].messages) <= 3
