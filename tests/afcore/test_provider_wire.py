"""Both HTTP providers inside an agent: every recorded exchange in ``../shared/wire/`` run
through a scripted agent whose recording must verify and keep what the vendor said (response
ids, cache writes, the details of an error); a paused turn continued; a thinking budget
sent, refused or recorded as not sent; strict tools; the errors servers send when they
refuse a field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from afcore import (
    Agent,
    BadRequestError,
    ProviderError,
    RateLimitedError,
    UsageError,
    anthropic,
    define_tool,
    from_model_id,
    gemini,
    ollama,
    openai,
    openai_compatible,
    openrouter,
)
from afcore import recording as rec
from afcore.messages import OpaqueBlock, Request, TextBlock, ToolSpec, UserMessage
from afcore.providers import OpenAICompatibleProvider
from tests.afcore.test_provider_anthropic import _streamed_message
from tests.afcore.test_provider_openai import _streamed_completion
from tests.afcore.wire_files import Replay, client_for, load, names, recorded_response, sse

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

KEY = "sk-test-" + "Qw3Er5Ty7Ui9Op1As2Df" * 2


@pytest.fixture(autouse=True)
def _no_keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def _every_exchange() -> list[Any]:
    out: list[Any] = []
    for vendor in ("anthropic", "openai", "openai_compatible"):
        for name in names(vendor):
            if isinstance(name, str):
                out.append(pytest.param(vendor, name, id=f"{vendor}-{name}"))
            else:
                out.append(pytest.param(vendor, "absent", marks=name.marks, id=f"{vendor}-absent"))
    return out


def _records(path: Path) -> list[dict[str, Any]]:
    # The records, without the seals that close each write (their own tests check them).
    lines = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if not line.startswith(b'{"t":"seal",')]


def _tool_results(vendor: str, interactions: list[dict[str, Any]]) -> dict[str, list[str]]:
    """What each tool returned in the recording, in order: what the agent's tools return."""
    names_by_id: dict[str, str] = {}
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for interaction in interactions:
        for m in interaction["request"]["parsed_body"]["messages"]:
            if vendor == "anthropic":
                if not isinstance(m["content"], list):
                    continue
                for b in m["content"]:
                    if b["type"] == "tool_use":
                        names_by_id[b["id"]] = b["name"]
                    elif b["type"] == "tool_result" and b["tool_use_id"] not in seen:
                        seen.add(b["tool_use_id"])
                        out.setdefault(names_by_id[b["tool_use_id"]], []).append(b["content"])
            else:
                for c in m.get("tool_calls") or []:
                    names_by_id[c["id"]] = c["function"]["name"]
                if m["role"] == "tool" and m["tool_call_id"] not in seen:
                    seen.add(m["tool_call_id"])
                    out.setdefault(names_by_id[m["tool_call_id"]], []).append(m["content"])
    return out


def _said(vendor: str, interaction: dict[str, Any]) -> dict[str, Any]:
    """What the vendor answered, put together by the tests' own readers."""
    answer = interaction["response"]
    if "parsed_body" in answer:
        said: dict[str, Any] = answer["parsed_body"]
        return said
    body = answer["body"]["string"]
    return _streamed_message(body) if vendor == "anthropic" else _streamed_completion(body)


def _agent_for(vendor: str, interactions: list[dict[str, Any]], folder: Path) -> Agent:
    """An agent made from the first recorded request (system text, tools, params, model)
    whose provider is answered by the recorded responses, in order, and whose tools return
    what the recording's tools returned."""
    first = interactions[0]["request"]
    body = first["parsed_body"]
    replay = Replay(recorded_response(i) for i in interactions)
    params: dict[str, Any]
    if vendor == "anthropic":
        provider: Any = anthropic(api_key=KEY, http_client=replay.client())
        system = body.get("system")
        specs = [
            (t["name"], t["description"], t["input_schema"], t.get("strict", False))
            for t in body.get("tools", [])
        ]
        params = {k: body[k] for k in ("tool_choice", "cache_control") if k in body}
    else:
        provider = openai_compatible(
            first["uri"].split("#")[0].removesuffix("/chat/completions"),
            api_key=KEY,
            http_client=replay.client(),
            stream_options="stream_options" in body or not body["stream"],
        )
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), None)
        specs = [
            (f["name"], f["description"], f["parameters"], f.get("strict", False))
            for f in (t["function"] for t in body.get("tools", []))
        ]
        composed = ("model", "messages", "tools", "stream", "stream_options")
        params = {k: v for k, v in body.items() if k not in composed}
    results = _tool_results(vendor, interactions)
    builder = Agent.create(
        provider=provider,
        model=body["model"],
        record=folder,
        params=params,
        # No more calls than the recording answers (tool_choice "any" never answers in text).
        max_iterations=len(interactions),
    )
    if system:
        builder = builder.system(system)
    for name, description, schema, strict in specs:
        queue = results.get(name, [])
        builder = builder.tool(
            define_tool(
                name=name,
                description=description,
                input_schema=schema,
                execute=lambda args, ctx, queue=queue: queue.pop(0) if queue else "ok",
                strict=strict,
            )
        )
    if "thinking" in body:
        builder = builder.thinking(budget=body["thinking"]["budget_tokens"])
    return builder.build()


def _user_text(vendor: str, body: dict[str, Any]) -> str:
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    if isinstance(content, str):
        return content
    return "".join(p["text"] for p in content if p["type"] == "text")


@pytest.mark.parametrize(("vendor", "name"), _every_exchange())
def test_a_recorded_exchange_run_by_an_agent_leaves_a_recording_that_verifies(
    vendor: str, name: str, tmp_path: Path
) -> None:
    interactions = load(vendor, name)
    body = interactions[0]["request"]["parsed_body"]
    agent = _agent_for(vendor, interactions, tmp_path)
    failure: ProviderError | None = None
    try:
        agent.run(_user_text(vendor, body), stream=(lambda e: None) if body["stream"] else None)
    except ProviderError as e:
        failure = e
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, report.to_json()
    raw = path.read_bytes()
    assert KEY.encode() not in raw
    records = _records(path)
    assert records[0]["version"] == rec.FORMAT_VERSION

    replies = [r for r in records if r["t"] == "reply"]
    for reply, interaction in zip(replies, interactions, strict=False):
        said = _said(vendor, interaction)
        assert reply.get("response_id") == (said.get("id") or None)
        usage = said["usage"]
        got = reply["usage"]
        if vendor == "anthropic":
            assert got.get("cache_write_tokens", 0) == usage["cache_creation_input_tokens"]
            assert got.get("cache_read_tokens", 0) == usage["cache_read_input_tokens"]
        else:
            details = usage.get("prompt_tokens_details") or {}
            assert got.get("cache_write_tokens", 0) == details.get("cache_write_tokens", 0)
            assert got.get("cache_read_tokens", 0) == details.get("cached_tokens", 0)
    end = records[-1]
    assert end["t"] == "run_end"
    said_last = _said(vendor, interactions[len(replies)]) if failure else None
    if failure is None:
        assert end["status"] in ("answer", "max_iterations")
        assert agent.last_result is not None
        assert agent.last_result.stop_reason == replies[-1]["stop_reason"]
        return
    # The run stopped on an error the vendor sent: every word of it is in the file.
    assert said_last is not None and "error" in said_last
    (event,) = [r for r in records if r["t"] == "error"]
    vendor_error = said_last["error"]
    details = {k: v for k, v in vendor_error.items() if k not in ("type", "message")}
    assert event["error"]["details"] == details == end["error"]["details"]
    assert event["error"]["kind"] == type(failure).__name__
    if failure.request_id is not None:
        assert event["error"]["request_id"] == failure.request_id
    assert end["status"] == "error"


def test_the_groq_error_keeps_its_failed_generation_and_request_id(tmp_path: Path) -> None:
    interactions = load("openai_compatible", "groq_tool_use_failed_error_streaming")
    agent = _agent_for("openai_compatible", interactions, tmp_path)
    with pytest.raises(BadRequestError) as info:
        agent.run("Call the tool.", stream=lambda e: None)
    e = info.value
    assert (e.status, e.error_type, e.mid_stream) == (400, "invalid_request_error", True)
    assert e.request_id == "req_01khrvt2r6e9rb7e8qsg86ywkw"
    assert e.details["code"] == "tool_use_failed"
    assert e.details["failed_generation"].startswith('{"name": "get_something_by_name"')
    assert str(e).startswith(
        "openai_compatible sent an error mid-stream (400 invalid_request_error): "
        "Tool call validation failed"
    )
    assert agent.last_recording is not None
    (event,) = [r for r in _records(agent.last_recording) if r["t"] == "error"]
    assert event["error"]["request_id"] == e.request_id
    assert event["error"]["error_type"] == "invalid_request_error"
    assert event["error"]["details"]["failed_generation"] == e.details["failed_generation"]


# Paused turns


def _message(content: list[dict[str, Any]], stop: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


SEARCH = [
    {"type": "text", "text": "Let me search."},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "af agents"},
    },
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [{"type": "web_search_result", "url": "https://example.org", "title": "x"}],
    },
]


def _paused_then(answers: list[dict[str, Any]]) -> tuple[Replay, Any]:
    replay = Replay(httpx2.Response(200, json=a) for a in answers)
    return replay, anthropic(api_key=KEY, http_client=replay.client())


def test_a_paused_turn_is_sent_back_and_continued_not_taken_for_the_answer(
    tmp_path: Path,
) -> None:
    replay, provider = _paused_then(
        [
            _message(SEARCH, "pause_turn", 1),
            _message([{"type": "text", "text": "Found it."}], "end_turn", 2),
        ]
    )
    agent = Agent.create(provider=provider, model="claude-sonnet-4-5", record=tmp_path).build()
    assert agent.run("Search for af.") == "Found it."
    # The second request ends with the paused reply, every block as the vendor sent it.
    sent = replay.body(1)["messages"]
    assert sent[-1] == {"role": "assistant", "content": SEARCH}
    assert agent.last_result is not None and agent.last_result.iterations == 2
    assert agent.last_recording is not None
    records = _records(agent.last_recording)
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok
    routes = [
        w["value"] for r in records if r["t"] == "reply" for w in r["writes"] if w["key"] == "route"
    ]
    assert routes == ["continue", "answer"]
    first_reply = next(r for r in records if r["t"] == "reply")
    assert (first_reply["stop_reason"], first_reply["response_id"]) == ("pause_turn", "msg_1")
    # The server tool's blocks are kept in the message, opaque but whole.
    with rec.open_recording(agent.last_recording) as r:
        stored = r.value(r.reply(1).writes[0])
    assert [b["type"] for b in stored["content"]] == ["text", "opaque", "opaque"]
    assert stored["content"][1] == {"type": "opaque", "wire": "anthropic", "data": SEARCH[1]}


def test_a_turn_still_paused_at_the_iteration_limit_is_no_answer(tmp_path: Path) -> None:
    _, provider = _paused_then([_message(SEARCH, "pause_turn", 1)])
    agent = Agent.create(
        provider=provider, model="claude-sonnet-4-5", record=tmp_path, max_iterations=1
    ).build()
    agent.run("Search for af.")
    assert agent.last_result is not None
    assert agent.last_result.status == "max_iterations"
    assert agent.last_result.stop_reason == "pause_turn"


async def test_a_streamed_server_tool_call_is_assembled_and_kept_opaque() -> None:
    stream = sse(
        [
            'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_s",'
            '"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
            '"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}',
            'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            '"content_block":{"type":"server_tool_use","id":"srvtoolu_2","name":"web_search",'
            '"input":{}}}',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            '"delta":{"type":"input_json_delta","partial_json":"{\\"query\\": \\"af\\"}"}}',
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}',
            'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
            '"pause_turn"},"usage":{"output_tokens":9}}',
            'event: message_stop\ndata: {"type":"message_stop"}',
        ]
    )
    provider = anthropic(
        api_key=KEY,
        http_client=client_for(
            lambda r: httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, text=stream
            )
        ),
    )
    response = await provider.complete(
        Request(model="m", system=[], messages=[UserMessage("hi")], tools=[]),
        on_stream=lambda e: None,
    )
    assert response.stop_reason == "pause_turn" and response.response_id == "msg_s"
    (block,) = response.content
    assert isinstance(block, OpaqueBlock) and block.kind == "server_tool_use"
    assert block.data == {
        "type": "server_tool_use",
        "id": "srvtoolu_2",
        "name": "web_search",
        "input": {"query": "af"},
    }


# Thinking on servers that cannot


def _ok_completion(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
        },
    )


def test_a_thinking_budget_is_refused_at_build_for_openai() -> None:
    builder = Agent.create(provider=openai(api_key=KEY), model="gpt-4o").thinking(budget=2048)
    with pytest.raises(UsageError, match="the openai provider takes no thinking budget"):
        builder.build()
    # As a model id too, and for an agent given another model later.
    with pytest.raises(UsageError, match="takes no thinking budget"):
        Agent.create(provider=openai(api_key=KEY), model="gpt-4o").reliability(
            providers=[openai(api_key=KEY)]
        ).thinking(budget=2048).build()


def test_a_thinking_budget_a_server_has_no_word_for_is_recorded_as_not_sent(
    tmp_path: Path,
) -> None:
    replay = Replay([_ok_completion(httpx2.Request("POST", "http://x"))])
    agent = (
        Agent.create(provider=ollama(http_client=replay.client()), model="qwen3", record=tmp_path)
        .thinking(budget=2048)
        .build()
    )
    assert agent.run("hi") == "ok"
    body = replay.body()
    assert "thinking" not in body and "reasoning" not in body
    assert agent.last_recording is not None
    reply = next(r for r in _records(agent.last_recording) if r["t"] == "reply")
    assert reply["unsent_params"] == ["thinking"]
    call = next(r for r in _records(agent.last_recording) if r["t"] == "call")
    assert call["params"]["thinking"] == 2048  # what the agent asked, beside what was sent


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        (openrouter, {"reasoning": {"max_tokens": 2048}}),
        (
            gemini,
            {"extra_body": {"google": {"thinking_config": {"thinking_budget": 2048}}}},
        ),
    ],
)
def test_servers_with_a_thinking_parameter_of_their_own_get_the_budget(
    preset: Any, expected: dict[str, Any], tmp_path: Path
) -> None:
    replay = Replay([_ok_completion(httpx2.Request("POST", "http://x"))])
    agent = (
        Agent.create(
            provider=preset(api_key=KEY, http_client=replay.client()), model="m", record=tmp_path
        )
        .thinking(budget=2048)
        .build()
    )
    agent.run("hi")
    body = replay.body()
    assert {k: body[k] for k in expected} == expected and "thinking" not in body
    assert agent.last_recording is not None
    reply = next(r for r in _records(agent.last_recording) if r["t"] == "reply")
    assert "unsent_params" not in reply


# Presets and model ids


def test_openrouter_and_gemini_presets_need_their_keys_and_take_model_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(UsageError, match="set the OPENROUTER_API_KEY environment variable"):
        from_model_id("openrouter:anthropic/claude-sonnet-4.5")
    with pytest.raises(UsageError, match="set the GEMINI_API_KEY environment variable"):
        from_model_id("gemini:gemini-2.5-flash")
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    monkeypatch.setenv("GOOGLE_API_KEY", KEY + "g")
    provider, model = from_model_id("openrouter:anthropic/claude-sonnet-4.5")
    assert isinstance(provider, OpenAICompatibleProvider) and provider.name == "openrouter"
    assert (model, provider.url) == (
        "anthropic/claude-sonnet-4.5",
        "https://openrouter.ai/api/v1/chat/completions",
    )
    assert provider.secrets() == [KEY]
    provider, model = from_model_id("gemini:gemini-2.5-flash")
    assert provider.name == "gemini" and model == "gemini-2.5-flash"
    assert provider.url == (
        "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
    )
    assert provider.secrets() == [KEY + "g"]


# Strict tools


def test_a_strict_tool_says_so_on_both_wires() -> None:
    tool = define_tool(
        name="lookup",
        description="Look up.",
        input_schema={
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": False,
        },
        execute=lambda args, ctx: "x",
        strict=True,
    )
    loose = ToolSpec("other", "", {"type": "object"})
    request = Request(model="m", system=[], messages=[UserMessage("hi")], tools=[tool.spec, loose])
    chat = openai_compatible("http://localhost:9/v1").build_request(request)["tools"]
    assert [t["function"].get("strict") for t in chat] == [True, None]
    messages = anthropic(api_key=KEY).build_request(request)["tools"]
    assert [t.get("strict") for t in messages] == [True, None]
    assert tool.spec.to_json()["strict"] is True and "strict" not in loose.to_json()
    with pytest.raises(UsageError, match="strict is True or False"):
        define_tool("t", "", {"type": "object"}, lambda a, c: "", strict="yes")  # type: ignore[arg-type]


# Errors servers send when they refuse


def _answering(status: int, body: Any, **headers: str) -> OpenAICompatibleProvider:
    def handler(r: httpx2.Request) -> httpx2.Response:
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        return httpx2.Response(status, content=content, headers=headers)

    return openai_compatible("http://localhost:9/v1", http_client=client_for(handler))


def _ask() -> Request:
    return Request(model="m", system=[], messages=[UserMessage("hi")], tools=[])


async def test_a_429_without_a_type_is_rate_limited_and_keeps_what_came_with_it() -> None:
    provider = _answering(
        429,
        {
            "error": {
                "code": 429,
                "message": "Rate limit exceeded: free-models-per-day",
                "metadata": {"headers": {"X-RateLimit-Limit": "50"}},
            }
        },
        **{"x-request-id": "req_abc"},
    )
    with pytest.raises(RateLimitedError) as info:
        await provider.complete(_ask())
    e = info.value
    assert (e.status, e.error_type, e.kind) == (429, None, "rate_limited")
    assert e.request_id == "req_abc"
    assert e.details == {"code": 429, "metadata": {"headers": {"X-RateLimit-Limit": "50"}}}
    assert str(e) == "openai_compatible answered 429: Rate limit exceeded: free-models-per-day"


async def test_a_422_for_stream_options_names_the_field_and_how_to_leave_it_out() -> None:
    detail = [
        {
            "type": "extra_forbidden",
            "loc": ["body", "stream_options"],
            "msg": "Extra inputs are not permitted",
            "input": {"include_usage": True},
        }
    ]
    provider = _answering(422, {"detail": detail})
    with pytest.raises(BadRequestError) as info:
        await provider.complete(_ask(), on_stream=lambda e: None)
    e = info.value
    assert e.refused_fields == ("stream_options",) and e.details == {"detail": detail}
    assert str(e).endswith(
        "(the server does not accept the field stream_options; "
        "leave it out with stream_options=False)"
    )


@pytest.mark.parametrize(
    "body",
    [
        {
            "error": {
                "message": "Unrecognized request argument supplied: stream_options",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        {
            "object": "error",
            "message": "[{'type': 'extra_forbidden', 'loc': ('body', "
            "'stream_options'), 'msg': 'Extra inputs are not permitted'}]",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ],
    ids=["openai-words", "pydantic-repr"],
)
async def test_a_refused_field_is_found_in_the_wording_servers_use(body: Any) -> None:
    with pytest.raises(BadRequestError) as info:
        await _answering(400, body).complete(_ask(), on_stream=lambda e: None)
    assert info.value.refused_fields == ("stream_options",)
    assert "leave it out with stream_options=False" in str(info.value)


async def test_stream_options_false_leaves_the_field_out() -> None:
    sent: list[dict[str, Any]] = []

    def handler(r: httpx2.Request) -> httpx2.Response:
        sent.append(orjson.loads(r.content))
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream"},
            text=sse(
                [
                    'data: {"id":"c","model":"m","choices":[{"index":0,"delta":'
                    '{"content":"ok"},"finish_reason":"stop"}]}',
                    "data: [DONE]",
                ]
            ),
        )

    provider = openai_compatible(
        "http://localhost:9/v1", http_client=client_for(handler), stream_options=False
    )
    response = await provider.complete(_ask(), on_stream=lambda e: None)
    assert response.content == (TextBlock("ok"),) and response.usage is None
    assert sent[0]["stream"] is True and "stream_options" not in sent[0]
    assert provider.describe()["stream_options"] is False
    with pytest.raises(UsageError, match="decides stream_options itself"):
        provider.check_params({"stream_options": {"include_usage": False}})


async def test_googles_error_in_a_list_is_read() -> None:
    body = [{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}]
    with pytest.raises(BadRequestError) as info:
        await _answering(400, body).complete(_ask())
    assert info.value.error_type == "INVALID_ARGUMENT"
    assert info.value.vendor_message == "API key not valid."
