"""The agent loop."""

from afcore.loop._conversation import Conversation
from afcore.loop._state import RunResult, RunStatus

__all__ = ["Conversation", "RunResult", "RunStatus"]
