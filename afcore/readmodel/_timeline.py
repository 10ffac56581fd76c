"""The run call by call, for the scrubber: one pass over the records that are not blobs
(values stay on disk), keeping a few numbers per call, and where the stages are that a call's
provenance depends on (inject stages and the decisions each wrote, window and summarizer
stages), so that any call can be shown without reading the file from the start.

The pass is a generator: it can run to the end in a background thread, or a step at a time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

from msgspec import Struct, field

from afcore.errors import RecordingError
from afcore.readmodel._folds import SUMMARIZER, checked, fold_number
from afcore.recording import (
    ArgsInvalid,
    Call,
    Commit,
    ErrorEvent,
    Recording,
    Reply,
)

__all__ = ["FoldMark", "Mark", "Timeline", "build"]

_RELEASE_EVERY = 32 * 1024 * 1024
"""Bytes of the file read between two releases of its pages (see Recording)."""


class Mark(Struct):
    """One model call as the scrubber shows it."""

    n: int
    line: int
    """The line of the call record."""
    iteration: int
    rsid: str
    turn: int
    agent: bool
    """False for a summarizer's call (the window strategy's, not the agent's)."""
    replied: bool = False
    stop: str = ""
    asked: int = 0
    """Tool calls the reply asked for."""
    trouble: str = ""
    """``error`` (the run or a provider failed here), ``rejected`` (a tool call's arguments
    were refused) or ``tool`` (a tool failed); the worst seen."""
    folds: int = 0
    """Folds of the window between this call and the next."""
    folded: int = 0
    """Messages those folds took out of the window."""
    attempt: str = ""
    """For a call made as attempts: which one, and where it went (``attempt 2 via
    providers[0] (openai)``)."""
    ms: float = 0.0
    """How long the model took to reply (0: no reply)."""
    tools_ms: float = 0.0
    """The longest of the tool calls its reply asked for (they run at the same time)."""
    at: float | None = None
    """When it was sent, in ms from its flow's start, as the call line says (a step of a
    flow's); None when the line does not say."""


_TROUBLE = {"": 0, "tool": 1, "rejected": 2, "error": 3}


class FoldMark(Struct, frozen=True):
    """A fold of the window, as the seams of later calls count it."""

    line: int
    number: int
    strategy: str
    iteration: int | None
    count: int
    first: int | None
    """the lowest message number it took out"""


class Timeline(Struct):
    marks: list[Mark] = field(default_factory=list)
    """Every call, in the order of the file."""
    position: dict[int, int] = field(default_factory=dict)
    """call n -> its index in ``marks``"""
    lines: list[int] = field(default_factory=list)
    """each call's line, in the order of ``marks``"""
    inject_lines: list[int] = field(default_factory=list)
    decision_lines: dict[str, list[int]] = field(default_factory=dict)
    """injection id -> the inject stages that wrote a decision for it"""
    window_lines: list[int] = field(default_factory=list)
    folds: list[FoldMark] = field(default_factory=list)
    """every fold of the window, in the order of the file"""
    fold_lines: list[int] = field(default_factory=list)
    """the window stages (folds) and the summarizer stages"""
    placing: set[int] = field(default_factory=set)
    """lines of the stages whose messages carry a source (history, inject, window,
    summarize)"""
    turns: int = 0
    done: bool = False

    def folds_before(self, line: int) -> list[FoldMark]:
        """The folds written before ``line``."""
        return self.folds[: bisect.bisect_left(self.fold_lines, line)]

    def at(self, n: int) -> Mark | None:
        i = self.position.get(n)
        return None if i is None else self.marks[i]

    def previous_agent(self, mark: Mark) -> Mark | None:
        """The agent's last call before ``mark``: a summarizer's call is not one of them, nor
        an earlier attempt at the same call (it sent the same request)."""
        i = self.position[mark.n]
        return next((m for m in reversed(self.marks[:i]) if m.agent and m.rsid != mark.rsid), None)

    def next_agent(self, mark: Mark) -> Mark | None:
        i = self.position[mark.n]
        return next((m for m in self.marks[i + 1 :] if m.agent), None)

    def next_call(self, mark: Mark) -> Mark | None:
        i = self.position[mark.n]
        return self.marks[i + 1] if i + 1 < len(self.marks) else None

    def before(self, line: int) -> Mark | None:
        """The last call whose record is before ``line``."""
        i = bisect.bisect_left(self.lines, line)
        return self.marks[i - 1] if i else None

    def after(self, line: int) -> Mark | None:
        """The first call whose record is at or after ``line``."""
        i = bisect.bisect_left(self.lines, line)
        return self.marks[i] if i < len(self.marks) else None


def build(rec: Recording, timeline: Timeline) -> Iterator[float]:
    """Fill ``timeline`` from ``rec``, yielding the share of the file done now and then.
    Each line is read as the reader's typed record; one that is not a valid record is
    skipped (``af verify`` reports it)."""
    total = max(rec.line_count, 1)
    current: Mark | None = None
    """the agent's latest call: tool stages and events after it are its"""
    last: Mark | None = None
    released = 0
    for line in range(1, rec.line_count + 1):
        kind = rec.kind(line)
        if kind in ("blob", "blank", "bad", "header", "seal"):
            continue
        if line % 2048 == 0:
            start = rec.line_start(line)
            if start - released > _RELEASE_EVERY:
                rec.release_pages()
                released = start
            yield line / total
        record = _record(rec, line)
        if kind == "call" and not isinstance(record, Call):
            # The index saw a call here that does not read as one: its mark stays, so the
            # Lens can say the call cannot be read rather than lose it.
            record = _unreadable_call(rec, line, last)
        if isinstance(record, Call):
            mark = _mark(record, line, timeline.turns)
            timeline.position.setdefault(mark.n, len(timeline.marks))
            timeline.marks.append(mark)
            timeline.lines.append(line)
            last = mark
            if mark.agent:
                current = mark
        elif isinstance(record, Reply):
            replied = timeline.at(record.call)
            if replied is not None:
                replied.replied = True
                replied.stop = record.stop_reason
                replied.asked = len(record.tool_calls)
                replied.ms = record.ms
        elif isinstance(record, Commit):
            _commit(rec, timeline, record, line, current, last)
        elif isinstance(record, ErrorEvent):
            target = (timeline.at(record.call) if record.call is not None else None) or last
            if target is not None:
                _trouble(target, "error")
        elif isinstance(record, ArgsInvalid) and record.enforced and current is not None:
            _trouble(current, "rejected")
    rec.release_pages()
    timeline.done = True
    yield 1.0


def _record(rec: Recording, line: int) -> object:
    """The typed record on ``line``, or None when the line holds no valid one."""
    try:
        for _, record in rec.records((line,)):
            return record
    except (ValueError, RecordingError):  # not JSON, or not a valid record
        return None
    return None


def _unreadable_call(rec: Recording, line: int, last: Mark | None) -> Call | None:
    """A stand-in for a call the index numbered whose record does not validate."""
    n = next((n for n in rec.call_numbers if rec.writer_lines(f"call:{n}")[:1] == [line]), None)
    if n is None:
        return None
    return Call(
        seq=0,
        rsid="?",
        iter=last.iteration if last is not None else 0,
        call=n,
        model="?",
        system="",
        window=[],
        tools="",
        hash="",
        attempt=None,
    )


def _mark(call: Call, line: int, turn: int) -> Mark:
    attempt = call.attempt
    said = f"attempt {attempt.n} via {attempt.via} ({attempt.provider})" if attempt else ""
    return Mark(
        n=call.call,
        line=line,
        iteration=call.iter,
        rsid=call.rsid,
        turn=max(turn, 1),
        agent=not call.rsid.startswith(SUMMARIZER),
        attempt=said,
        at=call.at,
    )


def _commit(
    rec: Recording,
    timeline: Timeline,
    commit: Commit,
    line: int,
    current: Mark | None,
    last: Mark | None,
) -> None:
    stage = commit.stage
    if stage == "seed":
        timeline.turns += 1
    elif stage == "history":
        timeline.placing.add(line)
    elif stage == "inject":
        timeline.inject_lines.append(line)
        timeline.placing.add(line)
        for w in commit.writes:
            if w.key == "injections":
                for id in _decided(rec, w):
                    timeline.decision_lines.setdefault(id, []).append(line)
    elif stage in ("window", "summarize"):
        timeline.window_lines.append(line)
        timeline.placing.add(line)
        if stage == "window":
            for w in commit.writes:
                number = fold_number(w.key)
                if number is None:
                    continue
                try:
                    value = rec.value(w)
                except (KeyError, ValueError):
                    value = None
                fold = checked(value, number)
                first = min((a for a, _ in fold.messages), default=None)
                timeline.folds.append(
                    FoldMark(line, number, fold.strategy, fold.iteration, fold.count, first)
                )
                timeline.fold_lines.append(line)
                if last is not None:
                    last.folds += 1
                    last.folded += fold.count
                break
    tool = commit.tool
    if tool is not None and current is not None:
        current.tools_ms = max(current.tools_ms, tool.ms)
        if tool.status == "rejected":
            _trouble(current, "rejected")
        elif tool.status in ("error", "unknown_tool", "interrupted"):
            _trouble(current, "tool")


def _decided(rec: Recording, write: Any) -> list[str]:
    """The ids of the decisions an inject stage's `injections` value lists."""
    try:
        value = rec.value(write)
    except (KeyError, ValueError):
        return []
    listed = value.get("decisions") if isinstance(value, dict) else None
    if not isinstance(listed, list):
        return []
    return [d["id"] for d in listed if isinstance(d, dict) and isinstance(d.get("id"), str)]


def _trouble(mark: Mark, what: str) -> None:
    if _TROUBLE[what] > _TROUBLE[mark.trouble]:
        mark.trouble = what


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
