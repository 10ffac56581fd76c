"""OpenAI's Chat Completions API and the servers that speak it (Ollama, LM Studio, ...),
over plain HTTP, streamed or not."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from afcore._version import __version__
from afcore.errors import ConnectionFailedError, ProviderError, StreamCutError, UsageError
from afcore.messages import (
    AssistantMessage,
    Block,
    Message,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from afcore.providers._base import (
    Provider,
    StreamHandler,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from afcore.providers._wire import (
    PerLoop,
    first_line,
    reserved_params,
    status_error,
    stream_error,
)

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "OPENAI_API_KEY_ENV",
    "OpenAICompatibleProvider",
    "lmstudio",
    "ollama",
    "openai",
    "openai_compatible",
]

OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL = "https://api.openai.com/v1"
OLLAMA_BASE_URL = "http://localhost:11434/v1"
LMSTUDIO_BASE_URL = "http://localhost:1234/v1"

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_DROPPED_PARAMS = ("stream_options", "thinking")
"""Params af decides itself (what a stream reports), or that only Anthropic takes
(thinking: these servers choose reasoning by model)."""


def openai_compatible(
    base_url: str,
    model: str | None = None,
    api_key: str | None = None,
    *,
    name: str = "openai_compatible",
    stream: bool | None = None,
    timeout: float = 600.0,
    http_client: httpx2.AsyncClient | None = None,
) -> OpenAICompatibleProvider:
    """A provider for any server that speaks OpenAI's Chat Completions API at ``base_url``
    (the part before ``/chat/completions``, e.g. ``http://localhost:11434/v1``).

    ``model`` is used when the request names none; ``api_key``, when given, is sent as a
    bearer token (local servers need none). Calls stream when ``complete`` is given a
    stream handler (``stream=`` decides for every call instead). ``http_client`` replaces
    the HTTP client (an ``httpx2.AsyncClient``; give it a mock transport to test offline).

    Request params go to the API as body fields (``tool_choice``, ``temperature``,
    ``max_tokens``, ...); ``thinking`` is Anthropic's and is left out. Tool calls that come
    without an id get one made from the call's place in the conversation, its position
    and its name (the same for the same answer, streamed or not), marked as synthesized.
    """
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise UsageError(
            f"openai_compatible(base_url=...) must be an http(s) URL, got {base_url!r}"
        )
    return OpenAICompatibleProvider(
        base_url=base_url,
        model=model,
        api_key=api_key or None,
        name=name,
        stream=stream,
        timeout=timeout,
        http_client=http_client,
    )


def openai(
    model: str | None = None,
    api_key: str | None = None,
    base_url: str = OPENAI_BASE_URL,
    **options: Any,
) -> OpenAICompatibleProvider:
    """OpenAI itself. The key is ``api_key`` or the ``OPENAI_API_KEY`` environment variable;
    without one this raises :class:`UsageError` at once, before any call. Other options as
    for :func:`openai_compatible`."""
    key = api_key if api_key is not None else os.environ.get(OPENAI_API_KEY_ENV)
    if not key:
        raise UsageError(
            f"no OpenAI API key: set the {OPENAI_API_KEY_ENV} environment variable "
            "or pass openai(api_key=...)"
        )
    return openai_compatible(base_url, model, key, name="openai", **options)


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
        self._timeout = timeout
        self._http_client = http_client
        self._clients: PerLoop[httpx2.AsyncClient] = PerLoop(self._make_client)
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": f"af/{__version__}",
        }
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "base_url": self.base_url}
        if self.model:
            out["model"] = self.model
        if self._stream is not None:
            out["stream"] = self._stream
        return out

    def secrets(self) -> list[str]:
        return [self._api_key] if self._api_key else []

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
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system_text})
        messages.extend(_message(m) for m in request.messages)
        body: dict[str, Any] = {"model": model, "messages": messages}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.input_schema),
                    },
                }
                for t in request.tools
            ]
        params = reserved_params(self.name, request.params)
        body.update((k, v) for k, v in params.items() if k not in _DROPPED_PARAMS)
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        import httpx2

        streaming = self._stream if self._stream is not None else on_stream is not None
        content = orjson.dumps(self.build_request(request, stream=streaming))
        client = self._clients.get()
        place = _Place(request)
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
                ) from None
            return self._parse(data, place)
        headers = {**self._headers, "accept": "text/event-stream"}
        try:
            async with client.stream("POST", self.url, content=content, headers=headers) as r:
                if r.status_code >= 400:
                    raw = await r.aread()
                    raise status_error(self.name, r.status_code, raw, headers=r.headers)
                return await self._read_stream(r.aiter_lines(), place, on_stream)
        except httpx2.TransportError as e:
            raise self._unreachable(e) from e

    def _unreachable(self, e: Exception) -> ConnectionFailedError:
        text = str(e).strip()
        reason = f"{type(e).__name__}: {text}" if text else type(e).__name__
        return ConnectionFailedError(
            f"{self.name} could not be reached at {self.base_url}: {reason}", provider=self.name
        )

    def _parse(self, data: Any, place: _Place) -> Response:
        if isinstance(data, Mapping) and "error" in data:
            raise stream_error(self.name, data, mid_stream=False)
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not choices:
            raise ProviderError(f"{self.name} answered with no choices", provider=self.name)
        choice = choices[0]
        message = choice.get("message") or {}
        rid = data.get("id")
        blocks: list[Block] = []
        reasoning = _reasoning(message)
        if reasoning:
            blocks.append(ThinkingBlock(reasoning))
        if message.get("content"):
            blocks.append(TextBlock(message["content"]))
        for i, tc in enumerate(message.get("tool_calls") or ()):
            fn = tc.get("function") or {}
            name = fn.get("name") or ""
            blocks.append(
                self._tool_call(tc.get("id"), place, rid, i, name, fn.get("arguments") or "")
            )
        return Response(
            content=tuple(blocks),
            stop_reason=_stop_reason(choice.get("finish_reason"), blocks),
            usage=_usage(data.get("usage")),
            model=data.get("model"),
            response_id=rid,
        )

    def _tool_call(
        self, call_id: Any, place: _Place, rid: Any, index: int, name: str, arguments: str
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
            return ToolCall(id=str(call_id), name=name, args=args)
        return ToolCall(
            id=synthesized_id(place.key, rid, index, name),
            name=name,
            args=args,
            id_synthesized=True,
        )

    async def _read_stream(
        self, lines: AsyncIterator[str], place: _Place, on_stream: StreamHandler | None
    ) -> Response:
        import httpx2

        chunks = 0
        done = False
        rid: str | None = None
        model: str | None = None
        finish: str | None = None
        usage: Usage | None = None
        text: list[str] = []
        reasoning: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
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
                if chunks == 0:
                    raise self._unreachable(e) from e
                raise StreamCutError(
                    f"{self.name}'s stream broke after {chunks} chunks: {type(e).__name__}",
                    provider=self.name,
                    mid_stream=True,
                ) from e
            if line.startswith("data:"):
                data.append(line[6:] if line.startswith("data: ") else line[5:])
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
                continue
            if line.strip() or not data:
                continue  # a comment, another field, or a blank line with nothing pending
            payload = "\n".join(data)
            data = []
            if payload.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise StreamCutError(
                    f"{self.name} streamed a chunk that is not JSON: {first_line(payload)}",
                    provider=self.name,
                    mid_stream=chunks > 0,
                ) from None
            if event == "error" or (isinstance(chunk, Mapping) and "error" in chunk):
                raise stream_error(self.name, chunk, mid_stream=chunks > 0)
            chunks += 1
            rid = rid or chunk.get("id")
            model = model or chunk.get("model")
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            for choice in chunk.get("choices") or ():
                if choice.get("index", 0) != 0:
                    continue
                finish = choice.get("finish_reason") or finish
                delta = choice.get("delta") or {}
                piece = _reasoning(delta)
                if piece:
                    reasoning.append(piece)
                    if on_stream is not None:
                        on_stream(ThinkingDelta(piece))
                if delta.get("content"):
                    text.append(delta["content"])
                    if on_stream is not None:
                        on_stream(TextDelta(delta["content"]))
                for position, tc in enumerate(delta.get("tool_calls") or ()):
                    index = tc.get("index", position)
                    call = calls.setdefault(
                        index, {"id": None, "name": "", "args": [], "started": False}
                    )
                    call["id"] = call["id"] or tc.get("id") or None
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        call["name"] = call["name"] or fn["name"]
                    if fn.get("arguments"):
                        call["args"].append(fn["arguments"])
                    if not call["started"] and call["name"]:
                        call["started"] = True
                        if on_stream is not None:
                            cid = call["id"] or synthesized_id(place.key, rid, index, call["name"])
                            on_stream(ToolCallStart(cid, call["name"]))
        if chunks == 0:
            raise ConnectionFailedError(
                f"{self.name} answered with an empty stream", provider=self.name
            )
        if not done and finish is None:
            raise StreamCutError(
                f"{self.name}'s stream ended after {chunks} chunks without a finish reason",
                provider=self.name,
                mid_stream=True,
            )
        blocks: list[Block] = []
        if reasoning:
            blocks.append(ThinkingBlock("".join(reasoning)))
        if text:
            blocks.append(TextBlock("".join(text)))
        for index in sorted(calls):
            c = calls[index]
            blocks.append(
                self._tool_call(c["id"], place, rid, index, c["name"], "".join(c["args"]))
            )
        return Response(
            content=tuple(blocks),
            stop_reason=_stop_reason(finish, blocks),
            usage=usage,
            model=model,
            response_id=rid,
        )


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
    if text or not calls:
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


def _reasoning(message: Mapping[str, Any]) -> str:
    """Reasoning text, where servers that show it put it (`reasoning_content`, `reasoning`)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _stop_reason(finish: Any, blocks: Sequence[Block]) -> str:
    if finish is None:
        return "tool_use" if any(isinstance(b, ToolCall) for b in blocks) else "end_turn"
    return _STOP_REASONS.get(str(finish), str(finish))


def _usage(u: Any) -> Usage | None:
    if not isinstance(u, Mapping):
        return None
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=int(u.get("prompt_tokens") or 0),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_tokens=int(cached or 0),
    )
