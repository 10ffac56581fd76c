"""The read model on hostile recordings: what a file wrote never stops a reader; what cannot
be read is said where it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore.readmodel import (
    Timeline,
    as_text,
    build,
    call_view,
    diff_flows,
    diff_runs,
    evidence_text,
    flow_graph,
    flow_texts,
    flow_timeline,
    json_text,
    line,
)
from afcore.recording import open_flow, open_recording

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"


def test_a_flows_run_named_with_a_nul_is_said_unreadable(tmp_path: Path) -> None:
    # The log names each agent's run; a name with a NUL names no file, and opening it
    # raised ValueError (not OSError) out of the flow's timeline.
    data = (SAMPLES / "flow-router.jsonl").read_bytes()
    named = b'"run":"flow-router/001-route-billing.jsonl"'
    assert data.count(named) == 1
    path = tmp_path / "nul.jsonl"
    path.write_bytes(data.replace(named, b'"run":"flow-router/001\\u0000.jsonl"'))
    timeline = flow_timeline(open_flow(path))
    (run,) = timeline.runs
    assert run.rec is None and timeline.calls == []
    assert run.problem is not None and "cannot be read: embedded null byte" in run.problem


def test_a_flows_run_named_with_a_nul_is_not_compared(tmp_path: Path) -> None:
    data = (SAMPLES / "flow-router.jsonl").read_bytes()
    path = tmp_path / "nul.jsonl"
    path.write_bytes(data.replace(b'"run":"flow-router/001-', b'"run":"flow-router/\\u0000-'))
    found = diff_flows(open_flow(SAMPLES / "flow-router.jsonl"), open_flow(path))
    said = [s.run_error for s in found.steps if s.run_error]
    assert said and "cannot be compared: embedded null byte" in said[0]


@pytest.mark.parametrize("ms", ["12", [1], {"ms": 1}, True, None])
def test_a_tool_results_duration_that_is_no_number_is_left_out(tmp_path: Path, ms: Any) -> None:
    # The front ends format a result's duration as a number: a string there stopped the Lens.
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'"tool":{"name":"weather"' in line)
    commit = orjson.loads(lines[at])
    commit["tool"]["ms"] = ms
    lines[at] = orjson.dumps(commit) + b"\n"
    path = tmp_path / "ms.jsonl"
    path.write_bytes(b"".join(lines))
    with open_recording(path) as rec:
        timeline = Timeline()
        for _ in build(rec, timeline):
            pass
        view = call_view(rec, timeline, 1)
    (weather,) = [e for e in view.events if e.get("name") == "weather"]
    assert weather["ms"] is None


@pytest.mark.parametrize("depth", [300, 1_020])
def test_a_value_nested_deep_is_written_or_said_too_deep(depth: int) -> None:
    # A line's JSON may nest 1,024 levels; the encoder writes 255, and repr() of what is
    # left goes only as deep as the stack: past it, a reader stopped on RecursionError.
    nested: Any = 1
    for _ in range(depth):
        nested = [nested]
    said = json_text(nested)
    too_deep = "(a value nested too deep to be written out)"
    assert said == (repr(nested) if depth < 900 else too_deep)
    assert as_text({"a": nested}) and line(as_text(nested), 40)


def _deep_state(tmp_path: Path, depth: int) -> Path:
    """The router's log with the intent triage wrote, and its decision read, nested
    ``depth`` levels deep."""
    deep = b"[" * depth + b'"billing"' + b"]" * depth
    data = (SAMPLES / "flow-router.jsonl").read_bytes()
    data = data.replace(
        b'"reads":[["state.intent","billing"]]', b'"reads":[["state.intent",' + deep + b"]]"
    )
    data = data.replace(b'"writes":{"intent":"billing"', b'"writes":{"intent":' + deep)
    path = tmp_path / f"deep{depth}.jsonl"
    path.write_bytes(data)
    return path


def test_a_flow_value_nested_past_what_orjson_writes_is_graphed(tmp_path: Path) -> None:
    # orjson writes 255 levels; the graph keyed each value it read by orjson's bytes, and a
    # state value nested 300 deep stopped af why on the flow and `w` in the Lens.
    flow = open_flow(_deep_state(tmp_path, 300))
    for key in ("answer", "route", "decision:route#1", "state.intent"):
        assert flow_graph(flow, key).nodes


def test_a_flow_value_nested_a_thousand_deep_is_listed_and_searched(tmp_path: Path) -> None:
    # Past the stack: the decision's evidence in the tree of steps and its text for a
    # search (dumped whole) raised RecursionError.
    flow = open_flow(_deep_state(tmp_path, 1_015))
    (decision,) = [d for s in flow.steps() for d in s.decisions]
    reads = dict(r for v in decision.verdicts for r in v.reads)
    assert evidence_text(reads) == "state.intent = (a value nested too deep to be written out)"
    assert [t.what for t in flow_texts(flow) if t.what == "decision"] == []


def test_an_answer_that_cannot_be_read_is_compared_as_missing(tmp_path: Path) -> None:
    # The run's answer is in a blob; a blob whose bytes are not UTF-8 cannot be read, and
    # comparing the two runs' endings raised the reader's KeyError (af diff, af lens --diff).
    data = (SAMPLES / "sample-trip.jsonl").read_bytes()
    blob = b'{"t":"blob","id":"0cXhdBB1Nx_aP3ZEsfqFNg","value":"'
    assert data.count(blob) == 1
    path = tmp_path / "unreadable.jsonl"
    path.write_bytes(data.replace(blob, blob + b"\xff\xfe"))
    with open_recording(SAMPLES / "sample-trip.jsonl") as a, open_recording(path) as b:
        found = diff_runs(a, b)
    (answer,) = [c for c in found.end if c.path == "answer"]
    assert answer.a is not None and answer.b is None
