"""Where in the Lens a line of the file is shown: which call to go to, and which item there.

A stage that prepares a call (the seed, an inject stage, a fold) belongs to the call after
it; a reply, a tool stage or an event belongs to the call before. A blob is where the record
that first names it is: a message in the window of the next call (a reply's message in the
response of its own call), a system segment or a tool spec in the call that was sent it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from afcore.errors import RecordingError
from afcore.readmodel import Timeline, as_dict, as_text
from afcore.recording import Recording

__all__ = ["Place", "locate"]

_LOOK_AHEAD = 64 * 1024 * 1024
"""How far past a blob to look for the record that names it."""

_PREPARES = ("seed", "inject", "window", "summarize", "configure")
_ID_LENGTHS = (22, 64)
"""A blob's id: 22 characters since 1.1, 64 before."""


@dataclass(frozen=True)
class Place:
    call: int
    item: str | None = None
    """The item to highlight: ``msg:<n>``, ``seg:<k>``, ``tool:<name>``, ``reply``..."""
    what: str = ""
    """What the line holds, in words: ``message #12``, ``route``..."""


def locate(rec: Recording, timeline: Timeline, line: int, depth: int = 0) -> Place | None:
    if not timeline.marks:
        return None
    kind = rec.kind(line)
    if kind == "header":
        return Place(timeline.marks[0].n, None, "the header")
    if kind == "blob":
        return _blob(rec, timeline, line, depth)
    try:
        data = as_dict(rec.raw(line))
    except (ValueError, RecordingError):
        return _before(timeline, line, "a line that is not a record")
    t = as_text(data.get("t"))
    if t == "call" and isinstance(data.get("call"), int) and timeline.at(data["call"]):
        return Place(data["call"], None, f"call {data['call']}")
    if t == "reply" and isinstance(data.get("call"), int) and timeline.at(data["call"]):
        return Place(data["call"], "reply", "the reply")
    if t == "commit":
        # A 1.1 commit does not name its stage: it is the rsid's, up to `#`.
        stage = as_text(data.get("stage")) or as_text(data.get("rsid")).partition("#")[0]
        what = _stage_words(stage, data)
        if stage in _PREPARES:
            return _after(timeline, line, what, _message_item(data))
        return _before(timeline, line, what)
    if t == "run_end":
        return Place(timeline.marks[-1].n, None, "the end of the run")
    return _before(timeline, line, t.replace("_", " ") or "a record")


def _stage_words(stage: str, data: dict[str, Any]) -> str:
    if stage.startswith("tool:"):
        return f"the result of {stage[5:]}"
    return {"seed": "the user's message", "inject": "injections", "window": "a fold"}.get(
        stage, stage or "a stage"
    )


def _message_item(data: dict[str, Any]) -> str | None:
    for w in data.get("writes") or []:
        key = as_text(as_dict(w).get("key"))
        if key.startswith("message:") and key[8:].isdecimal():
            return f"msg:{key[8:]}"
    return None


def _before(timeline: Timeline, line: int, what: str) -> Place:
    mark = timeline.before(line) or timeline.marks[0]
    return Place(mark.n, None, what)


def _after(timeline: Timeline, line: int, what: str, item: str | None = None) -> Place:
    mark = timeline.after(line) or timeline.marks[-1]
    return Place(mark.n, item, what)


def _blob(rec: Recording, timeline: Timeline, line: int, depth: int) -> Place | None:
    try:
        head = rec.line_bytes(line, 90)
        if head.startswith(b'{"t":"blob","id":"'):
            ref = head[18:].partition(b'"')[0].decode("ascii", "replace")
        else:  # a blob not in af's own layout
            ref = as_text(as_dict(rec.raw(line)).get("id"))
    except (ValueError, RecordingError):
        return _after(timeline, line, "a value")
    user = _first_use(rec, line, ref)
    if user is None:
        return _after(timeline, line, "a value no record names")
    kind = rec.kind(user)
    if kind == "blob":
        if depth > 3:
            return _after(timeline, user, "a value")
        return locate(rec, timeline, user, depth + 1)
    try:
        data = as_dict(rec.raw(user))
    except (ValueError, RecordingError):
        return _after(timeline, user, "a value")
    t = as_text(data.get("t"))
    for w in data.get("writes") or []:
        w = as_dict(w)
        key = as_text(w.get("key"))
        if w.get("ref") == ref and key.startswith("message:") and key[8:].isdecimal():
            n = int(key[8:])
            if t == "reply" and isinstance(data.get("call"), int):
                return Place(data["call"], "reply", f"message #{n}, the reply")
            return _after(timeline, user, f"message #{n}", f"msg:{n}")
    if t == "call" and isinstance(data.get("call"), int):
        where = "a system segment" if data.get("system") == ref else "the tools"
        return Place(data["call"], None, where)
    return locate(rec, timeline, user, depth + 1)


def _first_use(rec: Recording, line: int, ref: str) -> int | None:
    """The first line after ``line`` that names ``ref``."""
    if len(ref) not in _ID_LENGTHS:
        return None
    needle = f'"{ref}"'.encode()
    start = rec.line_start(line) + rec.line_size(line) + 1
    with open(rec.path, "rb") as f:
        fd = f.fileno()
        pos = start
        while pos - start < _LOOK_AHEAD:
            chunk = os.pread(fd, 1024 * 1024 + len(needle), pos)
            if not chunk:
                return None
            at = chunk.find(needle)
            if at >= 0:
                found = rec.line_at(pos + at)
                return found if found <= rec.line_count else None
            pos += 1024 * 1024
    return None
