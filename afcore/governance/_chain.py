"""Walking a middleware chain: each link sees what the links before it left, the first
answer other than ``allow`` wins, and every answer is kept as a :class:`LinkDecision` for
the recording.

A link that raises, or answers with anything but a verb its hook may give, is a denial
carrying the error: a rule that failed never passes silently.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from afcore.governance._verbs import (
    Allow,
    Ask,
    Deny,
    Phase,
    ToolCallInfo,
    ToolResultInfo,
    as_args,
)
from afcore.recording._models import LinkDecision, trusted

__all__ = ["Walk", "walk_call", "walk_message", "walk_result"]

_decision = trusted(LinkDecision)


@dataclass
class Walk:
    """What a chain decided: its verb, the value as it leaves the chain, and each answer."""

    verb: Literal["allow", "deny", "ask"]
    value: Any
    """The arguments, the result's text or the message as the chain leaves them."""
    changed: bool
    links: list[LinkDecision] = field(default_factory=list)
    not_walked: list[str] = field(default_factory=list)
    reason: str = ""
    """For ``deny``: what the model reads (or the caller's error says)."""
    question: str = ""
    """For ``ask``: what a person is asked."""
    by: str = ""
    """The link that decided (deny, ask), or the last that changed the value."""


async def _answer(hook: Callable[..., Any], *args: Any) -> Any:
    answer = hook(*args)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer


def _failed(name: str, what: str) -> tuple[LinkDecision, str]:
    reason = f"The rule {name} failed: {what}"
    return _decision(link=name, verb="deny", reason=reason, error=what), reason


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


async def walk_call(
    links: Sequence[tuple[str, Any]], call: ToolCallInfo, start: int = 0
) -> tuple[Walk, ToolCallInfo]:
    """The call-side chain over ``call``, from link ``start`` (a resumed walk goes on after
    the link that asked). Returns what it decided and the call as it leaves the chain."""
    walk = Walk("allow", call.args, False)
    for i in range(start, len(links)):
        name, hook = links[i]
        try:
            answer = await _answer(hook, replace(call, args=dict(call.args)))
        except Exception as e:
            decision, reason = _failed(name, _error_text(e))
            return _stop(walk, links, i, decision, "deny", reason=reason, by=name), call
        if isinstance(answer, Allow):
            if not answer.changed:
                walk.links.append(_decision(link=name, verb="allow"))
                continue
            args = as_args(answer.value)
            if args is None:
                what = f"allow() was given {type(answer.value).__name__}, not arguments (an object)"
                decision, reason = _failed(name, what)
                return _stop(walk, links, i, decision, "deny", reason=reason, by=name), call
            call = replace(call, args=args)
            walk.value, walk.changed, walk.by = args, True, name
            walk.links.append(_decision(link=name, verb="allow", changed=True, why=answer.why))
        elif isinstance(answer, Deny):
            decision = _decision(link=name, verb="deny", reason=answer.reason)
            return _stop(walk, links, i, decision, "deny", reason=answer.reason, by=name), call
        elif isinstance(answer, Ask):
            decision = _decision(link=name, verb="ask", question=answer.question)
            return _stop(walk, links, i, decision, "ask", question=answer.question, by=name), call
        else:
            what = f"on_tool_call returned {_shown(answer)}, not allow(), deny() or ask()"
            decision, reason = _failed(name, what)
            return _stop(walk, links, i, decision, "deny", reason=reason, by=name), call
    return walk, call


async def walk_result(
    links: Sequence[tuple[str, Any]],
    result: ToolResultInfo,
    as_text: Callable[[Any], str],
) -> Walk:
    """The result-side chain, walked backwards: the first link of the chain has the last
    word on the result."""
    walk = Walk("allow", result.content, False)
    backwards = list(reversed(links))
    for i, (name, hook) in enumerate(backwards):
        try:
            answer = await _answer(hook, result)
        except Exception as e:
            decision, reason = _failed(name, _error_text(e))
            return _stop(walk, backwards, i, decision, "deny", reason=reason, by=name)
        if isinstance(answer, Allow):
            if not answer.changed:
                walk.links.append(_decision(link=name, verb="allow"))
                continue
            text = as_text(answer.value)
            result = replace(result, content=text)
            walk.value, walk.changed, walk.by = text, True, name
            walk.links.append(_decision(link=name, verb="allow", changed=True, why=answer.why))
        elif isinstance(answer, Deny):
            decision = _decision(link=name, verb="deny", reason=answer.reason)
            return _stop(walk, backwards, i, decision, "deny", reason=answer.reason, by=name)
        else:
            what = (
                "on_tool_result asked a person, but the tool has already run: there is "
                "nothing left to prevent"
                if isinstance(answer, Ask)
                else f"on_tool_result returned {_shown(answer)}, not allow() or deny()"
            )
            decision, reason = _failed(name, what)
            return _stop(walk, backwards, i, decision, "deny", reason=reason, by=name)
    return walk


async def walk_message(links: Sequence[tuple[str, Any]], text: str, phase: Phase) -> Walk:
    """The message chain over ``text`` at ``phase``."""
    walk = Walk("allow", text, False)
    for i, (name, hook) in enumerate(links):
        try:
            answer = await _answer(hook, text, phase)
        except Exception as e:
            decision, reason = _failed(name, _error_text(e))
            return _stop(walk, links, i, decision, "deny", reason=reason, by=name)
        if isinstance(answer, Allow):
            if not answer.changed:
                walk.links.append(_decision(link=name, verb="allow"))
                continue
            if not isinstance(answer.value, str):
                what = f"allow() was given {type(answer.value).__name__}, not the new text"
                decision, reason = _failed(name, what)
                return _stop(walk, links, i, decision, "deny", reason=reason, by=name)
            text = answer.value
            walk.value, walk.changed, walk.by = text, True, name
            walk.links.append(_decision(link=name, verb="allow", changed=True, why=answer.why))
        elif isinstance(answer, Deny):
            decision = _decision(link=name, verb="deny", reason=answer.reason)
            return _stop(walk, links, i, decision, "deny", reason=answer.reason, by=name)
        else:
            what = (
                "on_message asked a person, but a message cannot wait for one"
                if isinstance(answer, Ask)
                else f"on_message returned {_shown(answer)}, not allow() or deny()"
            )
            decision, reason = _failed(name, what)
            return _stop(walk, links, i, decision, "deny", reason=reason, by=name)
    return walk


def _stop(
    walk: Walk,
    links: Sequence[tuple[str, Any]],
    i: int,
    decision: LinkDecision,
    verb: Literal["deny", "ask"],
    *,
    reason: str = "",
    question: str = "",
    by: str,
) -> Walk:
    walk.links.append(decision)
    walk.not_walked = [name for name, _ in links[i + 1 :]]
    walk.verb, walk.reason, walk.question, walk.by = verb, reason, question, by
    return walk


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}…"
