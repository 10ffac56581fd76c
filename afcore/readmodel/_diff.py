"""Two recordings side by side: what differs, call by call (``af diff``, the first difference
``af replay`` stops at, the marks of ``af lens A --diff B``).

Calls are aligned by number: call n of one run with call n of the other. A call's request is
compared hash first (the hash taken when it was sent covers every byte of it); only when the
hashes differ is it compared part by part, by content hashes the file already holds, and
only what differs is read in full: the model, each system segment (aligned by the injection
that put it there), the window's messages (aligned as sequences), each tool (by name), the
params and the cache breakpoints; then the attempt, the reply (its text and tool calls) and
the results of the tools it asked for. The run's ending (status, answer) closes the diff.

A difference that a later call is sent again (a changed tool result stays in every window
after it) is listed at the first call that has it, and counted as *carried* at the others,
so a diff of two long runs says what each call changes, not the same thing a thousand times.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from afcore.errors import RecordingFormatError
from afcore.readmodel._text import as_dict, as_text, json_text
from afcore.readmodel._walk import window_numbers
from afcore.recording._typed import dump, typed

if TYPE_CHECKING:
    from afcore.recording import Call, CallTool, Recording, Segment

__all__ = [
    "SLOTS",
    "CallDiff",
    "Change",
    "RunDiff",
    "RunSide",
    "diff_call",
    "diff_runs",
    "excerpts",
    "first_difference",
]

SLOTS = (
    "model",
    "system",
    "messages",
    "tools",
    "params",
    "cache",
    "attempt",
    "reply",
    "tool_result",
    "run",
)
"""The parts a difference can be in, in the order a call's differences are listed: the
request's slots as sent, then what came of it, then the run's ending."""

ChangeKind = Literal["added", "removed", "changed"]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two runs: where it is, and the value on each side."""

    slot: str
    """One of :data:`SLOTS`."""
    path: str
    """Where in the slot, in words a person reads and a program can match: ``segment 3
    (instruction currency)``, ``message 7: content``, ``tool weather:
    input_schema.properties.city.type``, ``params.temperature``, ``tool:find_places#1``."""
    kind: ChangeKind
    a: Any = None
    """The value in the first run (the recorded one, for a replay); None when added."""
    b: Any = None
    """The value in the second run (the replay's); None when removed."""
    where: Mapping[str, Any] = field(default_factory=dict)
    """The same place as data: ``segment`` (its position), ``injection`` and ``flavor``,
    ``message`` (its number), ``role``, ``tool``, ``field`` (a path inside the value),
    ``param``."""
    why_key: str | None = None
    """The ``af why`` key that explains the first run's side (ask it with ``--at
    call:N``)."""
    identity: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    """What makes it the same difference at a later call (the hashes of both sides)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "path": self.path,
            "kind": self.kind,
            "a": self.a,
            "b": self.b,
            "where": dict(self.where),
            "why_key": self.why_key,
        }


@dataclass(slots=True)
class CallDiff:
    """What differs at one call number."""

    call: int
    in_a: bool = True
    in_b: bool = True
    same_request: bool = True
    """The two requests hash the same (they are byte for byte the same request)."""
    changes: list[Change] = field(default_factory=list)
    """The differences first seen at this call, in the order of :data:`SLOTS`."""
    carried: int = 0
    """Differences of earlier calls this call is sent again (listed where first seen)."""

    @property
    def identical(self) -> bool:
        return self.in_a and self.in_b and not self.changes and not self.carried

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "in_a": self.in_a,
            "in_b": self.in_b,
            "same_request": self.same_request,
            "changes": [c.to_json() for c in self.changes],
            "carried": self.carried,
        }


@dataclass(frozen=True, slots=True)
class RunSide:
    """One of the two runs, as a diff names it."""

    path: str
    run_id: str
    agent: str
    calls: int
    status: str | None
    """How it ended (None: it did not finish)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "run_id": self.run_id,
            "agent": self.agent,
            "calls": self.calls,
            "status": self.status,
        }


@dataclass(slots=True)
class RunDiff:
    """Two runs aligned call by call: the calls that differ, and how each ended."""

    a: RunSide
    b: RunSide
    calls: list[CallDiff]
    """The calls that differ, in order (an identical call is not listed)."""
    end: list[Change]
    """Differences in how the runs ended: status, answer."""

    @property
    def compared(self) -> int:
        """How many call numbers were aligned (the longer run's calls)."""
        return max(self.a.calls, self.b.calls)

    @property
    def identical(self) -> bool:
        return not self.calls and not self.end

    @property
    def first(self) -> Change | None:
        """The first difference: at the first call that differs, or at the end."""
        for c in self.calls:
            if c.changes:
                return c.changes[0]
        return self.end[0] if self.end else None

    def differing(self) -> set[int]:
        """The numbers of the calls that differ."""
        return {c.call for c in self.calls}

    def to_json(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "compared": self.compared,
            "identical_calls": self.compared - len(self.calls),
            "calls": [c.to_json() for c in self.calls],
            "end": [c.to_json() for c in self.end],
        }


# -- comparing ----------------------------------------------------------------------------


def diff_runs(a: Recording, b: Recording) -> RunDiff:
    """Recordings ``a`` and ``b`` aligned call by call (call n with call n)."""
    left, right = _Side(a), _Side(b)
    seen: set[tuple[Any, ...]] = set()
    calls: list[CallDiff] = []
    numbers_a, numbers_b = set(a.call_numbers), set(b.call_numbers)
    for n in sorted(numbers_a | numbers_b):
        one = _diff_call(left, right, n, n, seen, n in numbers_a, n in numbers_b)
        if not one.identical:
            calls.append(one)
    return RunDiff(a=_side(a), b=_side(b), calls=calls, end=_diff_end(left, right))


def diff_call(a: Recording, b: Recording, n: int, m: int | None = None) -> CallDiff:
    """Call ``n`` of ``a`` and call ``m`` (default ``n``) of ``b``: every difference of
    their requests, attempts, replies and tool results."""
    m = n if m is None else m
    left, right = _Side(a), _Side(b)
    return _diff_call(left, right, n, m, set(), n in set(a.call_numbers), m in set(b.call_numbers))


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """Where two JSON values first differ (a path such as ``input_schema.properties.city``,
    ``content[1].args``; empty: the values themselves), and the values there; None when
    they are equal. Objects are compared key by key in sorted order, lists item by item."""
    if a == b and type(a) is type(b):
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return _join(path, key), a.get(key), b.get(key)
            found = first_difference(a[key], b[key], _join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        if len(a) != len(b):
            i = min(len(a), len(b))
            return f"{path}[{i}]", a[i] if i < len(a) else None, b[i] if i < len(b) else None
        return None
    return path, a, b


def excerpts(a: str, b: str, width: int) -> tuple[str, str]:
    """Two texts that differ, each from a little before where they first differ (a cut
    start marked ``…``), so that a long prompt with one word changed shows that word."""
    at = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        at += 1
    lead = max(width // 4, 8)
    if at <= lead:
        return a, b
    start = at - lead
    return "…" + a[start:], "…" + b[start:]


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _side(rec: Recording) -> RunSide:
    end = rec.end
    return RunSide(
        path=str(rec.origin),  # the file given (a bundle), not where it was unpacked
        run_id=rec.header.run_id,
        agent=rec.header.agent.name,
        calls=max(rec.call_numbers, default=0),
        status=end.status if end is not None else None,
    )


class _Side:
    """One recording, with what a diff reads of it worked out once: each message's hash
    and where it came from, each slot list's entries."""

    def __init__(self, rec: Recording) -> None:
        from afcore.recording._hashing import V11

        self.rec = rec
        self._current = rec.scheme is V11
        """its ids are made as a new recording's are; a 1.0 file's (64 hex digits) are not,
        and are compared by the id its value has today (a replay of it is a new file)"""
        self._same: dict[str, str] = {}
        self._writes: dict[int, dict[str, Any]] = {}
        """line -> its writes by key"""
        self._lists: dict[str, list[Any]] = {}
        self._count = rec.message_count
        self._refs: dict[int, str] = {}
        self._all: list[str] | None = None
        """message number -> its hash: a window is read as hashes at every call, and a
        long run's windows hold most of its messages"""

    def call(self, n: int) -> Call:
        return self.rec.call(n)

    def _write(self, n: int) -> dict[str, Any]:
        line = self.rec.message_line(n)
        if line is None:
            return {}
        writes = self._writes.get(line)
        if writes is None:
            raw = as_dict(self.rec.raw(line))
            writes = self._writes[line] = {
                w["key"]: w for w in raw.get("writes") or () if isinstance(w, dict) and "key" in w
            }
        return as_dict(writes.get(f"message:{n}"))

    def message_ref(self, n: int) -> str:
        found = self._refs.get(n)
        if found is None:
            try:
                found = self.id(self.rec.message_ref(n))
            except (IndexError, KeyError):
                found = ""
            self._refs[n] = found
        return found

    def id(self, ref: str) -> str:
        """The id a value stored under ``ref`` has in a new recording: what tells two values
        apart across two files."""
        if self._current or not ref:
            return ref
        found = self._same.get(ref)
        if found is None:
            from afcore.recording import content_hash

            try:
                found = content_hash(self.rec.blob(ref))
            except KeyError:
                found = ref
            self._same[ref] = found
        return found

    def message_source(self, n: int) -> dict[str, Any]:
        return as_dict(self._write(n).get("source"))

    def message(self, n: int) -> Any:
        try:
            return self.rec.message(n)
        except (IndexError, KeyError):
            return None

    def window(self, call: Call) -> list[int]:
        return list(window_numbers(call.window, self._count))

    def window_refs(self, call: Call) -> list[str]:
        """The hashes of a call's window, in order: slices of the run's list of message
        hashes, one per range (a long run's windows are a range or two of thousands)."""
        if self._all is None:
            self._all = [self.message_ref(n) for n in range(1, self._count + 1)]
        out: list[str] = []
        for r in call.window if isinstance(call.window, list | tuple) else ():
            if isinstance(r, list | tuple) and len(r) == 2:
                a, b = r
                if isinstance(a, int) and isinstance(b, int):
                    out += self._all[max(a, 1) - 1 : min(b, self._count)]
        return out

    def _listed(self, ref: str) -> list[Any]:
        found = self._lists.get(ref)
        if found is None:
            try:
                found = self.rec.listed(ref)
            except (KeyError, ValueError):
                found = []
            self._lists[ref] = found
        return found

    def segments(self, call: Call) -> list[Segment]:
        from afcore.recording import Segment

        return [typed(Segment, s) for s in self._listed(call.system)]

    def tools(self, call: Call) -> list[CallTool]:
        from afcore.recording import CallTool

        return [typed(CallTool, t) for t in self._listed(call.tools)]

    def segment_text(self, seg: Segment) -> str:
        if seg.ref is None:
            return seg.text or ""
        try:
            return as_text(as_dict(self.rec.blob(seg.ref)).get("text"))
        except KeyError:
            return ""

    def blob(self, ref: str) -> Any:
        try:
            return self.rec.blob(ref)
        except KeyError:
            return None

    def tool_result(self, name: str, k: int) -> tuple[str, str, Any] | None:
        """The k-th call of tool ``name``: (its status, its result's hash, its result)."""
        from afcore.recording import content_hash

        line = self.rec.tool_line(f"{name}#{k}")
        if line is None:
            return None
        try:
            commit = self.rec.tool_commit(line)
        except RecordingFormatError as e:  # said where a status is: the runs differ there
            return f"unreadable: {e}", "", None
        write = next((w for w in commit.writes if w.key.startswith("message:")), None)
        status = commit.tool.status if commit.tool is not None else "?"
        if write is None:
            return status, "", None
        value = self.value(write)
        return status, self.id(write.ref) if write.ref is not None else content_hash(value), value

    def value(self, write: Any) -> Any:
        """A write's value, held inline (1.1) or in a blob."""
        try:
            return self.rec.value(write)
        except (KeyError, ValueError):
            return None


def _segment_hash(seg: Segment) -> str:
    from afcore.recording import content_hash

    return seg.ref if seg.ref is not None else content_hash({"text": seg.text or ""})


def _diff_call(
    a: _Side, b: _Side, n: int, m: int, seen: set[tuple[Any, ...]], in_a: bool, in_b: bool
) -> CallDiff:
    out = CallDiff(call=n, in_a=in_a, in_b=in_b)
    if not (in_a and in_b):
        side, number = (a, n) if in_a else (b, m)
        call = side.call(number)
        what = {"model": call.model, "messages": len(side.window(call))}
        out.same_request = False
        out.changes.append(
            Change(
                "run",
                "call",
                "removed" if in_a else "added",
                what if in_a else None,
                None if in_a else what,
                {"call": n},
                f"call:{n}" if in_a else None,
            )
        )
        return out
    ca, cb = a.call(n), b.call(m)
    changes: list[Change] = []
    if ca.hash != cb.hash:
        out.same_request = False
        _model(ca, cb, n, changes)
        _system(a, b, ca, cb, n, changes)
        _messages(a, b, ca, cb, n, changes)
        _tools(a, b, ca, cb, n, changes)
        _params(ca, cb, n, changes)
    _attempt(ca, cb, n, changes)
    _reply(a, b, n, m, changes)
    for change in changes:
        key = _carry_key(change)
        if key is not None and key in seen:
            out.carried += 1
            continue
        if key is not None:
            seen.add(key)
        out.changes.append(change)
    return out


def _carry_key(change: Change) -> tuple[Any, ...] | None:
    """What makes a difference the same one at a later call (None: never carried)."""
    if change.slot not in ("system", "messages", "tools", "params", "model", "cache"):
        return None
    if change.identity is not None:
        return (change.slot, *change.identity)
    return (change.slot, change.path, json_text(change.a), json_text(change.b))


# -- the request ------------------------------------------------------------------------


def _model(ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    if ca.model != cb.model:
        out.append(Change("model", "model", "changed", ca.model, cb.model, {}, f"call:{n}"))


def _system(a: _Side, b: _Side, ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    if ca.system == cb.system:
        return
    sa, sb = a.segments(ca), b.segments(cb)
    ha = [a.id(_segment_hash(s)) if s.ref else _segment_hash(s) for s in sa]
    hb = [b.id(_segment_hash(s)) if s.ref else _segment_hash(s) for s in sb]
    for tag, i, j in _aligned(ha, hb, [_owner(s) for s in sa], [_owner(s) for s in sb]):
        seg_a = sa[i] if i is not None else None
        seg_b = sb[j] if j is not None else None
        shown = seg_a if seg_a is not None else seg_b
        assert shown is not None
        position = (i if i is not None else j or 0) + 1
        src = shown.source
        label = f"segment {position}"
        if src.id:
            label += f" ({src.kind} {src.id})"
        where: dict[str, Any] = {"segment": position, "flavor": src.kind}
        if src.id:
            where["injection"] = src.id
        identity = (ha[i] if i is not None else None, hb[j] if j is not None else None)
        why = f"system:{seg_a.source.id}" if seg_a is not None and seg_a.source.id else f"call:{n}"
        out.append(
            Change(
                "system",
                label,
                tag,
                a.segment_text(seg_a) if seg_a is not None else None,
                b.segment_text(seg_b) if seg_b is not None else None,
                where,
                why,
                identity,
            )
        )


def _owner(seg: Segment) -> str | None:
    """What a segment belongs to, to pair it with its counterpart: its injection."""
    return f"{seg.source.kind}:{seg.source.id}" if seg.source.id else None


def _messages(a: _Side, b: _Side, ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    ra, rb = a.window_refs(ca), b.window_refs(cb)
    if ra == rb:
        return
    wa, wb = a.window(ca), b.window(cb)
    for tag, i, j in _aligned(ra, rb):
        na = wa[i] if i is not None else None
        nb = wb[j] if j is not None else None
        ma = a.message(na) if na is not None else None
        mb = b.message(nb) if nb is not None else None
        number = na if na is not None else nb
        shown = ma if ma is not None else mb
        where: dict[str, Any] = {"message": number, "role": as_dict(shown).get("role")}
        src = a.message_source(na) if na is not None else b.message_source(nb or 0)
        if src.get("id") and src.get("kind") not in ("history", "session"):
            where["injection"] = src["id"]
            where["flavor"] = src.get("kind")
        if as_dict(shown).get("role") == "tool":
            where["tool"] = as_dict(shown).get("name")
        identity = (ra[i] if i is not None else None, rb[j] if j is not None else None)
        path = f"message {number}"
        va, vb = ma, mb
        if tag == "changed":
            found = first_difference(ma, mb)
            if found is not None and found[0]:
                path += f": {found[0]}"
                where["field"] = found[0]
                va, vb = found[1], found[2]
        out.append(
            Change(
                "messages",
                path,
                tag,
                va,
                vb,
                where,
                f"message:{na}" if na is not None else f"call:{n}",
                identity,
            )
        )


def _tools(a: _Side, b: _Side, ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    if ca.tools == cb.tools:
        return
    ta = {t.name: t for t in a.tools(ca)}
    tb = {t.name: t for t in b.tools(cb)}
    why = f"tools@{n}"
    for name in [*ta, *(x for x in tb if x not in ta)]:
        one, two = ta.get(name), tb.get(name)
        id_a = a.id(one.ref) if one is not None else None
        id_b = b.id(two.ref) if two is not None else None
        if one is not None and id_a == id_b:
            continue
        where: dict[str, Any] = {"tool": name}
        identity = (name, id_a, id_b)
        shown = one if one is not None else two
        assert shown is not None
        if shown.source.id:
            where["injection"] = shown.source.id
        if one is None or two is None:
            spec = a.blob(one.ref) if one is not None else b.blob(two.ref if two else "")
            kind: ChangeKind = "removed" if two is None else "added"
            out.append(
                Change(
                    "tools",
                    f"tool {name}",
                    kind,
                    spec if one else None,
                    spec if two else None,
                    where,
                    why,
                    identity,
                )
            )
            continue
        spec_a, spec_b = a.blob(one.ref), b.blob(two.ref)
        found = first_difference(spec_a, spec_b)
        path, va, vb = found if found is not None else ("", spec_a, spec_b)
        if path:
            where["field"] = path
        out.append(
            Change(
                "tools",
                f"tool {name}: {path}" if path else f"tool {name}",
                "changed",
                va,
                vb,
                where,
                why,
                identity,
            )
        )
    if list(ta) != list(tb) and set(ta) == set(tb):
        out.append(Change("tools", "order", "changed", list(ta), list(tb), {}, why))


def _params(ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    why = f"call:{n}"
    pa, pb = ca.params, cb.params
    for key in sorted(set(pa) | set(pb)):
        if key in pa and key in pb:
            found = first_difference(pa[key], pb[key], f"params.{key}")
            if found is not None:
                where = {"param": key}
                out.append(Change("params", found[0], "changed", found[1], found[2], where, why))
        elif key in pa:
            out.append(
                Change("params", f"params.{key}", "removed", pa[key], None, {"param": key}, why)
            )
        else:
            out.append(
                Change("params", f"params.{key}", "added", None, pb[key], {"param": key}, why)
            )
    if ca.cache != cb.cache:
        out.append(Change("cache", "cache", "changed", ca.cache, cb.cache, {}, why))


def _attempt(ca: Call, cb: Call, n: int, out: list[Change]) -> None:
    xa = dump(ca.attempt, exclude_defaults=True) if ca.attempt is not None else None
    xb = dump(cb.attempt, exclude_defaults=True) if cb.attempt is not None else None
    found = first_difference(xa, xb, "attempt")
    if found is not None:
        out.append(Change("attempt", found[0], "changed", found[1], found[2], {}, f"call:{n}"))


# -- what came of it ----------------------------------------------------------------------


def _reply(a: _Side, b: _Side, n: int, m: int, out: list[Change]) -> None:
    ra, rb = a.rec.reply(n), b.rec.reply(m)
    if ra is None and rb is None:
        return
    if ra is None or rb is None:
        kind: ChangeKind = "added" if ra is None else "removed"
        shown = rb if ra is None else ra
        assert shown is not None
        side = b if ra is None else a
        value = side.value(shown.writes[0]) if shown.writes else None
        out.append(
            Change(
                "reply",
                "reply",
                kind,
                value if ra is not None else None,
                value if rb is not None else None,
                {},
                f"call:{n}",
            )
        )
        return
    va = a.value(ra.writes[0]) if ra.writes else None
    vb = b.value(rb.writes[0]) if rb.writes else None
    if va != vb:
        found = first_difference(va, vb)
        if found is not None:
            path = f"reply: {found[0]}" if found[0] else "reply"
            out.append(Change("reply", path, "changed", found[1], found[2], {}, f"call:{n}"))
    if ra.stop_reason != rb.stop_reason:
        out.append(
            Change(
                "reply",
                "reply: stop_reason",
                "changed",
                ra.stop_reason,
                rb.stop_reason,
                {},
                f"call:{n}",
            )
        )
    asked_a = [(t.name, t.k) for t in ra.tool_calls]
    asked_b = [(t.name, t.k) for t in rb.tool_calls]
    for name, k in [*asked_a, *(x for x in asked_b if x not in asked_a)]:
        one = a.tool_result(name, k) if (name, k) in asked_a else None
        two = b.tool_result(name, k) if (name, k) in asked_b else None
        if one is None and two is None:
            continue
        key = f"tool:{name}#{k}"
        where = {"tool": name, "k": k}
        why = f"{key}.result"
        if one is None or two is None:
            tag: ChangeKind = "added" if one is None else "removed"
            held = two if one is None else one
            assert held is not None
            value = as_dict(held[2]).get("content")
            out.append(
                Change(
                    "tool_result",
                    key,
                    tag,
                    value if one else None,
                    value if two else None,
                    where,
                    why if one else None,
                )
            )
            continue
        if one[:2] == two[:2]:
            continue
        if one[0] != two[0]:
            out.append(
                Change("tool_result", f"{key}: status", "changed", one[0], two[0], where, why)
            )
        if one[1] != two[1]:
            found = first_difference(one[2], two[2])
            path, va, vb = found if found is not None else ("", one[2], two[2])
            out.append(
                Change(
                    "tool_result",
                    f"{key}: {path}" if path else key,
                    "changed",
                    va,
                    vb,
                    where,
                    why,
                )
            )


def _diff_end(a: _Side, b: _Side) -> list[Change]:
    ea, eb = a.rec.end, b.rec.end
    out: list[Change] = []
    sa = ea.status if ea is not None else None
    sb = eb.status if eb is not None else None
    if sa != sb:
        out.append(Change("run", "status", "changed", sa, sb, {}, "answer" if sa else None))
    va = a.value(ea.answer) if ea is not None and ea.answer is not None else None
    vb = b.value(eb.answer) if eb is not None and eb.answer is not None else None
    if va != vb:
        out.append(Change("run", "answer", "changed", va, vb, {}, "answer"))
    return out


# -- aligning two sequences ---------------------------------------------------------------


def _longest(most: int, same: Callable[[int], bool]) -> int:
    """The largest k <= most for which ``same(k)`` holds (it holds for every smaller k)."""
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _aligned(
    a: list[str],
    b: list[str],
    owners_a: list[str | None] | None = None,
    owners_b: list[str | None] | None = None,
) -> Iterator[tuple[ChangeKind, int | None, int | None]]:
    """The items of two sequences that differ, as (kind, index in a, index in b): a common
    head and tail are skipped at once, the middle aligned by difflib. Items replaced in
    place are paired (by owner first, when owners are given: a segment with the segment of
    the same injection), the rest are added or removed."""
    # Found by halving, each step one comparison of slices: a window of thousands of
    # messages that differs near its end costs a few list comparisons, not a loop.
    head = _longest(min(len(a), len(b)), lambda k: a[:k] == b[:k])
    most = min(len(a), len(b)) - head
    tail = _longest(most, lambda k: a[len(a) - k :] == b[len(b) - k :])
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            continue
        left = list(range(head + i1, head + i2))
        right = list(range(head + j1, head + j2))
        pairs: list[tuple[int, int]] = []
        if owners_a is not None and owners_b is not None:
            for i in list(left):
                owner = owners_a[i]
                j = next((j for j in right if owner is not None and owners_b[j] == owner), None)
                if j is not None:
                    pairs.append((i, j))
                    left.remove(i)
                    right.remove(j)
        while left and right:
            pairs.append((left.pop(0), right.pop(0)))
        changed: list[tuple[ChangeKind, int | None, int | None]] = [
            ("changed", i, j) for i, j in pairs
        ]
        changed += [("removed", i, None) for i in left]
        changed += [("added", None, j) for j in right]
        changed.sort(key=lambda c: c[1] if c[1] is not None else (c[2] or 0))
        yield from changed
