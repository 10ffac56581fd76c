"""Agents that run offline, to try af without a model or a key.

``DEMOS`` names each one (``af run --demo NAME``): ``trip`` (the default), ``compaction``,
``sliding``, and ``router``, a composed run (a flow routing a ticket to one of two agents).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from afcore.agent import Agent
from afcore.demos import compaction, router, trip
from afcore.demos.trip import DEFAULT_MESSAGE, build_agent
from afcore.flows import Flow

__all__ = ["DEFAULT_MESSAGE", "DEMOS", "Demo", "build_agent"]


@dataclass(frozen=True)
class Demo:
    """A built-in demo: what builds it, the message it answers by default, what it shows."""

    name: str
    build: Callable[[], Agent | Flow]
    message: str
    about: str

    @property
    def source(self) -> str:
        """Where its agent comes from, as ``af run`` would load it (``module:function``)."""
        return f"{self.build.__module__}:{self.build.__name__}"


DEMOS: dict[str, Demo] = {
    d.name: d
    for d in (
        Demo(
            "trip",
            trip.build_agent,
            trip.DEFAULT_MESSAGE,
            "a trip planner: concurrent tools, injections, a skill, a rejected argument",
        ),
        Demo(
            "compaction",
            compaction.build_agent,
            compaction.DEFAULT_MESSAGE,
            "a long research run folded by summarize_oldest, with refusals",
        ),
        Demo(
            "sliding",
            compaction.build_sliding_agent,
            compaction.DEFAULT_MESSAGE,
            "the same research run under sliding_window, with a notebook",
        ),
        Demo(
            "router",
            router.build_flow,
            router.DEFAULT_MESSAGE,
            "a flow: a ticket triaged, then routed to a billing or a tech agent",
        ),
    )
}
