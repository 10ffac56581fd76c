"""An agent's governance, as the builder assembled it and the loop reads it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from afcore.governance._contract import OutputContract
from afcore.governance._verbs import hooks_of, link_name
from afcore.recording._models import MiddlewareInfo, trusted

__all__ = ["NO_GOVERNANCE", "Governance"]

_info = trusted(MiddlewareInfo)


@dataclass(frozen=True)
class Governance:
    """The tool and message chains (each link with its name, each hook once resolved), and
    the answer's contract."""

    tool_links: tuple[Any, ...] = ()
    message_links: tuple[Any, ...] = ()
    contract: OutputContract | None = None
    on_call: tuple[tuple[str, Any], ...] = field(init=False)
    """(name, hook) of each link with ``on_tool_call``, in call order."""
    on_result: tuple[tuple[str, Any], ...] = field(init=False)
    """(name, hook) of each link with ``on_tool_result``, in call order (walked backwards)."""
    on_message: tuple[tuple[str, Any], ...] = field(init=False)

    def __post_init__(self) -> None:
        def hooked(links: Sequence[Any], hook: str, where: str) -> tuple[tuple[str, Any], ...]:
            return tuple(
                (link_name(link, where), getattr(link, hook))
                for link in links
                if callable(getattr(link, hook, None))
            )

        object.__setattr__(self, "on_call", hooked(self.tool_links, "on_tool_call", "tool"))
        object.__setattr__(self, "on_result", hooked(self.tool_links, "on_tool_result", "tool"))
        object.__setattr__(self, "on_message", hooked(self.message_links, "on_message", "message"))

    @property
    def settles(self) -> bool:
        """Whether an answer goes through the output chain or the contract before it is one."""
        return bool(self.on_message) or self.contract is not None

    def describe_tools(self) -> list[MiddlewareInfo]:
        return [_info(name=link_name(x, "tool"), hooks=list(hooks_of(x))) for x in self.tool_links]

    def describe_messages(self) -> list[MiddlewareInfo]:
        return [
            _info(name=link_name(x, "message"), hooks=list(hooks_of(x))) for x in self.message_links
        ]


NO_GOVERNANCE = Governance()
