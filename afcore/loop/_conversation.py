"""What a run continues: the conversation before its user message.

A run given a :class:`Conversation` starts from those messages instead of from its user
message alone. Its recording holds them as what they are: a ``history#0`` stage writes them
as the first messages of the run, each with its ``source`` (``history``, or ``session`` for a
session's stored transcript), before ``seed`` writes the user message. A call rebuilt from
the file is therefore exactly the call that was sent, prior messages included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from afcore.errors import UsageError
from afcore.messages import AssistantMessage, Message, Source, ToolResultMessage, UserMessage

__all__ = ["HISTORY", "Conversation", "as_conversation"]

HISTORY = Source(kind="history")
"""The source of a prior message given as ``history=`` with no more to say about it."""


@dataclass(frozen=True)
class Conversation:
    """The messages a run continues from, and who keeps what the run adds to them.

    An agent with a window strategy lets it visit once more after the answer of a run that
    continues a conversation, so that what the next run continues from
    (``RunResult.transcript``) stays in budget however long the conversation grows.
    """

    history: tuple[Message, ...] = ()
    """The conversation so far, oldest first."""
    sources: tuple[Source, ...] = ()
    """Where each message of ``history`` came from, for the recording (empty: ``history``)."""
    keep: Callable[[Message], None] | None = field(default=None, compare=False)
    """Called as each reply and tool result joins the conversation, so that a store can keep
    a turn's finished steps while it runs."""
    session: Mapping[str, Any] | None = None
    """For a session's turn: ``{"id", "turn", "previous"}``, written in the header."""

    def __post_init__(self) -> None:
        if self.sources and len(self.sources) != len(self.history):
            raise UsageError("a conversation names one source per message of its history")

    def source(self, i: int) -> Source:
        return self.sources[i] if self.sources else HISTORY


def as_conversation(history: Sequence[Message] | Conversation | None) -> Conversation | None:
    """``history=`` as given to a run: None, a conversation, or its messages."""
    if history is None or isinstance(history, Conversation):
        return history
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise UsageError(
            "history= takes the conversation so far as a list of messages "
            f"(UserMessage, AssistantMessage, ToolResultMessage), got {type(history).__name__}"
        )
    messages = tuple(history)
    for i, m in enumerate(messages):
        if not isinstance(m, UserMessage | AssistantMessage | ToolResultMessage):
            raise UsageError(
                f"history[{i}] is a {type(m).__name__}, not a message; build messages with "
                "afcore.messages (or message_from_json)"
            )
    return Conversation(history=messages)
