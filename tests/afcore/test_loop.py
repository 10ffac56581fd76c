from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import (
    Agent,
    MockExhaustedError,
    ProviderError,
    RunError,
    UsageError,
    define_tool,
    mock,
)
from afcore import recording as rec
from afcore.messages import Request
from tests.conftest import fixed_recording

ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def echo_tool(name: str = "echo", log: list[Any] | None = None) -> Any:
    def execute(args: dict[str, Any], ctx: Any) -> str:
        if log is not None:
            log.append(args)
        return f"echo: {args['text']}"

    return define_tool(name, "Echo the text.", ECHO_SCHEMA, execute)


def records(path: Path) -> list[dict[str, Any]]:
    # The records, without the seals that close each write (their own tests check them).
    lines = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if not line.startswith(b'{"t":"seal",')]


def call_tool(name: str, args: dict[str, Any], id: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"id": id, "name": name, "args": args}]}


def test_answer_after_tool_calls(tmp_path: Path) -> None:
    log: list[Any] = []
    agent = (
        Agent.create(
            provider=mock(replies=[call_tool("echo", {"text": "hi"}), "done: echo: hi"]),
            model="mock",
            record=fixed_recording(tmp_path),
        )
        .system("Be brief.")
        .tool(echo_tool(log=log))
        .build()
    )
    assert agent.run("say hi") == "done: echo: hi"
    assert log == [{"text": "hi"}]
    result = agent.last_result
    assert result is not None
    assert (result.status, result.iterations, result.calls) == ("answer", 2, 2)
    assert agent.last_recording == tmp_path / "test-run.jsonl"
    end = records(agent.last_recording)[-1]
    assert end["t"] == "run_end" and end["status"] == "answer"
    assert end["answer"] == {"key": "answer", "value": "done: echo: hi"}


def test_the_model_reads_the_tool_result() -> None:
    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        if len(request.messages) == 1:
            return call_tool("echo", {"text": "ping"})
        return f"got {request.messages[-1].content}"  # type: ignore[union-attr]

    agent = Agent.create(provider=mock(respond=respond), model="m").tool(echo_tool()).build()
    assert agent.run("go") == "got echo: ping"
    assert [len(r.messages) for r in seen] == [1, 3]
    assert [t.name for t in seen[0].tools] == ["echo"]


def test_max_iterations_is_an_outcome_not_an_exception() -> None:
    agent = (
        Agent.create(
            provider=mock(reply={"content": "thinking...", **call_tool("echo", {"text": "x"})}),
            model="m",
            max_iterations=3,
        )
        .tool(echo_tool())
        .build()
    )
    answer = agent.run("loop forever")
    assert agent.last_result is not None
    assert agent.last_result.status == "max_iterations"
    assert agent.last_result.iterations == 3
    assert answer == "thinking..."
    assert agent.last_recording is not None
    end = records(agent.last_recording)[-1]
    assert (end["status"], end["iterations"], end["calls"]) == ("max_iterations", 3, 3)


def test_provider_error_is_recorded_then_raised() -> None:
    agent = Agent.create(provider=mock(replies=[call_tool("echo", {"text": "a"})]), model="m")
    agent = agent.tool(echo_tool()).build()
    with pytest.raises(MockExhaustedError, match="call 2"):
        agent.run("go")
    path = agent.last_recording
    assert path is not None
    lines = records(path)
    error = next(r for r in lines if r["t"] == "error")
    assert error["call"] == 2 and error["error"]["kind"] == "MockExhaustedError"
    assert lines[-1]["t"] == "run_end" and lines[-1]["status"] == "error"
    assert "call 2" in lines[-1]["error"]["message"]
    # What was sent before the failure is still there and still verifies.
    report = rec.verify(rec.open_recording(path))
    assert report.ok and report.calls == 2


def test_a_bug_in_respond_becomes_a_provider_error() -> None:
    def respond(request: Request) -> str:
        raise ValueError("scripted bug")

    agent = Agent.create(provider=mock(respond=respond), model="m").build()
    with pytest.raises(ProviderError) as info:
        agent.run("go")
    assert "call 1: ValueError: scripted bug" in str(info.value)
    assert info.value.call == 1


def test_a_bug_in_the_loop_machinery_is_recorded_and_raised_as_a_run_error() -> None:
    def respond(request: Request) -> Any:
        # A reply the loop cannot append: tool args that are not JSON.
        return {"tool_calls": [{"id": "x", "name": "echo", "args": {"when": object()}}]}

    agent = Agent.create(provider=mock(respond=respond), model="m").tool(echo_tool()).build()
    with pytest.raises(RunError):
        agent.run("go")
    assert agent.last_recording is not None
    assert records(agent.last_recording)[-1]["status"] == "error"


def test_tool_exception_becomes_an_error_result_and_the_loop_goes_on() -> None:
    def boom(args: dict[str, Any], ctx: Any) -> str:
        raise RuntimeError("disk on fire")

    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return call_tool("boom", {})
        seen.append(request.messages[-1])
        return "recovered"

    tool = define_tool("boom", "Fails.", {"type": "object"}, boom)
    agent = Agent.create(provider=mock(respond=respond), model="m").tool(tool).build()
    assert agent.run("go") == "recovered"
    assert seen[0].is_error and "RuntimeError: disk on fire" in seen[0].content
    assert agent.last_recording is not None
    tool_commit = next(r for r in records(agent.last_recording) if r.get("tool"))
    assert tool_commit["tool"]["status"] == "error"


def test_unknown_tool_is_told_which_tools_exist() -> None:
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return call_tool("nope", {})
        seen.append(request.messages[-1])
        return "ok"

    agent = Agent.create(provider=mock(respond=respond), model="m").tool(echo_tool()).build()
    agent.run("go")
    assert seen[0].is_error and "'nope'" in seen[0].content and "echo" in seen[0].content


def test_duplicate_tool_name_is_refused_at_registration() -> None:
    builder = Agent.create(provider=mock(reply="x"), model="m").tool(echo_tool())
    with pytest.raises(UsageError, match="duplicate tool name 'echo'"):
        builder.tool(echo_tool())
    with pytest.raises(UsageError, match="'echo'"):
        Agent.create(provider=mock(reply="x"), model="m").tools([echo_tool(), echo_tool()])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_iterations": True}, "max_iterations"),
        ({"model": ""}, "model"),
        ({"tool_arg_validation": "strict"}, "tool_arg_validation"),
        ({"record": 3}, "record"),
        ({"provider": "mock"}, "provider"),
    ],
)
def test_create_refuses_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"provider": mock(reply="x"), "model": "m", **kwargs}
    with pytest.raises(UsageError, match=match):
        Agent.create(**args)


def test_several_tool_calls_run_concurrently_and_join_in_call_order() -> None:
    # The first tool can only finish after the second has started: run one after the
    # other, this would time out.
    second_started = asyncio.Event()

    async def slow(args: dict[str, Any], ctx: Any) -> str:
        await asyncio.wait_for(second_started.wait(), timeout=60)
        return "slow done"

    async def fast(args: dict[str, Any], ctx: Any) -> str:
        second_started.set()
        return "fast done"

    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        if len(request.messages) == 1:
            return {
                "tool_calls": [
                    {"id": "a", "name": "slow", "args": {}},
                    {"id": "b", "name": "fast", "args": {}},
                ]
            }
        return "ok"

    agent = (
        Agent.create(provider=mock(respond=respond), model="m")
        .tool(define_tool("slow", "s", {"type": "object"}, slow))
        .tool(define_tool("fast", "f", {"type": "object"}, fast))
        .build()
    )
    assert agent.run("go") == "ok"
    results = seen[1].messages[2:]
    assert [(m.tool_call_id, m.content) for m in results] == [  # type: ignore[union-attr]
        ("a", "slow done"),
        ("b", "fast done"),
    ]


def test_sync_tools_of_one_reply_run_in_threads_side_by_side() -> None:
    barrier = threading.Barrier(2, timeout=60)  # a guard: a loaded machine is slow

    def meet(args: dict[str, Any], ctx: Any) -> str:
        barrier.wait()  # both must be running at once to pass
        return threading.current_thread().name

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            calls = [{"id": f"c{i}", "name": "meet", "args": {}} for i in range(2)]
            return {"tool_calls": calls}
        return "met"

    tool = define_tool("meet", "m", {"type": "object"}, meet)
    agent = Agent.create(provider=mock(respond=respond), model="m").tool(tool).build()
    assert agent.run("go") == "met"


def test_tool_context_and_progress_are_recorded() -> None:
    def work(args: dict[str, Any], ctx: Any) -> str:
        ctx.progress("halfway")
        ctx.state["seen"] = ctx.call_id
        return f"{ctx.tool} at iteration {ctx.iteration}"

    state: dict[str, Any] = {}
    agent = (
        Agent.create(provider=mock(replies=[call_tool("work", {}, id="w1"), "ok"]), model="m")
        .tool(define_tool("work", "w", {"type": "object"}, work))
        .build()
    )
    agent.run("go", state=state)
    assert state == {"seen": "w1"}
    assert agent.last_recording is not None
    lines = records(agent.last_recording)
    progress = [r for r in lines if r["t"] == "tool_progress"]
    assert progress == [{"t": "tool_progress", "rsid": "tool:work#2", "message": "halfway"}]


def test_record_false_writes_nothing(tmp_path: Path, _recordings_in_tmp: Path) -> None:
    agent = Agent.create(provider=mock(reply="hi"), model="m", record=False).build()
    assert agent.run("go") == "hi"
    assert agent.last_recording is None
    assert not _recordings_in_tmp.exists()


def test_record_folder_and_environment(tmp_path: Path, _recordings_in_tmp: Path) -> None:
    Agent.create(provider=mock(reply="hi"), model="m").build().run("go")
    assert len(list(_recordings_in_tmp.glob("*.jsonl"))) == 1
    chosen = tmp_path / "elsewhere"
    agent = Agent.create(provider=mock(reply="hi"), model="m", record=str(chosen)).build()
    agent.run("go")
    assert agent.last_recording is not None and agent.last_recording.parent == chosen


def test_run_ids_sort_by_start_time() -> None:
    agent = Agent.create(provider=mock(reply="hi"), model="m").build()
    paths = []
    for _ in range(3):
        agent.run("go")
        assert agent.last_recording is not None
        paths.append(agent.last_recording.name)
    assert paths == sorted(paths) and len(set(paths)) == 3


def test_run_inside_an_event_loop_points_to_arun() -> None:
    agent = Agent.create(provider=mock(reply="hi"), model="m").build()

    async def inside() -> str:
        with pytest.raises(UsageError, match="arun"):
            agent.run("go")
        return await agent.arun("go")

    assert asyncio.run(inside()) == "hi"


def test_interrupt_is_recorded() -> None:
    def stop(args: dict[str, Any], ctx: Any) -> str:
        raise KeyboardInterrupt

    agent = (
        Agent.create(provider=mock(replies=[call_tool("stop", {}), "never"]), model="m")
        .tool(define_tool("stop", "s", {"type": "object"}, stop))
        .build()
    )
    with pytest.raises(KeyboardInterrupt):
        agent.run("go")
    assert agent.last_recording is not None
    end = records(agent.last_recording)[-1]
    assert end["t"] == "run_end" and end["status"] == "interrupted"


async def test_a_cancel_stops_a_run_that_never_waits_on_anything(tmp_path: Path) -> None:
    # A scripted model and a sync tool never let the event loop in; the loop does, now and
    # then, so the cancel lands long before the run would end by itself.
    agent = (
        Agent.create(
            provider=mock(respond=lambda r: call_tool("echo", {})),
            model="m",
            max_iterations=10_000,
            record=fixed_recording(tmp_path),
        )
        .tool(define_tool("echo", "e", {"type": "object"}, lambda a, c: "ok"))
        .build()
    )
    task = asyncio.create_task(agent.arun("go"))
    asyncio.get_running_loop().call_later(0.05, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    result = agent.last_result
    assert result is not None and result.status == "interrupted"
    assert 0 < result.iterations < 10_000
    end = records(agent.last_recording)[-1]
    assert end["t"] == "run_end" and end["status"] == "interrupted"


def test_a_failed_run_leaves_its_result_and_raises_what_stopped_it(tmp_path: Path) -> None:
    def respond(request: Request) -> Any:
        raise SystemExit(3)  # not an Exception: it goes on up, the run recorded as an error

    agent = Agent.create(
        provider=mock(respond=respond), model="m", record=fixed_recording(tmp_path)
    ).build()
    with pytest.raises(SystemExit):
        agent.run("go")
    assert agent.last_result is not None and agent.last_result.status == "error"
    assert records(agent.last_recording)[-1]["status"] == "error"


def test_every_record_is_in_the_file_before_the_model_is_called(tmp_path: Path) -> None:
    # What a crash while the loop waits would leave: the call about to be made is the last
    # line, and every tool before it has its commit there.
    path = tmp_path / "test-run.jsonl"
    seen: list[tuple[str, int]] = []

    def respond(request: Request) -> Any:
        lines = records(path)
        tools = sum(1 for r in lines if r["t"] == "commit" and r["rsid"].startswith("tool:"))
        seen.append((lines[-1]["t"], tools))
        done = len(seen) - 1
        return call_tool("echo", {}, id=f"c{done}") if done < 3 else "done"

    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=fixed_recording(tmp_path))
        .tool(define_tool("echo", "e", {"type": "object"}, lambda a, c: "ok"))
        .build()
    )
    assert agent.run("go") == "done"
    assert seen == [("call", 0), ("call", 1), ("call", 2), ("call", 3)]


def test_observe_sees_every_record_as_written(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    agent = Agent.create(
        provider=mock(reply="hi"), model="m", record=fixed_recording(tmp_path)
    ).build()
    agent.run("go", observe=seen.append)
    assert agent.last_recording is not None
    assert seen == records(agent.last_recording)


def test_recording_file_is_not_left_open() -> None:
    agent = Agent.create(provider=mock(reply="hi"), model="m").build()
    for _ in range(5):
        agent.run("go")
    # A finished run's file is made durable and closed off the caller's clock, by the sync
    # thread: once it is done, no recording is left open (the file made ahead for the next
    # run in the folder has no name until a run takes it).
    assert rec.wait_for_syncs(timeout=30)
    if not os.path.isdir("/proc/self/fd"):
        return
    folder = str(agent.last_recording.parent) if agent.last_recording else ""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(folder) and target.endswith(".jsonl"):
            held.append(target)
    assert folder and not held, held


def test_a_model_id_builds_its_provider_and_a_missing_key_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="set the ANTHROPIC_API_KEY environment variable"):
        Agent.create(model="anthropic:claude-sonnet-4-5")
    with pytest.raises(UsageError, match="the valid prefixes are anthropic, gemini, lmstudio"):
        Agent.create(model="acme:big-model")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000000000")
    agent = Agent.create(model="anthropic:claude-sonnet-4-5", record=False).build()
    assert (agent.provider.name, agent.model) == ("anthropic", "claude-sonnet-4-5")
    # Another agent's tools and parts, against a model named by id.
    scripted = Agent.create(provider=mock(reply="hi"), model="m").tool(echo_tool()).build()
    real = scripted.with_model("ollama:llama3.1")
    assert (real.provider.name, real.model, list(real.tools)) == ("ollama", "llama3.1", ["echo"])
    assert (scripted.provider.name, scripted.model) == ("mock", "m")


def test_thinking_asks_for_a_budget_and_room_above_it() -> None:
    agent = Agent.create(provider=mock(reply="x"), model="m").thinking(budget=2048).build()
    assert dict(agent.params) == {"thinking": 2048, "max_tokens": 6144}
    roomy = (
        Agent.create(provider=mock(reply="x"), model="m", params={"max_tokens": 20_000})
        .thinking(budget=2048)
        .build()
    )
    assert roomy.params["max_tokens"] == 20_000
    with pytest.raises(UsageError, match="token count >= 1024"):
        Agent.create(provider=mock(reply="x"), model="m").thinking(budget=100)
