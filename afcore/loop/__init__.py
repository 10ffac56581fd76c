"""The agent loop."""

from afcore.loop._run import RunResult, RunStatus

__all__ = ["RunResult", "RunStatus"]
