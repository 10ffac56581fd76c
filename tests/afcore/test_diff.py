"""Two recordings side by side: call by call, slot by slot, the replies, the tool results,
the endings; a difference carried by later calls listed once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from afcore import recording as rec
from afcore.demos import trip
from afcore.readmodel import Change, diff_call, diff_runs, first_difference
from afcore.replay import replay

ROOT = Path(__file__).resolve().parents[2]
TRIP = ROOT / "recordings" / "sample-trip.jsonl"
RAIN = ROOT / "recordings" / "sample-trip-rain.jsonl"


def diffed(a: Path, b: Path) -> Any:
    with rec.open_recording(a) as left, rec.open_recording(b) as right:
        return diff_runs(left, right)


def test_a_recording_and_itself_are_identical() -> None:
    d = diffed(TRIP, TRIP)
    assert d.identical and d.calls == [] and d.end == []
    assert d.compared == 5 and d.first is None
    assert d.to_json()["identical_calls"] == 5


def test_a_run_and_its_identical_replay_are_identical(tmp_path: Path) -> None:
    report = replay(TRIP, trip.build_agent(), out=tmp_path)
    assert report.recording is not None
    assert diffed(TRIP, report.recording).identical


def test_two_runs_of_one_agent_on_two_messages(tmp_path: Path) -> None:
    d = diffed(TRIP, RAIN)
    assert not d.identical
    assert [c.call for c in d.calls] == [1, 2, 3, 4, 5, 6]
    one = d.calls[0]
    assert not one.same_request
    first = one.changes[0]
    assert (first.slot, first.path, first.kind, first.why_key) == (
        "messages",
        "message 1: content",
        "changed",
        "message:1",
    )
    # The injected message says which injection sent it.
    injected = one.changes[1]
    assert injected.path == "message 2: content" and injected.where["injection"] == "currency"
    slots = [c.slot for c in one.changes]
    assert slots == sorted(slots, key=["messages", "reply", "tool_result"].index)
    results = {c.path: c for c in one.changes if c.slot == "tool_result"}
    assert set(results) == {"tool:weather#1: content", "tool:find_places#1: content"}
    assert results["tool:weather#1: content"].why_key == "tool:weather#1.result"
    # A message changed at call 1's reply is sent again at every later call: listed once.
    assert d.calls[1].carried == 2 and d.calls[4].carried == 9
    last = d.calls[5]
    assert (last.in_a, last.in_b) == (False, True)
    assert last.changes[0].path == "call" and last.changes[0].kind == "added"
    assert [c.path for c in d.end] == ["answer"]


def test_a_skill_that_one_run_read_shows_as_a_removed_segment_and_tool() -> None:
    d = diffed(TRIP, RAIN)
    three = next(c for c in d.calls if c.call == 3)
    segment = next(c for c in three.changes if c.slot == "system")
    assert (segment.path, segment.kind) == ("segment 3 (skill prices)", "removed")
    assert segment.where["injection"] == "prices" and segment.why_key == "system:prices"
    tool = next(c for c in three.changes if c.slot == "tools")
    assert (tool.path, tool.kind, tool.why_key) == ("tool convert_currency", "removed", "tools@3")
    assert tool.a["name"] == "convert_currency" and tool.b is None


def test_a_changed_segment_is_paired_with_its_injection(tmp_path: Path) -> None:
    steering = trip.STEERING
    try:
        trip.STEERING = steering + " Cite each tool."
        report = replay(TRIP, trip.build_agent(), out=tmp_path, then_live=True)
    finally:
        trip.STEERING = steering
    assert report.recording is not None
    d = diffed(TRIP, report.recording)
    assert [c.call for c in d.calls] == [1, 2, 3, 4, 5]
    change = d.calls[0].changes[0]
    assert (change.slot, change.kind, change.path) == (
        "system",
        "changed",
        "segment 2 (steering facts-only)",
    )
    assert change.b.endswith("Cite each tool.")
    # The same segment is sent at every call: one difference, carried after call 1.
    assert all(c.carried == 1 and not c.changes for c in d.calls[1:])
    with rec.open_recording(TRIP) as a, rec.open_recording(report.recording) as b:
        alone = diff_call(a, b, 3)
    assert [c.path for c in alone.changes] == ["segment 2 (steering facts-only)"]


@pytest.mark.parametrize(
    ("a", "b", "found"),
    [
        ({"x": 1}, {"x": 1}, None),
        ({"x": 1}, {"x": 2}, ("x", 1, 2)),
        ({"x": {"y": [1, 2]}}, {"x": {"y": [1, 3]}}, ("x.y[1]", 2, 3)),
        ([1], [1, 2], ("[1]", None, 2)),
        ({"a": 1}, {"b": 1}, ("a", 1, None)),
        (1, 1.0, ("", 1, 1.0)),
        ("s", "t", ("", "s", "t")),
    ],
)
def test_first_difference(a: Any, b: Any, found: Any) -> None:
    assert first_difference(a, b) == found


def test_a_change_says_where_and_both_values_as_json() -> None:
    change = Change("params", "params.temperature", "changed", 0.2, 0.7, {"param": "t"}, "call:1")
    assert change.to_json() == {
        "slot": "params",
        "path": "params.temperature",
        "kind": "changed",
        "a": 0.2,
        "b": 0.7,
        "where": {"param": "t"},
        "why_key": "call:1",
    }


def test_a_recording_cut_short_differs_by_its_missing_calls(tmp_path: Path) -> None:
    lines = TRIP.read_bytes().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if b'"t":"call"' in x and b'"call":4,' in x)
    short = tmp_path / "short.jsonl"
    short.write_bytes(b"".join(lines[:cut]))
    d = diffed(TRIP, short)
    assert [(c.call, c.in_a, c.in_b) for c in d.calls] == [(4, True, False), (5, True, False)]
    assert dataclasses.asdict(d.a)["status"] == "answer" and d.b.status is None
    assert [c.path for c in d.end] == ["status", "answer"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"status":"ok"', b'"status":"fine"'),  # a status the format does not have
        (b'"seq":', b'"_seq":'),  # a field the record needs, gone
    ],
)
def test_a_tool_commit_that_is_no_valid_record_is_a_difference_named_by_its_line(
    tmp_path: Path, old: bytes, new: bytes
) -> None:
    """The index takes a tool's commit by its key and tool before the record is judged whole:
    a diff that reads it and finds it invalid says so where its status goes, with the line,
    and goes on (it used to stop on the record's error)."""
    lines = TRIP.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"commit"') and b'"tool":' in x)
    assert old in lines[at]
    lines[at] = lines[at].replace(old, new, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(lines))
    d = diffed(TRIP, bad)
    said = [c for c in d.calls for c in c.changes if c.path.endswith(": status")]
    assert len(said) == 1 and said[0].a == "ok"
    assert str(said[0].b).startswith("unreadable: ") and f"line {at + 1}" in str(said[0].b)
    assert all(not c.in_a or c.in_b for c in d.calls)
