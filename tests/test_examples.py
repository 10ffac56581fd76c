"""The pattern examples in examples/ run offline and do what their pattern means: each is
loaded from its file, as ``af run`` loads it, and run on its scripted models."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from afcore import recording as rec
from afcore.flows import Flow, FlowResult

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    path = EXAMPLES / f"{name}.py"
    # The examples ship in the repository: one gone is a failure, not a reason to skip.
    assert path.is_file(), f"examples/{name}.py is missing"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(flow: Flow, message: str) -> FlowResult:
    flow.run(message)
    result = flow.last_result
    assert result is not None and result.status == "answer"
    assert result.recording is not None
    report = rec.verify_flow(rec.open_flow(result.recording))
    assert report.ok, report.problems
    return result


def test_router_sends_each_question_to_its_expert() -> None:
    router = load("router").router
    assert run(router, "I forgot my password").produced_by == "route/account"
    assert run(router, "What does the Pro plan include?").produced_by == "route/product"


def test_reflexion_revises_until_the_critic_is_satisfied() -> None:
    result = run(load("reflexion").reflexion, "Write a tagline for a bike shop")
    assert result.answer == "Bikes for every road, fixed while you wait."
    decisions = result.steps.decisions
    assert [d.chosen for d in decisions] == ["again", "again", "done"]
    assert decisions[0].verdicts[0].reads == (("state.satisfied", False),)
    assert decisions[-1].verdicts[0].reads == (("state.satisfied", True),)
    # the second draft was written from the first draft, not from the critique
    second = result.steps.find("attempt@2/draft")
    assert second is not None and second.run is not None
    assert result.calls == 6


def test_debate_hears_both_sides_at_once_and_the_judge_reads_both() -> None:
    result = run(load("debate").debate, "Should the city build a second bridge?")
    assert result.produced_by == "judge"
    sides = result.steps.find("sides")
    assert sides is not None and [b.name for b in sides.steps] == ["pro", "con"]
    said = result.state["sides"]
    assert said.startswith("PRO: Yes") and "\nCON: No" in said
    judge = result.steps.find("judge")
    assert judge is not None and judge.run is not None and result.recording is not None
    # The judge's run, from the flow's log (the flow ended: its runs are folded into it).
    log = rec.open_flow(result.recording)
    step = log.find("judge")
    assert step is not None and (file := log.run_file(step)) is not None
    with rec.open_recording(file) as heard:
        assert heard.message(1) == {"role": "user", "content": said}


def test_swarm_goes_round_until_a_majority_agrees() -> None:
    result = run(load("swarm").swarm, "Which month has the most rain in Lisbon?")
    assert result.answer == "December"
    assert [d.chosen for d in result.steps.decisions] == ["again", "done"]
    assert result.state["votes"] == {"December": 3}
    assert result.calls == 6


def test_hierarchical_hands_each_worker_its_part() -> None:
    result = run(load("hierarchical").hierarchical, "Plan a team offsite")
    inputs = {s.path: s for s in result.steps.walk()}
    assert inputs["workers/to-travel"].output == "arrange travel"
    assert inputs["workers/to-agenda"].output == "draft the agenda"
    assert result.produced_by == "synthesize"
    assert [s.name for s in result.agents()] == [
        "planner",
        "venue",
        "travel",
        "agenda",
        "synthesize",
    ]
