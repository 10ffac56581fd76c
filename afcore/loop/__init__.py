"""The agent loop."""

from afcore.loop._conversation import Conversation
from afcore.loop._interrupt import SignalWake
from afcore.loop._resume import paused_checkpoint
from afcore.loop._state import Output, RunResult, RunStatus

__all__ = ["Conversation", "Output", "RunResult", "RunStatus", "SignalWake", "paused_checkpoint"]
