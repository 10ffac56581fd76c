from __future__ import annotations

from typing import Any

import pytest

from afcore import MockExhaustedError, UsageError, mock
from afcore.messages import Request, TextBlock, ToolCall, UserMessage


def request(text: str = "hello") -> Request:
    return Request(model="m", system=(), messages=[UserMessage(text)], tools=())


async def test_replies_are_consumed_in_order_then_refused_naming_the_call() -> None:
    provider = mock(replies=["one", {"content": "two"}])
    assert (await provider.complete(request())).text == "one"
    assert (await provider.complete(request())).text == "two"
    with pytest.raises(MockExhaustedError, match=r"2 scripted replies and call 3") as info:
        await provider.complete(request())
    assert info.value.call == 3


async def test_tool_calls_and_stop_reason() -> None:
    provider = mock(reply={"tool_calls": [{"id": "x", "name": "t", "args": {"a": 1}}]})
    response = await provider.complete(request())
    assert response.content == (ToolCall(id="x", name="t", args={"a": 1}),)
    assert response.stop_reason == "tool_use"


async def test_tool_call_without_id_gets_a_stable_synthesized_one() -> None:
    provider = mock(replies=[{"tool_calls": [{"name": "t"}, {"name": "t"}]}])
    calls = (await provider.complete(request())).tool_calls
    assert [c.id for c in calls] == ["mock-r1-1", "mock-r1-2"]
    assert all(c.id_synthesized for c in calls)


async def test_respond_may_be_sync_or_async() -> None:
    async def later(req: Request) -> str:
        return f"async {len(req.messages)}"

    assert (await mock(respond=later).complete(request())).text == "async 1"
    assert (await mock(respond=lambda r: "sync").complete(request())).text == "sync"


async def test_usage_is_estimated_unless_given() -> None:
    estimated = (await mock(reply="x" * 400).complete(request("y" * 400))).usage
    assert estimated is not None and estimated.estimated
    assert estimated.input_tokens == 100 and estimated.output_tokens == 100
    given = (
        await mock(reply="x", usage={"input_tokens": 7, "output_tokens": 3}).complete(request())
    ).usage
    assert given is not None and not given.estimated
    assert (given.input_tokens, given.output_tokens) == (7, 3)
    per_reply = mock(replies=[{"content": "x", "usage": {"input_tokens": 5, "output_tokens": 1}}])
    usage = (await per_reply.complete(request())).usage
    assert usage is not None and (usage.input_tokens, usage.estimated) == (5, False)


async def test_thinking_comes_first_with_a_signature() -> None:
    response = await mock(reply={"thinking": "hmm", "content": "yes"}).complete(request())
    assert response.content[0].type == "thinking" and response.content[0].signature
    assert response.content[1] == TextBlock("yes")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, "got none"),
        ({"reply": "a", "replies": ["b"]}, "reply and replies"),
        ({"replies": "abc"}, "list of replies"),
        ({"reply": {"text": "x"}}, "unknown key"),
        ({"reply": {"tool_calls": [{"args": {}}]}}, "name"),
        ({"reply": {"tool_calls": [{"name": "t", "args": [1]}]}}, "mapping"),
        ({"reply": 42}, "string or a mapping"),
        ({"reply": "x", "usage": {"input_tokens": "many"}}, "integers"),
    ],
)
def test_bad_scripts_are_refused_when_the_mock_is_made(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        mock(**kwargs)


def test_describe_says_what_kind_of_script() -> None:
    assert mock(replies=["a", "b"]).describe() == {"name": "mock", "mode": "replies", "replies": 2}
    assert mock(reply="a").describe()["mode"] == "reply"
