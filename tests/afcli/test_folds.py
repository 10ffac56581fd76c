"""Folds of the live window through the command line: `af run --demo`, the fold lines of
`af show` with their refusals in words, a summarizer's call shown as the window's, the seam
of `--call`, `--json`, and run's progress; on the demos, their samples and agents built for
each refusal."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, WindowStrategy, define_tool, mock, summarize_oldest, token_budget
from afcore import recording as rec
from afcore.demos import compaction
from tests.afcli.conftest import Invoke, Ran

ROOT = Path(__file__).resolve().parent.parent.parent
COMPACTION = ROOT / "recordings" / "sample-compaction.jsonl"
SLIDING = ROOT / "recordings" / "sample-sliding.jsonl"
WIDE = {"COLUMNS": "200"}


def lines(ran: Ran) -> list[str]:
    return [line.rstrip() for line in ran.out.splitlines()]


def folds_of(path: Path) -> list[dict[str, Any]]:
    """The fold values a recording's window stages wrote, in order."""
    out = []
    with rec.open_recording(path) as r:
        for _, record in r.records():
            if isinstance(record, rec.Commit) and record.stage == "window":
                out.append(r.value(record.writes[0]))
    return out


# -- af run --demo -----------------------------------------------------------------------


@pytest.fixture
def compaction_run(invoke: Invoke, tmp_path: Path) -> dict[str, Any]:
    """One run of the compaction demo, recorded in tmp_path/runs; its `af run --json`."""
    ran = invoke("run", "--demo", "compaction", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    outcome: dict[str, Any] = ran.json()
    return outcome


def test_run_demo_compaction_runs_the_research_demo(compaction_run: dict[str, Any]) -> None:
    assert compaction_run["status"] == "answer"
    assert compaction_run["answer"].startswith("I recommend Kestrel Cells.")
    # Twelve iterations of the agent, and one summarizer call for each of the two folds.
    assert (compaction_run["iterations"], compaction_run["calls"]) == (12, 14)
    # Counted (authoritative) usage, which is what lets a token threshold act.
    assert compaction_run["usage"].get("estimated") is not True
    with rec.open_recording(compaction_run["recording"]) as r:
        assert r.header.agent.name == "research-demo"
        assert r.header.agent.source == "afcore.demos.compaction:build_agent"
        assert r.header.config.window == rec.WindowInfo(
            strategy="summarize_oldest",
            keep_recent_turns=0,
            threshold_tokens=compaction.THRESHOLD_TOKENS,
            summarizer="mock",
            model="mock-summarizer",
        )
        assert rec.verify(r).ok


def test_af_run_alone_and_run_demo_trip_run_the_same_trip_demo(
    invoke: Invoke, tmp_path: Path
) -> None:
    plain = invoke("run", "--json", "--out", tmp_path / "a")
    named = invoke("run", "--demo", "trip", "--json", "--out", tmp_path / "b")
    assert plain.code == named.code == 0, (plain.err, named.err)
    assert plain.json()["answer"] == named.json()["answer"]
    for ran in (plain, named):
        with rec.open_recording(ran.json()["recording"]) as r:
            assert r.header.agent.source == "afcore.demos.trip:build_agent"
            assert r.header.config.window is None


def test_an_unknown_demo_is_a_usage_error_naming_the_demos(invoke: Invoke) -> None:
    ran = invoke("run", "--demo", "nope")
    assert ran.code == 2
    assert ran.out == ""
    (line,) = ran.err.strip().splitlines()
    assert line == (
        "error: there is no demo named 'nope'; the demos are trip, compaction, sliding and router"
    )


def test_run_demo_takes_a_message(invoke: Invoke, tmp_path: Path) -> None:
    # Only audits are asked about: one search, three reports, no fold needed to answer.
    ran = invoke(
        "run", "--demo", "sliding", "Which supplier passed its audit?", "--json", "--out", tmp_path
    )
    assert ran.code == 0, ran.err
    with rec.open_recording(ran.json()["recording"]) as r:
        assert r.header.agent.source == "afcore.demos.compaction:build_sliding_agent"
        assert r.header.config.window == rec.WindowInfo(
            strategy="sliding_window", keep_recent_turns=2
        )
    # `af run demo --demo NAME MESSAGE` reads the same.
    ran = invoke("run", "demo", "--demo", "compaction", "Audits?", "--json", "--out", tmp_path)
    assert ran.code == 0, ran.err
    # An agent and a message are one too many for a built-in demo.
    ran = invoke("run", "bot.py", "hi", "--demo", "compaction")
    assert ran.code == 2 and "give it one message" in ran.err


def test_the_demos_fold_with_every_refusal_and_carry_on(tmp_path: Path) -> None:
    agent = compaction.build_agent(record=tmp_path)
    answer = agent.run(compaction.DEFAULT_MESSAGE)
    assert agent.last_recording is not None
    folds = folds_of(agent.last_recording)
    assert len(folds) >= 2
    for fold in folds:
        assert fold["strategy"] == "summarize_oldest" and fold["count"] > 0
        assert fold["measured"] > fold["threshold"] == compaction.THRESHOLD_TOKENS
        # keep_recent_turns=0: the newest turn is considered, and its tool calls have not
        # run yet (the strategy visits between a reply and its tools).
        assert [r["reason"] for r in fold["refusals"]] == [
            "current_request",
            "last_tool_result",
            "unresolved_tool_call",
        ]
        assert fold["summary"]["by"] == "mock:mock-summarizer"
    # The second fold folds the first one's summary with what came after it.
    assert folds[1]["folded"][0] == "window#" + folds[1]["folded"][0].partition("#")[2]
    # Whatever left the window, the answer has every figure.
    assert "123.92 EUR with Kestrel Cells" in answer and "(RPT-102)" in answer
    # The sliding variant comes to the same answer, from its notebook.
    sliding = compaction.build_sliding_agent(record=tmp_path)
    assert sliding.run(compaction.DEFAULT_MESSAGE) == answer
    assert sliding.last_recording is not None
    dropped = folds_of(sliding.last_recording)
    assert len(dropped) >= 5 and {f["strategy"] for f in dropped} == {"sliding_window"}


# -- af show: the overview -----------------------------------------------------------------


def test_show_marks_each_fold_between_the_calls_it_separates(invoke: Invoke) -> None:
    ran = invoke("show", COMPACTION, env=WIDE)
    assert ran.code == 0, ran.err
    out = lines(ran)
    fold = out.index(
        "fold 1 at iteration 5: 6 messages (2–7) -> 1 summary "
        "by summarize_oldest; 1,297 tokens measured, threshold 1,200"
    )
    assert out[fold + 1 : fold + 4] == [
        "  kept: message 1: the current request",
        "  kept: messages 8–9: the last tool result",
        "  kept: message 10: an unresolved tool call",
    ]
    heads = [i for i, line in enumerate(out) if line.startswith("call ")]
    before = max(i for i in heads if i < fold)
    after = min(i for i in heads if i > fold)
    # The summarizer's call is the window's: named for its fold, not as an iteration's.
    assert out[before].startswith("call 6 · summarizer for fold 1 · iteration 5 ")
    assert out[after].startswith("call 7 · iteration 6 ")
    assert "  summary What the agent has established so far:" in "\n".join(out[before:fold])
    assert any(line.startswith("fold 2 at iteration 9: 9 messages (8–10, 13–18)") for line in out)


def test_show_json_lists_the_folds_and_tells_the_summarizer_calls(invoke: Invoke) -> None:
    ran = invoke("show", COMPACTION, "--json")
    assert ran.code == 0, ran.err
    view = ran.json()
    assert [f["fold"] for f in view["folds"]] == [1, 2]
    first = view["folds"][0]
    assert first == folds_of(COMPACTION)[0] | {"fold": 1, "rsid": "window#11", "after_call": 6}
    calls = {c["call"]: c for c in view["calls"]}
    assert [(n, c["fold"]) for n, c in calls.items() if c["kind"] == "summarizer"] == [
        (6, 1),
        (11, 2),
    ]
    summarizer = calls[6]
    assert summarizer["results"] == [] and summarizer["injections"] is None
    assert summarizer["tools_added"] == summarizer["tools_removed"] == []
    # The tool the reply before asked for ran after the fold; its result is that call's.
    assert [r["name"] for r in calls[5]["results"]] == ["search_library"]
    assert calls[7]["tools_added"] == calls[7]["tools_removed"] == []


def test_show_of_the_sliding_sample_says_what_was_dropped(invoke: Invoke) -> None:
    ran = invoke("show", SLIDING, env=WIDE)
    assert ran.code == 0, ran.err
    out = lines(ran)
    fold = out.index("fold 2 at iteration 4: 2 messages (4–5) -> dropped by sliding_window")
    assert out[fold + 1] == "  kept: message 1: the current request"
    assert "summarizer" not in ran.out


# -- refusals in words, on agents built for each -----------------------------------------


def _searcher(folder: Path, strategy: WindowStrategy) -> Agent:
    """Searches seven times, then answers; every result long enough to pass 400 tokens."""
    count = itertools.count(1)

    def respond(request: Any) -> Any:
        k = next(count)
        if k > 7:
            return "done"
        call = {"id": f"c{k}", "name": "search", "args": {"q": f"query {k}"}}
        return {"content": f"step {k}", "tool_calls": [call]}

    search = define_tool(
        "search",
        "Search.",
        {"type": "object", "properties": {"q": {"type": "string"}}},
        lambda a, c: f"results for {a['q']}: " + "lorem ipsum " * 40,
    )
    provider = mock(respond=respond, authoritative=True)
    return (
        Agent.create(provider=provider, model="m", max_iterations=12, record=folder)
        .tool(search)
        .window(strategy)
        .build()
    )


def _failing(request: Any) -> Any:
    raise RuntimeError("quota exceeded")


@pytest.mark.parametrize(
    ("summarizer", "kept"),
    [
        (
            mock(respond=_failing),
            "  kept: messages 2–5: the summarizer failed: RuntimeError: quota exceeded",
        ),
        (
            mock(reply="blah " * 2000),
            "  kept: messages 2–5: the summary was not smaller",
        ),
    ],
    ids=["summarizer_failed", "summary_not_smaller"],
)
def test_a_fold_that_left_nothing_says_so_and_why(
    invoke: Invoke, tmp_path: Path, summarizer: Any, kept: str
) -> None:
    strategy = summarize_oldest(threshold_tokens=400, summarizer=summarizer, keep_recent_turns=1)
    agent = _searcher(tmp_path, strategy)
    assert agent.run("go") == "done"
    ran = invoke("show", agent.last_recording, env=WIDE)
    assert ran.code == 0, ran.err
    out = lines(ran)
    fold = out.index(
        "fold 1 at iteration 4: nothing left the window (summarize_oldest); 413 tokens "
        "measured, threshold 400"
    )
    assert out[fold + 1 : fold + 4] == [
        "  kept: message 1: the current request",
        "  kept: messages 6–7: the last tool result",
        kept,
    ]
    # The call after it marks where it happened: after the reply, before the tools' results.
    call = invoke("show", agent.last_recording, "--call", "6", env=WIDE)
    messages = [line.strip() for line in lines(call) if line.startswith("  #") or "──" in line]
    seam = messages.index(
        "── nothing left the window (summarize_oldest) at iteration 4 (fold 1) ──"
    )
    assert messages[seam - 1].startswith("#8 assistant  new")
    # (Its number depends on how many messages the summarizer's call wrote.)
    assert re.match(r"#\d+ tool search  new", messages[seam + 1])


def test_a_token_budget_fold_drops_and_says_what_it_measured(
    invoke: Invoke, tmp_path: Path
) -> None:
    agent = _searcher(tmp_path, token_budget(threshold_tokens=400, keep_recent_turns=1))
    agent.run("go")
    ran = invoke("show", agent.last_recording, env=WIDE)
    assert ran.code == 0, ran.err
    assert (
        "fold 1 at iteration 4: 4 messages (2–5) -> dropped by "
        "token_budget; 413 tokens measured, threshold 400"
    ) in lines(ran)


# -- af show --call ----------------------------------------------------------------------


def test_call_after_a_fold_shows_the_seam_and_the_summary_s_source(invoke: Invoke) -> None:
    ran = invoke("show", COMPACTION, "--call", "7", env=WIDE)
    assert ran.code == 0, ran.err
    out = lines(ran)
    seam = out.index("  ── 6 messages folded by summarize_oldest at iteration 5 (fold 1) ──")
    labels = [line for line in out[:seam] if line.startswith("  #")]
    assert labels == ["  #1 user"]
    assert out[seam + 1] == ("  #13 user  summary summarize_oldest  new · fold 1: 6 messages")
    assert out[seam + 2].startswith("    [Summary of 6 earlier messages (call-llm#1 .. ")
    # Compared with the agent's call before (5), not the summarizer's (6); the messages that
    # left are the seam's to tell, not one `gone` line each.
    assert "3 new since call 5" in ran.out and "gone" not in ran.out
    data = invoke("show", COMPACTION, "--call", "7", "--json").json()
    assert data["kind"] == "agent" and data["previous_call"] == 5
    summary = next(m for m in data["messages"] if m["n"] == 13)
    assert (summary["source"], summary["id"], summary["writer"]) == (
        "summary",
        "summarize_oldest",
        "window#11",
    )
    (fold,) = data["folds"]
    assert (fold["fold"], fold["before"], fold["summary"], fold["rsid"]) == (1, 13, 13, "window#11")
    assert {g["fold"] for g in data["removed"]["messages"]} == {1}


def test_the_seam_stays_while_its_summary_is_in_the_window(invoke: Invoke) -> None:
    data = invoke("show", COMPACTION, "--call", "14", "--json").json()
    # Fold 2 folded fold 1's summary: only its own seam is left.
    assert [(f["fold"], f["before"]) for f in data["folds"]] == [(2, 24)]
    assert data["previous_call"] == 13 and data["removed"]["messages"] == []


def test_call_after_a_sliding_fold_shows_where_the_turns_were_dropped(invoke: Invoke) -> None:
    ran = invoke("show", SLIDING, "--call", "5", env=WIDE)
    assert ran.code == 0, ran.err
    marks = [line for line in lines(ran) if line.startswith(("  #", "  ──"))]
    assert [m.split("  written")[0] for m in marks[:3]] == [
        "  #1 user",
        "  ── 2 messages dropped by sliding_window at iteration 4 (fold 2) ──",
        "  #6 assistant",
    ]


def test_call_of_a_summarizer_shows_its_system_prompt_and_transcript(invoke: Invoke) -> None:
    ran = invoke("show", COMPACTION, "--call", "6", env=WIDE)
    assert ran.code == 0, ran.err
    out = lines(ran)
    assert out[0] == (
        "call 6 · summarizer for fold 1 · iteration 5 · summarize#10 · model mock-summarizer"
    )
    assert out[1].startswith("✓ verified")
    assert "  [1] summarizer" in out
    assert "    You summarize the earlier part of an agent's conversation" in ran.out
    assert "  #11 user  transcript fold:1" in out
    assert "    Transcript of 6 messages, oldest first:" in out
    # Nothing of the agent's to compare it with.
    assert " new" not in ran.out and "since call" not in ran.out
    data = invoke("show", COMPACTION, "--call", "6", "--json").json()
    assert (data["kind"], data["fold"], data["previous_call"]) == ("summarizer", 1, None)
    assert data["injections"] is None and data["tools"] == [] and data["folds"] == []


# -- af run's progress -------------------------------------------------------------------


def test_progress_prints_one_line_per_fold_as_it_happens(invoke: Invoke, tmp_path: Path) -> None:
    ran = invoke("run", "--demo", "compaction", "--out", tmp_path, env=WIDE)
    assert ran.code == 0, ran.err
    err = [line.rstrip() for line in ran.err.splitlines()]
    folds = [line for line in err if line.startswith("  fold ")]
    assert folds == [
        "  fold 1: 6 messages -> 1 summary by summarize_oldest (1,297 tokens over 1,200)",
        "  fold 2: 9 messages -> 1 summary by summarize_oldest (1,345 tokens over 1,200)",
    ]
    summarizer = err.index("  summarizer for fold 1 · call 6 · 1 message · mock-summarizer")
    # After the reply that asked for a tool, before that tool's result.
    assert err[summarizer - 1] == '  → search_library(query="2027 cell price quotes")'
    assert err.index(folds[0]) == summarizer + 2
    assert err[summarizer + 3].startswith("  ← search_library ok")
    assert not any(line.startswith("iteration") and "call 6 " in line for line in err)


def test_progress_names_what_kept_everything_when_nothing_left(
    invoke: Invoke, tmp_path: Path
) -> None:
    source = tmp_path / "agent.py"
    source.write_text(
        "from tests.afcli.test_folds import _failing, _searcher\n"
        "from afcore import mock, summarize_oldest\n"
        "from pathlib import Path\n"
        "agent = _searcher(Path('.'), summarize_oldest(threshold_tokens=400,"
        " summarizer=mock(respond=_failing), keep_recent_turns=1))\n"
    )
    ran = invoke("run", source, "go", "--out", tmp_path / "runs", env={"COLUMNS": "300"})
    assert ran.code == 0, ran.err
    assert (
        "  fold 1 by summarize_oldest: nothing left the window (413 tokens over 400); kept: the "
        "current request, the last tool result, the summarizer failed: RuntimeError: quota "
        "exceeded"
    ) in ran.err.splitlines()


# -- hostile folds -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        "fold",
        [],
        {},
        {"count": "many", "messages": [[1]], "refusals": "none", "summary": 5},
        {"strategy": "\x1b[31m[bold]x[/]", "refusals": [{"reason": "\x1b[2J", "error": 7}]},
        {"count": 2, "messages": [[5, 1], [None, 2]], "folded": [1, None], "summary": {}},
        {"summary": {"message": 10**30}, "measured": True, "threshold": "x", "iteration": []},
    ],
)
def test_a_mangled_fold_never_stops_show(invoke: Invoke, tmp_path: Path, value: Any) -> None:
    path = tmp_path / "mangled.jsonl"
    records = [json.loads(line) for line in COMPACTION.read_text().splitlines()]
    for record in records:
        if record.get("stage") == "window":
            record["writes"][0] = {"key": record["writes"][0]["key"], "value": value}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    for args in (
        ("show", path, "--json"),
        ("show", path),
        *(("show", path, "--call", str(n)) for n in (6, 7, 14)),
    ):
        ran = invoke(*args, env=WIDE)
        assert ran.code == 0, (args, ran.err)
        assert "Traceback" not in ran.err and "unexpectedly" not in ran.err
        assert "\x1b" not in ran.out
