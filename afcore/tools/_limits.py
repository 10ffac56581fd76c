"""Tool results that carry their limits: ``absent()``, ``coverage()``, ``described_result()``.

Each returns the reserved shape a model reads (``af_absent``, ``af_coverage``, or
``facts`` / ``provenance`` / ``not_covered``) with its note, as plain JSON data. A declaration
that says nothing, or says it wrong, is refused with :class:`RefusedError` where it is
written; raised inside a tool, the refusal is the error result the model reads.

The rule: rows from a system of record -> ``described_result()``; any other value that has
limits -> ``coverage()``; nothing matched -> ``absent()``. Never wrap one in another.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeAlias, TypedDict

from afcore.errors import RefusedError
from afcore.tools._notes import (
    ABSENCE_MARKER,
    ABSENCE_NOTE,
    COVERAGE_MARKER,
    COVERAGE_NOTE,
    IN_PROGRESS_CLAUSE,
    PERIOD_WIRE,
    SEMANTICS_NOTE,
    WIRE,
)

__all__ = [
    "CoverageInput",
    "CoverageItem",
    "DescribedResult",
    "InProgressInput",
    "InProgressItem",
    "PeriodDeclaration",
    "Provenance",
    "TryInsteadTool",
    "absent",
    "coverage",
    "described_result",
]

SHORT_MAX_CHARS: int = WIRE["ITEM_WIRE"]["shortMaxChars"]
ITEM_KINDS: tuple[str, ...] = tuple(WIRE["ITEM_WIRE"]["kinds"])
NOT_COVERED_SEPARATOR: str = WIRE["SEMANTICS_WIRE"]["notCoveredSeparator"]
NOTHING_FOUND: str = WIRE["ABSENCE_WIRE"]["nothingFound"]
HELD_UNKNOWN: str = PERIOD_WIRE["heldUnknown"]


class CoverageItem(TypedDict, total=False):
    """One piece of ground. ``what`` is for the model; ``short`` (one plain line, at most 80
    characters) and ``kind`` (``existence`` or ``scope``, on not-checked and cannot-cover
    items) are for a person reading the record, never for the model."""

    what: str
    why: str
    short: str
    kind: Literal["existence", "scope"]


class InProgressItem(TypedDict, total=False):
    """Something the read found still running; ``count`` says how many things it stands for."""

    what: str
    why: str
    short: str
    count: int


class TryInsteadTool(TypedDict, total=False):
    """The tool a ``try_instead`` suggestion points at, named as data."""

    tool: str
    why: str


class Provenance(TypedDict, total=False):
    """Where rows came from and when they were measured (an ISO 8601 instant with a zone)."""

    measured_at: str | datetime
    source: str
    age_seconds: float


class PeriodDeclaration(TypedDict, total=False):
    """The time a read covered: ``queried`` (what it asked for, ``{"from", "to"}``), ``held``
    (what the store holds, or ``"unknown"``), ``read_at`` (when the read ran). Every
    instant is ISO 8601 with a zone."""

    queried: Mapping[str, str | datetime]
    held: Mapping[str, str | datetime] | str
    read_at: str | datetime


CoverageInput: TypeAlias = str | CoverageItem | Mapping[str, Any]
InProgressInput: TypeAlias = str | InProgressItem | Mapping[str, Any]


class DescribedResult(dict[str, Any]):
    """What :func:`described_result` returns: the model's wire shape as a dict, holding the
    declared coverage (``checked`` included, which the wire does not show) as
    ``.declared`` for the record."""

    declared: dict[str, Any] | None

    def __init__(self, wire: dict[str, Any], declared: dict[str, Any] | None) -> None:
        super().__init__(wire)
        self.declared = declared


# -- the three helpers ---------------------------------------------------------------------


def absent(
    *,
    what: str,
    checked: Sequence[CoverageInput],
    not_checked: Sequence[CoverageInput] = (),
    cannot_cover: Sequence[CoverageInput] = (),
    try_instead: str | None = None,
    try_instead_tool: TryInsteadTool | Mapping[str, Any] | None = None,
    provenance: Provenance | Mapping[str, Any] | None = None,
    period: PeriodDeclaration | Mapping[str, Any] | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """Nothing matched: "I looked, and there is nothing", as an answer, not an error.

    ``what`` is what was looked for; ``checked`` (never empty) the ground the search
    covered; ``not_checked`` ground this call did not look at; ``cannot_cover`` ground the
    tool can never see (each entry with a ``why``). ``try_instead`` is one sentence for the
    model, ``try_instead_tool`` the tool it points at (``{"tool", "why"}``).
    """
    _refuse_unknown(unknown, "absent()", _ABSENT_KEYS)
    if not isinstance(what, str) or not what.strip():
        raise RefusedError(
            "`what` must say what was looked for, as a non-empty string.", field="what"
        )
    out: dict[str, Any] = {
        ABSENCE_MARKER: True,
        "outcome": NOTHING_FOUND,
        "looked_for": what,
    }
    lists = _lists(checked=checked, not_checked=not_checked, cannot_cover=cannot_cover)
    if not lists.get("checked"):
        raise RefusedError(
            "`checked` is empty — an absence must name the ground it searched, or it cannot "
            "be told from a search that never ran.",
            field="checked",
        )
    out.update(lists)
    if try_instead is not None:
        if not isinstance(try_instead, str) or not try_instead.strip():
            raise RefusedError(
                "`try_instead` is one sentence for the model: a non-empty string, or leave it out.",
                field="try_instead",
            )
        out["try_instead"] = try_instead
    if try_instead_tool is not None:
        out["try_instead_tool"] = _try_instead_tool(try_instead_tool)
    if provenance is not None:
        out["provenance"] = _provenance(provenance)
    if period is not None:
        out[PERIOD_WIRE["key"]] = _period(period)
    out["retry_returns_the_same"] = True
    out["note"] = ABSENCE_NOTE
    return out


def coverage(
    value: Any,
    *,
    checked: Sequence[CoverageInput] = (),
    not_checked: Sequence[CoverageInput] = (),
    cannot_cover: Sequence[CoverageInput] = (),
    in_progress: Sequence[InProgressInput] | None = None,
    period: PeriodDeclaration | Mapping[str, Any] | None = None,
    **unknown: Any,
) -> dict[str, Any]:
    """A value with limits: ``value`` untouched under ``result``, its boundary first.

    ``checked`` is what the value covers, ``not_checked`` what this call did not look at,
    ``cannot_cover`` what the tool can never see (each with a ``why``), ``in_progress``
    what the read found still running (needs ``checked`` beside it). At least one list
    must say something.
    """
    _refuse_unknown(unknown, "coverage()", _COVERAGE_KEYS)
    _refuse_wrapped(value)
    lists = _lists(
        checked=checked,
        not_checked=not_checked,
        cannot_cover=cannot_cover,
        in_progress=in_progress or (),
    )
    if not lists:
        raise RefusedError(
            "this coverage declares nothing: `checked`, `not_checked`, `cannot_cover` and "
            "`in_progress` are all empty — name the ground the value covers or does not, or "
            "return the value without coverage().",
            field="checked",
        )
    if in_progress is not None and not lists.get("checked"):
        raise RefusedError(
            "`in_progress` needs `checked` beside it: an item still running is part of what "
            "the read looked at, so say what that was.",
            field="checked",
        )
    ledger: dict[str, Any] = dict(lists)
    if period is not None:
        ledger[PERIOD_WIRE["key"]] = _period(period)
    ledger["note"] = (
        f"{COVERAGE_NOTE} {IN_PROGRESS_CLAUSE}" if lists.get("in_progress") else COVERAGE_NOTE
    )
    return {COVERAGE_MARKER: ledger, "result": value}


def described_result(
    *,
    facts: Sequence[Mapping[str, Any]],
    provenance: Provenance | Mapping[str, Any],
    coverage: Mapping[str, Any] | None = None,
    grain: Mapping[str, Any] | None = None,
    period: PeriodDeclaration | Mapping[str, Any] | None = None,
    **unknown: Any,
) -> DescribedResult:
    """Rows from a system of record, with where and when they were read.

    ``facts`` are the rows (never empty: nothing matched is :func:`absent`);
    ``provenance`` is ``{"measured_at", "source"}``; ``coverage`` the ground, as for
    :func:`coverage` (``checked``, ``not_checked``, ``cannot_cover``); ``grain`` what one
    row stands for (``is_counter``: sum a series only when it is not a counter).
    """
    _refuse_unknown(unknown, "described_result()", _DESCRIBED_KEYS)
    if isinstance(facts, str | bytes | Mapping) or not isinstance(facts, Sequence):
        raise RefusedError("`facts` must be a list of rows (objects), one per fact.", field="facts")
    if len(facts) == 0:
        raise RefusedError(
            "`facts` is empty — if nothing matched, return absent(what=..., checked=[...]) "
            "instead.",
            field="facts",
        )
    rows = []
    for i, row in enumerate(facts):
        if not isinstance(row, Mapping):
            raise RefusedError(
                f"fact {i} is a {type(row).__name__}; each fact is a row (an object).",
                field=f"facts[{i}]",
            )
        rows.append(dict(row))
    out: dict[str, Any] = {"facts": rows}
    if grain is not None:
        out["grain"] = _grain(grain)
    out["provenance"] = _provenance(provenance)
    if period is not None:
        out[PERIOD_WIRE["key"]] = _period(period)
    declared: dict[str, Any] | None = None
    if coverage is not None:
        if not isinstance(coverage, Mapping):
            raise RefusedError(
                "`coverage` is the ground these rows stand on: a mapping with `checked`, "
                "`not_checked` and/or `cannot_cover`.",
                field="coverage",
            )
        extra = {k: v for k, v in coverage.items() if k not in _GROUND_KEYS}
        _refuse_unknown(extra, "described_result(coverage=...)", _GROUND_KEYS, prefix="coverage.")
        declared = _lists(
            checked=coverage.get("checked", ()),
            not_checked=coverage.get("not_checked", ()),
            cannot_cover=coverage.get("cannot_cover", ()),
            prefix="coverage.",
        )
        if not declared:
            raise RefusedError(
                "`coverage` declares nothing: `checked`, `not_checked` and `cannot_cover` "
                "are all empty — name the ground, or leave `coverage` out.",
                field="coverage",
            )
        not_covered = [
            _not_covered_line(item)
            for name in ("not_checked", "cannot_cover")
            for item in declared.get(name, ())
        ]
        if not_covered:
            out["not_covered"] = not_covered
    out["note"] = SEMANTICS_NOTE
    return DescribedResult(out, declared)


# -- the pieces ------------------------------------------------------------------------------

_GROUND_KEYS = ("checked", "not_checked", "cannot_cover")
_ABSENT_KEYS = (
    "what",
    *_GROUND_KEYS,
    "try_instead",
    "try_instead_tool",
    "provenance",
    "period",
)
_COVERAGE_KEYS = (*_GROUND_KEYS, "in_progress", "period")
_DESCRIBED_KEYS = ("facts", "provenance", "coverage", "grain", "period")
_ITEM_KEYS: dict[str, tuple[str, ...]] = {
    "checked": ("what", "why", "short"),
    "not_checked": ("what", "why", "short", "kind"),
    "cannot_cover": ("what", "why", "short", "kind"),
    "in_progress": ("what", "why", "short", "count"),
}
_WHY_MEANT = {
    "in_progress": "absent() does not take `in_progress`: an absence promises that a retry "
    "returns the same result, and an item still running promises the opposite; "
    "return coverage(value, checked=..., in_progress=...) instead.",
}


def _lists(prefix: str = "", **given: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """The non-empty lists, normalized, in wire order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, entries in given.items():
        if entries is None:
            continue
        where = f"{prefix}{name}"
        if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Sequence):
            raise RefusedError(
                f"`{where}` must be a list of entries (strings or {{what, why}} objects), "
                f"got {type(entries).__name__}.",
                field=where,
            )
        items = [_item(name, entry, f"{where}[{i}]") for i, entry in enumerate(entries)]
        if items:
            out[name] = items
    return out


def _item(list_name: str, entry: Any, where: str) -> dict[str, Any]:
    if isinstance(entry, str):
        entry = {"what": entry}
    if not isinstance(entry, Mapping):
        raise RefusedError(
            f"`{where}` is a {type(entry).__name__}; an entry is a string or an object with "
            "`what`.",
            field=where,
        )
    known = _ITEM_KEYS[list_name]
    extra = {k: v for k, v in entry.items() if k not in known}
    _refuse_unknown(extra, f"a `{list_name}` entry", known, prefix=f"{where}.")
    what = entry.get("what")
    if not isinstance(what, str) or not what.strip():
        raise RefusedError(
            "each entry needs `what`: a non-empty string naming the ground.", field=f"{where}.what"
        )
    why = entry.get("why")
    if why is not None and (not isinstance(why, str) or not why.strip()):
        raise RefusedError(
            "`why` must be a non-empty string; leave it out rather than leave it empty.",
            field=f"{where}.why",
        )
    if list_name == "cannot_cover" and why is None:
        raise RefusedError(
            f"`cannot_cover` entry {what!r} has no `why` — a blind spot the tool can never see "
            "is a claim about what it is able to do, and a reader can act on it, escalate it "
            "or disprove it only with the reason.",
            field=f"{where}.why",
        )
    out: dict[str, Any] = {"what": what}
    short = entry.get("short")
    if short is not None:
        _check_short(short, what, f"{where}.short")
        out["short"] = short
    kind = entry.get("kind")
    if kind is not None:
        if kind not in ITEM_KINDS:
            raise RefusedError(
                f"`kind` is {kind!r}; it is 'existence' (whether the thing asked about exists "
                "at all) or 'scope' (a population or source outside what the tool reaches).",
                field=f"{where}.kind",
            )
        out["kind"] = kind
    count = entry.get("count")
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise RefusedError(
                f"`count` is {count!r}; it is how many things the entry stands for, a whole "
                "number from 1.",
                field=f"{where}.count",
            )
        out["count"] = count
    if why is not None:
        out["why"] = why
    return out


def _check_short(short: Any, what: str, where: str) -> None:
    if not isinstance(short, str) or not short.strip():
        raise RefusedError("`short` must be a non-empty string, or leave it out.", field=where)
    for ch in short:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Zl", "Zp"):
            raise RefusedError(
                f"`short` must be one line of plain visible text; it holds U+{ord(ch):04X} "
                f"({unicodedata.name(ch, 'a control character').lower()}).",
                field=where,
            )
    if len(short) > SHORT_MAX_CHARS:
        raise RefusedError(
            f"`short` is {len(short)} characters, over the {SHORT_MAX_CHARS} it may have.",
            field=where,
        )
    if len(short) > len(what):
        raise RefusedError(
            "`short` is longer than `what`; it is the short form of `what`.", field=where
        )


def _not_covered_line(item: Mapping[str, Any]) -> str:
    why = item.get("why")
    return f"{item['what']}{NOT_COVERED_SEPARATOR}{why}" if why else str(item["what"])


def _try_instead_tool(value: Any) -> dict[str, str]:
    where = "try_instead_tool"
    if not isinstance(value, Mapping):
        raise RefusedError(
            f"`try_instead_tool` names one tool as {{tool, why}}; a {type(value).__name__} is "
            "not taken.",
            field=where,
        )
    extra = {k: v for k, v in value.items() if k not in ("tool", "why")}
    _refuse_unknown(extra, "`try_instead_tool`", ("tool", "why"), prefix=f"{where}.")
    tool = value.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise RefusedError(
            "`tool` must name the tool, as a non-empty string.", field=f"{where}.tool"
        )
    out = {"tool": tool}
    why = value.get("why")
    if why is not None:
        if not isinstance(why, str) or not why.strip():
            raise RefusedError(
                "`why` must be a non-empty string; leave it out rather than leave it empty.",
                field=f"{where}.why",
            )
        out["why"] = why
    return out


def _provenance(value: Any) -> dict[str, Any]:
    where = "provenance"
    if not isinstance(value, Mapping):
        raise RefusedError(
            "`provenance` is {measured_at, source}: when the data was measured and where it "
            "came from.",
            field=where,
        )
    known = ("measured_at", "source", "age_seconds")
    extra = {k: v for k, v in value.items() if k not in known}
    _refuse_unknown(extra, "`provenance`", known, prefix=f"{where}.")
    if "measured_at" not in value:
        raise RefusedError(
            "`provenance` needs `measured_at`: the instant the data was measured.",
            field=f"{where}.measured_at",
        )
    source = value.get("source")
    if not isinstance(source, str) or not source.strip():
        raise RefusedError(
            "`provenance` needs `source`: a non-empty string naming where the data came from.",
            field=f"{where}.source",
        )
    out: dict[str, Any] = {
        "measured_at": _instant(value["measured_at"], f"{where}.measured_at"),
        "source": source,
    }
    age = value.get("age_seconds")
    if age is not None:
        if (
            isinstance(age, bool)
            or not isinstance(age, int | float)
            or not math.isfinite(age)
            or age < 0
        ):
            raise RefusedError(
                f"`age_seconds` is {age!r}; it is a number of seconds, 0 or more.",
                field=f"{where}.age_seconds",
            )
        out["age_seconds"] = age
    return out


def _grain(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise RefusedError(
            "`grain` says what one row stands for: an object with string keys.", field="grain"
        )
    counter = value.get("is_counter")
    if counter is not None and not isinstance(counter, bool):
        raise RefusedError(
            f"`is_counter` is {counter!r}; it is true or false.", field="grain.is_counter"
        )
    return dict(value)


def _period(value: Any) -> dict[str, Any]:
    """A declared period, as the model reads it: ``queried``, ``held``, ``read_at``."""
    key = PERIOD_WIRE["key"]
    if not isinstance(value, Mapping):
        raise RefusedError(
            "`period` is {queried: {from, to}, held: {from, to} or 'unknown', read_at?}.",
            field=key,
        )
    queried_key, held_key, read_key = (
        PERIOD_WIRE["queried"],
        PERIOD_WIRE["held"],
        PERIOD_WIRE["readAt"],
    )
    known = (queried_key, held_key, read_key)
    extra = {k: v for k, v in value.items() if k not in known}
    _refuse_unknown(extra, "`period`", known, prefix=f"{key}.")
    if queried_key not in value:
        raise RefusedError(
            "`period` needs `queried`: the instants this read asked for, {from, to}.",
            field=f"{key}.{queried_key}",
        )
    out: dict[str, Any] = {queried_key: _span(value[queried_key], f"{key}.{queried_key}")}
    held = value.get(held_key, HELD_UNKNOWN)
    out[held_key] = HELD_UNKNOWN if held == HELD_UNKNOWN else _span(held, f"{key}.{held_key}")
    if value.get(read_key) is not None:
        out[read_key] = _instant(value[read_key], f"{key}.{read_key}")
    return out


def _span(value: Any, where: str) -> dict[str, str]:
    start_key, end_key = PERIOD_WIRE["from"], PERIOD_WIRE["to"]
    if not isinstance(value, Mapping):
        raise RefusedError(
            f"`{where}` is {{from, to}}: two ISO 8601 instants with a zone.", field=where
        )
    extra = {k: v for k, v in value.items() if k not in (start_key, end_key)}
    _refuse_unknown(extra, f"`{where}`", (start_key, end_key), prefix=f"{where}.")
    for k in (start_key, end_key):
        if k not in value:
            raise RefusedError(f"`{where}` needs `{k}`.", field=f"{where}.{k}")
    start = _instant(value[start_key], f"{where}.{start_key}")
    end = _instant(value[end_key], f"{where}.{end_key}")
    if _parse(end) < _parse(start):
        raise RefusedError(f"`{where}` ends ({end}) before it starts ({start}).", field=where)
    return {start_key: start, end_key: end}


def _instant(value: Any, where: str) -> str:
    """An ISO 8601 instant with a zone, kept as the tool spelled it."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise RefusedError(
                f"`{where}` is a datetime with no zone — af compares instants and will not "
                "guess one; give it a tzinfo.",
                field=where,
            )
        return value.isoformat()
    if not isinstance(value, str):
        raise RefusedError(
            f"`{where}` must be an ISO 8601 instant with a zone, got {type(value).__name__}.",
            field=where,
        )
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise RefusedError(
            f"`{where}` is {value[:40]!r}, not an ISO 8601 instant "
            "(2026-09-26T09:00:00Z, 2026-09-26T11:00:00+02:00).",
            field=where,
        ) from None
    if parsed.tzinfo is None:
        raise RefusedError(
            f"`{where}` is {value!r}, which has no zone — af compares instants and will not "
            "guess one; write it with Z or an offset (2026-09-26T09:00:00Z).",
            field=where,
        )
    return value


def _parse(instant: str) -> datetime:
    return datetime.fromisoformat(instant)


def _refuse_wrapped(value: Any) -> None:
    if not isinstance(value, Mapping):
        return
    shape = None
    if value.get(ABSENCE_MARKER) is True:
        shape = "an absent() result"
    elif COVERAGE_MARKER in value:
        shape = "a coverage() result"
    elif value.get("note") == SEMANTICS_NOTE:
        shape = "a described_result()"
    if shape:
        raise RefusedError(
            f"the value is already {shape} — never wrap one in another; each carries its own "
            "limits (described_result() takes coverage=...).",
            field="value",
        )


def _refuse_unknown(
    extra: Mapping[str, Any], where: str, known: Sequence[str], prefix: str = ""
) -> None:
    """Refuse a key the declaration does not read rather than drop it, naming the one meant."""
    for key in extra:
        meant = _meant(str(key), known)
        if key == "in_progress" and where == "absent()":
            hint = _WHY_MEANT["in_progress"]
        elif meant:
            hint = f"did you mean `{meant}`?"
        else:
            hint = "it reads " + ", ".join(f"`{k}`" for k in known) + "."
        raise RefusedError(f"`{key}` is not a key {where} reads — {hint}", field=f"{prefix}{key}")


def _meant(key: str, known: Sequence[str]) -> str | None:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).replace("-", "_").lower()
    if snake in known:
        return snake
    close = difflib.get_close_matches(snake, known, n=1, cutoff=0.75)
    return close[0] if close else None
