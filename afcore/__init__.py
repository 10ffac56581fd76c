"""af: build LLM agents whose every run leaves a complete, replayable recording."""

from afcore._version import __version__
from afcore.agent import Agent, AgentBuilder
from afcore.errors import (
    AfError,
    CompactionUnmeasurableError,
    MockExhaustedError,
    ProviderError,
    RecordingError,
    RunError,
    UsageError,
)
from afcore.loop import RunResult
from afcore.providers import Provider, mock
from afcore.recording import RecordingConfig, Redaction
from afcore.tools import Tool, ToolContext, define_tool
from afcore.window import WindowStrategy, sliding_window, summarize_oldest, token_budget

__all__ = [
    "AfError",
    "Agent",
    "AgentBuilder",
    "CompactionUnmeasurableError",
    "MockExhaustedError",
    "Provider",
    "ProviderError",
    "RecordingConfig",
    "RecordingError",
    "Redaction",
    "RunError",
    "RunResult",
    "Tool",
    "ToolContext",
    "UsageError",
    "WindowStrategy",
    "__version__",
    "define_tool",
    "mock",
    "sliding_window",
    "summarize_oldest",
    "token_budget",
]
