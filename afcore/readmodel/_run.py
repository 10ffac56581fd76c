"""A recording as typed parts, call by call: what ``af show`` prints and its JSON output are
drawn from it, so both always say the same thing.

Values are kept whole here; only a front end cuts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct

from afcore.readmodel._model import (
    CallError,
    CallSummary,
    FoldPart,
    Governed,
    InvalidArgs,
    RunHead,
    RunOutcome,
    ToolResult,
)
from afcore.readmodel._text import as_dict, as_text, result_notes, shown_status
from afcore.readmodel._walk import (
    Folds,
    Injections,
    Resolver,
    attempt_of,
    error_of,
    missing_text,
    response_of,
)
from afcore.recording._typed import at_defaults, dump

if TYPE_CHECKING:
    from afcore.recording import Recording

__all__ = ["RunPart", "overview", "run_view"]


def overview(rec: Recording) -> dict[str, Any]:
    """The run call by call, whole, as JSON: :func:`run_view`'s parts in one dict (``calls``
    and ``folds`` as lists). For a big file, walk :func:`run_view` instead."""
    calls: list[dict[str, Any]] = []
    folds: list[dict[str, Any]] = []
    head: dict[str, Any] = {}
    end: dict[str, Any] = {}
    for part in run_view(rec):
        if part.kind == "call":
            calls.append(part.data.to_json())
        elif part.kind == "fold":
            folds.append(part.data.to_json())
        elif part.kind == "header":
            head = part.data.to_json()
        else:
            end = part.data.to_json()
    before = {k: v for k, v in end.items() if k not in AFTER_CALLS and k != "calls"}
    after = {k: v for k, v in end.items() if k in AFTER_CALLS}
    return head | before | {"calls": calls, "folds": folds} | after


AFTER_CALLS = (
    "answer",
    "usage",
    "error",
    "errors",
    "ms",
    "problems",
    "torn_tail",
    "unknown_records",
)
"""The outcome's keys that come after the calls and folds in the JSON of a run."""


class RunPart(Struct, frozen=True):
    """One part of a run as :func:`run_view` gives it: ``header`` (what ran, a
    :class:`RunHead`), a ``call`` (complete: its reply, the tool results and errors that
    followed it; a :class:`CallSummary`), a ``fold`` of the window (after the call it
    follows; a :class:`FoldPart`), and at the end the outcome (``end``, a
    :class:`RunOutcome`)."""

    kind: Literal["header", "call", "fold", "end"]
    data: Any


def run_view(rec: Recording) -> Iterator[RunPart]:
    """The run call by call, as the file is read: each call once what follows it in the file
    is known, each fold after the call it follows; memory stays flat whatever the file's
    size (a call is held only until the agent's next call begins). Blobs are read when a
    part needs their value: open the file with ``index=False`` and this walk is the one
    that indexes it."""
    from afcore.recording import (
        ArgsInvalid,
        Call,
        Commit,
        ErrorEvent,
        Pause,
        Reply,
        Resume,
        RunEnd,
    )
    from afcore.recording._reader import ToolLine

    header = rec.header
    yield RunPart(
        "header",
        RunHead(
            run_id=header.run_id,
            path=str(rec.origin),
            started_at=header.started_at,
            agent=dump(header.agent),
            model=header.model,
            provider=header.provider,
            session=dump(header.session) if header.session is not None else None,
        ),
    )
    resolver = Resolver(rec)
    calls: list[CallSummary] = []
    """the calls not yet given: the agent's last, and those after it"""
    pending_folds: list[FoldPart] = []
    by_number: dict[int, CallSummary] = {}
    errors: list[CallError] = []
    end: RunEnd | None = None
    count = 0
    last_iteration = 0
    attempts: dict[str, int] = {}
    """a call-llm stage's rsid -> its attempts so far (they are consecutive calls)"""

    def current(iteration: int | None) -> CallSummary | None:
        # Tools answer the agent's calls: a summarizer's call between a reply and the tools
        # it asked for is not theirs.
        for c in reversed(calls):
            if c.kind == "agent" and (iteration is None or c.iteration == iteration):
                return c
        return None

    def done(keep: int) -> Iterator[RunPart]:
        """Give the calls but the last ``keep``, with the folds that follow them."""
        while len(calls) > keep:
            c = calls.pop(0)
            by_number.pop(c.call, None)
            if c.attempt is not None:
                c.attempt.of = attempts[c.rsid]
            yield RunPart("call", c)
            while pending_folds and pending_folds[0].after_call == c.call:
                yield RunPart("fold", pending_folds.pop(0))

    early: list[Governed] = []
    """governance before the first call (the message rules on the user's message)"""
    paused: dict[str, Any] | None = None

    def govern(item: Governed, iteration: int | None) -> None:
        target = current(iteration) or current(None)
        (target.governed if target is not None else early).append(item)

    injections = Injections(resolver)
    folds = Folds(resolver, keep=False)
    previous_tools: list[str] | None = None

    by_rsid: dict[str, CallSummary] = {}
    """a call-llm stage's rsid -> its last attempt (agents with reliability rules)"""
    blob = rec.blob
    last_status: str | None = None
    last_result: str | None = None
    said = ""
    """a tool line's status and result status, and the status shown for them"""
    for line, record in rec.records(blobs=False, seals=False, only=_READ, tool_lines=True):
        kind = type(record)
        if kind is ToolLine:
            # A tool's outcome in af's common shape: read as its record would be below (no
            # governance, no limits, the outcome's plain fields alone).
            assert isinstance(record, ToolLine)
            it, ref, name, k, call_id, status, ms, result_status = record
            # The agent's last call, as current() finds it, without its walk (most results).
            target = calls[-1] if calls else None
            if target is None or target.kind != "agent" or target.iteration != it:
                target = current(it)
                if target is None:
                    continue
            try:
                message, missing = blob(ref), None
            except KeyError as e:  # as Resolver.by_ref says it
                message, missing = None, missing_text(e)
            if status != last_status or result_status != last_result:  # most: as the last
                last_status, last_result = status, result_status
                said = shown_status({"status": status, "result_status": result_status})
            if message.__class__ is dict:
                content, is_error = message.get("content"), message.get("is_error") is True
            else:
                content, is_error = None, False
            # In the fields' order: name, call_id, status, ms, content, is_error, missing,
            # result_status, shown, notes, run, k.
            target.results.append(
                ToolResult(
                    name,
                    call_id,
                    status,
                    ms,
                    content,
                    is_error,
                    missing,
                    result_status,
                    said,
                    (),
                    None,
                    k,
                )
            )
        elif kind is Call:
            assert isinstance(record, Call)
            who, fold = folds.kind(record.rsid)
            agent = who == "agent"
            if agent and calls:
                # The agent's next call: everything before it is complete, but the attempts
                # at this same call (how many there are is not known yet).
                rsid = record.rsid
                if len(calls) == 1 and calls[0].rsid != rsid:  # most calls: the one before
                    yield from done(0)
                    attempts = {rsid: attempts[rsid]} if rsid in attempts else {}
                    by_rsid = {rsid: by_rsid[rsid]} if rsid in by_rsid else {}
                else:
                    same = next((i for i, c in enumerate(calls) if c.rsid == rsid), None)
                    yield from done(0 if same is None else len(calls) - same)
                    held = {c.rsid for c in calls} | {rsid}
                    attempts = {r: k for r, k in attempts.items() if r in held}
                    by_rsid = {r: c for r, c in by_rsid.items() if r in held}
            if not calls:
                while pending_folds and pending_folds[0].after_call is None:
                    yield RunPart("fold", pending_folds.pop(0))
            system = resolver.system(record.system)
            tools = resolver.tools(record.tools)
            names = tools.names
            # The tools a summarizer is sent (none) are no change to the agent's; the same
            # names are none either.
            compared = agent and previous_tools is not None and names is not previous_tools
            count += 1
            decisions = None
            if agent:
                sources = system.injected + tools.injected
                sources += injections.sources_in(record.window)
                decisions = injections.summary(record.iter, sources)
            window = record.window
            # In the fields' order: call, iteration, rsid, model, line, kind, fold, segments,
            # chars, messages, window, tools, tools_added, tools_removed, injections, attempt
            # (a big run has ten thousand calls).
            entry = CallSummary(
                record.call,
                record.iter,
                record.rsid,
                record.model,
                line,
                who,
                fold,
                system.count,
                system.chars,
                window[0][1] - window[0][0] + 1
                if len(window) == 1
                else sum(b - a + 1 for a, b in window),
                [list(r) for r in window],
                tools.count,
                [t for t in names if t not in (previous_tools or [])] if compared else [],
                [t for t in (previous_tools or []) if t not in names] if compared else [],
                decisions,
                attempt_of(record.attempt),
            )
            if early and agent:
                entry.governed.extend(early)
                early.clear()
            calls.append(entry)
            by_number[record.call] = entry
            by_rsid[record.rsid] = entry
            last_iteration = max(last_iteration, record.iter)
            if record.attempt is not None:
                attempts[record.rsid] = attempts.get(record.rsid, 0) + 1
            if agent:
                previous_tools = names
        elif kind is Reply:
            assert isinstance(record, Reply)
            target = by_number.get(record.call)
            if target is not None:
                target.response = response_of(resolver, record)
        elif kind is Commit:
            assert isinstance(record, Commit)
            for item in governed_of(resolver, record, line):
                govern(item, record.iter if record.iter else None)
            if record.stage == "inject":
                injections.see(record)
            elif record.stage in ("window", "summarize"):
                part = folds.see(record, calls[-1].call if calls else None)
                if part is not None:
                    pending_folds.append(part)
            elif record.tool is not None:
                message, missing = (
                    resolver.value(record.writes[0])
                    if record.writes
                    else (None, "no result written")
                )
                target = current(record.iter)
                if target is not None:
                    tool = record.tool
                    outcome: dict[str, Any] = (
                        {"status": tool.status, "result_status": tool.result_status}
                        if at_defaults(tool, _PLAIN_OUTCOME)
                        else dump(tool, mode="json", exclude_defaults=True)
                    )
                    limits = None
                    for w in record.writes:
                        if w.key.startswith("limits:"):
                            limits = resolver.value(w)[0]
                            break
                    message = as_dict(message)
                    target.results.append(
                        ToolResult(
                            name=record.tool.name,
                            call_id=record.tool.call_id,
                            status=record.tool.status,
                            ms=record.tool.ms,
                            content=message.get("content"),
                            is_error=message.get("is_error") is True,
                            missing=missing,
                            result_status=record.tool.result_status,
                            shown=shown_status(outcome),
                            notes=tuple(result_notes(outcome, limits)),
                            run=outcome.get("run"),
                            k=record.tool.k,
                        )
                    )
        elif kind is ArgsInvalid:
            assert isinstance(record, ArgsInvalid)
            target = current(None)
            if target is not None:
                target.invalid_args.append(
                    InvalidArgs(record.name, record.call_id, record.problems, record.enforced)
                )
        elif kind is ErrorEvent:
            assert isinstance(record, ErrorEvent)
            error = error_of(record)
            target = by_number.get(record.call) if record.call is not None else None
            if target is None and record.call is None and record.rsid is not None:
                # A fail-fast before an attempt was made: it ends its stage's last attempt.
                target = by_rsid.get(record.rsid)
            (target.errors if target is not None else errors).append(error)
        elif kind is Pause:
            assert isinstance(record, Pause)
            cp = record.checkpoint
            paused = dump(cp, mode="json", exclude_defaults=True)
            govern(
                Governed(
                    "pause",
                    line,
                    "ask",
                    [f"paused: {cp.link} asks a person: {cp.question}"],
                    tool=next((c.name for c in cp.calls if c.id == cp.asked), None),
                    k=next((c.k for c in cp.calls if c.id == cp.asked), None),
                    value=paused,
                ),
                record.iter,
            )
        elif kind is Resume:
            assert isinstance(record, Resume)
            paused = None
            verb = "approved" if record.verb == "approve" else "declined"
            why = f": {record.why}" if record.why else ""
            when = record.at[:19].replace("T", " ") + " UTC"
            govern(
                Governed(
                    "resume",
                    line,
                    record.verb,
                    [f"resumed: {verb} by {record.by} at {when}{why}"],
                    value=dump(record, mode="json", exclude_defaults=True),
                ),
                None,
            )
        elif kind is RunEnd:
            assert isinstance(record, RunEnd)
            end = record

    yield from done(0)
    for part in pending_folds:  # after a call the file does not hold
        yield RunPart("fold", part)
    answer = None
    if end is not None and end.answer is not None:
        answer, _ = resolver.value(end.answer)
    yield RunPart(
        "end",
        RunOutcome(
            status=end.status if end is not None else "incomplete",
            iterations=end.iterations if end is not None else last_iteration,
            calls=count,
            answer=answer,
            usage=end.usage if end is not None else None,
            error=dump(end.error) if end is not None and end.error else None,
            errors=errors,
            ms=end.ms if end is not None else None,
            problems=[p.to_json() for p in rec.problems],
            torn_tail=rec.torn_tail.to_json() if rec.torn_tail else None,
            unknown_records=rec.unknown_records,
            paused=paused if end is not None and end.status == "paused" else None,
            contract=dump(end.contract, mode="json", exclude_defaults=True)
            if end is not None and end.contract is not None
            else None,
        ),
    )


_READ = frozenset(
    ["args_invalid", "call", "commit", "error", "pause", "reply", "resume", "run_end"]
)
"""The records a run's view is drawn from: the others (evictions, seals, clock readings, the
header read already) are checked as the file is walked, not built."""

_PLAIN_OUTCOME = frozenset({"name", "k", "call_id", "status", "ms", "result_status"})
"""The fields of a tool's outcome that say nothing more than how it went: an outcome holding
other than its defaults only in these (most) is read without dumping it for its notes."""


_GOVERNED = ("govern:", "approval:", "output:")
"""The keys of the writes that record a governance step."""


def governed_of(resolver: Resolver, commit: Any, line: int) -> list[Governed]:
    """The governance steps a commit records: the decisions of its ``govern:`` writes, a
    person's answer, output checks."""
    out: list[Governed] = []
    writes = commit.writes
    for w in writes:
        if w.key.startswith(_GOVERNED):
            break
    else:
        return out  # most commits: checked without the import below
    from afcore.governance._words import decision_words

    args = next((w for w in writes if w.key.startswith("tool:") and w.key.endswith(".args")), None)
    for w in writes:
        key = w.key
        if not key.startswith(_GOVERNED):
            continue
        value, _ = resolver.value(w)
        if not isinstance(value, dict):
            continue
        words = decision_words(key, value)
        if not words:
            continue  # a resumed walk with no link left after the one that asked
        if key.startswith("govern:"):
            changed = resolver.value(args)[0] if args is not None and key.count(".") == 0 else None
            out.append(
                Governed(
                    "rules",
                    line,
                    as_text(value.get("verb")),
                    words,
                    moment=as_text(value.get("moment")) or None,
                    tool=value.get("tool") if isinstance(value.get("tool"), str) else None,
                    k=value.get("k") if isinstance(value.get("k"), int) else None,
                    value=changed,
                )
            )
        elif key.startswith("output:"):
            out.append(
                Governed("check", line, "ok" if value.get("ok") else "failed", words, value=value)
            )
    return out
