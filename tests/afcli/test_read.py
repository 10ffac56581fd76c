"""`af ls`, `af show`, `af verify`, `af schema` on good recordings; naming runs by id."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from afcore import recording
from afcore.recording import canonical, content_hash
from tests.afcli.conftest import Invoke


def test_verify_passes_on_the_demo(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("verify", demo["recording"], "--json")
    assert ran.code == 0, ran.err
    report = ran.json()
    assert report["ok"] is True
    assert report["calls"] == report["verified"] == demo["calls"]
    assert report["problems"] == [] and report["torn_tail"] is None
    human = invoke("verify", demo["recording"])
    assert human.code == 0
    assert f"{demo['calls']}/{demo['calls']} calls verified" in human.out


def test_show_json_overview(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--json")
    assert ran.code == 0, ran.err
    view = ran.json()
    assert view["run_id"] == demo["run_id"]
    assert view["status"] == "answer" and view["answer"] == demo["answer"]
    assert view["agent"]["name"] == "trip-demo"
    assert view["usage"] == demo["usage"]
    assert view["problems"] == [] and view["torn_tail"] is None
    calls = view["calls"]
    assert [c["call"] for c in calls] == list(range(1, demo["calls"] + 1))
    assert [c["iteration"] for c in calls] == [1, 2, 3, 4, 5]
    # Slot sizes: the base text, the steering and the step fact, and from call 3 the prices
    # skill's text; the window growing by each reply and its results, plus the injected
    # instructions; the skill's tool from call 3.
    assert [c["system"]["segments"] for c in calls] == [3, 3, 4, 4, 4]
    assert all(c["system"]["chars"] > 100 for c in calls)
    assert [c["messages"] for c in calls] == [2, 6, 7, 9, 11]
    assert [c["tools"] for c in calls] == [3, 3, 4, 4, 4]
    assert calls[0]["results"][0]["content"].startswith('{"city":"Lisbon"')
    assert (
        calls[2]["results"][0]["is_error"] is True and calls[3]["results"][0]["is_error"] is False
    )
    assert all(c["response"]["usage"]["input_tokens"] > 0 for c in calls)


PROVENANCE = {
    "system": {"position", "source", "id", "trigger", "reason", "cache", "reads"},
    "messages": {"n", "writer", "source", "id", "trigger", "reason", "cache", "reads"},
    "tools": {"source", "id"},
}
"""What `af show --call --json` adds to each part of the request: take it away and what is
left is the part exactly as sent."""


def as_sent(call: dict[str, Any], slot: str) -> list[dict[str, Any]]:
    drop = PROVENANCE[slot] | {"change", "cache_breakpoint"}
    return [{k: v for k, v in part.items() if k not in drop} for part in call[slot]]


def test_show_call_json_is_the_request_as_sent(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--call", "2", "--json")
    assert ran.code == 0, ran.err
    call = ran.json()
    assert {"call", "iteration", "system", "messages", "tools", "response", "verified"} <= set(call)
    assert call["call"] == 2 and call["iteration"] == 2 and call["verified"] is True
    assert call["system"][0]["text"].startswith("You are trip-demo")
    roles = ["user", "assistant", "tool", "tool", "user", "user"]
    assert [m["role"] for m in call["messages"]] == roles
    assert [t["name"] for t in call["tools"]] == ["weather", "find_places", "read_skill"]
    assert call["tools"][2]["input_schema"]["properties"]["id"]["enum"] == ["prices"]
    assert call["response"]["tool_calls"][0]["name"] == "read_skill"
    assert call["messages"][0]["writer"] == "seed#0"
    # What the file holds hashes to what was sent: the same check verify makes.
    with recording.open_recording(demo["recording"]) as rec:
        assert call["hash"] == rec.call(2).hash == call["rebuilt_hash"]
        request = rec.request(2)
    assert canonical(as_sent(call, "messages")) == canonical(request["messages"])
    assert canonical(as_sent(call, "system")) == canonical(request["system"])
    assert canonical(as_sent(call, "tools")) == canonical(request["tools"])
    assert [content_hash(s) for s in as_sent(call, "system")] == [
        content_hash(s) for s in request["system"]
    ]


def test_show_call_human_shows_the_slots(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--call", "2", env={"COLUMNS": "120"})
    assert ran.code == 0, ran.err
    for expected in (
        "call 2 · iteration 2",
        "✓ verified",
        "You are trip-demo",
        "#1 user",
        "#4 tool weather  new",
        "read_skill(id)  skill catalog: prices",
        'read_skill(id="prices")',
    ):
        assert expected in ran.out, expected


def test_show_overview_human(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], env={"COLUMNS": "120"})
    assert ran.code == 0, ran.err
    out = ran.out
    assert out.index("call 1 · iteration 1") < out.index("call 5 · iteration 5")
    assert "system 3 segments, " in out and "messages 6  tools 3" in out
    assert 'weather(city="Lisbon")' in out
    assert "convert_currency rejected" in out
    assert demo["answer"][:40] in out
    assert out.rstrip().splitlines()[-1].startswith("answer after 5 iterations · 5 calls")


def test_show_call_out_of_range_is_a_usage_error(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--call", "9")
    assert ran.code == 2
    assert "call 9 is not in" in ran.err and "calls 1 to 5" in ran.err


def test_ls_lists_newest_first(invoke: Invoke, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [invoke("run", "--json", "--out", runs).json()["run_id"] for _ in range(3)]
    ran = invoke("ls", runs, "--json")
    assert ran.code == 0, ran.err
    listed = ran.json()
    assert [e["run_id"] for e in listed] == sorted(ids, reverse=True)
    first = listed[0]
    assert first["agent"] == "trip-demo" and first["status"] == "answer"
    assert first["iterations"] == 5 and first["calls"] == 5
    assert first["tokens"] == first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
    assert first["reason"] is None and first["started_at"].startswith("20")
    human = invoke("ls", runs)
    assert human.code == 0
    assert human.out.splitlines()[0].split() == [
        "RUN",
        "STARTED",
        "UTC",
        "AGENT",
        "STATUS",
        "ITER",
        "TOKENS",
    ]
    assert human.out.splitlines()[1].startswith(sorted(ids)[-1])


def test_ls_puts_runs_before_files_named_otherwise(invoke: Invoke, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run_id = invoke("run", "--json", "--out", runs).json()["run_id"]
    shutil.copy(runs / f"{run_id}.jsonl", runs / "sample-trip.jsonl")
    shutil.copy(runs / f"{run_id}.jsonl", runs / "a-copy.jsonl")
    listed = invoke("ls", runs, "--json").json()
    assert [Path(e["path"]).name for e in listed] == [
        f"{run_id}.jsonl",
        "a-copy.jsonl",
        "sample-trip.jsonl",
    ]


def test_ls_defaults_to_af_recordings(invoke: Invoke, demo: dict[str, Any]) -> None:
    folder = str(Path(demo["recording"]).parent)
    ran = invoke("ls", "--json", env={"AF_RECORDINGS": folder})
    assert ran.code == 0
    assert [e["run_id"] for e in ran.json()] == [demo["run_id"]]


def test_ls_of_no_recordings_yet(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("ls", "--json", env={"AF_RECORDINGS": str(tmp_path / "none")})
    assert ran.code == 0 and ran.json() == []
    missing = invoke("ls", tmp_path / "none")
    assert missing.code == 2 and "is not a folder" in missing.err


def test_a_run_is_named_by_a_unique_prefix_of_its_id(invoke: Invoke, demo: dict[str, Any]) -> None:
    env = {"AF_RECORDINGS": str(Path(demo["recording"]).parent)}
    for ref in (demo["run_id"], demo["run_id"][:20], f"{demo['run_id']}.jsonl"):
        ran = invoke("show", ref, "--json", env=env)
        assert ran.code == 0, ran.err
        assert ran.json()["run_id"] == demo["run_id"]
    assert invoke("verify", demo["run_id"][:18], env=env).code == 0


def test_an_ambiguous_prefix_is_a_usage_error(invoke: Invoke, demo: dict[str, Any]) -> None:
    path = Path(demo["recording"])
    shutil.copy(path, path.with_name(demo["run_id"][:-1] + "x.jsonl"))
    env = {"AF_RECORDINGS": str(path.parent)}
    for command in ("show", "verify"):
        ran = invoke(command, demo["run_id"][:10], env=env)
        assert ran.code == 2
        assert "matches 2 recordings" in ran.err and "Traceback" not in ran.err


def test_an_unknown_run_is_a_usage_error(invoke: Invoke, tmp_path: Path) -> None:
    env = {"AF_RECORDINGS": str(tmp_path)}
    for command in ("show", "verify"):
        ran = invoke(command, "20990101", env=env)
        assert ran.code == 2
        assert ran.err.startswith("error: no recording") and len(ran.err.splitlines()) == 1
    ran = invoke("show", tmp_path / "nowhere" / "x.jsonl")
    assert ran.code == 2 and "no recording at" in ran.err


def test_schema_is_json_schema_and_every_demo_record_fits_it(
    invoke: Invoke, demo: dict[str, Any]
) -> None:
    ran = invoke("schema")
    assert ran.code == 0, ran.err
    schema = ran.json()
    jsonschema.Draft202012Validator.check_schema(schema)
    kinds = {ref["$ref"].rsplit("/", 1)[-1] for ref in schema["oneOf"]}
    assert {"Header", "Blob", "Commit", "Call", "Reply", "RunEnd"} <= kinds
    validator = jsonschema.Draft202012Validator(schema)
    for line in Path(demo["recording"]).read_text().splitlines():
        record = json.loads(line)
        assert not list(validator.iter_errors(record)), record["t"]
    assert list(validator.iter_errors({"t": "call", "seq": "one"}))
    # The field docstrings are the format's documentation.
    window = schema["$defs"]["Call"]["properties"]["window"]
    assert "inclusive ranges of message numbers" in window["description"]


def test_a_glob_pattern_names_no_run(invoke: Invoke, demo: dict[str, Any]) -> None:
    env = {"AF_RECORDINGS": str(Path(demo["recording"]).parent)}
    for ref in ("*", "2*", "**", "[0-9]"):
        ran = invoke("show", ref, env=env)
        assert ran.code == 2, ref
        assert "no recording named" in ran.err


@pytest.mark.parametrize("json_output", [False, True])
def test_show_stops_quietly_when_its_reader_goes_away(tmp_path: Path, json_output: bool) -> None:
    """``af show big.jsonl | head``: the output's reader closes the pipe after a few lines;
    af stops at once, says nothing, and exits as a program the pipe stopped does."""
    from bench._af_loop import build_agent, run_once

    agent = build_agent(400, record=tmp_path)
    run_once(agent, 400)
    assert agent.last_recording is not None
    command = [sys.executable, "-c", "from afcli import main; main()", "show"]
    command += [str(agent.last_recording), *(["--json"] if json_output else [])]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline()  # then the reader is gone, the output far from written
        process.stdout.close()
        said = process.stderr.read()
        assert process.wait(timeout=60) == 141
    assert said == b""
