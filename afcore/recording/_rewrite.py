"""Rewriting a recording's content consistently: what ``af export`` redacts with.

A recording names its values by their hashes, so a value cannot change alone: the blob's id
changes, then every ref to it, every list that holds that ref (itself a blob), and the hash
of every call that sent any of it. :func:`rewrite` takes a function of the content (strings,
numbers and object keys that came from a model, a tool, a user or the agent) and writes a
new file in which all of that follows, in the hashing scheme of the file it reads, so the
result verifies as the original did. What is not content (record types, ids, refs, hashes,
stage ids, state keys, sequence numbers) is never given to the function.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from afcore.recording._hashing import SCHEMES, V10, Scheme, seal, short_id

__all__ = ["Leaf", "Rewritten", "content_leaves", "rewrite"]

_STRUCTURAL = frozenset(
    {
        "t",
        "id",
        "ref",
        "hash",
        "h",
        "seq",
        "rsid",
        "stage",
        "iter",
        "call",
        "key",
        "reads",
        "window",
    }
)
"""Keys whose values are the file's own bookkeeping, never content."""
_NESTED = frozenset({"key", "ref", "rsid", "hash", "t", "stage"})
"""Keys that name bookkeeping wherever they stand outside a written value."""
_KEEP = frozenset({"format", "version", "run_id", "started_at", "af_version", "python"})
"""The header's own facts."""


@dataclass(frozen=True, slots=True)
class Leaf:
    """Where a piece of content is: the line, the record's type, the path in the record."""

    line: int
    record: str
    path: tuple[str | int, ...]
    is_key: bool = False

    def path_text(self) -> str:
        out = "$"
        for p in self.path:
            out += f"[{p}]" if isinstance(p, int) else (f".{p}" if p.isidentifier() else "[…]")
        return out + (" (a key)" if self.is_key else "")


Transform = Callable[[Any, Leaf], Any]


@dataclass
class Rewritten:
    """What a rewrite did."""

    lines: int = 0
    dropped: list[int] = field(default_factory=list)
    """Lines left out: not JSON (a torn tail, a broken line), so their content could not be
    screened."""
    calls_rehashed: int = 0
    unrebuilt: list[int] = field(default_factory=list)
    """Calls whose request could not be rebuilt after the rewrite (they keep their hash)."""


def content_leaves(
    record: Any, line: int, ids: Mapping[str, str] | None = None
) -> list[tuple[Any, Leaf]]:
    """Every piece of content in a parsed record (a blob: its value), with where it is.
    ``ids``: the blob ids met so far, each mapped to itself (a string that is one is a ref,
    not content); the caller keeps it as it reads, so each record costs its own size."""
    found: list[tuple[Any, Leaf]] = []
    refs = ids if ids is not None else {}

    def note(value: Any, leaf: Leaf) -> Any:
        found.append((value, leaf))
        return value

    if isinstance(record, dict) and record.get("t") == "blob":
        _apply(record.get("value"), line, note, refs, kind="blob")
    else:
        _apply(record, line, note, refs)
    return found


def _bookkeeping(path: tuple[str | int, ...]) -> bool:
    """Whether the value at ``path`` in a record is the file's own (an id, a ref, a key)."""
    if not path:
        return False
    if path[0] in _STRUCTURAL:
        return True
    if "value" in path:
        return False  # a written value: content all the way down
    last = next((p for p in reversed(path) if isinstance(p, str)), None)
    return last in _NESTED


def _apply(
    record: Any, line: int, transform: Transform, refs: Mapping[str, str], kind: str | None = None
) -> Any:
    if kind is None:
        t = record.get("t") if isinstance(record, dict) else None
        kind = t if isinstance(t, str) else "?"
    top = kind != "blob"

    def visit(value: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(value, str):
            mapped = refs.get(value)
            if mapped is not None:
                return mapped
            if top and _bookkeeping(path):
                return value
            return transform(value, Leaf(line, kind, path))
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if top and not path and (k in _STRUCTURAL or (kind == "header" and k in _KEEP)):
                    out[k] = _refs_only(v, refs)
                    continue
                key = transform(k, Leaf(line, kind, (*path, k), True)) if isinstance(k, str) else k
                key = key if isinstance(key, str) else str(key)
                while key in out:  # two keys redacted alike stay two keys
                    key += "'"
                out[key] = visit(v, (*path, k))
            return out
        if isinstance(value, list):
            return [visit(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, int | float) and not isinstance(value, bool):
            if top and _bookkeeping(path):
                return value
            return transform(value, Leaf(line, kind, path))
        return value

    return visit(record, ())


def _refs_only(value: Any, refs: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return refs.get(value, value)
    if isinstance(value, list):
        return [_refs_only(v, refs) for v in value]
    if isinstance(value, dict):
        return {k: _refs_only(v, refs) for k, v in value.items()}
    return value


def rewrite(
    src: str | os.PathLike[str], dst: str | os.PathLike[str], transform: Transform
) -> Rewritten:
    """Write ``src`` to ``dst`` with ``transform`` applied to every piece of content (it
    returns the piece, or what stands for it), and every id, ref and call hash made anew
    from what was written, so ``dst`` verifies wherever ``src`` did."""
    from afcore.recording._reader import open_recording

    src, dst = Path(src), Path(dst)
    done = Rewritten()
    scheme: Scheme = V10
    seals: list[int] = []
    """the places in ``out`` of the seal lines (1.1), made anew once the rest is final"""
    refs: dict[str, str] = {}
    written: set[str] = set()
    call_lines: dict[int, int] = {}
    out: list[bytes] = []
    with open(src, "rb") as f:
        for n, raw in enumerate(f, start=1):
            done.lines = n
            body = raw.rstrip(b"\n")
            if not body.strip():
                continue
            try:
                record = orjson.loads(body)
            except orjson.JSONDecodeError:
                done.dropped.append(n)
                continue
            if isinstance(record, dict) and record.get("t") == "header" and not out:
                scheme = SCHEMES.get(str(record.get("hash")), V10)
            if isinstance(record, dict) and record.get("t") == "seal":
                seals.append(len(out))
            if isinstance(record, dict) and record.get("t") == "blob" and "id" in record:
                value = _apply(record.get("value"), n, transform, refs, kind="blob")
                new_id = scheme.content(value)
                refs[record["id"]] = new_id
                if new_id in written:
                    continue  # two values redacted alike: the blob is stored once
                written.add(new_id)
                record = {**record, "id": new_id, "value": value}
            else:
                before = record
                record = _apply(record, n, transform, refs)
                _inline_ids(before, record, scheme, refs)
                if isinstance(record, dict) and record.get("t") == "call":
                    if isinstance(record.get("call"), int):
                        call_lines[record["call"]] = len(out)
            out.append(orjson.dumps(record))
    dst.write_bytes(b"".join(line + b"\n" for line in out))

    # Each call's hash, taken anew from the request as a reader rebuilds it.
    if call_lines:
        with open_recording(dst) as rec:
            hashes = {}
            for number in call_lines:
                try:
                    check = rec.check_call(number)
                except (KeyError, IndexError, ValueError):
                    done.unrebuilt.append(number)
                    continue
                if check.rebuilt is None:
                    done.unrebuilt.append(number)
                else:
                    hashes[number] = check.rebuilt
        for number, at in call_lines.items():
            if number in hashes:
                record = orjson.loads(out[at])
                if record.get("hash") != hashes[number]:
                    record["hash"] = hashes[number]
                    out[at] = orjson.dumps(record)
                done.calls_rehashed += 1
    if seals:
        _reseal(out, seals)
    dst.write_bytes(b"".join(line + b"\n" for line in out))
    return done


def _inline_ids(before: Any, after: Any, scheme: Scheme, refs: dict[str, str]) -> None:
    """A message written inline (1.1) is named by the id of its value, as a blob is (an
    eviction names it so): its old id now stands for the new one."""
    if not isinstance(before, dict) or before.get("t") not in ("commit", "reply"):
        return
    old, new = before.get("writes"), after.get("writes")
    if not isinstance(old, list) or not isinstance(new, list) or len(old) != len(new):
        return
    for a, b in zip(old, new, strict=True):
        if isinstance(a, dict) and isinstance(b, dict) and "value" in a and "ref" not in a:
            if a["value"] != b.get("value"):
                refs[scheme.content(a["value"])] = scheme.content(b.get("value"))


def _reseal(out: list[bytes], seals: list[int]) -> None:
    """The hash chain of a 1.1 file made anew over the lines as they are now: each seal of
    the seal before and of every byte after it, up to its own line."""
    chain = b""
    start = 0
    for at in seals:
        chain = seal(chain, b"".join(line + b"\n" for line in out[start:at]))
        out[at] = b'{"t":"seal","h":"' + short_id(chain).encode() + b'"}'
        start = at + 1
