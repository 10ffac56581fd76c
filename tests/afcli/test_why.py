from __future__ import annotations

from pathlib import Path

from tests.afcli.conftest import Invoke

RAIN = Path(__file__).resolve().parents[2] / "recordings" / "sample-trip-rain.jsonl"


def test_why_prints_the_slice_as_a_tree_with_decisions_in_words(invoke: Invoke) -> None:
    ran = invoke("why", RAIN, "message:6")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert lines[0].startswith("inject#6  iteration 2  composed")
    assert "decided: on tool return forecast fired: weather returned at iteration 1" in ran.out
    assert "⇐ message:4 tool:weather#4  iteration 1" in ran.out
    assert "← message:1 seed#0  iteration 0  user_message = 'Where can I go" in ran.out


def test_why_json_is_the_library_slice(invoke: Invoke) -> None:
    ran = invoke("why", RAIN, "answer", "--json", "--depth", "2")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["key"] == "answer" and data["writer"].startswith("finalize#")
    assert data["truncated"]["by_depth"] > 0
    assert all({"from", "to", "kind", "key", "label"} == set(e) for e in data["edges"])


def test_why_lists_the_keys_with_their_writers(invoke: Invoke) -> None:
    ran = invoke("why", RAIN, "--list")
    assert ran.code == 0, ran.err
    assert "answer" in ran.out and "system:prices" in ran.out and "tool:weather#1.result" in ran.out
    listed = invoke("why", RAIN, "--list", "--json").json()
    assert {"key": "message:1", "writer": "seed#0", "line": 5, "what": ""} in listed


def test_why_errors_are_one_sentence_with_the_right_exit_code(invoke: Invoke) -> None:
    never = invoke("why", RAIN, "anwser")
    assert never.code == 1 and never.err.strip() == (
        "error: anwser was never written; nearest keys: answer"
    )
    place = invoke("why", RAIN, "answer", "--at", "call:40")
    assert place.code == 2 and "this run has calls 1..6" in place.err
    assert invoke("why", RAIN).code == 2


def test_why_help_documents_the_keys(invoke: Invoke) -> None:
    ran = invoke("why", "--help")
    assert ran.code == 0
    for key in (
        "answer",
        "system:<id>",
        "message:<n>",
        "tool:<name>#<k>.args",
        "tools@<n>",
        "fold:<n>",
        "--list",
    ):
        assert key in ran.out


def test_model_text_in_a_slice_is_shown_literally(invoke: Invoke, tmp_path: Path) -> None:
    from afcore import Agent, mock

    agent = Agent.create(
        provider=mock(reply="[bold red]boom[/] \x1b[31mred\x1b[0m [@click=app.quit]x[/]"),
        model="m",
        record=tmp_path,
    ).build()
    agent.run("hi")
    ran = invoke("why", agent.last_recording, "answer")
    assert ran.code == 0, ran.err
    assert "[bold red]boom[/]" in ran.out and "\\x1b[31m" in ran.out and "\x1b" not in ran.out


def test_a_key_missing_from_a_torn_file_says_the_file_ends_early(
    invoke: Invoke, tmp_path: Path
) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(RAIN.read_bytes()[:3000])
    ran = invoke("why", torn, "answer")
    assert ran.code == 1
    assert "answer was never written (the file ends early, at line" in ran.err
