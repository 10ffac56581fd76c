"""Provenance in `af show`: where every system segment, message and tool of a call came from
and why it is there, and each iteration's injection decisions; on the demo, on a small agent
built for it, on recordings without injections, and on hostile ones."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool, mock
from afcore.tools import gated_tools
from tests.afcli.conftest import Invoke

ROOT = Path(__file__).resolve().parent.parent.parent
SAMPLES = sorted((ROOT / "recordings").glob("sample-*.jsonl"))
TRIP_SAMPLES = [p for p in SAMPLES if p.stem.startswith("sample-trip")]
"""The samples of the trip demo, whose five injections every call evaluates."""
WIDE = {"COLUMNS": "200"}


def show_call(invoke: Invoke, path: str | Path, n: int) -> dict[str, Any]:
    ran = invoke("show", path, "--call", str(n), "--json")
    assert ran.code == 0, ran.err
    data: dict[str, Any] = ran.json()
    return data


def by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in items if i.get("id")}


# -- the demo ----------------------------------------------------------------------------


@pytest.fixture
def demo_calls(invoke: Invoke, demo: dict[str, Any]) -> list[dict[str, Any]]:
    """Every call of a demo run, as `af show --call N --json` gives it."""
    assert demo["calls"] == 5
    return [show_call(invoke, demo["recording"], n) for n in range(1, 6)]


def test_every_part_of_every_call_says_where_it_came_from(
    demo_calls: list[dict[str, Any]],
) -> None:
    for call in demo_calls:
        for seg in call["system"]:
            assert {"source", "id", "trigger", "reason", "text", "cache", "position"} <= set(seg)
        for msg in call["messages"]:
            assert {"role", "writer", "content", "n"} <= set(msg)
            assert msg["writer"] is not None
        for tool in call["tools"]:
            assert {"name", "source", "id", "input_schema"} <= set(tool)
    first = demo_calls[0]
    base, steering, step = first["system"]
    assert base["source"] == "base" and base["id"] is None and base["trigger"] is None
    assert base["text"].startswith("You are trip-demo")
    assert (steering["source"], steering["id"], steering["trigger"]) == (
        "steering",
        "facts-only",
        "always",
    )
    assert steering["cache"] == "always" and steering["text"].startswith("Take facts only")
    assert (step["source"], step["id"], step["cache"]) == ("fact", "step", "never")
    assert [s["position"] for s in first["system"]] == [1, 2, 3]
    # The stable part (base and steering) ends at a cache breakpoint; the fact is after it.
    assert [s["cache_breakpoint"] for s in first["system"]] == [False, True, False]
    assert {"slot": "system", "index": 1} in first["cache"]


def test_the_computed_fact_is_evaluated_at_every_call(
    demo_calls: list[dict[str, Any]],
) -> None:
    for n, call in enumerate(demo_calls, 1):
        step = by_id(call["system"])["step"]
        assert f"This is step {n} of the turn" in step["text"]
        assert step["reads"] == {"iteration": n}
        # Its text changes every call: the same segment, changed.
        assert step["change"] == (None if n == 1 else "changed")


def test_the_rule_instruction_names_the_rule_and_what_it_read(
    demo_calls: list[dict[str, Any]], demo: dict[str, Any]
) -> None:
    for call in demo_calls:
        currency = by_id(call["messages"])["currency"]
        assert (currency["role"], currency["source"], currency["trigger"]) == (
            "user",
            "instruction",
            "rule",
        )
        assert currency["content"].startswith("The traveller wants prices in USD")
        assert currency["reason"].startswith("rule returned true reading user_message")
        assert currency["reads"]["user_message"].startswith("I have a free Saturday in Lisbon")
        # Written once by the first inject stage, sent again while it holds.
        assert currency["writer"] == "inject#1" and currency["n"] == 2
    # Injected messages come after the conversation.
    assert [m["role"] for m in demo_calls[0]["messages"]] == ["user", "user"]
    assert demo_calls[0]["messages"][0]["writer"] == "seed#0"


def test_the_on_tool_return_instruction_lands_once_after_the_tool(
    demo_calls: list[dict[str, Any]],
) -> None:
    present = ["forecast" in by_id(c["messages"]) for c in demo_calls]
    assert present == [False, True, False, False, False]
    forecast = by_id(demo_calls[1]["messages"])["forecast"]
    assert forecast["trigger"] == "on_tool_return"
    assert forecast["reason"] == "weather returned at iteration 1"
    assert json.loads(forecast["reads"]["last_tool_results.weather"])["city"] == "Lisbon"
    assert forecast["writer"].startswith("inject#") and forecast["change"] == "new"
    # The next call says it is gone.
    gone = demo_calls[2]["removed"]["messages"]
    assert gone == [{"n": forecast["n"], "source": "instruction", "id": "forecast"}]


def test_the_skill_tool_appears_at_the_call_after_read_skill(
    demo_calls: list[dict[str, Any]],
) -> None:
    names = [[t["name"] for t in c["tools"]] for c in demo_calls]
    assert names[0] == names[1] == ["weather", "find_places", "read_skill"]
    assert all(n == ["weather", "find_places", "read_skill", "convert_currency"] for n in names[2:])
    # read_skill was called at call 2; its skill's tool is in the tools slot of call 3.
    assert demo_calls[1]["response"]["tool_calls"][0] == {
        "id": "trip-2-1",
        "name": "read_skill",
        "args": {"id": "prices"},
    }
    sources = [(t["source"], t["id"]) for t in demo_calls[2]["tools"]]
    assert sources == [
        ("static", None),
        ("static", None),
        ("skill", "read_skill"),
        ("skill", "prices"),
    ]
    tool = demo_calls[2]["tools"][3]
    assert tool["change"] == "new" and demo_calls[3]["tools"][3]["change"] is None
    assert [t["change"] for t in demo_calls[2]["tools"][:3]] == [None, None, None]
    # The catalog the model chose from, in read_skill's own description.
    assert "- prices: Prices in another currency" in demo_calls[0]["tools"][2]["description"]
    # The skill's text arrives with its tool, in the system slot, stable while active.
    skill = by_id(demo_calls[2]["system"])["prices"]
    assert (skill["source"], skill["trigger"], skill["cache"]) == (
        "skill",
        "llm_activated",
        "while_active",
    )
    assert skill["reason"] == "activated by read_skill at iteration 2"
    assert skill["change"] == "new" and "prices" not in by_id(demo_calls[1]["system"])
    assert skill["cache_breakpoint"] is True


def test_messages_new_since_the_previous_call_are_marked(
    demo_calls: list[dict[str, Any]],
) -> None:
    assert all(m["change"] is None for m in demo_calls[0]["messages"])
    second = {m["n"]: m["change"] for m in demo_calls[1]["messages"]}
    assert second == {1: None, 3: "new", 4: "new", 5: "new", 2: None, 6: "new"}
    assert demo_calls[0]["previous_call"] is None and demo_calls[0]["removed"] is None
    assert demo_calls[1]["previous_call"] == 1


def test_decisions_per_iteration_in_the_overview(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--json")
    assert ran.code == 0, ran.err
    calls = ran.json()["calls"]
    fired = [[f["id"] for f in c["injections"]["fired"]] for c in calls]
    skipped = [[s["id"] for s in c["injections"]["skipped"]] for c in calls]
    assert fired == [
        ["facts-only", "step", "currency"],
        ["facts-only", "step", "currency", "forecast"],
        ["facts-only", "step", "currency", "prices"],
        ["facts-only", "step", "currency", "prices"],
        ["facts-only", "step", "currency", "prices"],
    ]
    assert skipped == [["forecast", "prices"], ["prices"], ["forecast"], ["forecast"], ["forecast"]]
    assert all(c["injections"]["evaluated"] == 5 for c in calls)
    first = calls[0]["injections"]
    reasons = {s["id"]: s["reason"] for s in first["skipped"]}
    assert reasons == {
        "forecast": "weather did not return at the last iteration",
        "prices": "not activated",
    }
    assert by_id(first["fired"])["currency"]["trigger"] == "rule"
    assert by_id(first["fired"])["facts-only"]["flavor"] == "steering"
    assert by_id(calls[1]["injections"]["fired"])["forecast"]["reads"].keys() == {
        "last_tool_results.weather"
    }
    assert [c["tools_added"] for c in calls] == [[], [], ["convert_currency"], [], []]


def test_human_overview_has_a_line_of_decisions_per_iteration(
    invoke: Invoke, demo: dict[str, Any]
) -> None:
    ran = invoke("show", demo["recording"], env=WIDE)
    assert ran.code == 0, ran.err
    lines = [line.strip() for line in ran.out.splitlines()]
    decisions = [line for line in lines if line.startswith("injections ")]
    assert decisions[0] == (
        "injections 5 evaluated · fired facts-only, step, currency · skipped forecast (weather "
        "did not return at the last iteration), prices (not activated)"
    )
    assert decisions[2].startswith(
        "injections 5 evaluated · fired facts-only, step, currency, prices"
    )
    assert len(decisions) == 5
    assert "\n  tools +convert_currency\n" in ran.out


def test_human_call_shows_provenance_and_what_changed(invoke: Invoke, demo: dict[str, Any]) -> None:
    ran = invoke("show", demo["recording"], "--call", "3", env=WIDE)
    assert ran.code == 0, ran.err
    out = ran.out
    for expected in (
        "injections 5 evaluated · fired facts-only, step, currency, prices · skipped forecast",
        "system  4 segments, ",
        "1 new, 1 changed since call 2",
        "[1] base\n",
        "[2] steering facts-only · always · cache always",
        "[3] skill prices  new · llm_activated · cache while_active · activated by read_skill at "
        "iteration 2",
        "[4] fact step  changed · always · cache never",
        "┈┈ cache breakpoint ┈┈",
        # A reason too long for the line gets a line of its own.
        "#2 user  instruction currency\n      rule · cache never · rule "
        'returned true reading user_message = "I have a free Saturday',
        "#7 assistant  new",
        "gone since call 2: #6 instruction forecast",
        "read_skill(id)  skill catalog: prices",
        "convert_currency(amount, from, to)  skill prices  new",
    ):
        assert expected in out, expected
    # The sections come in the order of the request.
    assert out.index("\nsystem ") < out.index("\nmessages ") < out.index("\ntools ")
    first = invoke("show", demo["recording"], "--call", "1", env=WIDE).out
    assert " new" not in first and "changed" not in first and "gone" not in first


def test_run_progress_says_what_the_injections_changed(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("run", "--out", tmp_path, env=WIDE)
    assert ran.code == 0, ran.err
    changes = [line.strip() for line in ran.err.splitlines() if "injections " in line]
    assert changes == [
        "injections +step +currency",
        "injections +forecast",
        "injections +prices -forecast",
    ]
    # Each shown under the iteration it composed.
    err = ran.err
    assert err.index("iteration 3 · call 3") < err.index("+prices") < err.index("iteration 4")


# -- a purpose-built agent: every source and every way to be skipped ---------------------


def _support_agent(folder: Path) -> Agent:
    def tool(name: str, result: str) -> Any:
        schema = {"type": "object", "properties": {"order": {"type": "string"}}}
        return define_tool(name, f"The {name} tool.", schema, lambda a, c: result)

    replies: list[Any] = [
        {"tool_calls": [{"id": "c1", "name": "read_skill", "args": {"id": "nope"}}]},
        {
            "tool_calls": [
                {"id": "c2", "name": "lookup", "args": {"order": "A-1"}},
                {"id": "c3", "name": "read_skill", "args": {"id": "refunds"}},
            ]
        },
        {"tool_calls": [{"id": "c4", "name": "issue_refund", "args": {"order": "A-1"}}]},
        "Refunded A-1.",
    ]

    def boom(s: Any) -> bool:
        return bool(1 / 0)

    return (
        Agent.create(provider=mock(replies=replies), model="m", name="support", record=folder)
        .system("You are support.")
        .tool(tool("lookup", "order A-1: paid"))
        .steering("Be kind.", id="tone")
        .instruction(
            "Mention the refund policy.",
            id="refund-rule",
            when=lambda s: "refund" in s.user_message,
        )
        .instruction("Never.", id="broken", when=boom)
        .instruction("Hmm.", id="vague", when=lambda s: s.user_message)  # type: ignore[arg-type,return-value]
        .instruction("Cite the order id.", id="cite", after=re.compile("look.*"))
        .fact("Orders ship in 2 days.", id="shipping", slot="messages")
        .skill(
            "refunds",
            description="How to refund",
            body="Refund only within 30 days.",
            tools=[tool("issue_refund", "refunded")],
        )
        .tool_provider(
            gated_tools(
                [tool("escalate", "escalated")],
                lambda t, ctx: ctx.iteration >= 3,
                name="escalation",
            )
        )
        .configure(lambda ctx: {"instructions": "You are support for ACME."})
        .build()
    )


@pytest.fixture
def support(tmp_path: Path) -> Path:
    agent = _support_agent(tmp_path / "runs")
    assert agent.run("I want a refund for A-1") == "Refunded A-1."
    assert agent.last_recording is not None
    return agent.last_recording


def test_every_kind_of_source_on_a_purpose_built_agent(invoke: Invoke, support: Path) -> None:
    call = show_call(invoke, support, 3)
    assert [(s["source"], s["id"]) for s in call["system"]] == [
        ("configure", None),
        ("steering", "tone"),
    ]
    assert call["system"][0]["text"] == "You are support for ACME."
    tools = [(t["name"], t["source"], t["id"], t["change"]) for t in call["tools"]]
    assert tools == [
        ("lookup", "static", None, None),
        ("read_skill", "skill", "read_skill", None),
        ("issue_refund", "skill", "refunds", "new"),
        ("escalate", "provider", "escalation", "new"),
    ]
    injected = {m["id"]: m for m in call["messages"] if m.get("source")}
    assert set(injected) == {"refund-rule", "cite", "shipping", "refunds"}
    # After the conversation.
    assert [m["role"] for m in call["messages"][-4:]] == ["user"] * 4
    assert injected["cite"]["trigger"] == "on_tool_return"
    assert injected["cite"]["reason"] == "lookup returned at iteration 2"
    assert (injected["shipping"]["source"], injected["shipping"]["trigger"]) == ("fact", "always")
    assert injected["refunds"]["content"] == "Refund only within 30 days."
    assert injected["refunds"]["reason"] == "activated by read_skill at iteration 2"
    assert all(m["writer"].startswith("inject#") for m in injected.values())


def test_skipped_injections_say_why_even_when_their_rule_failed(
    invoke: Invoke, support: Path
) -> None:
    ran = invoke("show", support, "--json")
    assert ran.code == 0, ran.err
    calls = ran.json()["calls"]
    first = calls[0]["injections"]
    assert first["evaluated"] == 7
    assert [f["id"] for f in first["fired"]] == ["tone", "shipping", "refund-rule"]
    skipped = by_id(first["skipped"])
    assert skipped["broken"]["reason"] == "its rule raised"
    assert skipped["broken"]["error"] == "ZeroDivisionError: division by zero"
    assert skipped["vague"]["reason"] == "its rule returned a non-bool"
    assert skipped["vague"]["error"].startswith("TypeError: the rule returned str")
    assert skipped["vague"]["reads"] == {"user_message": "I want a refund for A-1"}
    assert skipped["cite"]["reason"] == "/look.*/ did not return at the last iteration"
    # read_skill with an unknown id activated nothing: the skill is still skipped next time.
    assert calls[0]["results"][0]["status"] == "rejected"
    assert "refunds" in by_id(calls[1]["injections"]["skipped"])
    assert "refunds" in by_id(calls[2]["injections"]["fired"])
    assert [c["tools_added"] for c in calls] == [[], [], ["issue_refund", "escalate"], []]
    human = invoke("show", support, env=WIDE)
    assert (
        "skipped broken (its rule raised: ZeroDivisionError: division by zero), vague (its rule "
        "returned a non-bool: TypeError: the rul" in human.out
    )


def test_verify_passes_on_the_purpose_built_agent(invoke: Invoke, support: Path) -> None:
    ran = invoke("verify", support, "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["ok"] is True and ran.json()["verified"] == 4


# -- samples, recordings without injections, hostile ones -------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_af_verify_passes_on_every_sample(invoke: Invoke, path: Path) -> None:
    ran = invoke("verify", path, "--json")
    assert ran.code == 0, ran.err
    report = ran.json()
    assert report["ok"] is True and report["calls"] == report["verified"] >= 5
    assert report["problems"] == []


@pytest.mark.parametrize("path", TRIP_SAMPLES, ids=lambda p: p.stem)
def test_every_trip_sample_shows_its_decisions(invoke: Invoke, path: Path) -> None:
    ran = invoke("show", path, "--json")
    assert ran.code == 0, ran.err
    calls = ran.json()["calls"]
    assert all(c["injections"]["evaluated"] == 5 for c in calls)
    for n in range(1, len(calls) + 1):
        assert show_call(invoke, path, n)["verified"] is True


def test_the_rainy_sample_follows_the_forecast_instruction(invoke: Invoke) -> None:
    path = ROOT / "recordings" / "sample-trip-rain.jsonl"
    second = show_call(invoke, path, 2)
    forecast = by_id(second["messages"])["forecast"]
    assert json.loads(forecast["reads"]["last_tool_results.weather"])["rain_chance"] == 0.6
    # What the model did with it: look indoors.
    assert second["response"]["tool_calls"][0]["args"] == {"city": "Paris", "kind": "museum"}
    # A person reads what the trigger saw, in full.
    human = invoke("show", path, "--call", "2", env={"COLUMNS": "100"})
    assert human.code == 0, human.err
    flat = " ".join(human.out.split())
    assert (
        "#6 user instruction forecast new on_tool_return · cache never · "
        "weather returned at iteration 1 · reading last_tool_results.weather = "
        '"{"city":"Paris","condition":"light rain","high_c":17,"low_c":11,"rain_chance":0.6}"'
    ) in flat


def test_a_recording_without_injections_shows_fine(invoke: Invoke) -> None:
    valid = ROOT / "tests" / "fixtures" / "v1.1" / "valid.jsonl"
    ran = invoke("show", valid, "--json")
    assert ran.code == 0, ran.err
    assert all(c["injections"] is None for c in ran.json()["calls"])
    call = show_call(invoke, valid, 2)
    assert call["injections"] is None
    assert [(s["source"], s["id"], s["text"]) for s in call["system"]] == [
        ("base", None, "You answer questions about orders.")
    ]
    assert [m["writer"] for m in call["messages"]] == ["seed#0", "call-llm#1", "tool:lookup#2"]
    assert all("source" not in m for m in call["messages"])
    assert [t["name"] for t in call["tools"]] == ["lookup"]
    human = invoke("show", valid, env=WIDE)
    assert human.code == 0 and "injections" not in human.out
    human = invoke("show", valid, "--call", "2", env=WIDE)
    assert human.code == 0 and "[1] base" in human.out


def test_injection_ids_and_reasons_are_shown_literally(invoke: Invoke, tmp_path: Path) -> None:
    hostile = "\x1b[2J[bold]x[/]"
    agent = (
        Agent.create(provider=mock(reply="ok"), model="m", record=tmp_path)
        .steering("Be kind.", id=f"tone{hostile}")
        .instruction("Look.", id="rule", when=lambda s: s.user_message.startswith("\x1b"))
        .build()
    )
    agent.run(f"{hostile} go")
    path = agent.last_recording
    assert path is not None
    for args in (("show", path), ("show", path, "--call", "1")):
        ran = invoke(*args, env=WIDE)
        assert ran.code == 0, ran.err
        assert "\x1b" not in ran.out
        assert "tone\\x1b[2J[bold]x[/]" in ran.out
    call = show_call(invoke, path, 1)
    assert by_id(call["system"])[f"tone{hostile}"]["text"] == "Be kind."
    assert call["messages"][1]["reads"] == {"user_message": f"{hostile} go"}


def test_a_mangled_decisions_blob_does_not_stop_show(
    invoke: Invoke, demo: dict[str, Any], tmp_path: Path
) -> None:
    lines = Path(demo["recording"]).read_text().splitlines()
    inject = next(json.loads(x) for x in lines if '"rsid":"inject#' in x)
    ref = next(w["ref"] for w in inject["writes"] if w["key"] == "injections")
    mangled = []
    for x in lines:
        record = json.loads(x)
        if record.get("t") == "blob" and record.get("id") == ref:
            record["value"] = {"decisions": ["junk", {"id": 7}, {"id": "x", "reads": "no"}]}
        mangled.append(json.dumps(record))
    path = tmp_path / "mangled.jsonl"
    path.write_text("\n".join(mangled) + "\n")
    ran = invoke("show", path, "--json")
    assert ran.code == 0, ran.err
    first = ran.json()["calls"][0]["injections"]
    # What the call was sent still names what fired; the one readable decision is kept.
    assert [f["id"] for f in first["fired"]] == ["facts-only", "step", "currency"]
    assert [s["id"] for s in first["skipped"]] == ["x"]
    assert invoke("show", path, "--call", "1").code == 0
    assert invoke("verify", path).code == 1  # the blob no longer matches its hash


def test_many_injections_keep_the_overview_compact(invoke: Invoke, tmp_path: Path) -> None:
    builder = Agent.create(provider=mock(reply="ok"), model="m", record=tmp_path)
    for i in range(12):
        builder = builder.steering(f"Rule of style {i}.", id=f"style-{i}")
    for i in range(12):
        builder = builder.instruction(f"Note {i}.", id=f"note-{i}", when=lambda s: s.iteration > 1)
    agent = builder.build()
    agent.run("go")
    ran = invoke("show", agent.last_recording or "", env={"COLUMNS": "400"})
    assert ran.code == 0, ran.err
    (decisions,) = [x.strip() for x in ran.out.splitlines() if x.strip().startswith("injections")]
    # Eight names a list, then a count; skipped injections with the same reason go together.
    assert decisions == (
        "injections 24 evaluated · fired style-0, style-1, style-2, style-3, style-4, style-5, "
        "style-6, style-7 and 4 more · skipped note-0, note-1, note-2, note-3, note-4, note-5, "
        "note-6, note-7 and 4 more (rule returned false reading iteration = 1)"
    )
    # One call's own view names them all.
    call = invoke("show", agent.last_recording or "", "--call", "1", env=WIDE).out
    assert "style-11 · skipped note-0" in call and "note-11 (rule returned false" in call


def test_a_decision_carried_over_reads_the_iteration_it_is_carried_to(
    invoke: Invoke, tmp_path: Path
) -> None:
    # The rule decides the same at every iteration, so the record states it once.
    step = define_tool("step", "Step.", {"type": "object", "properties": {}}, lambda a, c: "ok")
    replies: list[Any] = [
        {"tool_calls": [{"id": f"c{i}", "name": "step", "args": {}}]} for i in range(2)
    ]
    agent = (
        Agent.create(provider=mock(replies=[*replies, "done"]), model="m", record=tmp_path)
        .tool(step)
        .instruction("Late.", id="late", when=lambda s: s.iteration > 100)
        .build()
    )
    agent.run("go")
    ran = invoke("show", agent.last_recording or "", "--json")
    assert ran.code == 0, ran.err
    for n, call in enumerate(ran.json()["calls"], 1):
        (late,) = call["injections"]["skipped"]
        assert late["reads"] == {"iteration": n}
        assert late["reason"] == f"rule returned false reading iteration = {n}"
