"""Hierarchical: a planner splits the task, workers take one part each in turn, a
synthesizer writes the result from what they did.

    af run examples/hierarchical.py "Plan a team offsite"
"""

from __future__ import annotations

from collections.abc import Callable

from afcore import Agent, mock
from afcore.flows import FlowView, Sequence


def agent(name: str, text: str) -> Agent:
    return Agent.create(provider=mock(reply=text), model="mock", name=name).build()


def plan_to_state(s: FlowView) -> str:
    parts = [p.strip() for p in str(s.message).split(";")]
    s["parts"] = parts
    return parts[0]


def next_part(index: int) -> Callable[[FlowView], str]:
    def hand_over(s: FlowView) -> str:
        return str(s["parts"][index])

    hand_over.__name__ = f"hand_over_{index}"
    return hand_over


def collect(s: FlowView) -> str:
    return "; ".join(str(s[k]) for k in ("venue", "travel", "agenda"))


workers = (
    Sequence.create("workers")
    .step("venue", agent("venue", "Venue: the lake lodge, 20 rooms, 12-14 May."))
    .step("to-travel", next_part(1))
    .step("travel", agent("travel", "Travel: a coach from the office at 9:00."))
    .step("to-agenda", next_part(2))
    .step("agenda", agent("agenda", "Agenda: strategy day one, hike day two."))
    .step("collect", collect)
    .build()
)

hierarchical = (
    Sequence.create("hierarchical")
    .step("planner", agent("planner", "book a venue; arrange travel; draft the agenda"))
    .step("split", plan_to_state)
    .step("workers", workers)
    .step("synthesize", agent("synthesizer", "Offsite: lake lodge 12-14 May, coach at 9:00."))
    .build()
)

if __name__ == "__main__":
    print(hierarchical.run("Plan a team offsite"))
