"""Control flows: compose agents, flows and functions into one run, recorded as one.

``Sequence``, ``Parallel``, ``Conditional`` and ``Loop``; a step is an agent, a flow or a
function of the flow's state ``s`` (a :class:`FlowView`). Run a flow like an agent:
``flow.run(message)``, ``await flow.arun(message)``; ``flow.last_result`` is the tree of
the steps that ran. See ``docs/flows.md``.
"""

from afcore.flows._flow import (
    BranchesFailedError,
    Conditional,
    Flow,
    FlowError,
    Loop,
    Parallel,
    Sequence,
    StepEvent,
)
from afcore.flows._result import FlowDecision, FlowResult, StepResult, Verdict
from afcore.flows._state import FlowView

__all__ = [
    "BranchesFailedError",
    "Conditional",
    "Flow",
    "FlowDecision",
    "FlowError",
    "FlowResult",
    "FlowView",
    "Loop",
    "Parallel",
    "Sequence",
    "StepEvent",
    "StepResult",
    "Verdict",
]
