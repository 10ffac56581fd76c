"""Tool providers: a source of tools consulted at every iteration, so the tools slot can
change with the run (a tenant's catalog, a gate on the iteration or the active skill)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from afcore.errors import UsageError
from afcore.tools._tool import Tool

__all__ = ["ToolProvider", "ToolProviderContext", "gated_tools", "static_tools"]


@dataclass(frozen=True, slots=True)
class ToolProviderContext:
    """What a provider knows when it is asked for tools."""

    iteration: int
    """The iteration about to call the model, from 1."""
    active_skills: frozenset[str]
    """Ids of the skills the model has activated this turn."""
    identity: Any
    """Who the run is for: what the caller passed as ``run(..., identity=...)``."""


@runtime_checkable
class ToolProvider(Protocol):
    """Anything with a ``name`` and ``tools(ctx) -> Sequence[Tool]``."""

    @property
    def name(self) -> str: ...

    def tools(self, ctx: ToolProviderContext) -> Sequence[Tool]: ...


@dataclass(frozen=True)
class _Static:
    name: str
    items: tuple[Tool, ...]

    def tools(self, ctx: ToolProviderContext) -> Sequence[Tool]:
        return self.items


@dataclass(frozen=True)
class _Gated:
    name: str
    source: ToolProvider
    predicate: Callable[[Tool, ToolProviderContext], bool]

    def tools(self, ctx: ToolProviderContext) -> Sequence[Tool]:
        return [t for t in self.source.tools(ctx) if self.predicate(t, ctx) is True]


def static_tools(*tools: Tool, name: str = "static_tools") -> ToolProvider:
    """The same tools at every iteration."""
    for t in tools:
        if not isinstance(t, Tool):
            raise UsageError(f"static_tools(...) takes tools made by define_tool(...), got {t!r}")
    return _Static(name, tuple(tools))


def gated_tools(
    source: ToolProvider | Sequence[Tool],
    predicate: Callable[[Tool, ToolProviderContext], bool],
    *,
    name: str | None = None,
) -> ToolProvider:
    """The tools of ``source`` for which ``predicate(tool, ctx)`` is True at this iteration."""
    if not callable(predicate):
        raise UsageError("gated_tools(source, predicate): predicate must be callable")
    provider = source if isinstance(source, ToolProvider) else static_tools(*source)
    return _Gated(name or f"gated({provider.name})", provider, predicate)
