"""One call of a recording as it was sent, rebuilt from the file, with its hash check and
its reply, and the provenance of every part: where each system segment, message and tool
came from, why it is there, and what changed since the call before.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct
from msgspec.structs import replace

from afcore.errors import RecordingError, RecordingFormatError
from afcore.readmodel._folds import SUMMARIZER
from afcore.readmodel._model import (
    Attempt,
    CallError,
    Decision,
    Decisions,
    FoldPart,
    Gone,
    MessageEntry,
    Provenance,
    Removed,
    Response,
    Seam,
    SystemEntry,
    ToolEntry,
)
from afcore.readmodel._session import history_source
from afcore.readmodel._text import as_dict, as_text
from afcore.readmodel._walk import (
    Folds,
    Injections,
    Resolver,
    attempt_of,
    error_of,
    response_of,
    source_json,
    window_numbers,
)
from afcore.recording._typed import typed

if TYPE_CHECKING:
    from afcore.recording import Call, Recording

__all__ = ["CallDetail", "CallNotFoundError", "CallUnreadableError", "Verification", "call_detail"]


class Verification(Struct, frozen=True):
    """A call rebuilt from the file and its hash compared with the one taken when it was sent."""

    hash: str
    """The hash the file holds."""
    rebuilt_hash: str | None
    """The hash of the request rebuilt from the file (None: it could not be rebuilt)."""
    verified: bool
    problem: str | None
    """Why it does not verify."""


class CallDetail(Struct):
    """One call as it was sent, with the provenance of every piece.

    The three slots (``system``, ``messages``, ``tools``) are None when the request cannot
    be rebuilt from the file (``verification.problem`` says why); each entry says where it
    came from (``source``, ``id``, ``trigger``, ``reason``, what it read) and whether it is
    ``new`` or ``changed`` since ``previous_call``. :meth:`to_json` is ``af show --call
    --json``."""

    call: int
    iteration: int
    rsid: str
    kind: str
    """``agent``, or ``summarizer`` for a call of the window strategy's summarizer."""
    fold: int | None
    """For a summarizer's call: the fold it summarized for."""
    model: str
    previous_call: int | None
    """The agent's call before this one, which its changes are counted from."""
    params: dict[str, Any]
    cache: list[dict[str, Any]]
    window: list[list[int]]
    """The messages sent, as inclusive ranges of message numbers."""
    verification: Verification
    response: Response | None
    """The reply: its text, tool calls, stop reason, usage, and a refusal's decision."""
    attempt: Attempt | None
    """Which attempt at its iteration's call this is, of how many, and where it went."""
    errors: list[CallError]
    """The failures of this attempt, each with what was decided after it."""
    injections: Decisions | None = None
    """The iteration's decisions."""
    system: list[SystemEntry] | None = None
    messages: list[MessageEntry] | None = None
    tools: list[ToolEntry] | None = None
    removed: Removed | None = None
    """What the previous call was sent that this one was not."""
    seams: list[Seam] | None = None
    """Where the window shows a fold."""

    @property
    def verified(self) -> bool:
        return self.verification.verified

    def to_json(self) -> dict[str, Any]:
        v = self.verification
        out: dict[str, Any] = {
            "call": self.call,
            "iteration": self.iteration,
            "rsid": self.rsid,
            "kind": self.kind,
            "fold": self.fold,
            "model": self.model,
            "previous_call": self.previous_call,
            "injections": self.injections.to_json() if self.injections else None,
            "system": None if self.system is None else [e.to_json() for e in self.system],
            "messages": None if self.messages is None else [e.to_json() for e in self.messages],
            "tools": None if self.tools is None else [e.to_json() for e in self.tools],
            "removed": self.removed.to_json() if self.removed else None,
            "params": self.params,
            "cache": self.cache,
            "window": self.window,
            "hash": v.hash,
            "rebuilt_hash": v.rebuilt_hash,
            "verified": v.verified,
            "problem": v.problem,
            "response": self.response.to_json() if self.response else None,
            "attempt": self.attempt.to_json() if self.attempt else None,
            "errors": [e.to_json() for e in self.errors],
        }
        if self.seams is not None:
            out["folds"] = [s.to_json() for s in self.seams]
        return out


class CallUnreadableError(RecordingFormatError):
    """A call whose own records (its call or its reply) are malformed."""


class CallNotFoundError(RecordingError, LookupError):
    """A call number the recording does not hold: the caller's mistake, not the file's."""


def call_detail(rec: Recording, n: int, *, lines: Sequence[int] | None = None) -> CallDetail:
    """Call ``n`` as sent, rebuilt from the file, with its hash check and its reply, and the
    provenance of every part: where each system segment, message and tool came from, why it
    is there, and what changed since the call before.

    The records before the call are walked for its provenance; ``lines``: the only ones that
    matter to it (see :func:`afcore.readmodel.walk_lines`), so a call deep in a big file is
    shown without reading the file from the top. The result is the same either way."""
    from afcore.recording import Call, Commit, InvalidRecord, Reply

    numbers = rec.call_numbers
    if n not in numbers:
        have = f"calls {numbers[0]} to {numbers[-1]}" if numbers else "it has no calls"
        raise CallNotFoundError(
            f"call {n} is not in {Path(rec.origin).name} ({have})", path=rec.path
        )
    try:
        call = rec.call(n)
        check = rec.check_call(n)
        reply = rec.reply(n)
    except InvalidRecord as e:
        raise CallUnreadableError(
            f"call {n}'s records are malformed: {e.msg}", path=rec.path
        ) from None
    resolver = Resolver(rec)
    injections = Injections(resolver)
    folds = Folds(resolver)
    previous: int | None = None
    """the agent's last call before this one"""
    written = 0
    """the highest message number written so far"""
    history: dict[int, dict[str, Any]] = {}
    """message n -> the source of a message the run continued from"""
    when: list[tuple[FoldPart, int | None, int]] = []
    """each fold, the agent's call it came after, and the last message written before it"""
    # The inject stages up to this call: its iteration's decisions, and the injection behind
    # each injected message in its window (written when it first landed, maybe long before);
    # the folds before it, and the agent's calls (a summarizer's call is not one of them).
    for _, record in rec.records(lines):
        if isinstance(record, Call):
            if record.call == n:
                break
            # The attempts before this one at the same call sent the same request.
            if not record.rsid.startswith(SUMMARIZER) and record.rsid != call.rsid:
                previous = record.call
            continue
        for w in record.writes if isinstance(record, Commit | Reply) else ():
            number = w.key.removeprefix("message:")
            if w.key.startswith("message:") and number.isdecimal():
                written = max(written, int(number))
        if isinstance(record, Commit) and record.stage == "inject":
            injections.see(record)
        elif isinstance(record, Commit) and record.stage == "history":
            for w in record.writes:
                if w.key.startswith("message:") and w.key[8:].isdecimal() and w.source:
                    history[int(w.key[8:])] = source_json(w.source)
        elif isinstance(record, Commit):
            fold = folds.see(record)
            if fold is not None:
                when.append((fold, previous, written))
    who, summarized = folds.kind(call.rsid)
    if who != "agent":
        previous = None  # a summarizer is sent its own transcript: no call before it to compare
    before = _slots(rec, resolver, previous) if previous is not None else None
    window = list(window_numbers(call.window, rec.message_count))
    detail = CallDetail(
        call=call.call,
        iteration=call.iter,
        rsid=call.rsid,
        kind=who,
        fold=summarized,
        model=call.model,
        previous_call=previous,
        params=call.params,
        cache=call.cache,
        window=[list(r) for r in call.window],
        verification=Verification(call.hash, check.rebuilt, check.ok, check.problem),
        response=response_of(resolver, reply) if reply is not None else None,
        attempt=_attempt_of(rec, call),
        errors=_errors_of(rec, call),
    )
    try:
        request = rec.request(n)
        segments, tools = rec.segments(n), rec.tools(n)
    except (KeyError, IndexError, TypeError, ValueError):  # InvalidRecord is a ValueError
        # check.problem says what is missing; the request is not shown half-rebuilt.
        return detail
    decided = injections.decided(call.iter)
    marks = {
        (c.get("slot"), c.get("index"))
        for c in call.cache
        if isinstance(c, dict) and isinstance(c.get("slot"), str) and type(c.get("index")) is int
    }

    system: list[SystemEntry] = []
    for i, (seg, body) in enumerate(zip(segments, request["system"], strict=True)):
        src = source_json(seg.source)
        text = as_text(as_dict(body).get("text"))
        system.append(
            SystemEntry(
                position=i + 1,
                text=text,
                provenance=_provenance(src, decided),
                cache_breakpoint=("system", i) in marks,
                change=_change(before, "segments", _segment_key(src, text), text),
            )
        )

    messages: list[MessageEntry] = []
    for m, raw in zip(window, request["messages"], strict=True):
        try:
            writer: str | None = as_text(rec.message_writer(m)) or None
        except (IndexError, KeyError):
            writer = None
        placed: Provenance | None = None
        if m in injections.messages:
            placed = _provenance(injections.messages[m], decided)
        elif m in folds.messages:
            placed = _provenance(folds.messages[m], {})
        elif m in history:
            placed = _provenance(history[m], {})
            turn, note = history_source(history[m])
            if turn is not None:
                placed = replace(placed, turn=turn, reason=note)
        messages.append(
            MessageEntry(
                n=m,
                message=as_dict(raw),
                writer=writer,
                provenance=placed,
                change=None if before is None or m in before["messages"] else "new",
            )
        )

    listed: list[ToolEntry] = []
    for i, (tool, spec) in enumerate(zip(tools, request["tools"], strict=True)):
        src = source_json(tool.source)
        listed.append(
            ToolEntry(
                name=tool.name,
                spec=as_dict(spec),
                source=src.get("kind"),
                id=src.get("id"),
                cache_breakpoint=("tools", i) in marks,
                change=_change(before, "tools", tool.name, tool.ref),
            )
        )

    sources = [source_json(x.source) for x in segments] + [source_json(t.source) for t in tools]
    sources += [injections.messages[m] for m in window if m in injections.messages]
    # The folds since the agent's call before this one, with where each happened.
    recent = [(f, at) for f, after, at in when if previous is not None and after == previous]
    removed = _removed(before, system, window, listed, {**folds.messages, **injections.messages})
    if removed is not None:
        # A message that left in a fold since the call before is shown by the fold's seam.
        evicted = {
            m: f.view.fold
            for f, _ in recent
            for m in window_numbers(f.view.messages, rec.message_count)
        }
        removed = replace(
            removed,
            messages=[
                replace(gone, fold=evicted[gone.n]) if gone.n in evicted else gone
                for gone in removed.messages
            ],
        )
    prior: list[int] = before["order"] if before is not None else []
    if who == "agent":
        detail.injections = injections.summary(call.iter, sources)
    detail.system, detail.messages, detail.tools = system, messages, listed
    detail.removed = removed
    detail.seams = _seams(folds.folds, recent, window, prior)
    return detail


def _attempt_of(rec: Recording, call: Call) -> Attempt | None:
    """Which attempt ``call`` is, and how many its stage made (the calls around it with
    the same rsid)."""
    from afcore.recording import InvalidRecord

    out = attempt_of(call.attempt)
    if out is None:
        return None
    numbers = set(rec.call_numbers)
    count = 1
    for step in (-1, 1):
        m = call.call + step
        while m in numbers:
            try:
                if rec.call(m).rsid != call.rsid:
                    break
            except (RecordingError, InvalidRecord):
                break
            count += 1
            m += step
    out.of = count
    return out


def _errors_of(rec: Recording, call: Call) -> list[CallError]:
    """The error events about ``call``: they follow it before the next call or reply."""
    from afcore.recording import ErrorEvent

    out: list[CallError] = []
    try:
        line = rec.writer_lines(f"call:{call.call}")[0]
    except IndexError:
        return out
    for at in range(line + 1, rec.line_count + 1):
        kind = rec.kind(at)
        if kind in ("call", "reply", "commit", "run_end"):
            break
        if kind != "other":
            continue
        raw = rec.raw(at)
        if isinstance(raw, dict) and raw.get("t") == "error" and raw.get("call") == call.call:
            try:
                out.append(error_of(typed(ErrorEvent, raw)))
            except ValueError:  # a malformed event is verify's to report
                continue
    return out


def _seams(
    folds: list[FoldPart],
    recent: list[tuple[FoldPart, int]],
    window: list[int],
    prior: list[int],
) -> list[Seam]:
    """Where a call's window shows a fold: before the summary it wrote, for as long as that
    summary is in the window; and, for a fold since the agent's call before (``recent``,
    each with the last message written before it) that wrote none, where the messages it
    dropped were, or where it happened."""
    sent = set(window)
    out = []
    for part in folds:
        f = part.view
        before: int | None
        at = next((at for r, at in recent if r is part), None)
        if f.summary is not None and f.summary in sent:
            before = f.summary
        elif at is not None:
            before = _dropped_at(f.messages, window, prior, at)
        else:
            continue
        out.append(Seam(f, part.rsid, before))
    return out


def _dropped_at(
    messages: list[tuple[int, int]], window: list[int], prior: list[int], at: int
) -> int | None:
    """The message of ``window`` that followed what a fold dropped (``messages``) from the
    window before (``prior``); for a fold that dropped nothing, the first written after it
    (``at``: the last message written before it)."""
    gone = set(window_numbers(messages, max([*window, *prior, at, 0])))
    first = next((i for i, m in enumerate(prior) if m in gone), None)
    if first is not None:
        sent = set(window)
        after = next((m for m in prior[first:] if m not in gone and m in sent), None)
        if after is not None:
            return after
    return next((m for m in window if m > at), None)


def _provenance(src: dict[str, Any], decided: dict[str, Decision]) -> Provenance:
    """Where a piece of context came from, and (for an injection) why it is there: the
    reason this iteration's decision gave, with what it read."""
    reason, reads = src.get("reason"), None
    decision = decided.get(src.get("id") or "")
    if decision is not None and decision.fired:
        # An injected message is written once and sent again while its text stays the same;
        # the reason it is there at this call is this iteration's.
        reason, reads = decision.reason, decision.reads
    return Provenance(
        source=src.get("kind"),
        id=src.get("id"),
        trigger=src.get("trigger"),
        reason=reason,
        cache=src.get("cache"),
        reads=reads,
    )


def _segment_key(src: dict[str, Any], text: str) -> tuple[str, str]:
    """What identifies a segment from call to call: its injection, or its text."""
    return (as_text(src.get("kind")), as_text(src.get("id")) or text)


def _slots(rec: Recording, resolver: Resolver, n: int) -> dict[str, Any] | None:
    """What call ``n`` was sent, enough to tell what the next call changed; None when its
    records cannot be read."""

    try:
        segments: dict[Any, tuple[str, dict[str, Any]]] = {}
        for seg in rec.segments(n):
            text = seg.text
            if text is None:
                body, _ = resolver.value({"ref": seg.ref})
                text = as_text(as_dict(body).get("text"))
            src = source_json(seg.source)
            segments[_segment_key(src, text)] = (text, src)
        tools = {t.name: (t.ref, source_json(t.source)) for t in rec.tools(n)}
        order = list(window_numbers(rec.call(n).window, rec.message_count))
    except (KeyError, IndexError, TypeError, ValueError, RecordingError):
        return None
    return {"call": n, "segments": segments, "tools": tools, "messages": set(order), "order": order}


def _change(
    before: dict[str, Any] | None, slot: str, key: Any, value: Any
) -> Literal["new", "changed"] | None:
    """`new` (not in the previous call), `changed` (there, different), or None (the same,
    or this is the first call)."""
    if before is None:
        return None
    known = before[slot].get(key)
    if known is None:
        return "new"
    return None if known[0] == value else "changed"


def _removed(
    before: dict[str, Any] | None,
    system: list[SystemEntry],
    window: list[int],
    tools: list[ToolEntry],
    placed: dict[int, dict[str, Any]],
) -> Removed | None:
    """What the previous call was sent that this one was not; ``placed``: the sources of
    the messages written by an injection or a window stage."""
    if before is None:
        return None
    keys = {
        _segment_key({"kind": s.provenance.source, "id": s.provenance.id}, s.text) for s in system
    }
    names = {t.name for t in tools}
    sent = set(window)
    gone: list[Gone] = []
    for m in sorted(before["messages"] - sent):
        src = placed.get(m)
        gone.append(Gone(n=m) if src is None else Gone(src.get("kind"), src.get("id"), n=m))
    return Removed(
        system=[
            Gone(src.get("kind"), src.get("id"), text=text)
            for key, (text, src) in before["segments"].items()
            if key not in keys
        ],
        messages=gone,
        tools=[
            Gone(src.get("kind"), src.get("id"), name=name)
            for name, (_, src) in before["tools"].items()
            if name not in names
        ],
    )
