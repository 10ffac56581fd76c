"""A scripted provider: build and test agents offline, with the same interface as the real ones."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

from afcore.errors import MockExhaustedError, UsageError
from afcore.messages import (
    AssistantMessage,
    Block,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from afcore.providers._base import Provider, StreamHandler, TextDelta, ToolCallStart

__all__ = ["MockProvider", "mock"]

Reply: TypeAlias = str | Mapping[str, Any] | Response
Respond: TypeAlias = Callable[[Request], Reply | Awaitable[Reply]]

_REPLY_KEYS = {"content", "tool_calls", "usage", "stop_reason", "thinking"}
_TOOL_CALL_KEYS = {"id", "name", "args"}


def mock(
    reply: Reply | None = None,
    replies: Sequence[Reply] | None = None,
    respond: Respond | None = None,
    usage: Mapping[str, int] | None = None,
    authoritative: bool = False,
) -> MockProvider:
    """A provider that answers from a script instead of a model.

    Give exactly one of:

    - ``reply``: the same reply to every call;
    - ``replies``: one reply per call, consumed in order (across runs of the same provider);
      asking for more raises :class:`MockExhaustedError` naming the call;
    - ``respond(request)``: a function (sync or async) computing each reply.

    A reply is a string (the answer text), a :class:`Response`, or a mapping
    ``{"content": str, "tool_calls": [{"id", "name", "args"}], "usage": {"input_tokens",
    "output_tokens"}, "stop_reason": str, "thinking": str}``. Usage given in the reply or as
    ``usage=`` is reported as the provider's own count; without it the mock estimates
    (about four characters a token) and the recording marks the numbers as estimated.
    Estimates are not counts: a window strategy with a token threshold refuses them
    (:class:`CompactionUnmeasurableError`) unless ``authoritative=True`` says to take the
    mock's estimates as the provider's own numbers, for exercising such strategies offline.
    """
    given = [
        name
        for name, v in (("reply", reply), ("replies", replies), ("respond", respond))
        if v is not None
    ]
    if len(given) != 1:
        raise UsageError(
            "mock() takes exactly one of reply=, replies= or respond=; "
            + (f"got {' and '.join(given)}" if given else "got none")
        )
    script: list[Response] | None = None
    if replies is not None:
        if isinstance(replies, str | bytes) or not isinstance(replies, Sequence):
            raise UsageError("mock(replies=...) takes a list of replies")
        script = [
            _to_response(r, f"replies[{i}]", usage, tag=f"r{i + 1}") for i, r in enumerate(replies)
        ]
    fixed = _to_response(reply, "reply", usage, tag="r") if reply is not None else None
    return MockProvider(
        script=script, fixed=fixed, respond=respond, usage=usage, authoritative=authoritative
    )


class MockProvider(Provider):
    """See :func:`mock`."""

    name = "mock"

    def __init__(
        self,
        *,
        script: list[Response] | None,
        fixed: Response | None,
        respond: Respond | None,
        usage: Mapping[str, int] | None,
        authoritative: bool = False,
    ) -> None:
        self._script = script
        self._fixed = fixed
        self._respond = respond
        self._usage = usage
        self._parsed: Usage | None = None
        """``usage`` as a Usage, once a reply has used it (replies are made per call)."""
        self._authoritative = authoritative
        self.calls = 0
        """How many calls this provider has answered (or refused)."""

    def continue_after(self, calls: int) -> None:
        if self.calls == 0 and self._script is not None:
            # A fresh mock (a new process) continuing a paused run: the replies the run
            # used before the pause are spent.
            self.calls = min(calls, len(self._script))

    def describe(self) -> dict[str, Any]:
        mode = "replies" if self._script is not None else "reply" if self._fixed else "respond"
        out: dict[str, Any] = {"name": self.name, "mode": mode}
        if self._script is not None:
            out["replies"] = len(self._script)
        if self._authoritative:
            out["authoritative"] = True
        return out

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        self.calls += 1
        n = self.calls
        if self._script is not None:
            if n > len(self._script):
                raise MockExhaustedError(
                    f"the mock has {len(self._script)} scripted "
                    f"{'reply' if len(self._script) == 1 else 'replies'} and call {n} asked for "
                    "another; add a reply or end the run sooner",
                    provider=self.name,
                    call=n,
                )
            response = self._script[n - 1]
        elif self._fixed is not None:
            response = self._fixed
        else:
            assert self._respond is not None
            produced = self._respond(request)
            if type(produced) not in (dict, str) and inspect.isawaitable(produced):
                produced = await produced
            response = _to_response(
                produced, f"respond() for call {n}", self._usage, tag=f"c{n}", parsed=self._parsed
            )
            if self._parsed is None and self._usage is not None:
                own = isinstance(produced, Mapping) and produced.get("usage")
                if isinstance(produced, str) or (isinstance(produced, Mapping) and not own):
                    self._parsed = response.usage  # made of ``usage``: the next replies share it
        if response.usage is None:
            response = Response(
                content=response.content,
                stop_reason=response.stop_reason,
                usage=_estimate(request, response, counted=self._authoritative),
                model=response.model,
            )
        if on_stream is not None:
            for block in response.content:
                if isinstance(block, TextBlock):
                    on_stream(TextDelta(block.text))
                elif isinstance(block, ToolCall):
                    on_stream(ToolCallStart(block.id, block.name))
        return response


def _to_response(
    reply: object,
    where: str,
    usage: Mapping[str, int] | None,
    *,
    tag: str,
    parsed: Usage | None = None,
) -> Response:
    """``reply`` as a Response; ``parsed``: ``usage`` already made a Usage."""
    if isinstance(reply, Response):
        return reply
    if isinstance(reply, str):
        return Response(
            content=(TextBlock(reply),),
            stop_reason="end_turn",
            usage=_usage(usage, where) if parsed is None else parsed,
        )
    if type(reply) is not dict and not isinstance(reply, Mapping):
        raise UsageError(
            f"mock {where}: a reply is a string or a mapping, not {type(reply).__name__}"
        )
    if not _REPLY_KEYS.issuperset(reply):
        unknown = set(reply) - _REPLY_KEYS
        raise UsageError(
            f"mock {where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
            f"a reply may have {', '.join(sorted(_REPLY_KEYS))}"
        )
    blocks: list[Block] = []
    if reply.get("thinking"):
        blocks.append(ThinkingBlock(str(reply["thinking"]), signature="mock"))
    if reply.get("content"):
        blocks.append(TextBlock(str(reply["content"])))
    calls = reply.get("tool_calls") or []
    for i, call in enumerate(calls):
        if (type(call) is not dict and not isinstance(call, Mapping)) or "name" not in call:
            raise UsageError(f"mock {where}: tool_calls[{i}] needs at least a name")
        if not _TOOL_CALL_KEYS.issuperset(call):
            extra = set(call) - _TOOL_CALL_KEYS
            raise UsageError(f"mock {where}: tool_calls[{i}] has unknown key(s) {sorted(extra)}")
        args = call.get("args", {})
        if type(args) is not dict and not isinstance(args, Mapping):
            raise UsageError(f"mock {where}: tool_calls[{i}].args must be a mapping")
        blocks.append(
            ToolCall(
                id=str(call.get("id") or f"mock-{tag}-{i + 1}"),
                name=str(call["name"]),
                args=dict(args),
                id_synthesized="id" not in call,
            )
        )
    stop = reply.get("stop_reason") or ("tool_use" if calls else "end_turn")
    own = reply.get("usage")
    return Response(
        content=tuple(blocks),
        stop_reason=str(stop),
        usage=_usage(own or usage, where) if own or parsed is None else parsed,
    )


def _usage(usage: Mapping[str, int] | None, where: str) -> Usage | None:
    if usage is None:
        return None
    try:
        return Usage(
            input_tokens=int(usage.get("input_tokens", 0)),
            output_tokens=int(usage.get("output_tokens", 0)),
            cache_read_tokens=int(usage.get("cache_read_tokens", 0)),
            cache_write_tokens=int(usage.get("cache_write_tokens", 0)),
        )
    except (TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"mock {where}: usage must map token kinds to integers ({e})") from None


def _chars(message: object) -> int:
    if isinstance(message, AssistantMessage):
        return sum(_block_chars(b) for b in message.content)
    if isinstance(message, ToolResultMessage):
        return len(message.content)
    return len(getattr(message, "content", ""))


def _block_chars(b: Block) -> int:
    if isinstance(b, TextBlock):
        return len(b.text)
    if isinstance(b, ToolCall):
        return len(str(b.args)) + len(b.name)
    if isinstance(b, ThinkingBlock):
        return len(b.thinking)
    return len(str(b.data))


def _estimate(request: Request, response: Response, *, counted: bool = False) -> Usage:
    """About four characters a token: a rough guess, marked as such in the recording unless
    the mock was told its numbers are authoritative (``counted``)."""
    chars = sum(len(s.text) for s in request.system)
    chars += sum(_chars(m) for m in request.messages)
    chars += sum(len(t.description) + len(str(t.input_schema)) for t in request.tools)
    out = _chars(AssistantMessage(response.content))
    return Usage(
        input_tokens=max(1, chars // 4), output_tokens=max(1, out // 4), estimated=not counted
    )
