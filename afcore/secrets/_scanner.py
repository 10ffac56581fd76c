"""Finding secrets in a recording, or in any JSON value, before it is shared.

The scanner reports where each hit is (line, record, JSON path, and for a message the
call that sent it and the slot) and which rule matched, never the value. It uses the
rules redaction uses (``_rules``), without the run's literals and stricter about what
counts: a value under a secret key, or after ``password=``, must look like a credential,
so ``password: required`` is not a hit. A recording af wrote with its default policy
therefore scans clean; a hit means a secret the policy did not know, or a file written
without it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from afcore.secrets._matcher import Matcher, judge
from afcore.secrets._rules import (
    DEFAULT_FIELDS,
    is_placeholder,
    is_secret_key,
    learnable,
    looks_secret,
    norm_key,
)

__all__ = ["Hit", "place", "scan", "scan_recording"]


@dataclass(frozen=True, slots=True)
class Hit:
    """A secret found: where, and by which rule. Never the value."""

    rule: str
    """``openai_key``, ``private_key``, ``jwt``, ``field:<key>`` (a value under a secret
    key, or after ``key=`` in text), ``near:<word>`` (a random-looking word after
    *password*, *token*, *key*...)."""
    path: str
    """Where in the value (or the record): ``$.value.content[0].text``."""
    start: int | None = None
    end: int | None = None
    """Character offsets of the secret in the string at ``path`` (None: the whole value)."""
    in_key: bool = False
    """The secret is an object key, not a value."""
    line: int | None = None
    """The recording's line (from 1)."""
    record: str | None = None
    """The record's type (``blob``, ``call``, ``commit``, ...)."""
    message: int | None = None
    """The message the hit is in, when it is in one."""
    call: int | None = None
    """The first call that sent it."""
    slot: str | None = None
    """Where in that call: ``system``, ``messages`` or ``tools``."""

    def where(self) -> str:
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.record:
            parts.append(self.record)
        if self.message is not None:
            parts.append(f"message {self.message}")
        if self.call is not None:
            parts.append(f"call {self.call}" + (f" ({self.slot})" if self.slot else ""))
        elif self.slot:
            parts.append(self.slot)
        at = self.path + (" (a key)" if self.in_key else "")
        if self.start is not None:
            at += f" [{self.start}:{self.end}]"
        return ", ".join([*parts, at])

    def to_json(self) -> dict[str, Any]:
        return {
            k: getattr(self, k) for k in self.__slots__ if getattr(self, k) not in (None, False)
        }

    def __str__(self) -> str:
        return f"{self.rule} at {self.where()}"


_FIELDS = tuple(sorted({norm_key(f) for f in DEFAULT_FIELDS}))


@functools.cache
def _matcher() -> Matcher:
    return Matcher((), fields=_FIELDS)


def scan(value: Any, *, path: str = "$") -> list[Hit]:
    """Every secret in a JSON value (strings, object keys, values under secret keys)."""
    try:
        raw = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        raw = None
    if raw is not None and not _matcher().hits(raw):
        return []
    return list(_walk(value, path))


def _walk(value: Any, path: str) -> Iterator[Hit]:
    if isinstance(value, str):
        yield from _text(value, path)
    elif isinstance(value, dict):
        for i, (k, v) in enumerate(value.items()):
            key = str(k)
            in_key = list(_text(key, path))
            # A key that is a secret is named by its position, never spelled in a path.
            if in_key:
                here = f"{path}[#{i}]"
            elif key.isidentifier():
                here = f"{path}.{key}"
            else:
                here = f"{path}[{orjson.dumps(key).decode()}]"
            for hit in in_key:
                yield replace(hit, in_key=True, start=None, end=None, path=here)
            if _secret_value(key, v):
                yield Hit(f"field:{key}", here)
            else:
                yield from _walk(v, here)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def _secret_value(key: str, value: Any) -> bool:
    """A credential-looking string under a secret key (a placeholder or `required` is not
    one)."""
    if not isinstance(value, str) or not is_secret_key(key, _FIELDS):
        return False
    return not is_placeholder(value) and (looks_secret(value) or learnable(value))


def _text(text: str, path: str) -> Iterator[Hit]:
    matcher = _matcher()
    data = text.encode("utf-8", "surrogatepass")
    pos = 0
    while (c := matcher.find(data, pos)) is not None:
        secret = data[c.start : c.end].decode("utf-8", "surrogatepass")
        if matcher.holds_known(data, c) or not judge(c, secret, data, eager=False):
            pos = c.start if c.start > c.match_start else c.match_start + 1
            continue
        rule = c.rule.name
        if c.rule.kind == "assignment":
            rule = f"field:{c.key}"
        elif c.rule.kind == "keyword":
            rule = f"near:{norm_key(c.key or '')}"
        # Offsets in characters, as Python indexes the string.
        start = len(data[: c.start].decode("utf-8", "surrogatepass"))
        yield Hit(rule, path, start, start + len(secret))
        pos = max(c.end, c.match_end)


def scan_recording(path: str | os.PathLike[str]) -> list[Hit]:
    """Every secret in a recording, line by line, each with where it is. A line that is
    not JSON is scanned as text. Messages, system segments and tool specs are placed in
    the first call that sent them, where the file says so."""
    path = Path(path)
    hits: list[Hit] = []
    blob_lines: dict[str, int] = {}
    with path.open("rb") as f:
        for n, line in enumerate(f, start=1):
            line = line.rstrip(b"\n")
            if not line.strip():
                continue
            # A line another program wrote may spell characters as \u escapes, which the
            # screen over the bytes cannot see through: those are always parsed.
            if not _matcher().hits(line) and b"\\u" not in line:
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                text = line.decode("utf-8", "replace")
                hits += [replace(h, line=n) for h in _text(text, "$")]
                continue
            kind = record.get("t") if isinstance(record, dict) else None
            found = list(_walk(record, "$"))
            if found and kind == "blob" and isinstance(record.get("id"), str):
                blob_lines[record["id"]] = n
            inline = found and kind in ("commit", "reply")
            hits += [
                replace(
                    h,
                    line=n,
                    record=kind if isinstance(kind, str) else None,
                    message=_inline_message(record, h.path) if inline else None,
                )
                for h in found
            ]
    if blob_lines or any(h.message is not None for h in hits):
        hits = _place(path, hits, blob_lines)
    return hits


_WRITE = re.compile(r"\$\.writes\[(\d+)\]\.value(?:[.\[]|$)")


def _inline_message(record: dict[str, Any], where: str) -> int | None:
    """The message a hit at ``where`` in a commit or reply is in, when the record holds it
    inline (1.1): ``$.writes[i].value...`` of a write of ``message:<n>``."""
    m = _WRITE.match(where)
    writes = record.get("writes")
    if m is None or not isinstance(writes, list) or int(m[1]) >= len(writes):
        return None
    key = writes[int(m[1])].get("key") if isinstance(writes[int(m[1])], dict) else None
    number = key.removeprefix("message:") if isinstance(key, str) else ""
    return int(number) if key != number and number.isdecimal() else None


def _place(path: Path, hits: list[Hit], blob_lines: dict[str, int]) -> list[Hit]:
    """Name the message, call and slot of hits in blobs, from the file's own index."""
    from afcore.errors import AfError
    from afcore.recording import open_recording

    wanted = {line: ref for ref, line in blob_lines.items()}
    places: dict[int, tuple[int | None, int | None, str | None]] = {}
    first_call: dict[int, int] = {}
    """message n (written inline) -> the first call that sent it"""
    try:
        with open_recording(path) as rec:
            messages: dict[str, int] = {}
            for m in range(1, rec.message_count + 1):
                try:
                    ref = rec.message_ref(m)
                except (IndexError, KeyError):
                    continue
                messages.setdefault(ref, m)
            for line, ref in wanted.items():
                places[line] = (messages.get(ref), None, "messages" if ref in messages else None)
            inline = {h.message for h in hits if h.message is not None}
            for n in rec.call_numbers:
                if all(p[1] is not None for p in places.values()) and inline <= set(first_call):
                    break
                try:
                    call = rec.call(n)
                    system = {call.system, *(s.ref for s in rec.segments(n) if s.ref)}
                    tools = {call.tools, *(t.ref for t in rec.tools(n))}
                except (AfError, KeyError, IndexError, ValueError):
                    continue
                window = call.window
                for m in inline - set(first_call):
                    if any(a <= m <= b for a, b in window):
                        first_call[m] = n
                for line, ref in wanted.items():
                    message, first, slot = places[line]
                    if first is not None:
                        continue
                    if ref in system:
                        places[line] = (message, n, "system")
                    elif ref in tools:
                        places[line] = (message, n, "tools")
                    elif message is not None and any(a <= message <= b for a, b in window):
                        places[line] = (message, n, "messages")
    except (AfError, OSError):
        return hits
    out = []
    for h in hits:
        if h.message is not None and h.record in ("commit", "reply"):
            sent = first_call.get(h.message)
            h = replace(h, call=sent, slot="messages" if sent is not None else None)
        else:
            place = places.get(h.line or 0)
            if place is not None:
                h = replace(h, message=place[0], call=place[1], slot=place[2])
        out.append(h)
    return out


def place(path: str | os.PathLike[str], hits: list[Hit]) -> list[Hit]:
    """``hits`` found in the recording at ``path`` by other means (each with its line and
    record), with the message, call and slot they are in named as :func:`scan_recording`
    names them."""
    path = Path(path)
    wanted = {h.line for h in hits if h.record in ("blob", "commit", "reply") and h.line}
    if not wanted:
        return hits
    blob_lines: dict[str, int] = {}
    records: dict[int, dict[str, Any]] = {}
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            if n in wanted:
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(record, dict):
                    continue
                records[n] = record
                if record.get("t") == "blob" and isinstance(record.get("id"), str):
                    blob_lines[record["id"]] = n
    hits = [
        replace(h, message=_inline_message(records[h.line], h.path))
        if h.record in ("commit", "reply") and h.line in records
        else h
        for h in hits
    ]
    return _place(path, hits, blob_lines)
