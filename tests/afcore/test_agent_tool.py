"""An agent as another agent's tool: its run recorded and linked from the outer call, followed
by ``af why``; one run at a time per agent instance; the outer run's redaction handed on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, RunInFlightError, UsageError, agent_tool, define_tool, mock, recording
from afcore.why import why


def lines(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def translator(folder: Path, replies: list[Any] | None = None, **kw: Any) -> Agent:
    return (
        Agent.create(
            provider=mock(replies=["Hola, ¿cómo estás?"] if replies is None else replies),
            model="mock",
            name="translator",
            record=folder,
        )
        .system("Translate the message to Spanish. Reply with the translation only.")
        .build()
    )


def desk(folder: Path, inner: Agent, calls: list[dict[str, Any]], answer: str = "done") -> Agent:
    return (
        Agent.create(
            provider=mock(replies=[{"tool_calls": calls}, answer]),
            model="mock",
            name="desk",
            record=folder,
        )
        .tool(agent_tool(inner, name="translate", description="Translate text to Spanish."))
        .build()
    )


def call(id: str, message: str) -> dict[str, Any]:
    return {"id": id, "name": "translate", "args": {"message": message}}


def test_the_inner_run_is_recorded_and_linked_and_why_reaches_into_it(tmp_path: Path) -> None:
    inner = translator(tmp_path)
    outer = desk(tmp_path, inner, [call("c1", "Hello, how are you?")], "Hola, ¿cómo estás?")
    assert outer.run("say hello in Spanish") == "Hola, ¿cómo estás?"
    assert inner.last_result is not None and outer.last_result is not None
    inner_path = inner.last_recording
    assert inner_path is not None and inner_path != outer.last_recording
    [commit] = [r for r in lines(outer.last_recording) if r["t"] == "commit" and "tool" in r]
    assert commit["tool"]["source"] == "agent:translator"
    assert commit["tool"]["result_status"] == "success"
    assert commit["tool"]["run"] == {
        "run_id": inner.last_result.run_id,
        "recording": inner_path.name,  # relative to the outer file's folder: no machine path
        "agent": "translator",
        "status": "answer",
    }
    # The inner run is a run of its own: its user message is what the model wrote.
    assert lines(inner_path)[0]["agent"]["name"] == "translator"
    # af why on the outer answer reaches into the run the tool made.
    with recording.open_recording(outer.last_recording) as rec:
        sliced = why(rec, "answer")
    [(rsid, inner_why)] = sliced.inner.items()
    assert rsid == commit["rsid"]
    assert inner_why.slice is not None and inner_why.slice.key == "answer"
    assert inner_why.run["run_id"] == inner.last_result.run_id
    assert "inner" in sliced.to_json()
    for path in (outer.last_recording, inner_path):
        assert recording.verify(recording.open_recording(path)).ok


def test_a_second_call_while_one_runs_is_refused_in_a_sentence(tmp_path: Path) -> None:
    async def slow(args: dict[str, Any], ctx: Any) -> str:
        await asyncio.sleep(0.05)
        return "looked it up"

    inner = (
        Agent.create(
            provider=mock(
                replies=[{"tool_calls": [{"id": "s1", "name": "lookup", "args": {}}]}, "Hola."]
            ),
            model="mock",
            name="translator",
            record=tmp_path,
        )
        .tool(define_tool("lookup", "Look up a word.", {"type": "object"}, slow))
        .build()
    )
    outer = desk(tmp_path, inner, [call("c1", "Hello"), call("c2", "Goodbye")])
    outer.run("translate both")
    assert outer.last_result is not None
    results = [m for m in outer.last_result.transcript if m.role == "tool"]
    assert results[0].content == "Hola." and not results[0].is_error
    assert results[1].is_error
    assert results[1].content.startswith(
        "The tool translate failed: RunInFlightError: agent 'translator' is already running "
    )
    assert "one run at a time per agent instance" in results[1].content
    first, second = [r["tool"] for r in lines(outer.last_recording) if "tool" in r]
    assert first["run"]["status"] == "answer"
    assert second["result_status"] == "failure" and "run" not in second  # it never ran


def test_one_run_at_a_time_per_instance_and_a_copy_is_another_instance(tmp_path: Path) -> None:
    import copy

    async def both() -> list[Any]:
        gate = asyncio.Event()

        async def wait(args: dict[str, Any], ctx: Any) -> str:
            await gate.wait()
            return "ok"

        agent = (
            Agent.create(
                provider=mock(
                    replies=[{"tool_calls": [{"id": "w", "name": "wait", "args": {}}]}, "done"]
                ),
                model="mock",
                record=False,
            )
            .tool(define_tool("wait", "Wait.", {"type": "object"}, wait))
            .build()
        )
        first = asyncio.ensure_future(agent.arun("one"))
        await asyncio.sleep(0.01)
        with pytest.raises(RunInFlightError, match="already running"):
            await agent.arun("two")
        twin = copy.copy(agent)
        assert twin._in_flight is None
        gate.set()
        return [await first]

    assert asyncio.run(both()) == ["done"]


def test_the_outer_runs_redaction_is_handed_on(tmp_path: Path) -> None:
    secret = "Hx7-vault-token-93QzLm"
    inner = translator(tmp_path, replies=[f"Su token es {secret}"])
    outer = desk(tmp_path, inner, [call("c1", f"Your token is {secret}")])
    outer.run("translate my token", state={"api_token": secret})
    assert inner.last_recording is not None and outer.last_recording is not None
    # The outer run learned the secret from its state; the inner run never saw its state,
    # and still keeps it out of its file.
    assert secret.encode() not in outer.last_recording.read_bytes()
    assert secret.encode() not in inner.last_recording.read_bytes()
    assert b"[redacted:" in inner.last_recording.read_bytes()


def test_an_inner_run_that_ends_without_an_answer_is_an_error_result_and_still_linked(
    tmp_path: Path,
) -> None:
    inner = translator(tmp_path, replies=[])  # a scripted model with nothing to say
    outer = desk(tmp_path, inner, [call("c1", "Hello")])
    outer.run("translate")
    assert outer.last_result is not None
    [result] = [m for m in outer.last_result.transcript if m.role == "tool"]
    assert result.is_error and "MockExhaustedError" in result.content
    [tool] = [r["tool"] for r in lines(outer.last_recording) if "tool" in r]
    assert tool["result_status"] == "failure"
    assert tool["run"]["status"] == "error"


def test_agent_tool_takes_a_built_agent() -> None:
    with pytest.raises(UsageError, match="takes a built agent"):
        agent_tool("translator", name="t", description="d")  # type: ignore[arg-type]
