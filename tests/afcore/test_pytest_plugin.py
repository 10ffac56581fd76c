"""The pytest plugin, run by pytest itself (``pytester``): a cassette recorded the first time
and replayed after, a changed agent failing with where it departs, --af-record's modes."""

from __future__ import annotations

from pathlib import Path

import pytest

import afcore.replay  # noqa: F401
from afcore import Agent, anthropic, define_tool, mock  # noqa: F401
from afcore import recording as rec

# Imported here, before any inner run: pytester's in-process runs forget the modules first
# imported inside them, and a second run would import afcore's error classes anew, which the
# loop imported in the first would not catch.

pytest_plugins = ["pytester"]

QUIET = ("-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:textual-snapshot")
"""The inner runs need none of these (pytest-asyncio would warn of its unset options, the
snapshot plugin shares its folder with the outer run's)."""

BOT = """
import os

from afcore import Agent, anthropic, define_tool, mock

CALLS = []
SYSTEM = os.environ.get("BOT_SYSTEM", "You answer weather questions.")


def respond(request):
    CALLS.append(1)
    if not any(m.role == "tool" for m in request.messages):
        return {"tool_calls": [{"id": "c1", "name": "weather", "args": {"city": "Paris"}}]}
    return "It is 22C in Paris."


def forecast(args, ctx):
    return f"{args['city']}: {os.environ.get('BOT_TEMPERATURE', '22C')}"


weather = define_tool(
    name="weather",
    description="Weather.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    execute=forecast,
)


def make(provider=None):
    provider = provider or mock(respond=respond)
    return Agent.create(provider=provider, model="m").system(SYSTEM).tool(weather).build()


def test_weather(af_cassette):
    agent = af_cassette(make())
    assert agent.run("Weather in Paris?") == "It is 22C in Paris."
    assert len(CALLS) == int(os.environ["EXPECTED_CALLS"])
"""


@pytest.fixture
def bot(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("BOT_SYSTEM", raising=False)
    monkeypatch.delenv("BOT_TEMPERATURE", raising=False)
    monkeypatch.setenv("AF_RECORDINGS", str(pytester.path / "recordings"))
    pytester.makepyfile(test_bot=BOT)
    return pytester


def cassette(p: pytest.Pytester, name: str = "test_weather") -> Path:
    return p.path / "cassettes" / "test_bot" / f"{name}.jsonl"


def run(
    p: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, calls: int, *args: str
) -> pytest.RunResult:
    monkeypatch.setenv("EXPECTED_CALLS", str(calls))
    return p.runpytest(*QUIET, *args)


def test_the_first_run_records_a_cassette_and_the_next_replays_it(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(bot, monkeypatch, 2).assert_outcomes(passed=1)
    path = cassette(bot)
    assert path.is_file()
    with rec.open_recording(path) as r:  # an ordinary recording, which verifies
        assert r.header.run_id == "test_weather" and r.call_count == 2
        assert rec.verify(r).ok
    recorded = path.read_bytes()
    run(bot, monkeypatch, 0).assert_outcomes(passed=1)  # no model call: replayed
    assert path.read_bytes() == recorded  # a replay leaves its cassette as it was


def test_an_agent_that_now_builds_another_request_fails_with_where(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(bot, monkeypatch, 2).assert_outcomes(passed=1)
    monkeypatch.setenv("BOT_SYSTEM", "You answer weather questions briefly.")
    result = run(bot, monkeypatch, 0)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the agent departed from its cassette*",
            "*cassettes/test_bot/test_weather.jsonl: diverged at call 1, system, segment 1*",
            "*recorded  'You answer weather questions.'",
            "*replayed  'You answer weather questions briefly.'",
            "*af diff cassettes/test_bot/test_weather.jsonl *",
            "*record it again with --af-record=all*",
        ]
    )


def test_none_fails_a_missing_cassette_and_all_records_again(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(bot, monkeypatch, 0, "--af-record=none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no cassette at cassettes/test_bot/test_weather.jsonl*"])
    assert not cassette(bot).exists()
    run(bot, monkeypatch, 2).assert_outcomes(passed=1)
    run(bot, monkeypatch, 0, "--af-record=none").assert_outcomes(passed=1)
    monkeypatch.setenv("BOT_SYSTEM", "Another prompt.")
    run(bot, monkeypatch, 2, "--af-record=all").assert_outcomes(passed=1)  # recorded again
    with rec.open_recording(cassette(bot)) as r:
        assert r.segments(1)[0].text == "Another prompt."
    run(bot, monkeypatch, 0).assert_outcomes(passed=1)


def test_the_ini_option_says_the_mode(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.makeini("[pytest]\naf_record = none\n")
    run(bot, monkeypatch, 0).assert_outcomes(failed=1)
    run(bot, monkeypatch, 2, "--af-record=once").assert_outcomes(passed=1)


def test_tools_are_served_from_the_cassette_unless_asked_to_run(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot.makepyfile(
        test_tools=BOT.replace("af_cassette(make())", "af_cassette(make(), tools='run')")
    )
    run(bot, monkeypatch, 2).assert_outcomes(passed=2)
    monkeypatch.setenv("BOT_TEMPERATURE", "25C")
    result = run(bot, monkeypatch, 0)
    # test_bot serves the recorded result; test_tools runs the tool, and its result differs.
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_tools.py::test_weather*", "*tool result*weather#1*"])


def test_a_replay_needs_no_key_in_the_test(
    bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(bot, monkeypatch, 2).assert_outcomes(passed=1)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    bot.makepyfile(test_bot=BOT.replace("af_cassette(make())", "af_cassette(make(anthropic()))"))
    run(bot, monkeypatch, 0).assert_outcomes(passed=1)


def test_each_agent_of_a_test_has_a_cassette_and_ids_make_file_names(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AF_RECORDINGS", str(pytester.path / "recordings"))
    pytester.makepyfile(
        test_two="""
import pytest
from afcore import Agent, mock

@pytest.mark.parametrize("city", ["Paris", "São Paulo/Centro"])
def test_cities(af_cassette, city):
    for _ in range(2):
        agent = af_cassette(Agent.create(provider=mock(reply=city), model="m").build())
        assert agent.run(f"Hi from {city}") == city
"""
    )
    pytester.runpytest(*QUIET).assert_outcomes(passed=2)
    folder = pytester.path / "cassettes" / "test_two"
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_cities-Paris-2.jsonl",
        "test_cities-Paris.jsonl",
        "test_cities-Sao-Paulo-Centro-2.jsonl",
        "test_cities-Sao-Paulo-Centro.jsonl",
    ]
    pytester.runpytest(*QUIET, "--af-record=none").assert_outcomes(passed=2)
