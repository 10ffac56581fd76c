"""The run call by call, for the scrubber: one pass over the records that are not blobs
(values stay on disk), keeping a few numbers per call, and where the stages are that a call's
provenance depends on (inject stages and the decisions each wrote, window and summarizer
stages), so that any call can be shown without reading the file from the start.

The pass is a generator: it can run to the end in a background thread, or a step at a time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from afcore.errors import RecordingError
from afcore.readmodel._folds import SUMMARIZER, checked, fold_number
from afcore.recording import Recording

__all__ = ["FoldMark", "Mark", "Timeline", "build"]

_RELEASE_EVERY = 32 * 1024 * 1024
"""Bytes of the file read between two releases of its pages (see Recording)."""


@dataclass(slots=True)
class Mark:
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


_TROUBLE = {"": 0, "tool": 1, "rejected": 2, "error": 3}


@dataclass(frozen=True, slots=True)
class FoldMark:
    """A fold of the window, as the seams of later calls count it."""

    line: int
    number: int
    strategy: str
    iteration: int | None
    count: int
    first: int | None
    """the lowest message number it took out"""


@dataclass
class Timeline:
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
    """lines of the stages whose messages carry a source (inject, window, summarize)"""
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
    """Fill ``timeline`` from ``rec``, yielding the share of the file done now and then."""
    total = max(rec.line_count, 1)
    current: Mark | None = None
    """the agent's latest call: tool stages and events after it are its"""
    last: Mark | None = None
    released = 0
    for line in range(1, rec.line_count + 1):
        kind = rec.kind(line)
        if kind in ("blob", "blank", "bad", "header"):
            continue
        if line % 2048 == 0:
            start = rec.line_start(line)
            if start - released > _RELEASE_EVERY:
                rec.release_pages()
                released = start
            yield line / total
        try:
            data = rec.raw(line)
        except (ValueError, RecordingError):
            continue  # a line the index took by its head that does not parse: verify says so
        if not isinstance(data, dict):
            continue
        if kind == "call":
            mark = _mark(data, line, timeline.turns)
            if mark is None:
                continue
            timeline.position.setdefault(mark.n, len(timeline.marks))
            timeline.marks.append(mark)
            timeline.lines.append(line)
            last = mark
            if mark.agent:
                current = mark
        elif kind == "reply":
            mark = timeline.at(_int(data.get("call")))
            if mark is not None:
                mark.replied = True
                mark.stop = str(data.get("stop_reason", ""))
                calls = data.get("tool_calls")
                mark.asked = len(calls) if isinstance(calls, list) else 0
        elif kind == "commit":
            _commit(rec, timeline, data, line, current, last)
        elif kind == "other":
            t = data.get("t")
            if t == "error":
                target = timeline.at(_int(data.get("call"))) or last
                if target is not None:
                    _trouble(target, "error")
            elif t == "args_invalid" and data.get("enforced") is True and current is not None:
                _trouble(current, "rejected")
    rec.release_pages()
    timeline.done = True
    yield 1.0


def _mark(data: dict[str, Any], line: int, turn: int) -> Mark | None:
    n, rsid = data.get("call"), data.get("rsid")
    if not isinstance(n, int) or isinstance(n, bool) or not isinstance(rsid, str):
        return None
    attempt = data.get("attempt")
    said = ""
    if isinstance(attempt, dict) and isinstance(attempt.get("n"), int):
        said = f"attempt {attempt['n']} via {attempt.get('via')} ({attempt.get('provider')})"
    return Mark(
        n=n,
        line=line,
        iteration=_int(data.get("iter")),
        rsid=rsid,
        turn=max(turn, 1),
        agent=not rsid.startswith(SUMMARIZER),
        attempt=said,
    )


def _commit(
    rec: Recording,
    timeline: Timeline,
    data: dict[str, Any],
    line: int,
    current: Mark | None,
    last: Mark | None,
) -> None:
    stage = data.get("stage")
    listed = data.get("writes")
    writes: list[Any] = listed if isinstance(listed, list) else []
    if stage == "seed":
        timeline.turns += 1
    elif stage == "inject":
        timeline.inject_lines.append(line)
        timeline.placing.add(line)
        for w in writes:
            if isinstance(w, dict) and w.get("key") == "injections":
                for id in _decided(rec, w):
                    timeline.decision_lines.setdefault(id, []).append(line)
    elif stage in ("window", "summarize"):
        timeline.window_lines.append(line)
        timeline.placing.add(line)
        if stage == "window":
            for w in writes:
                number = fold_number(str(w.get("key", ""))) if isinstance(w, dict) else None
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
    tool = data.get("tool")
    if isinstance(tool, dict) and current is not None:
        status = tool.get("status")
        if status == "rejected":
            _trouble(current, "rejected")
        elif status in ("error", "unknown_tool"):
            _trouble(current, "tool")


def _decided(rec: Recording, write: dict[str, Any]) -> list[str]:
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
