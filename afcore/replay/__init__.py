"""Replaying a recorded run: the agent's code runs again with every model call answered from
the recording (no network, no key), and the first place the run departs from the recording
is named: the call, the slot, the path, both values, and the ``af why`` key that explains
the recorded side (``af replay``).

- :func:`replay` (and :func:`areplay`) replays a recording with an agent and returns a
  :class:`ReplayReport`;
- :func:`replaying` gives a copy of an agent whose runs replay a recording, for code that
  runs the agent itself (the pytest plugin's cassettes);
- what legitimately varies between runs is served back, not compared: the recorded clock
  and random source (``ctx.now()``, ``ctx.random``, ``s.now()``, ``s.random``), ids a
  provider made, the order of a tool result's keys. Values taken from anywhere else make
  the replay differ where they are used;
- :func:`replay_flow` (and :func:`areplay_flow`, :func:`replaying_flow`) replays a composed
  run: the flow's code runs again, each agent step replaying its recorded run, and the first
  difference (a step, a decision and the values its predicates read, a merge, a call inside
  an agent step) is a :class:`FlowDivergence` in a :class:`FlowReplayReport`;
- a governed run replays through its middleware (a served result keeps what the result
  chain decided then), and through each pause for a person: the same question at the same
  call, answered as the person answered it then.
"""

from afcore.replay._flow import FlowReplayer, areplay_flow, replay_flow, replaying_flow
from afcore.replay._replay import areplay, replay, replaying
from afcore.replay._replayer import Replayer, ToolsMode
from afcore.replay._report import (
    Divergence,
    FlowDivergence,
    FlowReplayReport,
    ReplayReport,
    ReplayStatus,
)
from afcore.replay._tape import RecordedCall, Tape

__all__ = [
    "Divergence",
    "FlowDivergence",
    "FlowReplayReport",
    "FlowReplayer",
    "RecordedCall",
    "ReplayReport",
    "ReplayStatus",
    "Replayer",
    "Tape",
    "ToolsMode",
    "areplay",
    "areplay_flow",
    "replay",
    "replay_flow",
    "replaying",
    "replaying_flow",
]
