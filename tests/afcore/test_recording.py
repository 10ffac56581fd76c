from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from afcore import Agent, RecordingConfig, Redaction, define_tool, mock
from afcore import recording as rec
from afcore.messages import Request
from afcore.recording import canonical
from tests.conftest import fixed_recording


def weather_agent(tmp_path: Path, **kwargs: Any) -> tuple[Agent, list[dict[str, Any]]]:
    """A three-call run whose provider keeps the canonical JSON of every request it got."""
    sent: list[dict[str, Any]] = []

    def respond(request: Request) -> Any:
        sent.append(request.to_json())
        n = len(sent)
        if n < 3:
            return {
                "content": f"checking {n}",
                "tool_calls": [{"id": f"c{n}", "name": "weather", "args": {"city": f"city{n}"}}],
            }
        return "sunny everywhere"

    weather = define_tool(
        "weather",
        "Current weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        lambda a, c: f"{a['city']}: 22C " + "x" * 300,
    )
    agent = (
        Agent.create(
            provider=mock(respond=respond),
            model="m",
            params={"temperature": 0.2},
            record=kwargs.pop("record", fixed_recording(tmp_path)),
            **kwargs,
        )
        .system("You answer weather questions.")
        .system("Long house rules. " * 40)
        .tool(weather)
        .build()
    )
    return agent, sent


def test_every_call_is_rebuilt_exactly_as_it_was_sent(tmp_path: Path) -> None:
    agent, sent = weather_agent(tmp_path)
    agent.run("weather?")
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        assert r.call_count == 3
        for n, request in enumerate(sent, start=1):
            assert canonical(r.request(n)) == canonical(request)
            assert r.check_call(n).ok
        report = rec.verify(r)
    assert report.ok, report.problems
    assert (report.calls, report.verified) == (3, 3)


def test_large_and_repeated_content_is_stored_once(tmp_path: Path) -> None:
    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    assert agent.last_recording is not None
    text = agent.last_recording.read_text()
    assert text.count("Long house rules. " * 40) == 1
    assert text.count("Current weather for a city.") == 1
    assert text.count("x" * 300) == 2  # two distinct tool results, each once


def test_a_changed_byte_fails_verification(tmp_path: Path) -> None:
    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    path = agent.last_recording
    assert path is not None
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_bytes(path.read_bytes().replace(b"city1: 22C", b"city1: 23C"))
    with rec.open_recording(tampered) as r:
        report = rec.verify(r)
    assert not report.ok
    messages = " ".join(p.message for p in report.problems)
    # The tool result is written inline: the calls that sent it rebuild to another hash,
    # and the write that holds it no longer matches its seal.
    assert "the rebuilt request's hash differs" in messages
    assert "do not match their seal" in messages


def test_reads_name_the_commit_that_wrote_what_was_read(tmp_path: Path) -> None:
    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    assert agent.last_recording is not None
    lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
    by_seq = {r["seq"]: r for r in lines if "seq" in r}
    for r in by_seq.values():
        for key, seq in r.get("reads", []):
            writer = by_seq[seq]
            keys = {w["key"] for w in writer.get("writes", [])}
            keys |= {f"call:{writer['call']}"} if writer["t"] == "call" else set()
            keys |= {f"reply:{writer['call']}"} if writer["t"] == "reply" else set()
            assert key in keys or (
                key == "messages" and any(k.startswith("message:") for k in keys)
            )


def test_every_line_matches_the_published_schema(tmp_path: Path) -> None:
    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    assert agent.last_recording is not None
    validator = jsonschema.Draft202012Validator(rec.RECORD_ADAPTER.json_schema())
    for line in agent.last_recording.read_bytes().splitlines():
        validator.validate(orjson.loads(line))


def test_secrets_from_the_environment_never_reach_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-SECRETSECRETSECRET")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890abcdef")

    leak = define_tool(
        "env",
        "Leaks its environment.",
        {"type": "object"},
        lambda a, c: (
            f"key={a.get('api_key')} token=tok-1234567890abcdef "
            "bearer: Bearer abcdefghijklmnopqrstu"
        ),
    )
    replies = [
        {"tool_calls": [{"id": "c1", "name": "env", "args": {"api_key": "plain-value-123"}}]},
        "my key is sk-ant-api03-SECRETSECRETSECRET",
    ]
    agent = (
        Agent.create(provider=mock(replies=replies), model="m", record=fixed_recording(tmp_path))
        .tool(leak)
        .build()
    )
    answer = agent.run("what is your key")
    assert "SECRETSECRET" in answer  # the caller gets the real answer; only the file is redacted
    assert agent.last_recording is not None
    data = agent.last_recording.read_text()
    for secret in (
        "SECRETSECRETSECRET",
        "tok-1234567890abcdef",
        "plain-value-123",
        "abcdefghijklmnop",
    ):
        assert secret not in data
    assert "[redacted:env:ANTHROPIC_API_KEY]" in data
    assert "[redacted:field:api_key]" in data
    header = orjson.loads(data.splitlines()[0])
    assert "ANTHROPIC_API_KEY" in header["redaction"]["env"]
    end = orjson.loads(data.splitlines()[-2])  # the last line is the seal
    assert end["redactions"] >= 4
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok


def test_custom_redaction_policy(tmp_path: Path) -> None:
    config = RecordingConfig(
        dir=tmp_path,
        redaction=Redaction(patterns=(("ticket", r"TCK-\d+"),), secrets=("hunter2hunter2",)),
    )
    agent = Agent.create(
        provider=mock(reply="TCK-991 and hunter2hunter2"), model="m", record=config
    )
    built = agent.build()
    built.run("go")
    assert built.last_recording is not None
    data = built.last_recording.read_text()
    assert "TCK-991" not in data and "hunter2hunter2" not in data
    assert "[redacted:ticket]" in data and "[redacted:secret]" in data


def test_the_header_says_what_ran(tmp_path: Path) -> None:
    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        h = r.header
    assert (h.format, h.version, h.run_id) == ("af.recording", "1.1", "test-run")
    assert h.seed == 7 and h.replay_of is None
    assert h.started_at == "2026-01-02T03:04:05.678+00:00"
    assert h.agent.source is not None and h.agent.source.startswith("tests.afcore.test_recording:")
    assert h.provider == {"name": "mock", "mode": "respond"}
    assert h.config.max_iterations == 10 and h.config.params == {"temperature": 0.2}
    assert [t.name for t in h.config.tools] == ["weather"]


def test_a_fixed_clock_seed_and_run_id_give_the_same_records(tmp_path: Path) -> None:
    a, _ = weather_agent(tmp_path / "a")
    b, _ = weather_agent(tmp_path / "b", record=fixed_recording(tmp_path / "b"))
    a.run("weather?")
    b.run("weather?")
    assert a.last_recording is not None and b.last_recording is not None
    # Only the source line of Agent.create differs between the two builds: none here. Where
    # the writes (and so their seals) fall depends on the machine's timing.
    assert unsealed(a.last_recording) == unsealed(b.last_recording)


def unsealed(path: Path) -> list[bytes]:
    """The file's lines as written, without the seals that close each write."""
    return [line for line in path.read_bytes().splitlines() if not line.startswith(b'{"t":"seal"')]


def test_a_second_run_with_a_fixed_id_is_refused(tmp_path: Path) -> None:
    from afcore import UsageError

    agent, _ = weather_agent(tmp_path)
    agent.run("weather?")
    with pytest.raises(UsageError, match="already exists"):
        agent.run("again")


def test_durations_are_written_to_the_microsecond() -> None:
    from afcore.recording._writer import round_ms

    rng = random.Random(13)
    for _ in range(20_000):
        ms = rng.uniform(0, 10 ** rng.randint(0, 7))
        written = round_ms(ms)
        # round(ms, 3)'s value (they part only at an exact half microsecond)...
        assert written == round(ms, 3), ms
        # ...which JSON writes with three decimals at most.
        assert len(orjson.dumps(written).partition(b".")[2]) <= 3, written
    assert round_ms(0.0) == 0.0
    assert round_ms(12.3456) == 12.346
