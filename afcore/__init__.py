"""af: build LLM agents whose every run leaves a complete, replayable recording."""

from afcore._version import __version__
from afcore.agent import Agent, AgentBuilder
from afcore.errors import (
    AfError,
    BadRequestError,
    CompactionUnmeasurableError,
    ConnectionFailedError,
    MockExhaustedError,
    OverloadedError,
    ProviderError,
    RateLimitedError,
    RecordingError,
    ReliabilityFailFastError,
    RunError,
    ServerError,
    StreamCutError,
    UsageError,
)
from afcore.loop import RunResult
from afcore.providers import (
    Provider,
    anthropic,
    from_model_id,
    gemini,
    lmstudio,
    mock,
    ollama,
    openai,
    openai_compatible,
    openrouter,
)
from afcore.recording import RecordingConfig, Redaction
from afcore.reliability import circuit_breaker, rule
from afcore.tools import Tool, ToolContext, define_tool
from afcore.window import WindowStrategy, sliding_window, summarize_oldest, token_budget

__all__ = [
    "AfError",
    "Agent",
    "AgentBuilder",
    "BadRequestError",
    "CompactionUnmeasurableError",
    "ConnectionFailedError",
    "MockExhaustedError",
    "OverloadedError",
    "Provider",
    "ProviderError",
    "RateLimitedError",
    "RecordingConfig",
    "RecordingError",
    "Redaction",
    "ReliabilityFailFastError",
    "RunError",
    "RunResult",
    "ServerError",
    "StreamCutError",
    "Tool",
    "ToolContext",
    "UsageError",
    "WindowStrategy",
    "__version__",
    "anthropic",
    "circuit_breaker",
    "define_tool",
    "from_model_id",
    "gemini",
    "lmstudio",
    "mock",
    "ollama",
    "openai",
    "openai_compatible",
    "openrouter",
    "rule",
    "sliding_window",
    "summarize_oldest",
    "token_budget",
]
