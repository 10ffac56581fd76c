from __future__ import annotations

from pathlib import Path

from tests.afcli.conftest import Invoke

RAIN = Path(__file__).resolve().parents[2] / "recordings" / "sample-trip-rain.jsonl"


def test_why_leads_with_the_decision_in_the_readers_terms(invoke: Invoke) -> None:
    ran = invoke("why", RAIN, "message:6", env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert lines[0].startswith("message:6  ")
    assert lines[lines.index("decided") + 1] == (
        "  on tool return forecast fired: weather returned at iteration 1"
    )
    assert "    on message 4: weather, call 1 returned '{" in ran.out
    # Stage ids are for --json; people read message numbers and calls.
    assert "#" not in ran.out.replace("message 4", "")


def test_why_answer_fits_a_screen_and_shows_each_stage_once(invoke: Invoke) -> None:
    ran = invoke("why", RAIN, "answer", env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    assert len(lines) <= 30, ran.out
    assert "(again)" not in ran.out and "(above)" not in ran.out
    decided = lines[lines.index("decided") + 1 : lines.index("", lines.index("decided"))]
    rules = [line for line in decided if not line.startswith("    ")]
    assert len(rules) == len(set(rules)), "a decision printed twice"
    assert any(line.startswith("call ") and line.endswith(" read") for line in lines)
    assert lines[-1].startswith("further back: ") and "--full" in lines[-1]
    tree = invoke("why", RAIN, "answer", "--full", env={"COLUMNS": "200"})
    assert tree.code == 0 and len(tree.out.splitlines()) > len(lines)


def test_why_answers_for_an_injection_in_any_slot(invoke: Invoke, tmp_path: Path) -> None:
    agent = tmp_path / "support.py"
    agent.write_text(SUPPORT)
    ran = invoke(
        "run", f"{agent}:make", "I want a refund for order A17", "--json", "--out", tmp_path
    )
    assert ran.code == 0, ran.err
    path = ran.json()["recording"]
    # `refunds` is an instruction: it lands in the messages, not the system prompt.
    for key in ("refunds", "injection:refunds"):
        asked = invoke("why", path, key, env={"COLUMNS": "200"})
        assert asked.code == 0, asked.err
        assert "injection refunds in the messages (message 2) of call 2" in asked.out
        assert "rule refunds fired: user_message = 'I want a refund for order A17' -> true" in (
            asked.out
        )
    steering = invoke("why", path, "tone", "--json").json()
    assert steering["nodes"][steering["writer"]]["value"].startswith(
        "injection tone in the system prompt of call 2"
    )
    at = invoke("why", path, "cite", "--at", "call:1", env={"COLUMNS": "200"})
    assert at.code == 0, at.err
    assert "injection cite was not in the prompt at call 1" in at.out
    assert "cite skipped: lookup_order did not return at the last iteration" in at.out
    # Near misses point at the injection first.
    near = invoke("why", path, "refund")
    assert near.code == 1
    assert near.err.strip().endswith("nearest keys: injection:refunds")


SUPPORT = """
from afcore import Agent, define_tool, mock

lookup = define_tool(
    name="lookup_order",
    description="Look up an order by id.",
    input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
    execute=lambda args, ctx: {"id": args["id"], "item": "kettle"},
)


def make():
    replies = [
        {"tool_calls": [{"id": "c1", "name": "lookup_order", "args": {"id": "A17"}}]},
        {"content": "Your kettle can be refunded."},
    ]
    return (
        Agent.create(provider=mock(replies=replies), model="mock")
        .system("You are a support agent.")
        .steering("Be brief and kind.", id="tone")
        .instruction("Quote the refund policy.", id="refunds",
                     when=lambda s: "refund" in s.user_message)
        .instruction("Cite the order id.", id="cite", after="lookup_order")
        .tool(lookup)
        .build()
    )
"""


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
    assert {"key": "message:1", "writer": "seed#0", "line": 4, "what": ""} in listed


def test_why_errors_are_one_sentence_with_the_right_exit_code(invoke: Invoke) -> None:
    never = invoke("why", RAIN, "anwser")
    assert never.code == 1 and never.err.strip() == (
        "error: anwser was never written; nearest keys: answer"
    )
    place = invoke("why", RAIN, "answer", "--at", "call:40")
    assert place.code == 2 and "this run has calls 1..6" in place.err
    assert invoke("why", RAIN).code == 2
    wrong = invoke("why", RAIN, "answer", "--at", "nowhere")
    assert wrong.code == 2 and "give call:N (calls 1..6)" in wrong.err


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
