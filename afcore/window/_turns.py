"""The live window as turns, and which turns may leave it.

A *turn*, for the window, is one exchange: a user message, or a model reply together with
the tool results that answer it. A long run on one user message is therefore many turns:
the message, then one turn per reply. Every strategy cuts the window along these turns, so
a tool call is never separated from its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from afcore.messages import AssistantMessage, Message, ToolCall, ToolResultMessage

__all__ = [
    "LiveMessage",
    "Refusal",
    "RefusalReason",
    "Turn",
    "count_into",
    "old_turns",
    "plan",
    "segment",
    "turn_sizes",
]

RefusalReason = Literal["current_request", "unresolved_tool_call", "last_tool_result"]
"""Why a turn old enough to leave the window stays:

- ``current_request``: it is the user message the run is answering;
- ``unresolved_tool_call``: it holds a tool call whose result has not arrived;
- ``last_tool_result``: it holds the newest tool result.
"""


@dataclass(frozen=True, slots=True)
class LiveMessage:
    """A message in the live window: its number in the recording and the stage that wrote
    it (``n`` is 0 when the run is not recorded)."""

    n: int
    message: Message
    writer: str


@dataclass(frozen=True, slots=True)
class Turn:
    """Positions ``start`` to ``end`` (inclusive) of the live window."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Refusal:
    turn: Turn
    reason: RefusalReason


@dataclass(frozen=True, slots=True)
class Plan:
    """What may leave: contiguous spans of turns, oldest first, and the turns that refused."""

    spans: list[list[Turn]] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)


def segment(live: Sequence[LiveMessage]) -> list[Turn]:
    """The turns of the live window, in order. A tool result joins the reply whose call it
    answers; one that answers no reply in the window (its call already left) is a turn of
    its own."""
    turns, pos = [], 0
    for size in turn_sizes(live):
        turns.append(Turn(pos, pos + size - 1))
        pos += size
    return turns


def turn_sizes(live: Sequence[LiveMessage]) -> list[int]:
    """How many messages each turn of ``live`` holds, oldest first."""
    sizes: list[int] = []
    open_calls: set[str] = set()
    for item in live:
        open_calls = count_into(sizes, open_calls, item.message)
    return sizes


def count_into(sizes: list[int], open_calls: set[str], message: Message) -> set[str]:
    """Count ``message`` into ``sizes`` (how many messages each turn holds, oldest first): a
    tool result joins the reply whose call it answers (``open_calls``, the newest reply's
    tool call ids), anything else starts a turn. Returns the open calls after it. The one
    place the rule is written."""
    if isinstance(message, ToolResultMessage) and message.tool_call_id in open_calls and sizes:
        sizes[-1] += 1
        return open_calls
    sizes.append(1)
    return {c.id for c in message.tool_calls} if isinstance(message, AssistantMessage) else set()


def plan(
    live: Sequence[LiveMessage],
    sizes: Sequence[int],
    *,
    keep_recent_turns: int,
    request: int | None,
    last_result: int | None = -1,
) -> Plan:
    """Which turns may leave: every turn older than the last ``keep_recent_turns``, except
    those that refuse (named). ``sizes``: how many messages each turn holds; ``request``:
    the position of the user message the run answers, if it is in the window;
    ``last_result``: the position of the newest tool result (-1: find it). Only the turns
    old enough to leave are looked at."""
    spans: list[list[Turn]] = []
    refusals: list[Refusal] = []
    run: list[Turn] = []
    for start, end, reason in old_turns(
        live, sizes, keep_recent_turns=keep_recent_turns, request=request, last_result=last_result
    ):
        turn = Turn(start, end)
        if reason is None:
            run.append(turn)
            continue
        refusals.append(Refusal(turn, reason))
        if run:
            spans.append(run)
            run = []
    if run:
        spans.append(run)
    return Plan(spans, refusals)


def old_turns(
    live: Sequence[LiveMessage],
    sizes: Sequence[int],
    *,
    keep_recent_turns: int,
    request: int | None,
    last_result: int | None = -1,
) -> list[tuple[int, int, RefusalReason | None]]:
    """:func:`plan` in positions: each turn old enough to leave, oldest first, as its first
    and last positions and why it stays (None: it may leave). What the loop's visit reads
    at every iteration, with no objects made per turn; the one place refusals are decided."""
    old = len(sizes) - keep_recent_turns
    if old <= 0:
        return []
    if last_result == -1:
        last_result = next(
            (
                i
                for i in range(len(live) - 1, -1, -1)
                if isinstance(live[i].message, ToolResultMessage)
            ),
            None,
        )
    turns: list[tuple[int, int, RefusalReason | None]] = []
    start = 0
    for size in sizes[:old] if old < len(sizes) else sizes:
        end = start + size - 1
        if request is not None and start <= request <= end:
            turns.append((start, end, "current_request"))
        else:
            turns.append((start, end, _refuses(live, start, end, last_result)))
        start += size
    return turns


def _refuses(
    live: Sequence[LiveMessage], start: int, end: int, last_result: int | None
) -> RefusalReason | None:
    """Why the turn at positions ``start``..``end`` (not the run's request) stays, if it
    does."""
    first = live[start].message
    if isinstance(first, AssistantMessage):
        calls = {b.id for b in first.content if isinstance(b, ToolCall)}
        if calls and not calls.issubset(
            [
                m.tool_call_id
                for item in live[start + 1 : end + 1]
                if isinstance(m := item.message, ToolResultMessage)
            ]
        ):
            return "unresolved_tool_call"
    if last_result is not None and start <= last_result <= end:
        return "last_tool_result"
    return None
