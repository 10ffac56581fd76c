"""A provider that answers from a recording: the reply a recorded run got for a call (its
text, thinking with its signatures, tool calls with their ids, content kept for its vendor,
usage, stop reason, model and response id), or the error it got, raised again. It never
opens a connection and needs no key.

``afcore.replay`` makes one for each call it answers, after checking that the call is the
recorded one; on its own it serves any recorded outcomes, in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from afcore import errors
from afcore.errors import MockExhaustedError, ProviderError
from afcore.messages import (
    OpaqueBlock,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    block_from_json,
)
from afcore.providers._base import (
    Provider,
    StreamHandler,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)

__all__ = ["Outcome", "RecordedFailure", "ReplayProvider", "recorded_error", "recorded_response"]

Outcome: TypeAlias = Response | BaseException
"""What a recorded call got: its reply, or the error its provider raised."""

_STREAM_CHUNK = 64
"""Characters per streamed piece of recorded text: a replay streams as a provider would,
in pieces, so a stream handler sees what it saw."""


class RecordedFailure(Exception):
    """A recorded call failed with an exception that was not a provider's error (a bug in
    a provider of the application's): raised again under its class's name, so that rules
    see what they saw (``error_kind`` ``unknown``) and the loop words it as it did."""


_WRAPPED = re.compile(r".* failed on call \d+: (\w+): (.*)", re.DOTALL)
"""How the loop words a provider's exception that is not a provider error."""


def _failure(kind: str, message: str) -> RecordedFailure:
    found = _WRAPPED.fullmatch(message)
    name, said = (found.group(1), found.group(2)) if found else (kind, message)
    cls: type[RecordedFailure] = type(
        name if name.isidentifier() else "RecordedFailure", (RecordedFailure,), {}
    )
    return cls(said)


class ReplayProvider(Provider):
    """Answers each call with the next recorded outcome: a :class:`Response` is returned
    (streamed first when asked), an exception raised. ``name``: the provider it stands for,
    as a reliability rule or the recording names it."""

    def __init__(
        self,
        outcomes: Iterable[Outcome],
        *,
        name: str = "replay",
        describe: Mapping[str, Any] | None = None,
    ) -> None:
        self._outcomes = list(outcomes)
        self.name = name
        self._describe = dict(describe) if describe is not None else {"name": name}
        self.calls = 0
        """How many calls this provider has answered (or failed as recorded)."""

    def describe(self) -> dict[str, Any]:
        return {**self._describe, "replay": True}

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        self.calls += 1
        if self.calls > len(self._outcomes):
            raise MockExhaustedError(
                f"the recording answers {len(self._outcomes)} "
                f"call{'s' if len(self._outcomes) != 1 else ''} here and call {self.calls} "
                "asked for another",
                provider=self.name,
                call=self.calls,
            )
        outcome = self._outcomes[self.calls - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        if on_stream is not None:
            _stream(outcome, on_stream)
        return outcome


def _stream(response: Response, on_stream: StreamHandler) -> None:
    for block in response.content:
        if isinstance(block, TextBlock):
            for at in range(0, len(block.text), _STREAM_CHUNK):
                on_stream(TextDelta(block.text[at : at + _STREAM_CHUNK]))
        elif isinstance(block, ThinkingBlock) and not block.redacted:
            for at in range(0, len(block.thinking), _STREAM_CHUNK):
                on_stream(ThinkingDelta(block.thinking[at : at + _STREAM_CHUNK]))
        elif isinstance(block, ToolCall):
            on_stream(ToolCallStart(block.id, block.name))
        elif isinstance(block, OpaqueBlock):
            continue  # kept for its vendor; nothing of it streams to a person


def recorded_response(
    message: Mapping[str, Any],
    *,
    stop_reason: str,
    usage: Mapping[str, Any] | None,
    model: str | None = None,
    response_id: str | None = None,
    unsent_params: Iterable[str] = (),
) -> Response:
    """A reply as a recording holds it (its assistant message, in canonical JSON, and what
    the reply record says of it) made a :class:`Response` again."""
    blocks = tuple(block_from_json(b) for b in message.get("content") or ())
    return Response(
        content=blocks,
        stop_reason=stop_reason,
        usage=None
        if usage is None
        else Usage(
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            cache_read_tokens=int(usage.get("cache_read_tokens", 0)),
            cache_write_tokens=int(usage.get("cache_write_tokens", 0)),
            estimated=bool(usage.get("estimated", False)),
        ),
        model=model,
        response_id=response_id,
        unsent_params=tuple(unsent_params),
    )


def recorded_error(
    error: Mapping[str, Any], *, provider: str, call: int | None = None
) -> BaseException:
    """An error as a recording holds it (an ``error`` event's ``error``) made an exception
    again: the provider error of the class it names, with what the vendor said (status,
    type, request id, details, retry-after, mid-stream), or a :class:`RecordedFailure` for
    an exception that was not a provider's."""
    kind = str(error.get("kind", "ProviderError"))
    message = str(error.get("message", ""))
    cls = getattr(errors, kind, None)
    if error.get("reason") == "unknown" or not (
        isinstance(cls, type) and issubclass(cls, ProviderError)
    ):
        return _failure(kind, message)
    status = error.get("status")
    retry_after = error.get("retry_after")
    details = error.get("details")
    return cls(
        message,
        provider=provider,
        call=call,
        status=status if isinstance(status, int) else None,
        error_type=error.get("error_type") if isinstance(error.get("error_type"), str) else None,
        retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
        mid_stream=bool(error.get("mid_stream", False)),
        request_id=error.get("request_id") if isinstance(error.get("request_id"), str) else None,
        details=details if isinstance(details, Mapping) else None,
    )
