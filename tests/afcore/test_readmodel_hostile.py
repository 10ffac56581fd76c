"""The read model on hostile recordings: what a file wrote never stops a reader; what cannot
be read is said where it is."""

from __future__ import annotations

from pathlib import Path

from afcore.readmodel import diff_flows, flow_timeline
from afcore.recording import open_flow

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
