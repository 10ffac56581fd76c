"""Injections: context engineering into the three slots of a model call, with provenance.

An injection is slot x trigger x cache: what lands (system text, a message, tools), when it
fires (always, a rule, after a tool returned, when the model activates it), and how stable
it is. The loop evaluates every injection at every iteration and recomposes the slots.
"""

from afcore.injections._engine import Composition, Decision, InjectionEngine, TurnState
from afcore.injections._model import (
    Always,
    ConfigureContext,
    Injection,
    LLMActivated,
    OnToolReturn,
    RuleTrigger,
    Trigger,
    fact,
    instruction,
    skill,
    steering,
)
from afcore.injections._view import RunView

__all__ = [
    "Always",
    "Composition",
    "ConfigureContext",
    "Decision",
    "Injection",
    "InjectionEngine",
    "LLMActivated",
    "OnToolReturn",
    "RuleTrigger",
    "RunView",
    "Trigger",
    "TurnState",
    "fact",
    "instruction",
    "skill",
    "steering",
]
