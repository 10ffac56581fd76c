"""What the HTTP providers share: reading a vendor's error into a typed error, keeping one
client per event loop, and the small wire conventions both vendors follow."""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
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
from afcore.secrets import shorten

__all__ = [
    "PerLoop",
    "VendorError",
    "first_line",
    "header_request_id",
    "read_error",
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
    that opened them: ``Agent.run`` on one thread reuses that thread's loop, and so the
    client and its connections; another thread, or an ``arun()`` on the caller's own loop,
    gets a client of its own.

    ``close`` closes a client: given for the clients the provider makes, left out for one it
    was handed (its owner's to close). :meth:`close` and :meth:`aclose` close the client held
    now, on the loop it belongs to; the next :meth:`get` makes a new one."""

    def __init__(
        self, make: Callable[[], T], close: Callable[[T], Coroutine[Any, Any, None]] | None = None
    ) -> None:
        self._make = make
        self._close = close
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._value: T | None = None

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        if self._value is None or self._loop is None or self._loop() is not loop:
            self._value = self._make()
            self._loop = weakref.ref(loop)
        return self._value

    def _take(self) -> tuple[T | None, asyncio.AbstractEventLoop | None]:
        """The client held now and its loop, let go of (None when there is none to close)."""
        value, loop = self._value, self._loop() if self._loop is not None else None
        self._value, self._loop = None, None
        return (value, loop) if self._close is not None else (None, None)

    def close(self) -> None:
        """Close the client held now on its loop: an idle loop (a thread's, kept between its
        sync runs) is run for it, a loop running on another thread is handed the closing and
        waited for. A loop that has ended took its connections' loop with it: the client is
        let go. Inside a running event loop this refuses: await :meth:`aclose` there."""
        if self._value is None:
            return
        if asyncio._get_running_loop() is not None:
            raise UsageError(
                "close() was called inside a running event loop; await aclose() instead"
            )
        value, loop = self._take()
        if value is None or self._close is None or loop is None or loop.is_closed():
            return
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(self._close(value), loop).result()
        else:
            loop.run_until_complete(self._close(value))

    async def aclose(self) -> None:
        """Close the client held now: awaited here when it belongs to this loop, else closed
        as :meth:`close` does, from a worker thread."""
        loop = self._loop() if self._loop is not None else None
        if self._value is None:
            return
        if loop is not asyncio.get_running_loop():
            await asyncio.to_thread(self.close)
            return
        value, _ = self._take()
        if value is not None and self._close is not None:
            await self._close(value)


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
            return shorten(line, _LINE_MAX)
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


@dataclass(frozen=True, slots=True)
class VendorError:
    """What a vendor's error body says, read from any of the shapes vendors use:
    ``{"error": {"type", "message", ...}}`` (Anthropic, OpenAI, Groq), ``{"error": {"code":
    400, "message", "metadata"}}`` (OpenRouter), ``{"error": {"code", "message", "status"}}``
    (Google, sometimes inside a list), ``{"error": "..."}`` (several local servers),
    ``{"message": "..."}`` and ``{"detail": ...}`` (servers built on FastAPI)."""

    type: str | None = None
    """The vendor's word for the error: its ``type``, else a ``code`` or ``status`` that
    is a word (a number is a status, never a type)."""
    message: str | None = None
    status: int | None = None
    """A status the body named (``status_code``, a numeric ``code``): how an error sent
    inside a 200 stream says what it would have been."""
    words: frozenset[str] = frozenset()
    """Every word the body classifies the error with (type, code, status)."""
    details: Mapping[str, Any] | None = None
    """The error object's other fields, as sent."""
    request_id: str | None = None
    refused: tuple[str, ...] = ()
    """Request fields the server said it does not accept."""


def read_error(body: object) -> VendorError:
    if isinstance(body, list) and body and isinstance(body[0], Mapping):
        body = body[0]  # Google's OpenAI-compatible endpoint wraps its error in a list
    if not isinstance(body, Mapping):
        return VendorError()
    rid = body.get("request_id")
    request_id = rid if isinstance(rid, str) and rid else None
    if "detail" in body and "error" not in body:
        detail = body["detail"]
        said = detail if isinstance(detail, str) else orjson.dumps(detail, default=str).decode()
        return VendorError(
            message=said,
            details={"detail": detail},
            request_id=request_id,
            refused=_refused_fields(detail, said),
        )
    error = body.get("error", body)
    if isinstance(error, str):
        return VendorError(
            message=error, request_id=request_id, refused=_refused_fields(None, error)
        )
    if not isinstance(error, Mapping):
        return VendorError(request_id=request_id)
    words: list[str] = []
    status: int | None = None
    for key in ("type", "code", "status", "status_code"):
        value = error.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int):
            if key != "type" and 100 <= value <= 599 and status is None:
                status = value
        elif isinstance(value, str) and value:
            if value.isdecimal():
                number = int(value)
                if key != "type" and 100 <= number <= 599 and status is None:
                    status = number
            elif key != "status_code":
                words.append(value)
    raw_message = error.get("message")
    message: str | None = None
    if isinstance(raw_message, str):
        message = raw_message
    elif raw_message is not None:
        message = orjson.dumps(raw_message, default=str).decode()
    details = {k: v for k, v in error.items() if k not in ("type", "message")}
    return VendorError(
        type=words[0] if words else None,
        message=message,
        status=status,
        words=frozenset(words),
        details=details or None,
        request_id=request_id,
        refused=_refused_fields(error.get("detail"), message or ""),
    )


_REFUSED_TEXT = (
    # OpenAI: "Unrecognized request argument supplied: stream_options"
    re.compile(r"[Uu]nrecognized request arguments? supplied: ([\w.]+(?:, *[\w.]+)*)"),
    # pydantic's errors as Python reprs (vLLM and others relay them in the message)
    re.compile(r"'type': 'extra_forbidden', 'loc': \((?:'body', )?'([\w.]+)'"),
    re.compile(r'"type": ?"extra_forbidden", ?"loc": ?\[(?:"body", ?)?"([\w.]+)"'),
    re.compile(r"[Uu]nknown (?:parameter|field|argument)s?: '?([\w.]+)"),
)


def _refused_fields(detail: object, message: str) -> tuple[str, ...]:
    """The request fields a server refused, from pydantic's structured errors (FastAPI's
    ``detail``) or from the wording of the better-known refusals."""
    found: list[str] = []
    if isinstance(detail, list):
        for item in detail:
            if not isinstance(item, Mapping) or item.get("type") != "extra_forbidden":
                continue
            loc = item.get("loc")
            if isinstance(loc, list | tuple) and loc:
                names = [str(p) for p in loc if p != "body"]
                if names:
                    found.append(".".join(names))
    if message and not found:
        for rx in _REFUSED_TEXT:
            for match in rx.finditer(message):
                found.extend(n.strip() for n in match.group(1).split(","))
            if found:
                break
    return tuple(dict.fromkeys(f for f in found if f))


_OVERLOADED = frozenset({"overloaded_error"})
_RATE_LIMITED = frozenset({"rate_limit_error", "rate_limit_exceeded", "RESOURCE_EXHAUSTED"})
_SERVER = frozenset({"api_error", "server_error", "internal_error", "INTERNAL", "UNAVAILABLE"})
_BAD_REQUEST = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "invalid_api_key",
        "tool_use_failed",
        "INVALID_ARGUMENT",
        "PERMISSION_DENIED",
        "NOT_FOUND",
        "UNAUTHENTICATED",
    }
)


def _error_class(status: int | None, words: frozenset[str]) -> type[ProviderError]:
    if status == 529 or words & _OVERLOADED:
        return OverloadedError
    if status == 429 or words & _RATE_LIMITED:
        return RateLimitedError
    if (status is not None and status >= 500) or words & _SERVER:
        return ServerError
    if (status is not None and 400 <= status < 500) or words & _BAD_REQUEST:
        return BadRequestError
    return ProviderError


def header_request_id(headers: Mapping[str, str] | None) -> str | None:
    """The vendor's id for the request, from the headers vendors put it in."""
    if not headers:
        return None
    for name in ("request-id", "x-request-id"):
        value = headers.get(name)
        if value:
            return value
    return None


def _refusal(refused: tuple[str, ...], hints: Mapping[str, str] | None) -> str:
    if not refused:
        return ""
    names = ", ".join(refused)
    said = f" (the server does not accept the field{'s' if len(refused) > 1 else ''} {names}"
    hint = next((hints[f] for f in refused if hints and f in hints), None)
    return said + (f"; {hint})" if hint else ")")


def status_error(
    provider: str,
    status: int,
    body: object,
    *,
    headers: Mapping[str, str] | None = None,
    hints: Mapping[str, str] | None = None,
) -> ProviderError:
    """The typed error for an HTTP error answer. ``body`` is the parsed JSON, or the text
    when it was not JSON: then the message holds the status and the body's first line.
    ``hints`` say how to leave out a field af sends on its own, should a server refuse it."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    rid = header_request_id(headers)
    if isinstance(body, str):
        text = body
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            line = first_line(text)
            cls = _error_class(status, frozenset())
            said = f"with a body that is not JSON: {line}" if line else "with an empty body"
            return cls(
                f"{provider} answered {status} {said}",
                provider=provider,
                status=status,
                vendor_message=line or None,
                retry_after=retry_after(headers),
                request_id=rid,
            )
    vendor = read_error(body)
    cls = _error_class(status, vendor.words)
    what = f"{status} {vendor.type}" if vendor.type else str(status)
    text = (
        first_line(vendor.message)
        if vendor.message
        else first_line(orjson.dumps(body, default=str).decode())
    )
    return cls(
        f"{provider} answered {what}: {text}{_refusal(vendor.refused, hints)}",
        provider=provider,
        status=status,
        error_type=vendor.type,
        vendor_message=vendor.message,
        retry_after=retry_after(headers),
        request_id=vendor.request_id or rid,
        details=vendor.details,
        refused_fields=vendor.refused,
    )


def stream_error(
    provider: str,
    body: object,
    *,
    mid_stream: bool,
    request_id: str | None = None,
    streamed: bool = True,
) -> ProviderError:
    """The typed error for an error the vendor sent inside a 200 answer, a stream
    (``streamed``) or a body: of the kind the status it names (``status_code``, a numeric
    ``code``) or its type says."""
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            body = {"error": {"message": body}}
    vendor = read_error(body)
    cls = _error_class(vendor.status, vendor.words)
    where = (
        ("mid-stream" if mid_stream else "at the start of its stream")
        if streamed
        else "in a 200 answer"
    )
    said = " ".join(str(w) for w in (vendor.status, vendor.type) if w is not None)
    what = f" ({said})" if said else ""
    message = first_line(vendor.message or "") or "no message"
    return cls(
        f"{provider} sent an error {where}{what}: {message}",
        provider=provider,
        status=vendor.status,
        error_type=vendor.type,
        vendor_message=vendor.message,
        mid_stream=mid_stream,
        request_id=vendor.request_id or request_id,
        details=vendor.details,
    )
