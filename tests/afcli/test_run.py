"""`af run`: the demo end to end, the outcome's shape and exit codes, what it records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from afcore import recording
from afcore.demos import DEFAULT_MESSAGE, build_agent, trip
from tests.afcli.conftest import Invoke

AGENT_FILE = """
from afcore import Agent, define_tool, mock

echo = define_tool(
    name="echo",
    description="Echo the text.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    execute=lambda args, ctx: args.get("text", ""),
)

agent = (
    Agent.create(
        provider=mock(replies=[
            {"tool_calls": [{"id": "c1", "name": "echo", "args": {"text": %(text)r}}]},
            {"content": %(answer)r},
        ]),
        model="mock",
        record=%(record)s,
    )
    .system("Echo things.")
    .tool(echo)
    .build()
)
"""


def write_agent(
    folder: Path, *, text: str = "hi", answer: str = "done", record: str = "True"
) -> Path:
    path = folder / "bot.py"
    path.write_text(AGENT_FILE % {"text": text, "answer": answer, "record": record})
    return path


def normalized(path: Path) -> list[dict[str, Any]]:
    """The recording's records without what differs between runs: ids, timings and the
    seed of the random source."""
    out = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["t"] == "seal":
            continue  # a seal covers the timings too
        for key in ("run_id", "started_at", "ms", "seed"):
            record.pop(key, None)
        if isinstance(record.get("tool"), dict):
            record["tool"].pop("ms", None)
        out.append(record)
    return out


# -- the demo ----------------------------------------------------------------------------


def test_the_demo_answers_from_its_tools_and_records_the_run(
    demo: dict[str, Any], tmp_path: Path
) -> None:
    assert set(demo) >= {"run_id", "recording", "status", "answer", "iterations", "usage"}
    assert demo["status"] == "answer" and demo["error"] is None
    assert demo["iterations"] >= 4 and demo["calls"] == demo["iterations"]
    # The answer is made of what the tools returned.
    assert "Lisbon" in demo["answer"] and "Calouste Gulbenkian Museum" in demo["answer"]
    assert "12.96 USD" in demo["answer"]
    assert demo["usage"]["input_tokens"] > 0 and demo["usage"]["estimated"] is True
    path = Path(demo["recording"])
    assert path.parent == tmp_path / "runs" and path.name == f"{demo['run_id']}.jsonl"
    with recording.open_recording(path) as rec:
        assert rec.header.agent.name == "trip-demo"
        assert rec.header.agent.source == "afcore.demos.trip:build_agent"
        assert rec.end is not None and rec.end.status == "answer"
        assert recording.verify(rec).ok


def test_the_demo_script_shows_concurrent_tools_a_skill_a_rejection_and_its_fix(
    invoke: Invoke, demo: dict[str, Any]
) -> None:
    ran = invoke("show", demo["recording"], "--json")
    assert ran.code == 0, ran.err
    calls = ran.json()["calls"]
    assert len(calls) == 5
    first, skill, slip, fix, last = calls
    assert [c["name"] for c in first["response"]["tool_calls"]] == ["weather", "find_places"]
    assert [r["status"] for r in first["results"]] == ["ok", "ok"]
    # The conversion needs a tool the prices skill brings: read it first.
    assert skill["response"]["tool_calls"][0]["name"] == "read_skill"
    assert skill["response"]["tool_calls"][0]["args"] == {"id": "prices"}
    assert slip["response"]["tool_calls"][0]["args"]["amount"] == "12 EUR"
    assert [r["status"] for r in slip["results"]] == ["rejected"]
    assert slip["invalid_args"][0]["problems"][0]["path"] == "$.amount"
    assert fix["response"]["tool_calls"][0]["args"]["amount"] == 12
    assert [r["status"] for r in fix["results"]] == ["ok"]
    assert last["response"]["tool_calls"] == [] and last["response"]["stop_reason"] == "end_turn"


def test_the_scripted_model_reacts_to_what_the_injections_put_in_the_request() -> None:
    # No currency named: the currency rule does not fire, so nothing is converted and the
    # prices skill is never read.
    agent = build_agent(record=False)
    answer = agent.run("Which museum should I see in Lisbon on Saturday?")
    assert "12 EUR." in answer and "USD" not in answer
    assert agent.last_result is not None and agent.last_result.iterations == 2
    # Rain in Paris: the instruction that comes with the forecast sends a walk indoors.
    agent = build_agent(record=False)
    answer = agent.run(trip.RAINY_MESSAGE)
    assert "Musée d'Orsay" in answer and "13.60 GBP" in answer
    assert agent.last_result is not None and agent.last_result.iterations == 6


def test_both_tools_of_the_first_reply_answer_it_in_call_order(
    demo: dict[str, Any],
) -> None:
    # (That they run at once is the loop's test: tests/afcore/test_loop.py.)
    replies, answered = [], []
    for line in Path(demo["recording"]).read_text().splitlines():
        record = json.loads(line)
        if record["t"] == "reply":
            replies.append([c["id"] for c in record["tool_calls"]])
        elif record["t"] == "commit" and record.get("tool"):
            answered.append(record["tool"]["call_id"])
    assert len(replies[0]) == 2 and answered[:2] == replies[0]


def test_two_demo_runs_differ_only_in_ids_and_timings(invoke: Invoke, tmp_path: Path) -> None:
    paths = []
    for _ in range(2):
        ran = invoke("run", "--json", "--out", tmp_path)
        assert ran.code == 0, ran.err
        paths.append(Path(ran.json()["recording"]))
    assert paths[0] != paths[1]
    assert normalized(paths[0]) == normalized(paths[1])


def test_the_demo_answer_follows_what_the_tools_return(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(trip._PER_EUR, "USD", 2.0)
    agent = build_agent(record=False)
    answer = agent.run(DEFAULT_MESSAGE)
    assert "24.00 USD" in answer and "12.96" not in answer
    assert agent.last_result is not None and agent.last_result.iterations == 5


def test_the_demo_takes_another_message(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("run", "demo", "Where should I eat in Paris? Prices in pounds.", "--json")
    assert ran.code == 0, ran.err
    answer = ran.json()["answer"]
    assert "Paris" in answer and "Bouillon Chartier" in answer and "GBP" in answer


def test_human_output_answer_on_stdout_progress_and_path_on_stderr(
    invoke: Invoke, tmp_path: Path
) -> None:
    ran = invoke("run", "--out", tmp_path, env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    assert ran.out.startswith("The forecast for Lisbon")
    assert "iteration 4" not in ran.out
    for expected in (
        "iteration 1 · call 1 · 2 messages · 3 tools",
        'weather(city="Lisbon")',
        'find_places(city="Lisbon", kind="museum")',
        "convert_currency rejected",
        '$.amount: expected number, got string "12 EUR"',
        "convert_currency ok",
        "tokens",
        'read_skill(id="prices")',
        "answer after 5 iterations",
    ):
        assert expected in ran.err, expected
    (recorded,) = tmp_path.glob("*.jsonl")
    assert f"recording {recorded}" in ran.err


def test_recordings_go_to_af_recordings_without_out(invoke: Invoke, tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    ran = invoke("run", "--json", env={"AF_RECORDINGS": str(folder)})
    assert ran.code == 0, ran.err
    assert Path(ran.json()["recording"]).parent == folder
    assert len(list(folder.glob("*.jsonl"))) == 1


# -- outcomes other than an answer -------------------------------------------------------


def test_max_iterations_is_stated_and_exits_1(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("run", "--max-iterations", "2", "--out", tmp_path, "--json")
    assert ran.code == 1
    outcome = ran.json()
    assert outcome["status"] == "max_iterations" and outcome["iterations"] == 2
    assert "limit of 2 iterations without an answer" in ran.err
    with recording.open_recording(outcome["recording"]) as rec:
        assert rec.end is not None and rec.end.status == "max_iterations"


def test_max_iterations_out_of_range_is_a_usage_error(invoke: Invoke) -> None:
    ran = invoke("run", "--max-iterations", "0")
    assert ran.code == 2
    assert "'--max-iterations': 0 is not in the range 1<=x<=10000" in " ".join(ran.err.split())


def test_a_run_that_fails_exits_1_with_the_error_and_its_recording(
    invoke: Invoke, tmp_path: Path
) -> None:
    path = tmp_path / "broken.py"
    path.write_text(
        "from afcore import Agent, mock\n"
        "agent = Agent.create(provider=mock(replies=[]), model='m').build()\n"
    )
    ran = invoke("run", path, "hello", "--out", tmp_path / "runs", "--json")
    assert ran.code == 1
    outcome = ran.json()
    assert outcome["status"] == "error" and "scripted" in outcome["error"]
    assert "Traceback" not in ran.err
    assert "error: the run failed: the mock has 0 scripted replies" in ran.err
    with recording.open_recording(outcome["recording"]) as rec:
        assert rec.end is not None and rec.end.status == "error"


def test_an_answer_cut_at_max_tokens_is_said_to_be_incomplete(
    invoke: Invoke, tmp_path: Path
) -> None:
    path = tmp_path / "long.py"
    path.write_text(
        "from afcore import Agent, mock\n"
        "agent = Agent.create(provider=mock(replies=[\n"
        "    {'content': 'The first half of', 'stop_reason': 'max_tokens'},\n"
        "]), model='m').build()\n"
    )
    ran = invoke("run", path, "Tell me everything.", "--out", tmp_path / "runs")
    assert ran.code == 0
    assert ran.out.strip() == "The first half of"
    assert "cut: the answer stopped at the model's max_tokens limit and is incomplete" in ran.err
    outcome = invoke("run", path, "again", "--out", tmp_path / "runs", "--json").json()
    assert (outcome["status"], outcome["stop_reason"]) == ("answer", "max_tokens")
    whole = tmp_path / "whole.py"
    whole.write_text(
        "from afcore import Agent, mock\n"
        "agent = Agent.create(provider=mock(replies=['All of it.']), model='m').build()\n"
    )
    ran = invoke("run", whole, "Tell me.", "--out", tmp_path / "runs")
    assert ran.code == 0 and "cut:" not in ran.err


def test_an_interrupted_run_exits_130_and_records_it(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "stop.py"
    path.write_text(
        "from afcore import Agent, define_tool, mock\n"
        "def stop(args, ctx):\n"
        "    raise KeyboardInterrupt\n"
        "agent = (\n"
        "    Agent.create(provider=mock(replies=[\n"
        "        {'tool_calls': [{'name': 'stop', 'args': {}}]}, 'never'\n"
        "    ]), model='m')\n"
        "    .tool(define_tool('stop', 'Stop.', {'type': 'object'}, stop)).build()\n"
        ")\n"
    )
    ran = invoke("run", path, "go", "--out", tmp_path / "runs")
    assert ran.code == 130
    (recorded,) = (tmp_path / "runs").glob("*.jsonl")
    with recording.open_recording(recorded) as rec:
        assert rec.end is not None and rec.end.status == "interrupted"


def test_an_agent_built_without_recording_is_recorded_by_af_run(
    invoke: Invoke, tmp_path: Path
) -> None:
    write_agent(tmp_path, record="False")
    ran = invoke("run", tmp_path / "bot.py", "hi", "--out", tmp_path / "runs", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["answer"] == "done"
    assert Path(ran.json()["recording"]).is_file()


def test_the_recording_names_the_agent_as_given_without_absolute_paths(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "examples").mkdir()
    write_agent(tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for given, source in [
        ("examples/bot.py", "examples/bot.py:agent"),
        (str(tmp_path / "examples" / "bot.py:agent"), "examples/bot.py:agent"),
    ]:
        ran = invoke("run", given, "hi", "--json", "--out", "runs")
        assert ran.code == 0, ran.err
        with recording.open_recording(ran.json()["recording"]) as rec:
            assert rec.header.agent.source == source
        assert str(tmp_path) not in Path(ran.json()["recording"]).read_text()


def test_out_must_be_a_folder(invoke: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("x")
    ran = invoke("run", "--out", file)
    assert ran.code == 2 and "is a file" in ran.err


def test_progress_states_the_true_size_of_a_long_result(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "big.py"
    path.write_text(
        "from afcore import Agent, define_tool, mock\n"
        "big = define_tool('big', 'Big.', {'type': 'object'}, lambda a, c: 'x' * 100_000)\n"
        "agent = Agent.create(provider=mock(replies=[\n"
        "    {'tool_calls': [{'name': 'big', 'args': {}}]}, 'ok'\n"
        "]), model='m').tool(big).build()\n"
    )
    ran = invoke("run", path, "go", "--out", tmp_path / "runs", env={"COLUMNS": "100"})
    assert ran.code == 0, ran.err
    (result,) = [ln for ln in ran.err.splitlines() if "← big ok" in ln]
    assert len(result) <= 100
    shown = result.split(" · ")[-1].split("…")[0]
    assert set(shown) == {"x"}
    assert result.endswith(f"… ({100_000 - len(shown):,} more chars)")


def test_run_model_names_the_provider_and_its_key(invoke: Invoke) -> None:
    missing = invoke("run", "--model", "anthropic:claude-sonnet-4-5", env={"ANTHROPIC_API_KEY": ""})
    assert missing.code == 2
    assert "set the ANTHROPIC_API_KEY environment variable" in missing.err
    unknown = invoke("run", "--model", "acme:big")
    assert (
        unknown.code == 2
        and "the valid prefixes are anthropic, gemini, lmstudio, ollama, openai, openrouter"
        in unknown.err
    )


def test_run_streams_the_models_words_and_quiet_prints_only_the_answer(invoke: Invoke) -> None:
    ran = invoke("run")
    assert ran.code == 0, ran.err
    assert "  │ Let me check the weather in Lisbon and find places to visit." in ran.err
    assert "  … weather starting" in ran.err
    # Streamed text is not repeated as a one-line summary.
    assert "says Let me check" not in ran.err
    quiet = invoke("run", "--quiet")
    assert quiet.code == 0 and quiet.err == ""
    assert quiet.out.startswith("The forecast for Lisbon")


def test_streamed_thinking_is_dimmed_and_lines_are_whole() -> None:
    from io import StringIO

    from rich.console import Console

    from afcli._progress import Progress
    from afcore.providers import TextDelta, ThinkingDelta

    buffer = StringIO()
    progress = Progress(Console(file=buffer, width=100, color_system=None))
    for event in (
        ThinkingDelta("weigh"),
        ThinkingDelta("ing it\n"),
        TextDelta("first li"),
        TextDelta("ne\nsecond [bold]x[/] \x1b[31m"),
    ):
        progress.stream(event)
    progress._flush_stream()
    assert buffer.getvalue().splitlines() == [
        "  ┆ weighing it",
        "  │ first line",
        "  │ second [bold]x[/] \\x1b[31m",
    ]


def test_run_lens_follows_the_recording_as_it_is_written(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tui.app

    opened: list[tuple[Path, bool, bool]] = []

    class Shown:
        def __init__(self, path: Path, follow: bool) -> None:
            self.path, self.follow = path, follow

        def run(self) -> None:
            # The Lens opens while the run may still be going: the header is there already.
            opened.append(
                (self.path, self.follow, self.path.read_bytes().startswith(b'{"t":"header"'))
            )

    monkeypatch.setattr(
        tui,
        "make_lens_app",
        lambda path, follow=False, session=None, against=None: Shown(path, follow),
    )
    ran = invoke("run", "--lens", "--out", tmp_path)
    assert ran.code == 0, ran.err
    assert ran.out.startswith("The forecast for Lisbon")
    ((path, follow, header),) = opened
    assert follow and header and path.parent == tmp_path
    assert f"recording {path}" in ran.err
