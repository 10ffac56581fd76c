"""What a paused run returns: the question a link asked, about which tool call, and where
the run is recorded (what ``agent.resume()`` and ``af resume`` continue from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Paused"]


@dataclass(frozen=True)
class Paused:
    """A run waiting for a person. Not an answer: ``agent.run()`` returns it in place of
    one, and ``agent.resume(paused, approve=True | False, why=...)`` continues the run, in
    this process or another (``af resume RUN --approve``)."""

    run_id: str
    recording: Path
    """The recording the run continues in."""
    question: str
    """What the link asked."""
    link: str
    """The link that asked."""
    tool: str
    """The tool the call is for."""
    args: dict[str, Any] = field(repr=False)
    """The arguments the tool would run with (as the links before the question left them)."""
    call_id: str = ""
    k: int = 0
    """Which call of the tool in the run, from 1."""
    iteration: int = 0

    def __str__(self) -> str:
        return f"paused: {self.link} asks: {self.question}"

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "recording": str(self.recording),
            "question": self.question,
            "link": self.link,
            "tool": self.tool,
            "args": self.args,
            "call_id": self.call_id,
            "k": self.k,
            "iteration": self.iteration,
        }
