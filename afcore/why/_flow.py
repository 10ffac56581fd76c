"""An agent step's run, asked through its flow: a value its rules read from the flow's
state is not in the agent's recording but in the flow's log, which names the step that
wrote it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a run's why builds no flow models
    from afcore.recording import FlowLogStep, FlowRecording
    from afcore.why._slice import Slice

_STATE = re.compile(r"state\.([\w-]+)")


def state_writers(flow: FlowRecording, words: str) -> list[tuple[str, FlowLogStep]]:
    """The state keys a decision's words name (``rule urgent fired: state.priority =
    'high' -> true``) that a step of ``flow`` wrote, each with the step that last did."""
    out: list[tuple[str, FlowLogStep]] = []
    for key in dict.fromkeys(_STATE.findall(words)):
        writer = flow.writer_of(key)
        if writer is not None:
            out.append((f"state.{key}", writer))
    return out


def cross_flow(result: Slice, flow: FlowRecording) -> None:
    """Link each state value the slice's decisions read to the step of ``flow`` that wrote
    it: in ``result.flow_state``, and in place of the node's note that it is application
    state. A key the flow never wrote keeps that note."""
    for node in result.nodes.values():
        for words in node.decisions:
            for key, writer in state_writers(flow, words):
                result.flow_state.setdefault(key, writer.path)
                unlogged = f"{key} is application state, not in the log"
                node.notes = [
                    f"{key} ← written by the flow's step {writer.path}" if n == unlogged else n
                    for n in node.notes
                ]
