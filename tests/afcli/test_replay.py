"""``af replay`` and ``af diff`` as a person runs them: exit codes first, then the JSON, then
what the text says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from afcore.recording import Recording, open_recording
from tests.afcli.conftest import Invoke

ROOT = Path(__file__).resolve().parents[2]
TRIP = ROOT / "recordings" / "sample-trip.jsonl"
RAIN = ROOT / "recordings" / "sample-trip-rain.jsonl"
V10 = ROOT / "tests" / "fixtures" / "v1.0" / "samples"

CHANGED = """
import afcore.demos.trip as trip


def make():
    steering, trip.STEERING = trip.STEERING, "Take facts only from your tools."
    try:
        return trip.build_agent()
    finally:
        trip.STEERING = steering
"""


def changed_agent(tmp_path: Path) -> Path:
    path = tmp_path / "changed.py"
    path.write_text(CHANGED)
    return path


def test_a_sample_replays_identical_with_the_agent_its_recording_names(
    invoke: Invoke, tmp_path: Path
) -> None:
    ran = invoke("replay", TRIP, "--out", tmp_path)
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "5 calls, identical"
    assert "afcore.demos.trip:build_agent" in ran.err and "recording " in ran.err


@pytest.mark.parametrize("tools", ["run", "recorded"])
@pytest.mark.parametrize("sample", ["sample-trip.jsonl", "sample-trip-rain.jsonl"])
def test_a_1_0_recording_replays_identical_with_its_tool_error_results(
    invoke: Invoke, tmp_path: Path, sample: str, tools: str
) -> None:
    # A 1.0 file's ids and hashes are made another way than a new recording's: the replay
    # compares what they name, not the ids. Each of these samples holds a call whose
    # arguments did not match the tool's schema, answered by an error result.
    ran = invoke("replay", V10 / sample, "--json", "--out", tmp_path, "--tools", tools)
    assert ran.code == 0, ran.out + ran.err
    data = ran.json()
    assert data["status"] == "identical" and data["divergence"] is None
    with open_recording(V10 / sample) as recorded, open_recording(data["recording"]) as replayed:
        assert replayed.header.version != recorded.header.version  # a new file, in today's format
        errors = [_error_results(r) for r in (recorded, replayed)]
        assert errors[0] and errors[0] == errors[1]
        assert all(status == "rejected" for status, _ in errors[1])


def _error_results(rec: Recording) -> list[tuple[str, str]]:
    """Each tool result the run gave as an error: its status and text."""
    out = []
    for commit in rec.tool_commits():
        assert commit.tool is not None
        for write in commit.writes:
            value = rec.value(write)
            if write.key.startswith("message:") and value.get("is_error"):
                out.append((commit.tool.status, value["content"]))
    return out


def test_replay_json_has_the_documented_shape(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("replay", TRIP, "--json", "--out", tmp_path, "--tools", "recorded")
    assert ran.code == 0, ran.err
    data: dict[str, Any] = ran.json()
    assert {"status", "calls", "identical_calls", "divergence", "recording"} <= set(data)
    assert (data["status"], data["calls"], data["identical_calls"]) == ("identical", 5, 5)
    assert data["divergence"] is None
    assert Path(data["recording"]).parent == tmp_path and ran.err == ""


def test_a_changed_agent_diverges_and_says_where_and_why(invoke: Invoke, tmp_path: Path) -> None:
    agent = changed_agent(tmp_path)
    ran = invoke("replay", TRIP, f"{agent}:make", "--json", "--out", tmp_path / "r")
    assert ran.code == 1, ran.err
    data = ran.json()
    assert data["status"] == "diverged" and data["identical_calls"] == 0
    d = data["divergence"]
    assert (d["call"], d["slot"], d["path"]) == (1, "system", "segment 2 (steering facts-only)")
    assert d["recorded"].endswith("a price or a forecast.")
    assert d["replayed"] == "Take facts only from your tools."
    assert d["why_key"] == "system:facts-only"

    ran = invoke("replay", TRIP, f"{agent}:make", "--out", tmp_path / "r")
    assert ran.code == 1
    assert ran.out.startswith("diverged at call 1, system")
    assert "segment 2 (steering facts-only)" in ran.out
    assert f"af why {TRIP} system:facts-only --at call:1" in ran.out
    assert "the first call differs" in ran.out
    assert "every difference: af diff" in ran.err


def test_then_live_goes_on_past_the_difference(invoke: Invoke, tmp_path: Path) -> None:
    agent = changed_agent(tmp_path)
    ran = invoke("replay", TRIP, f"{agent}:make", "--then-live", "--json", "--out", tmp_path)
    assert ran.code == 1
    data = ran.json()
    assert data["status"] == "diverged" and data["live_from"] == 1 and data["calls"] == 5


def test_replay_refuses_what_it_cannot_do(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("replay", TRIP, "--tools", "sometimes")
    assert ran.code == 2 and "--tools is run or recorded" in ran.err
    ran = invoke("replay", tmp_path / "nothing.jsonl")
    assert ran.code == 2
    # A recording of an agent built where it ran names no agent that can be loaded.
    lines = TRIP.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace("afcore.demos.trip:build_agent", "__main__:12")
    built = tmp_path / "built.jsonl"
    built.write_text("".join(lines))
    ran = invoke("replay", built)
    assert ran.code == 2
    assert "__main__:12, which cannot be loaded" in ran.err and "file.py:NAME" in ran.err
    ran = invoke("replay", built, "afcore.demos.trip:build_agent", "--out", tmp_path)
    assert ran.code == 0, ran.err


def test_a_replay_needs_no_key(invoke: Invoke, tmp_path: Path) -> None:
    bot = tmp_path / "keyed.py"
    bot.write_text(
        "from afcore import anthropic\n"
        "import afcore.demos.trip as trip\n\n"
        "def make():\n"
        "    agent = trip.build_agent()\n"
        "    agent.provider = anthropic()  # no key in this environment\n"
        "    return agent\n"
    )
    ran = invoke("replay", TRIP, f"{bot}:make", "--out", tmp_path, env={"ANTHROPIC_API_KEY": ""})
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "5 calls, identical"


def test_diff_of_a_run_and_itself(invoke: Invoke) -> None:
    ran = invoke("diff", TRIP, TRIP)
    assert ran.code == 0, ran.err
    assert "calls 1–5  identical" in ran.out
    assert "identical: 5 calls, the same ending" in ran.out


def test_diff_of_two_runs_lists_what_differs(invoke: Invoke) -> None:
    ran = invoke("diff", TRIP, RAIN, "--json")
    assert ran.code == 1
    data = ran.json()
    assert data["identical"] is False and data["compared"] == 6
    assert [c["call"] for c in data["calls"]] == [1, 2, 3, 4, 5, 6]
    first = data["calls"][0]["changes"][0]
    assert (first["slot"], first["path"]) == ("messages", "message 1: content")
    assert data["end"][0]["path"] == "answer"

    ran = invoke("diff", TRIP, RAIN)
    assert ran.code == 1
    assert "segment 3 (skill prices)" in ran.out
    assert "tool:convert_currency#1" in ran.out
    assert "carried from earlier calls" in ran.out
    assert "6 of 6 calls differ · the endings differ" in ran.out


def test_diff_says_when_a_file_is_not_there(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("diff", TRIP, tmp_path / "missing.jsonl")
    assert ran.code == 2
    assert ran.err.strip() == f"error: no recording at {tmp_path / 'missing.jsonl'}"


# -- hostile inputs -------------------------------------------------------------------------------


def test_a_recording_torn_mid_line_replays_up_to_the_tear(invoke: Invoke, tmp_path: Path) -> None:
    data = TRIP.read_bytes()
    lines = data.splitlines(keepends=True)
    # Cut inside the reply to call 3: the complete lines before it are the recording.
    at = next(i for i, x in enumerate(lines) if b'"t":"reply"' in x and b'"call":3' in x)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:at]) + lines[at][: len(lines[at]) // 2])
    ran = invoke("replay", torn, "--json", "--out", tmp_path / "r")
    # What it holds is identical; the rest of the run could not be compared: not a pass.
    assert ran.code == 1, ran.err
    data_ = ran.json()
    assert (data_["status"], data_["ended_at"], data_["identical_calls"]) == ("identical", 3, 3)
    assert data_["finished"] is False
    ran = invoke("replay", torn, "--out", tmp_path / "r")
    assert ran.code == 1
    assert ran.out.strip() == "3 calls, identical (the recording ends at call 3, before its answer)"


def test_a_reply_that_is_not_one_ends_the_replay_there_and_it_does_not_pass(
    invoke: Invoke, tmp_path: Path
) -> None:
    lines = TRIP.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if b'"t":"reply"' in x and b'"call":2,' in x)
    lines[at] = lines[at].replace(b'"stop_reason":', b'"stop_reasn":')
    mangled = tmp_path / "mangled.jsonl"
    mangled.write_bytes(b"".join(lines))
    ran = invoke("replay", mangled, "--json", "--out", tmp_path / "r")
    assert ran.code == 1, ran.err
    assert (ran.json()["status"], ran.json()["ended_at"]) == ("identical", 2)


def test_a_recording_torn_in_its_ending_says_the_run_did_not_finish(
    invoke: Invoke, tmp_path: Path
) -> None:
    lines = TRIP.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if b'"t":"run_end"' in x)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"".join(lines[:at]) + lines[at][:20])
    ran = invoke("replay", torn, "--out", tmp_path / "r")
    assert ran.code == 1, ran.err
    assert " ".join(ran.out.split()) == (
        "the recorded run did not finish: 5 calls identical, the recording ends before the run did"
    )
    ran = invoke("replay", torn, "--json", "--out", tmp_path / "r")
    assert ran.code == 1
    data = ran.json()
    assert (data["status"], data["finished"], data["identical_calls"]) == ("identical", False, 5)
    assert data["divergence"] is None and data["ended_at"] is None


def test_records_of_a_kind_this_af_does_not_know_are_passed_over(
    invoke: Invoke, tmp_path: Path
) -> None:
    out = []
    for raw in TRIP.read_text().splitlines():
        out.append(raw)
        out.append('{"t":"hologram","from":"a later af","payload":[1,{"x":"\\u001b[2J"}]}')
    odd = tmp_path / "later.jsonl"
    odd.write_text("\n".join(out) + "\n")
    ran = invoke("replay", odd, "--out", tmp_path / "r")
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "5 calls, identical"
    ran = invoke("diff", odd, TRIP)
    assert ran.code == 0 and "identical: 5 calls, the same ending" in ran.out


def test_a_recording_of_another_agent_diverges_at_its_first_call(
    invoke: Invoke, tmp_path: Path
) -> None:
    ran = invoke("replay", TRIP, "afcore.demos.compaction:build_agent", "--out", tmp_path)
    assert ran.code == 1
    assert (
        "note: the recording was made by agent 'trip-demo'; this one is 'research-demo'" in ran.err
    )
    assert ran.out.startswith("diverged at call 1, model")
    assert "'mock-trip'" in ran.out and "'mock-research'" in ran.out
    assert "the first call differs" in ran.out


def test_a_file_that_is_not_a_recording_fails_in_a_sentence(invoke: Invoke, tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"\x00\x01binary\xff\n" + b'{"t":"header"}\n')
    ran = invoke("replay", junk, "--out", tmp_path)
    assert ran.code == 1 and "junk.jsonl is not an af recording" in ran.err
    assert "Traceback" not in ran.err
    ran = invoke("diff", junk, TRIP)
    assert ran.code != 0 and "not an af recording" in ran.err


def test_escape_sequences_and_markup_in_a_difference_are_shown_inert(
    invoke: Invoke, tmp_path: Path
) -> None:
    bot = tmp_path / "hostile.py"
    bot.write_text(
        "import afcore.demos.trip as trip\n\n"
        "def make():\n"
        "    saved, trip.STEERING = trip.STEERING, '[bold red]boom[/] \\x1b[2J\\x1b]0;pwned\\x07'\n"
        "    try:\n"
        "        return trip.build_agent()\n"
        "    finally:\n"
        "        trip.STEERING = saved\n"
    )
    ran = invoke("replay", TRIP, f"{bot}:make", "--out", tmp_path / "r")
    assert ran.code == 1
    assert "\x1b" not in ran.out and "\x07" not in ran.out
    assert "[bold red]boom[/]" in ran.out  # the text as it is, not as markup
