"""Governance: rules around tools and messages, a person's approval, the answer's contract.

- ``.tool_middleware(*links)``: each link's ``on_tool_call(call)`` answers ``allow()``,
  ``allow(args, why)``, ``deny(reason)`` or ``ask(question)`` before a tool runs, and its
  ``on_tool_result(result)`` answers ``allow()``, ``allow(value, why)`` or ``deny(reason)``
  before the model reads what the tool returned (walked from the last link to the first);
- ``.message_middleware(*links)``: ``on_message(text, phase)`` on the user's message and on
  the answer;
- ``ask`` pauses the run; ``agent.resume(paused, approve=...)`` or ``af resume`` goes on;
- ``.output_schema(...)`` holds the answer to a shape, ``.output_fallback(...)`` says what a
  typed run gets when it does not.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from afcore.governance._chain import Walk, walk_call, walk_message, walk_result
    from afcore.governance._contract import NO_CANNED, OutputContract
    from afcore.governance._pause import Paused
    from afcore.governance._rules import NO_GOVERNANCE, Governance
    from afcore.governance._verbs import (
        HOOKS,
        Allow,
        Ask,
        Deny,
        MessageMiddleware,
        Phase,
        ToolCallInfo,
        ToolMiddleware,
        ToolResultInfo,
        Verdict,
        allow,
        ask,
        deny,
        hooks_of,
        link_name,
    )
    from afcore.governance._words import decision_words

# Imported when first used: a reader that says a decision in words loads none of the rest.
_WHERE: dict[str, tuple[str, ...]] = {
    "afcore.governance._chain": (
        "Walk",
        "walk_call",
        "walk_message",
        "walk_result",
    ),
    "afcore.governance._contract": (
        "NO_CANNED",
        "OutputContract",
    ),
    "afcore.governance._pause": ("Paused",),
    "afcore.governance._rules": (
        "NO_GOVERNANCE",
        "Governance",
    ),
    "afcore.governance._verbs": (
        "HOOKS",
        "Allow",
        "Ask",
        "Deny",
        "MessageMiddleware",
        "Phase",
        "ToolCallInfo",
        "ToolMiddleware",
        "ToolResultInfo",
        "Verdict",
        "allow",
        "ask",
        "deny",
        "hooks_of",
        "link_name",
    ),
    "afcore.governance._words": ("decision_words",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "HOOKS",
    "NO_CANNED",
    "NO_GOVERNANCE",
    "Allow",
    "Ask",
    "Deny",
    "Governance",
    "MessageMiddleware",
    "OutputContract",
    "Paused",
    "Phase",
    "ToolCallInfo",
    "ToolMiddleware",
    "ToolResultInfo",
    "Verdict",
    "Walk",
    "allow",
    "ask",
    "decision_words",
    "deny",
    "hooks_of",
    "link_name",
    "walk_call",
    "walk_message",
    "walk_result",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'afcore.governance' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
