"""The four control flows: what each step is given and gives, the state as a read-tracking
scope, branches at the same time with their failures, a step that pauses, and the one
recording a composed run leaves (every agent's run in it verifies)."""

from __future__ import annotations

import asyncio
import functools
import unittest.mock
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, Paused, ToolMiddleware, UsageError, ask, define_tool, mock
from afcore import recording as rec
from afcore.flows import (
    BranchesFailedError,
    Conditional,
    FlowError,
    FlowView,
    Loop,
    Parallel,
    Sequence,
    StepResult,
)
from afcore.recording import FLOW_TYPES, RecordingConfig
from tests.conftest import runs_beside


def agent(name: str, reply: Any = None, *, record: Any = False, **kw: Any) -> Agent:
    provider = mock(reply=reply) if reply is not None else mock(**kw)
    return Agent.create(provider=provider, model="m", name=name, record=record).build()


def flow_records(path: Path | None) -> list[dict[str, Any]]:
    """The log's own records (not the lines of the runs folded into it, each after a space)."""
    assert path is not None
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines() if line[:1] != b" "]
    assert lines[-1]["t"] == "seal"  # every write ends with its seal
    out = [record for record in lines if record["t"] != "seal"]
    for record in out:  # each other line is one of the flow's typed records
        rec.typed(FLOW_TYPES[record["t"]], record)
    return out


def of_type(records: list[dict[str, Any]], t: str) -> list[dict[str, Any]]:
    return [r for r in records if r["t"] == t]


def verified(path: Path) -> rec.VerifyReport:
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, report.problems
    return report


# -- Sequence -----------------------------------------------------------------------------


def test_a_sequence_hands_each_step_the_output_before_it(tmp_path: Path) -> None:
    seen: list[Any] = []

    def shout(s: FlowView) -> str:
        seen.append(s.message)
        return str(s.message).upper()

    async def count(s: FlowView) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"text": s.message, "n": len(s.message)}

    flow = (
        Sequence.create("pipe", record=tmp_path)
        .step("echo", agent("echo", "hello there"))
        .step("shout", shout)
        .step("count", count)
        .build()
    )
    answer = flow.run("hi")
    assert seen == ["hello there"]
    assert orjson.loads(answer) == {"n": 11, "text": "HELLO THERE"}
    result = flow.last_result
    assert result is not None and result.status == "answer"
    assert result.state["echo"] == "hello there" and result.state["shout"] == "HELLO THERE"
    assert result.produced_by == "count"
    assert [s.path for s in result.steps.walk()] == ["", "echo", "shout", "count"]
    assert result.calls == 1


def test_a_function_that_returns_nothing_passes_the_message_on(tmp_path: Path) -> None:
    def note(s: FlowView) -> None:
        s["seen"] = s.message

    flow = Sequence.create(record=False).step("note", note).step("again", note).build()
    assert flow.run("m") == "m"
    assert flow.last_result is not None and flow.last_result.state["seen"] == "m"


def test_a_failing_step_stops_the_sequence_and_is_raised_naming_it(tmp_path: Path) -> None:
    ran: list[str] = []

    def boom(s: FlowView) -> str:
        raise ValueError("no stock")

    flow = (
        Sequence.create("order", record=tmp_path)
        .step("check", boom)
        .step("ship", lambda s: ran.append("ship"))
        .build()
    )
    with pytest.raises(FlowError, match="'check' failed: ValueError: no stock") as info:
        flow.run("x")
    assert isinstance(info.value.__cause__, ValueError) and info.value.path == "check"
    assert ran == []
    result = flow.last_result
    assert result is not None and result.status == "error"
    records = flow_records(result.recording)
    end = of_type(records, "flow_end")[0]
    assert end["status"] == "error" and end["error"]["kind"] == "ValueError"
    failed = [r for r in of_type(records, "step_end") if r["path"] == "check"][0]
    assert failed["status"] == "error" and failed["error"]["message"] == "no stock"


# -- Conditional --------------------------------------------------------------------------


def router(tmp_path: Path) -> Sequence:
    def classify(s: FlowView) -> None:
        s["intent"] = "billing" if "invoice" in s.message else "tech"

    route = (
        Conditional.create("route")
        .when("billing", lambda s: s["intent"] == "billing", agent("billing", "refund sent"))
        .when("urgent", lambda s: s.get("priority") == "high", agent("urgent", "paged"))
        .otherwise("tech", agent("tech", "reboot it"))
        .build()
    )
    return (
        Sequence.create("support", record=tmp_path)
        .step("classify", classify)
        .step("route", route)
        .build()
    )


def test_a_conditional_takes_the_first_branch_that_holds_with_its_evidence(
    tmp_path: Path,
) -> None:
    flow = router(tmp_path)
    assert flow.run("my invoice is wrong") == "refund sent"
    result = flow.last_result
    assert result is not None
    route = result.steps.find("route")
    assert route is not None
    (decision,) = route.decisions
    assert decision.chosen == "billing"
    assert [(v.name, v.fired, v.reads) for v in decision.verdicts] == [
        ("billing", True, (("state.intent", "billing"),))
    ]
    assert result.produced_by == "route/billing"
    (recorded,) = of_type(flow_records(result.recording), "decision")
    assert recorded["chosen"] == "billing"
    assert recorded["verdicts"][0]["reads"] == [["state.intent", "billing"]]


def test_otherwise_runs_when_no_predicate_holds_and_every_asked_one_is_evidence(
    tmp_path: Path,
) -> None:
    flow = router(tmp_path)
    assert flow.run("the screen is black", state={"priority": "low"}) == "reboot it"
    assert flow.last_result is not None
    route = flow.last_result.steps.find("route")
    assert route is not None
    (decision,) = route.decisions
    assert decision.chosen == "tech"
    assert [(v.name, v.fired, v.reads) for v in decision.verdicts] == [
        ("billing", False, (("state.intent", "tech"),)),
        ("urgent", False, (("state.priority", "low"),)),
    ]


def test_without_otherwise_a_message_no_branch_takes_passes_through() -> None:
    flow = Conditional.create(record=False).when("never", lambda s: False, agent("a", "x")).build()
    assert flow.run("as is") == "as is"
    assert flow.last_result is not None
    assert flow.last_result.steps.decisions[0].chosen is None


def test_a_predicate_that_does_not_answer_a_bool_fails_the_flow_with_what_it_read(
    tmp_path: Path,
) -> None:
    flow = (
        Conditional.create("c", record=tmp_path)
        .when("odd", lambda s: s.get("n"), agent("a", "x"))
        .build()
    )
    with pytest.raises(FlowError, match="could not decide"):
        flow.run("m", state={"n": 3})
    (decision,) = of_type(flow_records(flow.last_result.recording), "decision")  # type: ignore[union-attr]
    assert decision["chosen"] is None
    assert decision["verdicts"][0]["reads"] == [["state.n", 3]]
    assert "returns True or False" in decision["verdicts"][0]["error"]


def test_a_predicate_only_reads() -> None:
    def writes(s: FlowView) -> bool:
        s["x"] = 1
        return True

    flow = Conditional.create(record=False).when("w", writes, agent("a", "x")).build()
    with pytest.raises(FlowError, match="UsageError"):
        flow.run("m")


# -- Loop ---------------------------------------------------------------------------------


def test_a_loop_goes_round_until_its_predicate_holds(tmp_path: Path) -> None:
    def draft(s: FlowView) -> str:
        s["drafts"] = s.get("drafts", 0) + 1
        return f"{s.message}+"

    flow = (
        Loop.create("polish", record=tmp_path)
        .repeat(draft)
        .until(lambda s: s["drafts"] >= 3)
        .max_iterations(5)
        .build()
    )
    assert flow.run("d") == "d+++"
    result = flow.last_result
    assert result is not None
    assert [s.path for s in result.steps.steps] == ["draft@1", "draft@2", "draft@3"]
    assert [d.chosen for d in result.steps.decisions] == ["again", "again", "done"]
    assert result.steps.decisions[-1].verdicts[0].reads == (("state.drafts", 3),)
    turns = of_type(flow_records(result.recording), "decision")
    assert [(t["turn"], t["chosen"]) for t in turns] == [(1, "again"), (2, "again"), (3, "done")]


def test_a_loop_at_its_limit_ends_max_iterations_and_the_flow_goes_on() -> None:
    loop = (
        Loop.create("l").repeat(lambda s: s.turn, name="t").until(lambda s: False).max_iterations(2)
    ).build()
    flow = Sequence.create(record=False).step("l", loop).step("after", lambda s: "went on").build()
    assert flow.run("m") == "went on"
    assert flow.last_result is not None
    step = flow.last_result.steps.find("l")
    assert step is not None and step.status == "max_iterations" and step.output == 2
    assert step.decisions[-1].chosen == "limit"


def test_flows_nest_and_their_paths_say_where_each_step_ran(tmp_path: Path) -> None:
    body = (
        Sequence.create("round")
        .step("plan", lambda s: f"plan {s.turn}")
        .step("act", lambda s: f"{s.message} done")
        .build()
    )
    flow = Loop.create("work", record=tmp_path).repeat(body).until(lambda s: s.turn == 2).build()
    assert flow.run("go") == "plan 2 done"
    result = flow.last_result
    assert result is not None
    paths = [s.path for s in result.steps.walk()]
    assert paths == [
        "",
        "round@1",
        "round@1/plan",
        "round@1/act",
        "round@2",
        "round@2/plan",
        "round@2/act",
    ]
    found = result.steps.find("round/act")
    assert found is not None and found.path == "round@2/act"
    starts = [r["path"] for r in of_type(flow_records(result.recording), "step_start")]
    assert starts == paths


# -- Parallel -----------------------------------------------------------------------------


def test_branches_run_at_the_same_time() -> None:
    # Each branch waits for the other to have started: only concurrent branches finish.
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def branch(me: str, other: str) -> Any:
        async def run(s: FlowView) -> str:
            started[me].set()
            await asyncio.wait_for(started[other].wait(), timeout=60)
            return me

        return run

    flow = (
        Parallel.create(record=False)
        .branch("a", branch("a", "b"))
        .branch("b", branch("b", "a"))
        .build()
    )
    assert orjson.loads(flow.run("m")) == {"a": "a", "b": "b"}


def test_agents_in_branches_run_their_sync_tools_at_the_same_time() -> None:
    # Each agent's lone sync tool waits for the other's to have started: on the main thread,
    # where a lone tool of one run goes inline, the branches' tools still overlap.
    import threading

    started = {"a": threading.Event(), "b": threading.Event()}
    met: dict[str, bool] = {}

    def branch_agent(me: str, other: str) -> Agent:
        def meet(args: dict[str, Any], ctx: Any) -> str:
            started[me].set()
            met[me] = started[other].wait(timeout=60)
            return "met"

        tool = define_tool("meet", "Meet.", {"type": "object", "properties": {}}, meet)
        call = {"tool_calls": [{"id": "t1", "name": "meet", "args": {}}]}
        provider = mock(replies=[call, "done"])
        return Agent.create(provider=provider, model="m", name=me, record=False).tool(tool).build()

    flow = (
        Parallel.create(record=False)
        .branch("a", branch_agent("a", "b"))
        .branch("b", branch_agent("b", "a"))
        .build()
    )
    assert orjson.loads(flow.run("m")) == {"a": "done", "b": "done"}
    assert met == {"a": True, "b": True}


def test_a_failed_branch_is_recorded_and_the_merge_decides(tmp_path: Path) -> None:
    def broken(s: FlowView) -> str:
        raise ConnectionError("docs index down")

    seen: dict[str, StepResult] = {}

    def merge(s: FlowView, branches: dict[str, StepResult]) -> str:
        seen.update(branches)
        ok = [b.output for b in branches.values() if b.status == "ok"]
        s["partial"] = len(ok) < len(branches)
        return " | ".join(ok)

    flow = (
        Parallel.create("search", record=tmp_path)
        .branch("web", agent("web", "web says 42"))
        .branch("docs", broken)
        .merge_with(merge)
        .build()
    )
    assert flow.run("q") == "web says 42"
    assert seen["docs"].status == "error" and isinstance(seen["docs"].error, ConnectionError)
    result = flow.last_result
    assert result is not None and result.state["partial"] is True
    records = flow_records(result.recording)
    docs = [r for r in of_type(records, "step_end") if r["path"] == "docs"][0]
    assert docs["status"] == "error" and docs["error"]["kind"] == "ConnectionError"
    (merge_record,) = of_type(records, "merge")
    assert merge_record["branches"] == {"web": "ok", "docs": "error"}
    assert merge_record["writes"] == {"partial": True}
    assert merge_record["output"] == "web says 42"


def test_without_a_merge_any_failed_branch_fails_the_parallel() -> None:
    flow = (
        Parallel.create(record=False)
        .branch("ok", lambda s: "fine")
        .branch("bad", lambda s: 1 / 0)
        .build()
    )
    with pytest.raises(BranchesFailedError, match="1 of 2 branches failed: bad") as info:
        flow.run("m")
    assert set(info.value.failed) == {"bad"}


def test_each_branch_s_writes_are_its_own_even_from_an_agent_s_tools(tmp_path: Path) -> None:
    def tool_writing(key: str) -> Any:
        def execute(args: dict[str, Any], ctx: Any) -> str:
            ctx.state[key] = args["v"]
            return "noted"

        schema = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}
        return define_tool("note", "Note a value.", schema, execute)

    def noter(name: str, key: str) -> Agent:
        script = mock(
            replies=[{"tool_calls": [{"id": "t1", "name": "note", "args": {"v": name}}]}, "done"]
        )
        return (
            Agent.create(provider=script, model="m", name=name, record=False)
            .tool(tool_writing(key))
            .build()
        )

    flow = (
        Parallel.create("both", record=tmp_path)
        .branch("left", noter("left", "l"))
        .branch("right", noter("right", "r"))
        .build()
    )
    flow.run("go")
    result = flow.last_result
    assert result is not None
    left, right = result.steps.steps
    assert left.writes == ("l", "left") and right.writes == ("r", "right")
    ends = {r["path"]: r for r in of_type(flow_records(result.recording), "step_end")}
    assert ends["left"]["writes"] == {"l": "left", "left": "done"}


# -- a step that pauses ---------------------------------------------------------------------


def test_a_step_that_pauses_ends_the_flow_with_its_paused_run(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}}
    refund = define_tool("refund", "Refund.", schema, lambda args, ctx: "refunded")
    asks = ToolMiddleware("approval", on_tool_call=lambda c: ask("Refund?"))
    refunds = (
        Agent.create(
            provider=mock(
                replies=[{"tool_calls": [{"id": "t1", "name": "refund", "args": {"amount": 5}}]}]
            ),
            model="m",
            name="refunds",
        )
        .tool(refund)
        .tool_middleware(asks)
        .build()
    )
    after: list[str] = []
    flow = (
        Sequence.create("support", record=tmp_path)
        .step("refund", refunds)
        .step("thank", lambda s: after.append("thank"))
        .build()
    )
    out = flow.run("refund me")
    assert isinstance(out, Paused) and out.question == "Refund?"
    assert after == []
    result = flow.last_result
    assert result is not None and result.status == "paused" and result.paused is out
    # The paused run is the agent's recording in the flow's folder: resumable as any.
    assert out.recording.parent == tmp_path / result.run_id
    end = of_type(flow_records(result.recording), "flow_end")[0]
    assert end["status"] == "paused" and end["paused"] == "refund"


# -- the recording ------------------------------------------------------------------------


def test_every_agent_s_run_is_a_recording_of_its_own_that_verifies(tmp_path: Path) -> None:
    same = agent("voter", replies=["yes", "no"])
    flow = (
        Sequence.create("debate", record=RecordingConfig(dir=tmp_path))
        .step(
            "votes",
            Parallel.create().branch("pro", same).branch("con", same).build(),
        )
        .step("judge", agent("judge", "pro wins"))
        .build()
    )
    assert flow.run("is it?") == "pro wins"
    result = flow.last_result
    assert result is not None and result.calls == 3
    records = flow_records(result.recording)
    assert records[0]["t"] == "flow" and records[-1]["t"] == "flow_end"
    header = records[0]["flow"]
    assert [s["name"] for s in header["steps"]] == ["votes", "judge"]
    runs = {r["path"]: r["run"] for r in of_type(records, "step_end") if r.get("run")}
    assert set(runs) == {"votes/pro", "votes/con", "judge"}
    read = rec.open_flow(result.recording)
    assert set(read.frames) == set(runs.values())  # each folded into the log
    for path in runs:
        step = read.find(path)
        assert step is not None
        file = read.run_file(step)
        assert file is not None
        verified(file)
        with rec.open_recording(file) as r:
            assert r.header.agent.name == ("judge" if path == "judge" else "voter")
    # the same agent in two branches at once: two runs, one answer each
    answers = {r["path"]: r["output"] for r in of_type(records, "step_end")}
    assert sorted([answers["votes/pro"], answers["votes/con"]]) == ["no", "yes"]


def test_a_composed_run_writes_when_each_step_began_and_each_call_was_sent(
    tmp_path: Path,
) -> None:
    ticks = iter(range(1_000_000))
    clock = lambda: next(ticks) / 1000  # noqa: E731 - a millisecond a reading
    flow = (
        Sequence.create("s", record=RecordingConfig(dir=tmp_path, run_id="s", clock=clock))
        .step("first", agent("first", "x"))
        .step(
            "both",
            Parallel.create().branch("a", agent("a", "1")).branch("b", agent("b", "2")).build(),
        )
        .build()
    )
    flow.run("go")
    records = flow_records(tmp_path / "s.jsonl")
    starts = {r["path"]: r["at"] for r in of_type(records, "step_start")}
    assert list(starts.values()) == sorted(starts.values()) and starts[""] >= 0
    calls: list[float] = []
    read = rec.open_flow(tmp_path / "s.jsonl")
    for end in of_type(records, "step_end"):
        if end.get("run"):
            file = read.run_file(read.find(end["path"]))  # type: ignore[arg-type]
            assert file is not None
            lines = [orjson.loads(x) for x in file.read_bytes().splitlines()]
            sent = [x["at"] for x in lines if x["t"] == "call"]
            # sent after its step began, in order, on the flow's clock
            assert sent and sent == sorted(sent) and sent[0] > starts[end["path"]]
            calls += sent
    assert len(set(calls)) == len(calls) == 3  # one reading each
    assert rec.verify_flow(rec.open_flow(tmp_path / "s.jsonl")).ok
    # An agent's run of its own writes no time of sending (it would only repeat its order).
    alone = agent("alone", "z", record=RecordingConfig(dir=tmp_path, run_id="alone"))
    alone.run("go")
    assert b'"at":' not in (tmp_path / "alone.jsonl").read_bytes()


def test_verify_reports_a_step_said_to_begin_before_its_flow(tmp_path: Path) -> None:
    from tests.conftest import reseal

    flow = (
        Sequence.create("s", record=RecordingConfig(dir=tmp_path, run_id="s"))
        .step("a", agent("a", "x"))
        .build()
    )
    flow.run("go")
    log = tmp_path / "s.jsonl"
    lines = []
    for raw in log.read_bytes().splitlines(keepends=True):
        if raw.startswith(b'{"t":"step_start","path":"a"'):
            record = orjson.loads(raw)
            record["at"] = -5.0
            raw = orjson.dumps(record) + b"\n"
        lines.append(raw)
    log.write_bytes(reseal(b"".join(lines)))
    report = rec.verify_flow(rec.open_flow(log))
    assert not report.ok
    assert any("'a' starts at -5.0 ms, before its flow" in p for _, p in report.problems)


def test_a_flow_that_records_nothing_writes_nothing(tmp_path: Path) -> None:
    flow = Sequence.create(record=False).step("a", agent("a", "x", record=tmp_path)).build()
    assert flow.run("m") == "x"
    assert flow.last_result is not None and flow.last_result.recording is None


# -- building -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (lambda: Sequence.create().build(), "at least one step"),
        (lambda: Sequence.create().step("a", len).step("a", len), "already in this flow"),
        (lambda: Sequence.create().step("a/b", len), "no '/' or '@'"),
        (lambda: Sequence.create().step("a", 3), "an agent, a flow or a function"),
        (lambda: Parallel.create().build(), "at least one branch"),
        (lambda: Parallel.create().branch("a", len).merge_with("x"), "takes a function"),
        (lambda: Conditional.create().otherwise("o", len).build(), "at least one when"),
        (lambda: Loop.create().build(), "needs repeat"),
        (lambda: Loop.create().repeat(len).max_iterations(0), "at least 1"),
        (lambda: Sequence.create(record=3), "record= takes"),
    ],
)
def test_a_flow_built_wrong_says_how(build: Any, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        build()


def test_run_takes_a_string_and_refuses_a_running_loop() -> None:
    flow = Sequence.create(record=False).step("a", lambda s: "x").build()
    with pytest.raises(UsageError, match="as a string"):
        flow.run(3)  # type: ignore[arg-type]

    async def inside() -> None:
        with pytest.raises(UsageError, match="await arun"):
            flow.run("m")
        assert await flow.arun("m") == "x"

    asyncio.run(inside())


@pytest.mark.parametrize("first", [b"", b"\n", b'{"t":"seal","h":"AAAAAAAAAAAAAAAAAAAAAA"}\n'])
def test_a_file_without_a_flow_header_is_no_flow_s_recording(tmp_path: Path, first: bytes) -> None:
    from afcore.errors import RecordingFormatError

    path = tmp_path / "x.jsonl"
    path.write_bytes(first)
    with pytest.raises(RecordingFormatError, match="not a flow's recording"):
        rec.open_flow(path)


# -- the agents' runs folded into the log -----------------------------------------------------


def _refunds() -> Agent:
    """An agent whose refund tool asks a person first: its run pauses."""
    refund = define_tool("refund", "Refund.", {"type": "object"}, lambda args, ctx: "refunded")
    call = {"tool_calls": [{"id": "t1", "name": "refund", "args": {}}]}
    return (
        Agent.create(provider=mock(replies=[call, "refunded"]), model="m", name="refunds")
        .tool(refund)
        .tool_middleware(ToolMiddleware("approval", on_tool_call=lambda c: ask("Refund?")))
        .build()
    )


def test_a_finished_flow_is_one_file(tmp_path: Path) -> None:
    flow = (
        Sequence.create("f", record=RecordingConfig(dir=tmp_path, run_id="f"))
        .step(
            "both",
            Parallel.create().branch("a", agent("a", "x")).branch("b", agent("b", "y")).build(),
        )
        .step("last", agent("c", "z"))
        .build()
    )
    assert flow.run("m") == "z"
    rec.wait_for_syncs()  # the runs beside the log go once the log is durable
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl"]
    read = rec.open_flow(tmp_path / "f.jsonl")
    assert len(read.frames) == 3
    report = rec.verify_flow(read)
    assert report.ok and report.calls == report.verified == 3


def test_a_flow_that_fails_is_one_file_too(tmp_path: Path) -> None:
    def boom(s: FlowView) -> None:
        raise ValueError("no")

    flow = (
        Sequence.create("f", record=RecordingConfig(dir=tmp_path, run_id="f"))
        .step("a", agent("a", "x"))
        .step("boom", boom)
        .build()
    )
    with pytest.raises(FlowError):
        flow.run("m")
    rec.wait_for_syncs()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl"]
    assert rec.verify_flow(rec.open_flow(tmp_path / "f.jsonl")).calls == 1


def test_a_paused_flow_keeps_the_paused_step_s_run_beside_its_log(tmp_path: Path) -> None:
    flow = (
        Sequence.create("f", record=RecordingConfig(dir=tmp_path, run_id="f"))
        .step("first", agent("a", "x"))
        .step("refund", _refunds())
        .build()
    )
    paused = flow.run("refund me")
    assert isinstance(paused, Paused)
    rec.wait_for_syncs()
    # af resume goes on in the paused run's own file; the finished step's run is folded.
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["002-refund.jsonl"]
    assert paused.recording == tmp_path / "f" / "002-refund.jsonl"
    done = _refunds().resume(paused, approve=True)
    assert done == "refunded"
    read = rec.open_flow(tmp_path / "f.jsonl")
    assert set(read.frames) == {"f/001-first.jsonl", "f/002-refund.jsonl"}
    assert rec.verify_flow(read).ok  # the log keeps the run as it paused


def test_only_what_was_folded_is_removed(tmp_path: Path) -> None:
    """A file someone else put in the runs' folder stays, and the folder with it; a run
    written to after it was folded (its length not the copy's) stays too."""
    flow = (
        Sequence.create("f", record=RecordingConfig(dir=tmp_path, run_id="f"))
        .step("a", agent("a", "x"))
        .step("b", agent("b", "y"))
        .build()
    )
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "notes.txt").write_text("mine")
    real = rec.Recorder.close

    def append(then: Any) -> None:
        with open(tmp_path / "f" / "001-a.jsonl", "ab") as f:
            f.write(b"\n")
        then()

    def close(self: Any, **kw: Any) -> None:
        if kw.get("then") is not None:  # the flow's log: a run grows after it was folded
            kw["then"] = functools.partial(append, kw["then"])
        real(self, **kw)

    with unittest.mock.patch.object(rec.Recorder, "close", close):
        flow.run("m")
        rec.wait_for_syncs()
    left = sorted(p.name for p in (tmp_path / "f").iterdir())
    assert left == ["001-a.jsonl", "notes.txt"]
    assert (tmp_path / "f" / "notes.txt").read_text() == "mine"


def _log_with_frame(path: Path, body: bytes, **frame: Any) -> Path:
    """A flow's log holding one folded run of ``body``, written by the recording's writer."""
    import hashlib

    from afcore.recording import Recorder
    from afcore.recording._flows import FlowEnd, FlowHeader, FlowNode, RunFrame
    from afcore.recording._models import RedactionInfo, UsageInfo
    from afcore.secrets import Redaction

    w = Recorder(path, run_id="f", redactor=Redaction().compile())
    w.header(
        FlowHeader(
            run_id="f",
            started_at="2026-01-01T00:00:00.000+00:00",
            af_version="0",
            python="3",
            flow=FlowNode(name="f", kind="sequence"),
            redaction=RedactionInfo(),
        )
    )
    lines = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
    fields = {
        "path": "f/001-a.jsonl",
        "bytes": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "lines": lines,
    }
    w.embed(RunFrame(**{**fields, **frame}), body)
    w.event(FlowEnd(status="answer", usage=UsageInfo()))
    w.close()
    return path


@pytest.mark.parametrize(
    "body",
    [
        b'{"t":"header"}\n{"t":"seal","h":"x"}\n',
        b'{"t":"header"}\n{"t":"call","torn',  # a run whose last write was cut off
        b"\n\n  \n",
        b"",
    ],
    ids=["whole", "torn", "blank", "empty"],
)
def test_a_folded_run_comes_back_byte_for_byte(tmp_path: Path, body: bytes) -> None:
    log = _log_with_frame(tmp_path / "f.jsonl", body)
    flow = rec.open_flow(log)
    assert flow.problems == [] and flow.chain == [] and flow.end is not None
    frame = flow.frames["f/001-a.jsonl"]
    file, problem = rec.unfold(log, frame)
    assert problem is None and file.read_bytes() == body
    assert rec.unfold(log, frame)[0] == file  # written out once
    # Every line of the log is JSON still; none of the run's seals is one of the log's.
    for raw in log.read_bytes().splitlines():
        if raw.strip() and not raw.endswith(b"torn"):
            orjson.loads(raw)
    assert [x for x in log.read_bytes().splitlines() if x.startswith(b'{"t":"seal"')][1:]


@pytest.mark.parametrize(
    "frame",
    [{"bytes": 10**15}, {"lines": 10**12}, {"bytes": -5, "lines": -1}, {"lines": 0}],
    ids=["huge", "many-lines", "negative", "no-lines"],
)
def test_a_frame_that_lies_about_its_run_is_a_problem_not_a_crash(
    tmp_path: Path, frame: dict[str, int]
) -> None:
    body = b'{"t":"header"}\n{"t":"seal","h":"x"}\n'
    log = _log_with_frame(tmp_path / "f.jsonl", body, **frame)
    flow = rec.open_flow(log)
    said = [m for _, m in flow.problems + flow.chain]
    assert said, "a lying frame must be reported"
    assert "f/001-a.jsonl" not in flow.frames or rec.unfold(log, flow.frames["f/001-a.jsonl"])[1]


def test_a_reader_that_does_not_know_folded_runs_reads_the_log_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from afcore.recording import _flow_reader

    flow = Sequence.create("f", record=tmp_path).step("a", agent("a", "x")).build()
    assert flow.run("m") == "x"
    assert flow.last_result is not None and flow.last_result.recording is not None
    log = flow.last_result.recording
    (frame,) = rec.open_flow(log).frames.values()
    # As a 1.1 reader written before the `run` record: the frame and the run's lines are
    # records of a type it does not know, kept; the log's chain holds over them.
    older = {t: m for t, m in FLOW_TYPES.items() if t != "run"}
    monkeypatch.setattr(_flow_reader, "FLOW_TYPES", older)
    read = rec.open_flow(log)
    assert read.problems == [] and read.chain == [] and read.frames == {}
    assert len(read.unknown) == 1 + frame.record.lines
    assert read.end is not None and read.end.status == "answer"
    # The finished flow's runs beside it are gone: such a reader says which it cannot read.
    rec.wait_for_syncs()
    report = rec.verify_flow(read)
    said = " ".join(m for _, m in report.problems)
    assert not report.ok and "the run of step 'a' cannot be read" in said
    # With them beside it (as af before this one left them), it reads them as before.
    monkeypatch.setattr(_flow_reader, "FLOW_TYPES", FLOW_TYPES)
    runs_beside(log)
    monkeypatch.setattr(_flow_reader, "FLOW_TYPES", older)
    assert rec.verify_flow(rec.open_flow(log)).ok


@pytest.mark.parametrize("fails", [False, True], ids=["synced", "sync-failed"])
def test_what_a_writer_does_after_closing_waits_for_its_file_to_be_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    """What the flow's log does once closed (remove the runs it holds) runs on the sync
    thread after the fsync, and not at all if the fsync failed."""
    import threading

    from afcore.recording import _writer
    from afcore.recording._flows import FlowEnd
    from afcore.recording._models import UsageInfo
    from afcore.secrets import Redaction

    seen: list[str] = []
    real = _writer.os.fsync

    def fsync(fd: int) -> None:
        seen.append("fsync")
        if fails:
            raise OSError(5, "I/O error")
        real(fd)

    monkeypatch.setattr(_writer.os, "fsync", fsync)
    w = _writer.Recorder(tmp_path / "f.jsonl", run_id="f", redactor=Redaction().compile())
    w.event(FlowEnd(status="answer", usage=UsageInfo()))
    w.close(then=lambda: seen.append(threading.current_thread().name))
    rec.wait_for_syncs()
    assert seen == (["fsync"] if fails else ["fsync", "af-recording-sync"])
