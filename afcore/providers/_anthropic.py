"""Anthropic's Messages API, through the official SDK, streamed or not."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from afcore.errors import (
    ConnectionFailedError,
    MissingKeyError,
    ProviderError,
    StreamCutError,
    UsageError,
)
from afcore.messages import (
    AssistantMessage,
    Block,
    CacheBreakpoint,
    Message,
    OpaqueBlock,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from afcore.providers._base import (
    Provider,
    StreamEvent,
    StreamHandler,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    keyless,
)
from afcore.providers._wire import (
    PerLoop,
    first_line,
    header_request_id,
    reserved_params,
    status_error,
    stream_error,
)
from afcore.secrets import redact_url, url_passwords

if TYPE_CHECKING:
    import anthropic as sdk
    import httpx2

__all__ = ["API_KEY_ENV", "AnthropicProvider", "anthropic"]

API_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_CACHE_MARKERS = 4
"""The Messages API takes at most four `cache_control` markers in one request."""


def anthropic(
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    max_tokens: int = 4096,
    *,
    stream: bool | None = None,
    timeout: float = 600.0,
    max_retries: int = 0,
    http_client: httpx2.AsyncClient | None = None,
) -> AnthropicProvider:
    """A provider for Anthropic's Messages API, on the official ``anthropic`` SDK.

    ``model`` is used when the request names none. The key is ``api_key`` or the
    ``ANTHROPIC_API_KEY`` environment variable, nothing else; without one this raises
    :class:`UsageError` at once, before any call. ``max_tokens`` is sent unless the
    request's params say otherwise.

    Calls stream when ``complete`` is given a stream handler (``stream=True`` or ``False``
    decides for every call instead). The SDK does not retry (``max_retries=0``): each
    attempt is for the loop to decide and record. ``http_client`` replaces the SDK's own
    HTTP client (an ``httpx2.AsyncClient``; give it a mock transport to test offline).

    Request params go to the API as body fields (``tool_choice``, ``stop_sequences``,
    ``metadata``, ``cache_control``, ...), except ``max_tokens`` (overrides the default)
    and ``thinking``: an int asks for thinking with that token budget, a mapping is sent as
    given (``{"type": "enabled", "budget_tokens": 2048}``).
    """
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    missing = None
    if not key:
        missing = keyless(MissingKeyError("Anthropic", API_KEY_ENV, "anthropic"))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise UsageError(
            f"anthropic(max_tokens=...) must be a positive integer, got {max_tokens!r}"
        )
    provider = AnthropicProvider(
        model=model,
        api_key=key or "",
        base_url=base_url or DEFAULT_BASE_URL,
        max_tokens=max_tokens,
        stream=stream,
        timeout=timeout,
        max_retries=max_retries,
        http_client=http_client,
    )
    provider.missing_key = missing
    return provider


class AnthropicProvider(Provider):
    """See :func:`anthropic`."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str | None,
        api_key: str,
        base_url: str,
        max_tokens: int,
        stream: bool | None,
        timeout: float,
        max_retries: int,
        http_client: httpx2.AsyncClient | None,
    ) -> None:
        self.model = model
        """The model used when a request names none."""
        self.base_url = base_url
        self.max_tokens = max_tokens
        self._api_key = api_key
        self._stream = stream
        self._timeout = timeout
        self._max_retries = max_retries
        self._http_client = http_client
        # The SDK's client closes the HTTP client under it: one it was given is not af's.
        self._clients: PerLoop[sdk.AsyncAnthropic] = PerLoop(
            self._make_client, _close if http_client is None else None
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "base_url": redact_url(self.base_url)}
        if self.model:
            out["model"] = self.model
        out["max_tokens"] = self.max_tokens
        if self._stream is not None:
            out["stream"] = self._stream
        return out

    def secrets(self) -> list[str]:
        return [*([self._api_key] if self._api_key else []), *url_passwords(self.base_url)]

    def close(self) -> None:
        self._clients.close()

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _make_client(self) -> sdk.AsyncAnthropic:
        import anthropic as sdk

        # Every credential argument is explicit, so the SDK reads no environment variable or
        # profile file for credentials: the key is the one af was given, and no other.
        return sdk.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self._timeout,
            max_retries=self._max_retries,
            http_client=self._http_client,
        )

    def build_request(self, request: Request, *, stream: bool = False) -> dict[str, Any]:
        """The Messages API body for ``request``, as the SDK will send it."""
        model = request.model or self.model
        if not model:
            raise UsageError("the anthropic provider needs a model: pass model= to the agent")
        params = reserved_params(self.name, request.params)
        max_tokens = params.pop("max_tokens", self.max_tokens)
        thinking = _thinking(params.pop("thinking", None), max_tokens)
        marks = _cache_marks(request.cache)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "messages": _messages(request.messages, marks.get("messages", ())),
        }
        if request.system:
            body["system"] = _blocks_marked(
                [{"type": "text", "text": s.text} for s in request.system],
                marks.get("system", ()),
            )
        if request.tools:
            body["tools"] = _blocks_marked(
                [_tool(t) for t in request.tools],
                marks.get("tools", ()),
            )
        if thinking is not None:
            body["thinking"] = thinking
        body.update(params)
        body["stream"] = stream
        return body

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        import anthropic as sdk
        import httpx2

        if self.missing_key is not None:
            raise self.missing_key
        streaming = self._stream if self._stream is not None else on_stream is not None
        body = self.build_request(request, stream=streaming)
        core = {
            k: body.pop(k)
            for k in ("model", "max_tokens", "messages", "system", "tools")
            if k in body
        }
        del body["stream"]
        client = self._clients.get()
        try:
            # Core fields go as the SDK's own arguments; the rest of the params as extra body
            # fields, so a field this SDK version does not name still reaches the API.
            if not streaming:
                message = await client.messages.create(**core, stream=False, extra_body=body)
            else:
                events = await client.messages.create(**core, stream=True, extra_body=body)
        except sdk.APIStatusError as e:
            raise status_error(self.name, e.status_code, e.body, headers=e.response.headers) from e
        except (sdk.APIConnectionError, httpx2.TransportError) as e:
            raise ConnectionFailedError(
                f"{self.name} could not be reached at {redact_url(self.base_url)}: {_reason(e)}",
                provider=self.name,
            ) from e
        except (ValueError, TypeError, AttributeError, KeyError) as e:
            # The SDK could not read what came back (a body that is not the JSON it expects).
            raise ProviderError(
                f"{self.name} answered with a body af cannot read: {_reason(e)}",
                provider=self.name,
            ) from e
        if not streaming:
            return parse_message(message)
        return await self._read_stream(events, on_stream)

    async def _read_stream(self, events: Any, on_stream: StreamHandler | None) -> Response:
        import anthropic as sdk
        import httpx2

        state = _StreamState()
        iterator = events.__aiter__()
        try:
            while True:
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except sdk.APIStatusError as e:
                    # An `error` event inside a 200 stream.
                    raise stream_error(
                        self.name,
                        e.body,
                        mid_stream=state.events > 0,
                        request_id=header_request_id(e.response.headers),
                    ) from e
                except (httpx2.TransportError, sdk.APIConnectionError) as e:
                    raise self._broken(state, e) from e
                except Exception as e:
                    # Bytes the SDK's event reader could not make sense of.
                    raise self._broken(state, e) from e
                try:
                    emitted = state.handle(event)
                except (AttributeError, TypeError, KeyError, ValueError) as e:
                    raise ProviderError(
                        f"{self.name} streamed a {_event_type(event)} event af cannot read: "
                        f"{_reason(e)}",
                        provider=self.name,
                        mid_stream=state.events > 1,
                    ) from e
                # Outside the try: an exception from the stream handler is the caller's own.
                if emitted is not None and on_stream is not None:
                    on_stream(emitted)
        finally:
            await events.close()
        if state.events == 0:
            raise ConnectionFailedError(
                f"{self.name} answered with an empty stream", provider=self.name
            )
        if not state.stopped:
            raise StreamCutError(
                f"{self.name}'s stream ended after {state.events} events without message_stop",
                provider=self.name,
                mid_stream=True,
            )
        return state.response()

    def _broken(self, state: _StreamState, e: BaseException) -> ProviderError:
        if state.events == 0:
            return ConnectionFailedError(
                f"{self.name} closed the stream before it began: {_reason(e)}",
                provider=self.name,
            )
        return StreamCutError(
            f"{self.name}'s stream broke after {state.events} events: {_reason(e)}",
            provider=self.name,
            mid_stream=True,
        )


async def _close(client: sdk.AsyncAnthropic) -> None:
    await client.close()


def _event_type(event: Any) -> str:
    kind = getattr(event, "type", None)
    if kind is None and isinstance(event, Mapping):
        kind = event.get("type")
    return str(kind) if isinstance(kind, str) else "malformed"


def _reason(e: BaseException) -> str:
    """What went wrong with the connection, in a few words: the SDK's own wording is
    generic ("Connection error.") or a paragraph, so the transport's error speaks instead."""
    import anthropic as sdk

    if isinstance(e, sdk.APITimeoutError):
        return "timed out"
    if isinstance(e, sdk.APIConnectionError) and e.__cause__ is not None:
        e = e.__cause__
    text = first_line(str(e))
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _thinking(value: Any, max_tokens: Any) -> dict[str, Any] | None:
    if value is None or value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int | Mapping):
        raise UsageError(
            "the thinking param is a token budget (an int) or the API's thinking object, "
            f"got {type(value).__name__}"
        )
    thinking = (
        {"type": "enabled", "budget_tokens": value} if isinstance(value, int) else dict(value)
    )
    budget = thinking.get("budget_tokens")
    if isinstance(budget, int) and isinstance(max_tokens, int) and budget >= max_tokens:
        raise UsageError(
            f"the thinking budget ({budget} tokens) must be below max_tokens ({max_tokens}); "
            "raise max_tokens or lower the budget"
        )
    return thinking


def _tool(t: ToolSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": t.name,
        "description": t.description,
        "input_schema": dict(t.input_schema),
    }
    if t.strict:
        out["strict"] = True
    return out


def _cache_marks(cache: Sequence[CacheBreakpoint]) -> dict[str, set[int]]:
    # The API's cache prefix runs tools, system, messages; past the marker limit, the
    # latest markers are kept since they cover the longest prefixes.
    order = {"tools": 0, "system": 1, "messages": 2}
    kept = sorted(cache, key=lambda c: (order.get(c.slot, 3), c.index))[-MAX_CACHE_MARKERS:]
    marks: dict[str, set[int]] = {}
    for c in kept:
        marks.setdefault(c.slot, set()).add(c.index)
    return marks


def _blocks_marked(blocks: list[dict[str, Any]], marks: Any) -> list[dict[str, Any]]:
    for i in marks:
        if 0 <= i < len(blocks):
            blocks[i]["cache_control"] = {"type": "ephemeral"}
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in message.content:
        if isinstance(b, TextBlock):
            if b.text:  # the API refuses empty text blocks
                out.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolCall):
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.args})
        elif isinstance(b, OpaqueBlock):
            # A server tool's call or result goes back as it came (a paused turn needs it);
            # another vendor's content means nothing here.
            if b.wire == "anthropic":
                out.append(dict(b.data))
        elif b.redacted:
            if b.signature:
                out.append({"type": "redacted_thinking", "data": b.signature})
        elif b.signature:
            # Thinking goes back verbatim with its signature, as the API requires; thinking
            # without one (from another vendor) cannot be verified and is left out.
            out.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
    return out


def _messages(messages: Sequence[Message], marks: Any) -> list[dict[str, Any]]:
    """Turns alternate between user and assistant: tool results are user turns, and
    consecutive turns of one role are merged into one, tool results first."""
    out: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]]
    for i, m in enumerate(messages):
        if isinstance(m, UserMessage):
            role, blocks = "user", [{"type": "text", "text": m.content}]
        elif isinstance(m, ToolResultMessage):
            role = "user"
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": m.content,
                    "is_error": m.is_error,
                }
            ]
        else:
            role, blocks = "assistant", _assistant_blocks(m)
            if not blocks:
                continue
        if i in marks:
            # Not on thinking blocks, which cannot carry a marker.
            for b in reversed(blocks):
                if b["type"] not in ("thinking", "redacted_thinking"):
                    b["cache_control"] = {"type": "ephemeral"}
                    break
        if out and out[-1]["role"] == role:
            content = out[-1]["content"]
            for b in blocks:
                if b["type"] == "tool_result":
                    at = 0
                    while at < len(content) and content[at]["type"] == "tool_result":
                        at += 1
                    content.insert(at, b)
                else:
                    content.append(b)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _usage(u: Any) -> Usage | None:
    """af counts every input token of the request as input, cached or not; the API counts
    the uncached remainder, so the cache reads and writes are added back."""
    if u is None:
        return None
    read = _count(getattr(u, "cache_read_input_tokens", None))
    write = _count(getattr(u, "cache_creation_input_tokens", None))
    return Usage(
        input_tokens=_count(getattr(u, "input_tokens", None)) + read + write,
        output_tokens=_count(getattr(u, "output_tokens", None)),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def _count(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a token count that is not an integer: {value!r}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {type(value).__name__}, not text")
    return value


def _raw(b: Any) -> dict[str, Any]:
    """A block as the vendor sent it (the SDK keeps the fields it did not know)."""
    if isinstance(b, Mapping):
        return dict(b)
    # The fields that came, as they came: the SDK's model of a block it does not know may
    # hold values of other types than its fields say, which is not for a warning here.
    raw: dict[str, Any] = b.model_dump(
        mode="json", by_alias=True, exclude_unset=True, warnings=False
    )
    return raw


def _block(b: Any) -> Block:
    kind = b.type
    if kind == "text":
        return TextBlock(_text(b.text, "a text block's text"))
    if kind == "tool_use":
        args = b.input if b.input is not None else {}
        if not isinstance(args, Mapping):
            raise TypeError(f"tool call {b.id!r} has input that is not a JSON object")
        return ToolCall(
            id=_text(b.id, "a tool call's id"),
            name=_text(b.name, "a tool call's name"),
            args=dict(args),
        )
    if kind == "thinking":
        signature = b.signature or None
        return ThinkingBlock(
            _text(b.thinking, "a thinking block's text"),
            signature=_text(signature, "a signature") if signature is not None else None,
        )
    if kind == "redacted_thinking":
        # The encrypted thinking is opaque: kept where a signature goes, to be sent back.
        return ThinkingBlock("", signature=_text(b.data, "redacted thinking"), redacted=True)
    # Server tools' calls and results (web search, code execution, MCP, ...): kept as they
    # came, for the recording and to be sent back.
    return OpaqueBlock("anthropic", _raw(b))


def _stop_reason(reason: Any, content: Sequence[Block]) -> str:
    if reason is None or reason == "":
        return "tool_use" if any(isinstance(b, ToolCall) for b in content) else "end_turn"
    reason = _text(reason, "the stop reason")
    # The context window filled up: the answer was cut, as by max_tokens.
    return "max_tokens" if reason == "model_context_window_exceeded" else reason


def parse_message(message: Any) -> Response:
    """A :class:`Response` from the SDK's ``Message``. A message of a shape af cannot read
    is a :class:`ProviderError` that says what was wrong."""
    try:
        blocks = message.content
        if not isinstance(blocks, list):
            raise TypeError("its content is not a list of blocks")
        content = tuple(_block(b) for b in blocks)
        return Response(
            content=content,
            stop_reason=_stop_reason(message.stop_reason, content),
            usage=_usage(message.usage),
            model=_optional_text(message.model),
            response_id=_optional_text(message.id),
        )
    except (AttributeError, TypeError, KeyError, ValueError) as e:
        raise ProviderError(
            f"anthropic answered with a message af cannot read: {_reason(e)}",
            provider="anthropic",
        ) from e


def _optional_text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


class _StreamState:
    """A message assembled from its stream events."""

    def __init__(self) -> None:
        self.events = 0
        self.stopped = False
        self.model: str | None = None
        self.id: str | None = None
        self.start_usage: Any = None
        self.delta_usage: Any = None
        self.stop_reason: Any = None
        self.blocks: dict[int, dict[str, Any]] = {}

    def handle(self, event: Any) -> StreamEvent | None:
        """Take one event in; return what it shows of the reply, if anything. Raises
        AttributeError, TypeError, KeyError or ValueError for an event of a shape af does
        not know."""
        self.events += 1
        kind = event.type
        block: dict[str, Any]
        if kind == "content_block_delta":
            open_block = self.blocks.get(event.index)
            if open_block is None:
                return None
            block = open_block
            delta = event.delta
            dtype = delta.type
            if dtype == "text_delta":
                text = _text(delta.text, "a text delta")
                block["text"].append(text)
                return TextDelta(text) if text and block["type"] == "text" else None
            if dtype == "input_json_delta":
                block["json"].append(_text(delta.partial_json, "a tool call's JSON delta"))
            elif dtype == "thinking_delta":
                text = _text(delta.thinking, "a thinking delta")
                block["text"].append(text)
                return ThinkingDelta(text) if text and block["type"] == "thinking" else None
            elif dtype == "signature_delta":
                block["signature"] = (block.get("signature") or "") + _text(
                    delta.signature, "a signature delta"
                )
            # Other deltas (citations, ...) carry nothing af keeps.
        elif kind == "content_block_start":
            b = event.content_block
            btype = _text(b.type, "a content block's type")
            block = {"type": btype, "text": [], "json": []}
            self.blocks[_index(event.index)] = block
            if btype == "text":
                text = _text(b.text, "a text block's text")
                block["text"].append(text)
                return TextDelta(text) if text else None
            if btype == "thinking":
                block["text"].append(_text(b.thinking, "a thinking block's text"))
                block["signature"] = b.signature or ""
            elif btype == "redacted_thinking":
                block["signature"] = _text(b.data, "redacted thinking")
            elif btype == "tool_use":
                block.update(
                    id=_text(b.id, "a tool call's id"),
                    name=_text(b.name, "a tool call's name"),
                    input=b.input,
                )
                return ToolCallStart(block["id"], block["name"])
            else:
                block["raw"] = _raw(b)
        elif kind == "message_start":
            m = event.message
            self.model = _optional_text(m.model)
            self.id = _optional_text(m.id)
            self.start_usage = m.usage
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.delta_usage = event.usage
        elif kind == "message_stop":
            self.stopped = True
        return None

    def response(self) -> Response:
        try:
            content = tuple(self._block(self.blocks[i]) for i in sorted(self.blocks))
            return Response(
                content=content,
                stop_reason=_stop_reason(self.stop_reason, content),
                usage=self._usage(),
                model=self.model,
                response_id=self.id,
            )
        except (AttributeError, TypeError, KeyError, ValueError) as e:
            raise ProviderError(
                f"anthropic streamed a message af cannot read: {_reason(e)}",
                provider="anthropic",
                mid_stream=True,
            ) from e

    def _block(self, b: dict[str, Any]) -> Block:
        btype = b["type"]
        if btype == "text":
            return TextBlock("".join(b["text"]))
        if btype == "thinking":
            signature = b.get("signature") or None
            return ThinkingBlock(
                "".join(b["text"]),
                signature=_text(signature, "a signature") if signature is not None else None,
            )
        if btype == "redacted_thinking":
            return ThinkingBlock("", signature=b["signature"], redacted=True)
        raw = "".join(b["json"])
        if btype == "tool_use":
            try:
                args = orjson.loads(raw) if raw else b.get("input") or {}
            except orjson.JSONDecodeError:
                args = None
            if not isinstance(args, Mapping):
                raise ValueError(
                    f"tool call {b['id']} was streamed with arguments that are not a JSON object"
                )
            return ToolCall(id=b["id"], name=b["name"], args=dict(args))
        data = b["raw"]
        if raw:
            # A server tool's call streams its input like a tool call's.
            try:
                data["input"] = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise ValueError(f"a {btype} block's input is not JSON") from e
        return OpaqueBlock("anthropic", data)

    def _usage(self) -> Usage | None:
        start, delta = self.start_usage, self.delta_usage
        if start is None and delta is None:
            return None

        def pick(name: str) -> int:
            # message_delta's counts are cumulative; a field it leaves out keeps the start's.
            for u in (delta, start):
                value = getattr(u, name, None) if u is not None else None
                if value is not None:
                    return _count(value)
            return 0

        read, write = pick("cache_read_input_tokens"), pick("cache_creation_input_tokens")
        return Usage(
            input_tokens=pick("input_tokens") + read + write,
            output_tokens=pick("output_tokens"),
            cache_read_tokens=read,
            cache_write_tokens=write,
        )


def _index(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a content block index that is not an integer: {value!r}")
    return value
