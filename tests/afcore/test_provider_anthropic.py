"""The Anthropic provider against the real wire: recorded conversations replayed through the
SDK's HTTP client hook (no network), typed errors, credentials, and redaction."""

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
    anthropic,
    define_tool,
    from_model_id,
)
from afcore.messages import (
    AssistantMessage,
    Block,
    CacheBreakpoint,
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
    AnthropicProvider,
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

# The SDK warns about models it knows to be deprecated; the recordings name some of them.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

KEY = "sk-ant-api03-" + "Xk2v9QmT4rLw7NpZ" * 5 + "-AbCdEf"


@pytest.fixture(autouse=True)
def _no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def provider_for(handler: Any, **options: Any) -> AnthropicProvider:
    return anthropic(api_key=KEY, http_client=client_for(handler), **options)


def request(*messages: Message, **fields: Any) -> Request:
    fields.setdefault("system", ())
    fields.setdefault("tools", ())
    return Request(
        model=fields.pop("model", "claude-sonnet-4-5"), messages=list(messages), **fields
    )


# Replaying recorded conversations


def _user_turn(wire: dict[str, Any], history: list[Message]) -> list[Message]:
    """af's messages for a user turn the recording sent: text, or the results of the tool
    calls af parsed from the previous answer."""
    names_by_id = {
        c.id: c.name for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls
    }
    out: list[Message] = []
    for block in wire["content"]:
        if block["type"] == "text":
            out.append(UserMessage(block["text"]))
        else:
            assert block["type"] == "tool_result"
            out.append(
                ToolResultMessage(
                    tool_call_id=block["tool_use_id"],
                    name=names_by_id[block["tool_use_id"]],
                    content=block["content"],
                    is_error=block["is_error"],
                )
            )
    return out


def _expected_blocks(content: list[dict[str, Any]]) -> tuple[Block, ...]:
    out: list[Block] = []
    for b in content:
        if b["type"] == "text":
            out.append(TextBlock(b["text"]))
        elif b["type"] == "thinking":
            out.append(ThinkingBlock(b["thinking"], signature=b["signature"]))
        elif b["type"] == "redacted_thinking":
            out.append(ThinkingBlock("", signature=b["data"], redacted=True))
        else:
            assert b["type"] == "tool_use"
            out.append(ToolCall(id=b["id"], name=b["name"], args=b["input"]))
    return tuple(out)


def _streamed_message(body: str) -> dict[str, Any]:
    """The message an event stream spells out, put together independently of the provider:
    each block's start and the concatenation of its deltas."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    for line in body.splitlines():
        if not line.startswith("data: "):
            continue
        event = orjson.loads(line[len("data: ") :])
        if event["type"] == "message_start":
            message = dict(event["message"])
        elif event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            field = {
                "text_delta": "text",
                "thinking_delta": "thinking",
                "signature_delta": "signature",
                "input_json_delta": "partial_json",
            }[delta["type"]]
            block[field] = block.get(field, "") + delta[field]
        elif event["type"] == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
            message["usage"] = {**message["usage"], **event["usage"]}
    for block in blocks.values():
        if block["type"] == "tool_use":
            block["input"] = orjson.loads(block.pop("partial_json", "") or "{}")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _check_sent(sent: dict[str, Any], recorded: dict[str, Any]) -> None:
    expected = copy.deepcopy(recorded)
    if "system" in expected:
        # af sends one text block per system segment; the recording sent one string.
        blocks = sent.pop("system")
        assert [b["type"] for b in blocks] == ["text"] * len(blocks)
        assert "".join(b["text"] for b in blocks) == expected.pop("system")
    assert sent == expected


@pytest.mark.parametrize("name", names("anthropic"))
async def test_a_recorded_conversation_is_sent_and_parsed_as_recorded(name: str) -> None:
    interactions = load("anthropic", name)
    first = interactions[0]["request"]["parsed_body"]
    replay = Replay(recorded_response(i) for i in interactions)
    provider = anthropic(api_key=KEY, http_client=replay.client())
    system = [SystemSegment(first["system"])] if "system" in first else []
    tools = [
        ToolSpec(t["name"], t["description"], t["input_schema"], strict=t.get("strict", False))
        for t in first.get("tools", [])
    ]
    params: dict[str, Any] = {k: first[k] for k in ("tool_choice", "cache_control") if k in first}
    if "thinking" in first:
        # The budget alone: the provider spells out the thinking object.
        params["thinking"] = first["thinking"]["budget_tokens"]
    history: list[Message] = []
    covered = 0
    for interaction in interactions:
        recorded = interaction["request"]["parsed_body"]
        for wire_message in recorded["messages"][covered:]:
            assert wire_message["role"] == "user"
            history.extend(_user_turn(wire_message, history))
        events: list[StreamEvent] = []
        response = await provider.complete(
            Request(
                model=recorded["model"],
                system=system,
                messages=list(history),
                tools=tools,
                params=params,
            ),
            on_stream=events.append if recorded["stream"] else None,
        )

        sent = replay.sent[-1]
        assert sent.url.path == "/v1/messages"
        assert sent.headers["anthropic-version"]
        assert KEY in (sent.headers.get("x-api-key", ""), sent.headers.get("authorization", "")[7:])
        _check_sent(replay.body(), recorded)

        answer = interaction["response"]
        wire = answer.get("parsed_body") or _streamed_message(answer["body"]["string"])
        assert response.content == _expected_blocks(wire["content"])
        assert response.stop_reason == wire["stop_reason"]
        assert response.model == wire["model"] and response.response_id == wire["id"]
        usage = wire["usage"]
        assert response.usage is not None and not response.usage.estimated
        assert response.usage.cache_read_tokens == usage["cache_read_input_tokens"]
        assert response.usage.cache_write_tokens == usage["cache_creation_input_tokens"]
        assert response.usage.output_tokens == usage["output_tokens"]
        # af's input tokens are every token of the request, cached or not.
        assert response.usage.input_tokens == (
            usage["input_tokens"]
            + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"]
        )
        if recorded["stream"]:
            thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
            text = "".join(e.text for e in events if isinstance(e, TextDelta))
            assert thinking == "".join(
                b.thinking for b in response.content if isinstance(b, ThinkingBlock)
            )
            assert text == response.text
        history.append(AssistantMessage(response.content))
        covered = len(recorded["messages"]) + 1


async def test_streamed_thinking_keeps_its_signature_and_goes_back_verbatim() -> None:
    (interaction,) = load("anthropic", "model_thinking_part_stream")
    replay = Replay([recorded_response(interaction), recorded_response(interaction)])
    provider = anthropic(api_key=KEY, http_client=replay.client())
    ask = UserMessage("How do I cross the street?")
    params = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    events: list[StreamEvent] = []
    response = await provider.complete(
        request(ask, model="claude-sonnet-4-0", params=params), on_stream=events.append
    )
    thinking, text = response.content
    assert isinstance(thinking, ThinkingBlock) and isinstance(text, TextBlock)
    assert thinking.thinking.startswith("This is a straightforward question about pedestrian")
    assert thinking.signature is not None
    assert thinking.signature.startswith("EvMCCkYICxgCKkCHP2cS")
    assert thinking.signature.endswith("hjfQYAQ==")
    assert text.text.startswith("Here are the basic steps for safely crossing the street:")
    assert response.usage is not None and response.usage.output_tokens == 282
    assert isinstance(events[0], ThinkingDelta) and events[0].text == "This"

    await provider.complete(
        request(ask, AssistantMessage(response.content), UserMessage("Thanks."), params=params),
        on_stream=lambda e: None,
    )
    sent = replay.body()["messages"][1]["content"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": thinking.thinking,
        "signature": thinking.signature,
    }


async def test_a_streamed_tool_call_assembles_its_arguments_and_is_announced() -> None:
    stream = sse(
        [
            'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
            '"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
            '"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":90,'
            '"cache_creation_input_tokens":5,"output_tokens":1}}}',
            'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            '"content_block":{"type":"redacted_thinking","data":"opaque=="}}',
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
            'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
            '"content_block":{"type":"tool_use","id":"toolu_1","name":"weather","input":{}}}',
            'event: ping\ndata: {"type": "ping"}',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
            '"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Pa"}}',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
            '"delta":{"type":"input_json_delta","partial_json":"ris\\"}"}}',
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}',
            'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
            '"tool_use"},"usage":{"output_tokens":30}}',
            'event: message_stop\ndata: {"type":"message_stop"}',
        ]
    )

    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=stream)

    events: list[StreamEvent] = []
    response = await provider_for(handler).complete(
        request(UserMessage("Weather?")), on_stream=events.append
    )
    assert response.content == (
        ThinkingBlock("", signature="opaque==", redacted=True),
        ToolCall(id="toolu_1", name="weather", args={"city": "Paris"}),
    )
    assert events == [ToolCallStart("toolu_1", "weather")]
    assert response.stop_reason == "tool_use"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (105, 30)
    assert (response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (90, 5)


async def test_redacted_thinking_is_kept_opaque_and_sent_back_as_it_came() -> None:
    answer = _ok("Done.")
    answer["response"]["parsed_body"]["content"].insert(
        0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx"}
    )
    replay = Replay([recorded_response(answer), recorded_response(_ok("ok"))])
    provider = anthropic(api_key=KEY, http_client=replay.client())
    response = await provider.complete(request(UserMessage("hi")))
    assert response.content == (
        ThinkingBlock("", signature="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx", redacted=True),
        TextBlock("Done."),
    )
    await provider.complete(
        request(UserMessage("hi"), AssistantMessage(response.content), UserMessage("more"))
    )
    assert replay.body()["messages"][1]["content"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx"},
        {"type": "text", "text": "Done."},
    ]


# Building requests


async def test_cache_breakpoints_become_markers_on_the_system_block_tool_and_message() -> None:
    replay = Replay([recorded_response(_ok("done"))])
    provider = anthropic(api_key=KEY, http_client=replay.client())
    tool = ToolSpec("lookup", "Look up.", {"type": "object"})
    history: list[Message] = [
        UserMessage("Find it."),
        AssistantMessage(
            (
                ThinkingBlock("I should look.", signature="sig"),
                ToolCall(id="t1", name="lookup", args={}),
                ThinkingBlock("after", signature="sig2"),
            )
        ),
        ToolResultMessage(tool_call_id="t1", name="lookup", content="found"),
    ]
    await provider.complete(
        request(
            *history,
            system=[SystemSegment("stable"), SystemSegment("changing")],
            tools=[tool, ToolSpec("other", "", {"type": "object"})],
            cache=[
                CacheBreakpoint("system", 0),
                CacheBreakpoint("tools", 1),
                CacheBreakpoint("messages", 1),
            ],
        )
    )
    body = replay.body()
    marker = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "stable", "cache_control": marker},
        {"type": "text", "text": "changing"},
    ]
    assert [t.get("cache_control") for t in body["tools"]] == [None, marker]
    # Thinking blocks cannot carry a marker: it goes on the last block that can.
    assert [b.get("cache_control") for b in body["messages"][1]["content"]] == [None, marker, None]


async def test_turns_of_one_role_merge_with_tool_results_first() -> None:
    replay = Replay([recorded_response(_ok("done"))])
    provider = anthropic(api_key=KEY, http_client=replay.client())
    calls = (ToolCall(id="a", name="t", args={}), ToolCall(id="b", name="t", args={"x": 1}))
    await provider.complete(
        request(
            UserMessage("go"),
            AssistantMessage((TextBlock(""), *calls)),
            ToolResultMessage(tool_call_id="a", name="t", content="1"),
            UserMessage("A note from an injection."),
            ToolResultMessage(tool_call_id="b", name="t", content="oops", is_error=True),
        )
    )
    messages = replay.body()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "t", "input": {}},
        {"type": "tool_use", "id": "b", "name": "t", "input": {"x": 1}},
    ]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": False},
        {"type": "tool_result", "tool_use_id": "b", "content": "oops", "is_error": True},
        {"type": "text", "text": "A note from an injection."},
    ]


async def test_params_pass_through_and_max_tokens_overrides_the_default() -> None:
    replay = Replay([recorded_response(_ok("ok"))])
    provider = anthropic(api_key=KEY, http_client=replay.client(), max_tokens=1000)
    params = {"max_tokens": 8000, "stop_sequences": ["END"], "some_new_field": {"a": 1}}
    await provider.complete(request(UserMessage("hi"), params=params))
    body = replay.body()
    assert body["max_tokens"] == 8000
    assert body["stop_sequences"] == ["END"] and body["some_new_field"] == {"a": 1}
    assert body["stream"] is False


def test_params_may_not_replace_what_af_composes() -> None:
    provider = anthropic(api_key=KEY)
    with pytest.raises(UsageError) as info:
        provider.build_request(request(UserMessage("hi"), params={"system": "x", "stream": True}))
    assert str(info.value) == (
        "the anthropic provider composes system, stream itself; leave them out of the params"
    )


def test_a_thinking_budget_at_or_over_max_tokens_is_refused_before_sending() -> None:
    provider = anthropic(api_key=KEY, max_tokens=2048)
    with pytest.raises(UsageError, match=r"thinking budget \(4096 tokens\) must be below"):
        provider.build_request(request(UserMessage("hi"), params={"thinking": 4096}))


def test_the_model_comes_from_the_provider_when_the_request_names_none() -> None:
    provider = anthropic(model="claude-haiku-4-5", api_key=KEY)
    assert provider.build_request(request(UserMessage("hi"), model=""))["model"] == (
        "claude-haiku-4-5"
    )
    with pytest.raises(UsageError, match="needs a model"):
        anthropic(api_key=KEY).build_request(request(UserMessage("hi"), model=""))


# Errors


def _ok(text: str) -> dict[str, Any]:
    return {
        "response": {
            "status": {"code": 200},
            "parsed_body": {
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        }
    }


def _error(status: int, kind: str, message: str, **headers: str) -> Any:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return lambda r: httpx2.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("status", "kind", "cls", "word"),
    [
        (429, "rate_limit_error", RateLimitedError, "rate_limited"),
        (529, "overloaded_error", OverloadedError, "overloaded"),
        (500, "api_error", ServerError, "server_error"),
        (400, "invalid_request_error", BadRequestError, "bad_request"),
        (401, "authentication_error", BadRequestError, "bad_request"),
    ],
)
@pytest.mark.parametrize("streamed", [False, True])
async def test_an_error_answer_is_typed_with_the_status_and_the_vendors_words(
    status: int, kind: str, cls: type[ProviderError], word: str, streamed: bool
) -> None:
    provider = provider_for(_error(status, kind, "Slow down, please.", **{"retry-after": "7"}))
    on_stream = (lambda e: None) if streamed else None
    with pytest.raises(cls) as info:
        await provider.complete(request(UserMessage("hi")), on_stream=on_stream)
    error = info.value
    assert type(error) is cls and error.kind == word
    assert (error.status, error.error_type) == (status, kind)
    assert error.vendor_message == "Slow down, please."
    assert error.retry_after == 7.0 and not error.mid_stream
    assert str(error) == f"anthropic answered {status} {kind}: Slow down, please."
    assert KEY not in str(error)


async def test_overloaded_is_a_server_error_so_a_rule_about_either_sees_it() -> None:
    provider = provider_for(_error(529, "overloaded_error", "Overloaded"))
    with pytest.raises(ServerError) as info:
        await provider.complete(request(UserMessage("hi")))
    assert isinstance(info.value, OverloadedError)


async def test_an_error_body_that_is_not_json_gives_the_status_and_its_first_line() -> None:
    page = "\n  <html><head><title>502 Bad Gateway</title></head>\n<body>\nTraceback (most...\n"

    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(502, text=page, headers={"content-type": "text/html"})

    with pytest.raises(ServerError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")))
    message = str(info.value)
    assert message == (
        "anthropic answered 502 with a body that is not JSON: "
        "<html><head><title>502 Bad Gateway</title></head>"
    )
    assert "\n" not in message and "Traceback" not in message
    assert info.value.status == 502


def _stream_start() -> list[str]:
    return [
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        '"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
        '"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Half an ans"}}',
    ]


async def test_a_stream_that_ends_before_message_stop_is_cut() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        body = sse(_stream_start())
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    events: list[StreamEvent] = []
    with pytest.raises(StreamCutError, match="ended after 3 events without message_stop") as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=events.append)
    assert info.value.mid_stream and info.value.kind == "stream_cut"
    assert events == [TextDelta("Half an ans")]


async def test_a_stream_whose_connection_breaks_part_way_is_cut() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        chunks = [sse(_stream_start()).encode()]
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=broken_after(chunks)
        )

    with pytest.raises(StreamCutError, match="broke after 3 events: ReadError") as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=lambda e: None)
    assert info.value.mid_stream


async def test_a_connection_lost_before_the_first_event_is_not_a_cut() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=broken_after([])
        )

    with pytest.raises(ConnectionFailedError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=lambda e: None)
    assert not info.value.mid_stream


async def test_an_overloaded_error_sent_inside_the_stream_is_typed_and_marked_mid_stream() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        body = sse(
            [
                *_stream_start(),
                'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                '"message":"Overloaded"}}',
            ]
        )
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    with pytest.raises(OverloadedError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=lambda e: None)
    assert info.value.mid_stream and info.value.error_type == "overloaded_error"
    assert str(info.value) == "anthropic sent an error mid-stream (overloaded_error): Overloaded"


async def test_no_answer_at_all_is_a_connection_failure() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    with pytest.raises(ConnectionFailedError) as info:
        await provider_for(handler).complete(request(UserMessage("hi")))
    assert str(info.value) == (
        "anthropic could not be reached at https://api.anthropic.com: "
        "ConnectError: connection refused"
    )


async def test_the_sdk_does_not_retry_behind_the_loops_back() -> None:
    calls = []

    def handler(r: httpx2.Request) -> httpx2.Response:
        calls.append(r)
        return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}})

    with pytest.raises(OverloadedError):
        await provider_for(handler).complete(request(UserMessage("hi")))
    assert len(calls) == 1


async def test_an_exception_in_the_stream_handler_is_the_callers_own() -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        body = sse(_stream_start())
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)

    def explode(event: StreamEvent) -> None:
        raise ValueError("the display broke")

    with pytest.raises(ValueError, match="the display broke"):
        await provider_for(handler).complete(request(UserMessage("hi")), on_stream=explode)


# Credentials


def test_a_missing_key_names_the_variable_to_set() -> None:
    with pytest.raises(UsageError) as info:
        anthropic()
    assert str(info.value) == (
        "no Anthropic API key: set the ANTHROPIC_API_KEY environment variable "
        "or pass anthropic(api_key=...)"
    )
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        from_model_id("anthropic:claude-sonnet-4-5")


def test_the_key_comes_from_the_environment_and_is_never_described(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    provider, model = from_model_id("anthropic:claude-sonnet-4-5")
    assert isinstance(provider, AnthropicProvider) and model == "claude-sonnet-4-5"
    assert provider.secrets() == [KEY]
    assert KEY not in orjson.dumps(provider.describe()).decode()


def test_an_unknown_prefix_lists_the_valid_ones() -> None:
    with pytest.raises(UsageError) as info:
        from_model_id("bedrock:claude-sonnet-4-5")
    assert str(info.value) == (
        "unknown provider 'bedrock' in model id 'bedrock:claude-sonnet-4-5'; "
        "the valid prefixes are anthropic, gemini, lmstudio, ollama, openai, openrouter"
    )
    with pytest.raises(UsageError, match="names no provider"):
        from_model_id("claude-sonnet-4-5")


# Redaction


@pytest.mark.parametrize(
    "key",
    [KEY, "corp-gw-7fQ2xLm9Rt4vNw8KpZ3s"],
    ids=["anthropic-shaped", "no-known-shape"],
)
def test_the_key_never_reaches_the_recording(tmp_path: Path, key: str) -> None:
    """The vendor answers by repeating the credential it was sent, in the text and in a tool
    call's arguments: the worst case. The recording must hold neither."""
    seen: list[str] = []

    def handler(r: httpx2.Request) -> httpx2.Response:
        sent = r.headers.get("x-api-key") or r.headers["authorization"].removeprefix("Bearer ")
        seen.append(sent)
        if len(seen) == 1:
            content = [{"type": "tool_use", "id": "t1", "name": "note", "input": {"text": sent}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": f"Your key is {sent}."}]
            stop = "end_turn"
        body = {
            "id": f"msg_{len(seen)}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 5, "output_tokens": 1},
        }
        return httpx2.Response(200, json=body)

    note = define_tool(
        name="note",
        description="Keep a note.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=lambda args, ctx: f"noted: {args['text']}",
    )
    provider = anthropic(api_key=key, http_client=client_for(handler))
    agent = (
        Agent.create(provider=provider, model="claude-sonnet-4-5", record=tmp_path)
        .system("You keep notes.")
        .tool(note)
        .build()
    )
    answer = agent.run("What is my key?")
    assert seen == [key, key]  # the real header carried it
    assert answer == f"Your key is {key}."
    assert agent.last_recording is not None
    raw = agent.last_recording.read_bytes()
    assert key.encode() not in raw
    assert b"[redacted:" in raw
