"""What a flow asks of a replay (made by ``afcore.replay``): each agent step runs a copy of
its agent that replays that step's recorded run, and every record the flow writes is checked
against the recorded one as it is written, so the first difference stops the flow where it
is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from afcore.agent._agent import Agent
    from afcore.loop._state import RunResult
    from afcore.recording._models import ReplayLink

__all__ = ["FlowReplayer"]


class FlowReplayer(Protocol):
    """A replay's hold on a flow run. Anything it finds different, it raises as a
    ``ReplayDivergedError`` where it is found (``ReplayEndedError`` where the recording
    ends); the flow ends there, its log closed."""

    link: ReplayLink
    """What the replay's log says it replays."""

    def start(self, recording: Path) -> None:
        """The flow begins, writing its log at ``recording``."""

    def agent(self, agent: Agent, path: str) -> Agent:
        """The agent to run as the step at ``path``: a copy replaying its recorded run."""

    def agent_ended(self, path: str, agent: Agent, result: RunResult) -> None:
        """The agent step at ``path`` ran (``agent`` is what :meth:`agent` gave)."""

    def written(self, raw: bytes) -> None:
        """The flow's log wrote ``raw`` (one record, as written)."""
