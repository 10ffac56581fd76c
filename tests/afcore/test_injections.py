from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, UsageError, define_tool, mock
from afcore import recording as rec
from afcore.injections import Injection, RuleTrigger, instruction, skill
from afcore.messages import Request
from afcore.tools import gated_tools, static_tools
from tests.conftest import fixed_recording


def tool(name: str, result: str = "ok") -> Any:
    return define_tool(name, f"The {name} tool.", {"type": "object"}, lambda a, c: result)


def scripted(*replies: Any) -> tuple[Any, list[Request]]:
    """A mock that plays ``replies`` in order and keeps every request it got."""
    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        return replies[len(seen) - 1]

    return mock(respond=respond), seen


def call(name: str, args: dict[str, Any] | None = None, id: str = "c") -> dict[str, Any]:
    return {"tool_calls": [{"id": id, "name": name, "args": args or {}}]}


def sources(request: Request) -> list[str | None]:
    return [s.source.id or s.source.kind for s in request.system]


def injected(request: Request) -> list[str]:
    """The text of the user messages after the conversation's last tool result or reply."""
    out = []
    for m in reversed(request.messages[1:]):
        if m.role != "user":
            break
        out.append(m.content)  # type: ignore[union-attr]
    return out[::-1]


def decisions(path: Path) -> list[dict[str, Any]]:
    """The decisions blob of every inject commit, in order."""
    with rec.open_recording(path) as r:
        out = []
        for _, record in r.records():
            if isinstance(record, rec.Commit) and record.stage == "inject":
                write = next(w for w in record.writes if w.key == "injections")
                out.append(r.value(write))
        return out


def test_steering_is_in_the_system_prompt_of_every_call() -> None:
    provider, seen = scripted(call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .system("Base.")
        .steering("Be kind.", id="tone")
        .tool(tool("t"))
        .build()
    )
    agent.run("hi")
    assert [sources(r) for r in seen] == [["base", "tone"], ["base", "tone"]]
    assert seen[0].system[1].source.trigger == "always"


def test_rule_fires_on_its_evidence_and_the_evidence_is_recorded(tmp_path: Path) -> None:
    provider, seen = scripted(call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction(
            "Quote the refund policy.", id="refunds", when=lambda s: "refund" in s.user_message
        )
        .instruction("Be brief.", id="late", when=lambda s: s.iteration >= 2, slot="system")
        .tool(tool("t"))
        .build()
    )
    agent.run("I want a refund")
    assert injected(seen[0]) == ["Quote the refund policy."]
    assert sources(seen[0]) == [] and sources(seen[1]) == ["late"]
    assert agent.last_recording is not None
    first, second = decisions(agent.last_recording)
    refunds = next(d for d in first["decisions"] if d["id"] == "refunds")
    assert refunds["fired"] is True and refunds["trigger"] == "rule"
    assert refunds["reads"] == [["user_message", "I want a refund"]]
    late = [next(d for d in x["decisions"] if d["id"] == "late") for x in (first, second)]
    assert [d["fired"] for d in late] == [False, True]
    # The iteration read is the inject stage's own, so it is named without its value.
    assert [d["reads"] for d in late] == [[["iteration"]], [["iteration"]]]
    assert late[0]["reason"] == "rule returned false"


def test_a_rule_that_raises_or_returns_a_non_bool_is_skipped_and_recorded(tmp_path: Path) -> None:
    def broken(s: Any) -> bool:
        return s.state["missing"]  # type: ignore[no-any-return]

    provider, seen = scripted("done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction("never shown", id="raises", when=broken)
        .instruction("never shown", id="truthy", when=lambda s: s.user_message)  # type: ignore[arg-type, return-value]
        .steering("Still here.", id="tone")
        .build()
    )
    assert agent.run("hi") == "done"
    assert sources(seen[0]) == ["tone"] and injected(seen[0]) == []
    assert agent.last_recording is not None
    (first,) = decisions(agent.last_recording)
    by_id = {d["id"]: d for d in first["decisions"]}
    assert by_id["raises"]["fired"] is False
    assert by_id["raises"]["error"].startswith("KeyError")
    assert by_id["raises"]["reads"] == [["state.missing", None]]
    assert by_id["truthy"]["fired"] is False and "TypeError" in by_id["truthy"]["error"]
    assert "tone" not in by_id  # always-on with fixed text: nothing to decide, not restated


def test_on_tool_return_fires_at_the_next_iteration_only(tmp_path: Path) -> None:
    provider, seen = scripted(call("search"), call("other"), "done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction("Cite the source ids.", id="cite", after="search")
        .instruction("Regex matched.", id="any-o", after=re.compile("oth.*"))
        .tools([tool("search", "hit 1"), tool("other")])
        .build()
    )
    agent.run("go")
    assert [injected(r) for r in seen] == [[], ["Cite the source ids."], ["Regex matched."]]
    assert agent.last_recording is not None
    second = decisions(agent.last_recording)[1]
    cite = next(d for d in second["decisions"] if d["id"] == "cite")
    assert cite["reason"] == "search returned at iteration 1"
    assert cite["reads"] == [["last_tool_results.search", "hit 1"]]
    lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
    inject2 = [x for x in lines if str(x.get("rsid")).startswith("inject#")][1]
    tool_commit = next(x for x in lines if x.get("tool", {}).get("name") == "search")
    # The decision's read names the commit that wrote the result it read.
    assert [k for k, _ in inject2["reads"]] == [tool_commit["writes"][0]["key"]]
    assert inject2["reads"][0][1] == tool_commit["seq"]


def test_skill_activation_changes_the_tools_slot_from_the_next_call(tmp_path: Path) -> None:
    refund = tool("issue_refund", "refunded")
    provider, seen = scripted(
        call("read_skill", {"id": "refunds"}),
        call("issue_refund"),
        "done",
    )
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .skill(
            "refunds",
            description="How to refund an order.",
            body="Refund within 30 days.",
            tools=[refund],
        )
        .skill("returns", description="How to take a return.", body="Returns: 14 days.")
        .build()
    )
    assert agent.run("refund please") == "done"
    assert [[t.name for t in r.tools] for r in seen] == [
        ["read_skill"],
        ["read_skill", "issue_refund"],
        ["read_skill", "issue_refund"],
    ]
    catalog = seen[0].tools[0].description
    assert "refunds: How to refund an order." in catalog and "returns:" in catalog
    assert injected(seen[0]) == [] and injected(seen[1]) == ["Refund within 30 days."]
    assert seen[1].tools[1].source.kind == "skill" and seen[1].tools[1].source.id == "refunds"
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        assert [t.source.kind for t in r.tools(2)] == ["skill", "skill"]
        assert rec.verify(r).ok


def test_read_skill_with_an_unknown_id_activates_nothing() -> None:
    provider, seen = scripted(call("read_skill", {"id": "nope"}), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .skill("refunds", description="d", body="b", tools=[tool("issue_refund")])
        .build()
    )
    agent.run("go")
    result = seen[1].messages[-1]
    assert result.is_error and '["refunds"]' in result.content  # type: ignore[union-attr]
    assert [t.name for t in seen[1].tools] == ["read_skill"]


def test_a_skill_tool_cannot_be_called_before_it_is_visible() -> None:
    provider, seen = scripted(call("issue_refund"), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .skill("refunds", description="d", body="b", tools=[tool("issue_refund")])
        .build()
    )
    agent.run("go")
    assert "no tool named 'issue_refund'" in seen[1].messages[-1].content  # type: ignore[union-attr]


def test_facts_are_evaluated_every_iteration() -> None:
    provider, seen = scripted(call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .fact(lambda s: f"iteration {s.iteration}", id="now")
        .fact(lambda: "no view needed", id="plain")
        .fact("The shop closes at 18:00.", id="hours", slot="messages")
        .tool(tool("t"))
        .build()
    )
    agent.run("go")
    assert [[s.text for s in r.system] for r in seen] == [
        ["iteration 1", "no view needed"],
        ["iteration 2", "no view needed"],
    ]
    assert injected(seen[1]) == ["The shop closes at 18:00."]


def test_stable_content_comes_first_with_cache_breakpoints_in_the_rebuilt_request(
    tmp_path: Path,
) -> None:
    provider, seen = scripted("done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .system("Base.")
        .fact(lambda s: f"iteration {s.iteration}", id="now")
        .steering("Stable rule.", id="tone")
        .tool(tool("t"))
        .build()
    )
    agent.run("go")
    assert [s.text for s in seen[0].system] == ["Base.", "Stable rule.", "iteration 1"]
    expected = [{"slot": "system", "index": 1}, {"slot": "tools", "index": 0}]
    assert [c.to_json() for c in seen[0].cache] == expected
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        assert r.request(1)["cache"] == expected
        assert [s.source.cache for s in r.segments(1)] == [None, "always", "never"]
        assert r.check_call(1).ok


def test_tool_providers_are_consulted_every_iteration() -> None:
    asked: list[Any] = []

    def gate(t: Any, ctx: Any) -> bool:
        asked.append((ctx.iteration, ctx.identity))
        return bool(ctx.iteration >= 2)

    provider, seen = scripted(call("fixed"), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .tool_provider(static_tools(tool("fixed"), name="catalog"))
        .tool_provider(gated_tools([tool("late")], gate, name="gate"))
        .build()
    )
    agent.run("go", identity="tenant-7")
    assert [[t.name for t in r.tools] for r in seen] == [["fixed"], ["fixed", "late"]]
    assert seen[1].tools[1].source.kind == "provider" and seen[1].tools[1].source.id == "gate"
    assert asked == [(1, "tenant-7"), (2, "tenant-7")]


def test_configure_resolves_model_and_instructions_before_the_first_call(tmp_path: Path) -> None:
    provider, seen = scripted("done")
    agent = (
        Agent.create(provider=provider, model="small", record=fixed_recording(tmp_path))
        .system("Default rules.")
        .configure(
            lambda ctx: (
                {"model": "big", "instructions": ctx.instructions + " Tenant rules."}
                if len(ctx.message) > 5
                else None
            )
        )
        .build()
    )
    agent.run("a long question")
    assert seen[0].model == "big" and [s.text for s in seen[0].system] == [
        "Default rules. Tenant rules."
    ]
    assert agent.last_recording is not None
    lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
    configure = next(x for x in lines if str(x.get("rsid")).startswith("configure#"))
    first_call = next(i for i, x in enumerate(lines) if x["t"] == "call")
    assert lines.index(configure) < first_call
    assert {w["key"]: w.get("value") for w in configure["writes"]} == {
        "model": "big",
        "instructions": "Default rules. Tenant rules.",
    }
    assert lines[0]["model"] == "small"  # the header says what was built; the commit what ran


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda b: b.steering("a", id="x").fact("b", id="x"), "two injections share the id 'x'"),
        (
            lambda b: b.tool(tool("t")).skill("s", description="d", body="b", tools=[tool("t")]),
            "'t'",
        ),
        (lambda b: b.skill("s", description="d", body="b").tool(tool("read_skill")), "read_skill"),
    ],
)
def test_build_refuses_collisions_naming_both(build: Any, words: str) -> None:
    builder = Agent.create(provider=mock(reply="x"), model="m")
    with pytest.raises(UsageError, match=re.escape(words)):
        build(builder).build()


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: instruction("x", id="i"), "exactly one of when="),
        (lambda: instruction("x", id="i", when=lambda s: True, after="t"), "exactly one of when="),
        (lambda: instruction(42, id="i", when=lambda s: True), "string or a function"),  # type: ignore[arg-type]
        (lambda: skill("s", description="", body="b"), "needs a description"),
        (lambda: instruction("x", id="i", when=lambda s: True, slot="tools"), "slot must be"),  # type: ignore[arg-type]
        (
            lambda: Injection(id="", flavor="x", trigger=RuleTrigger(lambda s: True), system="x"),
            "id",
        ),
        (
            lambda: Injection(id="e", flavor="x", trigger=RuleTrigger(lambda s: True)),
            "nothing in any slot",
        ),
        (
            lambda: instruction(lambda a, b: "x", id="i", when=lambda s: True),
            "no argument or the view",
        ),  # type: ignore[arg-type, misc]
    ],
)
def test_bad_injections_are_refused_at_definition(make: Any, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        make()


def test_content_function_returning_a_non_string_is_skipped_and_recorded(tmp_path: Path) -> None:
    provider, seen = scripted("done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .fact(lambda: 42, id="bad")  # type: ignore[arg-type, return-value]
        .build()
    )
    agent.run("go")
    assert seen[0].system == []
    assert agent.last_recording is not None
    (first,) = decisions(agent.last_recording)
    assert first["decisions"][0]["fired"] is False and "TypeError" in first["decisions"][0]["error"]


def test_injected_messages_are_sent_not_remembered_and_stored_once(tmp_path: Path) -> None:
    provider, seen = scripted(call("t", id="a"), call("t", id="b"), "done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction("Keep going.", id="nudge", when=lambda s: True)
        .tool(tool("t"))
        .build()
    )
    agent.run("go")
    assert [len(r.messages) for r in seen] == [2, 4, 6]  # history + one injected message
    assert all(injected(r) == ["Keep going."] for r in seen)
    assert agent.last_recording is not None
    text = agent.last_recording.read_text()
    assert text.count('"content":"Keep going."') == 1
    with rec.open_recording(agent.last_recording) as r:
        windows = [r.call(n).window for n in (1, 2, 3)]
        assert rec.verify(r).ok
        nudge = windows[0][-1]
        assert all(w[-1] == nudge for w in windows)  # the same stored message each call
        write = next(
            w for _, c in r.records() if isinstance(c, rec.Commit) for w in c.writes if w.source
        )
        assert write.source is not None and (write.source.id, write.source.trigger) == (
            "nudge",
            "rule",
        )


def test_an_agent_without_injections_writes_no_inject_stage(tmp_path: Path) -> None:
    provider, _ = scripted("done")
    agent = Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path)).build()
    agent.run("go")
    assert agent.last_recording is not None
    assert '"inject"' not in agent.last_recording.read_text()


def test_pure_rules_run_again_only_when_a_value_they_read_changed(tmp_path: Path) -> None:
    ran: dict[str, int] = {"mode": 0, "impure": 0, "history": 0, "items": 0}

    def counted(name: str, verdict: Any) -> Any:
        def rule(s: Any) -> bool:
            ran[name] += 1
            return bool(verdict(s))

        return rule

    def flip(args: dict[str, Any], ctx: Any) -> str:
        ctx.state["mode"] = "strict"
        return "flipped"

    def grow(args: dict[str, Any], ctx: Any) -> str:
        ctx.state["items"].append(1)  # mutated in place: the rule must still see the change
        return "grown"

    provider, seen = scripted(call("t"), call("flip"), call("t"), call("grow"), call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction(
            "Strict.", id="mode", when=counted("mode", lambda s: s.state["mode"] == "strict")
        )
        .instruction("Now.", id="impure", when=counted("impure", lambda s: True), pure=False)
        .instruction("Long.", id="history", when=counted("history", lambda s: len(s.history) > 4))
        .instruction(
            "Items.", id="items", when=counted("items", lambda s: len(s.state["items"]) > 0)
        )
        .tool(tool("t"))
        .tool(define_tool("flip", "Flip.", {"type": "object"}, flip))
        .tool(define_tool("grow", "Grow.", {"type": "object"}, grow))
        .build()
    )
    agent.run("go", state={"mode": "lenient", "items": []})
    assert len(seen) == 6
    assert ran["mode"] == 2  # iteration 1, and iteration 3 after flip changed it
    assert ran["items"] == 2  # iteration 1, and iteration 5 after grow appended to it
    assert ran["impure"] == 6 and ran["history"] == 6  # every iteration
    assert [("Strict." in injected(r), "Items." in injected(r)) for r in seen] == [
        (False, False),
        (False, False),
        (True, False),
        (True, False),
        (True, True),
        (True, True),
    ]
    # Decisions carried over are not restated; the changes are, with their new evidence.
    assert agent.last_recording is not None
    mode = [d for x in decisions(agent.last_recording) for d in x["decisions"] if d["id"] == "mode"]
    assert [(d["fired"], d["reads"]) for d in mode] == [
        (False, [["state.mode", "lenient"]]),
        (True, [["state.mode", "strict"]]),
    ]


def test_an_iteration_at_which_nothing_changed_writes_no_inject_stage(tmp_path: Path) -> None:
    provider, _ = scripted(call("t"), call("t"), call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction("Be brief.", id="brief", when=lambda s: s.state.get("short", True))
        .instruction("Wrap up.", id="late", when=lambda s: s.iteration >= 3, slot="system")
        .tool(tool("t"))
        .build()
    )
    agent.run("go")
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        injects = [
            c.iter for _, c in r.records() if isinstance(c, rec.Commit) and c.stage == "inject"
        ]
        assert injects == [1, 3]  # the first, and when `late` fired (decision and system changed)
        assert rec.verify(r).ok
        assert [len(r.segments(n)) for n in (1, 2, 3, 4)] == [0, 0, 1, 1]


def test_a_long_prompt_that_changes_at_its_end_is_stored_as_a_delta(tmp_path: Path) -> None:
    provider, seen = scripted(call("t"), call("t"), "done")
    builder = Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
    for i in range(40):
        builder = builder.steering(f"Guideline {i}.", id=f"g{i}")
    agent = (
        builder.instruction(
            "Now wrap up.", id="late", when=lambda s: s.iteration >= 2, slot="system"
        )
        .tool(tool("t"))
        .build()
    )
    agent.run("go")
    assert agent.last_recording is not None
    lists = [
        orjson.loads(line)["value"]
        for line in agent.last_recording.read_bytes().splitlines()
        if line.startswith(b'{"t":"blob"') and b'"keep":' in line
    ]
    assert len(lists) == 1 and lists[0]["keep"] == 40  # the 40 guidelines are named, not restated
    assert lists[0]["then"][0]["text"] == "Now wrap up."
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok
        assert [s.text for s in r.segments(2)][-2:] == ["Guideline 39.", "Now wrap up."]
        assert len(r.segments(1)) == 40 and r.check_call(2).ok
    assert [len(r.system) for r in seen] == [40, 41, 41]


def test_a_rule_that_flips_back_and_forth_sends_and_records_each_iteration_as_decided(
    tmp_path: Path,
) -> None:
    """A reminder every other iteration, beside a rule on the state that flips once: the
    engine takes earlier parts and slots again when a rule flips back, and each call is
    still sent, and recorded, as that iteration's rules decided."""

    def toggle(args: dict[str, Any], ctx: Any) -> str:
        ctx.state["mode"] = "strict" if ctx.state["mode"] == "lenient" else "lenient"
        return "toggled"

    steps = [call("t"), call("t"), call("toggle"), call("t"), call("toggle"), call("t"), "done"]
    provider, seen = scripted(*steps)
    agent = (
        Agent.create(provider=provider, model="m", record=fixed_recording(tmp_path))
        .instruction("Odd.", id="odd", when=lambda s: s.iteration % 2 == 1, slot="system")
        .instruction("Even.", id="even", when=lambda s: s.iteration % 2 == 0)
        .instruction("Strict.", id="strict", when=lambda s: s.state["mode"] == "strict")
        .tool(tool("t"))
        .tool(define_tool("toggle", "Toggle.", {"type": "object"}, toggle))
        .build()
    )
    agent.run("go", state={"mode": "lenient"})
    assert len(seen) == 7
    sent = [
        (
            "Odd." in " ".join(s.text for s in r.system),
            "Even." in injected(r),
            "Strict." in injected(r),
        )
        for r in seen
    ]
    # toggle runs at iterations 3 and 5: strict from iteration 4, lenient again from 6.
    assert sent == [
        (True, False, False),
        (False, True, False),
        (True, False, False),
        (False, True, True),
        (True, False, True),
        (False, True, False),
        (True, False, False),
    ]
    assert agent.last_recording is not None
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok
        for n, (odd, even, strict) in enumerate(sent, start=1):
            request = r.request(n)
            assert ("Odd." in orjson.dumps(request["system"]).decode()) is odd
            texts = orjson.dumps(request["messages"]).decode()
            assert ("Even." in texts, "Strict." in texts) == (even, strict)
    # Every change is recorded, with the evidence it was decided on, and only the changes.
    by_iteration = [
        {d["id"]: d["fired"] for d in x["decisions"]} for x in decisions(agent.last_recording)
    ]
    assert by_iteration == [
        {"odd": True, "even": False, "strict": False},
        {"odd": False, "even": True},
        {"odd": True, "even": False},
        {"odd": False, "even": True, "strict": True},
        {"odd": True, "even": False},
        {"odd": False, "even": True, "strict": False},
        {"odd": True, "even": False},
    ]


def test_a_view_a_rule_kept_still_reads_the_state_after_its_iteration() -> None:
    kept: list[Any] = []

    def rule(s: Any) -> bool:
        kept.append(s)
        return bool(s.state["on"])

    provider, _ = scripted(call("t"), "done")
    agent = (
        Agent.create(provider=provider, model="m")
        .instruction("On.", id="on", when=rule, pure=False)
        .tool(tool("t"))
        .build()
    )
    agent.run("go", state={"on": True})
    assert len(kept) == 2
    assert kept[0].state["on"] is True and dict(kept[-1].state) == {"on": True}


def test_the_runs_of_an_agent_record_their_own_evidence_and_decisions(tmp_path: Path) -> None:
    """Runs of one agent share the parts their rules decided (the same verdict from the same
    evidence): each run still decides from its own state, and records the very values it
    saw, their kind included (1, 1.0 and True are equal in Python, not in the record)."""
    provider = mock(respond=lambda r: call("t") if len(r.messages) < 4 else "done")
    agent = (
        Agent.create(provider=provider, model="m", record=tmp_path)
        .instruction("Flagged.", id="flag", when=lambda s: s.state["flag"] == 1)
        .instruction("Later.", id="later", when=lambda s: s.iteration > 1, slot="system")
        .tool(tool("t"))
        .build()
    )
    seen: dict[str, list[Any]] = {}
    for flag in (1, True, 1.0, 0, 1):
        agent.run("go", state={"flag": flag})
        assert agent.last_recording is not None
        first, *rest = decisions(agent.last_recording)
        flagged = next(d for d in first["decisions"] if d["id"] == "flag")
        seen.setdefault("reads", []).append(flagged["reads"])
        seen.setdefault("fired", []).append(flagged["fired"])
        # The rule on the iteration flips once in every run, recorded in each.
        assert [[d["id"] for d in x["decisions"]] for x in rest] == [["later"]]
    assert seen["reads"] == [[["state.flag", v]] for v in (1, True, 1.0, 0, 1)]
    assert [type(r[0][1]) for r in seen["reads"]] == [int, bool, float, int, int]
    assert seen["fired"] == [True, True, True, False, True]


def test_decisions_carried_over_equal_decisions_made_afresh_at_every_iteration() -> None:
    """Rules on the iteration (flipping back and forth), on the state (which a tool changes
    now and then), and on nothing that moves: the engine decides again only what may have
    changed and takes earlier parts when a rule flips back; what it composes at every
    iteration is what deciding every rule from scratch composes."""
    from afcore.injections import InjectionEngine, TurnState, steering

    injections = [steering("Be brief.", id="brief")]
    for i in range(12):
        slot: Any = "system" if i % 2 else "messages"
        when: Any = (
            (lambda s, k=i: s.iteration % (k % 3 + 2) == 0)
            if i % 3 == 0
            else (lambda s, k=i: s.state["mode"] == ("a", "b")[k % 2])
            if i % 3 == 1
            else (lambda s: "go" in s.user_message)
        )
        injections.append(instruction(f"Rule {i}.", id=f"r{i}", when=when, slot=slot))
    engine = InjectionEngine(base=[], tools=[], injections=injections, providers=[])

    def seen(turn: TurnState) -> Any:
        comp = engine.compose(turn)
        return (
            [(s.text, s.source) for s in comp.system],
            comp.messages,
            [(d.injection.id, d.fired, d.reason, d.reads, d.error) for d in comp.decisions],
            comp.cache,
        )

    state = {"mode": "a"}
    carried = TurnState(user_message="go", iteration=1, history=[], state=state, identity=None)
    for n in range(1, 40):
        if n % 7 == 0:
            state["mode"] = "b" if state["mode"] == "a" else "a"
        carried.iteration = n
        afresh = TurnState(
            user_message="go", iteration=n, history=[], state=dict(state), identity=None
        )
        assert seen(carried) == seen(afresh), n


def test_an_engine_with_nothing_to_evaluate_composes_a_base_once_for_every_run() -> None:
    from afcore.injections._engine import InjectionEngine, TurnState
    from afcore.messages import SystemSegment

    echo = define_tool("echo", "Echo.", {"type": "object"}, lambda a, c: "ok")
    engine = InjectionEngine(base=[], tools=[echo], injections=[], providers=[])
    assert engine.trivial

    def turn() -> TurnState:
        return TurnState(user_message="go", iteration=0, history=(), state={}, identity=None)

    base = (SystemSegment("Be brief."),)
    first = engine.compose_fixed(turn(), base)
    assert engine.compose_fixed(turn(), base) is first
    assert first == engine.compose(turn(), base)  # what composing it afresh gives
    other = (SystemSegment("Be kind."),)
    composed = engine.compose_fixed(turn(), other)
    assert [s.text for s in composed.system] == ["Be kind."]
    assert [s.name for s in composed.specs] == ["echo"]
