"""Replaying recorded runs: identical replays of every sample and demo, the first difference
found at the right call, slot and path for each kind of change, no network, the recorded
clock and random source served back, attempts replayed, and the replay's own recording."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from afcore import (
    Agent,
    RateLimitedError,
    RecordingConfig,
    ReplayDivergedError,
    anthropic,
    define_tool,
    mock,
    rule,
)
from afcore import recording as rec
from afcore.demos import DEMOS, compaction, trip
from afcore.messages import (
    OpaqueBlock,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from afcore.providers import (
    Provider,
    ReplayProvider,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    keys_when_called,
)
from afcore.providers._replay import recorded_error
from afcore.replay import Tape, replay, replaying
from afcore.tools import ToolContext
from afcore.window import token_budget
from tests.afcore.wire_files import load, recorded_response
from tests.conftest import fixed_recording

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = {
    "sample-trip": trip.build_agent,
    "sample-trip-rain": trip.build_agent,
    "sample-compaction": compaction.build_agent,
    "sample-sliding": compaction.build_sliding_agent,
}


def verified(path: Path | None) -> None:
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, [str(p) for p in report.problems]
    assert report.verified == report.calls


def fresh(tmp_path: Path, name: str = "run") -> RecordingConfig:
    return dataclasses.replace(fixed_recording(tmp_path / name), run_id=None)


# -- identical replays ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_replays_identical(name: str, tmp_path: Path) -> None:
    path = ROOT / "recordings" / f"{name}.jsonl"
    with rec.open_recording(path) as r:
        calls = r.call_count
    report = replay(path, SAMPLES[name](), out=tmp_path)
    assert report.status == "identical", report.summary()
    assert (report.calls, report.identical_calls) == (calls, calls)
    assert report.summary() == f"{calls} calls, identical"
    verified(report.recording)


@pytest.mark.parametrize("name", ["sample-trip", "sample-trip-rain", "sample-compaction"])
def test_samples_replay_identical_with_their_tools_recorded(name: str, tmp_path: Path) -> None:
    report = replay(
        ROOT / "recordings" / f"{name}.jsonl", SAMPLES[name](), out=tmp_path, tools="recorded"
    )
    assert report.status == "identical", report.summary()


def test_recorded_tools_do_not_write_the_state_a_fact_reads(tmp_path: Path) -> None:
    # The sliding demo's tools file what they find in the run's state, and a fact puts that
    # notebook in the prompt: with the tools not run, the notebook stays empty, and the
    # replay differs where the fact is sent (as the docs say of --tools recorded).
    report = replay(
        ROOT / "recordings" / "sample-sliding.jsonl",
        compaction.build_sliding_agent(),
        out=tmp_path,
        tools="recorded",
    )
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.where.get("injection")) == (2, "system", "notebook")


@pytest.mark.parametrize("name", sorted(n for n in DEMOS if n != "router"))  # router: a flow
def test_a_fresh_run_of_every_demo_replays_identical(name: str, tmp_path: Path) -> None:
    demo = DEMOS[name]
    agent = demo.build(record=tmp_path / "runs")
    assert isinstance(agent, Agent)
    agent.run(demo.message)
    assert agent.last_recording is not None
    report = replay(agent.last_recording, demo.build(), out=tmp_path / "replays")
    assert report.status == "identical", report.summary()
    assert report.calls == agent.last_result.calls  # type: ignore[union-attr]


def test_the_replay_writes_its_own_recording_that_names_the_one_replayed(tmp_path: Path) -> None:
    original = ROOT / "recordings" / "sample-trip.jsonl"
    report = replay(original, trip.build_agent(), out=tmp_path, tools="recorded")
    assert report.recording is not None and report.recording.parent == tmp_path
    with rec.open_recording(report.recording) as mine, rec.open_recording(original) as theirs:
        link = mine.header.replay_of
        assert link is not None
        assert (link.run_id, link.file, link.tools) == ("sample-trip", original.name, "recorded")
        assert mine.header.seed == theirs.header.seed
        # The calls, replies and messages are the recorded ones, byte for byte.
        for n in theirs.call_numbers:
            assert mine.call(n).hash == theirs.call(n).hash
        assert mine.message_count == theirs.message_count
        assert all(mine.message_ref(m) == theirs.message_ref(m) for m in range(1, 14))
    verified(report.recording)
    # A replay's recording is a recording like any other: it replays in turn.
    again = replay(report.recording, trip.build_agent(), out=tmp_path / "again")
    assert again.status == "identical"


def test_a_replaying_agent_replays_from_the_start_at_each_run(tmp_path: Path) -> None:
    agent = replaying(trip.build_agent(), ROOT / "recordings" / "sample-trip.jsonl", out=tmp_path)
    first = agent.run(trip.DEFAULT_MESSAGE)
    second = agent.run(trip.DEFAULT_MESSAGE)
    assert first == second and "Calouste Gulbenkian" in first


# -- a shop agent, changed one way at a time ---------------------------------------------------


def lookup_result(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"order": args["order"], "item": "kettle", "paid": 42.5}


ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order": {"type": "string", "description": "The order's id."}},
    "required": ["order"],
}


def shop(
    record: RecordingConfig | Path,
    *,
    tone: str = "Be brief.",
    when: Callable[[Any], bool] = lambda s: "refund" in s.user_message,
    schema: dict[str, Any] | None = None,
    execute: Callable[[dict[str, Any], ToolContext], Any] = lookup_result,
    params: dict[str, Any] | None = None,
    threshold: int = 100_000,
) -> Agent:
    def respond(request: Request) -> dict[str, Any]:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        usage = {"input_tokens": 100 * len(request.messages), "output_tokens": 5}
        if len(results) < 3:
            order = f"A{len(results) + 1}"
            return {
                "content": f"Looking up {order}.",
                "tool_calls": [{"id": f"c{order}", "name": "lookup", "args": {"order": order}}],
                "usage": usage,
            }
        return {"content": "Done: " + "; ".join(r.content for r in results), "usage": usage}

    lookup = define_tool(
        name="lookup",
        description="Look an order up.",
        input_schema=schema or ORDER_SCHEMA,
        execute=execute,
    )
    return (
        Agent.create(
            provider=mock(respond=respond),
            model="shop-model",
            params=params if params is not None else {"temperature": 0.2},
            record=record,
            name="shop",
        )
        .system("You help people with their orders.")
        .steering(tone, id="tone")
        .instruction("Quote the refund policy.", id="refunds", when=when)
        .tool(lookup)
        .window(token_budget(threshold_tokens=threshold, keep_recent_turns=1))
        .build()
    )


MESSAGE = "I want a refund for my orders."


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    agent = shop(fresh(tmp_path))
    agent.run(MESSAGE)
    assert agent.last_recording is not None
    return agent.last_recording


def diverged(recorded: Path, agent: Agent, tmp_path: Path, **kw: Any) -> Any:
    report = replay(recorded, agent, out=tmp_path / "replays", **kw)
    assert report.status == "diverged", report.summary()
    assert report.divergence is not None
    return report


def test_the_unchanged_shop_agent_replays_identical(recorded: Path, tmp_path: Path) -> None:
    report = replay(recorded, shop(fresh(tmp_path, "again")), out=tmp_path)
    assert report.summary() == "4 calls, identical"


def test_a_changed_system_segment_stops_the_replay_at_its_injection(
    recorded: Path, tmp_path: Path
) -> None:
    report = diverged(recorded, shop(fresh(tmp_path), tone="Be kind."), tmp_path)
    d = report.divergence
    assert (d.call, d.slot, d.path) == (1, "system", "segment 2 (steering tone)")
    assert (d.recorded, d.replayed, d.why_key) == ("Be brief.", "Be kind.", "system:tone")
    assert d.where == {"segment": 2, "flavor": "steering", "injection": "tone"}
    assert report.identical_calls == 0 and report.calls == 1


def test_a_changed_rule_predicate_stops_the_replay_at_the_message_it_no_longer_sends(
    recorded: Path, tmp_path: Path
) -> None:
    agent = shop(fresh(tmp_path), when=lambda s: "return" in s.user_message)
    d = diverged(recorded, agent, tmp_path).divergence
    assert (d.call, d.slot, d.kind) == (1, "messages", "removed")
    assert d.path == "message 2"
    assert d.recorded == {"role": "user", "content": "Quote the refund policy."}
    assert d.where["injection"] == "refunds" and d.why_key == "message:2"


def test_a_changed_tool_schema_stops_the_replay_at_the_field(
    recorded: Path, tmp_path: Path
) -> None:
    schema = json.loads(json.dumps(ORDER_SCHEMA))
    schema["properties"]["order"]["description"] = "The order's id, as A<number>."
    d = diverged(recorded, shop(fresh(tmp_path), schema=schema), tmp_path).divergence
    assert (d.call, d.slot) == (1, "tools")
    assert d.path == "tool lookup: input_schema.properties.order.description"
    assert (d.recorded, d.replayed) == ("The order's id.", "The order's id, as A<number>.")
    assert d.why_key == "tools@1" and d.where["tool"] == "lookup"


def test_a_changed_tool_result_stops_the_replay_at_the_tool_call(
    recorded: Path, tmp_path: Path
) -> None:
    def dearer(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {**lookup_result(args, ctx), "paid": 43.0}

    report = diverged(recorded, shop(fresh(tmp_path), execute=dearer), tmp_path)
    d = report.divergence
    assert (d.call, d.slot, d.path) == (1, "tool_result", "tool:lookup#1: paid")
    assert (d.recorded, d.replayed, d.why_key) == (42.5, 43.0, "tool:lookup#1.result")
    assert report.identical_calls == 1
    # The replay's recording holds the result that differed.
    with rec.open_recording(report.recording) as mine:
        assert '"paid":43.0' in mine.message(4)["content"]


def test_a_changed_window_threshold_stops_the_replay_where_the_window_folds(
    recorded: Path, tmp_path: Path
) -> None:
    # Call 2 is sent 4 messages (400 tokens, as the mock counts): over 250, the strategy
    # visits, but the only turn it may fold holds the newest tool result, which stays. After
    # call 3 that turn may go: call 4 is the first sent a different window, without the
    # first reply (message 3) and its result.
    report = diverged(recorded, shop(fresh(tmp_path), threshold=250), tmp_path)
    d = report.divergence
    assert (d.call, d.slot, d.kind) == (4, "messages", "removed")
    assert (d.path, d.why_key, d.others) == ("message 3", "message:3", 1)
    assert d.recorded["role"] == "assistant" and d.replayed is None
    assert report.identical_calls == 3


def test_changed_model_parameters_stop_the_replay_at_the_parameter(
    recorded: Path, tmp_path: Path
) -> None:
    agent = shop(fresh(tmp_path), params={"temperature": 0.7})
    d = diverged(recorded, agent, tmp_path).divergence
    assert (d.call, d.slot, d.path) == (1, "params", "params.temperature")
    assert (d.recorded, d.replayed, d.why_key) == (0.2, 0.7, "call:1")


def test_a_replaying_agent_raises_the_divergence_in_words(recorded: Path, tmp_path: Path) -> None:
    agent = replaying(shop(fresh(tmp_path), tone="Be kind."), recorded, out=tmp_path)
    with pytest.raises(ReplayDivergedError) as caught:
        agent.run(MESSAGE)
    said = str(caught.value)
    assert "call 1, system, segment 2 (steering tone)" in said
    assert "'Be brief.'" in said and "'Be kind.'" in said
    assert caught.value.divergence.why_key == "system:tone"
    # The replay's recording ends on the divergence, and verifies.
    result = agent.last_result
    assert result is not None and result.status == "error"
    verified(result.recording)


def test_then_live_goes_on_with_the_agents_own_provider(recorded: Path, tmp_path: Path) -> None:
    report = replay(recorded, shop(fresh(tmp_path), tone="Be kind."), out=tmp_path, then_live=True)
    assert report.status == "diverged" and report.live_from == 1
    assert report.calls == 4 and report.answer is not None and report.answer.startswith("Done:")
    with rec.open_recording(report.recording) as mine:
        assert mine.header.replay_of is not None and mine.header.replay_of.then_live
        assert mine.end is not None and mine.end.status == "answer"


def test_a_run_that_stops_sooner_than_the_recorded_one_differs_at_the_missing_call(
    recorded: Path, tmp_path: Path
) -> None:
    agent = shop(fresh(tmp_path))
    agent.max_iterations = 2
    d = diverged(recorded, agent, tmp_path).divergence
    assert (d.call, d.slot, d.path, d.kind) == (3, "run", "call", "removed")
    assert d.why_key == "call:3"


def test_a_call_the_recording_does_not_hold_never_reaches_a_provider(tmp_path: Path) -> None:
    short = shop(fresh(tmp_path, "short"))
    short.max_iterations = 2
    short.run(MESSAGE)
    assert short.last_result is not None and short.last_result.status == "max_iterations"

    def never(request: Request) -> str:
        raise AssertionError("a replay asked the provider")

    agent = shop(fresh(tmp_path))
    agent.provider = mock(respond=never)
    report = replay(short.last_recording, agent, out=tmp_path / "r")  # type: ignore[arg-type]
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.path, d.kind) == (3, "run", "call", "added")
    assert report.calls == 3 and report.identical_calls == 2


def test_tools_recorded_serve_the_recorded_results_and_run_nothing(
    recorded: Path, tmp_path: Path
) -> None:
    ran: list[str] = []

    def spy(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        ran.append(args["order"])
        return lookup_result(args, ctx)

    report = replay(recorded, shop(fresh(tmp_path), execute=spy), out=tmp_path, tools="recorded")
    assert report.status == "identical" and ran == []
    report = replay(recorded, shop(fresh(tmp_path), execute=spy), out=tmp_path)
    assert report.status == "identical" and ran == ["A1", "A2", "A3"]


# -- what varies between runs -------------------------------------------------------------------


def clocked(record: RecordingConfig | Path, *, wall: bool = False) -> Agent:
    """An agent whose tool stamps its result with the time and a random ticket, and whose
    rule reads the clock."""

    def stamp(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        now = time.time() if wall else ctx.now().timestamp()
        return {"at": now, "ticket": ctx.random.randrange(10**9)}

    def respond(request: Request) -> dict[str, Any] | str:
        if not any(isinstance(m, ToolResultMessage) for m in request.messages):
            return {"tool_calls": [{"name": "stamp", "args": {}}]}
        return "stamped"

    tool = define_tool(name="stamp", description="Stamp.", input_schema={}, execute=stamp)
    return (
        Agent.create(provider=mock(respond=respond), model="m", record=record)
        .instruction("It is late.", id="late", when=lambda s: s.now().microsecond % 2 == 0)
        .fact(lambda s: f"Lucky number {s.random.randrange(100)}.", id="lucky")
        .tool(tool)
        .build()
    )


def real_clock(folder: Path) -> RecordingConfig:
    return RecordingConfig(dir=folder)


def test_the_recorded_clock_and_random_source_are_served_back(tmp_path: Path) -> None:
    agent = clocked(real_clock(tmp_path / "run"))
    agent.run("stamp it")
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        reads = [x for _, x in r.records() if isinstance(x, rec.ClockRead)]
        assert {x.by for x in reads} == {"iteration:1", "iteration:2", "tool:stamp#1"}
        assert r.header.seed is not None
    time.sleep(0.002)
    report = replay(path, clocked(real_clock(tmp_path / "x")), out=tmp_path / "replays")
    assert report.status == "identical", report.summary()


def test_a_time_read_outside_the_recorded_clock_makes_the_replay_differ_where_used(
    tmp_path: Path,
) -> None:
    agent = clocked(real_clock(tmp_path / "run"), wall=True)
    agent.run("stamp it")
    time.sleep(0.002)
    report = replay(
        agent.last_recording,  # type: ignore[arg-type]
        clocked(real_clock(tmp_path / "x"), wall=True),
        out=tmp_path / "replays",
    )
    d = report.divergence
    assert report.status == "diverged" and d is not None
    assert (d.call, d.slot, d.path) == (1, "tool_result", "tool:stamp#1: at")


def test_the_same_value_with_its_keys_in_another_order_is_not_a_difference(
    tmp_path: Path,
) -> None:
    order = [("a", 1), ("b", 2)]

    def listed(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return dict(order)

    def respond(request: Request) -> dict[str, Any] | str:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return results[0].content if results else {"tool_calls": [{"name": "listed"}]}

    def build(folder: Path) -> Agent:
        tool = define_tool(name="listed", description="List.", input_schema={}, execute=listed)
        return Agent.create(provider=mock(respond=respond), model="m", record=folder).tool(tool)

    agent = build(tmp_path / "run").build()
    agent.run("go")
    order.reverse()  # the same dict, built in another order: {"b": 2, "a": 1}
    report = replay(agent.last_recording, build(tmp_path / "x").build(), out=tmp_path / "r")  # type: ignore[arg-type]
    assert report.status == "identical", report.summary()
    with rec.open_recording(report.recording) as mine:  # type: ignore[arg-type]
        assert mine.message(3)["content"] == '{"a":1,"b":2}'  # the recorded bytes kept


# -- no network, no key -------------------------------------------------------------------------


class FailsOnUse:
    """A transport that fails the test if anything is sent through it."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        raise AssertionError(f"a replay sent an HTTP request: {request.method} {request.url}")


def country_agent(provider: Provider, record: RecordingConfig | Path) -> Agent:
    builder = Agent.create(provider=provider, model="claude-sonnet-4-0", record=record).tool(
        country_tool()
    )
    if provider.name != "openai":  # its reasoning models take no budget
        builder = builder.thinking(budget=3000)
    return builder.build()


def country_tool() -> Any:
    return define_tool(
        name="get_user_country",
        description="The user's country.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args, ctx: "Mexico",
    )


def test_a_replay_sends_no_http_request_and_needs_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interactions = load("anthropic", "tool_with_thinking")
    served = iter([recorded_response(i) for i in interactions])
    real = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: next(served)))
    agent = country_agent(anthropic(api_key="sk-ant-test", http_client=real), tmp_path / "run")
    agent.run("What is the largest city in the user country?")
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        thinking = r.message(2)["content"][0]
        assert thinking["type"] == "thinking" and thinking["signature"]

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    wire = FailsOnUse()
    with keys_when_called():
        provider = anthropic(http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(wire)))
    assert provider.missing_key is not None  # made without a key: none is needed
    streamed: list[StreamEvent] = []
    report = replay(
        path, country_agent(provider, tmp_path / "x"), out=tmp_path / "r", stream=streamed.append
    )
    assert report.status == "identical", report.summary()
    assert wire.requests == []
    assert any(isinstance(e, ThinkingDelta) for e in streamed)
    assert any(isinstance(e, ToolCallStart) for e in streamed)
    with rec.open_recording(path) as theirs, rec.open_recording(report.recording) as mine:  # type: ignore[arg-type]
        assert mine.message(2) == theirs.message(2)  # the signature sent back as it came
        assert mine.reply(1).response_id == theirs.reply(1).response_id  # type: ignore[union-attr]


class NoNetwork:
    """Every way out of the process refused: sockets connecting, names resolved, and any
    httpx2 client sending. Each attempt is kept, then fails."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.attempts: list[str] = []
        for owner, name in (
            (socket.socket, "connect"),
            (socket.socket, "connect_ex"),
            (socket, "create_connection"),
            (socket, "getaddrinfo"),
            (httpx2.AsyncClient, "send"),
            (httpx2.Client, "send"),
        ):
            monkeypatch.setattr(
                owner, name, self._refuse(f"{getattr(owner, '__name__', owner)}.{name}")
            )

    def _refuse(self, what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.attempts.append(what)
            raise OSError(f"the network is off in this test ({what})")

        return refuse


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
def test_a_replay_opens_no_socket_with_the_providers_own_clients(
    vendor: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from afcore import openai

    # Recorded through a transport that answers with what the vendor sent once.
    folder = "anthropic" if vendor == "anthropic" else "openai"
    name = "tool_with_thinking" if vendor == "anthropic" else "openai_tool_output"
    interactions = load(folder, name)
    served = iter([recorded_response(i) for i in interactions])
    wire = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: next(served)))
    make = anthropic if vendor == "anthropic" else openai
    agent = country_agent(make(api_key="sk-test-key-000", http_client=wire), tmp_path / "run")
    agent.max_iterations = 2  # OpenAI's second reply calls a tool of another program
    agent.run("What is the largest city in the user country?")
    path = agent.last_recording
    assert path is not None

    network = NoNetwork(monkeypatch)
    # The guard holds: the provider as a live run makes it (its own client) reaches for the
    # network, and is refused.
    live = country_agent(make(api_key="sk-test-key-000"), tmp_path / "live")
    with pytest.raises(Exception):  # noqa: B017 - whichever error the SDK wraps it in
        live.run("What is the largest city in the user country?")
    assert network.attempts
    network.attempts.clear()

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with keys_when_called():
        keyless = make()  # its own default HTTP client, and no key
    again = country_agent(keyless, tmp_path / "x")
    again.max_iterations = 2
    report = replay(path, again, out=tmp_path / "r")
    assert report.status == "identical", report.summary()
    assert report.calls == 2 and network.attempts == []


def test_a_keyless_provider_asks_for_its_key_only_when_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from afcore.errors import MissingKeyError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(MissingKeyError):
        anthropic()
    with keys_when_called():
        provider = anthropic()
    request = Request(model="m", system=(), messages=(), tools=())
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        asyncio.run(provider.complete(request))


# -- attempts, and what providers send that af only keeps -------------------------------------


def test_a_run_with_attempts_replays_its_attempts_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    left: list[BaseException | str] = [
        RateLimitedError("slow down", provider="mock", status=429, retry_after=7.0),
        "hello",
    ]

    def respond(request: Request) -> str:
        out = left.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    def build(provider: Provider, folder: Path) -> Agent:
        wait = rule(
            lambda s: s.error_kind == "rate_limited" and s.retry_after == 7.0,
            "retry",
            kind="busy",
            delay=lambda s: s.retry_after or 0.0,
        )
        return Agent.create(provider=provider, model="m", record=folder).reliability(
            post_decide=[wait]
        )

    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr("afcore.loop._attempts.asyncio.sleep", sleep)
    agent = build(mock(respond=respond), tmp_path / "run").build()
    assert agent.run("hi") == "hello"
    assert waited == [7.0]
    waited.clear()
    report = replay(
        agent.last_recording,  # type: ignore[arg-type]
        build(mock(reply="never asked"), tmp_path / "x").build(),
        out=tmp_path / "r",
    )
    assert report.status == "identical", report.summary()
    assert report.calls == 2 and waited == []  # the 7 s the rule asked for are not waited
    with rec.open_recording(report.recording) as mine:  # type: ignore[arg-type]
        errors = [x for _, x in mine.records() if isinstance(x, rec.ErrorEvent)]
        assert [e.error.kind for e in errors] == ["RateLimitedError"]
        assert errors[0].error.retry_after == 7.0 and errors[0].decision.delay == 7.0  # type: ignore[union-attr]


def test_opaque_blocks_and_signed_thinking_are_served_as_recorded(tmp_path: Path) -> None:
    opaque = OpaqueBlock("anthropic", {"type": "server_tool_use", "id": "s1", "name": "web"})
    reply = Response(
        content=(ThinkingBlock("hmm", signature="sig-1"), opaque, TextBlock("Found it.")),
        stop_reason="end_turn",
        usage=Usage(input_tokens=3, output_tokens=2, cache_read_tokens=1),
        model="m-1",
        response_id="msg_1",
    )
    agent = Agent.create(provider=mock(reply=reply), model="m", record=tmp_path / "run").build()
    agent.run("find")
    report = replay(
        agent.last_recording,  # type: ignore[arg-type]
        Agent.create(provider=mock(reply="x"), model="m", record=tmp_path / "x").build(),
        out=tmp_path / "r",
    )
    assert report.status == "identical" and report.answer == "Found it."
    with rec.open_recording(report.recording) as mine:  # type: ignore[arg-type]
        assert mine.message(2)["content"][:2] == [
            {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
            opaque.to_json(),
        ]
        r1 = mine.reply(1)
        assert r1 is not None and r1.response_id == "msg_1" and r1.model == "m-1"
        assert r1.usage is not None and r1.usage.cache_read_tokens == 1


# -- the recording runs out -----------------------------------------------------------------


def test_a_recording_cut_off_mid_run_replays_up_to_where_it_stops(
    recorded: Path, tmp_path: Path
) -> None:
    lines = recorded.read_bytes().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if b'"t":"reply"' in x and b'"call":3' in x)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:cut]))
    report = replay(torn, shop(fresh(tmp_path)), out=tmp_path / "r")
    assert report.status == "identical" and report.ended_at == 3
    assert not report.finished and not report.ok
    assert (
        report.summary() == "3 calls, identical (the recording ends at call 3, before its answer)"
    )


@pytest.mark.parametrize("torn", [True, False], ids=["mid-line", "at-a-line"])
def test_a_recording_cut_off_at_its_ending_says_the_run_did_not_finish(
    recorded: Path, tmp_path: Path, torn: bool
) -> None:
    lines = recorded.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if b'"t":"run_end"' in x)
    cut = tmp_path / "cut.jsonl"
    # Every call and its answer are there; the run's ending is half written, or not at all.
    cut.write_bytes(b"".join(lines[:at]) + (lines[at][: len(lines[at]) // 2] if torn else b""))
    whole = replay(recorded, shop(fresh(tmp_path)), out=tmp_path / "r")
    report = replay(cut, shop(fresh(tmp_path)), out=tmp_path / "r")
    assert whole.ok and whole.finished
    assert report.status == "identical" and not report.finished and not report.ok
    assert report.ended_at is None and report.identical_calls == whole.calls
    assert report.summary() == (
        f"the recorded run did not finish: {whole.calls} calls identical, the recording "
        "ends before the run did"
    )
    assert report.to_json()["finished"] is False


def test_a_file_with_no_run_in_it_fails_the_replay(tmp_path: Path) -> None:
    path = ROOT / "tests" / "fixtures" / "v1.1" / "valid.jsonl"
    header_only = tmp_path / "header.jsonl"
    header_only.write_bytes(path.read_bytes().splitlines(keepends=True)[0])
    report = replay(header_only, trip.build_agent(), out=tmp_path)
    assert report.status == "failed" and "no user message" in (report.error or "")


# -- the replay provider on its own -------------------------------------------------------------


def test_the_replay_provider_streams_what_it_serves_and_raises_what_failed() -> None:
    response = Response(
        content=(ThinkingBlock("t" * 100), TextBlock("x" * 130), ToolCall("c1", "f", {})),
        stop_reason="tool_use",
    )
    error = recorded_error(
        {
            "kind": "RateLimitedError",
            "message": "slow",
            "status": 429,
            "retry_after": 3,
            "request_id": "req_1",
            "mid_stream": True,
        },
        provider="anthropic",
        call=2,
    )
    provider = ReplayProvider([response, error], name="anthropic")
    seen: list[StreamEvent] = []
    request = Request(model="m", system=(), messages=(), tools=())
    assert asyncio.run(provider.complete(request, on_stream=seen.append)) is response
    assert [type(e) for e in seen] == [
        ThinkingDelta,
        ThinkingDelta,
        *[TextDelta] * 3,
        ToolCallStart,
    ]
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "x" * 130
    with pytest.raises(RateLimitedError) as caught:
        asyncio.run(provider.complete(request))
    e = caught.value
    assert (e.status, e.retry_after, e.request_id, e.mid_stream, e.call) == (
        429,
        3.0,
        "req_1",
        True,
        2,
    )
    assert provider.describe() == {"name": "anthropic", "replay": True}


def test_an_exception_that_was_not_a_providers_error_is_raised_as_it_was_worded() -> None:
    error = recorded_error(
        {
            "kind": "ProviderError",
            "message": "x failed on call 3: KeyError: 'a'",
            "reason": "unknown",
        },
        provider="x",
    )
    assert type(error).__name__ == "KeyError" and str(error) == "'a'"


def test_the_tape_reads_the_recording_once(tmp_path: Path) -> None:
    tape = Tape.read(ROOT / "recordings" / "sample-trip.jsonl")
    try:
        assert tape.user_message == trip.DEFAULT_MESSAGE
        assert sorted(tape.calls) == [1, 2, 3, 4, 5]
        assert tape.tools["convert_currency#1"][0] == "rejected"
        outcome = tape.outcome(1)
        assert isinstance(outcome, Response) and outcome.stop_reason == "tool_use"
    finally:
        tape.close()


def test_seeds_differ_between_runs_unless_fixed(tmp_path: Path) -> None:
    seeds = []
    for i in range(2):
        agent = Agent.create(provider=mock(reply="x"), model="m", record=tmp_path / str(i)).build()
        agent.run("hi")
        with rec.open_recording(agent.last_recording) as r:  # type: ignore[arg-type]
            seeds.append(r.header.seed)
    assert seeds[0] != seeds[1]
    assert all(isinstance(s, int) and 0 <= s < 2**63 for s in seeds)
    agent = Agent.create(provider=mock(reply="x"), model="m", record=fresh(tmp_path)).build()
    agent.run("hi")
    with rec.open_recording(agent.last_recording) as r:  # type: ignore[arg-type]
        assert r.header.seed == 7


def test_a_replay_of_a_run_that_continued_a_conversation_continues_it_again(
    tmp_path: Path,
) -> None:
    from afcore.messages import AssistantMessage, UserMessage

    history = [UserMessage("Hi"), AssistantMessage((TextBlock("Hello!"),))]

    def respond(request: Request) -> str:
        return f"you said {len(request.messages)} things"

    agent = Agent.create(provider=mock(respond=respond), model="m", record=tmp_path / "run").build()
    agent.run("And now?", history=history)
    report = replay(
        agent.last_recording,  # type: ignore[arg-type]
        Agent.create(provider=mock(reply="x"), model="m", record=tmp_path / "x").build(),
        out=tmp_path / "r",
    )
    assert report.status == "identical" and report.answer == "you said 3 things"


def test_the_recorded_error_kinds_match_the_error_tree() -> None:
    # Every provider error the loop records by class name is raised again as that class.
    from afcore import errors

    for name in ("RateLimitedError", "OverloadedError", "BadRequestError", "StreamCutError"):
        raised = recorded_error({"kind": name, "message": "m"}, provider="p")
        assert type(raised) is getattr(errors, name)
