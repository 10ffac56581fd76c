"""An agent step's run asked through its flow: a state value its rules read crosses to the
flow's step that wrote it; a value no step wrote stays application state."""

from __future__ import annotations

from pathlib import Path

import afcore.demos.router as router
from afcore import Agent, mock
from afcore.flows import Sequence
from afcore.recording import FlowRecording, open_flow, open_recording
from afcore.why import Slice, cross_flow, state_writers, why


def _asked(log: Path, path: str, key: str) -> tuple[FlowRecording, Slice]:
    flow = open_flow(log)
    step = flow.find(path)
    assert step is not None
    file = flow.run_file(step)
    assert file is not None
    with open_recording(file) as rec:
        return flow, why(rec, key)


def test_a_rule_s_read_of_flow_state_crosses_to_the_step_that_wrote_it(tmp_path: Path) -> None:
    flow = router.build_flow(record=tmp_path)
    flow.run(router.DEFAULT_MESSAGE)
    assert flow.last_result is not None and flow.last_result.recording is not None
    log, slice_ = _asked(flow.last_result.recording, "route/billing", "message:2")
    unlogged = "state.priority is application state, not in the log"
    root = slice_.nodes[slice_.writer]
    assert unlogged in root.notes  # the agent's run alone cannot say
    cross_flow(slice_, log)
    assert unlogged not in root.notes
    assert "state.priority ← written by the flow's step triage" in root.notes
    assert slice_.flow_state == {"state.priority": "triage"}
    assert slice_.to_json()["flow_state"] == {"state.priority": "triage"}
    [(key, writer)] = state_writers(log, "rule urgent fired: state.priority = 'high' -> true")
    assert (key, writer.path) == ("state.priority", "triage")


def test_a_state_key_no_step_wrote_keeps_its_note(tmp_path: Path) -> None:
    agent = (
        Agent.create(provider=mock(reply="noted"), model="m", name="desk")
        .instruction("Be gentle.", id="gentle", when=lambda s: s.state.get("mood") == "sad")
        .build()
    )
    flow = (
        Sequence.create("support", record=tmp_path)
        .step("tag", lambda s: s.__setitem__("topic", "x") or str(s.message))
        .step("desk", agent)
        .build()
    )
    flow.run("hello")
    assert flow.last_result is not None and flow.last_result.recording is not None
    log, slice_ = _asked(flow.last_result.recording, "desk", "injections")
    said = [d for n in slice_.nodes.values() for d in n.decisions]
    assert any("state.mood" in d for d in said), said
    cross_flow(slice_, log)
    notes = [n for node in slice_.nodes.values() for n in node.notes]
    assert "state.mood is application state, not in the log" in notes
    assert slice_.flow_state == {} and "flow_state" not in slice_.to_json()
