"""The interface every model provider implements, the mock included."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Self

from afcore.errors import MissingKeyError
from afcore.messages import Request, Response

__all__ = [
    "Provider",
    "keys_when_called",
    "keyless",
    "StreamEvent",
    "StreamHandler",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallStart",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text, as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of the model's thinking, as it streams in."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStart:
    """The model has begun a tool call; its arguments are still streaming."""

    id: str
    name: str


StreamEvent = TextDelta | ThinkingDelta | ToolCallStart
StreamHandler = Callable[[StreamEvent], None]


_KEYLESS: ContextVar[bool] = ContextVar("af_keyless", default=False)


@contextmanager
def keys_when_called() -> Iterator[None]:
    """Within this block, a provider made without its API key is made all the same, and
    asks for the key only if it is called (:class:`MissingKeyError` then): for loading an
    agent whose calls will be answered from a recording (``af replay``), where no key is
    needed and none may be at hand."""
    token = _KEYLESS.set(True)
    try:
        yield
    finally:
        _KEYLESS.reset(token)


def keyless(missing: MissingKeyError) -> MissingKeyError | None:
    """For a provider factory that found no key: ``missing`` to keep for the first call,
    within :func:`keys_when_called`; raised at once otherwise."""
    if not _KEYLESS.get():
        raise missing
    return missing


class Provider(ABC):
    """Turns a provider-neutral :class:`Request` into one vendor's call and back.

    A provider streams when it can, reporting progress through ``on_stream``, and always
    returns the complete :class:`Response`: the recording stores final content, not tokens.
    """

    name: str = "provider"
    missing_key: MissingKeyError | None = None
    """Set on a provider made without its key (see :func:`keys_when_called`): what its
    first call raises instead of reaching the vendor."""

    @abstractmethod
    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        """Send one request and return the whole response. Raise ``ProviderError`` on failure."""

    def check_params(self, params: Mapping[str, Any]) -> None:
        """Refuse, with a :class:`UsageError`, params this provider is known to be unable to
        send (a thinking budget to a server that takes none). Agents call it when they are
        built, so the mistake shows before any call. The default refuses nothing."""
        return None

    def describe(self) -> dict[str, Any]:
        """What the recording's header says about this provider. Never include credentials."""
        return {"name": self.name}

    def continue_after(self, calls: int) -> None:  # noqa: B027 - a hook most leave alone
        """A paused run is continued, with this provider, after ``calls`` model calls. A
        provider that answers from a script (the mock) takes up the script where the run
        left it when it has answered nothing yet (a new process); others ignore it."""

    def secrets(self) -> list[str]:
        """Values this provider authenticates with, so the recorder can keep them out of the
        file even when they turn up somewhere unexpected (a tool echoing its environment)."""
        return []

    def close(self) -> None:  # noqa: B027 - a hook: most providers hold nothing open
        """Close what this provider opened (its HTTP client, and the connections it keeps
        between calls), on the event loop the client belongs to; an HTTP client it was given
        stays open, its owner's to close. Safe to call twice; a later call opens a new client.
        Inside a running event loop, await :meth:`aclose` instead. ``with provider:`` closes
        it at the end of the block. A client made on a loop that has since closed (one
        ``asyncio.run`` made) cannot be closed on it: close the provider before that loop
        ends (``async with provider:``)."""

    async def aclose(self) -> None:  # noqa: B027 - a hook, as close()
        """:meth:`close`, awaited: from async code (``async with provider:`` calls it)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
