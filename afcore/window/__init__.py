"""Keeping the live context window in budget: window strategies and the folds they make.

A strategy changes what the next call is sent, never the recording: messages that leave the
window stay in the file as they were written, each fold is committed with what left, why,
what was measured and what refused to leave.
"""

from afcore.window._live import LiveWindowState
from afcore.window._strategies import (
    WindowStrategy,
    sliding_window,
    summarize_oldest,
    token_budget,
)
from afcore.window._turns import (
    LiveMessage,
    Refusal,
    RefusalReason,
    Turn,
    count_into,
    plan,
    segment,
    turn_sizes,
)

__all__ = [
    "LiveMessage",
    "LiveWindowState",
    "Refusal",
    "RefusalReason",
    "Turn",
    "WindowStrategy",
    "count_into",
    "plan",
    "segment",
    "sliding_window",
    "summarize_oldest",
    "token_budget",
    "turn_sizes",
]
