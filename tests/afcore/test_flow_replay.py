"""Replaying a composed run (``afcore.replay.replay_flow``) and two flow runs side by side
(``afcore.readmodel.diff_flows``): the flow's code runs again with every agent step answered
from its recorded run, and the first difference, in the flow or inside an agent step, is
named where it is."""

from __future__ import annotations

import copy
import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import afcore.demos.router as router
from afcore import Agent, mock
from afcore.flows import Conditional, Flow, Loop, Sequence
from afcore.readmodel import diff_flows
from afcore.recording import RecordingConfig, open_flow, verify_flow
from afcore.replay import FlowReplayReport, replay_flow
from tests.conftest import runs_beside, without_folded_runs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "recordings" / "flow-router.jsonl"
EXAMPLES = ROOT / "examples"


def recorded(flow: Flow, message: str, folder: Path) -> Path:
    """``flow`` run on ``message``, recorded in ``folder``: its log."""
    flow.recording = RecordingConfig(dir=folder)
    flow.run(message)
    assert flow.last_result is not None and flow.last_result.recording is not None
    return flow.last_result.recording


def sample(tmp_path: Path, *, folded: bool = True) -> Path:
    """A copy of the router demo's sample (one file: its runs are folded into it), to
    change; ``folded`` False: the log without the runs folded into it, its runs in the
    folder beside it (as a flow killed before its end leaves them)."""
    if not SAMPLE.is_file():
        pytest.skip("the router sample is not in this checkout")
    log = tmp_path / SAMPLE.name
    shutil.copy(SAMPLE, log)
    if not folded:
        log.write_bytes(without_folded_runs(runs_beside(log).read_bytes()))
    return log


def replayed(log: Path, flow: Flow, tmp_path: Path, **options: Any) -> FlowReplayReport:
    return replay_flow(log, flow, out=tmp_path / "replays", **options)


# -- identical ------------------------------------------------------------------------------


@pytest.mark.parametrize("tools", ["run", "recorded"])
def test_the_router_sample_replays_identically(tmp_path: Path, tools: str) -> None:
    report = replayed(sample(tmp_path), router.build_flow(), tmp_path, tools=tools)
    assert report.status == "identical" and report.ok, report.summary()
    assert report.summary() == "4 steps, 2 calls, identical"
    assert (report.steps, report.calls, report.identical_calls) == (4, 2, 2)
    # The replay wrote its own composed run, which verifies and names the one replayed.
    assert report.recording is not None
    own = open_flow(report.recording)
    assert verify_flow(own).ok
    assert own.header.replay_of is not None
    assert own.header.replay_of.file == SAMPLE.name and own.header.replay_of.tools == tools
    assert own.header.source == "afcore.demos.router:build_flow"
    assert diff_flows(open_flow(SAMPLE), own).identical


def test_no_agent_s_model_is_asked_during_a_replay(tmp_path: Path) -> None:
    asked: list[str] = []

    def counted(reply: str) -> Callable[[Any], dict[str, Any]]:
        def respond(request: Any) -> dict[str, Any]:
            asked.append(reply)
            return {"content": reply}

        return respond

    def build() -> Flow:
        a = Agent.create(provider=mock(respond=counted("A")), model="m", name="a").build()
        b = Agent.create(provider=mock(respond=counted("B")), model="m", name="b").build()
        return Sequence.create("two").step("a", a).step("b", b).build()

    log = recorded(build(), "hello", tmp_path)
    assert asked == ["A", "B"]
    asked.clear()
    report = replayed(log, build(), tmp_path)
    assert report.ok, report.summary()
    assert report.calls == 2 and asked == []


def load_example(name: str) -> ModuleType:
    path = EXAMPLES / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    spec = importlib.util.spec_from_file_location(f"replayed_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLE_RUNS = {
    "router": "I forgot my password",
    "reflexion": "Write a tagline for a bike shop",
    "debate": "Should the city build a second bridge?",
    "swarm": "How many legs has a spider?",
    "hierarchical": "Plan the launch of a bike shop",
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
def test_every_example_flow_replays_identically(name: str, tmp_path: Path) -> None:
    module = load_example(name)
    log = recorded(getattr(module, name), EXAMPLE_RUNS[name], tmp_path)
    steps = sum(1 for _ in open_flow(log).steps())
    for tools in ("run", "recorded"):
        report = replayed(log, getattr(module, name), tmp_path, tools=tools)
        assert report.ok, report.summary()
        assert report.steps == steps and report.calls == open_flow(log).end.calls  # type: ignore[union-attr]


# -- departures -------------------------------------------------------------------------------


def edited_predicate() -> Flow:
    """The router demo with its billing predicate edited: nothing is billing any more."""
    flow = router.build_flow()
    assert isinstance(flow, Sequence)
    route = flow.steps[1][1]
    assert isinstance(route, Conditional)
    (name, _, runnable), *rest = route.whens
    route.whens = ((name, lambda s: s["intent"] == "refund", runnable), *rest)
    return flow


def test_an_edited_predicate_is_named_with_what_it_read(tmp_path: Path) -> None:
    report = replayed(sample(tmp_path), edited_predicate(), tmp_path)
    assert report.status == "diverged" and not report.ok
    d = report.divergence
    assert d is not None
    assert (d.step, d.slot, d.path, d.kind) == (
        "route",
        "decision",
        "predicate billing: answered",
        "changed",
    )
    assert (d.recorded, d.replayed) == (True, False)
    # The same evidence, another answer: the predicate changed, not what it read.
    assert d.where["reads_a"] == d.where["reads_b"] == {"state.intent": "billing"}
    assert d.why_key == "route/billing" and d.call is None
    assert report.steps == 1 and report.calls == 0  # triage ran as recorded; no agent ran
    assert "step route, decision, predicate billing: answered" in report.summary()


def test_an_edited_agent_instruction_is_named_at_its_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router, "URGENT_NOTE", "The ticket is urgent: say sorry first.")
    report = replayed(sample(tmp_path), router.build_flow(), tmp_path)
    d = report.divergence
    assert d is not None, report.summary()
    assert (d.step, d.call, d.slot, d.path) == (
        "route/billing",
        1,
        "messages",
        "message 2: content",
    )
    assert isinstance(d.recorded, str) and "apologise first" in d.recorded
    assert d.replayed == "The ticket is urgent: say sorry first."
    assert d.why_key == "message:2" and d.run == "flow-router/001-route-billing.jsonl"
    assert (
        report.summary()
        == "diverged at step route/billing, call 1, messages, message 2: content: differs"
    )
    # The replay's log names the run that departed: the two diff into its calls.
    assert report.recording is not None
    d_runs = diff_flows(open_flow(SAMPLE), open_flow(report.recording))
    inside = next(s for s in d_runs.steps if s.path == "route/billing")
    assert inside.run is not None and inside.run.first is not None
    assert inside.run.first.path == "message 2: content"


def test_then_live_a_decision_that_went_the_other_way_runs_the_branch_it_chose_live(
    tmp_path: Path,
) -> None:
    report = replayed(sample(tmp_path), edited_predicate(), tmp_path, then_live=True)
    assert report.status == "diverged" and not report.ok and report.then_live
    d = report.divergence
    assert d is not None and (d.step, d.path) == ("route", "predicate billing: answered")
    # The branch the edit chose is not in the recording: its agent ran on its own provider.
    assert report.live_steps == ["route/tech"]
    assert report.calls == 2 and report.identical_calls == 0
    assert report.answer is not None and report.error is None
    assert report.recording is not None
    own = open_flow(report.recording)
    assert verify_flow(own).ok and own.end is not None and own.end.status == "answer"
    assert own.end.produced_by == "route/tech"
    assert own.header.replay_of is not None and own.header.replay_of.then_live
    found = diff_flows(open_flow(SAMPLE), own)
    only = {s.path: s.only_in for s in found.steps if s.only_in}
    assert only == {"route/billing": "a", "route/tech": "b"}
    assert report.to_json()["live_steps"] == ["route/tech"]


def test_then_live_an_agent_step_that_departs_goes_live_at_its_call_and_the_flow_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router, "URGENT_NOTE", "The ticket is urgent: say sorry first.")
    log = sample(tmp_path)
    report = replayed(log, router.build_flow(), tmp_path, then_live=True)
    d = report.divergence
    assert d is not None and (d.step, d.call, d.slot) == ("route/billing", 1, "messages")
    assert report.live_steps == ["route/billing"]
    assert report.calls == 2 and report.identical_calls == 0
    assert report.recording is not None
    own = open_flow(report.recording)
    assert own.end is not None and own.end.status == "answer" and verify_flow(own).ok
    # Without then_live the same replay stops at that call, its flow unfinished.
    stopped = replayed(log, router.build_flow(), tmp_path)
    assert stopped.divergence is not None and stopped.answer is None


def test_then_live_changes_nothing_of_a_replay_without_a_difference(tmp_path: Path) -> None:
    report = replayed(sample(tmp_path), router.build_flow(), tmp_path, then_live=True)
    assert report.ok and report.summary() == "4 steps, 2 calls, identical"
    assert report.live_steps == []


def test_a_value_a_step_wrote_otherwise_is_named_before_the_decision_that_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    triage = router.triage

    def edited(s: Any) -> Any:
        out = triage(s)
        s["intent"] = "tech"
        return out

    monkeypatch.setattr(router, "triage", edited)
    d = replayed(sample(tmp_path), router.build_flow(), tmp_path).divergence
    assert d is not None
    assert (d.step, d.slot, d.path) == ("triage", "step", "wrote state.intent")
    assert (d.recorded, d.replayed, d.why_key) == ("billing", "tech", "state.intent")


def test_a_loop_s_edited_until_is_named_at_its_turn(tmp_path: Path) -> None:
    module = load_example("reflexion")
    log = recorded(module.reflexion, EXAMPLE_RUNS["reflexion"], tmp_path)
    flow = module.reflexion
    assert isinstance(flow, Loop)
    edited = Loop(flow.name, flow.recording, flow.body, lambda s: s.turn >= 1, flow.limit)
    d = replayed(log, edited, tmp_path).divergence
    assert d is not None
    assert (d.step, d.slot, d.path) == ("", "decision", "turn 1: predicate until: answered")
    assert (d.recorded, d.replayed) == (False, True)
    assert d.where["turn"] == 1


def test_a_parallel_branch_s_agent_edited_is_named_in_its_branch(tmp_path: Path) -> None:
    module = load_example("debate")
    log = recorded(module.debate, EXAMPLE_RUNS["debate"], tmp_path)
    flow = load_example("debate").debate
    paths = [s.path for s in open_flow(log).steps() if s.kind == "agent"]
    branch = next(p for p in paths if p.count("/") == 1)
    parallel = next(r for _, r in flow.steps if hasattr(r, "branches"))
    name = branch.rsplit("/", 1)[1]
    agent = copy.copy(dict(parallel.branches)[name])
    agent.model = "mock-2"
    parallel.branches = tuple((n, agent if n == name else r) for n, r in parallel.branches)
    d = replayed(log, flow, tmp_path).divergence
    assert d is not None
    assert (d.step, d.call, d.slot, d.path) == (branch, 1, "model", "model")


# -- hostile recordings -----------------------------------------------------------------------


def test_a_torn_log_replays_up_to_where_it_ends(tmp_path: Path) -> None:
    log = runs_beside(sample(tmp_path))  # killed before its end: its runs beside it
    whole = log.read_bytes()
    cut = whole.index(b'{"t":"step_end","path":"route/billing"') + 40
    log.write_bytes(whole[:cut])
    report = replayed(log, router.build_flow(), tmp_path)
    assert report.status == "identical" and not report.ok and not report.finished
    assert report.ended_at == "route/billing" and report.calls == 2
    assert report.summary().startswith(
        "the recorded flow did not finish: 1 step, 2 calls identical"
    )


def test_a_missing_agent_run_fails_in_a_sentence(tmp_path: Path) -> None:
    log = sample(tmp_path, folded=False)
    (log.with_suffix("") / "001-route-billing.jsonl").unlink()
    report = replayed(log, router.build_flow(), tmp_path)
    assert report.status == "failed" and not report.ok
    assert report.error is not None
    assert "the run of step route/billing is not in the recording" in report.error
    assert "flow-router/001-route-billing.jsonl is missing" in report.error


def test_an_agent_run_swapped_for_another_is_refused(tmp_path: Path) -> None:
    log = sample(tmp_path, folded=False)
    other = runs_beside(recorded(router.build_flow(), "the sync is broken", tmp_path / "other"))
    (tech,) = other.with_suffix("").glob("*.jsonl")
    shutil.copy(tech, log.with_suffix("") / "001-route-billing.jsonl")
    report = replayed(log, router.build_flow(), tmp_path)
    assert report.status == "failed"
    assert (
        report.error is not None and "is run 001-route-tech, not 001-route-billing" in report.error
    )


def test_an_agent_s_run_is_not_a_flow_s_log(tmp_path: Path) -> None:
    log = sample(tmp_path, folded=False)
    report = replayed(
        log.with_suffix("") / "001-route-billing.jsonl", router.build_flow(), tmp_path
    )
    assert report.status == "failed"
    assert report.error is not None and "not a flow's recording" in report.error


# -- two flow runs side by side ---------------------------------------------------------------


def test_diff_of_two_flow_runs_names_the_steps_and_the_decision_and_its_evidence(
    tmp_path: Path,
) -> None:
    a = open_flow(recorded(router.build_flow(), router.DEFAULT_MESSAGE, tmp_path / "a"))
    b = open_flow(recorded(router.build_flow(), "The sync is broken, asap", tmp_path / "b"))
    d = diff_flows(a, b)
    assert not d.identical
    by_path = {s.path: s for s in d.steps}
    assert by_path["route/billing"].only_in == "a" and by_path["route/tech"].only_in == "b"
    decision = next(c for c in by_path["route"].changes if c.slot == "decision")
    assert decision.path == "predicate billing: answered"
    assert decision.where["reads_a"] == {"state.intent": "billing"}
    assert decision.where["reads_b"] == {"state.intent": "tech"}
    assert decision.why_key == "state.intent"
    chosen = [c for c in by_path["route"].changes if c.path == "chosen"]
    assert [(c.a, c.b) for c in chosen] == [("billing", "tech")]
    # The user's message is the top flow's own difference; a flow's output taken from a
    # step inside it, and each later step's input, are passed on, not listed again.
    assert [c.path for c in by_path[""].changes] == ["input"]
    assert by_path["route"].carried >= 2
    assert not any(c.path == "input" for c in by_path["route"].changes)
    assert [c.path for c in d.end] == ["answer", "produced by"]
    assert [s["path"] for s in d.to_json()["steps"]][:2] == ["", "triage"]


def test_diff_of_two_flow_runs_goes_call_by_call_inside_an_agent_step_both_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = open_flow(recorded(router.build_flow(), router.DEFAULT_MESSAGE, tmp_path / "a"))
    monkeypatch.setattr(router, "URGENT_NOTE", "Urgent: say sorry.")
    b = open_flow(recorded(router.build_flow(), router.DEFAULT_MESSAGE, tmp_path / "b"))
    d = diff_flows(a, b)
    (step,) = d.steps
    assert step.path == "route/billing" and step.changes == []
    assert step.run is not None
    first = step.run.first
    assert first is not None and (first.slot, first.path) == ("messages", "message 2: content")
    assert diff_flows(a, a).identical


def test_diff_says_when_an_agent_s_runs_cannot_be_compared(tmp_path: Path) -> None:
    log = sample(tmp_path, folded=False)
    (log.with_suffix("") / "001-route-billing.jsonl").unlink()
    d = diff_flows(open_flow(SAMPLE), open_flow(log))
    (step,) = d.steps
    assert step.run is None and step.run_error is not None
    assert "cannot be compared" in step.run_error


def test_an_agent_s_run_cut_short_ends_the_replay_in_its_step(tmp_path: Path) -> None:
    log = sample(tmp_path, folded=False)
    run = log.with_suffix("") / "001-route-billing.jsonl"
    whole = run.read_bytes()
    run.write_bytes(whole[: whole.index(b'{"t":"reply","seq":7')])  # call 2, unanswered
    report = replayed(log, router.build_flow(), tmp_path)
    assert not report.ok and report.divergence is None, report.summary()
    assert report.ended_at == "route/billing"
    assert "the recording ends in step route/billing" in report.summary()


def test_a_flow_that_failed_replays_to_the_same_failure(tmp_path: Path) -> None:
    from afcore.flows import FlowError, Parallel

    def boom(s: Any) -> None:
        raise ValueError("no")

    def build() -> Flow:
        a = Agent.create(provider=mock(reply="A"), model="m", name="a").build()
        branches = (
            Parallel.create("p")
            .branch("a", a)
            .branch("b", boom)
            .merge_with(lambda s, br: {k: v.status for k, v in br.items()})
            .build()
        )
        return Sequence.create("s").step("p", branches).step("fail", boom).build()

    flow = build()
    with pytest.raises(FlowError):
        recorded(flow, "hi", tmp_path)
    assert flow.last_result is not None and flow.last_result.recording is not None
    report = replayed(flow.last_result.recording, build(), tmp_path)
    assert report.ok and report.summary() == "5 steps, 1 call, identical"
    assert report.error == "FlowError: step 'fail' failed: ValueError: no"
