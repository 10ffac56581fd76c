"""The agent loop."""

from afcore.loop._conversation import Conversation
from afcore.loop._interrupt import SignalWake, new_threads_leave_sigint
from afcore.loop._resume import paused_checkpoint
from afcore.loop._state import Output, RunResult, RunStatus

__all__ = [
    "Conversation",
    "Output",
    "RunResult",
    "RunStatus",
    "SignalWake",
    "new_threads_leave_sigint",
    "paused_checkpoint",
]
