"""Building an agent: ``Agent.create(...)`` then ``.system()``, ``.tool()``, ``.build()``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from afcore.errors import UsageError
from afcore.messages import SystemSegment
from afcore.providers._base import Provider
from afcore.recording._config import RecordingConfig
from afcore.tools._tool import Tool, ToolValidation

if TYPE_CHECKING:
    from afcore.agent._agent import Agent

__all__ = ["AgentBuilder"]

MAX_ITERATIONS_CAP = 10_000


class AgentBuilder:
    """Collects an agent's parts; ``build()`` checks them and returns the :class:`Agent`.

    Mistakes are caught here, where the developer can see them, rather than mid-run.
    """

    def __init__(
        self,
        *,
        provider: Provider,
        model: str,
        max_iterations: int,
        record: bool | str | Path | RecordingConfig,
        name: str | None,
        tool_arg_validation: ToolValidation,
        params: Mapping[str, Any] | None,
        source: str | None,
    ) -> None:
        if not isinstance(provider, Provider):
            raise UsageError(
                f"Agent.create(provider=...) needs a provider such as mock(...), "
                f"got {type(provider).__name__}"
            )
        if not isinstance(model, str) or not model:
            raise UsageError("Agent.create(model=...) needs the model's name as a string")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or not 1 <= max_iterations <= MAX_ITERATIONS_CAP
        ):
            raise UsageError(
                f"Agent.create(max_iterations=...) must be an integer from 1 to "
                f"{MAX_ITERATIONS_CAP}, got {max_iterations!r}"
            )
        if tool_arg_validation not in get_args(ToolValidation):
            raise UsageError(
                "Agent.create(tool_arg_validation=...) must be 'enforce', 'warn' or 'off', "
                f"got {tool_arg_validation!r}"
            )
        self._provider = provider
        self._model = model
        self._max_iterations = max_iterations
        self._recording = _recording_config(record)
        self._name = name
        self._validation = tool_arg_validation
        self._params = dict(params or {})
        self._source = source
        self._system: list[SystemSegment] = []
        self._tools: dict[str, Tool] = {}

    def name(self, name: str) -> AgentBuilder:
        """The agent's name, shown in recordings and `af ls`."""
        if not isinstance(name, str) or not name.strip():
            raise UsageError("name(...) needs a non-empty string")
        self._name = name
        return self

    def system(self, text: str) -> AgentBuilder:
        """Add a segment to the system prompt. Segments are sent in the order added."""
        if not isinstance(text, str):
            raise UsageError(f"system(...) takes a string, got {type(text).__name__}")
        self._system.append(SystemSegment(text))
        return self

    def tool(self, tool: Tool) -> AgentBuilder:
        """Offer a tool to the model. A second tool with the same name is refused here."""
        if not isinstance(tool, Tool):
            raise UsageError(
                f"tool(...) takes a tool made by define_tool(...), got {type(tool).__name__}"
            )
        if tool.name in self._tools:
            raise UsageError(
                f"duplicate tool name {tool.name!r}: a tool by that name is already registered"
            )
        self._tools[tool.name] = tool
        return self

    def tools(self, tools: Iterable[Tool]) -> AgentBuilder:
        """Offer several tools; each goes through :meth:`tool`."""
        for t in tools:
            self.tool(t)
        return self

    def build(self) -> Agent:
        from afcore.agent._agent import Agent

        return Agent._from_builder(
            provider=self._provider,
            model=self._model,
            name=self._name or "agent",
            source=self._source,
            system=tuple(self._system),
            tools=dict(self._tools),
            max_iterations=self._max_iterations,
            tool_arg_validation=self._validation,
            params=self._params,
            recording=self._recording,
        )


def _recording_config(record: bool | str | Path | RecordingConfig) -> RecordingConfig | None:
    if record is False:
        return None
    if record is True:
        return RecordingConfig()
    if isinstance(record, RecordingConfig):
        return record
    if isinstance(record, str | Path):
        if not str(record):
            raise UsageError("Agent.create(record=...) was given an empty folder name")
        return RecordingConfig(dir=Path(record))
    raise UsageError(
        f"Agent.create(record=...) takes True, False, a folder or a RecordingConfig, got {record!r}"
    )
