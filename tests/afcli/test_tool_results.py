"""Honest tool results through the command line: ``af run`` shows each result's status and
what became of it as it happens (progress included), ``af show`` the same from the file,
and ``af why`` reaches into the run an agent called as a tool made."""

from __future__ import annotations

from pathlib import Path

from tests.afcli.conftest import Invoke

AGENTS = """
from afcore import Agent, agent_tool, define_tool, mock
from afcore.tools import ResultCeiling, absent

O = {"type": "object", "properties": {}}
LOGS = {
    "type": "object",
    "properties": {"service": {"type": "string"}, "window": {"type": "string"}},
    "required": ["service", "window"],
}


def failures(args, ctx):
    ctx.progress({"done": 1, "total": 2, "message": "reading the nightly export"})
    ctx.progress({"done": 2, "total": 2})
    return absent(what="failed backups", checked=["the nightly export"])


def refund(args, ctx):
    return {
        "content": "refund refused (policy P-12)",
        "status": "denied",
        "effects": [
            {"kind": "require-instruction", "instruction_id": "playbook", "lease": "next-call"}
        ],
    }


translator = Agent.create(provider=mock(replies=["Hola."]), model="m", name="translator").build()

desk = (
    Agent.create(
        provider=mock(
            replies=[
                {
                    "tool_calls": [
                        {"id": "c1", "name": "failures", "args": {}},
                        {"id": "c2", "name": "export", "args": {}},
                        {"id": "c3", "name": "logs", "args": {"service": "checkout"}},
                        {"id": "c4", "name": "translate", "args": {"message": "Hello"}},
                    ]
                },
                {
                    "tool_calls": [
                        {"id": "c5", "name": "refund", "args": {}},
                        {"id": "c6", "name": "job", "args": {"id": 7}},
                    ]
                },
                {"tool_calls": [{"id": "c7", "name": "job", "args": {"id": 7}}]},
                "Hola. No failures.",
            ]
        ),
        model="m",
        name="desk",
    )
    .tool(define_tool("failures", "Failures.", O, failures))
    .tool(
        define_tool(
            "export", "Export.", O, lambda a, c: "ROW," * 1000,
            result_ceiling=ResultCeiling(max_chars=100),
        )
    )
    .tool(
        define_tool(
            "logs", "Logs.", LOGS, lambda a, c: "0 errors",
            ask_or_assume={"window": {"assume": "2h"}},
        )
    )
    .tool(agent_tool(translator, name="translate", description="To Spanish."))
    .tool(define_tool("refund", "Refund.", O, refund))
    .tool(define_tool("job", "A job's state.", {"type": "object"}, lambda a, c: "running"))
    .instruction("Name the policy; offer store credit.", id="playbook", when=lambda s: False)
    .limits_travel_with_the_answer()
    .build()
)
"""


def test_run_show_and_why_say_what_became_of_each_result(invoke: Invoke, tmp_path: Path) -> None:
    script = tmp_path / "desk.py"
    script.write_text(AGENTS)
    env = {"COLUMNS": "200"}
    ran = invoke("run", f"{script}:desk", "any failures?", "--out", tmp_path, env=env)
    assert ran.code == 0, ran.err
    live = ran.out + ran.err
    assert "… reading the nightly export" in live
    assert "… failures reported progress (2 times)" in live
    assert "← failures ok · absent" in live
    assert "← export ok · invalid" in live
    assert "refused over its ceiling: 4,000 chars, the ceiling is 100; no data was returned" in live
    assert 'assumed: window = "2h" (left out, the rule filled)' in live
    assert "ran agent translator: run " in live
    assert "Assumed (a tool's rule, not your words):" in live
    assert "← refund ok · denied" in live
    assert "effect: require-instruction playbook → pushed into the next call" in live
    assert "identical call #2 with the same result: the model read the nudge" in live

    as_data = invoke("run", f"{script}:desk", "again", "--json", "--out", tmp_path / "j").json()
    assert as_data["answer_coverage"] == {
        "checked": [{"what": "the nightly export"}],
        "assumed": [{"tool": "logs", "argument": "window", "value": "2h"}],
    }

    outer = next(p for p in tmp_path.glob("*.jsonl") if b'"name":"desk"' in p.read_bytes()[:400])
    shown = invoke("show", outer, env=env)
    assert shown.code == 0, shown.err
    for said in (
        "← failures ok · absent",
        "limits (absent): checked: the nightly export",
        "← export ok · invalid",
        "from agent:translator",
    ):
        assert said in shown.out
    as_json = invoke("show", outer, "--json").json()
    results = [r for c in as_json["calls"] for r in c["results"]]
    assert [r["result_status"] for r in results] == [
        "absent",
        "invalid",
        "success",
        "success",
        "denied",
        "success",
        "success",
    ]
    assert "identical call #2" in results[6]["notes"][0]
    for said in ("← refund ok · denied", "effect: require-instruction playbook", "identical"):
        assert said in shown.out
    # af show follows the link: how the run the agent made ended, and its answer.
    inner_file = tmp_path / results[3]["run"]["recording"]
    assert f"↳ {inner_file.name}: answer after 1 call: Hola." in shown.out
    assert results[3]["run"]["agent"] == "translator"

    why = invoke("why", outer, "answer", env=env)
    assert why.code == 0, why.err
    assert "↳ tool:translate#" in why.out and "ran agent translator" in why.out
    inner_lines = why.out.split("ran agent translator", 1)[1]
    assert "answer  'Hola.'" in inner_lines
    assert "message 1: 'Hello'" in inner_lines
    sliced = invoke("why", outer, "answer", "--json").json()
    [(rsid, inner)] = sliced["inner"].items()
    assert rsid.startswith("tool:translate#")
    assert inner["slice"]["key"] == "answer"
    # A link to a file that is gone is said, not followed.
    inner_file.unlink()
    gone = invoke("show", outer, env=env)
    assert f"↳ {inner_file.name}: cannot be read" in gone.out
