"""Tool results that carry their limits: the exact wire shapes, every refusal, the notes
published as data, and the pure pieces the loop will call (reading, envelope, ceiling,
truncation, the repeated-call nudge, assumed arguments)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pytest

import afcore
from afcore import Agent, RefusedError, UsageError, define_tool, mock, recording
from afcore.messages import Request
from afcore.tools import (
    ABSENCE_MARKER,
    ABSENCE_NOTE,
    COVERAGE_BLOCK_HEADING,
    COVERAGE_MARKER,
    COVERAGE_NOTE,
    IN_PROGRESS_CLAUSE,
    IN_PROGRESS_SECTION_LABEL,
    NOTES_PATH,
    PERIOD_WIRE,
    REFUSAL_PREFIX,
    SEMANTICS_NOTE,
    TOOL_RESULT_STATUSES,
    DescribedResult,
    RepeatedCalls,
    ResultCeiling,
    absent,
    assumed_note,
    canonical_notes,
    ceiling_refusal,
    check_ask_or_assume,
    coverage,
    described_result,
    fill_assumed,
    limits_block,
    over_ceiling,
    read_envelope,
    read_result,
    served_schema,
    status_only_near_miss,
    truncate_result,
    with_limits,
    with_note,
)

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT.parent / "shared" / "seeds"

# The backup export the guide's vm_backups example reads.
EXPORTED_AT = "2026-08-19T10:12:00Z"
SOURCE = "Cohesity API export (4 clusters)"
RUNS = [
    {"vm": "vm-01", "day": "2026-08-18", "ok": 1},
    {"vm": "vm-01", "day": "2026-08-19", "ok": 1},
]
GROUND: dict[str, Any] = {
    "checked": [f"every backup job in the export of {EXPORTED_AT}"],
    "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
}


def vm_backups(args: dict[str, Any], ctx: Any = None) -> Any:
    """The guide's one execute that uses all three helpers."""
    vm = args["vm"]
    runs = [r for r in RUNS if r["vm"] == vm]
    if not runs:
        return absent(what=f"backup runs for {vm}", **GROUND)
    if args.get("summary") is True:
        ok = sum(1 for r in runs if r["ok"] == 1)
        return coverage(f"{vm}: {ok} of {len(runs)} backup runs succeeded", **GROUND)
    return described_result(
        facts=[{"entity": vm, "day": r["day"], "ok": r["ok"] == 1} for r in runs],
        provenance={"measured_at": EXPORTED_AT, "source": SOURCE},
        coverage=GROUND,
    )


def wire(value: Any) -> Any:
    """What the model reads: the value as one line of JSON, read back."""
    return json.loads(orjson.dumps(value))


# -- the three wire shapes, against the guide's captured examples ---------------------------


def test_described_result_is_the_guides_wire_shape_key_for_key() -> None:
    out = vm_backups({"vm": "vm-01"})
    expected = {
        "facts": [
            {"entity": "vm-01", "day": "2026-08-18", "ok": True},
            {"entity": "vm-01", "day": "2026-08-19", "ok": True},
        ],
        "provenance": {"measured_at": "2026-08-19T10:12:00Z", "source": SOURCE},
        "not_covered": ["PPDM — not collected on this install"],
        "note": SEMANTICS_NOTE,
    }
    assert wire(out) == expected
    assert list(wire(out)) == list(expected)
    # checked is not on the wire, but the record has it
    assert isinstance(out, DescribedResult)
    assert out.declared == {
        "checked": [{"what": f"every backup job in the export of {EXPORTED_AT}"}],
        "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
    }


def test_coverage_is_the_guides_wire_shape_key_for_key() -> None:
    out = vm_backups({"vm": "vm-01", "summary": True})
    expected = {
        COVERAGE_MARKER: {
            "checked": [{"what": "every backup job in the export of 2026-08-19T10:12:00Z"}],
            "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
            "note": COVERAGE_NOTE,
        },
        "result": "vm-01: 2 of 2 backup runs succeeded",
    }
    assert wire(out) == expected
    assert list(out) == ["af_coverage", "result"]
    assert list(out["af_coverage"]) == ["checked", "cannot_cover", "note"]


def test_absent_is_the_guides_wire_shape_key_for_key() -> None:
    out = vm_backups({"vm": "vm-99"})
    expected = {
        "af_absent": True,
        "outcome": "nothing_found",
        "looked_for": "backup runs for vm-99",
        "checked": [{"what": "every backup job in the export of 2026-08-19T10:12:00Z"}],
        "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
        "retry_returns_the_same": True,
        "note": ABSENCE_NOTE,
    }
    assert wire(out) == expected
    assert list(out) == list(expected)


def test_the_notes_are_the_sentences_the_guide_captured() -> None:
    if not SEEDS.is_dir():
        pytest.skip("../shared/seeds is not beside this checkout")
    guide = (SEEDS / "003_b66d4328dcbf9079.txt").read_text(encoding="utf-8")
    for note in (ABSENCE_NOTE, COVERAGE_NOTE, SEMANTICS_NOTE, COVERAGE_BLOCK_HEADING):
        assert note in guide, note[:60]
    assert f'"{ABSENCE_MARKER}": true' in guide and f'"{COVERAGE_MARKER}": {{' in guide


def test_absent_with_everything_it_takes() -> None:
    out = absent(
        what="FLOGI entries on fc1/7",
        checked=["sw-a: the live fcns database", "window: the last 24h"],
        not_checked=[
            {
                "what": "logins older than 24h",
                "why": "outside the window this tool keeps",
                "short": "logins older than 24h",
                "kind": "scope",
            }
        ],
        cannot_cover=[{"what": "the peer fabric", "why": "this collector is scoped to one fabric"}],
        try_instead="Ask for a wider window, or check the archived FLOGI history.",
        try_instead_tool={"tool": "flogi_history", "why": "it keeps the archived FLOGI history"},
        provenance={"measured_at": "2026-09-19T02:00:00Z", "source": "nightly fcns dump"},
        period={
            "queried": {"from": "2026-09-18T02:00:00Z", "to": "2026-09-19T02:00:00Z"},
            "read_at": "2026-09-19T02:05:00+00:00",
        },
    )
    assert list(out) == [
        "af_absent",
        "outcome",
        "looked_for",
        "checked",
        "not_checked",
        "cannot_cover",
        "try_instead",
        "try_instead_tool",
        "provenance",
        "period",
        "retry_returns_the_same",
        "note",
    ]
    assert out["checked"] == [
        {"what": "sw-a: the live fcns database"},
        {"what": "window: the last 24h"},
    ]
    assert out["not_checked"] == [
        {
            "what": "logins older than 24h",
            "short": "logins older than 24h",
            "kind": "scope",
            "why": "outside the window this tool keeps",
        }
    ]
    assert out["try_instead_tool"] == {
        "tool": "flogi_history",
        "why": "it keeps the archived FLOGI history",
    }
    assert out["period"] == {
        "queried": {"from": "2026-09-18T02:00:00Z", "to": "2026-09-19T02:00:00Z"},
        "held": "unknown",
        "read_at": "2026-09-19T02:05:00+00:00",
    }


def test_coverage_in_progress_adds_its_sentence_only_when_there_is_one() -> None:
    running: list[dict[str, Any]] = [
        {"what": "sessions still synchronizing", "count": 96, "short": "syncing"}
    ]
    out = coverage(
        {"failed": 0, "settled": 12},
        checked=["every replication session on array-7 (live query)"],
        in_progress=running,
    )
    ledger = out["af_coverage"]
    assert ledger["in_progress"] == [
        {"what": "sessions still synchronizing", "short": "syncing", "count": 96}
    ]
    assert ledger["note"] == f"{COVERAGE_NOTE} {IN_PROGRESS_CLAUSE}"
    quiet = coverage({"failed": 0}, checked=["x (live query)"], in_progress=[])
    assert "in_progress" not in quiet["af_coverage"]
    assert quiet["af_coverage"]["note"] == COVERAGE_NOTE
    assert quiet == coverage({"failed": 0}, checked=["x (live query)"])


def test_coverage_leaves_the_value_untouched_and_puts_the_period_inside() -> None:
    value = {"rows": [1, 2, 3], "nested": {"k": None}}
    out = coverage(
        value,
        checked=["a"],
        not_checked=[{"what": "NDM migration sessions", "why": "the API timed out — ask again"}],
        period={
            "queried": {"from": "2026-09-26T09:00:00Z", "to": "2026-09-26T10:00:00Z"},
            "held": {"from": "2026-08-27T02:00:00Z", "to": "2026-09-26T02:00:00Z"},
        },
    )
    assert out["result"] is value
    assert list(out["af_coverage"]) == ["checked", "not_checked", "period", "note"]
    assert out["af_coverage"]["period"]["held"] == {
        "from": "2026-08-27T02:00:00Z",
        "to": "2026-09-26T02:00:00Z",
    }


def test_described_result_with_grain_and_period_and_no_coverage() -> None:
    out = described_result(
        facts=[{"t": "2026-09-01T00:00:00Z", "bytes": 10}],
        provenance={
            "measured_at": datetime(2026, 9, 1, 0, 5, tzinfo=UTC),
            "source": "SNMP",
            "age_seconds": 300,
        },
        grain={"unit": "bytes", "is_counter": True},
        period={"queried": {"from": "2026-09-01T00:00:00Z", "to": "2026-09-01T00:05:00Z"}},
    )
    assert list(out) == ["facts", "grain", "provenance", "period", "note"]
    assert out["provenance"] == {
        "measured_at": "2026-09-01T00:05:00+00:00",
        "source": "SNMP",
        "age_seconds": 300,
    }
    assert out.declared is None


# -- refusals --------------------------------------------------------------------------------


def refused(call: Any) -> RefusedError:
    with pytest.raises(RefusedError) as caught:
        call()
    text = str(caught.value)
    assert text.startswith(REFUSAL_PREFIX), text
    assert f"(field: {caught.value.field})" in text
    return caught.value


def test_empty_facts_is_refused_naming_absent() -> None:
    e = refused(lambda: described_result(facts=[], provenance={"measured_at": "x", "source": "y"}))
    assert str(e) == (
        "refused: `facts` is empty — if nothing matched, return absent(what=..., "
        "checked=[...]) instead. (field: facts)"
    )


def test_a_coverage_that_declares_nothing_is_refused() -> None:
    e = refused(lambda: coverage("fine"))
    assert e.field == "checked" and "declares nothing" in e.reason
    refused(lambda: coverage("fine", checked=[], not_checked=[], cannot_cover=[], in_progress=[]))
    e = refused(
        lambda: described_result(
            facts=[{"a": 1}],
            provenance={"measured_at": EXPORTED_AT, "source": "s"},
            coverage={"checked": []},
        )
    )
    assert e.field == "coverage"


def test_an_absence_with_nothing_checked_is_refused() -> None:
    e = refused(lambda: absent(what="x", checked=[]))
    assert e.field == "checked"
    assert refused(lambda: absent(what=" ", checked=["a"])).field == "what"


@pytest.mark.parametrize(
    "call, field, meant",
    [
        (lambda: absent(what="x", checked=["a"], notChecked=["b"]), "notChecked", "not_checked"),
        (lambda: absent(what="x", checked=["a"], cannotCover=[]), "cannotCover", "cannot_cover"),
        (lambda: absent(what="x", checked=["a"], tryInstead="t"), "tryInstead", "try_instead"),
        (lambda: coverage(1, checked=["a"], inProgress=[]), "inProgress", "in_progress"),
        (lambda: coverage(1, checked=["a"], chekced=["b"]), "chekced", "checked"),
        (
            lambda: coverage(1, checked=[{"what": "a", "Why": "b"}]),
            "checked[0].Why",
            "why",
        ),
        (
            lambda: absent(what="x", checked=["a"], provenance={"measuredAt": 1, "source": "s"}),
            "provenance.measuredAt",
            "measured_at",
        ),
        (
            lambda: coverage(
                1, checked=["a"], period={"queried": {"from": "a", "to": "b"}, "readAt": "c"}
            ),
            "period.readAt",
            "read_at",
        ),
        (
            lambda: described_result(
                facts=[{"a": 1}],
                provenance={"measured_at": EXPORTED_AT, "source": "s"},
                coverage={"checked": ["a"], "notChecked": ["b"]},
            ),
            "coverage.notChecked",
            "not_checked",
        ),
        (
            lambda: absent(what="x", checked=["a"], try_instead_tool={"tool": "t", "reason": "r"}),
            "try_instead_tool.reason",
            None,
        ),
    ],
)
def test_an_unknown_key_is_refused_naming_the_spelling_meant(
    call: Any, field: str, meant: str | None
) -> None:
    e = refused(call)
    assert e.field == field
    if meant:
        assert f"did you mean `{meant}`?" in e.reason
    else:
        assert "it reads `tool`, `why`" in e.reason


def test_absent_does_not_take_in_progress_and_says_why() -> None:
    e = refused(lambda: absent(what="x", checked=["a"], in_progress=["b"]))
    assert "coverage(" in e.reason and "retry" in e.reason


def test_a_cannot_cover_entry_needs_a_why() -> None:
    e = refused(lambda: coverage(1, cannot_cover=["the peer fabric"]))
    assert e.field == "cannot_cover[0].why" and "'the peer fabric'" in e.reason
    assert refused(lambda: coverage(1, cannot_cover=[{"what": "x", "why": ""}])).field == (
        "cannot_cover[0].why"
    )
    # not_checked may go without one
    assert coverage(1, not_checked=["x"])["af_coverage"]["not_checked"] == [{"what": "x"}]


@pytest.mark.parametrize(
    "short, words",
    [
        ("two\nlines", "U+000A"),
        ("tab\there", "U+0009"),
        ("rtl\u202eoverride", "U+202E"),
        ("zero\u200bwidth", "U+200B"),
        ("line\u2028sep", "U+2028"),
        ("x" * 81, "81 characters, over the 80"),
        ("", "non-empty"),
        (5, "non-empty string"),
    ],
)
def test_short_is_one_plain_line_of_at_most_80_characters(short: Any, words: str) -> None:
    what = "y" * 200
    e = refused(lambda: coverage(1, checked=[{"what": what, "short": short}]))
    assert e.field == "checked[0].short" and words in e.reason


def test_short_is_checked_for_control_characters_before_its_length() -> None:
    e = refused(lambda: coverage(1, checked=[{"what": "y" * 200, "short": "\n" + "x" * 100}]))
    assert "U+000A" in e.reason


def test_short_may_not_be_longer_than_what_and_80_is_fine() -> None:
    assert (
        "longer than `what`"
        in refused(lambda: coverage(1, checked=[{"what": "abc", "short": "abcd"}])).reason
    )
    out = coverage(1, checked=[{"what": "y" * 90, "short": "x" * 80}])
    assert out["af_coverage"]["checked"][0]["short"] == "x" * 80


@pytest.mark.parametrize(
    "entry, list_name, field",
    [
        ({"what": "a", "kind": "existence"}, "checked", "checked[0].kind"),
        ({"what": "a", "kind": "other"}, "not_checked", "not_checked[0].kind"),
        ({"what": "a", "count": 0}, "in_progress", "in_progress[0].count"),
        ({"what": "a", "count": True}, "in_progress", "in_progress[0].count"),
        ({"what": "a", "count": 3}, "not_checked", "not_checked[0].count"),
        ({"why": "no what"}, "not_checked", "not_checked[0].what"),
        (7, "not_checked", "not_checked[0]"),
    ],
)
def test_item_fields_are_checked_where_they_are_written(
    entry: Any, list_name: str, field: str
) -> None:
    lists: dict[str, Any] = {"checked": ["a"], list_name: [entry]}
    assert refused(lambda: coverage(1, **lists)).field == field


def test_a_list_given_as_a_string_is_refused() -> None:
    assert refused(lambda: absent(what="x", checked="everything")).field == "checked"


def test_try_instead_tool_is_one_tool() -> None:
    assert (
        "a list is not taken"
        in refused(
            lambda: absent(what="x", checked=["a"], try_instead_tool=[{"tool": "t"}])  # type: ignore[arg-type]
        ).reason
    )
    assert refused(
        lambda: absent(what="x", checked=["a"], try_instead_tool={"tool": "t", "why": ""})
    ).field == ("try_instead_tool.why")
    assert refused(
        lambda: absent(what="x", checked=["a"], try_instead_tool={"why": "w"})
    ).field == ("try_instead_tool.tool")
    out = absent(what="x", checked=["a"], try_instead_tool={"tool": "flogi_history"})
    assert out["try_instead_tool"] == {"tool": "flogi_history"}


def test_never_wrap_one_helper_in_another() -> None:
    inner = absent(what="x", checked=["a"])
    assert refused(lambda: coverage(inner, checked=["b"])).field == "value"
    assert refused(lambda: coverage(coverage(1, checked=["a"]), checked=["b"])).field == "value"


# -- periods ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "instant",
    ["2026-09-26T09:00:00", "2026-09-26", "yesterday", "2026-09-26 09:00"],
)
def test_an_instant_without_a_zone_is_refused(instant: str) -> None:
    e = refused(
        lambda: absent(
            what="x",
            checked=["a"],
            period={"queried": {"from": instant, "to": "2026-09-26T10:00:00Z"}},
        )
    )
    assert e.field == "period.queried.from"


def test_a_naive_datetime_is_refused_and_an_aware_one_kept() -> None:
    e = refused(
        lambda: coverage(
            1,
            checked=["a"],
            period={"queried": {"from": datetime(2026, 9, 26), "to": datetime(2026, 9, 27)}},
        )
    )
    assert "no zone" in e.reason
    plus2 = timezone(timedelta(hours=2))
    out = coverage(
        1,
        checked=["a"],
        period={
            "queried": {
                "from": datetime(2026, 9, 26, 11, tzinfo=plus2),
                "to": "2026-09-26T10:00:00Z",
            }
        },
    )
    assert out["af_coverage"]["period"]["queried"]["from"] == "2026-09-26T11:00:00+02:00"


def test_a_period_that_ends_before_it_starts_is_refused() -> None:
    e = refused(
        lambda: coverage(
            1,
            checked=["a"],
            period={"queried": {"from": "2026-09-26T11:00:00+02:00", "to": "2026-09-26T08:59:59Z"}},
        )
    )
    assert "ends" in e.reason and e.field == "period.queried"
    # the same instant in two zones is not "before"
    coverage(
        1,
        checked=["a"],
        period={"queried": {"from": "2026-09-26T11:00:00+02:00", "to": "2026-09-26T09:00:00Z"}},
    )


def test_a_period_needs_queried_and_its_keys_come_from_the_published_wire() -> None:
    assert refused(lambda: coverage(1, checked=["a"], period={"held": "unknown"})).field == (
        "period.queried"
    )
    out = absent(
        what="x",
        checked=["a"],
        period={
            "queried": {"from": "2026-09-26T09:00:00Z", "to": "2026-09-26T10:00:00Z"},
            "held": {"from": "2026-08-27T02:00:00Z", "to": "2026-09-26T02:00:00Z"},
        },
    )
    period = out[PERIOD_WIRE["key"]]
    assert set(period) == {PERIOD_WIRE["queried"], PERIOD_WIRE["held"]}
    assert set(period["queried"]) == {PERIOD_WIRE["from"], PERIOD_WIRE["to"]}


# -- a refusal inside a tool is the error result the model reads -----------------------------


def test_a_refusal_raised_inside_a_tool_is_its_error_result_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return {"tool_calls": [{"id": "c1", "name": "backups", "args": {"vm": "vm-01"}}]}
        seen.append(request.messages[-1])
        return "No rows."

    def execute(args: dict[str, Any], ctx: Any) -> Any:
        return described_result(facts=[], provenance={"measured_at": EXPORTED_AT, "source": "s"})

    schema = {"type": "object", "properties": {"vm": {"type": "string"}}}
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(define_tool("backups", "Backup runs.", schema, execute))
        .build()
    )
    assert agent.run("any backups?") == "No rows."
    result = seen[0]
    assert result.is_error
    assert result.content == (
        "refused: `facts` is empty — if nothing matched, return absent(what=..., "
        "checked=[...]) instead. (field: facts)"
    )
    assert agent.last_recording is not None
    assert recording.verify(recording.open_recording(agent.last_recording)).ok


def test_what_the_helpers_return_reaches_the_model_as_their_wire_shape(tmp_path: Path) -> None:
    seen: list[str] = []
    calls = iter([{"vm": "vm-01"}, {"vm": "vm-01", "summary": True}, {"vm": "vm-99"}])

    def respond(request: Request) -> Any:
        if len(request.messages) > 1:
            seen.append(request.messages[-1].content)
        if len(seen) < 3:
            return {
                "tool_calls": [{"id": f"c{len(seen)}", "name": "vm_backups", "args": next(calls)}]
            }
        return "done"

    schema = {
        "type": "object",
        "properties": {"vm": {"type": "string"}, "summary": {"type": "boolean"}},
        "required": ["vm"],
    }
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(define_tool("vm_backups", "Backup runs for one VM.", schema, vm_backups))
        .build()
    )
    agent.run("backups?")
    assert [json.loads(s) for s in seen] == [
        wire(vm_backups({"vm": "vm-01"})),
        wire(vm_backups({"vm": "vm-01", "summary": True})),
        wire(vm_backups({"vm": "vm-99"})),
    ]
    assert "\n" not in seen[0]  # one line, as the guide says the model reads it


# -- the notes file --------------------------------------------------------------------------


def test_every_constant_is_read_from_the_one_json_file() -> None:
    data = json.loads(NOTES_PATH.read_text(encoding="utf-8"))
    assert set(data) == {"about", "notes", "markers", "headings", "wire", "templates"}
    assert data["notes"]["ABSENCE_NOTE"] == ABSENCE_NOTE
    assert data["notes"]["COVERAGE_NOTE"] == COVERAGE_NOTE
    assert data["notes"]["SEMANTICS_NOTE"] == SEMANTICS_NOTE
    assert data["notes"]["IN_PROGRESS_CLAUSE"] == IN_PROGRESS_CLAUSE
    assert data["markers"] == {
        "ABSENCE_MARKER": ABSENCE_MARKER,
        "COVERAGE_MARKER": COVERAGE_MARKER,
        "REFUSAL_PREFIX": REFUSAL_PREFIX,
    }
    assert data["headings"]["COVERAGE_BLOCK_HEADING"] == COVERAGE_BLOCK_HEADING
    assert data["headings"]["IN_PROGRESS_SECTION_LABEL"] == IN_PROGRESS_SECTION_LABEL
    assert data["wire"]["PERIOD_WIRE"] == PERIOD_WIRE
    assert tuple(data["wire"]["TOOL_RESULT_STATUSES"]) == TOOL_RESULT_STATUSES
    assert canonical_notes() == data
    assert canonical_notes() is not canonical_notes()


def test_a_tool_in_another_language_mints_the_same_bytes_from_the_file() -> None:
    # What a sidecar does: read the file, never copy a sentence.
    notes = json.loads(NOTES_PATH.read_text(encoding="utf-8"))
    marker, note = notes["markers"]["ABSENCE_MARKER"], notes["notes"]["ABSENCE_NOTE"]
    minted = {
        marker: True,
        "outcome": notes["wire"]["ABSENCE_WIRE"]["nothingFound"],
        "looked_for": "backup runs for vm-99",
        "checked": [{"what": "every backup job in the export of 2026-08-19T10:12:00Z"}],
        "cannot_cover": [{"what": "PPDM", "why": "not collected on this install"}],
        "retry_returns_the_same": True,
        "note": note,
    }
    assert orjson.dumps(minted) == orjson.dumps(vm_backups({"vm": "vm-99"}))


def test_the_notes_file_goes_into_the_built_package(tmp_path: Path) -> None:
    # build_py copies what a wheel holds; package-data must name the file.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from setuptools import setup; setup()",
            "-q",
            "build_py",
            "--build-lib",
            str(tmp_path / "lib"),
            "egg_info",
            "--egg-base",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shipped = tmp_path / "lib" / "afcore" / "tools" / "notes.json"
    assert shipped.is_file()
    assert shipped.read_bytes() == NOTES_PATH.read_bytes()


def test_refused_error_is_a_usage_error_exported_from_afcore() -> None:
    assert issubclass(RefusedError, UsageError)
    assert "RefusedError" in afcore.__all__ and "absent" in afcore.__all__


# -- reading a result: what the model is served and what the record keeps ------------------


def test_reading_an_absence_strips_short_and_kind_and_keeps_them_for_the_record() -> None:
    value = absent(
        what="a VM disk attributed to the array asked",
        checked=[
            {
                "what": "vDisk and vm_rdm_map: every VM disk in the RVTools export "
                "dated 2026-09-19",
                "short": "every VM disk in the RVTools export of 2026-09-19",
            }
        ],
        not_checked=[
            {
                "what": "whether that name is a storage array, and which VM disks are on it",
                "short": "whether that name is a storage array",
                "kind": "existence",
                "why": "this tool places disks",
            }
        ],
    )
    reading = read_result(value)
    assert reading.status == "absent"
    assert reading.served["checked"] == [
        {"what": "vDisk and vm_rdm_map: every VM disk in the RVTools export dated 2026-09-19"}  # noqa: E501
    ]
    assert reading.served["not_checked"] == [
        {
            "what": "whether that name is a storage array, and which VM disks are on it",
            "why": "this tool places disks",
        }
    ]
    assert "short" in value["checked"][0]  # the tool's own value is untouched
    (limits,) = reading.limits
    assert limits.source == "absent"
    assert limits.not_checked[0]["kind"] == "existence"
    assert limits.looked_for == "a VM disk attributed to the array asked"


def test_a_hand_built_shape_is_read_never_repaired() -> None:
    hand_built = {
        "af_coverage": {
            "checked": [{"what": "a", "short": "line\nbreak"}],
            "not_checked": [{"what": "b", "kind": "weird"}],
            "note": COVERAGE_NOTE,
        },
        "result": 42,
    }
    reading = read_result(hand_built)
    assert reading.served["af_coverage"]["checked"] == [{"what": "a"}]
    assert reading.limits[0].checked == ({"what": "a"},)
    assert len(reading.warnings) == 2 and "dropped" in reading.warnings[0]


@pytest.mark.parametrize(
    "value",
    [
        {"af_absent": True, "checked": []},  # names no ground: ordinary data
        {"af_coverage": {"checked": [{"what": "a"}]}, "result": 1, "extra": 2},
        {"af_coverage": {"note": "x"}, "result": 1},
        {"facts": [], "note": SEMANTICS_NOTE},
        "a plain string",
        [1, 2, 3],
    ],
)
def test_anything_not_whole_is_plain_data(value: Any) -> None:
    reading = read_result(value)
    assert reading.served == value and reading.limits == () and reading.status is None


def test_a_described_result_is_read_with_its_declared_coverage() -> None:
    reading = read_result(vm_backups({"vm": "vm-01"}))
    assert reading.status is None
    (limits,) = reading.limits
    assert limits.source == "described"
    assert limits.checked == ({"what": f"every backup job in the export of {EXPORTED_AT}"},)
    assert wire(reading.served) == wire(vm_backups({"vm": "vm-01"}))
    # built by hand (from another language): its gaps are lines
    hand = read_result(wire(vm_backups({"vm": "vm-01"})))
    assert hand.limits[0].not_covered == ("PPDM — not collected on this install",)


def test_limits_block_lists_every_declaration_once() -> None:
    ledger = coverage(
        "Replication is healthy.",
        checked=["SRDF pair state on all 4 arrays (live query)"],
        not_checked=[{"what": "NDM migration sessions", "why": "the API timed out — ask again"}],
        cannot_cover=[
            {"what": "host-side multipathing", "why": "no collector runs on the ESX hosts"}
        ],
    )
    same_gap = coverage(
        "x",
        checked=["SRDF pair state on all 4 arrays (live query)"],
        cannot_cover=[
            {"what": "host-side multipathing", "why": "no collector runs on the ESX hosts"}
        ],
    )
    declared = [("replication_health", read_result(v).limits[0]) for v in (ledger, same_gap)]
    block = limits_block(declared)
    assert block == (
        f"{COVERAGE_BLOCK_HEADING}\n\n"
        "Checked:\n- SRDF pair state on all 4 arrays (live query)\n\n"
        "Not checked:\n- NDM migration sessions — the API timed out — ask again\n\n"
        "Cannot cover:\n- host-side multipathing — no collector runs on the ESX hosts"
    )
    answer = with_limits("Replication is healthy. Everything looks fine.", block)
    assert answer.startswith("Replication is healthy. Everything looks fine.\n\n---\n\n")
    assert with_limits("x", limits_block([])) == "x"


def test_limits_block_has_periods_in_progress_and_assumed() -> None:
    value = coverage(
        1,
        checked=["every session"],
        in_progress=[{"what": "sessions still synchronizing", "count": 3}],
        period={"queried": {"from": "2026-09-26T09:00:00Z", "to": "2026-09-26T10:00:00Z"}},
    )
    block = limits_block(
        [("backup_failures", read_result(value).limits[0])],
        assumed=[("search_logs", "window", "2h")],
    )
    assert block is not None
    assert f"{IN_PROGRESS_SECTION_LABEL}\n- sessions still synchronizing (3)" in block
    assert (
        "Period:\n- backup_failures queried 2026-09-26T09:00:00Z to 2026-09-26T10:00:00Z; "
        "what the store holds is unknown"
    ) in block
    assert block.endswith('Assumed (a tool\'s rule, not your words):\n- search_logs: window = "2h"')


# -- the envelope ----------------------------------------------------------------------------


def test_an_envelope_is_recognized_exactly() -> None:
    env = read_envelope(
        {
            "content": "refund refused: order is outside the 30-day window (policy P-12)",
            "status": "denied",
            "effects": [
                {
                    "kind": "require-instruction",
                    "instruction_id": "denial-playbook",
                    "lease": "next-call",
                }
            ],
        }
    )
    assert env is not None
    assert env.content.startswith("refund refused")
    assert env.status == "denied"
    assert [e.to_json() for e in env.effects] == [
        {"kind": "require-instruction", "instruction_id": "denial-playbook", "lease": "next-call"}
    ]
    status_only = read_envelope({"content": "no", "effects": [], "status": "denied"})
    assert status_only is not None and status_only.effects == () and status_only.status == "denied"


@pytest.mark.parametrize(
    "value",
    [
        {"content": "x", "status": "denied"},  # no effects marker: a domain object may look so
        {"content": "x", "effects": []},  # says nothing
        {"content": "x"},
        {"content": "x", "effects": [], "status": "denied", "extra": 1},
        {"content": "x", "effects": [], "status": "ok"},  # not one of the seven
        {"content": "x", "effects": "none", "status": "denied"},
        {"content": "x", "effects": [{"kind": "route", "to": "billing"}]},
        {"content": "x", "effects": [{"instruction_id": "p"}]},
        "content effects status",
        ["content", "effects"],
    ],
)
def test_anything_that_is_not_exactly_an_envelope_stays_plain_data(value: Any) -> None:
    assert read_envelope(value) is None
    reading = read_result(value)
    assert reading.served == value and reading.status is None and reading.effects == ()


def test_a_malformed_effect_is_refused_and_the_rest_kept() -> None:
    env = read_envelope(
        {
            "content": {"rows": 2},
            "effects": [
                {"kind": "require-instruction", "instruction_id": "", "lease": "next-call"},
                {"kind": "require-instruction", "instruction_id": "p", "lease": "forever"},
                {
                    "kind": "require-instruction",
                    "instruction_id": "p",
                    "lease": "next-call",
                    "x": 1,
                },
                {"kind": "require-instruction", "instruction_id": "ok", "lease": "next-call"},
            ],
        }
    )
    assert env is not None and env.status is None
    assert [e.instruction_id for e in env.effects] == ["ok"]
    assert len(env.refusals) == 3
    assert "'forever'" in env.refusals[1] and "`x`" in env.refusals[2]


def test_reading_an_envelope_serves_its_content_and_reads_limits_inside() -> None:
    inner = absent(what="refunds for order 7", checked=["the refunds table"])
    reading = read_result(
        {
            "content": inner,
            "effects": [
                {"kind": "require-instruction", "instruction_id": "p", "lease": "next-call"}
            ],
        }
    )
    assert reading.served == inner and reading.status == "absent"
    assert reading.effects[0].instruction_id == "p"
    denied = read_result({"content": inner, "effects": [], "status": "denied"})
    assert denied.status == "denied"


def test_the_status_only_near_miss_is_named() -> None:
    text = status_only_near_miss({"content": "x", "status": "denied"})
    assert text is not None and "effects: []" in text
    assert status_only_near_miss({"content": "x", "status": "whatever"}) is None
    assert status_only_near_miss({"content": "x", "effects": [], "status": "denied"}) is None


# -- the ceiling and the agent-wide cap ------------------------------------------------------


def test_result_ceiling_refusal_says_size_ceiling_how_to_narrow_and_no_data() -> None:
    ceiling = ResultCeiling(max_chars=2_000, narrow_by=["limit"])
    assert ceiling_refusal("export_orders", 102_442, ceiling) == (
        "Result too large: export_orders returned 102442 chars, over its declared 2000-char "
        "ceiling. Narrow the request and call again — e.g. pass 'limit'. No data was returned."
    )
    two = ResultCeiling(10, narrow_by=["limit", "since", "region"])
    assert "e.g. pass 'limit', 'since' or 'region'." in ceiling_refusal("t", 11, two)
    bare = ceiling_refusal("t", 11, ResultCeiling(10))
    assert "call again. No data was returned." in bare
    assert over_ceiling("x" * 11, two) and not over_ceiling("x" * 10, two)
    assert not over_ceiling("x" * 10_000, None)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"max_chars": 0}, "positive whole number"),
        ({"max_chars": -5}, "positive whole number"),
        ({"max_chars": 1.5}, "positive whole number"),
        ({"max_chars": True}, "positive whole number"),
        ({"max_chars": 10, "narrow_by": []}, "could suggest nothing"),
        ({"max_chars": 10, "narrow_by": "limit"}, "list of argument names"),
        ({"max_chars": 10, "narrow_by": [""]}, "names arguments"),
    ],
)
def test_a_bad_ceiling_is_refused(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        ResultCeiling(**kwargs)


def test_define_tool_takes_a_ceiling_whose_arguments_it_offers() -> None:
    schema = {"type": "object", "properties": {"limit": {"type": "number"}}}
    tool = define_tool(
        "export_orders",
        "Export orders.",
        schema,
        lambda a, c: "",
        result_ceiling=ResultCeiling(2_000, ["limit"]),
    )
    assert tool.result_ceiling == ResultCeiling(2_000, ("limit",))
    assert tool.result_ceiling.to_json() == {"max_chars": 2000, "narrow_by": ["limit"]}
    with pytest.raises(UsageError, match="narrows by 'page'"):
        define_tool("e", "d", schema, lambda a, c: "", result_ceiling=ResultCeiling(5, ["page"]))
    with pytest.raises(UsageError, match="takes ResultCeiling"):
        define_tool("e", "d", schema, lambda a, c: "", result_ceiling={"max_chars": 5})  # type: ignore[arg-type]


def test_truncation_keeps_a_verbatim_head_and_says_it_is_not_all() -> None:
    text = "".join(f"row {i}\n" for i in range(5_000))
    cut = truncate_result("search", text, 1_000)
    assert len(cut) <= 1_000
    marker_at = cut.index("\n[truncated: ")
    assert text.startswith(cut[:marker_at])
    kept = marker_at
    assert cut[marker_at:] == (
        f"\n[truncated: search returned {len(text)} chars and only the first {kept} are above. "
        "This is NOT the whole result: do not read it as complete.]"
    )
    assert truncate_result("search", "short", 1_000) == "short"
    with pytest.raises(UsageError, match="at least 512"):
        truncate_result("search", text, 100)


# -- the repeated-call nudge -----------------------------------------------------------------


def test_the_nudge_lands_once_on_the_second_identical_landing() -> None:
    tally = RepeatedCalls()
    assert tally.observe("search", {"q": "card 4111-1111", "n": 1}, "rows") is None
    second = tally.observe("search", {"n": 1, "q": "card 4111-1111"}, "rows")  # any key order
    assert second is not None
    assert second.note == (
        "identical call: 'search' has now returned exactly this result 2 times this turn, for "
        "exactly these arguments. Calling it again will not change it — act on what you have, "
        "or change the arguments."
    )
    assert second.occurrences == 2 and len(second.args_fingerprint) == 16
    # the record keeps fingerprints, never the values
    assert "4111" not in orjson.dumps(second.to_json()).decode()
    assert set(second.to_json()) == {
        "tool",
        "occurrences",
        "args_fingerprint",
        "result_fingerprint",
    }
    assert tally.observe("search", {"q": "card 4111-1111", "n": 1}, "rows") is None  # 3rd: none


def test_the_nudge_needs_the_same_arguments_and_the_same_result() -> None:
    tally = RepeatedCalls()
    assert tally.observe("status", {"job": 1}, "running") is None
    assert tally.observe("status", {"job": 1}, "done") is None  # progress, not a repeat
    assert tally.observe("status", {"job": 2}, "done") is None
    assert tally.observe("other", {"job": 1}, "done") is None
    assert tally.observe("status", {"job": 1}, "done") is not None
    assert with_note("rows", "n") == "rows\n\nn"


# -- ask_or_assume ---------------------------------------------------------------------------

LOGS_SCHEMA = {
    "type": "object",
    "required": ["service", "window"],
    "properties": {
        "service": {"type": "string", "description": "Service name."},
        "window": {
            "type": "string",
            "enum": ["1h", "2h", "24h", "7d"],
            "description": "Look-back.",
        },
        "tags": {"type": "array"},
    },
}


def test_an_assumed_argument_is_filled_noted_and_never_edits_the_authors_schema() -> None:
    rules = check_ask_or_assume("search_logs", LOGS_SCHEMA, {"window": {"assume": "2h"}})
    assert rules == {"window": "2h"}
    args, assumed = fill_assumed("search_logs", rules, {"service": "checkout"})
    assert args == {"service": "checkout", "window": "2h"}
    assert assumed_note(assumed[0]) == (
        'window was not in the search_logs call this result answers; the call ran with "2h", '
        "the value the tool's rule assumes — recorded as assumed, not as the person's."
    )
    served = served_schema(LOGS_SCHEMA, rules)
    assert served["required"] == ["service"]
    assert served["properties"]["window"]["description"] == (
        'Look-back. If left out, the tool\'s rule fills "2h", recorded as assumed.'
    )
    assert LOGS_SCHEMA["required"] == ["service", "window"]  # never edited
    # the model sending the default itself is filed as the default, with no note
    _, sent = fill_assumed("search_logs", rules, {"service": "c", "window": "2h"})
    assert sent[0].sent and assumed_note(sent[0]) is None
    _, chosen = fill_assumed("search_logs", rules, {"service": "c", "window": "7d"})
    assert chosen == ()


@pytest.mark.parametrize(
    "rules, words",
    [
        ({"since": {"assume": "2h"}}, "'since' is not an argument"),
        ({"tags": {"assume": []}}, "exactly one type"),
        ({"window": {"assume": "3h"}}, "its own schema rejects"),
        ({"window": "2h"}, "{'assume': value}"),
        ({"window": {"ask": "Which window?"}}, "asks the person"),
    ],
)
def test_a_bad_rule_is_refused_at_definition(rules: Any, words: str) -> None:
    with pytest.raises(UsageError, match=re.escape(words)):
        check_ask_or_assume("search_logs", LOGS_SCHEMA, rules)
