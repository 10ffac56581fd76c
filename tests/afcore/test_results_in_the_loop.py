"""Honest tool results inside the loop: each result's status, the limits that travel with
the answer, the result ceiling and the agent's cap, the repeated-call nudge, progress,
the result envelope and ask_or_assume, each through a scripted model and the recording
it writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from afcore import Agent, define_tool, mock, recording
from afcore.messages import Request
from afcore.tools import (
    ABSENCE_NOTE,
    COVERAGE_BLOCK_HEADING,
    AnswerCoverage,
    ResultCeiling,
    absent,
    coverage,
    described_result,
)

OPEN: dict[str, Any] = {"type": "object", "properties": {}}


def lines(path: Path | None) -> list[dict[str, Any]]:
    """The file's records, seals left out."""
    assert path is not None
    records = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    return [r for r in records if r["t"] != "seal"]


def outcomes(path: Path | None) -> list[dict[str, Any]]:
    """The ``tool`` of every tool commit, in order."""
    return [r["tool"] for r in lines(path) if r["t"] == "commit" and "tool" in r]


def writes(path: Path | None, prefix: str) -> dict[str, Any]:
    """Every write whose key starts with ``prefix``, by key, its value resolved."""
    records = lines(path)
    blobs = {r["id"]: r["value"] for r in records if r["t"] == "blob"}
    out = {}
    for r in records:
        for w in r.get("writes", ()):
            if w["key"].startswith(prefix):
                out[w["key"]] = w["value"] if "value" in w else blobs[w["ref"]]
    return out


def verified(path: Path | None) -> None:
    assert path is not None
    report = recording.verify(recording.open_recording(path))
    assert report.ok, report


def script(*batches: list[tuple[str, dict[str, Any]]], answer: str = "done") -> Any:
    """A scripted model: each batch is one reply's tool calls, then the answer."""
    replies: list[Any] = [
        {
            "tool_calls": [
                {"id": f"c{i}{j}", "name": name, "args": args}
                for j, (name, args) in enumerate(batch)
            ]
        }
        for i, batch in enumerate(batches)
    ]
    return mock(replies=[*replies, answer])


def tool(name: str, fn: Any, schema: dict[str, Any] | None = None, **kw: Any) -> Any:
    return define_tool(name, f"The {name} tool.", schema or OPEN, fn, **kw)


# -- status ----------------------------------------------------------------------------------


def test_every_result_is_recorded_with_its_status(tmp_path: Path) -> None:
    def boom(args: dict[str, Any], ctx: Any) -> Any:
        raise RuntimeError("the backend is down")

    def envelope(status: str) -> Any:
        return lambda args, ctx: {"content": f"{status} said", "effects": [], "status": status}

    strict = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    agent = (
        Agent.create(
            provider=script(
                [
                    ("plain", {}),
                    ("nothing", {}),
                    ("boom", {}),
                    ("strict", {"n": "three"}),
                    ("nosuch", {}),
                    ("denies", {}),
                    ("waits", {}),
                    ("some", {}),
                ]
            ),
            model="m",
            record=tmp_path,
        )
        .tool(tool("plain", lambda a, c: "fine"))
        .tool(tool("nothing", lambda a, c: absent(what="rows", checked=["the live table"])))
        .tool(tool("boom", boom))
        .tool(tool("strict", lambda a, c: "ran", strict))
        .tool(tool("denies", envelope("denied")))
        .tool(tool("waits", envelope("pending")))
        .tool(tool("some", envelope("partial")))
        .build()
    )
    assert agent.run("go") == "done"
    got = [(o["name"], o["status"], o["result_status"]) for o in outcomes(agent.last_recording)]
    assert got == [
        ("plain", "ok", "success"),
        ("nothing", "ok", "absent"),
        ("boom", "error", "failure"),
        ("strict", "rejected", "invalid"),
        ("nosuch", "unknown_tool", "invalid"),
        ("denies", "ok", "denied"),
        ("waits", "ok", "pending"),
        ("some", "ok", "partial"),
    ]
    # What the model read of an envelope is its content alone.
    assert agent.last_result is not None
    contents = [m.content for m in agent.last_result.transcript if m.role == "tool"]
    assert contents[5:] == ["denied said", "pending said", "partial said"]
    verified(agent.last_recording)


def test_a_call_the_middleware_denied_is_recorded_denied(tmp_path: Path) -> None:
    from afcore import ToolMiddleware, deny

    agent = (
        Agent.create(provider=script([("refund", {})]), model="m", record=tmp_path)
        .tool(tool("refund", lambda a, c: "refunded"))
        .tool_middleware(ToolMiddleware("no", on_tool_call=lambda c: deny("needs a person")))
        .build()
    )
    agent.run("refund it")
    [outcome] = outcomes(agent.last_recording)
    assert (outcome["status"], outcome["result_status"]) == ("denied", "denied")


# -- the limits travel with the answer -------------------------------------------------------

PERIOD = {
    "queried": {"from": "2026-09-26T09:00:00Z", "to": "2026-09-26T10:00:00Z"},
    "held": "unknown",
}


def health(args: dict[str, Any], ctx: Any) -> Any:
    return coverage(
        "healthy",
        checked=["SRDF pair state on all 4 arrays (live query)"],
        not_checked=[{"what": "NDM migration sessions", "why": "the API timed out"}],
        cannot_cover=[{"what": "host-side multipathing", "why": "no collector on the hosts"}],
    )


def failures(args: dict[str, Any], ctx: Any) -> Any:
    return absent(
        what=f"failed backups on {args.get('host', 'h')}",
        checked=["every backup job in the nightly export"],
        cannot_cover=[{"what": "host-side multipathing", "why": "no collector on the hosts"}],
        period=PERIOD,
    )


def limited_agent(tmp_path: Path, *, travel: bool = True) -> Any:
    builder = (
        Agent.create(
            provider=script([("health", {}), ("failures", {"host": "h1"})], answer="All fine."),
            model="m",
            record=tmp_path,
        )
        .tool(tool("health", health))
        .tool(tool("failures", failures))
    )
    return (builder.limits_travel_with_the_answer() if travel else builder).build()


def test_limits_travel_after_the_answer_said_once(tmp_path: Path) -> None:
    agent = limited_agent(tmp_path)
    answer = agent.run("is everything healthy?")
    head, block = answer.split("\n\n---\n\n")
    assert head == "All fine."
    assert block == "\n".join(
        [
            COVERAGE_BLOCK_HEADING,
            "",
            "Checked:",
            "- SRDF pair state on all 4 arrays (live query)",
            "- every backup job in the nightly export",
            "",
            "Not checked:",
            "- NDM migration sessions — the API timed out",
            "",
            "Cannot cover:",
            "- host-side multipathing — no collector on the hosts",
            "",
            "Period:",
            "- failures queried 2026-09-26T09:00:00Z to 2026-09-26T10:00:00Z; what the store "
            "holds is unknown",
        ]
    )
    # The recording keeps each declaration on its call, and the answer reads them.
    declared = writes(agent.last_recording, "limits:")
    assert set(declared) == {"limits:health#1", "limits:failures#1"}
    assert declared["limits:failures#1"]["declared"][0]["period"] == PERIOD
    records = lines(agent.last_recording)
    [finalize] = [r for r in records if r.get("rsid", "").startswith("finalize#")]
    assert {k for k, _ in finalize["reads"]} >= {"limits:health#1", "limits:failures#1"}
    assert writes(agent.last_recording, "answer")["answer"] == answer
    verified(agent.last_recording)


def test_without_the_option_the_answer_is_as_sent_and_the_record_keeps_the_limits(
    tmp_path: Path,
) -> None:
    agent = limited_agent(tmp_path, travel=False)
    assert agent.run("healthy?") == "All fine."
    assert set(writes(agent.last_recording, "limits:")) == {"limits:health#1", "limits:failures#1"}
    coverage_ = agent.last_result.answer_coverage
    assert isinstance(coverage_, AnswerCoverage)
    assert [x["what"] for x in coverage_.cannot_cover] == ["host-side multipathing"]


class Verdict(BaseModel):
    healthy: bool


def test_a_typed_answer_stays_as_sent_and_its_limits_come_back_as_data(tmp_path: Path) -> None:
    agent = (
        Agent.create(
            provider=script([("health", {}), ("failures", {})], answer='{"healthy": true}'),
            model="m",
            record=tmp_path,
        )
        .tool(tool("health", health))
        .tool(tool("failures", failures))
        .output_schema(Verdict)
        .limits_travel_with_the_answer()
        .build()
    )
    assert agent.run_typed("healthy?") == Verdict(healthy=True)
    result = agent.last_result
    assert result.answer == '{"healthy": true}'
    cov = result.answer_coverage
    assert cov is not None
    assert cov.to_json() == {
        "checked": [
            {"what": "SRDF pair state on all 4 arrays (live query)"},
            {"what": "every backup job in the nightly export"},
        ],
        "not_checked": [{"what": "NDM migration sessions", "why": "the API timed out"}],
        "cannot_cover": [{"what": "host-side multipathing", "why": "no collector on the hosts"}],
        "periods": [{"tool": "failures", "call_id": "c01", "period": PERIOD}],
    }


def test_a_described_results_gaps_travel_and_its_provenance_does_not(tmp_path: Path) -> None:
    def rows(args: dict[str, Any], ctx: Any) -> Any:
        return described_result(
            facts=[{"vm": "vm-01", "ok": True}],
            provenance={"measured_at": "2026-08-19T10:12:00Z", "source": "the export"},
            coverage={"checked": ["the export"], "not_checked": ["the archive"]},
        )

    agent = (
        Agent.create(provider=script([("rows", {})], answer="One run."), model="m", record=tmp_path)
        .tool(tool("rows", rows))
        .limits_travel_with_the_answer()
        .build()
    )
    answer = agent.run("runs?")
    assert "Not checked:\n- the archive" in answer
    assert "the export" in answer and "2026-08-19T10:12:00Z" not in answer


# -- the ceiling, and the agent's cap ---------------------------------------------------------

BIG = "SECRETROW," * 1000


def test_over_its_ceiling_the_model_reads_a_refusal_and_no_data_enters_any_channel(
    tmp_path: Path,
) -> None:
    schema = {"type": "object", "properties": {"limit": {"type": "integer"}}}
    export = tool(
        "export_orders",
        lambda a, c: BIG[: a["limit"]] if "limit" in a else BIG,
        schema,
        result_ceiling=ResultCeiling(max_chars=2000, narrow_by=["limit"]),
    )
    agent = (
        Agent.create(
            provider=script([("export_orders", {})], [("export_orders", {"limit": 20})]),
            model="m",
            record=tmp_path,
        )
        .tool(export)
        .build()
    )
    agent.run("export")
    first, second = outcomes(agent.last_recording)
    assert first["result_status"] == "invalid"
    assert first["ceiling"] == {"size": 10000, "max_chars": 2000, "narrow_by": ["limit"]}
    assert second["result_status"] == "success" and "ceiling" not in second
    tool_messages = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert tool_messages[0].content == (
        "Result too large: export_orders returned 10000 chars, over its declared 2000-char "
        "ceiling. Narrow the request and call again — e.g. pass 'limit'. No data was returned."
    )
    assert tool_messages[0].is_error
    assert tool_messages[1].content == BIG[:20]
    # Refused means refused everywhere: the recording never holds the refused data.
    assert b"SECRETROW,SECRETROW,SECRETROW" not in agent.last_recording.read_bytes()


def test_the_agents_cap_keeps_a_verbatim_head_and_says_it_is_not_all(tmp_path: Path) -> None:
    text = "".join(f"{i:05d}\n" for i in range(1000))
    agent = (
        Agent.create(
            provider=script([("dump", {})]),
            model="m",
            record=tmp_path,
            max_tool_result_chars=600,
        )
        .tool(tool("dump", lambda a, c: text))
        .build()
    )
    agent.run("dump")
    [outcome] = outcomes(agent.last_recording)
    assert outcome["result_status"] == "partial"
    kept = outcome["truncated"]["kept"]
    assert outcome["truncated"]["size"] == 6000
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert len(message.content) <= 600
    assert message.content.startswith(text[:kept])
    assert "This is NOT the whole result" in message.content[kept:]
    header = lines(agent.last_recording)[0]
    assert header["config"]["max_tool_result_chars"] == 600


def test_a_cap_too_small_to_keep_is_refused_at_create() -> None:
    from afcore import UsageError

    with pytest.raises(UsageError, match="at least 512"):
        Agent.create(provider=mock(replies=["x"]), model="m", max_tool_result_chars=10)


# -- the repeated-call nudge ------------------------------------------------------------------


def test_the_same_call_returning_the_same_result_gets_one_note(tmp_path: Path) -> None:
    search = tool("search", lambda a, c: "3 rows", {"type": "object"})
    same = [("search", {"q": "x", "filter": "ignored"})]
    agent = (
        Agent.create(
            provider=script(same, same, same, [("search", {"q": "y"})]),
            model="m",
            record=tmp_path,
        )
        .tool(search)
        .build()
    )
    agent.run("find")
    contents = [m.content for m in agent.last_result.transcript if m.role == "tool"]
    assert contents[0] == "3 rows"
    assert contents[1].startswith("3 rows\n\nidentical call: 'search' has now returned exactly")
    assert contents[2] == contents[3] == "3 rows"  # once per distinct call, never again
    repeats = [o.get("repeat") for o in outcomes(agent.last_recording)]
    assert repeats[0] is None and repeats[2] is None and repeats[3] is None
    assert repeats[1]["occurrences"] == 2
    assert set(repeats[1]) == {"occurrences", "args_fingerprint", "result_fingerprint"}
    assert b"ignored" not in json.dumps(repeats[1]).encode()  # fingerprints, never values


def test_values_json_cannot_carry_are_fingerprinted_not_fatal(tmp_path: Path) -> None:
    # A big integer and a lone surrogate in the arguments and in a text result.
    odd = [("odd", {"n": 2**70, "s": "q\udc80"})]
    agent = (
        Agent.create(provider=script(odd, odd), model="m", record=tmp_path)
        .tool(tool("odd", lambda a, c: "a\ud800b", {"type": "object"}))
        .build()
    )
    assert agent.run("go") == "done"
    contents = [m.content for m in agent.last_result.transcript if m.role == "tool"]
    assert contents[0] == r"a\ud800b"  # as JSON text writes it
    assert contents[1].startswith(r"a\ud800b" + "\n\nidentical call: 'odd' has now returned")
    assert outcomes(agent.last_recording)[1]["repeat"]["occurrences"] == 2
    verified(agent.last_recording)


def test_the_nudge_can_be_turned_off(tmp_path: Path) -> None:
    same = [("search", {"q": "x"})]
    agent = (
        Agent.create(
            provider=script(same, same), model="m", record=tmp_path, repeated_call_nudge=False
        )
        .tool(tool("search", lambda a, c: "3 rows", {"type": "object"}))
        .build()
    )
    agent.run("find")
    contents = [m.content for m in agent.last_result.transcript if m.role == "tool"]
    assert contents == ["3 rows", "3 rows"]
    assert lines(agent.last_recording)[0]["config"]["repeated_call_nudge"] is False


# -- progress ---------------------------------------------------------------------------------


def test_progress_is_recorded_between_the_call_and_its_result_never_read_by_the_model(
    tmp_path: Path,
) -> None:
    long = "walking hop " + "x" * 200

    def walk(args: dict[str, Any], ctx: Any) -> str:
        ctx.progress({"done": 1, "total": 3, "hop": "a"})
        ctx.progress({"done": 2, "total": 3, "message": "  hop 2 of 3  "})
        ctx.progress({"message": long})
        ctx.progress(object())  # not plain data: kept as its text, and never fatal
        return "walked"

    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return {"tool_calls": [{"id": "c1", "name": "walk", "args": {}}]}
        return "done"

    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(tool("walk", walk))
        .build()
    )
    agent.run("walk")
    records = lines(agent.last_recording)
    # After the reply that asked for the call (written before the tool runs), before the
    # tool's commit (its only record).
    kinds = [
        r["t"] if r["t"] != "commit" else "tool" if "tool" in r else None
        for r in records
        if r["t"] in ("reply", "tool_progress") or (r["t"] == "commit" and "tool" in r)
    ]
    assert kinds == ["reply", *["tool_progress"] * 4, "tool", "reply"]
    reports = [r for r in records if r["t"] == "tool_progress"]
    assert [r["message"] for r in reports] == [
        "walk reported progress (once)",
        "hop 2 of 3",
        long[:120] + f"… (+{len(long) - 120} more)",
        "walk reported progress (4 times)",
    ]
    assert reports[0]["payload"] == {"done": 1, "total": 3, "hop": "a"}
    assert reports[2]["payload"] == {"message": long}
    assert reports[3]["payload"].startswith("<object object")
    sent = json.dumps([m.to_json() for m in seen[1].messages])
    assert "hop 2 of 3" not in sent and "walking hop" not in sent
    verified(agent.last_recording)


# -- the envelope -----------------------------------------------------------------------------


def refund(args: dict[str, Any], ctx: Any) -> Any:
    return {
        "content": "refund refused: outside the 30-day window (policy P-12)",
        "status": "denied",
        "effects": [
            {
                "kind": "require-instruction",
                "instruction_id": "denial-playbook",
                "lease": "next-call",
            }
        ],
    }


def test_an_envelope_pushes_a_registered_instruction_into_the_next_call_only(
    tmp_path: Path,
) -> None:
    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return {"tool_calls": [{"id": "c1", "name": "issue_refund", "args": {}}]}
        if len(seen) == 2:
            return {"tool_calls": [{"id": "c2", "name": "noop", "args": {}}]}
        return "Store credit instead."

    playbook = "A refund was denied by policy: name the policy and offer store credit."
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(tool("issue_refund", refund))
        .tool(tool("noop", lambda a, c: "ok"))
        .instruction(playbook, id="denial-playbook", when=lambda s: False)
        .build()
    )
    agent.run("refund order 7")
    texts = [[m.to_json() for m in r.messages] for r in seen]
    assert playbook not in json.dumps(texts[0])
    assert playbook in json.dumps(texts[1])
    assert playbook not in json.dumps(texts[2])  # the lease was the next call only
    first = outcomes(agent.last_recording)[0]
    assert first["result_status"] == "denied"
    assert first["effects"] == [
        {
            "kind": "require-instruction",
            "instruction_id": "denial-playbook",
            "lease": "next-call",
            "outcome": "accepted",
        }
    ]
    # The pushed message carries the push as the reason it fired.
    sources = [
        w.get("source")
        for r in lines(agent.last_recording)
        for w in r.get("writes", ())
        if w.get("source", {}).get("id") == "denial-playbook"
    ]
    assert sources and sources[0]["trigger"] == "tool_effect"
    assert "required by issue_refund (call c1) at iteration 1" in sources[0]["reason"]
    verified(agent.last_recording)


def test_an_unknown_instruction_is_refused_in_a_sentence_the_model_reads(tmp_path: Path) -> None:
    agent = (
        Agent.create(provider=script([("issue_refund", {})]), model="m", record=tmp_path)
        .tool(tool("issue_refund", refund))
        .build()
    )
    agent.run("refund")
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert message.content.startswith("refund refused: outside the 30-day window")
    assert "tool effect refused: no instruction 'denial-playbook' is registered" in message.content
    [outcome] = outcomes(agent.last_recording)
    assert outcome["effects"][0]["outcome"] == "refused"


def test_a_near_miss_of_the_envelope_stays_plain_data(tmp_path: Path) -> None:
    value = {"content": "x", "status": "denied"}
    agent = (
        Agent.create(provider=script([("t", {})]), model="m", record=tmp_path)
        .tool(tool("t", lambda a, c: value))
        .build()
    )
    agent.run("go")
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert json.loads(message.content) == value
    assert outcomes(agent.last_recording)[0]["result_status"] == "success"


# -- ask_or_assume ----------------------------------------------------------------------------

LOGS = {
    "type": "object",
    "required": ["service", "window"],
    "properties": {
        "service": {"type": "string", "description": "Service name."},
        "window": {
            "type": "string",
            "enum": ["1h", "2h", "24h", "7d"],
            "description": "Look-back.",
        },
    },
}


def test_a_left_out_argument_is_filled_by_the_rule_noted_and_listed(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []

    def search_logs(args: dict[str, Any], ctx: Any) -> Any:
        ran.append(dict(args))
        return {"service": args["service"], "window": args["window"], "errors": 0}

    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        if len(seen) == 1:
            return {
                "tool_calls": [{"id": "c1", "name": "search_logs", "args": {"service": "checkout"}}]
            }
        return "No errors on checkout."

    logs = define_tool(
        "search_logs",
        "Error lines for one service.",
        LOGS,
        search_logs,
        ask_or_assume={"window": {"assume": "2h"}},
    )
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(logs)
        .limits_travel_with_the_answer()
        .build()
    )
    answer = agent.run("any errors on checkout?")
    assert ran == [{"service": "checkout", "window": "2h"}]  # the library filled it
    # The model was served the schema with the ruled argument optional, and told the rule.
    served = seen[0].tools[0].input_schema
    assert served["required"] == ["service"]
    assert (
        'If left out, the tool\'s rule fills "2h"' in served["properties"]["window"]["description"]
    )
    assert logs.input_schema == LOGS  # the author's schema is never edited
    result = seen[1].messages[-1].content
    assert result.endswith(
        "window was not in the search_logs call this result answers; the call ran with "
        "\"2h\", the value the tool's rule assumes — recorded as assumed, not as the person's."
    )
    assert answer.endswith(
        'Assumed (a tool\'s rule, not your words):\n- search_logs: window = "2h"'
    )
    assert writes(agent.last_recording, "limits:")["limits:search_logs#1"] == {
        "assumed": [{"tool": "search_logs", "argument": "window", "value": "2h"}]
    }
    assert agent.last_result.answer_coverage.assumed == (
        {"tool": "search_logs", "argument": "window", "value": "2h"},
    )


def test_a_model_that_sends_the_default_itself_is_filed_as_assumed_without_a_note(
    tmp_path: Path,
) -> None:
    logs = define_tool(
        "search_logs",
        "Error lines.",
        LOGS,
        lambda a, c: "0 errors",
        ask_or_assume={"window": {"assume": "2h"}},
    )
    agent = (
        Agent.create(
            provider=script([("search_logs", {"service": "s", "window": "2h"})]),
            model="m",
            record=tmp_path,
        )
        .tool(logs)
        .build()
    )
    agent.run("errors?")
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert message.content == "0 errors"
    assert writes(agent.last_recording, "limits:")["limits:search_logs#1"] == {
        "assumed": [{"tool": "search_logs", "argument": "window", "value": "2h", "sent": True}]
    }


def test_an_absence_reads_as_an_answer_and_its_note_reaches_the_model(tmp_path: Path) -> None:
    agent = (
        Agent.create(provider=script([("failures", {"host": "h"})]), model="m", record=tmp_path)
        .tool(tool("failures", failures))
        .build()
    )
    agent.run("failures?")
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert not message.is_error
    assert json.loads(message.content)["note"] == ABSENCE_NOTE


def test_a_paused_run_continued_keeps_the_limits_declared_before_the_pause(
    tmp_path: Path,
) -> None:
    from afcore import Paused, ToolMiddleware, allow, ask

    def gate(call: Any) -> Any:
        return ask("Refund?") if call.name == "refund" else allow()

    agent = (
        Agent.create(
            provider=script([("failures", {"host": "h1"})], [("refund", {})], answer="Refunded."),
            model="m",
            record=tmp_path,
        )
        .tool(tool("failures", failures))
        .tool(tool("refund", lambda a, c: "refunded"))
        .tool_middleware(ToolMiddleware("gate", on_tool_call=gate))
        .limits_travel_with_the_answer()
        .build()
    )
    paused = agent.run("refund if nothing failed")
    assert isinstance(paused, Paused)
    answer = agent.resume(paused, approve=True, by="jo")
    assert isinstance(answer, str)
    assert answer.startswith("Refunded.\n\n---\n\n" + COVERAGE_BLOCK_HEADING)
    assert "- every backup job in the nightly export" in answer
    assert "- failures queried 2026-09-26T09:00:00Z" in answer
    [finalize] = [r for r in lines(paused.recording) if r.get("rsid", "").startswith("finalize#")]
    assert "limits:failures#1" in {k for k, _ in finalize["reads"]}
    verified(paused.recording)


def test_a_hand_built_shape_is_read_never_repaired_and_its_author_warned(tmp_path: Path) -> None:
    hand_built = {
        "af_absent": True,
        "looked_for": "rows",
        "checked": [{"what": "the table", "short": "two\nlines"}],
    }
    agent = (
        Agent.create(provider=script([("t", {})]), model="m", record=tmp_path)
        .tool(tool("t", lambda a, c: hand_built))
        .build()
    )
    with pytest.warns(UserWarning, match=r"tool 't': `checked\[0\]\.short` was dropped"):
        agent.run("go")
    [message] = [m for m in agent.last_result.transcript if m.role == "tool"]
    assert json.loads(message.content)["checked"] == [{"what": "the table"}]
    assert outcomes(agent.last_recording)[0]["result_status"] == "absent"
