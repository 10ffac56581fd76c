"""OpenAI's Chat Completions API and the servers that speak it (OpenRouter, Gemini's
OpenAI-compatible endpoint, Ollama, LM Studio, ...), over plain HTTP, streamed or not."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import orjson

from afcore._version import __version__
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
    import httpx2

__all__ = [
    "GEMINI_API_KEY_ENV",
    "OPENAI_API_KEY_ENV",
    "OPENROUTER_API_KEY_ENV",
    "OpenAICompatibleProvider",
    "ThinkingParam",
    "gemini",
    "lmstudio",
    "ollama",
    "openai",
    "openai_compatible",
    "openrouter",
]

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENROUTER_API_KEY_ENV = "OPENROUTER_API_KEY"
GEMINI_API_KEY_ENV = "GEMINI_API_KEY"
OPENAI_BASE_URL = "https://api.openai.com/v1"
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai"
OLLAMA_BASE_URL = "http://localhost:11434/v1"
LMSTUDIO_BASE_URL = "http://localhost:1234/v1"

ThinkingParam: TypeAlias = Callable[[int], Mapping[str, Any]]
"""How a server takes a thinking budget: the body fields for a budget of N tokens."""

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_RESERVED = ("stream_options",)
"""Fields af decides itself here: whether a stream reports its usage is an option."""
_STREAM_OPTIONS_HINT = "leave it out with stream_options=False"


def openai_compatible(
    base_url: str,
    model: str | None = None,
    api_key: str | None = None,
    *,
    name: str = "openai_compatible",
    stream: bool | None = None,
    stream_options: bool = True,
    thinking: ThinkingParam | Literal[False] | None = None,
    timeout: float = 600.0,
    http_client: httpx2.AsyncClient | None = None,
) -> OpenAICompatibleProvider:
    """A provider for any server that speaks OpenAI's Chat Completions API at ``base_url``
    (the part before ``/chat/completions``, e.g. ``http://localhost:11434/v1``).

    ``model`` is used when the request names none; ``api_key``, when given, is sent as a
    bearer token (local servers need none). Calls stream when ``complete`` is given a
    stream handler (``stream=`` decides for every call instead). A streamed call asks the
    server to report usage (``stream_options``); ``stream_options=False`` leaves the field
    out, for servers that refuse it. ``http_client`` replaces the HTTP client (an
    ``httpx2.AsyncClient``; give it a mock transport to test offline).

    Request params go to the API as body fields (``tool_choice``, ``temperature``,
    ``max_tokens``, ...), except ``thinking`` (a token budget, what ``.thinking(budget=)``
    asks): ``thinking`` says how this server takes one, as a function from the budget to
    the body fields to send; ``False`` says the server takes none, so an agent asking for
    thinking is refused when it is built; ``None`` (not known) leaves the budget out and
    each reply's record says it was not sent. Tool calls that come without an id get one
    made from the call's place in the conversation, its position and its name (the same for
    the same answer, streamed or not), marked as synthesized.
    """
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise UsageError(
            f"openai_compatible(base_url=...) must be an http(s) URL, got {base_url!r}"
        )
    if thinking is not None and thinking is not False and not callable(thinking):
        raise UsageError(
            "openai_compatible(thinking=...) takes a function from a token budget to the "
            f"body fields to send, False or None; got {thinking!r}"
        )
    return OpenAICompatibleProvider(
        base_url=base_url,
        model=model,
        api_key=api_key or None,
        name=name,
        stream=stream,
        stream_options=stream_options,
        thinking=thinking,
        timeout=timeout,
        http_client=http_client,
    )


def _key(
    api_key: str | None, env: str, vendor: str, factory: str, *more: str
) -> tuple[str, MissingKeyError | None]:
    """The key, and (made without one, see ``keys_when_called``) what to raise instead."""
    if api_key is not None:
        key: str | None = api_key
    else:
        key = next((os.environ[v] for v in (env, *more) if os.environ.get(v)), None)
    if not key:
        return "", keyless(MissingKeyError(vendor, env, factory))
    return key, None


def _keyed(
    provider: OpenAICompatibleProvider, missing: MissingKeyError | None
) -> OpenAICompatibleProvider:
    provider.missing_key = missing
    return provider


def openai(
    model: str | None = None,
    api_key: str | None = None,
    base_url: str = OPENAI_BASE_URL,
    **options: Any,
) -> OpenAICompatibleProvider:
    """OpenAI itself. The key is ``api_key`` or the ``OPENAI_API_KEY`` environment variable;
    without one this raises :class:`UsageError` at once, before any call. OpenAI's
    reasoning models take no thinking budget (say ``reasoning_effort`` in the params), so
    an agent asking for one is refused when it is built. Other options as for
    :func:`openai_compatible`."""
    key, missing = _key(api_key, OPENAI_API_KEY_ENV, "OpenAI", "openai")
    options.setdefault("thinking", False)
    return _keyed(openai_compatible(base_url, model, key, name="openai", **options), missing)


def openrouter(
    model: str | None = None,
    api_key: str | None = None,
    base_url: str = OPENROUTER_BASE_URL,
    **options: Any,
) -> OpenAICompatibleProvider:
    """OpenRouter, with models named ``vendor/model`` (``anthropic/claude-sonnet-4.5``).
    The key is ``api_key`` or the ``OPENROUTER_API_KEY`` environment variable, checked at
    once. A thinking budget is sent as OpenRouter's ``reasoning: {"max_tokens": N}``; its
    routing fields (``provider``, ``models``, ...) go in the params. Other options as for
    :func:`openai_compatible`."""
    key, missing = _key(api_key, OPENROUTER_API_KEY_ENV, "OpenRouter", "openrouter")
    options.setdefault("thinking", _openrouter_thinking)
    return _keyed(openai_compatible(base_url, model, key, name="openrouter", **options), missing)


def gemini(
    model: str | None = None,
    api_key: str | None = None,
    base_url: str = GEMINI_BASE_URL,
    **options: Any,
) -> OpenAICompatibleProvider:
    """Google's Gemini models through Google's OpenAI-compatible endpoint. The key is
    ``api_key`` or the ``GEMINI_API_KEY`` environment variable (``GOOGLE_API_KEY`` also
    serves), checked at once. A thinking budget is sent as Google's
    ``thinking_config.thinking_budget`` (in the endpoint's ``extra_body.google``). Other
    options as for :func:`openai_compatible`."""
    key, missing = _key(api_key, GEMINI_API_KEY_ENV, "Gemini", "gemini", "GOOGLE_API_KEY")
    options.setdefault("thinking", _gemini_thinking)
    return _keyed(openai_compatible(base_url, model, key, name="gemini", **options), missing)


def ollama(
    model: str | None = None, base_url: str = OLLAMA_BASE_URL, **options: Any
) -> OpenAICompatibleProvider:
    """A local Ollama server (no key needed). Options as for :func:`openai_compatible`."""
    return openai_compatible(base_url, model, name="ollama", **options)


def lmstudio(
    model: str | None = None, base_url: str = LMSTUDIO_BASE_URL, **options: Any
) -> OpenAICompatibleProvider:
    """A local LM Studio server (no key needed). Options as for :func:`openai_compatible`."""
    return openai_compatible(base_url, model, name="lmstudio", **options)


def _openrouter_thinking(budget: int) -> Mapping[str, Any]:
    return {"reasoning": {"max_tokens": budget}}


def _gemini_thinking(budget: int) -> Mapping[str, Any]:
    return {"extra_body": {"google": {"thinking_config": {"thinking_budget": budget}}}}


def _budget(value: Any) -> int | None:
    """The token budget a ``thinking`` param asks for: an int, or Anthropic's thinking
    object; None when it asks for no thinking."""
    if value is None or value is False:
        return None
    if isinstance(value, Mapping):
        if value.get("type") == "disabled":
            return None
        value = value.get("budget_tokens")
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(
            "the thinking param is a token budget (an int) or Anthropic's thinking object, "
            f"got {value!r}"
        )
    return value


class OpenAICompatibleProvider(Provider):
    """See :func:`openai_compatible`."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str | None,
        api_key: str | None,
        name: str,
        stream: bool | None,
        stream_options: bool = True,
        thinking: ThinkingParam | Literal[False] | None = None,
        timeout: float,
        http_client: httpx2.AsyncClient | None,
    ) -> None:
        self.name = name
        self.model = model
        """The model used when a request names none."""
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self._api_key = api_key
        self._stream = stream
        self._stream_options = stream_options
        self._thinking = thinking
        self._timeout = timeout
        self._http_client = http_client
        self._clients: PerLoop[httpx2.AsyncClient] = PerLoop(
            self._make_client, _close if http_client is None else None
        )
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": f"af/{__version__}",
        }
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "base_url": redact_url(self.base_url)}
        if self.model:
            out["model"] = self.model
        if self._stream is not None:
            out["stream"] = self._stream
        if not self._stream_options:
            out["stream_options"] = False
        return out

    def secrets(self) -> list[str]:
        return [*([self._api_key] if self._api_key else []), *url_passwords(self.base_url)]

    def check_params(self, params: Mapping[str, Any]) -> None:
        self._unsent(params)

    def _unsent(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """Params this server is not sent; raises UsageError for one it is known to refuse."""
        reserved_params(self.name, params)
        for field in _RESERVED:
            if field in params:
                raise UsageError(
                    f"the {self.name} provider decides {field} itself; leave it out of the "
                    f"params (openai_compatible(..., {field}=False) leaves it out of calls)"
                )
        if _budget(params.get("thinking")) is None:
            return ()
        if self._thinking is False:
            raise UsageError(
                f"the {self.name} provider takes no thinking budget: its models decide "
                "how long to think (leave out .thinking(budget=...); say reasoning_effort "
                "in the params where the server takes it)"
            )
        return ("thinking",) if self._thinking is None else ()

    def close(self) -> None:
        self._clients.close()

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _make_client(self) -> httpx2.AsyncClient:
        import httpx2

        if self._http_client is not None:
            return self._http_client
        return httpx2.AsyncClient(timeout=httpx2.Timeout(self._timeout, connect=10.0))

    def build_request(self, request: Request, *, stream: bool = False) -> dict[str, Any]:
        """The Chat Completions body for ``request``."""
        model = request.model or self.model
        if not model:
            raise UsageError(f"the {self.name} provider needs a model: pass model= to the agent")
        unsent = self._unsent(request.params)
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system_text})
        messages.extend(_message(m) for m in request.messages)
        body: dict[str, Any] = {"model": model, "messages": messages}
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        params = dict(request.params)
        budget = _budget(params.pop("thinking", None))
        body.update(params)
        if budget is not None and callable(self._thinking) and "thinking" not in unsent:
            body.update(self._thinking(budget))
        body["stream"] = stream
        if stream and self._stream_options:
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        import httpx2

        if self.missing_key is not None:
            raise self.missing_key
        streaming = self._stream if self._stream is not None else on_stream is not None
        content = orjson.dumps(self.build_request(request, stream=streaming))
        unsent = self._unsent(request.params)
        client = self._clients.get()
        place = _Place(request)
        hints = {"stream_options": _STREAM_OPTIONS_HINT} if streaming else None
        if not streaming:
            try:
                answer = await client.post(self.url, content=content, headers=self._headers)
            except httpx2.TransportError as e:
                raise self._unreachable(e) from e
            if answer.status_code >= 400:
                raise status_error(
                    self.name, answer.status_code, answer.content, headers=answer.headers
                )
            try:
                data = orjson.loads(answer.content)
            except orjson.JSONDecodeError:
                line = first_line(answer.text) or "an empty body"
                raise ProviderError(
                    f"{self.name} answered {answer.status_code} with a body that is not JSON: "
                    f"{line}",
                    provider=self.name,
                    status=answer.status_code,
                    request_id=header_request_id(answer.headers),
                ) from None
            response = self._parse(data, place, header_request_id(answer.headers))
        else:
            headers = {**self._headers, "accept": "text/event-stream"}
            try:
                async with client.stream("POST", self.url, content=content, headers=headers) as r:
                    if r.status_code >= 400:
                        raw = await r.aread()
                        raise status_error(
                            self.name, r.status_code, raw, headers=r.headers, hints=hints
                        )
                    response = await self._read_stream(
                        r.aiter_lines(), place, on_stream, header_request_id(r.headers)
                    )
            except httpx2.TransportError as e:
                raise self._unreachable(e) from e
        return replace(response, unsent_params=unsent) if unsent else response

    def _unreachable(self, e: Exception) -> ConnectionFailedError:
        text = str(e).strip()
        reason = f"{type(e).__name__}: {text}" if text else type(e).__name__
        return ConnectionFailedError(
            f"{self.name} could not be reached at {redact_url(self.base_url)}: {reason}",
            provider=self.name,
        )

    def _unreadable(self, what: str, e: Exception, *, mid_stream: bool = False) -> ProviderError:
        return ProviderError(
            f"{self.name} {what} af cannot read: {e}", provider=self.name, mid_stream=mid_stream
        )

    def _parse(self, data: Any, place: _Place, request_id: str | None) -> Response:
        if isinstance(data, Mapping) and data.get("error"):
            raise stream_error(
                self.name, data, mid_stream=False, request_id=request_id, streamed=False
            )
        try:
            return self._completion(data, place)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise self._unreadable("answered with a completion", e) from e

    def _completion(self, data: Any, place: _Place) -> Response:
        if not isinstance(data, Mapping):
            raise TypeError(f"the body is {_kind(data)}, not a JSON object")
        choices = data.get("choices")
        if not choices:
            raise TypeError("it has no choices")
        if not isinstance(choices, list) or not isinstance(choices[0], Mapping):
            raise TypeError("its choices are not a list of objects")
        choice = choices[0]
        message = choice.get("message") or {}
        if not isinstance(message, Mapping):
            raise TypeError(f"its message is {_kind(message)}, not an object")
        rid = _optional_text(data.get("id"), "the completion's id")
        parts = _Parts()
        parts.reasoning(message)
        parts.content(message.get("content"))
        parts.refusal(message.get("refusal"))
        blocks = parts.blocks()
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise TypeError(f"its tool_calls are {_kind(calls)}, not a list")
        for i, tc in enumerate(calls):
            call = _call_fields(tc)
            args = call["arguments"]
            blocks.append(self._tool_call(call["id"], place, rid, i, call["name"], args))
        finish = _finish(choice.get("finish_reason"))
        return Response(
            content=tuple(blocks),
            stop_reason=_stop_reason(finish, blocks, refused=parts.refused),
            usage=_usage(data.get("usage")),
            model=_optional_text(data.get("model"), "the model"),
            response_id=rid,
        )

    def _tool_call(
        self, call_id: str | None, place: _Place, rid: Any, index: int, name: str, arguments: str
    ) -> ToolCall:
        try:
            args = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError:
            args = None
        if not isinstance(args, dict):
            raise ProviderError(
                f"{self.name} sent tool call {name!r} with arguments that are not a JSON "
                f"object: {first_line(arguments)}",
                provider=self.name,
            )
        if call_id:
            return ToolCall(id=call_id, name=name, args=args)
        return ToolCall(
            id=synthesized_id(place.key, rid, index, name),
            name=name,
            args=args,
            id_synthesized=True,
        )

    async def _read_stream(
        self,
        lines: AsyncIterator[str],
        place: _Place,
        on_stream: StreamHandler | None,
        request_id: str | None = None,
    ) -> Response:
        import httpx2

        state = _StreamState(place, request_id)
        done = False
        data: list[str] = []
        event = ""
        ended = False
        iterator = lines.__aiter__()
        while not ended:
            try:
                line = await iterator.__anext__()
            except StopAsyncIteration:
                # A last event without its blank line still counts.
                ended, line = True, ""
            except httpx2.TransportError as e:
                if state.chunks == 0:
                    raise self._unreachable(e) from e
                raise self._cut(state, e) from e
            except Exception as e:
                # Bytes the line reader could not decode.
                raise self._cut(state, e) from e
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
                continue
            if line.strip() or not data:
                continue  # a comment, another field, or a blank line with nothing pending
            payload = "\n".join(data)
            kind, data, event = event, [], ""
            if payload.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise StreamCutError(
                    f"{self.name} streamed a chunk that is not JSON: {first_line(payload)}",
                    provider=self.name,
                    mid_stream=state.chunks > 0,
                ) from None
            if kind == "error" or (isinstance(chunk, Mapping) and chunk.get("error")):
                raise stream_error(
                    self.name,
                    chunk,
                    mid_stream=state.chunks > 0,
                    request_id=state.request_id,
                )
            try:
                emitted = state.take(chunk)
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                raise self._unreadable("streamed a chunk", e, mid_stream=state.chunks > 1) from e
            # Outside the try: an exception from the stream handler is the caller's own.
            if on_stream is not None:
                for item in emitted:
                    on_stream(item)
        if state.chunks == 0:
            raise ConnectionFailedError(
                f"{self.name} answered with an empty stream", provider=self.name
            )
        if not done and state.finish is None:
            raise StreamCutError(
                f"{self.name}'s stream ended after {state.chunks} chunks without a finish reason",
                provider=self.name,
                mid_stream=True,
            )
        blocks = state.parts.blocks()
        for index in sorted(state.calls):
            c = state.calls[index]
            blocks.append(
                self._tool_call(c["id"], place, state.rid, index, c["name"], "".join(c["args"]))
            )
        return Response(
            content=tuple(blocks),
            stop_reason=_stop_reason(state.finish, blocks, refused=state.parts.refused),
            usage=state.usage,
            model=state.model,
            response_id=state.rid,
        )

    def _cut(self, state: _StreamState, e: Exception) -> ProviderError:
        if state.chunks == 0:
            return ConnectionFailedError(
                f"{self.name} closed the stream before it began: {type(e).__name__}",
                provider=self.name,
            )
        return StreamCutError(
            f"{self.name}'s stream broke after {state.chunks} chunks: {type(e).__name__}",
            provider=self.name,
            mid_stream=True,
        )


async def _close(client: httpx2.AsyncClient) -> None:
    await client.aclose()


class _StreamState:
    """A completion assembled from its chunks."""

    def __init__(self, place: _Place, request_id: str | None) -> None:
        self.place = place
        self.request_id = request_id
        self.chunks = 0
        self.rid: str | None = None
        self.model: str | None = None
        self.finish: str | None = None
        self.usage: Usage | None = None
        self.parts = _Parts()
        self.calls: dict[int, dict[str, Any]] = {}

    def take(self, chunk: Any) -> list[StreamEvent]:
        """Take one chunk in; return what it shows of the reply. Raises TypeError (or
        ValueError, KeyError) naming what is unexpected in a chunk af cannot read."""
        if not isinstance(chunk, Mapping):
            raise TypeError(f"the chunk is {_kind(chunk)}, not a JSON object")
        self.chunks += 1
        self.rid = self.rid or _optional_text(chunk.get("id"), "the completion's id")
        self.model = self.model or _optional_text(chunk.get("model"), "the model")
        vendor = chunk.get("x_groq")
        if self.request_id is None and isinstance(vendor, Mapping):
            self.request_id = _optional_text(vendor.get("id"), "the request id")
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise TypeError(f"its choices are {_kind(choices)}, not a list")
        out: list[StreamEvent] = []
        for choice in choices:
            if not isinstance(choice, Mapping):
                raise TypeError(f"a choice is {_kind(choice)}, not an object")
            if choice.get("index", 0) != 0:
                continue
            self.finish = _finish(choice.get("finish_reason")) or self.finish
            delta = choice.get("delta") or {}
            if not isinstance(delta, Mapping):
                raise TypeError(f"a delta is {_kind(delta)}, not an object")
            parts = self.parts
            thinking, text = len(parts.thinking), len(parts.text)
            parts.reasoning(delta)
            parts.content(delta.get("content"))
            parts.refusal(delta.get("refusal"))
            out.extend(ThinkingDelta(t) for t in parts.thinking[thinking:] if t)
            out.extend(TextDelta(t) for t in parts.text[text:] if t)
            calls = delta.get("tool_calls") or []
            if not isinstance(calls, list):
                raise TypeError(f"its tool_calls are {_kind(calls)}, not a list")
            for position, tc in enumerate(calls):
                out.extend(self._call_delta(position, tc))
        return out

    def _call_delta(self, position: int, tc: Any) -> list[StreamEvent]:
        fields = _call_fields(tc, streamed=True)
        index = tc.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"a tool call's index is {index!r}, not an integer")
        call = self.calls.setdefault(index, {"id": None, "name": "", "args": [], "started": False})
        call["id"] = call["id"] or fields["id"]
        if fields["name"]:
            call["name"] = call["name"] or fields["name"]
        if fields["arguments"]:
            call["args"].append(fields["arguments"])
        if not call["started"] and call["name"]:
            call["started"] = True
            cid = call["id"] or synthesized_id(self.place.key, self.rid, index, call["name"])
            return [ToolCallStart(cid, call["name"])]
        return []


class _Parts:
    """A reply's thinking, text, refusal and other content, from a message or its deltas,
    in any of the shapes servers send: ``content`` as a string or as typed parts
    (``{"type": "text"}``, ``{"type": "thinking", "thinking": [...]}``), reasoning in
    ``reasoning_content`` or ``reasoning``, a ``refusal``."""

    __slots__ = ("opaque", "refused", "text", "thinking")

    def __init__(self) -> None:
        self.thinking: list[str] = []
        self.text: list[str] = []
        self.opaque: list[dict[str, Any]] = []
        self.refused = False

    def reasoning(self, message: Mapping[str, Any]) -> None:
        for key in ("reasoning_content", "reasoning"):
            value = message.get(key)
            if value is None or value == "":
                continue
            if not isinstance(value, str):
                raise TypeError(f"its {key} is {_kind(value)}, not text")
            self.thinking.append(value)
            return

    def content(self, value: Any) -> None:
        if value is None or value == "":
            return
        if isinstance(value, str):
            self.text.append(value)
            return
        if not isinstance(value, list):
            raise TypeError(f"its content is {_kind(value)}, neither text nor a list of parts")
        for part in value:
            if not isinstance(part, Mapping):
                raise TypeError(f"a content part is {_kind(part)}, not an object")
            kind = part.get("type")
            if kind == "text":
                self.text.append(_text(part.get("text"), "a text part's text"))
            elif kind == "thinking":
                self.thinking.extend(_thinking_texts(part.get("thinking")))
            else:
                # A part af has no type for (a reference, an image, ...): kept as it came.
                self.opaque.append(dict(part))

    def refusal(self, value: Any) -> None:
        if value is None or value == "":
            return
        self.text.append(_text(value, "the refusal"))
        self.refused = True

    def blocks(self) -> list[Block]:
        out: list[Block] = []
        if self.thinking:
            out.append(ThinkingBlock("".join(self.thinking)))
        if self.text:
            out.append(TextBlock("".join(self.text)))
        out.extend(OpaqueBlock("openai", part) for part in self.opaque)
        return out


def _thinking_texts(value: Any) -> list[str]:
    """The text of a thinking part: a string, or a list of text parts (Mistral)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise TypeError(f"a thinking part holds {_kind(value)}, neither text nor a list")
    out = []
    for part in value:
        if not isinstance(part, Mapping) or part.get("type") != "text":
            raise TypeError(f"a thinking part holds {_describe(part)}, not a text part")
        out.append(_text(part.get("text"), "a thinking part's text"))
    return out


def _call_fields(tc: Any, *, streamed: bool = False) -> dict[str, Any]:
    """A tool call's id, name and arguments (as JSON text), checked."""
    if not isinstance(tc, Mapping):
        raise TypeError(f"a tool call is {_kind(tc)}, not an object")
    kind = tc.get("type")
    if kind not in (None, "", "function"):
        raise TypeError(f"a tool call of type {kind!r}: af offers only function tools")
    fn = tc.get("function") or {}
    if not isinstance(fn, Mapping):
        raise TypeError(f"a tool call's function is {_kind(fn)}, not an object")
    name = fn.get("name")
    if name is None:
        name = ""
    elif not isinstance(name, str):
        raise TypeError(f"a tool call's name is {_kind(name)}, not text")
    arguments = fn.get("arguments")
    if arguments is None:
        arguments = ""
    elif isinstance(arguments, Mapping) and not streamed:
        arguments = orjson.dumps(arguments).decode()  # some servers send the object itself
    elif not isinstance(arguments, str):
        raise TypeError(f"a tool call's arguments are {_kind(arguments)}, not JSON text")
    return {
        "id": _optional_text(tc.get("id"), "a tool call's id"),
        "name": name,
        "arguments": arguments,
    }


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "text",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _describe(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"a part of type {value.get('type')!r}"
    return _kind(value)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {_kind(value)}, not text")
    return value


def _optional_text(value: Any, what: str) -> str | None:
    """Text that may be missing; an empty string is missing too."""
    if value is None or value == "":
        return None
    return _text(value, what)


def _finish(value: Any) -> str | None:
    # An empty finish_reason (some servers send "") says no more than a missing one.
    return _optional_text(value, "the finish reason")


def synthesized_id(place: str, response_id: Any, index: int, name: str) -> str:
    """An id for a tool call the server sent without one: the same for the same answer at
    the same point of the conversation, streamed or not, and different for every call."""
    seed = f"{place}\x00{response_id or ''}\x00{index}\x00{name}".encode()
    return "call_" + hashlib.sha256(seed).hexdigest()[:24]


class _Place:
    """Where in the conversation a call stands (its length and its last message), worked
    out only when a tool call needs an id made for it."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._key: str | None = None

    @property
    def key(self) -> str:
        if self._key is None:
            messages = self._request.messages
            if not messages:
                self._key = "0"
            else:
                last = orjson.dumps(messages[-1].to_json(), option=orjson.OPT_SORT_KEYS)
                self._key = f"{len(messages)}:{hashlib.sha256(last).hexdigest()[:16]}"
        return self._key


def _tool(t: ToolSpec) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": t.name,
        "description": t.description,
        "parameters": dict(t.input_schema),
    }
    if t.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _message(m: Message) -> dict[str, Any]:
    if isinstance(m, UserMessage):
        return {"role": "user", "content": m.content}
    if isinstance(m, ToolResultMessage):
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    return _assistant(m)


def _assistant(m: AssistantMessage) -> dict[str, Any]:
    # Thinking is not sent back: Chat Completions has no field for it.
    out: dict[str, Any] = {"role": "assistant"}
    text = m.text
    calls = m.tool_calls
    parts = [dict(b.data) for b in m.content if isinstance(b, OpaqueBlock) and b.wire == "openai"]
    if parts:
        # Content parts af has no type for go back as they came, after the text.
        out["content"] = ([{"type": "text", "text": text}] if text else []) + parts
    elif text or not calls:
        out["content"] = text
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": orjson.dumps(c.args).decode(),
                },
            }
            for c in calls
        ]
    return out


def _stop_reason(finish: str | None, blocks: Sequence[Block], *, refused: bool = False) -> str:
    if finish is None or (refused and finish == "stop"):
        if refused:
            return "refusal"
        return "tool_use" if any(isinstance(b, ToolCall) for b in blocks) else "end_turn"
    return _STOP_REASONS.get(finish, finish)


def _tokens(value: Any, what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} is {value!r}, not a token count")
    return value


def _usage(u: Any) -> Usage | None:
    if u is None:
        return None
    if not isinstance(u, Mapping):
        raise TypeError(f"its usage is {_kind(u)}, not an object")
    details = u.get("prompt_tokens_details")
    if details is not None and not isinstance(details, Mapping):
        raise TypeError(f"its prompt_tokens_details are {_kind(details)}, not an object")
    details = details or {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = u.get("prompt_cache_hit_tokens")  # DeepSeek's word for it
    # prompt_tokens counts every input token, cached or not, as af does.
    return Usage(
        input_tokens=_tokens(u.get("prompt_tokens"), "prompt_tokens"),
        output_tokens=_tokens(u.get("completion_tokens"), "completion_tokens"),
        cache_read_tokens=_tokens(cached, "cached_tokens"),
        cache_write_tokens=_tokens(details.get("cache_write_tokens"), "cache_write_tokens"),
    )
