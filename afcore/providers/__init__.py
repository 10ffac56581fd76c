"""Model providers: the interface, and the scripted mock."""

from afcore.providers._base import (
    Provider,
    StreamEvent,
    StreamHandler,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from afcore.providers._mock import MockProvider, mock

__all__ = [
    "MockProvider",
    "Provider",
    "StreamEvent",
    "StreamHandler",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStart",
    "mock",
]
