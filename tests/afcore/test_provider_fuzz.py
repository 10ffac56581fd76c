"""Whatever a server sends, a provider answers with a well-formed Response or raises a typed
ProviderError: never a TypeError from its parser, never a block holding the wrong type.

Hypothesis feeds both providers' readers event streams of well-formed JSON in roughly the
vendor's shapes (right keys, any values), random bytes, and random JSON bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from afcore import ProviderError, anthropic, openai_compatible
from afcore.messages import (
    AssistantMessage,
    OpaqueBlock,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    UserMessage,
)
from afcore.providers import StreamEvent, TextDelta, ThinkingDelta, ToolCallStart
from tests.afcore.wire_files import client_for

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

KEY = "sk-fuzz-0000000000000000000000000000"
EXAMPLES = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 300) | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def shaped(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects with these keys, each present or not, each holding a value of the expected
    shape or any JSON at all."""
    return st.fixed_dictionaries({}, optional={k: v | json_values for k, v in fields.items()})


words = st.sampled_from(["", "a", "Paris", '{"city": "Pa', 'ris"}', "{}", "<think>x</think>"])

# -- Chat Completions chunks ------------------------------------------------------------

chat_tool_call = shaped(
    index=st.integers(0, 2),
    id=words,
    type=st.sampled_from(["function", "custom"]),
    function=shaped(name=words, arguments=words),
)
chat_part = shaped(
    type=st.sampled_from(["text", "thinking", "reference"]),
    text=words,
    thinking=st.lists(shaped(type=st.just("text"), text=words), max_size=2) | words,
)
chat_delta = shaped(
    role=st.just("assistant"),
    content=words | st.lists(chat_part, max_size=2),
    reasoning=words,
    reasoning_content=words,
    refusal=words,
    tool_calls=st.lists(chat_tool_call, max_size=2),
)
chat_usage = shaped(
    prompt_tokens=st.integers(0, 100),
    completion_tokens=st.integers(0, 100),
    prompt_tokens_details=shaped(
        cached_tokens=st.integers(0, 50), cache_write_tokens=st.integers(0, 50)
    ),
)
chat_chunk = shaped(
    id=words,
    model=words,
    choices=st.lists(
        shaped(
            index=st.integers(0, 1),
            delta=chat_delta,
            finish_reason=st.sampled_from(["stop", "length", "tool_calls", ""]),
        ),
        max_size=2,
    ),
    usage=chat_usage,
    error=shaped(code=st.integers(400, 530), message=words, type=words),
)


def chat_stream(chunks: list[Any], done: bool) -> bytes:
    lines = [f"data: {orjson.dumps(c).decode()}\n\n" for c in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


# -- Messages API events ----------------------------------------------------------------

block_types = st.sampled_from(
    ["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "mystery"]
)
anthropic_event = shaped(
    type=st.sampled_from(
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
            "ping",
            "mystery",
        ]
    ),
    index=st.integers(0, 2),
    message=shaped(
        id=words,
        model=words,
        usage=shaped(input_tokens=st.integers(0, 50), output_tokens=st.integers(0, 50)),
    ),
    content_block=shaped(
        type=block_types,
        text=words,
        thinking=words,
        signature=words,
        data=words,
        id=words,
        name=words,
        input=st.dictionaries(st.text(max_size=3), st.integers(-1000, 1000), max_size=2),
    ),
    delta=shaped(
        type=st.sampled_from(
            ["text_delta", "input_json_delta", "thinking_delta", "signature_delta", "odd"]
        ),
        text=words,
        partial_json=words,
        thinking=words,
        signature=words,
        stop_reason=st.sampled_from(["end_turn", "max_tokens", "pause_turn", "tool_use"]),
    ),
    usage=shaped(output_tokens=st.integers(0, 50)),
)


def anthropic_stream(events: list[Any]) -> bytes:
    out = []
    for e in events:
        kind = e.get("type") if isinstance(e, dict) else None
        name = kind if isinstance(kind, str) and kind else "message_delta"
        out.append(f"event: {name}\ndata: {orjson.dumps(e).decode()}\n\n")
    return "".join(out).encode()


# -- the property -----------------------------------------------------------------------


def _request() -> Request:
    return Request(model="m", system=[], messages=[UserMessage("hi")], tools=[])


def _check_well_formed(response: Response, events: list[StreamEvent]) -> None:
    assert isinstance(response, Response)
    assert isinstance(response.stop_reason, str) and response.stop_reason
    for b in response.content:
        if isinstance(b, TextBlock):
            assert isinstance(b.text, str)
        elif isinstance(b, ThinkingBlock):
            assert isinstance(b.thinking, str)
            assert b.signature is None or isinstance(b.signature, str)
        elif isinstance(b, ToolCall):
            assert isinstance(b.id, str) and b.id and isinstance(b.name, str)
            assert isinstance(b.args, dict)
        else:
            assert isinstance(b, OpaqueBlock) and isinstance(b.data, dict)
    for attr in ("response_id", "model"):
        value = getattr(response, attr)
        assert value is None or isinstance(value, str)
    # What the recording will store: it serializes.
    orjson.dumps(AssistantMessage(response.content).to_json())
    if response.usage is not None:
        orjson.dumps(response.usage.to_json())
    for e in events:
        assert isinstance(e, TextDelta | ThinkingDelta | ToolCallStart)
        assert all(isinstance(v, str) for v in (getattr(e, "text", ""), getattr(e, "id", "")))


def _exercise(make: Any, status: int, body: bytes, content_type: str, stream: bool) -> None:
    def handler(r: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": content_type}, content=body)

    provider = make(client_for(handler))
    events: list[StreamEvent] = []
    try:
        response = asyncio.run(
            provider.complete(_request(), on_stream=events.append if stream else None)
        )
    except ProviderError:
        return
    _check_well_formed(response, events)


def _openai(client: httpx2.AsyncClient) -> Any:
    return openai_compatible("http://localhost:9/v1", http_client=client)


def _anthropic(client: httpx2.AsyncClient) -> Any:
    return anthropic(api_key=KEY, http_client=client)


@EXAMPLES
@given(st.lists(chat_chunk | json_values, max_size=5), st.booleans())
def test_chat_completions_chunks_of_any_shape_give_a_response_or_a_provider_error(
    chunks: list[Any], done: bool
) -> None:
    _exercise(_openai, 200, chat_stream(chunks, done), "text/event-stream", True)


@EXAMPLES
@given(st.lists(anthropic_event | json_values, max_size=6))
def test_messages_api_events_of_any_shape_give_a_response_or_a_provider_error(
    events: list[Any],
) -> None:
    _exercise(_anthropic, 200, anthropic_stream(events), "text/event-stream", True)


@EXAMPLES
@given(st.binary(max_size=300), st.sampled_from([_openai, _anthropic]), st.booleans())
def test_random_bytes_give_a_provider_error(body: bytes, make: Any, stream: bool) -> None:
    content_type = "text/event-stream" if stream else "application/json"
    _exercise(make, 200, body, content_type, stream)


@EXAMPLES
@given(
    json_values
    | shaped(
        id=words,
        model=words,
        choices=st.lists(
            shaped(message=chat_delta, finish_reason=st.sampled_from(["stop", ""])), max_size=2
        ),
        usage=chat_usage,
        content=st.lists(anthropic_event.map(lambda e: e.get("content_block", e)), max_size=3),
        stop_reason=st.sampled_from(["end_turn", "pause_turn"]),
        type=st.just("message"),
        role=st.just("assistant"),
    ),
    st.sampled_from([_openai, _anthropic]),
    st.sampled_from([200, 400, 429, 500, 529]),
)
def test_whole_bodies_of_any_shape_give_a_response_or_a_provider_error(
    body: Any, make: Any, status: int
) -> None:
    _exercise(make, status, orjson.dumps(body), "application/json", False)
