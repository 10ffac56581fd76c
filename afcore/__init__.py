"""af: build LLM agents whose every run leaves a complete, replayable recording.

The names below are imported when first used, not when ``afcore`` is: a command that only
reads a recording (``af show``, ``af why``) never pays for the agent loop, the providers or
jsonschema.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from afcore._version import __version__

if TYPE_CHECKING:
    from afcore.agent import Agent, AgentBuilder, agent_tool
    from afcore.errors import (
        AfError,
        BadRequestError,
        CompactionUnmeasurableError,
        ConnectionFailedError,
        McpError,
        MessageDeniedError,
        MockExhaustedError,
        NotPausedError,
        OutputSchemaError,
        OverloadedError,
        ProviderError,
        RateLimitedError,
        RecordingError,
        RefusedError,
        ReliabilityFailFastError,
        ReplayDivergedError,
        ReplayEndedError,
        ReplayError,
        RunError,
        RunInFlightError,
        RunPausedError,
        ServerError,
        SessionError,
        StreamCutError,
        TurnLostError,
        UsageError,
    )
    from afcore.governance import (
        MessageMiddleware,
        Paused,
        ToolCallInfo,
        ToolMiddleware,
        ToolResultInfo,
        allow,
        ask,
        deny,
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
    from afcore.replay import replay, replaying
    from afcore.sessions import Principal, SendResult, Session, SessionStore
    from afcore.tools import (
        ResultCeiling,
        Tool,
        ToolContext,
        absent,
        coverage,
        define_tool,
        described_result,
        mcp_serve,
        mcp_tools,
    )
    from afcore.window import WindowStrategy, sliding_window, summarize_oldest, token_budget

_WHERE = {
    "afcore.agent": (
        "Agent",
        "AgentBuilder",
        "agent_tool",
    ),
    "afcore.errors": (
        "AfError",
        "BadRequestError",
        "CompactionUnmeasurableError",
        "ConnectionFailedError",
        "McpError",
        "MessageDeniedError",
        "MockExhaustedError",
        "NotPausedError",
        "OutputSchemaError",
        "OverloadedError",
        "ProviderError",
        "RateLimitedError",
        "RecordingError",
        "RefusedError",
        "ReliabilityFailFastError",
        "ReplayDivergedError",
        "ReplayEndedError",
        "ReplayError",
        "RunError",
        "RunInFlightError",
        "RunPausedError",
        "ServerError",
        "SessionError",
        "StreamCutError",
        "TurnLostError",
        "UsageError",
    ),
    "afcore.governance": (
        "MessageMiddleware",
        "Paused",
        "ToolCallInfo",
        "ToolMiddleware",
        "ToolResultInfo",
        "allow",
        "ask",
        "deny",
    ),
    "afcore.loop": ("RunResult",),
    "afcore.providers": (
        "Provider",
        "anthropic",
        "from_model_id",
        "gemini",
        "lmstudio",
        "mock",
        "ollama",
        "openai",
        "openai_compatible",
        "openrouter",
    ),
    "afcore.recording": (
        "RecordingConfig",
        "Redaction",
    ),
    "afcore.replay": (
        "replay",
        "replaying",
    ),
    "afcore.reliability": (
        "circuit_breaker",
        "rule",
    ),
    "afcore.sessions": (
        "Principal",
        "SendResult",
        "Session",
        "SessionStore",
    ),
    "afcore.tools": (
        "ResultCeiling",
        "Tool",
        "ToolContext",
        "absent",
        "coverage",
        "define_tool",
        "described_result",
        "mcp_serve",
        "mcp_tools",
    ),
    "afcore.window": (
        "WindowStrategy",
        "sliding_window",
        "summarize_oldest",
        "token_budget",
    ),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "AfError",
    "Agent",
    "AgentBuilder",
    "BadRequestError",
    "CompactionUnmeasurableError",
    "ConnectionFailedError",
    "McpError",
    "MessageDeniedError",
    "MessageMiddleware",
    "MockExhaustedError",
    "NotPausedError",
    "OutputSchemaError",
    "OverloadedError",
    "Paused",
    "Principal",
    "Provider",
    "ProviderError",
    "RateLimitedError",
    "RecordingConfig",
    "RecordingError",
    "Redaction",
    "RefusedError",
    "ReliabilityFailFastError",
    "ReplayDivergedError",
    "ReplayEndedError",
    "ReplayError",
    "ResultCeiling",
    "RunError",
    "RunInFlightError",
    "RunPausedError",
    "RunResult",
    "SendResult",
    "ServerError",
    "Session",
    "SessionError",
    "SessionStore",
    "StreamCutError",
    "Tool",
    "ToolCallInfo",
    "ToolContext",
    "ToolMiddleware",
    "ToolResultInfo",
    "TurnLostError",
    "UsageError",
    "WindowStrategy",
    "absent",
    "allow",
    "anthropic",
    "ask",
    "circuit_breaker",
    "coverage",
    "define_tool",
    "deny",
    "described_result",
    "from_model_id",
    "gemini",
    "lmstudio",
    "mcp_serve",
    "mcp_tools",
    "mock",
    "ollama",
    "openai",
    "openai_compatible",
    "openrouter",
    "replay",
    "replaying",
    "rule",
    "sliding_window",
    "summarize_oldest",
    "token_budget",
    "__version__",
    "agent_tool",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'afcore' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next use is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
