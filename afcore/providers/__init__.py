"""Model providers: the interface, the scripted mock, the replay (answers from a recording),
Anthropic and OpenAI-compatible servers (with presets for OpenAI, OpenRouter, Gemini, Ollama
and LM Studio), and model ids as ``provider:model``."""

from afcore.providers._anthropic import AnthropicProvider, anthropic
from afcore.providers._base import (
    Provider,
    StreamEvent,
    StreamHandler,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    keys_when_called,
)
from afcore.providers._ids import MODEL_ID_PREFIXES, from_model_id
from afcore.providers._mock import MockProvider, mock
from afcore.providers._openai import (
    OpenAICompatibleProvider,
    ThinkingParam,
    gemini,
    lmstudio,
    ollama,
    openai,
    openai_compatible,
    openrouter,
)
from afcore.providers._replay import ReplayProvider

__all__ = [
    "MODEL_ID_PREFIXES",
    "AnthropicProvider",
    "MockProvider",
    "OpenAICompatibleProvider",
    "Provider",
    "ReplayProvider",
    "StreamEvent",
    "StreamHandler",
    "TextDelta",
    "ThinkingParam",
    "ThinkingDelta",
    "ToolCallStart",
    "anthropic",
    "from_model_id",
    "gemini",
    "keys_when_called",
    "lmstudio",
    "mock",
    "ollama",
    "openai",
    "openai_compatible",
    "openrouter",
]
