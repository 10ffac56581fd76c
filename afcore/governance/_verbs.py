"""The verbs a middleware link answers with, and the links themselves.

A link decides; it never acts in place of what it guards. Its hooks answer ``allow()``,
``allow(value, why)``, ``deny(reason)`` or (before a tool call only) ``ask(question)``, and
nothing else: a link cannot hand the model a result of its own making, nor the caller an
answer the model did not give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from afcore.errors import UsageError

__all__ = [
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
]

Phase: TypeAlias = Literal["input", "output"]
"""Where a message link is asked: the user's message before the run commits it, or the
answer before the caller receives it."""

HOOKS = ("on_tool_call", "on_tool_result", "on_message")


class _Unchanged:
    def __repr__(self) -> str:
        return "unchanged"


UNCHANGED: Any = _Unchanged()


@dataclass(frozen=True, slots=True)
class Allow:
    """Let it pass; with a value, as changed by the link, for the reason ``why``."""

    value: Any = UNCHANGED
    why: str | None = None

    @property
    def changed(self) -> bool:
        return self.value is not UNCHANGED


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse it. Before or after a tool call, the model reads ``reason`` verbatim as the
    tool's result and the run goes on; on a message, the run raises MessageDeniedError."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Pause the run until a person approves or declines (before a tool call only)."""

    question: str


Verdict: TypeAlias = Allow | Deny | Ask


def allow(value: Any = UNCHANGED, why: str | None = None) -> Allow:
    """Let the call, result or message pass: ``allow()`` as it is, ``allow(value, why)``
    changed (new arguments, a new result, a new text), saying why; the recording keeps the
    why beside the change."""
    if value is not UNCHANGED and (not isinstance(why, str) or not why.strip()):
        raise UsageError("allow(value, why) changes what it lets pass: say why, as a string")
    if value is UNCHANGED and why is not None:
        raise UsageError("allow(why=...) without a value changes nothing: give the new value")
    return Allow(value, why)


def deny(reason: str) -> Deny:
    """Refuse, with the reason the model (or the caller's error) reads."""
    if not isinstance(reason, str) or not reason.strip():
        raise UsageError("deny(reason) needs the reason, as a non-empty string")
    return Deny(reason)


def ask(question: str) -> Ask:
    """Pause the run for a person, who approves or declines the tool call."""
    if not isinstance(question, str) or not question.strip():
        raise UsageError("ask(question) needs the question, as a non-empty string")
    return Ask(question)


@dataclass(frozen=True)
class ToolCallInfo:
    """A tool call as a link's ``on_tool_call`` sees it: with the arguments as the links
    before it left them."""

    name: str
    args: dict[str, Any]
    """A copy: a link changes them by answering ``allow(new_args, why)``."""
    call_id: str
    k: int
    """Which call of this tool in the run, from 1."""
    iteration: int
    run_id: str
    state: dict[str, Any] = field(repr=False, default_factory=dict)
    """The run's application state (``run(..., state=...)``)."""


@dataclass(frozen=True)
class ToolResultInfo:
    """A tool's result as a link's ``on_tool_result`` sees it: the text the model would
    read, as the links after it in the chain left it."""

    name: str
    args: dict[str, Any]
    """The arguments the tool ran with."""
    call_id: str
    k: int
    iteration: int
    run_id: str
    content: str
    is_error: bool
    """True when the tool raised (the content says what)."""
    state: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class ToolMiddleware:
    """A link of the tool middleware chain made of functions: ``on_tool_call(call)`` before
    the tool runs, ``on_tool_result(result)`` before the model reads what it returned (either
    or both). Any object with a ``name`` and these methods is a link too."""

    name: str
    on_tool_call: Callable[[ToolCallInfo], Any] | None = None
    on_tool_result: Callable[[ToolResultInfo], Any] | None = None


@dataclass(frozen=True)
class MessageMiddleware:
    """A link of the message middleware chain made of a function: ``on_message(text,
    phase)`` for the user's message (``input``) and the answer (``output``). Any object
    with a ``name`` and this method is a link too."""

    name: str
    on_message: Callable[[str, Phase], Any]


def link_name(link: Any, where: str) -> str:
    """A link's name, or a UsageError saying it needs one."""
    name = getattr(link, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise UsageError(
            f"{where} takes links with a name (a non-empty string), such as "
            f"ToolMiddleware(name=..., on_tool_call=...); got {type(link).__name__}"
        )
    return name


def hooks_of(link: Any) -> tuple[str, ...]:
    """The hooks a link has, in the order of :data:`HOOKS`."""
    return tuple(h for h in HOOKS if callable(getattr(link, h, None)))


def as_args(value: Any) -> dict[str, Any] | None:
    """New arguments from ``allow(value, why)``: an object (a mapping), or None."""
    if isinstance(value, Mapping):
        return dict(value)
    return None
