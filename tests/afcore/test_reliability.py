"""Reliability rules: retries, other providers, a fallback, circuit breakers, fail-fast, and
every attempt recorded as a call with its outcome."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from afcore import (
    Agent,
    BadRequestError,
    OverloadedError,
    ProviderError,
    RateLimitedError,
    ReliabilityFailFastError,
    ServerError,
    StreamCutError,
    UsageError,
    anthropic,
    circuit_breaker,
    define_tool,
    mock,
    rule,
)
from afcore import recording as rec
from afcore.messages import Request, Response, TextBlock
from afcore.providers import Provider, StreamEvent, StreamHandler, TextDelta
from afcore.reliability import Attempt
from tests.afcore.wire_files import broken_after, client_for, sse
from tests.conftest import fixed_recording

Outcome = BaseException | str | dict[str, Any]


def scripted(outcomes: Sequence[Outcome], name: str = "mock") -> Provider:
    """A mock that raises or answers each call in turn (an exception instance is raised)."""
    left = list(outcomes)

    def respond(request: Request) -> str | dict[str, Any]:
        out = left.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    provider = mock(respond=respond)
    provider.name = name
    return provider


def answering(text: str, name: str) -> Provider:
    provider = mock(reply=text)
    provider.name = name
    return provider


def rate_limited() -> RateLimitedError:
    return RateLimitedError("too many requests", provider="mock", status=429, retry_after=0.0)


def overloaded() -> OverloadedError:
    return OverloadedError("overloaded", provider="mock", status=529)


def server_error() -> ServerError:
    return ServerError("internal error", provider="mock", status=500)


def records(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    # The records, without the seals that close each write (their own tests check them).
    lines = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in lines if not line.startswith(b'{"t":"seal",')]


def of(path: Path | None, t: str) -> list[dict[str, Any]]:
    return [r for r in records(path) if r["t"] == t]


def verified(path: Path | None) -> None:
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, [str(p) for p in report.problems]
    assert report.verified == report.calls


def retrying(*kinds: str) -> Any:
    return rule(lambda s: s.error_kind in kinds, "retry", kind="transient")


def build(provider: Provider, tmp_path: Path, **reliability: Any) -> Agent:
    # A run id of its own for each run: some tests run an agent twice.
    config = dataclasses.replace(fixed_recording(tmp_path), run_id=None)
    return (
        Agent.create(provider=provider, model="m", record=config).reliability(**reliability).build()
    )


# -- retries -------------------------------------------------------------------------------


def test_a_retry_after_a_rate_limit_then_the_answer(tmp_path: Path) -> None:
    agent = build(
        scripted([rate_limited(), "hello"]), tmp_path, post_decide=[retrying("rate_limited")]
    )
    assert agent.run("hi") == "hello"
    result = agent.last_result
    assert result is not None and result.calls == 2 and result.iterations == 1
    path = agent.last_recording
    calls, errors, replies = of(path, "call"), of(path, "error"), of(path, "reply")
    assert [c["call"] for c in calls] == [1, 2]
    assert calls[0]["rsid"] == calls[1]["rsid"] == "call-llm#1"
    assert [c["attempt"] for c in calls] == [
        {"n": 1, "provider": "mock", "via": "agent"},
        {"n": 2, "provider": "mock", "via": "agent"},
    ]
    assert calls[0]["hash"] == calls[1]["hash"]  # the same request, sent again
    (error,) = errors
    assert error["call"] == 1 and error["rsid"] == "call-llm#1"
    assert error["error"] == {
        "kind": "RateLimitedError",
        "message": "too many requests",
        "reason": "rate_limited",
        "status": 429,
        "retry_after": 0.0,
    }
    assert error["decision"] == {"verb": "retry", "rule": "transient"}
    (reply,) = replies
    assert reply["call"] == 2 and "decision" not in reply
    assert of(path, "run_end")[0]["calls"] == 2
    verified(path)


@pytest.mark.parametrize(
    "failure", [rate_limited, overloaded], ids=["429-rate-limited", "529-overloaded"]
)
def test_429_and_529_are_retried_by_their_kind(tmp_path: Path, failure: Any) -> None:
    rules = [
        rule(
            lambda s: s.error_kind in ("rate_limited", "overloaded") and s.attempt < 3,
            "retry",
            kind="busy",
            delay=lambda s: s.retry_after or 0.001,
        )
    ]
    agent = build(scripted([failure(), failure(), "at last"]), tmp_path, post_decide=rules)
    assert agent.run("hi") == "at last"
    errors = of(agent.last_recording, "error")
    assert [e["error"]["status"] for e in errors] == [failure().status] * 2
    assert [e["decision"] for e in errors] == [
        {"verb": "retry", "rule": "busy", "delay": 0.001}
    ] * 2
    verified(agent.last_recording)


def test_without_a_rule_that_decides_the_error_stands(tmp_path: Path) -> None:
    agent = build(scripted([BadRequestError("bad model", status=400)]), tmp_path)
    with pytest.raises(BadRequestError, match="bad model") as raised:
        agent.run("hi")
    assert raised.value.call == 1
    (error,) = of(agent.last_recording, "error")
    assert error["decision"] == {"verb": "ok"}
    end = of(agent.last_recording, "run_end")[0]
    assert end["status"] == "error"
    assert end["error"] == {
        "kind": "BadRequestError",
        "message": "bad model",
        "reason": "bad_request",
        "status": 400,
    }
    verified(agent.last_recording)


def test_an_exception_that_is_not_a_provider_error_is_of_kind_unknown(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def note(s: Attempt) -> bool:
        seen.append(s.error_kind)
        return s.attempt == 1

    agent = build(
        scripted([RuntimeError("socket closed"), "fine"]),
        tmp_path,
        post_decide=[rule(note, "retry")],
    )
    assert agent.run("hi") == "fine"
    assert seen == ["unknown", None]  # the failure, then the answer
    (error,) = of(agent.last_recording, "error")
    assert error["error"]["kind"] == "ProviderError" and error["error"]["reason"] == "unknown"
    assert "RuntimeError: socket closed" in error["error"]["message"]
    assert error["decision"] == {"verb": "retry", "rule": "post_decide[0]"}


def test_an_unknown_failure_that_stands_ends_the_run_with_its_kind(tmp_path: Path) -> None:
    agent = build(scripted([RuntimeError("socket closed")]), tmp_path)
    with pytest.raises(ProviderError, match="socket closed"):
        agent.run("hi")
    end = of(agent.last_recording, "run_end")[0]
    assert end["error"]["kind"] == "ProviderError" and end["error"]["reason"] == "unknown"


# -- other providers, the fallback -----------------------------------------------------------


def test_retry_other_moves_to_the_next_provider_with_its_model(tmp_path: Path) -> None:
    backup = answering("from the backup", "backup")
    agent = build(
        scripted([server_error()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error_kind == "server_error", "retry_other")],
        providers=[(backup, "backup-model")],
    )
    assert agent.run("hi") == "from the backup"
    calls = of(agent.last_recording, "call")
    assert [c["model"] for c in calls] == ["m", "backup-model"]
    assert calls[1]["attempt"] == {"n": 2, "provider": "backup", "via": "providers[0]"}
    assert calls[0]["hash"] != calls[1]["hash"]  # another model: another request
    header = of(agent.last_recording, "header")[0]
    reliability = header["config"]["reliability"]
    assert reliability["providers"] == [
        {"provider": {"name": "backup", "mode": "reply"}, "model": "backup-model"}
    ]
    assert reliability["post_decide"] == [{"rule": "post_decide[0]", "then": "retry_other"}]
    verified(agent.last_recording)


def test_each_call_starts_again_at_the_agents_own_provider(tmp_path: Path) -> None:
    weather = define_tool("weather", "Weather.", {"type": "object"}, lambda a, c: "sunny")
    primary = scripted([server_error(), "it is sunny"])
    backup = scripted([{"tool_calls": [{"id": "c1", "name": "weather", "args": {}}]}], "backup")
    agent = (
        Agent.create(provider=primary, model="m", record=fixed_recording(tmp_path))
        .tool(weather)
        .reliability(
            post_decide=[rule(lambda s: s.error is not None, "retry_other")],
            providers=[backup],
        )
        .build()
    )
    assert agent.run("weather?") == "it is sunny"
    calls = of(agent.last_recording, "call")
    assert [(c["iter"], c["attempt"]["via"]) for c in calls] == [
        (1, "agent"),
        (1, "providers[0]"),
        (2, "agent"),
    ]
    verified(agent.last_recording)


def test_retry_other_with_no_provider_left_fails_fast(tmp_path: Path) -> None:
    backup = scripted([server_error()], "backup")
    agent = build(
        scripted([server_error()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error is not None, "retry_other", kind="move")],
        providers=[backup],
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    assert raised.value.kind == "no-provider-left"
    assert "none is left" in raised.value.reason
    assert isinstance(raised.value.__cause__, ServerError)
    decisions = [e["decision"] for e in of(agent.last_recording, "error")]
    assert decisions[0] == {"verb": "retry_other", "rule": "move"}
    assert decisions[1]["verb"] == "fail_fast" and decisions[1]["asked"] == "retry_other"
    assert decisions[1]["kind"] == "no-provider-left" and decisions[1]["rule"] == "move"
    verified(agent.last_recording)


def test_fallback_calls_the_fallback_provider_once(tmp_path: Path) -> None:
    spare = scripted([overloaded(), "never asked"], "spare")
    agent = build(
        scripted([overloaded()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error is not None, "fallback", kind="spare")],
        fallback=(spare, "small"),
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    assert raised.value.kind == "no-fallback-left" and raised.value.attempts == 2
    calls = of(agent.last_recording, "call")
    assert [(c["attempt"]["via"], c["model"]) for c in calls] == [
        ("agent", "m"),
        ("fallback", "small"),
    ]
    verified(agent.last_recording)


def test_fallback_answers(tmp_path: Path) -> None:
    agent = build(
        scripted([overloaded()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error_kind == "overloaded", "fallback")],
        fallback=answering("the fallback speaks", "spare"),
    )
    assert agent.run("hi") == "the fallback speaks"
    calls = of(agent.last_recording, "call")
    assert calls[1]["attempt"] == {"n": 2, "provider": "spare", "via": "fallback"}
    # The fallback provider has no model of its own: it is asked the agent's (the line
    # leaves it out: the same as the call before's).
    assert "model" not in calls[1]
    with rec.open_recording(agent.last_recording) as opened:
        assert opened.call(2).model == "m"


# -- fail fast -------------------------------------------------------------------------------


def test_fail_fast_raises_with_the_rules_kind_and_a_reason(tmp_path: Path) -> None:
    agent = build(
        scripted([rate_limited()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error_kind == "rate_limited", "fail_fast", kind="quota")],
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    e = raised.value
    assert e.kind == "quota" and e.call == 1 and e.attempts == 1
    assert (
        e.reason == "rule quota decided to fail fast on rate_limited (429) from mock at attempt 1"
    )
    assert isinstance(e.error, RateLimitedError) and e.__cause__ is e.error
    (error,) = of(agent.last_recording, "error")
    assert error["decision"] == {
        "verb": "fail_fast",
        "rule": "quota",
        "kind": "quota",
        "reason": e.reason,
    }
    end = of(agent.last_recording, "run_end")[0]
    assert end["error"]["kind"] == "ReliabilityFailFastError"
    assert end["error"]["reason"] == "quota"
    verified(agent.last_recording)


def test_a_rule_that_raises_fails_fast_with_the_error_as_reason(tmp_path: Path) -> None:
    def broken(s: Attempt) -> bool:
        raise KeyError("status")

    agent = build(scripted([server_error()]), tmp_path, post_decide=[rule(broken, "retry")])
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    assert raised.value.kind == "rule-failed"
    assert raised.value.reason == "rule post_decide[0] raised KeyError: 'status'"


def test_a_rule_that_returns_no_bool_fails_fast(tmp_path: Path) -> None:
    agent = build(
        scripted([server_error()]),
        tmp_path,
        post_decide=[rule(lambda s: s.error_kind, "retry", kind="sloppy")],  # type: ignore[arg-type, return-value]
    )
    with pytest.raises(ReliabilityFailFastError, match="returned str, not a bool"):
        agent.run("hi")


def test_the_attempts_of_a_call_are_capped(tmp_path: Path) -> None:
    agent = build(
        scripted([server_error()] * 5),
        tmp_path,
        post_decide=[retrying("server_error")],
        max_attempts=3,
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    assert raised.value.kind == "attempts-exhausted" and raised.value.attempts == 3
    errors = of(agent.last_recording, "error")
    assert [e["decision"]["verb"] for e in errors] == ["retry", "retry", "fail_fast"]
    assert errors[-1]["decision"]["asked"] == "retry"
    assert len(of(agent.last_recording, "call")) == 3
    verified(agent.last_recording)


def test_the_default_cap_is_ten_attempts(tmp_path: Path) -> None:
    agent = build(scripted([server_error()] * 20), tmp_path, post_decide=[retrying("server_error")])
    with pytest.raises(ReliabilityFailFastError, match="attempts-exhausted"):
        agent.run("hi")
    assert agent.last_result is not None and agent.last_result.calls == 10


# -- mid-stream --------------------------------------------------------------------------------


class CutsOff(Provider):
    """Streams a first piece of the answer, then breaks (without saying it was mid-stream,
    as a careless provider might)."""

    name = "cutter"

    def __init__(self, *, flag: bool = False) -> None:
        self.calls = 0
        self.flag = flag

    async def complete(
        self, request: Request, *, on_stream: StreamHandler | None = None
    ) -> Response:
        self.calls += 1
        if on_stream is not None:
            on_stream(TextDelta("The answer is"))
        raise StreamCutError("the stream ended early", provider=self.name, mid_stream=self.flag)


def test_a_failure_after_the_first_streamed_chunk_is_not_retried(tmp_path: Path) -> None:
    provider = CutsOff()
    agent = build(provider, tmp_path, post_decide=[retrying("stream_cut")])
    seen: list[StreamEvent] = []
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi", stream=seen.append)
    assert provider.calls == 1 and seen == [TextDelta("The answer is")]
    assert raised.value.kind == "mid-stream-not-retryable"
    assert isinstance(raised.value.error, StreamCutError)
    (error,) = of(agent.last_recording, "error")
    assert error["error"]["mid_stream"] is True and error["error"]["reason"] == "stream_cut"
    assert error["decision"] == {
        "verb": "fail_fast",
        "rule": "transient",
        "kind": "mid-stream-not-retryable",
        "reason": "cutter failed with stream_cut after its reply had begun streaming, so "
        "retry would not send the same call again",
        "asked": "retry",
    }
    verified(agent.last_recording)


def test_a_provider_that_says_mid_stream_is_believed(tmp_path: Path) -> None:
    provider = CutsOff(flag=True)
    agent = build(
        provider,
        tmp_path,
        post_decide=[rule(lambda s: s.mid_stream, "fallback")],
        fallback=answering("never", "spare"),
    )
    with pytest.raises(ReliabilityFailFastError, match="mid-stream-not-retryable"):
        agent.run("hi")  # no stream asked for: the provider's word is all there is


def test_ok_and_fail_fast_are_honored_mid_stream(tmp_path: Path) -> None:
    agent = build(
        CutsOff(), tmp_path, post_decide=[rule(lambda s: s.mid_stream, "ok", kind="accept")]
    )
    with pytest.raises(StreamCutError):
        agent.run("hi", stream=lambda e: None)
    (error,) = of(agent.last_recording, "error")
    assert error["decision"] == {"verb": "ok", "rule": "accept"}
    agent = build(
        CutsOff(),
        tmp_path / "2",
        post_decide=[rule(lambda s: s.mid_stream, "fail_fast", kind="cut")],
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi", stream=lambda e: None)
    assert raised.value.kind == "cut"


def test_a_retry_before_any_chunk_streamed_is_made(tmp_path: Path) -> None:
    agent = build(
        scripted([StreamCutError("refused at the start", mid_stream=False), "whole"]),
        tmp_path,
        post_decide=[retrying("stream_cut")],
    )
    assert agent.run("hi", stream=lambda e: None) == "whole"


# -- circuit breakers --------------------------------------------------------------------------


def test_an_open_breaker_moves_the_call_to_the_next_provider(tmp_path: Path) -> None:
    primary = scripted([server_error()] * 2 + ["primary again"])
    backup = answering("from the backup", "backup")
    agent = build(
        primary,
        tmp_path,
        post_decide=[retrying("server_error")],
        providers=[backup],
        circuit_breaker=circuit_breaker(failures=2, cooldown=30),
    )
    assert agent.run("hi") == "from the backup"
    calls = of(agent.last_recording, "call")
    assert [c["attempt"]["via"] for c in calls] == ["agent", "agent", "providers[0]"]
    assert calls[2]["attempt"]["skipped"] == [
        {
            "provider": "mock",
            "model": "m",
            "via": "agent",
            "decision": {"verb": "retry_other", "reason": "the circuit breaker of mock is open"},
        }
    ]
    verified(agent.last_recording)
    # The breaker belongs to the agent: the next run skips the primary at once.
    assert agent.run("again") == "from the backup"
    calls = of(agent.last_recording, "call")
    assert len(calls) == 1 and calls[0]["attempt"]["via"] == "providers[0]"
    assert calls[0]["attempt"]["skipped"][0]["via"] == "agent"
    header = of(agent.last_recording, "header")[0]
    assert header["config"]["reliability"]["circuit_breaker"] == {"failures": 2, "cooldown": 30.0}
    verified(agent.last_recording)


def test_an_open_breaker_with_no_provider_left_fails_fast_before_calling(tmp_path: Path) -> None:
    primary = scripted([server_error()] * 3)
    agent = build(
        primary,
        tmp_path,
        post_decide=[retrying("server_error")],
        circuit_breaker=circuit_breaker(failures=2, cooldown=30),
    )
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi")
    assert raised.value.kind == "circuit-open" and raised.value.attempts == 2
    assert isinstance(raised.value.error, ServerError)
    errors = of(agent.last_recording, "error")
    assert [e.get("call") for e in errors] == [1, 2, None]
    last = errors[-1]
    assert last["error"]["kind"] == "ReliabilityFailFastError"
    assert last["error"]["reason"] == "circuit-open"
    assert last["attempt"] == {"n": 3, "provider": "mock", "via": "agent"}
    verified(agent.last_recording)


def test_a_breaker_closes_after_its_cooldown(tmp_path: Path) -> None:
    now = [0.0]
    primary = scripted([server_error(), "back"])
    agent = (
        Agent.create(
            provider=primary,
            model="m",
            record=dataclasses.replace(
                fixed_recording(tmp_path), run_id=None, clock=lambda: now[0]
            ),
        )
        .reliability(circuit_breaker=circuit_breaker(failures=1, cooldown=10))
        .build()
    )
    with pytest.raises(ServerError):
        agent.run("hi")
    now[0] = 5.0
    with pytest.raises(ReliabilityFailFastError, match="circuit-open"):
        agent.run("hi")
    now[0] = 10.5
    assert agent.run("hi") == "back"


def test_a_pre_check_rule_decides_before_the_attempt(tmp_path: Path) -> None:
    seen: list[tuple[str, int, str | None]] = []

    def watch(s: Attempt) -> bool:
        seen.append((s.phase, s.attempt, s.error_kind))
        return s.attempt > 1 and s.via != "fallback"

    agent = build(
        scripted([rate_limited()]),
        tmp_path,
        pre_check=[rule(watch, "fallback", kind="after-one")],
        post_decide=[retrying("rate_limited")],
        fallback=answering("spare answer", "spare"),
    )
    assert agent.run("hi") == "spare answer"
    assert seen == [
        ("pre_check", 1, None),
        ("pre_check", 2, "rate_limited"),
        ("pre_check", 2, "rate_limited"),
    ]
    calls = of(agent.last_recording, "call")
    assert calls[1]["attempt"]["via"] == "fallback"
    assert calls[1]["attempt"]["skipped"][0]["decision"] == {
        "verb": "fallback",
        "rule": "after-one",
    }


# -- refused answers -----------------------------------------------------------------------------


def test_a_refused_answer_is_recorded_and_joins_no_window(tmp_path: Path) -> None:
    agent = build(
        scripted(["", "a real answer"]),
        tmp_path,
        post_decide=[
            rule(
                lambda s: s.response is not None and not s.response.text,
                "retry",
                kind="empty",
            )
        ],
    )
    assert agent.run("hi") == "a real answer"
    path = agent.last_recording
    replies = of(path, "reply")
    assert replies[0]["decision"] == {"verb": "retry", "rule": "empty"}
    refused = int(replies[0]["writes"][0]["key"].removeprefix("message:"))
    calls = of(path, "call")
    assert calls[1]["window"] == calls[0]["window"] == [[1, 1]] and refused == 2
    # Its tokens were spent: they count.
    result = agent.last_result
    assert result is not None
    assert result.usage.output_tokens == sum(r["usage"]["output_tokens"] for r in replies)
    verified(path)


def test_an_answer_a_rule_keeps_says_which_rule(tmp_path: Path) -> None:
    agent = build(
        scripted(["fine"]), tmp_path, post_decide=[rule(lambda s: s.error is None, "ok", kind="k")]
    )
    agent.run("hi")
    (reply,) = of(agent.last_recording, "reply")
    assert reply["decision"] == {"verb": "ok", "rule": "k"}


# -- the view, the builder -------------------------------------------------------------------


def test_rules_see_the_attempt(tmp_path: Path) -> None:
    seen: list[Attempt] = []

    def keep(s: Attempt) -> bool:
        seen.append(s)
        return False

    backup = answering("ok", "backup")
    agent = build(
        scripted([RateLimitedError("slow", status=429, retry_after=2.5), "x"]),
        tmp_path,
        post_decide=[rule(keep, "ok"), retrying("rate_limited")],
        providers=[backup],
        fallback=answering("spare", "spare"),
    )
    agent.run("hi")
    first, second = seen
    assert (first.phase, first.attempt, first.call, first.iteration) == ("post_decide", 1, 1, 1)
    assert (first.provider, first.model, first.via) == ("mock", "m", "agent")
    assert first.error_kind == "rate_limited" and first.status == 429
    assert first.retry_after == 2.5 and first.mid_stream is False
    assert first.providers_left == 1 and first.fallback_left is True
    assert first.breaker_open is False and first.response is None
    assert second.error is None and second.response is not None
    assert second.response.content == (TextBlock("x"),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.attempt = 5  # type: ignore[misc]


def test_reliability_is_given_once(tmp_path: Path) -> None:
    builder = Agent.create(provider=mock(reply="x"), model="m").reliability()
    with pytest.raises(UsageError, match="already given"):
        builder.reliability()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pre_check": [rule(lambda s: True, "retry")]}, "a pre_check rule decides"),
        ({"post_decide": [rule(lambda s: True, "continue")]}, "a post_decide rule decides"),
        ({"post_decide": [rule(lambda s: True, "fallback")]}, "names none"),
        ({"post_decide": [rule(lambda s: True, "retry_other")]}, "no other provider"),
        ({"post_decide": [lambda s: True]}, "rules made by rule"),
        ({"providers": ["gpt-4o"]}, "names no provider"),
        ({"providers": [42]}, "takes a provider"),
        ({"max_attempts": 0}, "from 1 to 100"),
        ({"circuit_breaker": 3}, "circuit_breaker"),
    ],
)
def test_reliability_mistakes_are_refused_when_building(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        Agent.create(provider=mock(reply="x"), model="m").reliability(**kwargs)


def test_rule_and_breaker_arguments_are_checked() -> None:
    with pytest.raises(UsageError, match="one of continue"):
        rule(lambda s: True, "again")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="delay"):
        rule(lambda s: True, "retry", delay=-1)
    with pytest.raises(UsageError, match="function of the attempt"):
        rule("error", "retry")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="failures"):
        circuit_breaker(failures=0)
    with pytest.raises(UsageError, match="cooldown"):
        circuit_breaker(cooldown=float("nan"))


def test_a_model_id_names_another_provider(tmp_path: Path) -> None:
    agent = build(
        scripted(["x"]),
        tmp_path,
        post_decide=[rule(lambda s: s.error is not None, "retry_other")],
        providers=["ollama:llama3.1"],
    )
    agent.run("hi")
    header = of(agent.last_recording, "header")[0]
    (other,) = header["config"]["reliability"]["providers"]
    assert other["model"] == "llama3.1" and other["provider"]["name"] == "ollama"


def test_agents_without_reliability_write_what_they_wrote_before(tmp_path: Path) -> None:
    agent = Agent.create(
        provider=scripted([ServerError("down", status=503)]),
        model="m",
        record=fixed_recording(tmp_path),
    ).build()
    with pytest.raises(ProviderError):
        agent.run("hi")
    path = agent.last_recording
    (error,) = of(path, "error")
    assert error == {
        "t": "error",
        "rsid": "call-llm#1",
        "iter": 1,
        "call": 1,
        "error": {"kind": "ServerError", "message": "down"},
    }
    assert "attempt" not in of(path, "call")[0]
    assert "reliability" not in of(path, "header")[0]["config"]
    assert of(path, "run_end")[0]["error"] == {"kind": "ServerError", "message": "down"}


# -- through a real provider's transport ----------------------------------------------------

KEY = "sk-ant-api03-" + "Qw3rTy7uIoP9aSdF" * 5 + "-GhJkLm"


def vendor_error(status: int, kind: str, **headers: str) -> httpx2.Response:
    body = {"type": "error", "error": {"type": kind, "message": "Please wait."}}
    return httpx2.Response(status, json=body, headers=headers)


def test_anthropic_429_then_529_are_retried_then_answered(tmp_path: Path) -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Here at last."}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }
    answers = [
        vendor_error(429, "rate_limit_error", **{"retry-after": "0"}),
        vendor_error(529, "overloaded_error"),
        httpx2.Response(200, json=answer),
    ]
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return answers.pop(0)

    provider = anthropic(api_key=KEY, http_client=client_for(handler))
    busy = rule(
        lambda s: s.error_kind in ("rate_limited", "overloaded"),
        "retry",
        kind="busy",
        delay=lambda s: s.retry_after or 0.0,
    )
    agent = build(provider, tmp_path, post_decide=[busy])
    assert agent.run("hi") == "Here at last."
    assert len(sent) == 3
    path = agent.last_recording
    errors = of(path, "error")
    assert [(e["call"], e["error"]["status"], e["error"]["reason"]) for e in errors] == [
        (1, 429, "rate_limited"),
        (2, 529, "overloaded"),
    ]
    assert [e["decision"]["verb"] for e in errors] == ["retry", "retry"]
    assert of(path, "reply")[0]["call"] == 3
    assert path is not None and KEY not in path.read_text()
    verified(path)


def test_an_anthropic_stream_cut_mid_way_is_not_sent_again(tmp_path: Path) -> None:
    start = [
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
        '"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
        '"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        '"content_block":{"type":"text","text":""}}',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        '"delta":{"type":"text_delta","text":"Half an ans"}}',
    ]
    sent: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=broken_after([sse(start).encode()]),
        )

    provider = anthropic(api_key=KEY, http_client=client_for(handler))
    agent = build(provider, tmp_path, post_decide=[retrying("stream_cut")])
    shown: list[StreamEvent] = []
    with pytest.raises(ReliabilityFailFastError) as raised:
        agent.run("hi", stream=shown.append)
    assert raised.value.kind == "mid-stream-not-retryable" and len(sent) == 1
    assert shown == [TextDelta("Half an ans")]
    (error,) = of(agent.last_recording, "error")
    assert error["error"]["kind"] == "StreamCutError" and error["error"]["mid_stream"] is True
    assert error["decision"]["asked"] == "retry"
    verified(agent.last_recording)
