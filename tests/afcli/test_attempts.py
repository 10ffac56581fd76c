"""`af show` and `af verify` on runs whose model calls were made as attempts: each attempt
under its iteration, with its provider, its failure and what was decided next."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from afcore import (
    Agent,
    OverloadedError,
    RateLimitedError,
    ReliabilityFailFastError,
    ServerError,
    circuit_breaker,
    define_tool,
    mock,
    rule,
)
from afcore.messages import Request
from tests.afcli.conftest import Invoke

WIDE = {"COLUMNS": "200"}


def scripted(outcomes: list[Any], name: str) -> Any:
    left = list(outcomes)

    def respond(request: Request) -> Any:
        out = left.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    provider = mock(respond=respond)
    provider.name = name
    return provider


@pytest.fixture
def retried(tmp_path: Path) -> Path:
    """A run of two iterations: the second call is rate limited, retried, fails again on
    the server, moves to the backup (the primary's breaker now open), which answers."""
    weather = define_tool("weather", "Weather.", {"type": "object"}, lambda a, c: "sunny")
    primary = scripted(
        [
            {"tool_calls": [{"id": "c1", "name": "weather", "args": {}}]},
            RateLimitedError("slow down", status=429),
            ServerError("internal error", status=500),
        ],
        "anthropic",
    )
    backup = scripted(["It is sunny."], "openai")
    agent = (
        Agent.create(provider=primary, model="claude-sonnet-4-5", record=tmp_path / "runs")
        .tool(weather)
        .reliability(
            post_decide=[
                rule(lambda s: s.error_kind == "rate_limited", "retry", kind="transient"),
                rule(lambda s: s.error_kind == "server_error", "retry", kind="5xx"),
            ],
            providers=[(backup, "gpt-4o")],
            circuit_breaker=circuit_breaker(failures=2),
        )
        .build()
    )
    assert agent.run("Weather?") == "It is sunny."
    assert agent.last_recording is not None
    return agent.last_recording


def test_verify_passes_on_a_run_with_retries(invoke: Invoke, retried: Path) -> None:
    ran = invoke("verify", retried, "--json")
    assert ran.code == 0, ran.out
    report = ran.json()
    assert report["ok"] is True and report["calls"] == report["verified"] == 4


def test_show_puts_each_attempt_under_its_iteration(invoke: Invoke, retried: Path) -> None:
    ran = invoke("show", retried, env=WIDE)
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    # The first call went through at once: it is shown as any call is.
    assert any(line.startswith("call 1 · iteration 1   system") for line in lines)
    assert (
        "call 2 · attempt 1 of iteration 2 · anthropic:claude-sonnet-4-5 · "
        "failed: rate_limited (429) → retry (rule transient)"
    ) in lines
    assert (
        "call 3 · attempt 2 of iteration 2 · anthropic:claude-sonnet-4-5 · "
        "failed: server_error (500) → retry (rule 5xx)"
    ) in lines
    assert "call 4 · attempt 3 of iteration 2 · openai:gpt-4o (providers[0])" in lines
    assert (
        "  skipped anthropic:claude-sonnet-4-5 (agent): retry_other, the circuit breaker of "
        "anthropic is open"
    ) in lines
    assert "  ✗ RateLimitedError: slow down" in lines
    # The request's sizes are said once, at the first attempt.
    at = lines.index(
        "call 2 · attempt 1 of iteration 2 · anthropic:claude-sonnet-4-5 · "
        "failed: rate_limited (429) → retry (rule transient)"
    )
    assert lines[at + 1].startswith("  system ")
    assert sum(1 for line in lines if "system 0 segments" in line) == 2
    assert "answer after 2 iterations · 4 calls" in ran.out
    assert "no reply recorded" not in ran.out


def test_show_json_gives_each_attempt_and_its_outcome(invoke: Invoke, retried: Path) -> None:
    ran = invoke("show", retried, "--json")
    assert ran.code == 0, ran.err
    calls = ran.json()["calls"]
    assert [(c["iteration"], c["attempt"]["n"], c["attempt"]["of"]) for c in calls] == [
        (1, 1, 1),
        (2, 1, 3),
        (2, 2, 3),
        (2, 3, 3),
    ]
    assert calls[1]["errors"] == [
        {
            "kind": "RateLimitedError",
            "message": "slow down",
            "reason": "rate_limited",
            "status": 429,
            "ms": calls[1]["errors"][0]["ms"],
            "decision": {"verb": "retry", "rule": "transient"},
        }
    ]
    assert calls[3]["attempt"]["via"] == "providers[0]" and calls[3]["model"] == "gpt-4o"
    assert calls[3]["attempt"]["skipped"][0]["decision"]["verb"] == "retry_other"
    assert calls[3]["response"]["text"] == "It is sunny."
    # The tool results belong to the attempt that was answered.
    assert [r["name"] for r in calls[0]["results"]] == ["weather"]


def test_show_call_of_a_failed_attempt(invoke: Invoke, retried: Path) -> None:
    data = invoke("show", retried, "--call", "3", "--json").json()
    assert data["attempt"] == {
        "n": 2,
        "of": 3,
        "provider": "anthropic",
        "via": "agent",
        "skipped": [],
    }
    assert data["response"] is None and data["verified"] is True
    assert [e["reason"] for e in data["errors"]] == ["server_error"]
    # What changed is told against the call before this one's first attempt.
    assert data["previous_call"] == 1
    human = invoke("show", retried, "--call", "3", env=WIDE)
    assert human.code == 0, human.err
    assert "attempt 2 of 3 · provider anthropic" in human.out
    assert "failed  server_error (500)" in human.out
    assert "    ServerError: internal error" in human.out
    assert "    → retry (rule 5xx)" in human.out
    last = invoke("show", retried, "--call", "4", env=WIDE)
    assert "attempt 3 of 3 · provider openai (providers[0])" in last.out
    assert "skipped anthropic:claude-sonnet-4-5 (agent): retry_other" in last.out


def test_show_a_fail_fast_and_its_reason(invoke: Invoke, tmp_path: Path) -> None:
    agent = (
        Agent.create(
            provider=scripted([OverloadedError("busy", status=529)] * 3, "anthropic"),
            model="claude-sonnet-4-5",
            record=tmp_path / "runs",
        )
        .reliability(
            post_decide=[rule(lambda s: s.error_kind == "overloaded", "retry", kind="busy")],
            max_attempts=2,
        )
        .build()
    )
    with pytest.raises(ReliabilityFailFastError):
        agent.run("hi")
    ran = invoke("show", agent.last_recording or "", env=WIDE)
    assert ran.code == 0, ran.err
    assert (
        "call 2 · attempt 2 of iteration 1 · anthropic:claude-sonnet-4-5 · failed: overloaded "
        "(529) → fail_fast: attempts-exhausted (retry asked by rule busy)"
    ) in ran.out
    assert "2 attempts were made, the most a call may take; retry would make another" in ran.out
    assert "ReliabilityFailFastError: the model call failed fast (attempts-exhausted)" in ran.out
    view = invoke("show", agent.last_recording or "", "--json").json()
    assert view["error"]["reason"] == "attempts-exhausted"
    assert invoke("verify", agent.last_recording or "").code == 0


def test_a_run_without_reliability_shows_no_attempts(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], env=WIDE)
    assert "attempt" not in ran.out
    view = invoke("show", demo["recording"], "--json").json()
    assert all(c["attempt"] is None for c in view["calls"])


def test_show_a_refused_answer(invoke: Invoke, tmp_path: Path) -> None:
    agent = (
        Agent.create(
            provider=scripted(["", "a real answer"], "mock"), model="m", record=tmp_path / "runs"
        )
        .reliability(
            post_decide=[
                rule(
                    lambda s: s.response is not None and not s.response.text, "retry", kind="empty"
                )
            ]
        )
        .build()
    )
    assert agent.run("hi") == "a real answer"
    path = agent.last_recording or ""
    ran = invoke("show", path, env=WIDE)
    assert "call 1 · attempt 1 of iteration 1 · mock:m · answer refused → retry (rule empty)" in (
        ran.out
    )
    assert "call 2 · attempt 2 of iteration 1 · mock:m" in ran.out
    detail = invoke("show", path, "--call", "1", env=WIDE)
    assert "refused → retry (rule empty)" in detail.out
    assert invoke("verify", path).code == 0
