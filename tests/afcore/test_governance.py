"""Governance in the library: tool and message middleware at every moment, the pause and
its resumption, act() as sugar, the answer's contract, watchers. Every verb is checked in
what the model read, what the caller got, and what the recording says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from afcore import (
    Agent,
    MessageDeniedError,
    MessageMiddleware,
    NotPausedError,
    OutputSchemaError,
    Paused,
    RunPausedError,
    ToolMiddleware,
    UsageError,
    allow,
    ask,
    define_tool,
    deny,
    mock,
    sliding_window,
)
from afcore import recording as rec
from afcore.messages import Request
from afcore.why import why
from tests.conftest import fixed_recording

AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}


def records(path: Path | None) -> list[dict[str, Any]]:
    """The file's records as written, without the seals that close each write."""
    assert path is not None
    lines = (orjson.loads(x) for x in path.read_bytes().splitlines())
    return [r for r in lines if r["t"] != "seal"]


def commits(path: Path | None, stage: str) -> list[dict[str, Any]]:
    """A stage's commits (a commit's stage is its rsid up to `#`)."""
    return [r for r in records(path) if r["t"] == "commit" and r["rsid"].partition("#")[0] == stage]


def written(path: Path | None, key: str) -> Any:
    """The value of the last write of ``key`` (resolving blobs)."""
    lines = records(path)
    blobs = {r["id"]: r["value"] for r in lines if r["t"] == "blob"}
    found = None
    for r in lines:
        for w in r.get("writes") or ():
            if w["key"] == key:
                found = blobs[w["ref"]] if "ref" in w else w.get("value")
    return found


def verified(path: Path | None) -> rec.VerifyReport:
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
    assert report.ok, report.problems
    return report


class Script:
    """A scripted model: each reply computed from the request, every request kept."""

    def __init__(self, *tool_calls: dict[str, Any], answer: str | None = None) -> None:
        self.tool_calls = list(tool_calls)
        self.answer = answer
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Any:
        self.requests.append(request)
        step = len(self.requests) - 1
        if step < len(self.tool_calls):
            return {"tool_calls": [self.tool_calls[step]]}
        if self.answer is not None:
            return self.answer
        last = request.messages[-1]
        return f"read: {getattr(last, 'content', '')}"

    def last_tool_result(self) -> Any:
        return self.requests[-1].messages[-1]


def refund_tool(paid: list[Any]) -> Any:
    def execute(args: dict[str, Any], ctx: Any) -> str:
        paid.append(dict(args))
        return f"refunded {args['amount']}"

    return define_tool("refund", "Refund an amount.", AMOUNT, execute)


def agent_with(
    tmp_path: Path, script: Script, paid: list[Any], *links: Any, name: str = "refunds"
) -> Any:
    return (
        Agent.create(
            provider=mock(respond=script), model="m", name=name, record=fixed_recording(tmp_path)
        )
        .tool(refund_tool(paid))
        .tool_middleware(*links)
        .build()
    )


REFUND_250 = {"id": "c1", "name": "refund", "args": {"amount": 250}}


# -- tool calls -------------------------------------------------------------------------------


def test_deny_reaches_the_model_verbatim_and_the_loop_goes_on(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    no = ToolMiddleware("no-refunds", on_tool_call=lambda c: deny("refunds need a ticket #R-1"))
    agent = agent_with(tmp_path, script, paid, no)
    assert agent.run("refund") == "read: refunds need a ticket #R-1"
    assert paid == []
    result = script.last_tool_result()
    assert (result.content, result.is_error) == ("refunds need a ticket #R-1", True)
    stage = commits(agent.last_recording, "tool:refund")[0]
    assert stage["tool"]["status"] == "denied"
    decision = written(agent.last_recording, "govern:refund#1")
    assert decision["verb"] == "deny" and decision["links"] == [
        {"link": "no-refunds", "verb": "deny", "reason": "refunds need a ticket #R-1"}
    ]
    assert not [r for r in records(agent.last_recording) if r["t"] == "tool_start"]
    verified(agent.last_recording)


def test_changed_arguments_run_the_tool_and_both_versions_are_kept(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []

    def ceiling(call: Any) -> Any:
        return allow({"amount": 100}, "capped at 100") if call.args["amount"] > 100 else allow()

    agent = agent_with(tmp_path, script, paid, ToolMiddleware("ceiling", on_tool_call=ceiling))
    assert agent.run("refund") == "read: refunded 100"
    assert paid == [{"amount": 100}]
    path = agent.last_recording
    assert written(path, "tool:refund#1.args") == {"amount": 100}
    reply = written(path, "message:2")
    assert reply["content"][0]["args"] == {"amount": 250}  # the model's own, as it asked
    # why reaches the link that changed them, with its reason, back to the reply.
    with rec.open_recording(path) as r:
        s = why(r, "tool:refund#1.args")
    root = s.nodes[s.writer]
    assert root.stage == "govern:refund"
    assert any("ceiling changed the arguments: capped at 100" in d for d in root.decisions)
    assert "{'amount': 100}" in root.value or '"amount":100' in root.value
    assert [e.source for e in s.parents(s.writer)] == ["call-llm#1"]
    verified(path)


def test_each_link_sees_the_one_before_and_the_first_refusal_wins(tmp_path: Path) -> None:
    script, paid, seen = Script(REFUND_250), [], []

    def halve(call: Any) -> Any:
        seen.append(("halve", call.args["amount"]))
        return allow({"amount": call.args["amount"] / 2}, "halved")

    def refuse(call: Any) -> Any:
        seen.append(("refuse", call.args["amount"]))
        return deny(f"{call.args['amount']} is still too much")

    def never(call: Any) -> Any:
        seen.append(("never", call.args["amount"]))
        return allow()

    links = [
        ToolMiddleware("halve", on_tool_call=halve),
        ToolMiddleware("refuse", on_tool_call=refuse),
        ToolMiddleware("never", on_tool_call=never),
    ]
    agent = agent_with(tmp_path, script, paid, *links)
    assert agent.run("refund") == "read: 125.0 is still too much"
    assert seen == [("halve", 250), ("refuse", 125.0)]
    decision = written(agent.last_recording, "govern:refund#1")
    assert [d["link"] for d in decision["links"]] == ["halve", "refuse"]
    assert decision["not_walked"] == ["never"]


@pytest.mark.parametrize(
    ("hook", "said"),
    [
        (lambda c: 1 / 0, "The rule broken failed: ZeroDivisionError: division by zero"),
        (lambda c: "yes", "The rule broken failed: on_tool_call returned 'yes'"),
        (lambda c: allow([1, 2], "a list"), "The rule broken failed: allow() was given list"),
    ],
)
def test_a_link_that_fails_is_a_denial_carrying_the_error(
    tmp_path: Path, hook: Any, said: str
) -> None:
    script, paid = Script(REFUND_250), []
    agent = agent_with(tmp_path, script, paid, ToolMiddleware("broken", on_tool_call=hook))
    answer = agent.run("refund")
    assert isinstance(answer, str) and answer.startswith(f"read: {said}")
    assert paid == []
    link = written(agent.last_recording, "govern:refund#1")["links"][0]
    assert link["verb"] == "deny" and link["error"]


def test_arguments_a_link_changed_are_validated_again(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    bad = ToolMiddleware("bad", on_tool_call=lambda c: allow({"amount": "lots"}, "as text"))
    agent = agent_with(tmp_path, script, paid, bad)
    answer = agent.run("refund")
    assert paid == []
    assert isinstance(answer, str) and "changed the arguments of refund into ones" in answer
    decision = written(agent.last_recording, "govern:refund#1")
    assert decision["verb"] == "deny" and decision["problems"][0]["path"] == "$.amount"


def test_results_walk_the_chain_backwards(tmp_path: Path) -> None:
    script, paid, order = Script(REFUND_250), [], []

    def first(result: Any) -> Any:
        order.append(("first", result.content))
        return allow(result.content.upper(), "shouted")

    def second(result: Any) -> Any:
        order.append(("second", result.content))
        return allow(result.content + "!", "excited")

    links = [
        ToolMiddleware("first", on_tool_result=first),
        ToolMiddleware("second", on_tool_result=second),
    ]
    agent = agent_with(tmp_path, script, paid, *links)
    # The last link speaks first on a result, the first link has the last word.
    assert agent.run("refund") == "read: REFUNDED 250!"
    assert order == [("second", "refunded 250"), ("first", "refunded 250!")]
    path = agent.last_recording
    decision = written(path, "govern:refund#1.result")
    assert decision["moment"] == "tool_result" and decision["changed"] is True
    assert [d["link"] for d in decision["links"]] == ["second", "first"]
    # A link with only on_tool_result takes no part before the call.
    assert commits(path, "govern:refund") == []
    verified(path)


def test_a_denied_result_is_withheld_and_ask_has_no_place_after_the_tool(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250, REFUND_250), []
    calls = iter([deny("the result names a card"), ask("show it?")])
    hide = ToolMiddleware("hide", on_tool_result=lambda r: next(calls))
    agent = agent_with(tmp_path, script, paid, hide)
    answer = agent.run("refund")
    assert paid == [{"amount": 250}, {"amount": 250}]  # the tool ran both times
    assert isinstance(answer, str) and "nothing left to prevent" in answer
    statuses = [c["tool"]["status"] for c in commits(agent.last_recording, "tool:refund")]
    assert statuses == ["withheld", "withheld"]
    assert script.requests[1].messages[-1].content == "the result names a card"


def test_without_middleware_nothing_is_governed(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .build()
    )
    agent.run("refund")
    raw = agent.last_recording.read_bytes()
    assert b'"stage":"govern' not in raw and b"tool_middleware" not in raw


# -- a person's approval --------------------------------------------------------------------


def approval_link() -> ToolMiddleware:
    return ToolMiddleware("approval", on_tool_call=lambda c: ask(f"Refund {c.args['amount']}?"))


def test_ask_pauses_the_run_and_resume_runs_the_tool(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    agent = agent_with(tmp_path, script, paid, approval_link())
    paused = agent.run("refund")
    assert isinstance(paused, Paused) and not isinstance(paused, str)
    assert (paused.question, paused.link, paused.tool, paused.args) == (
        "Refund 250?",
        "approval",
        "refund",
        {"amount": 250},
    )
    assert agent.last_result.status == "paused" and paused.recording == agent.last_recording
    assert paid == []
    lines = records(paused.recording)
    assert lines[-1]["t"] == "run_end" and lines[-1]["status"] == "paused"
    checkpoint = lines[-2]["checkpoint"]
    assert checkpoint["question"] == "Refund 250?" and checkpoint["asked"] == "c1"
    assert orjson.loads(orjson.dumps(checkpoint)) == checkpoint  # plain JSON
    verified(paused.recording)

    answer = agent.resume(paused, approve=True, why="customer is known", by="jo")
    assert answer == "read: refunded 250" and paid == [{"amount": 250}]
    lines = records(paused.recording)
    resume = next(r for r in lines if r["t"] == "resume")
    assert (resume["verb"], resume["by"], resume["why"]) == ("approve", "jo", "customer is known")
    assert written(paused.recording, "approval:refund#1")["by"] == "jo"
    assert lines[-1]["status"] == "answer" and lines[-1]["calls"] == 2
    assert len([r for r in lines if r["t"] == "header"]) == 1  # one run, one file
    report = verified(paused.recording)
    assert report.calls == 2
    # The tool ran because a person approved: af why says who.
    with rec.open_recording(paused.recording) as r:
        s = why(r, "tool:refund#1.result")
    words = [d for n in s.nodes.values() for d in n.decisions]
    assert any("approved by jo" in d and "customer is known" in d for d in words)


def test_decline_is_a_denial_the_model_reads(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    agent = agent_with(tmp_path, script, paid, approval_link())
    paused = agent.run("refund")
    assert isinstance(paused, Paused)
    answer = agent.resume(paused.recording, approve=False, why="over the limit")
    assert answer == "read: A person declined this call: over the limit"
    assert paid == []
    status = commits(paused.recording, "tool:refund")[0]["tool"]["status"]
    assert status == "denied"
    verified(paused.recording)
    with pytest.raises(NotPausedError, match="not paused"):
        agent.resume(paused, approve=True)


def test_a_reply_waits_whole_and_the_chain_goes_on_after_the_question(tmp_path: Path) -> None:
    calls = [
        {"id": "a", "name": "refund", "args": {"amount": 5}},
        {"id": "b", "name": "refund", "args": {"amount": 500}},
    ]
    paid: list[Any] = []
    script = Script(answer="ok")

    def respond(request: Request) -> Any:
        script.requests.append(request)
        if len(request.messages) == 1:
            return {"tool_calls": calls}
        return "ok"

    after: list[Any] = []
    big = ToolMiddleware(
        "big", on_tool_call=lambda c: ask("big one?") if c.args["amount"] > 100 else allow()
    )
    later = ToolMiddleware("later", on_tool_call=lambda c: after.append(c.call_id) or allow())
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .tool_middleware(big, later)
        .build()
    )
    paused = agent.run("two refunds")
    assert isinstance(paused, Paused) and paused.call_id == "b"
    assert paid == [] and after == ["a"]  # nothing of the reply ran before the answer
    assert agent.resume(paused, approve=True) == "ok"
    # The two run at once, on threads of their own: in either order.
    assert sorted(p["amount"] for p in paid) == [5, 500]
    assert after == ["a", "b"]  # the link after the one that asked still decided
    results = [m for m in script.requests[-1].messages if getattr(m, "role", "") == "tool"]
    assert [m.tool_call_id for m in results] == ["a", "b"]
    verified(paused.recording)


def test_a_resumed_run_is_refused_to_another_agent(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    paused = agent_with(tmp_path, script, paid, approval_link()).run("refund")
    assert isinstance(paused, Paused)
    other = agent_with(tmp_path / "o", Script(), [], approval_link(), name="someone-else")
    with pytest.raises(UsageError, match="made by agent 'refunds'"):
        other.resume(paused, approve=True)
    # Nothing was written after the paused run_end and the seal of its write.
    assert records(paused.recording)[-1]["status"] == "paused"
    assert paused.recording.read_bytes().splitlines()[-1].startswith(b'{"t":"seal"')


def test_a_fold_never_removes_the_paused_call(tmp_path: Path) -> None:
    paid: list[Any] = []
    steps = [{"id": f"c{i}", "name": "refund", "args": {"amount": i}} for i in range(1, 5)]
    script = Script(*steps, answer="all done")
    asks = ToolMiddleware(
        "asks", on_tool_call=lambda c: ask("the fourth?") if c.args["amount"] == 4 else allow()
    )
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .tool_middleware(asks)
        .window(sliding_window(keep_recent_turns=1))
        .build()
    )
    paused = agent.run("refund four times")
    assert isinstance(paused, Paused)
    folds = [written(paused.recording, f"fold:{n}") for n in (1, 2, 3)]
    folds = [f for f in folds if f]
    assert folds and all(f["count"] for f in folds)  # folded before the pause
    paused_reply = next(
        r["writes"][0]["key"]
        for r in records(paused.recording)
        if r["t"] == "reply" and r["tool_calls"] and r["tool_calls"][0]["id"] == "c4"
    )
    n = int(paused_reply.split(":")[1])
    assert not any(a <= n <= b for f in folds for a, b in f["messages"])
    assert agent.resume(paused, approve=True) == "all done"
    last = script.requests[-1].messages
    # The paused call and its result are in the window the next call was sent.
    assert [getattr(m, "tool_call_id", None) for m in last][-1] == "c4"
    verified(paused.recording)


def test_an_agent_that_does_not_record_cannot_pause(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=False)
        .tool(refund_tool(paid))
        .tool_middleware(approval_link())
        .build()
    )
    answer = agent.run("refund")
    assert isinstance(answer, str) and "cannot wait for one" in answer
    assert paid == []


def test_a_scripted_mock_takes_up_where_the_paused_run_left(tmp_path: Path) -> None:
    paid: list[Any] = []

    def make() -> Any:
        return (
            Agent.create(
                provider=mock(replies=[{"tool_calls": [REFUND_250]}, "refunded, as approved"]),
                model="m",
                name="refunds",
                record=fixed_recording(tmp_path),
            )
            .tool(refund_tool(paid))
            .tool_middleware(approval_link())
            .build()
        )

    paused = make().run("refund")
    assert isinstance(paused, Paused)
    # Another agent object, as another process would build: its mock starts at reply 2.
    assert make().resume(paused.recording, approve=True) == "refunded, as approved"
    verified(paused.recording)


# -- messages ---------------------------------------------------------------------------------


def test_the_input_is_what_the_chain_leaves_everywhere_after(tmp_path: Path) -> None:
    script = Script(answer="noted")

    def mask(text: str, phase: str) -> Any:
        if phase == "input" and "4111" in text:
            return allow(text.replace("4111 1111 1111 1111", "[card]"), "masked a card number")
        return allow()

    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .message_middleware(MessageMiddleware("mask", mask))
        .build()
    )
    assert agent.run("pay with 4111 1111 1111 1111 please") == "noted"
    assert script.requests[0].messages[0].content == "pay with [card] please"
    path = agent.last_recording
    assert b"4111" not in path.read_bytes()
    assert written(path, "user_message") == "pay with [card] please"
    with rec.open_recording(path) as r:
        s = why(r, "user_message")
    assert any(
        "mask changed the message: masked a card number" in d
        for n in s.nodes.values()
        for d in n.decisions
    )


def test_a_denied_input_raises_without_the_refused_text(tmp_path: Path) -> None:
    script = Script(answer="never")
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .message_middleware(
            MessageMiddleware("no-secrets", lambda t, p: deny("it names a password"))
        )
        .build()
    )
    with pytest.raises(MessageDeniedError) as info:
        agent.run("my password is hunter2-xyz")
    e = info.value
    assert (e.reason, e.phase, e.link) == ("it names a password", "input", "no-secrets")
    assert "hunter2" not in str(e)
    assert script.requests == []
    raw = agent.last_recording.read_bytes()
    assert b"hunter2" not in raw and b"user_message" not in raw
    assert records(agent.last_recording)[-1]["status"] == "error"


def test_a_denied_answer_raises_and_is_never_asked_again(tmp_path: Path) -> None:
    script = Script(answer="project NIGHTJAR ships friday")

    def codenames(text: str, phase: str) -> Any:
        return deny("names an internal codename") if "NIGHTJAR" in text else allow()

    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .message_middleware(MessageMiddleware("codenames", codenames))
        .output_schema({"type": "object"}, retries=3)
        .build()
    )
    with pytest.raises(MessageDeniedError) as info:
        agent.run("when?")
    assert info.value.phase == "output" and "NIGHTJAR" not in str(info.value)
    assert len(script.requests) == 1  # not re-asked, whatever the retries
    assert agent.last_result is not None and agent.last_result.answer == ""


def test_a_changed_answer_is_what_the_caller_and_the_record_get(tmp_path: Path) -> None:
    script = Script(answer="call 555-0100")
    tidy = MessageMiddleware(
        "tidy",
        lambda t, p: (
            allow(t.replace("555-0100", "[phone]"), "hid a phone") if p == "output" else allow()
        ),
    )
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .message_middleware(tidy)
        .build()
    )
    assert agent.run("number?") == "call [phone]"
    assert written(agent.last_recording, "answer") == "call [phone]"
    finalize = commits(agent.last_recording, "finalize")[0]
    assert "govern:output" in [k for k, _ in finalize["reads"]]


# -- act --------------------------------------------------------------------------------------


def _guard() -> ToolMiddleware:
    return ToolMiddleware(
        "guard", on_tool_call=lambda c: allow({"amount": 1}, "one") if c.args else allow()
    )


def _hide() -> ToolMiddleware:
    return ToolMiddleware("hide", on_tool_result=lambda r: allow("hidden", "hid it"))


def _scrub() -> MessageMiddleware:
    return MessageMiddleware("scrub", lambda t, p: allow(t.lower(), "lowered"))


def _build(folder: Path, how: Any) -> tuple[Any, Script]:
    script = Script(REFUND_250)
    builder = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(folder))
        .system("Refund carefully.")
        .tool(refund_tool([]))
    )
    return how(builder).build(), script


@pytest.mark.parametrize(
    ("with_act", "with_doors"),
    [
        (lambda b: b.act(input=[_scrub()]), lambda b: b.message_middleware(_scrub())),
        (lambda b: b.act(output=[_scrub()]), lambda b: b.message_middleware(_scrub())),
        (lambda b: b.act(before_tool=[_guard()]), lambda b: b.tool_middleware(_guard())),
        (lambda b: b.act(after_tool=[_hide()]), lambda b: b.tool_middleware(_hide())),
        (
            lambda b: b.act(window=sliding_window(keep_recent_turns=1)),
            lambda b: b.window(sliding_window(keep_recent_turns=1)),
        ),
    ],
    ids=["input", "output", "before_tool", "after_tool", "window"],
)
def test_act_is_the_doors_byte_for_byte(tmp_path: Path, with_act: Any, with_doors: Any) -> None:
    a, a_script = _build(tmp_path / "act", with_act)
    b, b_script = _build(tmp_path / "doors", with_doors)
    assert a.run("Refund ME") == b.run("Refund ME")
    sent = [[orjson.dumps(m.to_json()) for m in r.messages] for r in a_script.requests]
    assert sent == [[orjson.dumps(m.to_json()) for m in r.messages] for r in b_script.requests]
    assert [r.system for r in a_script.requests] == [r.system for r in b_script.requests]
    # The same records; where the writes (and so their seals) fall depends on timing.
    assert records(a.last_recording) == records(b.last_recording)


def test_act_once_known_keys_and_hooks_that_match_their_key(tmp_path: Path) -> None:
    builder = Agent.create(provider=mock(reply="x"), model="m")
    builder.act(before_tool=[_guard()])
    with pytest.raises(UsageError, match="already given"):
        builder.act(output=[_scrub()])
    with pytest.raises(UsageError, match="has no key 'befor_tool'"):
        Agent.create(provider=mock(reply="x"), model="m").act(befor_tool=[_guard()])
    with pytest.raises(UsageError, match="link 'hide' has no on_tool_call"):
        Agent.create(provider=mock(reply="x"), model="m").act(before_tool=[_hide()])
    with pytest.raises(UsageError, match="link 'guard' has no on_message"):
        Agent.create(provider=mock(reply="x"), model="m").act(input=[_guard()])
    # One link under both tool keys is attached once, and runs at both moments.
    both = ToolMiddleware("both", on_tool_call=lambda c: allow(), on_tool_result=lambda r: allow())
    agent = Agent.create(provider=mock(reply="x"), model="m").act(
        before_tool=[both], after_tool=[both]
    )
    assert len(agent.build().governance.tool_links) == 1


# -- the answer's contract -------------------------------------------------------------------


class Refund(BaseModel):
    amount: float
    reason: str


def contract_agent(
    folder: Path, *answers: str, retries: int = 0, schema: Any = Refund, **fallback: Any
) -> tuple[Any, list[Request]]:
    seen: list[Request] = []
    replies = iter(answers)

    def respond(request: Request) -> str:
        seen.append(request)
        return next(replies)

    builder = (
        Agent.create(provider=mock(respond=respond), model="m", record=fixed_recording(folder))
        .system("You decide refunds.")
        .output_schema(schema, retries=retries)
    )
    if fallback:
        builder = builder.output_fallback(**fallback)
    return builder.build(), seen


def test_a_typed_answer_from_a_pydantic_model(tmp_path: Path) -> None:
    agent, seen = contract_agent(tmp_path, '{"amount": 12.5, "reason": "late"}')
    value = agent.run_typed("refund?")
    assert value == Refund(amount=12.5, reason="late")
    system = seen[0].system
    assert system[-1].source.kind == "output_schema" and '"amount"' in system[-1].text
    path = agent.last_recording
    assert written(path, "output:1")["ok"] is True
    assert records(path)[-1]["contract"] == {"met": True, "checks": 1, "tier": "answer"}
    with rec.open_recording(path) as r:
        segments = r.segments(1)
    assert segments[-1].source.kind == "output_schema"
    verified(path)


def test_a_typed_answer_from_a_json_schema_in_a_fence(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    agent, _ = contract_agent(tmp_path, '```json\n{"ok": true}\n```', schema=schema)
    assert agent.run_typed("fine?") == {"ok": True}


def test_retries_send_the_errors_back_and_each_check_is_recorded(tmp_path: Path) -> None:
    agent, seen = contract_agent(
        tmp_path, '{"amount": "lots"}', '{"amount": 3, "reason": "ok"}', retries=1
    )
    assert agent.run_typed("refund?") == Refund(amount=3, reason="ok")
    correction = seen[1].messages[-1]
    assert correction.role == "user" and "$.amount" in correction.content
    assert "$.reason" in correction.content
    path = agent.last_recording
    first, second = written(path, "output:1"), written(path, "output:2")
    assert (first["ok"], first["retry"], second["ok"]) == (False, True, True)
    routes = [c["writes"][0]["value"] for c in commits(path, "route")]
    assert routes == ["retry", "answer"]
    with rec.open_recording(path) as r:
        s = why(r, "answer")
    said = [d for n in s.nodes.values() for d in n.decisions]
    assert "output check 2: the answer holds to the schema" in said
    verified(path)


def test_run_returns_the_raw_answer_and_says_the_contract_was_not_met(tmp_path: Path) -> None:
    agent, _ = contract_agent(tmp_path, "sure, 12 euros")
    assert agent.run("refund?") == "sure, 12 euros"
    output = agent.last_result.output
    assert output is not None and not output.met and output.errors[0]["path"] == "$"
    assert records(agent.last_recording)[-1]["contract"] == {"met": False, "checks": 1}
    again, _ = contract_agent(tmp_path / "2", "sure, 12 euros")
    with pytest.raises(OutputSchemaError) as info:
        again.run_typed("refund?")
    assert info.value.raw == "sure, 12 euros" and info.value.checks == 1


def test_fallback_then_canned_each_tier_recorded(tmp_path: Path) -> None:
    errors: list[Any] = []

    def fallback(error: OutputSchemaError, raw: str) -> Any:
        errors.append((error.errors[0]["path"], raw))
        return {"amount": 0, "reason": "manual review"}

    agent, _ = contract_agent(tmp_path, "no idea", fallback=fallback)
    assert agent.run_typed("refund?") == Refund(amount=0, reason="manual review")
    assert errors == [("$", "no idea")]
    check = written(agent.last_recording, "output:2")
    assert (check["tier"], check["ok"], check["value"]["reason"]) == (
        "fallback",
        True,
        "manual review",
    )

    broken, _ = contract_agent(
        tmp_path / "2",
        "no idea",
        fallback=lambda e, raw: {"amount": "?"},
        canned={"amount": 0, "reason": "unable"},
    )
    assert broken.run_typed("refund?") == Refund(amount=0, reason="unable")
    tiers = [written(broken.last_recording, f"output:{n}") for n in (1, 2, 3)]
    assert [(t["tier"], t["ok"]) for t in tiers] == [
        ("answer", False),
        ("fallback", False),
        ("canned", True),
    ]
    # run() stands under no net: the tiers are for typed callers.
    plain, _ = contract_agent(tmp_path / "3", "no idea", canned={"amount": 0, "reason": "x"})
    assert plain.run("refund?") == "no idea"
    assert written(plain.last_recording, "output:2") is None


def test_the_fallback_is_refused_at_build_without_a_schema_or_with_a_bad_canned() -> None:
    with pytest.raises(UsageError, match="needs output_schema"):
        Agent.create(provider=mock(reply="x"), model="m").output_fallback(canned={}).build()
    with pytest.raises(UsageError, match="canned=...\\) does not hold to the schema Refund"):
        (
            Agent.create(provider=mock(reply="x"), model="m")
            .output_fallback(canned={"amount": "no"})
            .output_schema(Refund)
            .build()
        )
    with pytest.raises(UsageError, match="already given"):
        Agent.create(provider=mock(reply="x"), model="m").output_schema(Refund).output_schema(
            Refund
        )
    with pytest.raises(UsageError, match="invalid JSON Schema"):
        Agent.create(provider=mock(reply="x"), model="m").output_schema({"type": 12})


def test_a_typed_run_that_pauses_raises_with_the_pause(tmp_path: Path) -> None:
    paid: list[Any] = []
    script = Script(REFUND_250, answer='{"amount": 250, "reason": "approved"}')
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .tool_middleware(approval_link())
        .output_schema(Refund)
        .build()
    )
    with pytest.raises(RunPausedError) as info:
        agent.run_typed("refund")
    paused = info.value.paused
    value = agent.resume_typed(paused, approve=True)
    assert value == Refund(amount=250, reason="approved") and paid == [{"amount": 250}]


# -- watching ---------------------------------------------------------------------------------


def test_observers_see_the_typed_records_as_the_file_holds_them(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    built: list[Any] = []
    later: list[Any] = []
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .watch(built.append)
        .build()
    )
    detach = agent.attach(later.append)
    agent.run("refund")
    lines = records(agent.last_recording)
    assert [r.t for r in built] == [r["t"] for r in lines]
    assert isinstance(built[0], rec.Header) and any(isinstance(r, rec.Reply) for r in built)
    with rec.open_recording(agent.last_recording) as r:  # as the reader gives them
        read = [x for _, x in r.records(blobs=True) if x.t != "seal"]
    assert [rec.dump(r, mode="json") for r in built] == [rec.dump(x, mode="json") for x in read]
    assert [type(r) for r in built] == [type(x) for x in read]
    assert len(later) == len(built)
    detach()
    agent.recording = fixed_recording(tmp_path, "second")
    agent.run("refund")
    assert len(later) == len(lines) and len(built) > len(lines)


def test_an_observer_that_raises_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    seen: list[str] = []

    def fragile(record: Any) -> None:
        seen.append(record.t)
        if record.t == "call":
            raise RuntimeError("dashboard down")

    agent = (
        Agent.create(provider=mock(reply="fine"), model="m", record=fixed_recording(tmp_path))
        .watch(fragile)
        .build()
    )
    assert agent.run("hi") == "fine"
    assert seen[-1] == "call"  # it saw no more of the run
    failure = next(r for r in records(agent.last_recording) if r["t"] == "observer_error")
    assert failure["observer"].endswith("fragile") and failure["record"] == "call"
    assert failure["error"] == {"kind": "RuntimeError", "message": "dashboard down"}
    verified(agent.last_recording)


def test_an_agent_that_does_not_record_can_still_be_watched() -> None:
    seen: list[Any] = []
    agent = Agent.create(provider=mock(reply="fine"), model="m", record=False).build()
    agent.attach(seen.append)
    assert agent.run("hi") == "fine"
    assert seen[0].t == "header" and seen[-1].t == "run_end"
    assert agent.last_recording is None


def test_a_paused_runs_tool_resources_are_not_torn_down(tmp_path: Path) -> None:
    from tests.afcore.test_mcp import stdio_tools

    pid_call = [{"id": f"p{i}", "name": "pid", "args": {}} for i in (1, 2)]
    script = Script(*pid_call, answer="same server")
    second = ToolMiddleware("second", on_tool_call=lambda c: ask("again?") if c.k == 2 else allow())
    with stdio_tools("sdk") as tools:
        agent = (
            Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
            .tools(tools)
            .tool_middleware(second)
            .build()
        )
        paused = agent.run("which process?")
        assert isinstance(paused, Paused) and not tools.closed
        assert agent.resume(paused, approve=True) == "same server"
        results = [
            m.content for m in script.requests[-1].messages if getattr(m, "role", "") == "tool"
        ]
    assert len(results) == 2 and results[0] == results[1]  # one server, before and after
    verified(paused.recording)


def test_a_sessions_turn_cannot_wait_so_its_question_is_a_denial(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    agent = (
        Agent.create(
            provider=mock(respond=script),
            model="m",
            record=tmp_path / "recs",
            sessions=tmp_path / "sessions.db",
        )
        .tool(refund_tool(paid))
        .tool_middleware(approval_link())
        .build()
    )
    sent = agent.session("ticket-1").send("refund")
    assert sent.status == "answer" and paid == []
    assert "a session's turn cannot wait for one" in str(sent.answer)


def test_verify_holds_a_continued_file_to_one_run(tmp_path: Path) -> None:
    script, paid = Script(REFUND_250), []
    paused = agent_with(tmp_path, script, paid, approval_link()).run("refund")
    assert isinstance(paused, Paused)
    path = paused.recording
    good = path.read_bytes()
    # Anything but a resume after a paused run_end is a problem; so is a stray resume.
    path.write_bytes(good + b'{"t":"tool_progress","rsid":"x#9","message":"late"}\n')
    with rec.open_recording(path) as r:
        assert any("follows run_end" in p.message for p in rec.verify(r).problems)
    resume = b'{"t":"resume","verb":"approve","by":"x","at":"t","af_version":"0","python":"3"}\n'
    lines = good.splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]) + resume + b"".join(lines[3:]))
    with rec.open_recording(path) as r:
        assert any("follows no paused run_end" in p.message for p in rec.verify(r).problems)
    # A checkpoint this af cannot read is refused in a sentence, the file left as it was.
    broken = good.replace(b'"state":"asked"', b'"state":"lost"')
    path.write_bytes(broken)
    with pytest.raises(NotPausedError, match="not one this af reads"):
        agent_with(tmp_path / "b", Script(), [], approval_link()).resume(path, approve=True)
    assert path.read_bytes() == broken


def test_a_run_that_continues_a_conversation_pauses_and_goes_on(tmp_path: Path) -> None:
    from afcore.messages import AssistantMessage, TextBlock, UserMessage

    script, paid = Script(REFUND_250), []
    agent = (
        Agent.create(provider=mock(respond=script), model="m", record=fixed_recording(tmp_path))
        .tool(refund_tool(paid))
        .tool_middleware(approval_link())
        .window(sliding_window(keep_recent_turns=8))
        .build()
    )
    before = [UserMessage("hello"), AssistantMessage((TextBlock("hi, how can I help?"),))]
    paused = agent.run("refund", history=before)
    assert isinstance(paused, Paused)
    assert agent.resume(paused, approve=True) == "read: refunded 250"
    sent = [getattr(m, "content", None) for m in script.requests[-1].messages]
    assert sent[0] == "hello" and sent[-1] == "refunded 250"
    assert [m.to_json() for m in agent.last_result.transcript][:1] == [before[0].to_json()]
    verified(paused.recording)
