"""How a flow's run ended, step by step: the tree of the steps that ran, each with its
output or error, its agent's run, the decisions taken in it and the state it wrote."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from afcore.governance._pause import Paused
from afcore.loop._state import RunResult
from afcore.messages import Usage

__all__ = [
    "FlowDecision",
    "FlowResult",
    "FlowStatus",
    "StepKind",
    "StepResult",
    "StepStatus",
    "Verdict",
]

StepKind = Literal["sequence", "parallel", "conditional", "loop", "agent", "function"]
StepStatus = Literal["ok", "error", "max_iterations", "interrupted", "paused"]
"""``max_iterations``: a loop that reached its limit before ``until`` held, or an agent that
reached its own; the flow goes on with the last output. ``paused``: an agent asked a person;
the flow ends there."""
FlowStatus = Literal["answer", "error", "interrupted", "paused"]


@dataclass(frozen=True)
class Verdict:
    """One predicate's answer: a Conditional's ``when``, or a Loop's ``until`` after a turn."""

    name: str
    """The branch it guards; ``until`` for a loop's."""
    fired: bool
    reason: str
    """What it answered, in words (``predicate returned true``), or why it failed."""
    reads: tuple[tuple[str, Any], ...]
    """The evidence: every value it read, ``(key, value)``, values cut to a line."""
    error: str | None = None
    """Why it could not decide (it raised, or returned something not a bool)."""


@dataclass(frozen=True)
class FlowDecision:
    """Where a Conditional went, or whether a Loop went round again."""

    verdicts: tuple[Verdict, ...]
    """The predicates asked, in order, up to the first that held."""
    chosen: str | None
    """The branch taken (Conditional: its name; None: none held and there is no otherwise,
    so the message passed through); for a loop, ``again``, ``done`` or ``limit``."""
    turn: int | None = None
    """For a loop, the turn after which it was asked."""


@dataclass(frozen=True)
class StepResult:
    """One step that ran (a flow is a step too)."""

    path: str
    """Where it is in the flow: step names from the top, ``/`` between them, and for the
    body of a loop its turn (``review/draft@2``); the top flow is ``""``."""
    name: str
    kind: StepKind
    status: StepStatus
    output: Any = None
    error: BaseException | None = field(default=None, repr=False)
    ms: float = 0.0
    steps: tuple[StepResult, ...] = ()
    """The steps it ran, in the order they started."""
    run: RunResult | None = field(default=None, repr=False)
    """For an agent's step, its run."""
    decisions: tuple[FlowDecision, ...] = ()
    """A Conditional's choice; a Loop's, after each turn."""
    writes: tuple[str, ...] = ()
    """The state keys it wrote (its own name among them)."""
    reads: tuple[tuple[str, Any], ...] = ()
    """For a function's step, the values it read through ``s``, as evidence."""
    merge_reads: tuple[tuple[str, Any], ...] = ()
    """For a Parallel with a merge, the values the merge read."""
    produced_by: str | None = None
    """The path of the step whose output this step's output is (its own for an agent, a
    function or a merge; the chosen branch's, the last step's, the last turn's for flows)."""

    def walk(self) -> Iterator[StepResult]:
        """This step and every step under it, depth first, in the order they started."""
        yield self
        for step in self.steps:
            yield from step.walk()

    def find(self, path: str) -> StepResult | None:
        """The step at ``path`` (the last to run there, for the steps of a loop's body
        without ``@turn``)."""
        found = None
        for step in self.walk():
            if step.path == path:
                return step
            if _untimed(step.path) == path:
                found = step
        return found


def _untimed(path: str) -> str:
    return "/".join(part.partition("@")[0] for part in path.split("/"))


@dataclass(frozen=True)
class FlowResult:
    """How a flow's run ended (``flow.last_result``)."""

    status: FlowStatus
    answer: str
    """The flow's output as text (a value that is not a string, as JSON)."""
    output: Any
    """The flow's output as its last step left it."""
    steps: StepResult
    """The top flow's step: the tree of everything that ran."""
    state: dict[str, Any]
    """The flow's state when it ended (each step's output under its name, and what steps
    wrote)."""
    run_id: str
    recording: Path | None
    usage: Usage
    """Every agent call's usage, summed."""
    calls: int
    """Model calls made by every agent of the flow."""
    iterations: int
    """Iterations of every agent of the flow."""
    error: BaseException | None = field(default=None, repr=False)
    stop_reason: str | None = None
    """Why the model stopped the reply that became the answer (an agent's last reply);
    None when no agent produced it."""
    paused: Paused | None = None
    """For status ``paused``: the paused run of the step that asked a person."""
    seconds: float = 0.0

    @property
    def produced_by(self) -> str | None:
        """The path of the step whose output is the flow's answer."""
        return self.steps.produced_by

    def agents(self) -> Iterator[StepResult]:
        """The agent steps that ran, in the order they started."""
        return (s for s in self.steps.walk() if s.kind == "agent")
