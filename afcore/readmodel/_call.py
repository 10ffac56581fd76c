"""One call of a recording as it was sent, rebuilt from the file, with its hash check and
its reply, and the provenance of every part: where each system segment, message and tool
came from, why it is there, and what changed since the call before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afcore.errors import RecordingError, RecordingFormatError
from afcore.readmodel._folds import SUMMARIZER, checked
from afcore.readmodel._text import as_dict, as_text
from afcore.readmodel._walk import (
    Folds,
    Injections,
    Resolver,
    attempt_json,
    error_json,
    response_json,
    source_json,
    window_numbers,
)

if TYPE_CHECKING:
    from afcore.recording import Call, Recording

__all__ = ["CallDetail", "CallNotFoundError", "CallUnreadableError", "Verification", "call_detail"]


@dataclass(frozen=True, slots=True)
class Verification:
    """A call rebuilt from the file and its hash compared with the one taken when it was sent."""

    hash: str
    """The hash the file holds."""
    rebuilt_hash: str | None
    """The hash of the request rebuilt from the file (None: it could not be rebuilt)."""
    verified: bool
    problem: str | None
    """Why it does not verify."""


@dataclass(slots=True)
class CallDetail:
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
    response: dict[str, Any] | None
    """The reply: its text, tool calls, stop reason, usage, and a refusal's decision."""
    attempt: dict[str, Any] | None
    """Which attempt at its iteration's call this is, of how many, and where it went."""
    errors: list[dict[str, Any]]
    """The failures of this attempt, each with what was decided after it."""
    injections: dict[str, Any] | None = None
    """The iteration's decisions: ``evaluated``, ``fired``, ``skipped``."""
    system: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    removed: dict[str, Any] | None = None
    """What the previous call was sent that this one was not."""
    seams: list[dict[str, Any]] | None = None
    """Where the window shows a fold: each fold's fields, its ``rsid`` and the message it
    goes ``before`` (None: after the last)."""

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
            "injections": self.injections,
            "system": self.system,
            "messages": self.messages,
            "tools": self.tools,
            "removed": self.removed,
            "params": self.params,
            "cache": self.cache,
            "window": self.window,
            "hash": v.hash,
            "rebuilt_hash": v.rebuilt_hash,
            "verified": v.verified,
            "problem": v.problem,
            "response": self.response,
            "attempt": self.attempt,
            "errors": self.errors,
        }
        if self.seams is not None:
            out["folds"] = self.seams
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
    from pydantic import ValidationError

    from afcore.recording import Call, Commit, Reply

    numbers = rec.call_numbers
    if n not in numbers:
        have = f"calls {numbers[0]} to {numbers[-1]}" if numbers else "it has no calls"
        raise CallNotFoundError(f"call {n} is not in {Path(rec.path).name} ({have})", path=rec.path)
    try:
        call = rec.call(n)
        check = rec.check_call(n)
        reply = rec.reply(n)
    except ValidationError as e:
        raise CallUnreadableError(
            f"call {n}'s records are malformed: {e.errors()[0]['msg']}", path=rec.path
        ) from None
    resolver = Resolver(rec)
    injections = Injections(resolver)
    folds = Folds(resolver)
    previous: int | None = None
    """the agent's last call before this one"""
    written = 0
    """the highest message number written so far"""
    when: list[tuple[dict[str, Any], int | None, int]] = []
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
            if w.key.startswith("message:") and number.isdigit():
                written = max(written, int(number))
        if isinstance(record, Commit) and record.stage == "inject":
            injections.see(record)
        elif isinstance(record, Commit):
            fold = folds.see(record)
            if fold is not None:
                when.append((fold, previous, written))
    kind = folds.kind(call.rsid)
    if kind["kind"] != "agent":
        previous = None  # a summarizer is sent its own transcript: no call before it to compare
    before = _slots(rec, resolver, previous) if previous is not None else None
    window = list(window_numbers(call.window, rec.message_count))
    detail = CallDetail(
        call=call.call,
        iteration=call.iter,
        rsid=call.rsid,
        kind=kind["kind"],
        fold=kind["fold"],
        model=call.model,
        previous_call=previous,
        params=call.params,
        cache=call.cache,
        window=[list(r) for r in call.window],
        verification=Verification(call.hash, check.rebuilt, check.ok, check.problem),
        response=response_json(resolver, reply) if reply is not None else None,
        attempt=_attempt_of(rec, call),
        errors=_errors_of(rec, call),
    )
    try:
        request = rec.request(n)
        segments, tools = rec.segments(n), rec.tools(n)
    except (KeyError, IndexError, TypeError, ValueError):  # ValidationError is a ValueError
        # check.problem says what is missing; the request is not shown half-rebuilt.
        return detail
    decided = injections.decided(call.iter)
    marks = {(c.get("slot"), c.get("index")) for c in call.cache if isinstance(c, dict)}

    system: list[dict[str, Any]] = []
    for i, (seg, body) in enumerate(zip(segments, request["system"], strict=True)):
        src = source_json(seg.source)
        text = as_text(as_dict(body).get("text"))
        entry = {"position": i + 1, "text": text} | _provenance(src, decided)
        entry["cache_breakpoint"] = ("system", i) in marks
        entry["change"] = _change(before, "segments", _segment_key(src, text), text)
        system.append(entry)

    messages: list[dict[str, Any]] = []
    for m, raw in zip(window, request["messages"], strict=True):
        try:
            writer: str | None = as_text(rec.message_writer(m)) or None
        except (IndexError, KeyError):
            writer = None
        msg = as_dict(raw)
        entry = {"n": m, "role": msg.get("role"), "content": msg.get("content")} | msg
        entry |= {"n": m, "writer": writer}
        if m in injections.messages:
            entry |= _provenance(injections.messages[m], decided)
        elif m in folds.messages:
            entry |= _provenance(folds.messages[m], {})
        entry["change"] = None if before is None or m in before["messages"] else "new"
        messages.append(entry)

    listed: list[dict[str, Any]] = []
    for i, (tool, spec) in enumerate(zip(tools, request["tools"], strict=True)):
        src = source_json(tool.source)
        entry = {"name": tool.name} | as_dict(spec)
        entry |= {
            "name": tool.name,
            "source": src.get("kind"),
            "id": src.get("id"),
            "cache_breakpoint": ("tools", i) in marks,
            "change": _change(before, "tools", tool.name, tool.ref),
        }
        listed.append(entry)

    sources = [source_json(x.source) for x in segments] + [source_json(t.source) for t in tools]
    sources += [injections.messages[m] for m in window if m in injections.messages]
    # The folds since the agent's call before this one, with where each happened.
    recent = [(f, at) for f, after, at in when if previous is not None and after == previous]
    removed = _removed(before, system, window, listed, {**folds.messages, **injections.messages})
    if removed is not None:
        # A message that left in a fold since the call before is shown by the fold's seam.
        evicted = {
            m: f["fold"]
            for f, _ in recent
            for m in window_numbers(checked(f, 0)["messages"], rec.message_count)
        }
        for gone in removed["messages"]:
            if gone["n"] in evicted:
                gone["fold"] = evicted[gone["n"]]
    prior: list[int] = before["order"] if before is not None else []
    if kind["kind"] == "agent":
        detail.injections = injections.summary(call.iter, sources)
    detail.system, detail.messages, detail.tools = system, messages, listed
    detail.removed = removed
    detail.seams = _seams(folds.folds, recent, window, prior)
    return detail


def _attempt_of(rec: Recording, call: Call) -> dict[str, Any] | None:
    """Which attempt ``call`` is, and how many its stage made (the calls around it with
    the same rsid)."""
    from pydantic import ValidationError

    out = attempt_json(call.attempt)
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
            except (RecordingError, ValidationError):
                break
            count += 1
            m += step
    return out | {"of": count}


def _errors_of(rec: Recording, call: Call) -> list[dict[str, Any]]:
    """The error events about ``call``: they follow it before the next call or reply."""
    from afcore.recording import ErrorEvent

    out: list[dict[str, Any]] = []
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
                out.append(error_json(ErrorEvent.model_validate(raw)))
            except ValueError:  # a malformed event is verify's to report
                continue
    return out


def _seams(
    folds: list[dict[str, Any]],
    recent: list[tuple[dict[str, Any], int]],
    window: list[int],
    prior: list[int],
) -> list[dict[str, Any]]:
    """Where a call's window shows a fold: before the summary it wrote, for as long as that
    summary is in the window; and, for a fold since the agent's call before (``recent``,
    each with the last message written before it) that wrote none, where the messages it
    dropped were, or where it happened. ``before``: the message the seam goes before (None:
    after the last)."""
    sent = set(window)
    out = []
    for raw in folds:
        f = checked(raw, raw["fold"])
        before: int | None
        at = next((at for r, at in recent if r is raw), None)
        if f["summary"] is not None and f["summary"] in sent:
            before = f["summary"]
        elif at is not None:
            before = _dropped_at(f, window, prior, at)
        else:
            continue
        out.append(f | {"rsid": as_text(raw.get("rsid")), "before": before})
    return out


def _dropped_at(f: dict[str, Any], window: list[int], prior: list[int], at: int) -> int | None:
    """The message of ``window`` that followed what fold ``f`` dropped from the window before
    (``prior``); for a fold that dropped nothing, the first written after it (``at``: the
    last message written before it)."""
    gone = set(window_numbers(f["messages"], max([*window, *prior, at, 0])))
    first = next((i for i, m in enumerate(prior) if m in gone), None)
    if first is not None:
        sent = set(window)
        after = next((m for m in prior[first:] if m not in gone and m in sent), None)
        if after is not None:
            return after
    return next((m for m in window if m > at), None)


def _provenance(src: dict[str, Any], decided: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Where a piece of context came from, and (for an injection) why it is there: the
    reason this iteration's decision gave, with what it read."""
    out: dict[str, Any] = {
        "source": src.get("kind"),
        "id": src.get("id"),
        "trigger": src.get("trigger"),
        "reason": src.get("reason"),
        "cache": src.get("cache"),
    }
    decision = decided.get(src.get("id") or "")
    if decision is not None and decision["fired"]:
        # An injected message is written once and sent again while its text stays the same;
        # the reason it is there at this call is this iteration's.
        out["reason"] = decision["reason"]
        if "reads" in decision:
            out["reads"] = decision["reads"]
    return out


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


def _change(before: dict[str, Any] | None, slot: str, key: Any, value: Any) -> str | None:
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
    system: list[dict[str, Any]],
    window: list[int],
    tools: list[dict[str, Any]],
    placed: dict[int, dict[str, Any]],
) -> dict[str, Any] | None:
    """What the previous call was sent that this one was not."""
    if before is None:
        return None
    keys = {_segment_key({"kind": s["source"], "id": s["id"]}, s["text"]) for s in system}
    names = {t["name"] for t in tools}
    sent = set(window)
    return {
        "system": [
            {"source": src.get("kind"), "id": src.get("id"), "text": text}
            for key, (text, src) in before["segments"].items()
            if key not in keys
        ],
        "messages": [_gone_message(m, placed) for m in sorted(before["messages"] - sent)],
        "tools": [
            {"name": name, "source": src.get("kind"), "id": src.get("id")}
            for name, (_, src) in before["tools"].items()
            if name not in names
        ],
    }


def _gone_message(n: int, placed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """A message the call before was sent and this one was not; ``placed``: the sources of
    the messages written by an injection or a window stage."""
    src = placed.get(n)
    if src is None:
        return {"n": n}
    return {"n": n, "source": src.get("kind"), "id": src.get("id")}
