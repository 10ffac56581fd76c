"""A composed run at the command line: af run on a flow (the router demo, a flow file),
af show drawing its steps with each agent's calls, af verify checking the log and every
agent's run, af why crossing from the answer into the agent that produced it and back to
the step that wrote what its rule read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import recording as rec
from tests.afcli.conftest import Invoke
from tests.conftest import runs_beside

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"


@pytest.fixture
def routed(invoke: Invoke, tmp_path: Path) -> dict[str, Any]:
    ran = invoke("run", "--demo", "router", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    outcome: dict[str, Any] = ran.json()
    return outcome


def test_af_run_runs_the_router_demo_with_progress_per_step(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("run", "--demo", "router", "--out", tmp_path)
    assert ran.code == 0, ran.err
    assert "Invoice 1042 was charged twice" in ran.out
    assert "✓ triage function  ok" in ran.err
    assert "▸ route/billing agent" in ran.err
    assert "route conditional  ok" in ran.err and "→ billing" in ran.err
    assert "recording " in ran.err


def test_the_router_sends_another_ticket_to_the_other_agent(
    routed: dict[str, Any], invoke: Invoke, tmp_path: Path
) -> None:
    assert routed["produced_by"] == "route/billing" and routed["calls"] == 2
    ran = invoke("run", "--demo", "router", "the sync is broken", "--json", "--out", tmp_path)
    assert ran.code == 0
    assert ran.json()["produced_by"] == "route/tech"
    assert "sync service" in ran.json()["answer"]


def test_af_verify_checks_the_log_and_every_agent_s_calls(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    ran = invoke("verify", routed["recording"])
    assert ran.code == 0, ran.out
    assert "2/2 calls verified" in ran.out and "✓ route/billing" in ran.out
    data = invoke("verify", routed["recording"], "--json").json()
    assert data["ok"] and data["runs"][0]["step"] == "route/billing"


def unfolded(log: Path) -> Path:
    """The log without the runs folded into it: read from the runs beside it."""
    from tests.conftest import runs_beside, without_folded_runs

    log.write_bytes(without_folded_runs(runs_beside(log).read_bytes()))
    return log


def test_af_verify_fails_a_flow_whose_folded_run_was_changed(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    from tests.conftest import reseal

    log = Path(routed["recording"])
    whole = log.read_bytes()
    at = whole.index(b'{"t":"run",')
    # The run's bytes changed inside the log and every seal made again: the frame's sha256
    # and the run's own seals still catch it.
    edited = whole[:at] + whole[at:].replace(b"Invoice 1042", b"Invoice 1043", 1)
    log.write_bytes(reseal(edited))
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    said = " ".join(p["message"] for p in ran.json()["problems"])
    assert "the run of step 'route/billing' folded here" in said and "sha256" in said
    # Its length too: a line added to it (and the frame's counts made to fit).
    lines = whole.splitlines(keepends=True)
    i = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"run",'))
    frame = orjson.loads(lines[i])
    frame["lines"] += 1
    frame["bytes"] += 3
    lines[i] = orjson.dumps(frame) + b"\n"
    lines.insert(i + 2, b" {}\n")
    log.write_bytes(reseal(b"".join(lines)))
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    said = " ".join(p["message"] for p in ran.json()["problems"])
    assert "the run of step 'route/billing' folded here" in said, said


def test_a_folded_run_cut_off_is_a_problem_not_a_crash(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = runs_beside(Path(routed["recording"]))  # killed while folding: runs still beside
    whole = log.read_bytes()
    at = whole.index(b'{"t":"run",')
    log.write_bytes(whole[: at + (len(whole) - at) // 2])
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    said = " ".join(p["message"] for p in ran.json()["problems"])
    assert "is cut off" in said and "no flow_end" in said
    # The run beside the log is read instead.
    shown = invoke("show", log)
    assert shown.code == 0 and "call 2" in shown.out


def test_af_verify_fails_a_flow_whose_agent_run_was_changed(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = unfolded(Path(routed["recording"]))
    (run,) = (log.parent / log.stem).glob("*.jsonl")
    run.write_bytes(run.read_bytes().replace(b"1042", b"1043"))
    ran = invoke("verify", log)
    assert ran.code == 1
    assert "✗ route/billing" in ran.out


def test_af_verify_fails_a_flow_whose_agent_run_is_another_run(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = unfolded(Path(routed["recording"]))
    (run,) = (log.parent / log.stem).glob("*.jsonl")
    with rec.open_recording(run) as original:
        mine = original.header.run_id
    other = SAMPLES / "sample-trip.jsonl"  # a whole run that verifies on its own
    with rec.open_recording(other) as r:
        theirs = r.header.run_id
    assert theirs != mine
    run.write_bytes(other.read_bytes())
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    assert f"{run.name} is run {theirs}, not {mine}" in [
        p["message"] for p in ran.json()["problems"]
    ]


def test_af_verify_fails_a_flow_whose_agent_step_names_no_run(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    from tests.conftest import reseal

    log = Path(routed["recording"])
    whole = log.read_bytes()
    named = re.compile(rb'(\{"t":"step_end","path":"route/billing",.*?)"run":"[^"]*",')
    edited, n = named.subn(rb"\1", whole)
    assert n == 1
    log.write_bytes(reseal(edited))  # the chain holds: only the step's reference is gone
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    problems = [p["message"] for p in ran.json()["problems"]]
    assert "agent step 'route/billing' names no run" in problems, problems


def test_af_verify_names_the_steps_a_cut_log_never_ended(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = Path(routed["recording"])
    lines = log.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"step_end","path":"route/'))
    log.write_bytes(b"".join(lines[:at]))  # killed while the billing agent ran
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    problems = [p["message"] for p in ran.json()["problems"]]
    for step in ("route/billing", "route", "(top)"):
        assert f"step {step!r} started and never ended" in problems, problems


def test_af_verify_catches_an_edit_of_the_flow_s_log_by_its_seals(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    from tests.conftest import reseal

    log = Path(routed["recording"])
    whole = log.read_bytes()
    assert b'"chosen":"billing"' in whole
    edited = whole.replace(b'"chosen":"billing"', b'"chosen":"tech"')
    log.write_bytes(edited)
    ran = invoke("verify", log)
    assert ran.code == 1
    assert "do not match their seal" in ran.out
    log.write_bytes(reseal(edited))  # sealed again: the chain holds, nothing else is wrong
    assert invoke("verify", log).code == 0
    # A record taken out with its seal breaks the seal after it; one added after the last
    # seal is covered by none.
    lines = whole.splitlines(keepends=True)
    at = next(i for i, raw in enumerate(lines) if raw.startswith(b'{"t":"decision"'))
    log.write_bytes(b"".join(lines[:at] + lines[at + 2 :]))
    ran = invoke("verify", log, "--json")
    assert ran.code == 1
    assert any("do not match their seal" in p["message"] for p in ran.json()["problems"])
    log.write_bytes(whole + lines[at])
    ran = invoke("verify", log)
    assert ran.code == 1 and "after the last seal" in ran.out


def test_af_verify_says_when_the_flow_did_not_finish(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = Path(routed["recording"])
    lines = log.read_bytes().splitlines(keepends=True)
    assert lines[-1].startswith(b'{"t":"seal"') and b'"flow_end"' in lines[-2]
    log.write_bytes(b"".join(lines[:-2]) + lines[-2][:20])  # the flow_end torn, unsealed
    ran = invoke("verify", log)
    assert ran.code == 1
    assert "torn" in ran.out and "no flow_end" in ran.out
    shown = invoke("show", log)
    assert shown.code == 0 and "did not finish" in shown.out


def test_af_show_draws_the_steps_with_each_agent_s_calls(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    ran = invoke("show", routed["recording"])
    assert ran.code == 0, ran.err
    out = ran.out
    for piece in (
        "triage function  ok",
        "wrote intent, priority, triage",
        "route conditional  ok",
        "chose billing",
        'read state.intent = "billing"',
        "billing agent  ok",
        "call 1",
        "lookup_invoice",
        "answer from route/billing",
    ):
        assert piece in out, piece
    data = invoke("show", routed["recording"], "--json").json()
    (triage, route) = data["steps"]["steps"]
    assert triage["writes"]["intent"] == "billing"
    assert route["decisions"][0]["chosen"] == "billing"


def test_af_why_crosses_from_the_answer_into_the_agent_and_back_to_the_step_that_wrote(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    ran = invoke("why", routed["recording"], "answer")
    assert ran.code == 0, ran.err
    out = ran.out
    assert "answer ← step route/billing" in out
    assert "chosen by route" in out and "state.intent ← written by triage" in out
    # inside the billing agent: its rule read the priority triage wrote
    assert "rule urgent fired" in out
    assert "state.priority ← written by the flow's step triage" in out
    assert "lookup_invoice, call 1" in out


def test_af_why_step_crosses_into_the_flow_for_state_a_step_wrote(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    ran = invoke("why", routed["recording"], "message:2", "--step", "route/billing")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("message:2 ") and "rule urgent fired" in ran.out
    assert "state.priority ← written by the flow's step triage" in ran.out
    assert "state.priority is application state" not in ran.out
    data = invoke("why", routed["recording"], "message:2", "--step", "route/billing", "--json")
    said = data.json()
    assert said["flow_state"] == {"state.priority": "triage"}
    notes = said["nodes"][said["writer"]]["notes"]
    assert "state.priority ← written by the flow's step triage" in notes


def test_af_why_step_keeps_the_note_for_state_no_step_wrote(invoke: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "desk.py"
    file.write_text(
        "from afcore import Agent, mock\n"
        "from afcore.flows import Sequence\n"
        "desk = Agent.create(provider=mock(reply='noted'), model='m', name='desk')"
        ".instruction('Be gentle.', id='gentle', when=lambda s: s.state.get('mood') == 'sad')"
        ".build()\n"
        "flow = Sequence.create('support').step('desk', desk).build()\n"
    )
    ran = invoke("run", file, "hello", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    log = ran.json()["recording"]
    asked = invoke("why", log, "injections", "--step", "desk")
    assert asked.code == 0, asked.err
    assert "state.mood is application state, not in the log" in asked.out
    assert "written by the flow's step" not in asked.out
    said = invoke("why", log, "injections", "--step", "desk", "--json").json()
    assert "flow_state" not in said


def test_af_why_on_a_state_value_names_its_writer_and_its_readers(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    ran = invoke("why", routed["recording"], "state.intent")
    assert "written by triage" in ran.out and "read by the decision of route" in ran.out
    keys = invoke("why", routed["recording"], "--list", "--json").json()
    assert {"answer", "state.intent", "route/billing"} <= {k["key"] for k in keys}


def test_af_run_finds_the_flow_a_file_defines(invoke: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "debate.py"
    file.write_text(
        "from afcore import Agent, mock\n"
        "from afcore.flows import Parallel, Sequence\n"
        "def a(name, text):\n"
        "    return Agent.create(provider=mock(reply=text), model='m', name=name).build()\n"
        "sides = Parallel.create().branch('pro', a('pro', 'yes'))"
        ".branch('con', a('con', 'no')).build()\n"
        "debate = Sequence.create('debate').step('sides', sides)"
        ".step('judge', a('judge', 'pro wins')).build()\n"
    )
    ran = invoke("run", file, "Tea or coffee?", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    assert ran.out.strip() == "pro wins"
    assert "sides/pro agent" in ran.err and "sides/con agent" in ran.err
    refused = invoke("run", file, "x", "--model", "openai:gpt-4o")
    assert refused.code == 2 and "a flow's agents keep their own" in refused.err


def test_af_schema_describes_every_line_of_a_flow_s_log(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    import jsonschema
    import orjson

    schema = invoke("schema").json()
    lines = Path(routed["recording"]).read_bytes().splitlines()
    kinds, folded = set(), set()
    for raw in lines:  # the log's records, and the lines of the agent's run folded into it
        record = orjson.loads(raw)
        jsonschema.validate(record, schema)
        (folded if raw.startswith(b" ") else kinds).add(record["t"])
    assert kinds == {"flow", "step_start", "step_end", "decision", "run", "flow_end", "seal"}
    assert {"header", "call", "reply", "run_end", "seal"} <= folded


PAUSING = """
from afcore import Agent, ToolMiddleware, ask, define_tool, mock
from afcore.flows import Sequence

refund = define_tool("refund", "Refund.", {"type": "object", "properties": {}}, lambda a, c: "ok")
call = {"tool_calls": [{"id": "t1", "name": "refund", "args": {}}]}
refunds = (
    Agent.create(provider=mock(replies=[call, "refunded"]), model="m", name="refunds")
    .tool(refund)
    .tool_middleware(ToolMiddleware("approval", on_tool_call=lambda c: ask("Refund?")))
    .build()
)
flow = Sequence.create("support").step("refund", refunds).step("thank", lambda s: "thanks").build()
"""


def test_a_flow_whose_step_pauses_says_which_run_to_answer(invoke: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "pausing.py"
    file.write_text(PAUSING)
    runs = tmp_path / "runs"
    ran = invoke("run", file, "refund me", "--out", runs, "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["status"] == "paused" and data["paused"]["question"] == "Refund?"
    assert [s["path"] for s in data["steps"]] == ["", "refund"]  # thank never ran
    refused = invoke("resume", data["recording"], "--approve")
    assert refused.code == 2
    assert "its step 'refund' paused" in refused.err and "001-refund.jsonl" in refused.err
    listed = invoke("ls", "--json", env={"AF_RECORDINGS": str(runs)})
    entry = next(e for e in listed.json() if e["run_id"] == data["run_id"])
    assert entry["agent"] == "flow support" and entry["status"] == "paused"


def test_af_chat_says_a_flow_is_run_with_af_run(invoke: Invoke, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    ran = invoke("chat", root / "examples" / "router.py", "--store", tmp_path / "sessions")
    assert ran.code == 2
    assert "is a flow" in ran.err and "af run" in ran.err


def test_af_replay_runs_the_flow_again_from_the_source_its_log_names(
    routed: dict[str, Any], invoke: Invoke, tmp_path: Path
) -> None:
    ran = invoke("replay", routed["recording"], "--out", tmp_path / "replays")
    assert ran.code == 0, ran.out + ran.err
    assert ran.out.strip() == "4 steps, 2 calls, identical"
    assert "with afcore.demos.router:build_flow" in ran.err
    data = invoke(
        "replay", routed["recording"], "--tools", "recorded", "--json", "--out", tmp_path
    ).json()
    assert data["status"] == "identical" and data["steps"] == 4 and data["calls"] == 2
    assert invoke("verify", data["recording"]).code == 0
    shown = " ".join(invoke("show", data["recording"]).out.split())
    assert f"replay of {Path(routed['recording']).name} tools recorded" in shown
    assert "from afcore.demos.router:build_flow" in shown
    link = invoke("show", data["recording"], "--json").json()["replay_of"]
    assert link["file"] == Path(routed["recording"]).name and link["tools"] == "recorded"
    # The replay and the run it replays, side by side: identical.
    same = invoke("diff", routed["recording"], data["recording"])
    assert same.code == 0 and "identical: 4 steps, the same ending" in same.out


def test_af_replay_of_a_flow_file_names_the_edited_step_and_its_why(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import afcore.demos.router as router

    monkeypatch.chdir(tmp_path)  # the log names the flow's file relative to where it ran
    monkeypatch.setattr(router, "URGENT_NOTE", router.URGENT_NOTE)  # the edit below is undone
    flow = tmp_path / "support.py"
    flow.write_text(
        "import afcore.demos.router as router\n"
        "URGENT = router.URGENT_NOTE\n"
        "support = router.build_flow()\n"
    )
    ran = invoke("run", flow, "Invoice 1042 charged me twice, urgent!", "--json", "--out", tmp_path)
    assert ran.code == 0, ran.err
    log = ran.json()["recording"]
    assert invoke("replay", log, "--out", tmp_path / "r").out.startswith("4 steps, 2 calls")
    edited = tmp_path / "support_edited.py"
    edited.write_text(
        "import afcore.demos.router as router\n"
        "router.URGENT_NOTE = 'Urgent: say sorry.'\n"
        "support = router.build_flow()\n"
    )
    ran = invoke("replay", log, edited, "--out", tmp_path / "r")
    assert ran.code == 1
    said = " ".join(ran.out.split())
    assert "diverged at step route/billing, call 1, messages" in said
    assert "~ message 2: content" in said and "replayed 'Urgent: say sorry.'" in said
    assert f"why af why {log} message:2 --step route/billing" in said
    asked = invoke(*_why_command(ran.out))
    assert asked.code == 0, asked.err
    assert asked.out.startswith("message:2 ")
    wrong = invoke("why", log, "message:2", "--step", "route/nowhere")
    assert wrong.code == 2 and "no agent step at 'route/nowhere'" in wrong.err
    data = invoke("replay", log, edited, "--json", "--out", tmp_path / "r").json()
    d = data["divergence"]
    assert data["status"] == "diverged"
    assert (d["step"], d["call"], d["slot"], d["why_key"]) == (
        "route/billing",
        1,
        "messages",
        "message:2",
    )

    # The log alone, moved where its folder is not (as attached to a bug report): the
    # command printed still answers, from the runs the log holds.
    alone = tmp_path / "shared" / Path(log).name
    alone.parent.mkdir()
    Path(log).rename(alone)
    assert not alone.with_suffix("").exists()
    ran = invoke("replay", alone, edited, "--out", tmp_path / "r2")
    assert ran.code == 1, ran.err
    said = " ".join(ran.out.split())
    assert f"why af why {alone} message:2 --step route/billing" in said
    asked = invoke(*_why_command(ran.out))
    assert asked.code == 0, asked.err
    assert asked.out.startswith("message:2 ")
    assert not alone.with_suffix("").exists()  # read from the log, not written out beside it


def test_af_replay_of_an_edited_predicate_shows_what_it_read(
    invoke: Invoke, tmp_path: Path
) -> None:
    edited = tmp_path / "router_edited.py"
    edited.write_text(
        "import afcore.demos.router as router\n"
        "def build_flow():\n"
        "    flow = router.build_flow()\n"
        "    route = flow.steps[1][1]\n"
        "    (name, _, agent), *rest = route.whens\n"
        "    route.whens = ((name, lambda s: s['intent'] == 'refund', agent), *rest)\n"
        "    return flow\n"
    )
    ran = invoke("run", "--demo", "router", "--json", "--out", tmp_path)
    log = ran.json()["recording"]
    ran = invoke("replay", log, f"{edited}:build_flow", "--out", tmp_path / "r")
    assert ran.code == 1
    said = " ".join(ran.out.split())
    assert "diverged at step route, decision" in said
    assert "~ predicate billing: answered recorded true replayed false" in said
    assert 'read state.intent = "billing"' in said
    assert f"why af why {log} route/billing" in said
    # The recorded side's why: the decision and the step that wrote what it read.
    why = " ".join(invoke("why", log, "route/billing").out.split())
    assert "chosen by route" in why and "state.intent ← written by triage" in why


def test_af_diff_of_two_flow_runs_says_where_they_depart(
    routed: dict[str, Any], invoke: Invoke, tmp_path: Path
) -> None:
    other = invoke("run", "--demo", "router", "the sync is broken", "--json", "--out", tmp_path)
    ran = invoke("diff", routed["recording"], other.json()["recording"])
    assert ran.code == 1
    said = " ".join(ran.out.split())
    assert "step route/billing agent ran only in a" in said
    assert "step route/tech agent ran only in b" in said
    assert "~ predicate billing: answered a true b false" in said
    assert 'a read state.intent = "billing" b read state.intent = "tech"' in said
    assert "~ chosen a 'billing' b 'tech'" in said
    data = invoke("diff", routed["recording"], other.json()["recording"], "--json").json()
    assert not data["identical"]
    assert {s["path"] for s in data["steps"]} >= {"route", "route/billing", "route/tech"}


def test_replay_then_live_goes_on_past_a_flow_s_first_difference(
    routed: dict[str, Any], invoke: Invoke, tmp_path: Path
) -> None:
    log = Path(routed["recording"])
    same = invoke("replay", log, "--then-live", "--out", tmp_path / "same")
    assert same.code == 0 and "identical" in same.out, same.err
    edited = tmp_path / "edited.py"
    edited.write_text(
        "import afcore.demos.router as router\n"
        "def build():\n"
        "    flow = router.build_flow()\n"
        "    route = flow.steps[1][1]\n"
        "    (name, _, runnable), *rest = route.whens\n"
        "    route.whens = ((name, lambda s: False, runnable), *rest)\n"
        "    return flow\n"
    )
    ran = invoke("replay", log, f"{edited}:build", "--then-live", "--out", tmp_path / "live")
    assert ran.code == 1, ran.err
    said = " ".join(ran.out.split())
    assert said.startswith("diverged at step route, decision")
    assert (
        "then live: the flow went on; 1 agent step answered by their agents' own providers "
        "(route/tech)" in said
    )
    assert "answer: " in said
    data = invoke(
        "replay", log, f"{edited}:build", "--then-live", "--json", "--out", tmp_path / "j"
    ).json()
    assert data["then_live"] and data["live_steps"] == ["route/tech"] and data["answer"]
    # The replay's own composed run is a whole run: af diff names the branch each took.
    other = invoke("diff", log, data["recording"])
    assert "step route/tech agent ran only in b" in " ".join(other.out.split())


def test_a_flow_s_log_and_an_agent_s_run_are_not_taken_for_each_other(
    routed: dict[str, Any], invoke: Invoke, tmp_path: Path
) -> None:
    log = runs_beside(Path(routed["recording"]))
    (run,) = (log.parent / log.stem).glob("*.jsonl")
    agent = tmp_path / "agent.py"
    agent.write_text(
        "from afcore import Agent, mock\n"
        "agent = Agent.create(provider=mock(reply='hi'), model='m', name='a').build()\n"
    )
    cases = [
        (("replay", log, f"{agent}:agent"), ["is an agent", "is a flow's log", log.stem]),
        (("replay", run), ["is the run of step route/billing of the flow run", "af replay"]),
        (
            ("replay", run, "afcore.demos.router:build_flow"),
            ["is a flow", "is one agent's run"],
        ),
        (("diff", log, run), ["is a flow's log", "is one agent's run", log.stem]),
        (("diff", run, log), ["is a flow's log", "is one agent's run", log.stem]),
    ]
    for args, words in cases:
        ran = invoke(*args, "--out", tmp_path) if args[0] == "replay" else invoke(*args)
        assert ran.code == 2, (args, ran.out)
        said = " ".join(ran.err.split())
        for word in words:
            assert word in said, (args, said)


def _graph_checks(graph: dict[str, Any]) -> dict[str, set[tuple[str, str]]]:
    """The graph's edges by kind, after checking its shape: every edge joins two of its
    nodes, is of a known kind, and but for ``ran_in`` (a call ran in the step its reply
    answers for) none leads back to where it started."""
    nodes, edges = graph["nodes"], graph["edges"]
    assert graph["root"] in nodes
    by: dict[str, set[tuple[str, str]]] = {}
    for e in edges:
        assert e["from"] in nodes and e["to"] in nodes, e
        by.setdefault(e["kind"], set()).add((e["from"], e["to"]))
    assert set(by) <= {"produced_by", "decided_by", "read", "ran_in"}
    after: dict[str, list[str]] = {}
    for e in edges:
        if e["kind"] != "ran_in":
            after.setdefault(e["from"], []).append(e["to"])
    state: dict[str, int] = {}

    def acyclic(node: str) -> None:
        state[node] = 1
        for nxt in after.get(node, []):
            assert state.get(nxt) != 1, f"a cycle through {nxt}"
            if nxt not in state:
                acyclic(nxt)
        state[node] = 2

    acyclic(graph["root"])
    assert set(state) == set(nodes)  # every node is reached from the key
    return by


def test_af_why_json_gives_the_router_s_graph(routed: dict[str, Any], invoke: Invoke) -> None:
    ran = invoke("why", routed["recording"], "answer", "--json")
    assert ran.code == 0, ran.err
    graph = ran.json()
    by = _graph_checks(graph)
    kinds = {n["kind"] for n in graph["nodes"].values()}
    assert kinds == {"answer", "step", "decision", "call", "value"}
    assert ("answer", "step:") in by["produced_by"]
    assert ("step:", "step:route") in by["produced_by"]
    assert ("step:route", "step:route/billing") in by["produced_by"]
    assert ("step:route/billing", "call:route/billing#2") in by["produced_by"]
    assert ("step:route/billing", "decision:route#1") in by["decided_by"]
    assert ("decision:route#1", "value:state.intent") in by["read"]
    assert ("value:state.intent", "step:triage") in by["produced_by"]
    # The billing agent's rule read the priority triage wrote: from its calls to the step.
    assert ("call:route/billing#1", "value:state.priority") in by["read"]
    assert ("value:state.priority", "step:triage") in by["produced_by"]
    assert {("call:route/billing#1", "step:route/billing")} <= by["ran_in"]
    assert graph["nodes"]["value:state.intent"]["value"] == "billing"
    assert graph["nodes"]["decision:route#1"]["verdicts"][0]["reads"] == [
        ["state.intent", "billing"]
    ]
    # The text stays the lines a person reads.
    assert "answer ← step route/billing" in invoke("why", routed["recording"], "answer").out


def test_af_why_json_gives_a_parallel_flow_s_graph_through_its_merge(
    invoke: Invoke, tmp_path: Path
) -> None:
    from tests.test_examples import EXAMPLES

    ran = invoke("run", EXAMPLES / "debate.py", "Bridge?", "--json", "--out", tmp_path)
    assert ran.code == 0, ran.err
    graph = invoke("why", ran.json()["recording"], "answer", "--json").json()
    by = _graph_checks(graph)
    assert ("step:judge", "value:input:judge") in by["read"]
    assert ("value:input:judge", "step:sides") in by["produced_by"]
    assert ("step:sides", "merge:sides") in by["produced_by"]
    assert {("merge:sides", "step:sides/pro"), ("merge:sides", "step:sides/con")} <= by[
        "produced_by"
    ]
    for side in ("pro", "con"):
        assert (f"step:sides/{side}", f"call:sides/{side}#1") in by["produced_by"]
        assert (f"call:sides/{side}#1", f"step:sides/{side}") in by["ran_in"]
    merge = graph["nodes"]["merge:sides"]
    assert merge["kind"] == "merge" and merge["branches"] == {"pro": "ok", "con": "ok"}
    missing = invoke("why", ran.json()["recording"], "state.nothing", "--json")
    assert missing.code == 1 and "no step wrote 'state.nothing'" in missing.err


def test_a_record_of_a_type_this_reader_does_not_know_is_kept_not_a_problem(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    from afcore.recording import open_flow
    from tests.conftest import reseal

    log = Path(routed["recording"])
    whole = log.read_bytes()
    # A later 1.1 writer may add record types to a flow's log: sealed, they read and verify.
    added = b'{"t":"later_record","note":"from a later writer"}\n{"t":"seal","h":"x"}\n'
    log.write_bytes(reseal(whole + added))
    flow = open_flow(log)
    assert flow.problems == [] and [r.t for _, r in flow.unknown] == ["later_record"]
    assert invoke("verify", log).code == 0
    assert invoke("show", log).code == 0
    # Unsealed, it is caught as any added line is.
    log.write_bytes(whole + added.splitlines(keepends=True)[0])
    ran = invoke("verify", log)
    assert ran.code == 1 and "come after the last seal" in " ".join(ran.out.split())


# -- one recording: the agents' runs folded into the log -------------------------------------


def test_the_log_alone_is_the_whole_composed_run(invoke: Invoke, tmp_path: Path) -> None:
    import shutil

    from tests.test_examples import EXAMPLES

    debate = EXAMPLES / "debate.py"
    ran = invoke("run", debate, "Bridge?", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    log = Path(ran.json()["recording"])
    rec.wait_for_syncs()  # the log durable, the runs beside it removed
    assert list((tmp_path / "runs").iterdir()) == [log]  # a finished flow is one file
    before = {cmd: invoke(cmd, log, *rest).out for cmd, *rest in (("show",), ("why", "answer"))}
    alone = tmp_path / "report" / "bug.jsonl"
    alone.parent.mkdir()
    shutil.move(log, alone)
    checked = invoke("verify", alone, "--json")
    assert checked.code == 0, checked.out
    data = checked.json()
    assert data["ok"] and data["calls"] == data["verified"] == 3
    assert [r["step"] for r in data["runs"]] == ["sides/pro", "sides/con", "judge"]
    shown = invoke("show", alone)
    assert shown.code == 0 and "cannot read" not in shown.out
    assert shown.out == before["show"]  # the same tree, the same calls, the same names
    why = invoke("why", alone, "answer")
    assert why.code == 0 and why.out == before["why"]
    assert "agent run " in why.out
    again = invoke("replay", alone, "--out", tmp_path / "replays", "--json")
    assert again.code == 0, again.err
    assert again.json()["status"] == "identical"
    diffed = invoke("diff", alone, again.json()["recording"])
    assert diffed.code == 0 and "identical" in diffed.out, diffed.out
    assert not list((tmp_path / "report").iterdir())[1:]  # reading wrote nothing beside it


def test_a_paused_flow_s_log_alone_writes_the_step_s_run_back_for_af_resume(
    invoke: Invoke, tmp_path: Path
) -> None:
    import shutil

    from afcore.recording import wait_for_syncs

    file = tmp_path / "pausing.py"
    file.write_text(PAUSING)
    ran = invoke("run", file, "refund me", "--out", tmp_path / "runs", "--json")
    assert ran.code == 0, ran.err
    log = Path(ran.json()["recording"])
    own = log.with_suffix("") / "001-refund.jsonl"
    kept = own.read_bytes()
    wait_for_syncs()  # the flow's own tidying of its folder, on the sync thread, is done
    shutil.rmtree(own.parent)
    refused = invoke("resume", log, "--approve")
    assert refused.code == 2
    said = " ".join(refused.err.split())
    assert "written back from the flow's log" in said and str(own) in said
    assert own.read_bytes() == kept
    # It is the step's own file again: af resume goes on in it; the log keeps the run as
    # the flow left it, paused.
    resumed = invoke("resume", own, "--approve", "--agent", f"{file}:refunds")
    assert resumed.code == 0, resumed.err
    assert own.read_bytes().startswith(kept) and len(own.read_bytes()) > len(kept)
    assert invoke("verify", log).code == 0
    (step,) = invoke("show", log, "--json").json()["steps"]["steps"]
    assert step["status"] == "paused"


def test_af_resume_writes_a_folded_run_back_only_beside_the_log(
    invoke: Invoke, tmp_path: Path
) -> None:
    from afcore.recording import rewrite_flow

    file = tmp_path / "pausing.py"
    file.write_text(PAUSING)
    ran = invoke("run", file, "refund me", "--out", tmp_path / "runs", "--json")
    assert ran.code == 0, ran.err
    log = Path(ran.json()["recording"])
    # A log whose step names its run outside the log's folder (the frame named alike).
    hostile = tmp_path / "elsewhere" / "hostile.jsonl"
    hostile.parent.mkdir()
    whole = log.read_bytes()
    named = f"{log.stem}/001-refund.jsonl".encode()
    edited = whole.replace(b'"' + named + b'"', b'"../outside.jsonl"')
    from tests.conftest import reseal

    (tmp_path / "edited.jsonl").write_bytes(reseal(edited))
    rewrite_flow(tmp_path / "edited.jsonl", hostile, lambda step: lambda v, leaf: v)
    refused = invoke("resume", hostile, "--approve")
    assert refused.code == 2
    assert not (tmp_path / "outside.jsonl").exists()
    assert "written back" not in refused.err


def _why_command(out: str) -> list[str]:
    """The arguments of the `af why` command a replay printed, as a shell would split them."""
    import shlex

    found = re.search(r"^\s*why\s+af why (.+)$", out, re.MULTILINE)
    assert found is not None, out
    return ["why", *shlex.split(found[1])]


def test_a_finished_flow_s_agent_run_named_by_its_old_path_says_where_it_is(
    routed: dict[str, Any], invoke: Invoke
) -> None:
    log = Path(routed["recording"])
    rec.wait_for_syncs()
    run = log.with_suffix("") / "001-route-billing.jsonl"
    assert not run.exists()
    for command in ("show", "lens", "verify"):
        ran = invoke(command, run)
        assert ran.code == 2
        said = " ".join(ran.err.split())
        assert f"its flow ended and its log {log} holds it" in said, said
        assert "--step route/billing" in said
    elsewhere = invoke("show", log.parent / "nothing" / "001-route-billing.jsonl")
    assert elsewhere.code == 2 and "its flow ended" not in elsewhere.err
