"""Model providers: the interface, the scripted mock, and Anthropic."""

from afcore.providers._anthropic import AnthropicProvider, anthropic
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
    "AnthropicProvider",
    "MockProvider",
    "Provider",
    "StreamEvent",
    "StreamHandler",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStart",
    "anthropic",
    "mock",
]
