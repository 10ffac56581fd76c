"""What a walk over a recording's records gathers for the views of a run and of a call: the
values behind writes (a missing blob is a note, not a crash), the injections' decisions, the
window's folds, and the pieces of a reply, an attempt and an error.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct

from afcore.readmodel._folds import SUMMARIZER, checked_json, fold_number
from afcore.readmodel._model import (
    Attempt,
    CallError,
    Decision,
    Decisions,
    FoldPart,
    Response,
    ToolCall,
)
from afcore.readmodel._text import as_dict, as_text, block_text
from afcore.recording._typed import dump

if TYPE_CHECKING:
    from afcore.recording import AttemptInfo, Commit, ErrorEvent, Recording, Reply

__all__ = [
    "Folds",
    "Injections",
    "Listed",
    "Resolver",
    "attempt_of",
    "error_of",
    "is_injection",
    "missing_text",
    "response_of",
    "source_json",
    "window_numbers",
]


def window_numbers(window: Any, most: int) -> Iterator[int]:
    """The message numbers of a window's ranges, none past ``most`` (the file's messages):
    a file may name ranges no run wrote (``[1, 10**12]``), and reading them must not hang."""
    for r in window if isinstance(window, list | tuple) else ():
        if isinstance(r, list | tuple) and len(r) == 2:
            a, b = r
            if isinstance(a, int) and isinstance(b, int):
                yield from range(max(a, 1), min(b, most) + 1)


def missing_text(e: KeyError) -> str:
    """What a value the file does not hold (or cannot give) is shown as."""
    return str(e.args[0]) if e.args else "a value is missing from the file"


class Resolver:
    """Values behind writes; a ref the file does not hold becomes a note, not a crash."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        # Calls that send the same list share its ref: kept for the last few refs, as a run
        # that changes its system text at every call makes a new list a call.
        self.system: Callable[[str], Listed] = lru_cache(256)(self._system)
        """A call's system segments by their list's ref, as the run's view reads them."""
        self.tools: Callable[[str], Listed] = lru_cache(256)(self._tools)
        """A call's tools by their list's ref, as the run's view reads them."""

    def value(self, write: Any) -> tuple[Any, str | None]:
        ref = write.get("ref") if isinstance(write, dict) else getattr(write, "ref", None)
        if ref is not None and not isinstance(ref, str):
            return None, f"{as_text(ref)[:40]} is not a blob reference"
        try:
            # A ref is read from the file at once (what ``Recording.value`` does with it).
            return (self.rec.blob(ref) if ref else self.rec.value(write)), None
        except KeyError as e:
            return None, missing_text(e)

    def by_ref(self, ref: str) -> tuple[Any, str | None]:
        """:meth:`value` of a write by ``ref`` (a string)."""
        try:
            return self.rec.blob(ref), None
        except KeyError as e:
            return None, missing_text(e)

    def listed(self, ref: str) -> list[dict[str, Any]] | None:
        """A call's segment or tool list, or None when it cannot be read."""
        try:
            value = self.rec.listed(ref)
        except (KeyError, ValueError, TypeError):
            return None
        ok = isinstance(value, list) and all(isinstance(x, dict) for x in value)
        return value if ok else None

    def _system(self, ref: str) -> Listed:
        segments = self.listed(ref)
        if segments is None:
            return _UNREAD
        total: int | None = 0
        injected = []
        for seg in segments:
            text = seg.get("text")
            if text is None and seg.get("ref"):
                body, _ = self.value({"ref": seg["ref"]})
                text = body.get("text") if isinstance(body, dict) else None
            if not isinstance(text, str) or total is None:
                total = None
            else:
                total += len(text)
            source = seg.get("source")
            if source.__class__ is dict and is_injection(source):
                injected.append(source)
        return Listed(len(segments), total, [], injected)

    def _tools(self, ref: str) -> Listed:
        tools = self.listed(ref)
        if tools is None:
            return _UNREAD
        injected = [
            source
            for t in tools
            if (source := t.get("source")).__class__ is dict and is_injection(source)
        ]
        return Listed(len(tools), None, [as_text(t.get("name")) for t in tools], injected)


class Listed(Struct, frozen=True):
    """A call's system segments or tools as the run's view reads them, kept by the list's
    ref: calls that send the same list share it."""

    count: int | None
    """How many (None: the list cannot be read)."""
    chars: int | None
    """For segments: the characters their text holds (None: unknown)."""
    names: list[str]
    """For tools: their names."""
    injected: list[dict[str, Any]]
    """The sources of those an injection put there, in order."""


_UNREAD = Listed(None, 0, [], [])
"""A list the file does not hold as a list of objects: no segments, no characters (as if it
held none), no tools."""


_NOT_INJECTIONS = {"base", "static", "provider", "configure", "summary", "transcript", "summarizer"}
"""Source kinds that are not an injection: the builder's text and tools, tool providers,
what configure() resolved, and what the window strategy wrote (a summary, the transcript
and system text of its summarizer's call)."""


def source_json(source: Any) -> dict[str, Any]:
    """A recorded source (`SourceInfo`) as a dict without its absent fields."""
    dumped = dump(source, exclude_none=True) if source is not None else {}
    return dumped if isinstance(dumped, dict) else {}


def is_injection(source: dict[str, Any]) -> bool:
    kind, id = source.get("kind"), source.get("id")
    # A source read from a slot list is unchecked: anything but strings is no injection's.
    if not isinstance(kind, str) or not isinstance(id, str) or not id or kind in _NOT_INJECTIONS:
        return False
    # The skills' reader is af's own tool, not an injection (its source names the catalog).
    return not (kind == "skill" and id == "read_skill")


def _decision(raw: Any, iteration: int | None = None) -> Decision | None:
    """One decision of an `injections` blob, its fields checked (the file may lie)."""
    d = as_dict(raw)
    if not isinstance(d.get("id"), str):
        return None
    reads = d.get("reads")
    return Decision(
        id=d["id"],
        flavor=as_text(d.get("flavor")) or None,
        trigger=as_text(d.get("trigger")) or None,
        fired=d.get("fired") is True,
        reason=as_text(d.get("reason")),
        # A read of the iteration is stored without its value: it is the stage's own.
        reads={
            as_text(pair[0]): pair[1] if len(pair) == 2 else iteration
            for pair in reads
            if isinstance(pair, list | tuple) and len(pair) in (1, 2)
        }
        if isinstance(reads, list) and reads
        else None,
        error=as_text(d.get("error")) if d.get("error") is not None else None,
    )


class Injections:
    """What the `inject` stages committed, gathered as the records go by: each iteration's
    decisions, and the injection behind each injected message."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.decisions: dict[int, list[Decision]] = {}
        """the latest iteration -> its decisions (those recorded, and those carried over)"""
        self.messages: dict[int, dict[str, Any]] = {}
        """message n -> the source of the write that put it in the log"""
        self._numbers: list[int] = []
        """the keys of :attr:`messages`, in order"""
        self._last = -1

    def see(self, commit: Commit) -> None:
        if commit.stage != "inject":
            return
        # Each inject stage lists the decisions that changed since the one before; the
        # others carry over (their ids are distinct: they were gathered by id).
        decisions = [d.at(commit.iter) for d in self.decisions.get(self._last, ())]
        carried: dict[str, Decision] | None = None
        for w in commit.writes:
            if w.key == "injections":
                value, _ = self.resolver.value(w)
                listed = as_dict(value).get("decisions")
                if isinstance(listed, list):
                    if carried is None:
                        carried = {d.id: d for d in decisions}
                    for d in (_decision(x, commit.iter) for x in listed):
                        if d is not None:
                            carried[d.id] = d
                    decisions = list(carried.values())
            elif w.key.startswith("message:") and w.source is not None:
                try:
                    n = int(w.key[8:])
                except ValueError:
                    continue
                if n not in self.messages:
                    bisect.insort(self._numbers, n)
                self.messages[n] = source_json(w.source)
        # Only the latest iteration's are kept: memory stays flat however long the run.
        self.decisions = {commit.iter: decisions}
        self._last = commit.iter

    def sources_in(self, window: Any) -> list[dict[str, Any]]:
        """The sources of the injected messages in a window's ranges, in order: found by
        range, not by walking every message of a window that holds the whole history."""
        out: list[dict[str, Any]] = []
        numbers = self._numbers
        if not numbers:  # no injected message yet (most agents)
            return out
        for r in window if isinstance(window, list | tuple) else ():
            if not (isinstance(r, list | tuple) and len(r) == 2):
                continue
            a, b = r
            if not (isinstance(a, int) and isinstance(b, int)):
                continue
            at = bisect.bisect_left(numbers, max(a, 1))
            while at < len(numbers) and numbers[at] <= b:
                out.append(self.messages[numbers[at]])
                at += 1
        return out

    def at(self, iteration: int) -> list[Decision] | None:
        """The decisions that held at ``iteration``: an iteration at which nothing changed
        has no inject stage, and the last one's decisions still hold. None before any."""
        if self._last < 0 or iteration < self._last:
            return None
        decisions = self.decisions[self._last]
        return decisions if iteration == self._last else [d.at(iteration) for d in decisions]

    def decided(self, iteration: int) -> dict[str, Decision]:
        return {d.id: d.worded() for d in self.at(iteration) or []}

    def summary(self, iteration: int, sources: list[dict[str, Any]]) -> Decisions | None:
        """The iteration's decisions: every injection evaluated, those that fired, those
        skipped and why. ``sources``: the sources of what its call was sent (system
        segments, injected messages, tools). Always-on injections of fixed text are not
        restated in the decisions (they cannot differ): what the call was sent names them.
        None when the iteration had no inject stage (an agent without injections)."""
        held = self.at(iteration)
        if held is None:
            return None
        ids = set()
        held_fired: list[Decision] = []
        skipped: list[Decision] = []
        for d in held:
            d = d.worded()
            ids.add(d.id)
            (held_fired if d.fired else skipped).append(d)
        fired: list[Decision] = []
        for src in sources:
            if is_injection(src) and src["id"] not in ids:
                ids.add(src["id"])
                # In the fields' order: id, flavor, trigger, fired, reason.
                fired.append(
                    Decision(
                        src["id"],
                        src.get("kind"),
                        src.get("trigger"),
                        True,
                        src.get("reason") or "always",
                    )
                )
        fired += held_fired
        return Decisions(len(fired) + len(skipped), fired, skipped)


class Folds:
    """What the window strategy committed, gathered as the records go by: each fold, the
    messages it wrote (the summary, the summarizer's transcript) with their sources, and
    which calls were its summarizer's."""

    def __init__(self, resolver: Resolver, *, keep: bool = True) -> None:
        self.resolver = resolver
        self.keep = keep
        """keep every fold in :attr:`folds` (a walk that gives each fold as it comes does not)"""
        self.folds: list[FoldPart] = []
        self.messages: dict[int, dict[str, Any]] = {}
        """message n -> the source of the window or summarize write that put it there"""
        self.summarizing: dict[str, int] = {}
        """a summarize stage's rsid -> the fold it summarized for"""

    def see(self, commit: Commit, after_call: int | None = None) -> FoldPart | None:
        """Take a commit in; return the fold it wrote, if it is a window stage's.
        ``after_call``: the call it follows."""
        if commit.stage not in ("window", "summarize"):
            return None
        fold: FoldPart | None = None
        for w in commit.writes:
            if w.key.startswith("message:") and w.source is not None:
                source = source_json(w.source)
                try:
                    self.messages[int(w.key[8:])] = source
                except ValueError:
                    pass
                number = fold_number(as_text(source.get("id")))
                if commit.stage == "summarize" and number is not None:
                    self.summarizing[commit.rsid] = number
            n = fold_number(w.key)
            if commit.stage == "window" and n is not None and fold is None:
                value, missing = self.resolver.value(w)
                value = value if isinstance(value, dict) else {}
                fold = FoldPart(checked_json(value, n), value, commit.rsid, after_call, missing)
                if self.keep:
                    self.folds.append(fold)
        return fold

    def kind(self, rsid: str) -> tuple[Literal["agent", "summarizer"], int | None]:
        """``agent``, or for a summarizer's call ``summarizer`` and the fold it summarized
        for (None when the file does not say which)."""
        if not rsid.startswith(SUMMARIZER):
            return "agent", None
        return "summarizer", self.summarizing.get(rsid)


def response_of(resolver: Resolver, reply: Reply) -> Response:
    """A reply, its message read for its text, tool calls and thinking."""
    write = reply.writes[0] if reply.writes else None
    if write is not None and write.ref is None:  # a reply's message is held in its line
        message, missing = write.value, None
    else:
        message, missing = resolver.value(write) if write is not None else (None, None)
    content = as_dict(message).get("content")
    texts: list[str] = []
    tool_calls: list[ToolCall] = []
    thinking_chars = redacted = 0
    opaque: list[str] = []
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            texts.append(as_text(b.get("text")))
        elif kind == "tool_call":
            tool_calls.append(ToolCall(b.get("id"), b.get("name"), b.get("args")))
        elif kind == "thinking":
            if b.get("redacted"):
                redacted += 1
            else:
                thinking_chars += len(as_text(b.get("thinking")))
        elif kind == "opaque":
            opaque.append(block_text(b))
    # In the fields' order: text, tool_calls, thinking_chars, stop_reason, usage, model, ms,
    # decision, missing, response_id, unsent_params, redacted_thinking, opaque (a big run
    # has a reply a call).
    return Response(
        "".join(texts),
        tool_calls,
        thinking_chars,
        reply.stop_reason,
        reply.usage,
        reply.model,
        reply.ms,
        reply.decision,
        missing,
        reply.response_id,
        list(reply.unsent_params),
        redacted,
        opaque,
    )


def attempt_of(info: AttemptInfo | None) -> Attempt | None:
    """Which attempt a call is, for agents with reliability rules (None for others)."""
    if info is None:
        return None
    return Attempt(info.n, info.provider, info.via, list(info.skipped))


def error_of(record: ErrorEvent) -> CallError:
    """An error event: what failed and, for an attempt at a model call, what came next."""
    e = record.error
    return CallError(
        kind=e.kind,
        message=e.message,
        reason=e.reason,
        status=e.status,
        mid_stream=e.mid_stream,
        ms=record.ms,
        decision=record.decision,
        attempt=attempt_of(record.attempt),
        error_type=e.error_type,
        request_id=e.request_id,
        details=dict(e.details) if e.details else None,
    )
