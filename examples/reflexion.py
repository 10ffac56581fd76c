"""Reflexion: a writer drafts, a critic judges; the loop goes round until the critic is
satisfied (or three turns have run). The critic's verdict is state the loop's ``until``
reads, so each turn's decision carries it as evidence.

    af run examples/reflexion.py "Write a tagline for a bike shop"
"""

from __future__ import annotations

from afcore import Agent, mock
from afcore.flows import FlowView, Loop, Sequence
from afcore.messages import Request

DRAFTS = ["Bikes.", "Bikes for every road.", "Bikes for every road, fixed while you wait."]


def _critic(request: Request) -> str:
    draft = str(getattr(request.messages[-1], "content", ""))
    if "while you wait" in draft:
        return "SATISFIED: concrete and specific."
    return "REVISE: say what makes the shop different."


def build() -> Loop:
    calls = {"n": 0}

    def write(request: Request) -> str:
        draft = DRAFTS[min(calls["n"], len(DRAFTS) - 1)]
        calls["n"] += 1
        return draft

    writer = Agent.create(provider=mock(respond=write), model="mock", name="writer").build()
    critic = Agent.create(provider=mock(respond=_critic), model="mock", name="critic").build()

    def verdict(s: FlowView) -> str:
        s["satisfied"] = str(s.message).startswith("SATISFIED")
        return str(s["draft"])  # the next turn revises the draft, not the critique

    turn = (
        Sequence.create("attempt")
        .step("draft", writer)
        .step("critique", critic)
        .step("verdict", verdict)
        .build()
    )
    return (
        Loop.create("reflexion")
        .repeat(turn)
        .until(lambda s: s["satisfied"])
        .max_iterations(3)
        .build()
    )


reflexion = build()

if __name__ == "__main__":
    print(reflexion.run("Write a tagline for a bike shop"))
