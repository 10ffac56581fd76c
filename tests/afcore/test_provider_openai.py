"""The OpenAI-compatible provider against the real wire: recorded conversations replayed
through an httpx2 mock transport (no network), ids made for tool calls that come without
one, typed errors, presets and model ids."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from afcore import (
    Agent,
    BadRequestError,
    ConnectionFailedError,
    OverloadedError,
    ProviderError,
    RateLimitedError,
    ServerError,
    StreamCutError,
    UsageError,
    define_tool,
    from_model_id,
    lmstudio,
    ollama,
    openai,
    openai_compatible,
)
from afcore.messages import (
    AssistantMessage,
    Block,
    Message,
    Request,
    SystemSegment,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from afcore.providers import (
    OpenAICompatibleProvider,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
)
from tests.afcore.wire_files import (
    Replay,
    broken_after,
    client_for,
    load,
    names,
    recorded_response,
    sse,
)

KEY = "sk-proj-" + "Lq8Rz2Wm5Tn7Vx4Ck9Hs" * 3


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def provider_for(handler: Any, **options: Any) -> OpenAICompatibleProvider:
    return openai_compatible("http://localhost:9999/v1", http_client=client_for(handler), **options)


def request(*messages: Message, **fields: Any) -> Request:
    fields.setdefault("system", ())
    fields.setdefault("tools", ())
    return Request(model=fields.pop("model", "m"), messages=list(messages), **fields)


# Replaying recorded conversations


def _text_of(content: Any) -> tuple[str, str]:
    """(thinking, text) of a message's content, a string or typed parts, read here
    independently of the provider."""
    if content is None or isinstance(content, str):
        return "", content or ""
    thinking, text = [], []
    for part in content:
        if part["type"] == "text":
            text.append(part["text"])
        elif part["type"] == "thinking":
            thinking.extend(p["text"] for p in part["thinking"])
    return "".join(thinking), "".join(text)


def _streamed_completion(body: str) -> dict[str, Any]:
    """What an event stream spells out, put together independently of the provider: the
    completion (content, reasoning and each tool call's arguments concatenated by index), or
    the error it carried and whether chunks came before it."""
    out: dict[str, Any] = {"choices": [{"message": {}, "finish_reason": None}]}
    message = out["choices"][0]["message"]
    calls: dict[int, dict[str, Any]] = {}
    chunks, event = 0, None
    for line in body.splitlines():
        if line.startswith("event: "):
            event = line[len("event: ") :]
            continue
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = orjson.loads(line[len("data: ") :])
        if event == "error" or chunk.get("error"):
            return {"error": chunk["error"], "after": chunks, "x_groq": out.get("x_groq")}
        chunks += 1
        out["id"], out["model"] = chunk["id"], chunk["model"]
        out.setdefault("x_groq", chunk.get("x_groq"))
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk["choices"]:
            delta = choice["delta"]
            thinking, text = _text_of(delta.get("content"))
            thinking += delta.get("reasoning") or delta.get("reasoning_content") or ""
            message["content"] = message.get("content", "") + text
            message["reasoning"] = message.get("reasoning", "") + thinking
            for tc in delta.get("tool_calls", []):
                call = calls.setdefault(tc["index"], {"id": "", "function": {"arguments": ""}})
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function", {})
                if "name" in fn:
                    call["function"]["name"] = fn["name"]
                call["function"]["arguments"] += fn.get("arguments", "")
            out["choices"][0]["finish_reason"] = (
                choice["finish_reason"] or (out["choices"][0]["finish_reason"])
            )
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


FINISH = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _check_response(response: Any, completion: dict[str, Any]) -> None:
    message = completion["choices"][0]["message"]
    thinking, text = _text_of(message.get("content"))
    thinking += message.get("reasoning") or message.get("reasoning_content") or ""
    expected: list[Block] = []
    if thinking:
        expected.append(ThinkingBlock(thinking))
    if text:
        expected.append(TextBlock(text))
    calls = message.get("tool_calls") or []
    got_calls = response.tool_calls
    assert len(got_calls) == len(calls)
    for call, got in zip(calls, got_calls, strict=True):
        fn = call["function"]
        if call["id"]:
            assert (got.id, got.id_synthesized) == (call["id"], False)
        else:
            assert got.id_synthesized and got.id.startswith("call_")
        expected.append(
            ToolCall(got.id, fn["name"], orjson.loads(fn["arguments"]), got.id_synthesized)
        )
    assert response.content == tuple(expected)
    finish = completion["choices"][0]["finish_reason"]
    if finish:
        assert response.stop_reason == FINISH[finish]
    else:  # missing or empty: said by the content
        assert response.stop_reason == ("tool_use" if calls else "end_turn")
    assert response.model == completion["model"]
    assert response.response_id == (completion["id"] or None)
    usage = completion["usage"]
    assert response.usage is not None and not response.usage.estimated
    assert response.usage.input_tokens == usage["prompt_tokens"]
    assert response.usage.output_tokens == usage["completion_tokens"]
    details = usage.get("prompt_tokens_details") or {}
    assert response.usage.cache_read_tokens == details.get("cached_tokens", 0)
    assert response.usage.cache_write_tokens == details.get("cache_write_tokens", 0)


def _check_error(error: ProviderError, said: dict[str, Any]) -> None:
    """The typed error for an error the stream carried: of the class its status says, with
    every field of the vendor's error object kept."""
    vendor = said["error"]
    status = vendor.get("status_code") or (
        vendor["code"] if isinstance(vendor.get("code"), int) else None
    )
    assert error.status == status
    if status is not None and 400 <= status < 500 and status != 429:
        assert type(error) is BadRequestError and error.kind == "bad_request"
    assert error.mid_stream == (said["after"] > 0)
    assert error.error_type == vendor.get("type")
    assert error.vendor_message == vendor["message"]
    assert error.details == {k: v for k, v in vendor.items() if k not in ("type", "message")}
    if said.get("x_groq"):
        assert error.request_id == said["x_groq"]["id"]


def _strip_think(content: Any) -> tuple[str | None, str]:
    """An assistant message's content as af sends it, and the thinking the recording's
    client sent back inside it as `<think>...</think>` (Chat Completions has no field for
    thinking, so af does not send it back)."""
    if isinstance(content, str) and content.startswith("<think>"):
        inner = content.removeprefix("<think>").split("</think>", 1)
        return (inner[1].strip() or None), inner[0].strip()
    return content, ""


def _normalized(body: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A request body with what differs only in spelling made equal: a missing assistant
    content and a null one, arguments as parsed JSON, the ids the recording's client made
    for id-less calls replaced by af's. Two differences are af's choices and are stated
    here: a user message's text parts are one string (af's messages are text, and it puts
    no cache markers on parts), and thinking sent back as `<think>` text is left out."""
    body = copy.deepcopy(body)
    for m in body["messages"]:
        if m["role"] == "user" and isinstance(m["content"], list):
            m["content"] = "".join(p["text"] for p in m["content"])
        if m["role"] == "assistant":
            m["content"] = _strip_think(m.get("content"))[0]
            for call in m.get("tool_calls", []):
                call["id"] = ids.get(call["id"], call["id"])
                call["function"]["arguments"] = orjson.loads(call["function"]["arguments"])
        if m["role"] == "tool":
            m["tool_call_id"] = ids.get(m["tool_call_id"], m["tool_call_id"])
    return body


def _from_wire(wire: dict[str, Any], history: list[Message]) -> Message:
    """af's message for one the recording sent that af did not parse itself (a request that
    starts over, or a reply af raised an error for)."""
    if wire["role"] == "user":
        return UserMessage(_normalized({"messages": [wire]}, {})["messages"][0]["content"])
    if wire["role"] == "tool":
        called = {
            c.id: c.name for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls
        }
        return ToolResultMessage(
            wire["tool_call_id"], called[wire["tool_call_id"]], wire["content"]
        )
    text, thinking = _strip_think(wire.get("content"))
    blocks: list[Block] = [ThinkingBlock(thinking)] if thinking else []
    if text:
        blocks.append(TextBlock(text))
    for call in wire.get("tool_calls", []):
        fn = call["function"]
        blocks.append(ToolCall(call["id"], fn["name"], orjson.loads(fn["arguments"])))
    return AssistantMessage(tuple(blocks))


_COMPOSED = ("model", "messages", "tools", "stream", "stream_options")


@pytest.mark.parametrize(
    ("vendor", "name"),
    [("openai", n) for n in names("openai")]
    + [("openai_compatible", n) for n in names("openai_compatible")],
)
async def test_a_recorded_conversation_is_sent_and_parsed_as_recorded(
    vendor: str, name: str
) -> None:
    """Each turn of the recording: the request af builds equals the recorded one field by
    field, and what the vendor answered is parsed into what it says (or into the typed
    error it carried)."""
    interactions = load(vendor, name)
    first = interactions[0]["request"]
    base_url = first["uri"].split("#")[0].removesuffix("/chat/completions")
    replay = Replay(recorded_response(i) for i in interactions)
    streamed = [
        i["request"]["parsed_body"] for i in interactions if i["request"]["parsed_body"]["stream"]
    ]
    provider = openai_compatible(
        base_url,
        api_key=KEY,
        http_client=replay.client(),
        stream_options=all("stream_options" in b for b in streamed),
    )
    ids: dict[str, str] = {}  # the recording's id for a call -> af's
    previous: list[dict[str, Any]] | None = None  # the last request's messages
    history: list[Message] = []
    reply: AssistantMessage | None = None  # af's parse of the last answer
    for interaction in interactions:
        recorded = interaction["request"]["parsed_body"]
        body = recorded
        system = [SystemSegment(m["content"]) for m in body["messages"] if m["role"] == "system"]
        wire = [m for m in body["messages"] if m["role"] != "system"]
        tools = [
            ToolSpec(f["name"], f["description"], f["parameters"], strict=f.get("strict", False))
            for f in (t["function"] for t in body.get("tools", []))
        ]
        params = {k: v for k, v in body.items() if k not in _COMPOSED}
        continues = previous is not None and wire[: len(previous)] == previous
        if not continues:
            history = []
        for at in range(len(history), len(wire)):
            message = wire[at]
            if message["role"] == "assistant" and reply is not None and at == len(previous or ()):
                # The reply af parsed, as the recording's client sent it back: learn which of
                # its ids stand for af's, and that the thinking it sent back is af's.
                for theirs, ours in zip(
                    message.get("tool_calls", []), reply.tool_calls, strict=True
                ):
                    ids[theirs["id"]] = ours.id
                thinking = "".join(
                    b.thinking for b in reply.content if isinstance(b, ThinkingBlock)
                )
                assert _strip_think(message.get("content"))[1] == thinking.strip()
                history.append(reply)
            elif message["role"] == "tool":
                call_id = ids.get(message["tool_call_id"], message["tool_call_id"])
                history.append(_from_wire({**message, "tool_call_id": call_id}, history))
            else:
                history.append(_from_wire(message, history))
        previous, reply = wire, None

        events: list[StreamEvent] = []
        answer = interaction["response"]
        said = answer.get("parsed_body") or _streamed_completion(answer["body"]["string"])
        request = Request(
            model=body["model"], system=system, messages=list(history), tools=tools, params=params
        )
        on_stream = events.append if body["stream"] else None
        if "error" in said:
            with pytest.raises(ProviderError) as info:
                await provider.complete(request, on_stream=on_stream)
            _check_error(info.value, said)
        else:
            response = await provider.complete(request, on_stream=on_stream)
            _check_response(response, said)
            if body["stream"]:
                assert "".join(e.text for e in events if isinstance(e, TextDelta)) == response.text
                assert [e for e in events if isinstance(e, ToolCallStart)] == [
                    ToolCallStart(c.id, c.name) for c in response.tool_calls
                ]
                thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
                assert thinking == "".join(
                    b.thinking for b in response.content if isinstance(b, ThinkingBlock)
                )
            reply = AssistantMessage(response.content)

        sent = replay.sent[-1]
        assert str(sent.url) == interaction["request"]["uri"].split("#")[0]
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert _normalized(replay.body(), ids) == _normalized(recorded, ids)


async def test_a_tool_call_without_an_id_gets_one_that_goes_back_in_both_places() -> None:
    first, second = load("openai", "compatible_api_with_tool_calls_without_id")
    replay = Replay([recorded_response(first), recorded_response(second)])
    provider = openai_compatible(
        "https://generativelanguage.googleapis.com/v1beta/openai",
        http_client=replay.client(),
    )
    ask = UserMessage("What is the current time?")
    tools = [ToolSpec("get_current_time", "Get the current time.", {"type": "object"})]
    response = await provider.complete(request(ask, tools=tools))
    (call,) = response.tool_calls
    assert call.id_synthesized and call.id.startswith("call_") and len(call.id) == 29
    # The same answer to the same conversation gets the same id.
    again = Replay([recorded_response(first)])
    twin = openai_compatible(provider.base_url, http_client=again.client())
    assert (await twin.complete(request(ask, tools=tools))).tool_calls[0].id == call.id

    result = ToolResultMessage(call.id, call.name, "Noon")
    final = await provider.complete(
        request(ask, AssistantMessage(response.content), result, tools=tools)
    )
    assert final.text == "The current time is Noon."
    sent = replay.body()["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.id == sent[2]["tool_call_id"]


def _chunk(delta: dict[str, Any], finish: str | None = None, rid: str = "cmpl-1") -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + orjson.dumps({"id": rid, "model": "m", "choices": [choice]}).decode()


def _idless_stream() -> str:
    return sse(
        [
            _chunk({"role": "assistant", "reasoning_content": "Two lookups."}),
            _chunk({"tool_calls": [{"index": 0, "function": {"name": "t", "arguments": ""}}]}),
            _chunk({"tool_calls": [{"index": 1, "function": {"name": "t", "arguments": '{"a":'}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            _chunk({"tool_calls": [{"index": 1, "function": {"arguments": " 2}"}}]}),
            _chunk({}, finish="tool_calls"),
            'data: {"id":"cmpl-1","model":"m","choices":[],"usage":{"prompt_tokens":9,'
            '"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":8}}}',
            "data: [DONE]",
        ]
    )


async def test_streamed_tool_calls_without_ids_get_the_ids_they_are_announced_with() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        assert orjson.loads(r.content)["stream_options"] == {"include_usage": True}
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, text=_idless_stream()
        )

    events: list[StreamEvent] = []
    response = await provider_for(handler).complete(
        request(UserMessage("go")), on_stream=events.append
    )
    thinking, first, second = response.content
    assert thinking == ThinkingBlock("Two lookups.")
    assert isinstance(first, ToolCall) and isinstance(second, ToolCall)
    assert (first.args, second.args) == ({}, {"a": 2})
    assert first.id_synthesized and second.id_synthesized and first.id != second.id
    assert events == [
        ThinkingDelta("Two lookups."),
        ToolCallStart(first.id, "t"),
        ToolCallStart(second.id, "t"),
    ]
    assert response.stop_reason == "tool_use"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (9, 8)

    # Not streamed, the same answer gets the same ids.
    message = {
        "role": "assistant",
        "tool_calls": [
            {"type": "function", "function": {"name": "t", "arguments": "{}"}},
            {"id": "", "type": "function", "function": {"name": "t", "arguments": '{"a": 2}'}},
        ],
    }
    whole = {
        "id": "cmpl-1",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    plain = await provider_for(lambda r: httpx2.Response(200, json=whole)).complete(
        request(UserMessage("go"))
    )
    assert [c.id for c in plain.tool_calls] == [first.id, second.id]


async def test_thinking_is_not_sent_back_and_the_thinking_param_is_left_out() -> None:
    replay = Replay([httpx2.Response(200, json=_completion("ok"))])
    provider = openai_compatible("http://localhost:9999/v1", http_client=replay.client())
    reply = AssistantMessage((ThinkingBlock("hmm", signature="s"), TextBlock("Hello.")))
    await provider.complete(
        request(
            UserMessage("hi"),
            reply,
            UserMessage("again"),
            params={"thinking": 2048, "temperature": 0},
        )
    )
    body = replay.body()
    assert body["messages"][1] == {"role": "assistant", "content": "Hello."}
    assert "thinking" not in body and body["temperature"] == 0
    assert "authorization" not in replay.sent[0].headers


def test_system_segments_are_joined_into_one_system_message() -> None:
    provider = openai_compatible("http://localhost:9999/v1")
    body = provider.build_request(
        request(UserMessage("hi"), system=[SystemSegment("One."), SystemSegment("Two.")])
    )
    assert body["messages"][0] == {"role": "system", "content": "One.\n\nTwo."}


# Errors


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "cmpl-x",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }


@pytest.mark.parametrize(
    ("status", "error", "cls"),
    [
        (
            429,
            {
                "message": "Rate limit reached for gpt-4o.",
                "type": "requests",
                "code": "rate_limit_exceeded",
            },
            RateLimitedError,
        ),
        (529, {"type": "overloaded_error", "message": "Overloaded"}, OverloadedError),
        (503, {"message": "The server is overloaded.", "type": "server_error"}, ServerError),
        (400, {"message": "Invalid 'messages'.", "type": "invalid_request_error"}, BadRequestError),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_error_answer_is_typed_with_the_status_and_the_vendors_words(
    status: int, error: dict[str, str], cls: type[ProviderError], streamed: bool
) -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json={"error": error}, headers={"retry-after-ms": "1500"})

    with pytest.raises(cls) as info:
        await provider_for(handler, api_key=KEY).complete(
            request(UserMessage("hi")), on_stream=(lambda e: None) if streamed else None
        )
    e = info.value
    assert type(e) is cls and (e.status, e.error_type) == (status, error["type"])
    assert e.vendor_message == error["message"] and e.retry_after == 1.5
    assert str(e) == f"openai_compatible answered {status} {error['type']}: {error['message']}"
    assert KEY not in str(e)


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_error_body_that_is_not_json_gives_the_status_and_its_first_line(
    streamed: bool,
) -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            503, text="\nService Unavailable\nTraceback (most recent call last):\n"
        )

    with pytest.raises(ServerError) as info:
        await ollama(http_client=client_for(handler)).complete(
            request(UserMessage("hi")), on_stream=(lambda e: None) if streamed else None
        )
    assert (
        str(info.value) == "ollama answered 503 with a body that is not JSON: Service Unavailable"
    )


async def test_a_success_that_is_not_json_says_so_in_one_line() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, text="<html>\n<body>proxy login</body>")

    with pytest.raises(ProviderError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")))
    assert str(info.value) == "openai_compatible answered 200 with a body that is not JSON: <html>"


async def test_a_stream_that_ends_without_finishing_is_cut() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        body = sse([_chunk({"content": "Half"}), _chunk({"content": " an"})])
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    events: list[StreamEvent] = []
    with pytest.raises(StreamCutError, match="ended after 2 chunks without a finish") as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=events.append)
    assert info.value.mid_stream
    assert events == [TextDelta("Half"), TextDelta(" an")]


async def test_a_stream_whose_connection_breaks_part_way_is_cut() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        chunks = [sse([_chunk({"content": "Half"})]).encode()]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=broken_after(chunks)
        )

    with pytest.raises(StreamCutError, match="broke after 1 chunks: ReadError") as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=lambda e: None)
    assert info.value.mid_stream


async def test_an_error_chunk_inside_the_stream_is_typed_and_marked_mid_stream() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        error = 'data: {"error":{"type":"overloaded_error","message":"Overloaded"}}'
        body = sse([_chunk({"content": "Half"}), error])
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    with pytest.raises(OverloadedError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=lambda e: None)
    assert info.value.mid_stream


async def test_a_server_that_cannot_be_reached_is_a_connection_failure() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    with pytest.raises(ConnectionFailedError) as info:
        await lmstudio(http_client=client_for(handler)).complete(request(UserMessage("hi")))
    assert str(info.value) == (
        "lmstudio could not be reached at http://localhost:1234/v1: "
        "ConnectError: connection refused"
    )


async def test_arguments_that_are_not_a_json_object_are_refused_in_one_line() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{oops"}}
        ],
    }
    body = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    with pytest.raises(
        ProviderError, match=r"tool call 't' with arguments that are not a JSON object: \{oops"
    ):
        await provider_for(lambda r: httpx2.Response(200, json=body)).complete(
            request(UserMessage("hi"))
        )


# Presets, model ids and keys


def test_presets_point_at_the_usual_local_servers_and_need_no_key() -> None:
    assert ollama().url == "http://localhost:11434/v1/chat/completions"
    assert lmstudio().url == "http://localhost:1234/v1/chat/completions"
    assert ollama().secrets() == [] and ollama().describe()["name"] == "ollama"
    provider, model = from_model_id("ollama:llama3.1:8b")
    assert isinstance(provider, OpenAICompatibleProvider) and provider.name == "ollama"
    assert model == provider.model == "llama3.1:8b"
    assert from_model_id("lmstudio:qwen2.5-7b-instruct")[0].name == "lmstudio"


def test_openai_needs_its_key_and_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError) as info:
        from_model_id("openai:gpt-4o")
    assert str(info.value) == (
        "no OpenAI API key: set the OPENAI_API_KEY environment variable or pass openai(api_key=...)"
    )
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider, model = from_model_id("openai:gpt-4o")
    assert model == "gpt-4o" and provider.secrets() == [KEY]
    assert provider.describe() == {
        "name": "openai",
        "base_url": "https://api.openai.com/v1",
        "model": "gpt-4o",
    }
    assert openai(api_key="other-key-123456").secrets() == ["other-key-123456"]


def test_a_base_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(UsageError, match="must be an http"):
        openai_compatible("localhost:11434")


def test_an_agent_runs_on_a_local_server_whose_tool_calls_have_no_ids(tmp_path: Path) -> None:
    answers = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "clock", "arguments": "{}"}}],
        },
        {"role": "assistant", "content": "It is noon."},
    ]
    replay = Replay(
        httpx2.Response(
            200,
            json={
                "id": f"r{i}",
                "model": "llama3.1",
                "choices": [
                    {"index": 0, "message": m, "finish_reason": "tool_calls" if i == 0 else "stop"}
                ],
            },
        )
        for i, m in enumerate(answers)
    )
    clock = define_tool(
        name="clock",
        description="The time.",
        input_schema={"type": "object"},
        execute=lambda args, ctx: "12:00",
    )
    agent = (
        Agent.create(
            provider=ollama(http_client=replay.client()), model="llama3.1", record=tmp_path
        )
        .tool(clock)
        .build()
    )
    assert agent.run("What time is it?") == "It is noon."
    sent = replay.body()["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"]
    assert sent[2]["content"] == "12:00"
    assert agent.last_recording is not None
    assert b'"id_synthesized":true' in agent.last_recording.read_bytes()
