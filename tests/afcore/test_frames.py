"""An agent's runs share what frames their calls (the system and tools lists, the tool
specs): each run's file holds them whole, as a fresh agent's run writes them, and a run
whose redactor replaces more (a secret its inputs named) makes its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, RecordingConfig, define_tool, mock
from afcore import recording as rec
from afcore.messages import SystemSegment

SECRET = "Zq8vN3xLp2Wd7Ry5"
_POLICY = rec.Redaction()
_SYSTEM = (SystemSegment("You echo."),)
_PARAMS: dict[str, Any] = {}
_CACHE: list[Any] = []


def _agent(folder: Path) -> Agent:
    replies: list[Any] = [{"tool_calls": [{"id": "c1", "name": "echo", "args": {"n": 1}}]}, "done"]
    echo = define_tool(
        "echo",
        "Echo the number.",
        {"type": "object", "properties": {"n": {"type": "integer"}}},
        lambda a, c: f"ok {a['n']}",
    )
    return (
        Agent.create(
            provider=mock(respond=lambda r: replies[sum(m.role == "tool" for m in r.messages)]),
            model="m",
            record=RecordingConfig(dir=folder),
        )
        .system(f"You echo. Greet {SECRET} first.")
        .tool(echo)
        .build()
    )


def _stored(path: Path) -> tuple[list[Any], int]:
    """The header (but what is the run's own), the blobs a file stores, in order, and how
    many values its run replaced."""
    stored, redactions = [], -1
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["t"] == "header":
            for own in ("run_id", "started_at", "seed"):
                del record[own]
            stored.append(record)
        if record["t"] == "blob":
            stored.append(record)
        elif record["t"] == "run_end":
            redactions = record["redactions"]
    return stored, redactions


def _run(agent: Agent, **kwargs: Any) -> Path:
    assert agent.run("go", **kwargs) == "done"
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.ok and report.calls == report.verified == 2, report.problems
    return path


def test_every_run_of_an_agent_stores_its_frame_as_a_fresh_agent_does(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "a")
    first, second, third = (_stored(_run(agent)) for _ in range(3))
    fresh = _stored(_run(_agent(tmp_path / "b")))
    assert first == second == third == fresh
    assert fresh[0][0]["config"]["tools"][0]["name"] == "echo"
    assert len(fresh[0]) == 4  # the header; the tool's spec, the system list, the tools list


def test_a_run_that_learned_a_secret_redacts_the_frame_it_shares(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    plain = _run(agent)
    assert SECRET.encode() in plain.read_bytes()
    # The run's state names the secret: it is replaced wherever it appears, the system
    # prompt the runs before stored included.
    learned = _run(agent, state={"password": SECRET})
    assert SECRET.encode() not in learned.read_bytes()
    blobs, redactions = _stored(learned)
    assert redactions > 0
    again = _run(agent)
    assert _stored(again) == _stored(plain)


def _injected_agent(folder: Path) -> Agent:
    """Four tool iterations; 20 steering segments, a system rule that flips at every
    iteration (its lists are stored as deltas of the first) and a message rule that reads
    the state and the iteration."""

    def respond(r: Any) -> Any:
        done = sum(m.role == "tool" for m in r.messages)
        if done < 4:
            return {"tool_calls": [{"id": f"c{done}", "name": "echo", "args": {"n": done}}]}
        return "done"

    echo = define_tool(
        "echo",
        "Echo the number.",
        {"type": "object", "properties": {"n": {"type": "integer"}}},
        lambda a, c: f"ok {a['n']}",
    )
    builder = (
        Agent.create(provider=mock(respond=respond), model="m", record=RecordingConfig(dir=folder))
        .system("You echo.")
        .tool(echo)
    )
    for i in range(20):
        builder = builder.steering(f"Steering {i}: " + "word " * (i * 7), id=f"steer-{i}")
    return (
        builder.instruction(
            "Even iteration.", id="even", when=lambda s: s.iteration % 2 == 0, slot="system"
        )
        .instruction(
            "Mode x, or the third iteration.",
            id="mode",
            when=lambda s: s.state.get("mode") == "x" or s.iteration == 3,
        )
        .build()
    )


def _records(path: Path) -> list[Any]:
    """Every record of a file but its seals, without what differs from run to run (its
    id, its clock)."""
    out = []
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["t"] == "seal":
            continue
        for own in ("run_id", "started_at", "seed", "at", "ms", "h"):
            record.pop(own, None)
        if record["t"] == "commit" and "tool" in record:
            record["tool"].pop("ms", None)
        out.append(record)
    return out


def test_runs_of_an_agent_with_injections_write_what_a_fresh_agent_writes(tmp_path: Path) -> None:
    # Each run takes the lists, deltas and injected messages the runs before it made, on
    # the base its own run stored: the state changes which lists a run stores.
    agent = _injected_agent(tmp_path / "a")
    runs = [{}, {}, {"state": {"mode": "x"}}, {}, {"state": {"mode": "x"}}]
    files = []
    for i, kwargs in enumerate(runs):
        path = _run_checked(agent, **kwargs)
        fresh = _run_checked(_injected_agent(tmp_path / f"fresh-{i}"), **kwargs)
        assert _records(path) == _records(fresh)
        files.append(_records(path))
    assert files[0] == files[1] == files[3] != files[2] == files[4]
    deltas = [r for r in files[0] if r["t"] == "blob" and isinstance(r["value"], dict)]
    assert any("base" in r["value"] for r in deltas)  # the flipped system lists are deltas


def _run_checked(agent: Agent, **kwargs: Any) -> Path:
    assert agent.run("go", **kwargs) == "done"
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.ok and report.calls == report.verified == 5, report.problems
    return path


def _header(path: Path) -> dict[str, Any]:
    header: dict[str, Any] = orjson.loads(path.read_bytes().split(b"\n", 1)[0])
    return header


def test_a_secret_set_in_the_environment_between_runs_is_caught_in_the_next_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The header's agent fields are made once per agent and redactor: a redactor that
    # replaces more (the environment holds a new secret) makes them again.
    agent = _agent(tmp_path)
    agent.name = f"bot-{SECRET}"
    plain = _run(agent)
    assert _header(plain)["agent"]["name"] == f"bot-{SECRET}"
    monkeypatch.setenv("BOT_SERVICE_TOKEN", SECRET)
    caught = _run(agent)
    assert SECRET.encode() not in caught.read_bytes()
    assert _header(caught)["agent"]["name"] == "bot-[redacted:env:BOT_SERVICE_TOKEN]"
    assert "BOT_SERVICE_TOKEN" in _header(caught)["redaction"]["env"]
    monkeypatch.delenv("BOT_SERVICE_TOKEN")
    assert _stored(_run(agent)) == _stored(plain)


def test_the_runs_own_header_fields_are_screened_with_what_the_run_learned(
    tmp_path: Path,
) -> None:
    agent = _agent(tmp_path)
    _run(agent)  # the agent's header fields are made, by a redactor that learned nothing
    agent.recording = RecordingConfig(dir=tmp_path, run_id=f"run-{SECRET}")
    header = _header(_run(agent, state={"password": SECRET}))
    assert header["run_id"] == "run-[redacted:field:password]"


@pytest.mark.parametrize(
    "inputs",
    [
        {"state": {"password": SECRET}},
        {"state": {"password": SECRET, "big": 2**70}},  # not JSON as it is: screened apart
        {"identity": {"api_key": SECRET}},
    ],
)
def test_what_the_inputs_name_is_learned_before_the_header_and_the_message_are_written(
    tmp_path: Path, inputs: dict[str, Any]
) -> None:
    agent = _agent(tmp_path)
    _run(agent)
    agent.recording = RecordingConfig(dir=tmp_path, run_id=f"run-{SECRET}")
    path = _run(agent, **inputs)
    assert SECRET.encode() not in path.read_bytes()
    assert _header(path)["run_id"].startswith("run-[redacted:field:")


# -- the first call's frame, taken from the runs before -----------------------------------


def _same_as_fresh(agent: Agent, fresh: Agent, **kwargs: Any) -> list[Any]:
    """The records of a run of ``agent`` (whose runs before made its frames), checked
    against those of the same run of ``fresh`` (whose frames are its own)."""
    path, new = _run(agent, **kwargs), _run(fresh, **kwargs)
    assert _records(path) == _records(new)
    return _records(path)


def test_every_record_of_a_run_is_what_a_fresh_agent_writes(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "a")
    runs = [_same_as_fresh(agent, _agent(tmp_path / f"b{i}")) for i in range(3)]
    assert runs[0] == runs[1] == runs[2]
    calls = [r for r in runs[0] if r["t"] == "call"]
    assert "system" in calls[0] and "system" not in calls[1]  # the second refers to the first


def test_a_changed_system_prompt_model_or_params_makes_its_own_first_call(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "a")
    _run(agent)
    agent.system = (*agent.system, *_agent(tmp_path).system)  # a prompt of two segments
    fresh = _agent(tmp_path / "b")
    fresh.system = agent.system
    two = _same_as_fresh(agent, fresh)
    agent.model = fresh.model = "m2"
    other = _same_as_fresh(agent, fresh)
    agent.params = fresh.params = {"temperature": 0.5}
    tuned = _same_as_fresh(agent, fresh)
    first = [next(r for r in run if r["t"] == "call") for run in (two, other, tuned)]
    assert first[0]["model"] == "m" and first[1]["model"] == first[2]["model"] == "m2"
    assert "params" not in first[1] and first[2]["params"] == {"temperature": 0.5}
    assert len({call["hash"] for call in first}) == 3


def _first_call_lines(
    folder: Path, frames: Any, tools: list[Any], n: int, *, specs_first: bool = False
) -> list[Any]:
    """The lines a recorder sharing ``frames`` (None: its own) writes for its first call,
    made with ``tools`` (the same system prompt, params and cache each time).
    ``specs_first``: the tools' specs are stored before the call, as a run stores its
    agent's."""
    from afcore.recording._writer import Recorder

    path = folder / f"r{n}.jsonl"
    recorder = Recorder(path, run_id=path.stem, redactor=_POLICY.compile(), frames=frames)
    if specs_first:
        for spec in tools:
            recorder.tool_ref(spec)
    recorder.call(
        "call-llm#0", 1, 1, model="m", system=_SYSTEM, window=None, tools=tools,
        params=_PARAMS, cache=_CACHE,
    )  # fmt: skip
    recorder.close()
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_changed_tool_set_makes_its_own_first_call(tmp_path: Path) -> None:
    from afcore.recording._writer import Frames

    echo, extra = (
        define_tool(name, f"The {name} tool.", {"type": "object"}, lambda a, c: "x").spec
        for name in ("echo", "extra")
    )
    one, two = [echo], [echo, extra]
    frames = Frames()
    lines = [
        _first_call_lines(tmp_path, frames, tools, n)
        for n, tools in enumerate([one, one, two, two, one])
    ]
    fresh = [_first_call_lines(tmp_path, None, tools, 10 + n) for n, tools in enumerate([one, two])]
    assert lines[0] == lines[1] == lines[4] == fresh[0]
    assert lines[2] == lines[3] == fresh[1]
    assert lines[0][-2]["tools"] != lines[2][-2]["tools"]


@pytest.mark.parametrize("how", ["policy", "environment"])
def test_a_secret_the_redaction_names_after_a_run_is_caught_in_the_next_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    agent = _agent(tmp_path)
    agent.params = {"note": f"for {SECRET}"}
    plain = _run(agent)
    assert SECRET.encode() in plain.read_bytes()
    if how == "policy":
        policy = rec.Redaction(secrets=(SECRET,))
        agent.recording = RecordingConfig(dir=tmp_path, redaction=policy)
    else:
        monkeypatch.setenv("FRAME_SERVICE_TOKEN", SECRET)
    caught = _run(agent)
    assert SECRET.encode() not in caught.read_bytes()
    first = next(r for r in _records(caught) if r["t"] == "call")
    assert first["params"]["note"].startswith("for [redacted:")
    assert _stored(caught)[1] > _stored(plain)[1]


def test_a_first_call_taken_from_frames_needs_what_it_refers_to_stored(tmp_path: Path) -> None:
    # A run that stored the tools' specs before its first call made the frame; one that did
    # not cannot take it (its file would refer to blobs it does not hold): it makes its own.
    from afcore.recording._writer import Frames

    tools = [define_tool("echo", "Echo.", {"type": "object"}, lambda a, c: "x").spec]
    frames = Frames()
    before = _first_call_lines(tmp_path, frames, tools, 0, specs_first=True)
    after = _first_call_lines(tmp_path, frames, tools, 1)
    assert after == _first_call_lines(tmp_path, None, tools, 2)
    assert len([r for r in after if r["t"] == "blob"]) == 3  # the spec, system, tools lists
    assert before[0]["t"] == "blob" and before[0] in after
