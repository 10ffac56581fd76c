"""Swarm: several agents answer at the same time, a merge tallies them; the loop goes round
until a majority agrees (or three rounds have run).

    af run examples/swarm.py "Which month has the most rain in Lisbon?"
"""

from __future__ import annotations

from collections import Counter

from afcore import Agent, mock
from afcore.flows import FlowView, Loop, Parallel, StepResult


def voter(name: str, answers: list[str]) -> Agent:
    return Agent.create(provider=mock(replies=answers), model="mock", name=name).build()


def tally(s: FlowView, branches: dict[str, StepResult]) -> str:
    votes = Counter(str(b.output).strip() for b in branches.values() if b.status == "ok")
    answer, count = votes.most_common(1)[0] if votes else ("", 0)
    s["agreed"] = count * 2 > len(branches)
    s["votes"] = dict(votes)
    return answer


def build() -> Loop:
    round_ = (
        Parallel.create("round")
        .branch("a", voter("a", ["November", "December"]))
        .branch("b", voter("b", ["December", "December"]))
        .branch("c", voter("c", ["January", "December"]))
        .merge_with(tally)
        .build()
    )
    return (
        Loop.create("swarm").repeat(round_).until(lambda s: s["agreed"]).max_iterations(3).build()
    )


swarm = build()

if __name__ == "__main__":
    print(swarm.run("Which month has the most rain in Lisbon?"))
