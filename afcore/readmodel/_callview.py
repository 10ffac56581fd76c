"""What the Lens shows of one call, as plain data: ``af show --call``'s view of it (the slots
rebuilt and verified, with provenance, seams and decisions: ``afcore.readmodel.call_detail``),
and the events that followed it in the file (tool results, folds, errors, records of types
this af does not know).

``call_detail`` walks the records from the top of the file to the call. On a big file that
walk is most of the cost, and it needs only some records: the inject stages that wrote the
decisions still in force and the messages in the windows compared, the window stages whose
summaries are in them, and everything since the agent's call before. The timeline knows where
those are; the walk is given just them (a test checks that the result is the same as with
every record, on every call of the samples).
"""

from __future__ import annotations

import bisect
from typing import Any

from msgspec import Struct, field

from afcore.errors import RecordingError
from afcore.readmodel._call import (
    CallDetail,
    CallNotFoundError,
    CallUnreadableError,
    call_detail,
)
from afcore.readmodel._folds import checked, fold_number
from afcore.readmodel._text import as_dict, as_text, result_notes, shown_status
from afcore.readmodel._timeline import FoldMark, Mark, Timeline
from afcore.recording import Recording
from afcore.recording._typed import InvalidRecord

__all__ = ["EVENT_LIMIT", "CallView", "call_view", "walk_lines"]

EVENT_LIMIT = 2000
"""Records shown after one call at most; the rest are counted."""
_SUMMARIZER_EVENTS = {"fold", "evicted", "error", "end", "raw", "bad"}


class CallView(Struct):
    mark: Mark
    detail: CallDetail | None
    """The call as af show --call shows it, or None when it could not be read (``problem``
    says why)."""
    problem: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    more_events: int = 0
    note: str | None = None
    """Something the view leaves out, and why."""
    earlier: list[FoldMark] = field(default_factory=list)
    """Folds before the call that its seams do not show (af show marks the folds since the
    call before, and those whose summary is in the window): the messages they took out left
    earlier, and the Lens says so with one seam."""


def call_view(rec: Recording, timeline: Timeline, n: int) -> CallView:
    mark = timeline.at(n)
    if mark is None:
        raise KeyError(n)
    events, more = _events(rec, timeline, mark)
    problem = _window_problem(rec, n)
    if problem is not None:
        return CallView(mark, None, problem, events, more)
    previous = timeline.previous_agent(mark)
    note = None
    if previous is not None and not _readable(rec, previous.n):
        # Comparing with it would fail, or expand its window: this call is shown on its own.
        note = f"not compared with call {previous.n}: its window cannot be rebuilt"
        previous = None
    try:
        detail = call_detail(rec, n, lines=walk_lines(rec, timeline, mark, previous))
    except (CallNotFoundError, CallUnreadableError) as e:
        return CallView(mark, None, str(e), events, more)
    except (RecordingError, InvalidRecord, KeyError, IndexError, ValueError, TypeError) as e:
        return CallView(mark, None, f"call {n} cannot be read: {e}", events, more)
    shown = {seam.fold.fold for seam in detail.seams or []}
    earlier = [f for f in timeline.folds_before(mark.line) if f.number not in shown]
    return CallView(mark, detail, None, events, more, note, earlier if mark.agent else [])


def _window_problem(rec: Recording, n: int) -> str | None:
    """Why call ``n``'s window cannot be rebuilt, when its ranges name more messages than the
    file holds (a hostile file could name 10**12, and expanding it would never end)."""
    try:
        window = rec.call(n).window
    except (RecordingError, IndexError, InvalidRecord):
        return None  # call_detail says what is wrong
    named = sum(max(b - a + 1, 0) for a, b in window)
    if named > rec.message_count:
        return (
            f"call {n}'s window names {named:,} messages and the file holds "
            f"{rec.message_count:,}: it cannot be rebuilt"
        )
    return None


def _readable(rec: Recording, n: int) -> bool:
    try:
        rec.call(n)
    except (RecordingError, IndexError, InvalidRecord):
        return False
    return _window_problem(rec, n) is None


def walk_lines(rec: Recording, timeline: Timeline, mark: Mark, previous: Mark | None) -> list[int]:
    """The lines ``call_detail`` needs to walk to show call ``mark``, compared with the
    agent's call ``previous`` (see the module)."""
    line = mark.line
    wanted: set[int] = {line}
    # Decisions: for each injection, where it was first decided (the order they are listed
    # in) and last decided before the call, and the last inject stage (the iteration).
    for lines in timeline.decision_lines.values():
        i = bisect.bisect_left(lines, line)
        if i:
            wanted.add(lines[0])
            wanted.add(lines[i - 1])
    i = bisect.bisect_left(timeline.inject_lines, line)
    if i:
        wanted.add(timeline.inject_lines[i - 1])
    # Where the messages of this window and the one compared with it came from.
    for n in (mark.n, previous.n if previous is not None else None):
        if n is None:
            continue
        try:
            window = rec.call(n).window
        except (RecordingError, IndexError, InvalidRecord):
            continue
        for a, b in window:
            for m in range(a, b + 1):
                writer = rec.message_line(m)
                if writer is not None and writer in timeline.placing and writer < line:
                    wanted.add(writer)
    # Everything since the agent's call before: the folds between the two, and what the
    # call before wrote.
    start = previous.line if previous is not None else line
    for at in range(start, line):
        if rec.kind(at) not in ("blob", "blank", "bad", "header", "seal"):
            wanted.add(at)
    return sorted(wanted)


def _events(rec: Recording, timeline: Timeline, mark: Mark) -> tuple[list[dict[str, Any]], int]:
    """The records after call ``mark`` up to the agent's next call (for a summarizer's call,
    up to the next call of any kind), as events."""
    following = timeline.next_agent(mark) if mark.agent else timeline.next_call(mark)
    end = following.line if following is not None else rec.line_count + 1
    events: list[dict[str, Any]] = []
    more = 0
    started: dict[str, dict[str, Any]] = {}
    evicted: dict[int, dict[str, Any]] = {}
    for line in range(mark.line + 1, end):
        kind = rec.kind(line)
        if kind in ("blob", "blank", "header", "seal"):
            continue
        if len(events) >= EVENT_LIMIT:
            more += 1
            continue
        if kind == "bad":
            events.append({"kind": "bad", "line": line})
            continue
        try:
            data = rec.raw(line)
        except (ValueError, RecordingError):
            events.append({"kind": "bad", "line": line})
            continue
        event = _event(rec, timeline, data, line, started, evicted)
        if event is None:
            continue
        if not mark.agent and event["kind"] not in _SUMMARIZER_EVENTS:
            continue  # the tools that run after a fold answer the agent's call, not this one
        events.append(event)
    for event in started.values():
        event["unfinished"] = True
    return events, more


def _event(
    rec: Recording,
    timeline: Timeline,
    data: Any,
    line: int,
    started: dict[str, dict[str, Any]],
    evicted: dict[int, dict[str, Any]],
) -> dict[str, Any] | None:
    d = as_dict(data)
    t = d.get("t")
    if t == "reply" or t == "call":
        if t == "call":
            return {"kind": "call", "line": line, "call": d.get("call"), "rsid": d.get("rsid")}
        # The reply is the call's response; since 1.1 it writes the route too.
        route = [
            w for w in d.get("writes") or [] if isinstance(w, dict) and w.get("key") == "route"
        ]
        if route:
            rsid = as_text(d.get("rsid"))
            return {"kind": "route", "line": line, "rsid": rsid, "value": _first_value(rec, route)}
        return None
    if t == "tool_start":
        event: dict[str, Any] = {
            "kind": "tool",
            "line": line,
            "rsid": as_text(d.get("rsid")),
            "name": as_text(d.get("name")),
            "call_id": as_text(d.get("call_id")),
            "status": "running",
            "progress": [],
        }
        started[event["rsid"]] = event
        return event
    if t == "tool_progress":
        running = started.get(as_text(d.get("rsid")))
        if running is not None:
            running["progress"].append(as_text(d.get("message")))
            return None
        return {"kind": "progress", "line": line, "message": as_text(d.get("message"))}
    if t == "args_invalid":
        return {
            "kind": "invalid",
            "line": line,
            "name": as_text(d.get("name")),
            "call_id": as_text(d.get("call_id")),
            "problems": [as_dict(p) for p in d.get("problems") or [] if isinstance(p, dict)],
            "enforced": d.get("enforced") is True,
        }
    if t == "context_evicted":
        fold = d.get("fold")
        target = evicted.get(fold) if isinstance(fold, int) else None
        if target is not None:
            target["evicted"] += 1
            return None
        return {"kind": "evicted", "line": line, "fold": fold, "evicted": 1}
    if t == "error":
        error = as_dict(d.get("error"))
        return {
            "kind": "error",
            "line": line,
            "error": as_text(error.get("kind")) or "error",
            "message": as_text(error.get("message")),
            "decision": as_dict(d.get("decision")),
        }
    if t == "run_end":
        return {"kind": "end", "line": line, "status": as_text(d.get("status")), "record": d}
    if t == "pause":
        cp = as_dict(d.get("checkpoint"))
        return {
            "kind": "pause",
            "line": line,
            "link": as_text(cp.get("link")),
            "question": as_text(cp.get("question")),
        }
    if t == "resume":
        return {
            "kind": "resume",
            "line": line,
            "verb": as_text(d.get("verb")),
            "by": as_text(d.get("by")),
            "at": as_text(d.get("at")),
            "why": as_text(d.get("why")) if d.get("why") is not None else None,
        }
    if t == "observer_error":
        error = as_dict(d.get("error"))
        return {
            "kind": "error",
            "line": line,
            "error": f"observer {as_text(d.get('observer'))} failed",
            "message": f"{as_text(error.get('kind'))}: {as_text(error.get('message'))}",
            "decision": {},
        }
    if t == "commit":
        return _commit_event(rec, d, line, started, evicted)
    if t in ("header", "blob", "seal"):
        return None
    return {"kind": "raw", "line": line, "record": d}


def _number(value: Any) -> float | None:
    """A duration the file wrote, if it is a number (the front ends format it as one)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _commit_event(
    rec: Recording,
    d: dict[str, Any],
    line: int,
    started: dict[str, dict[str, Any]],
    evicted: dict[int, dict[str, Any]],
) -> dict[str, Any] | None:
    rsid = as_text(d.get("rsid"))
    stage = as_text(d.get("stage")) or rsid.partition("#")[0]  # 1.1 leaves it to the rsid
    writes = [w for w in d.get("writes") or [] if isinstance(w, dict)]
    tool = d.get("tool")
    ruled = _governed_words(rec, writes)
    if isinstance(tool, dict):
        message = _value(rec, writes[0]) if writes else None
        begun = started.pop(rsid, None)
        event = begun if begun is not None else {"kind": "tool", "line": line, "progress": []}
        event |= {
            "rsid": rsid,
            "name": as_text(tool.get("name")),
            "k": tool.get("k"),
            "call_id": as_text(tool.get("call_id")),
            "status": as_text(tool.get("status")),
            "ms": _number(tool.get("ms")),
            "content": as_dict(message).get("content"),
            "is_error": as_dict(message).get("is_error") is True,
            "message": _message_number(writes),
            "shown": shown_status(tool),
            "notes": result_notes(
                tool,
                next(
                    (_value(rec, w) for w in writes if as_text(w.get("key")).startswith("limits:")),
                    None,
                ),
            ),
        }
        if isinstance(tool.get("result_status"), str):
            event["result_status"] = tool["result_status"]
        if isinstance(tool.get("run"), dict):
            event["run"] = tool["run"]
        if ruled:
            event["rules"] = ruled
        return None if begun is not None else event  # already listed where it started
    if stage == "route":
        return {"kind": "route", "line": line, "rsid": rsid, "value": _first_value(rec, writes)}
    if stage == "finalize":
        return {"kind": "answer", "line": line, "rsid": rsid, "value": _first_value(rec, writes)}
    if stage == "window":
        for w in writes:
            number = fold_number(as_text(w.get("key")))
            if number is not None:
                fold = checked(_value(rec, w), number)
                event = {"kind": "fold", "line": line, "rsid": rsid, "fold": fold, "evicted": 0}
                evicted[number] = event
                return event
        return None
    if stage == "summarize":
        return {"kind": "summarize", "line": line, "rsid": rsid}
    if stage == "inject":
        return None  # the next call's: its decisions are shown with it
    if stage == "resume":
        return None  # the resume record before it says who answered
    if stage.startswith("govern:") or stage in ("output", "fallback"):
        keys = [as_text(w.get("key")) for w in writes]
        args = next((k for k in keys if k.startswith("tool:") and k.endswith(".args")), None)
        ruling = next((k for k in keys if k.startswith(("govern:", "output:"))), None)
        value = _value(rec, next(w for w in writes if w.get("key") == ruling)) if ruling else None
        if not ruled:
            return None  # a resumed walk with no link left after the one that asked
        return {
            "kind": "governed",
            "line": line,
            "rsid": rsid,
            "stage": stage,
            "verb": as_text(as_dict(value).get("verb"))
            or ("ok" if as_dict(value).get("ok") else "failed"),
            "words": ruled,
            "why": args or ruling,
        }
    return {"kind": "stage", "line": line, "rsid": rsid, "stage": stage}


def _governed_words(rec: Recording, writes: list[dict[str, Any]]) -> list[str]:
    from afcore.governance._words import decision_words

    out: list[str] = []
    for w in writes:
        key = as_text(w.get("key"))
        if key.startswith(("govern:", "output:")):
            out += decision_words(key, _value(rec, w))
    return out


def _value(rec: Recording, write: dict[str, Any]) -> Any:
    try:
        return rec.value(write)
    except (KeyError, ValueError):
        return None


def _first_value(rec: Recording, writes: list[dict[str, Any]]) -> Any:
    return _value(rec, writes[0]) if writes else None


def _message_number(writes: list[dict[str, Any]]) -> int | None:
    for w in writes:
        key = as_text(w.get("key"))
        if key.startswith("message:") and key[8:].isdecimal():
            return int(key[8:])
    return None
