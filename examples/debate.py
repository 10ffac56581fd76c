"""Debate: two agents argue at the same time, a judge reads both and decides.

af run examples/debate.py "Should the city build a second bridge?"
"""

from __future__ import annotations

from afcore import Agent, mock
from afcore.flows import FlowView, Parallel, Sequence, StepResult


def speaker(name: str, text: str) -> Agent:
    return Agent.create(provider=mock(reply=text), model="mock", name=name).build()


def both_sides(s: FlowView, branches: dict[str, StepResult]) -> str:
    # A side that failed is said to the judge, not silently dropped.
    said = [
        f"{name.upper()}: {b.output if b.status == 'ok' else '(no argument: ' + b.status + ')'}"
        for name, b in branches.items()
    ]
    return "\n".join(said)


debate = (
    Sequence.create("debate")
    .step(
        "sides",
        Parallel.create("sides")
        .branch("pro", speaker("pro", "Yes: traffic on the old bridge doubled in ten years."))
        .branch("con", speaker("con", "No: the money would fix every school roof first."))
        .merge_with(both_sides)
        .build(),
    )
    .step("judge", speaker("judge", "PRO wins: its argument rests on a measured need."))
    .build()
)

if __name__ == "__main__":
    print(debate.run("Should the city build a second bridge?"))
