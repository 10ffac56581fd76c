"""Reading what a tool returned: the value the model is served, the status, and the limits
the tool declared, by one strict rule that every door (the loop, an MCP client, a test)
applies alike.

A reserved shape is recognized only when it is whole; anything else is plain data. From a
recognized shape the record-only fields (an item's ``short`` and ``kind``) are removed
before the model reads it; a bad one built by hand is dropped with a warning, never
repaired.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from afcore.errors import RefusedError
from afcore.tools._envelope import RequireInstruction, ToolResultStatus, read_envelope
from afcore.tools._limits import NOT_COVERED_SEPARATOR, DescribedResult, _check_short
from afcore.tools._notes import (
    ABSENCE_MARKER,
    COVERAGE_BLOCK_HEADING,
    COVERAGE_MARKER,
    HEADINGS,
    PERIOD_WIRE,
    SEMANTICS_NOTE,
    TEMPLATES,
    WIRE,
)

__all__ = [
    "AnswerCoverage",
    "Limits",
    "ResultReading",
    "answer_coverage",
    "limits_block",
    "read_result",
    "with_limits",
]

_LISTS = ("checked", "not_checked", "cannot_cover", "in_progress")
_RECORD_ONLY = ("short", "kind")
_KINDS = tuple(WIRE["ITEM_WIRE"]["kinds"])


@dataclass(frozen=True)
class Limits:
    """One statement of coverage, as a tool declared it: what the record files and what
    the answer's limits list."""

    source: Literal["absent", "coverage", "described"]
    checked: tuple[dict[str, Any], ...] = ()
    not_checked: tuple[dict[str, Any], ...] = ()
    cannot_cover: tuple[dict[str, Any], ...] = ()
    in_progress: tuple[dict[str, Any], ...] = ()
    not_covered: tuple[str, ...] = ()
    """A described result built by hand says its gaps as lines only."""
    period: dict[str, Any] | None = None
    looked_for: str | None = None
    try_instead: str | None = None
    try_instead_tool: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limits:
        """A statement as :meth:`to_json` wrote it (a recording's ``limits:`` write)."""
        return cls(
            source=data["source"],
            checked=tuple(data.get("checked") or ()),
            not_checked=tuple(data.get("not_checked") or ()),
            cannot_cover=tuple(data.get("cannot_cover") or ()),
            in_progress=tuple(data.get("in_progress") or ()),
            not_covered=tuple(data.get("not_covered") or ()),
            period=data.get("period"),
            looked_for=data.get("looked_for"),
            try_instead=data.get("try_instead"),
            try_instead_tool=data.get("try_instead_tool"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source}
        for name in (*_LISTS, "not_covered"):
            value = getattr(self, name)
            if value:
                out[name] = list(value)
        for name in ("period", "looked_for", "try_instead", "try_instead_tool"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class ResultReading:
    """What a tool's return value means to the run."""

    served: Any
    """The value the model reads: an envelope's content, record-only fields removed."""
    status: ToolResultStatus | None
    """The outcome: the envelope's declared status, ``absent`` for an absence, else None."""
    limits: tuple[Limits, ...] = ()
    effects: tuple[RequireInstruction, ...] = ()
    refusals: tuple[str, ...] = ()
    """Sentences for effects that were refused; the model reads them after the result."""
    warnings: tuple[str, ...] = field(default=())
    """For the tool's author: what was dropped from a hand-built shape, and why."""


def read_result(value: Any) -> ResultReading:
    """Read a tool's return value by af's one rule."""
    envelope = read_envelope(value)
    warnings: list[str] = []
    if envelope is not None:
        served, limits, status = _read_limits(envelope.content, warnings)
        return ResultReading(
            served=served,
            status=envelope.status or status,
            limits=limits,
            effects=envelope.effects,
            refusals=envelope.refusals,
            warnings=tuple(warnings),
        )
    served, limits, status = _read_limits(value, warnings)
    return ResultReading(served=served, status=status, limits=limits, warnings=tuple(warnings))


def _read_limits(
    value: Any, warnings: list[str]
) -> tuple[Any, tuple[Limits, ...], ToolResultStatus | None]:
    if isinstance(value, DescribedResult):
        declared = value.declared or {}
        lists = {k: tuple(v) for k, v in declared.items()}
        return dict(value), (_limits("described", lists),), None
    if not isinstance(value, Mapping):
        return value, (), None
    if _is_absence(value):
        served = dict(value)
        lists = _strip_lists(served, warnings)
        period = value.get(PERIOD_WIRE["key"])
        tool = value.get("try_instead_tool")
        limits = _limits(
            "absent",
            lists,
            period=dict(period) if isinstance(period, Mapping) else None,
            looked_for=str(value.get("looked_for", "")),
            try_instead=value.get("try_instead")
            if isinstance(value.get("try_instead"), str)
            else None,
            try_instead_tool=dict(tool) if isinstance(tool, Mapping) else None,
        )
        return served, (limits,), "absent"
    if _is_ledger(value):
        ledger = dict(value[COVERAGE_MARKER])
        lists = _strip_lists(ledger, warnings)
        period = ledger.get(PERIOD_WIRE["key"])
        limits = _limits(
            "coverage", lists, period=dict(period) if isinstance(period, Mapping) else None
        )
        return {COVERAGE_MARKER: ledger, "result": value["result"]}, (limits,), None
    if _is_described(value):
        period = value.get(PERIOD_WIRE["key"])
        limits = Limits(
            "described",
            not_covered=tuple(str(x) for x in value.get("not_covered", ())),
            period=dict(period) if isinstance(period, Mapping) else None,
        )
        return value, (limits,), None
    return value, (), None


def _limits(
    source: Literal["absent", "coverage", "described"],
    lists: Mapping[str, tuple[dict[str, Any], ...]],
    **rest: Any,
) -> Limits:
    return Limits(
        source,
        checked=lists.get("checked", ()),
        not_checked=lists.get("not_checked", ()),
        cannot_cover=lists.get("cannot_cover", ()),
        in_progress=lists.get("in_progress", ()),
        **rest,
    )


def _items(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(x, Mapping) and isinstance(x.get("what"), str) for x in value)
    )


def _is_absence(value: Mapping[str, Any]) -> bool:
    # An af_absent whose `checked` is empty names no ground: ordinary data.
    return value.get(ABSENCE_MARKER) is True and _items(value.get("checked"))


def _is_ledger(value: Mapping[str, Any]) -> bool:
    ledger = value.get(COVERAGE_MARKER)
    return (
        set(value) == {COVERAGE_MARKER, "result"}
        and isinstance(ledger, Mapping)
        and any(_items(ledger.get(name)) for name in _LISTS)
        and all(name not in ledger or _items(ledger[name]) for name in _LISTS)
    )


def _is_described(value: Mapping[str, Any]) -> bool:
    facts = value.get("facts")
    return value.get("note") == SEMANTICS_NOTE and isinstance(facts, list) and bool(facts)


def _strip_lists(
    shape: dict[str, Any], warnings: list[str]
) -> dict[str, tuple[dict[str, Any], ...]]:
    """Take the record-only fields out of ``shape``'s lists (in place); return the lists as
    the record keeps them (with the valid record-only fields)."""
    kept: dict[str, tuple[dict[str, Any], ...]] = {}
    for name in _LISTS:
        items = shape.get(name)
        if not isinstance(items, list):
            continue
        record, served = [], []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            entry = dict(item)
            for key in _RECORD_ONLY:
                if key in entry and not _valid(key, entry, name):
                    warnings.append(
                        f"`{name}[{i}].{key}` was dropped: {_why_invalid(key, entry, name)}"
                    )
                    del entry[key]
            record.append(entry)
            served.append({k: v for k, v in item.items() if k not in _RECORD_ONLY})
        shape[name] = served
        kept[name] = tuple(record)
    return kept


def _valid(key: str, entry: Mapping[str, Any], list_name: str) -> bool:
    return _why_invalid(key, entry, list_name) is None


def _why_invalid(key: str, entry: Mapping[str, Any], list_name: str) -> str | None:
    if key == "kind":
        if list_name not in ("not_checked", "cannot_cover"):
            return "`kind` belongs on not-checked and cannot-cover items only."
        if entry["kind"] not in _KINDS:
            return f"`kind` is {entry['kind']!r}, not one of {', '.join(_KINDS)}."
        return None
    try:
        _check_short(entry["short"], str(entry.get("what", "")), "short")
    except RefusedError as e:
        return e.reason
    return None


# -- the answer's limits ----------------------------------------------------------------------


def limits_block(
    declared: Iterable[tuple[str, Limits]],
    assumed: Sequence[tuple[str, str, Any]] = (),
) -> str | None:
    """The block appended after an answer: the coverage every tool declared during the run
    (``(tool name, limits)`` in the order declared), duplicates said once, then the
    periods and the assumed arguments (``(tool, argument, value)``). None when nothing was
    declared."""
    import orjson

    sections: dict[str, list[str]] = {name: [] for name in (*_LISTS, "period")}
    for tool, limits in declared:
        for name in _LISTS:
            for item in getattr(limits, name):
                sections[name].append(_line(item))
        for line in limits.not_covered:
            sections["not_checked"].append(line)
        if limits.period is not None:
            sections["period"].append(_period_line(tool, limits.period))
    labels = {
        "checked": HEADINGS["CHECKED_SECTION_LABEL"],
        "not_checked": HEADINGS["NOT_CHECKED_SECTION_LABEL"],
        "cannot_cover": HEADINGS["CANNOT_COVER_SECTION_LABEL"],
        "in_progress": HEADINGS["IN_PROGRESS_SECTION_LABEL"],
        "period": HEADINGS["PERIOD_SECTION_LABEL"],
    }
    parts = []
    for name, lines in sections.items():
        unique = list(dict.fromkeys(lines))
        if unique:
            parts.append("\n".join([labels[name], *(f"- {x}" for x in unique)]))
    if assumed:
        lines = [
            f"- {tool}: {argument} = {orjson.dumps(value).decode()}"
            for tool, argument, value in assumed
        ]
        parts.append("\n".join([HEADINGS["ASSUMED_SECTION_LABEL"], *dict.fromkeys(lines)]))
    if not parts:
        return None
    return "\n\n".join([COVERAGE_BLOCK_HEADING, *parts])


@dataclass(frozen=True)
class AnswerCoverage:
    """The limits the tools of a run declared, as data: what a typed answer comes back
    with instead of a block after it. Each list says an entry once."""

    checked: tuple[dict[str, Any], ...] = ()
    not_checked: tuple[dict[str, Any], ...] = ()
    cannot_cover: tuple[dict[str, Any], ...] = ()
    in_progress: tuple[dict[str, Any], ...] = ()
    periods: tuple[dict[str, Any], ...] = ()
    """``{"tool", "call_id", "period"}`` per call that declared the period its read covered."""
    assumed: tuple[dict[str, Any], ...] = ()
    """``{"tool", "argument", "value"}`` per value a tool's rule filled."""

    def to_json(self) -> dict[str, Any]:
        return {name: list(getattr(self, name)) for name in _COVERAGE_FIELDS if getattr(self, name)}


_COVERAGE_FIELDS = (*_LISTS, "periods", "assumed")


def answer_coverage(
    declared: Iterable[tuple[str, str, Limits]],
    assumed: Iterable[tuple[str, str, Any]] = (),
) -> AnswerCoverage | None:
    """The run's declarations (``(tool, call id, limits)``) and assumed values (``(tool,
    argument, value)``) as one :class:`AnswerCoverage`; None when there is none."""
    import orjson

    lists: dict[str, dict[bytes, dict[str, Any]]] = {n: {} for n in _COVERAGE_FIELDS}

    def add(name: str, item: dict[str, Any]) -> None:
        key = orjson.dumps(
            {k: v for k, v in item.items() if k not in _RECORD_ONLY}, option=orjson.OPT_SORT_KEYS
        )
        lists[name].setdefault(key, item)

    for tool, call_id, limits in declared:
        for name in _LISTS:
            for item in getattr(limits, name):
                add(name, {k: v for k, v in item.items() if k not in _RECORD_ONLY})
        for line in limits.not_covered:
            add("not_checked", {"what": line})
        if limits.period is not None:
            add("periods", {"tool": tool, "call_id": call_id, "period": limits.period})
    for tool, argument, value in assumed:
        add("assumed", {"tool": tool, "argument": argument, "value": value})
    if not any(lists.values()):
        return None
    return AnswerCoverage(**{n: tuple(v.values()) for n, v in lists.items()})


def with_limits(answer: str, block: str | None) -> str:
    """The answer with its limits block after it (the answer alone when there is none)."""
    return answer if block is None else f"{answer}{TEMPLATES['LIMITS_BLOCK_SEPARATOR']}{block}"


def _line(item: Mapping[str, Any]) -> str:
    text = str(item["what"])
    if item.get("count"):
        text = f"{text} ({item['count']})"
    why = item.get("why")
    return f"{text}{NOT_COVERED_SEPARATOR}{why}" if why else text


def _period_line(tool: str, period: Mapping[str, Any]) -> str:
    w = PERIOD_WIRE
    queried = period.get(w["queried"]) or {}
    held = period.get(w["held"])
    text = f"{tool} queried {queried.get(w['from'])} to {queried.get(w['to'])}"
    if isinstance(held, Mapping):
        text += f"; the store holds {held.get(w['from'])} to {held.get(w['to'])}"
    else:
        text += "; what the store holds is unknown"
    if period.get(w["readAt"]):
        text += f"; read at {period[w['readAt']]}"
    return text
