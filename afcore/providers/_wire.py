"""What the HTTP providers share: reading a vendor's error into a typed error, keeping one
client per event loop, and the small wire conventions both vendors follow."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import orjson

from afcore.errors import (
    BadRequestError,
    OverloadedError,
    ProviderError,
    RateLimitedError,
    ServerError,
    UsageError,
)

__all__ = [
    "PerLoop",
    "first_line",
    "reserved_params",
    "retry_after",
    "status_error",
    "stream_error",
]

_LINE_MAX = 200
_RESERVED = ("model", "messages", "system", "tools", "stream")
"""Body fields af composes itself: a param by one of these names would replace the call."""

T = TypeVar("T")


class PerLoop(Generic[T]):
    """One client per event loop. An HTTP client's pooled connections belong to the loop
    that opened them, and ``Agent.run`` starts a new loop for every run."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._value: T | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self._value is None or self._loop is None or self._loop() is not loop:
            self._value = self._make()
            self._loop = weakref.ref(loop)
        return self._value


def reserved_params(provider: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``params``, refused when one would replace a field af composes."""
    clash = [k for k in _RESERVED if k in params]
    if clash:
        raise UsageError(
            f"the {provider} provider composes {', '.join(clash)} itself; "
            "leave them out of the params"
        )
    return dict(params)


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, cut to a readable length: enough to say what
    an HTML error page or a proxy's complaint was, never the whole page."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= _LINE_MAX else line[: _LINE_MAX - 3] + "..."
    return ""


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the vendor asked to wait (``retry-after-ms`` or ``retry-after`` in seconds);
    None when it did not say, or said it as a date."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if seconds >= 0:
            return seconds
    return None


def _vendor_error(body: object) -> tuple[str | None, str | None]:
    """The error type and message from a parsed error body, in the shapes vendors use:
    ``{"error": {"type", "message"}}`` (Anthropic, OpenAI), ``{"error": "..."}`` (several
    local servers) or ``{"message": "..."}``."""
    if not isinstance(body, Mapping):
        return None, None
    error = body.get("error", body)
    if isinstance(error, str):
        return None, error
    if not isinstance(error, Mapping):
        return None, None
    kind = error.get("type") or error.get("code")
    message = error.get("message")
    return (
        str(kind) if kind is not None else None,
        str(message) if message is not None else None,
    )


def _error_class(status: int | None, error_type: str | None) -> type[ProviderError]:
    if status == 529 or error_type == "overloaded_error":
        return OverloadedError
    if status == 429 or error_type in ("rate_limit_error", "rate_limit_exceeded"):
        return RateLimitedError
    if (status is not None and status >= 500) or error_type in ("api_error", "server_error"):
        return ServerError
    if status is not None and 400 <= status < 500:
        return BadRequestError
    return ProviderError


def status_error(
    provider: str,
    status: int,
    body: object,
    *,
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """The typed error for an HTTP error answer. ``body`` is the parsed JSON, or the text
    when it was not JSON: then the message holds the status and the body's first line."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        text = body
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            line = first_line(text)
            cls = _error_class(status, None)
            said = f"with a body that is not JSON: {line}" if line else "with an empty body"
            return cls(
                f"{provider} answered {status} {said}",
                provider=provider,
                status=status,
                vendor_message=line or None,
                retry_after=retry_after(headers),
            )
    error_type, message = _vendor_error(body)
    cls = _error_class(status, error_type)
    what = f"{status} {error_type}" if error_type else str(status)
    text = first_line(message) if message else first_line(orjson.dumps(body).decode())
    return cls(
        f"{provider} answered {what}: {text}",
        provider=provider,
        status=status,
        error_type=error_type,
        vendor_message=message,
        retry_after=retry_after(headers),
    )


def stream_error(provider: str, body: object, *, mid_stream: bool) -> ProviderError:
    """The typed error for an error the vendor sent inside a stream (the HTTP status was
    200, so only the error's type says what happened)."""
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            body = {"error": {"message": body}}
    error_type, message = _vendor_error(body)
    cls = _error_class(None, error_type)
    where = "mid-stream" if mid_stream else "at the start of its stream"
    what = f" ({error_type})" if error_type else ""
    return cls(
        f"{provider} sent an error {where}{what}: {first_line(message or '') or 'no message'}",
        provider=provider,
        error_type=error_type,
        vendor_message=message,
        mid_stream=mid_stream,
    )
