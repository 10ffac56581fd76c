from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import (
    Agent,
    AgentBuilder,
    CompactionUnmeasurableError,
    Provider,
    UsageError,
    define_tool,
    mock,
    sliding_window,
    summarize_oldest,
    token_budget,
)
from afcore import recording as rec
from afcore.messages import (
    AssistantMessage,
    Request,
    Response,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from afcore.window import LiveMessage, plan, segment, turn_sizes
from tests.conftest import fixed_recording, reseal

LOREM = "lorem ipsum dolor sit amet " * 12


def search_tool() -> Any:
    return define_tool(
        "search",
        "Search the notes.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        lambda args, ctx: f"found for {args['q']}: {LOREM}",
    )


def researcher(steps: int, *, usage: bool = False) -> tuple[Any, list[Request]]:
    """A mock that searches ``steps`` times, then answers; it keeps every request it got.
    ``usage``: report counted input tokens, a quarter of the request's characters."""
    seen: list[Request] = []

    def respond(request: Request) -> Any:
        seen.append(request)
        k = len(seen)
        reply: dict[str, Any] = (
            {
                "content": f"step {k}",
                "tool_calls": [{"id": f"s{k}", "name": "search", "args": {"q": f"q{k}"}}],
            }
            if k <= steps
            else {"content": "done"}
        )
        if usage:
            chars = sum(len(orjson.dumps(m.to_json())) for m in request.messages)
            reply["usage"] = {"input_tokens": chars // 4, "output_tokens": 5}
        return reply

    return mock(respond=respond), seen


def build(provider: Any, folder: Path | None, strategy: Any = None, run_id: str = "w") -> Any:
    builder: AgentBuilder = Agent.create(
        provider=provider,
        model="m",
        max_iterations=40,
        record=fixed_recording(folder, run_id) if folder is not None else False,
    ).tool(search_tool())
    if strategy is not None:
        builder = builder.window(strategy)
    return builder.build()


def lines(path: Path) -> list[dict[str, Any]]:
    """The records, without the seals that close each write."""
    raw = path.read_bytes().splitlines()
    return [orjson.loads(line) for line in raw if not line.startswith(b'{"t":"seal",')]


def folds(path: Path) -> list[dict[str, Any]]:
    with rec.open_recording(path) as r:
        return [
            r.value(w)
            for _, c in r.records()
            if isinstance(c, rec.Commit) and c.stage == "window"
            for w in c.writes
            if w.key.startswith("fold:")
        ]


def texts(request: Request) -> list[str]:
    out = []
    for m in request.messages:
        if isinstance(m, AssistantMessage):
            out.append(m.text)
        elif isinstance(m, ToolResultMessage):
            out.append(f"result {m.tool_call_id}")
        else:
            out.append(m.content.split("]")[0] if m.content.startswith("[Summary") else m.content)
    return out


# -- turns and refusals ------------------------------------------------------------------


def live(*messages: Any) -> list[LiveMessage]:
    return [LiveMessage(i + 1, m, f"w#{i}") for i, m in enumerate(messages)]


def asks(*ids: str) -> AssistantMessage:
    return AssistantMessage(tuple(ToolCall(i, "search", {}) for i in ids))


def answer(id: str) -> ToolResultMessage:
    return ToolResultMessage(id, "search", "ok")


def test_a_turn_is_a_user_message_or_a_reply_with_the_results_that_answer_it() -> None:
    window = live(
        UserMessage("go"),
        asks("a", "b"),
        answer("a"),
        answer("b"),
        AssistantMessage((TextBlock("thinking aloud"),)),
        asks("c"),
        answer("c"),
        answer("zz"),  # answers a call that already left: a turn of its own
    )
    assert [(t.start, t.end) for t in segment(window)] == [(0, 0), (1, 3), (4, 4), (5, 6), (7, 7)]


def test_turns_that_may_not_leave_refuse_by_name() -> None:
    window = live(
        UserMessage("go"),  # the current request
        asks("a"),
        answer("a"),
        asks("b", "c"),
        answer("b"),  # c has no result yet
        asks("d"),
        answer("d"),  # the last tool result
        asks("e"),  # unresolved, and recent
    )
    cut = plan(window, turn_sizes(window), keep_recent_turns=1, request=0)
    assert [(r.turn.start, r.reason) for r in cut.refusals] == [
        (0, "current_request"),
        (3, "unresolved_tool_call"),
        (5, "last_tool_result"),
    ]
    assert [[(t.start, t.end) for t in span] for span in cut.spans] == [[(1, 2)]]
    # Nothing recent is a candidate; with no turn kept, the newest refuses as unresolved.
    cut = plan(window, turn_sizes(window), keep_recent_turns=0, request=0)
    assert cut.refusals[-1].reason == "unresolved_tool_call"


# -- strategies --------------------------------------------------------------------------


def test_sliding_window_keeps_the_last_turns_and_records_each_fold(tmp_path: Path) -> None:
    provider, seen = researcher(5)
    agent = build(provider, tmp_path, sliding_window(keep_recent_turns=2))
    assert agent.run("research") == "done"
    assert texts(seen[0]) == ["research"]
    assert texts(seen[2]) == ["research", "step 1", "result s1", "step 2", "result s2"]
    # After reply 3 the turn of step 1 is older than the last two: it leaves.
    assert texts(seen[3]) == ["research", "step 2", "result s2", "step 3", "result s3"]
    assert texts(seen[5]) == ["research", "step 4", "result s4", "step 5", "result s5"]
    path = agent.last_recording
    first = folds(path)[0]
    assert first["strategy"] == "sliding_window" and first["iteration"] == 3
    assert first["count"] == 2 and first["messages"] == [[2, 3]]
    assert first["folded"][0].startswith("call-llm#") and first["folded"][1].startswith(
        "tool:search#"
    )
    assert (first["before"], first["after"]) == (6, 4)  # seed, 2 turns and the new reply
    assert [r["reason"] for r in first["refusals"]] == ["current_request"]
    assert "measured" not in first
    evicted = [r for r in lines(path) if r["t"] == "context_evicted"]
    assert [(e["fold"], e["message"]) for e in evicted[:2]] == [(1, 2), (1, 3)]
    with rec.open_recording(path) as r:
        # The messages that left are still in the file, byte for byte.
        assert all(r.message_writer(e["message"]) is not None for e in evicted)
        assert evicted[0]["hash"] == r.message_ref(2)
        report = rec.verify(r)
        assert report.ok, report.problems


def test_token_budget_drops_what_may_leave_only_over_its_counted_threshold(tmp_path: Path) -> None:
    provider, seen = researcher(8, usage=True)
    agent = build(provider, tmp_path, token_budget(threshold_tokens=400, keep_recent_turns=1))
    agent.run("research")
    made = folds(agent.last_recording)
    assert made and all(f["measured"] > f["threshold"] == 400 for f in made)
    for f in made:
        assert f["measured_at"] == f["iteration"]  # the call just made
        assert [r["reason"] for r in f["refusals"]] == ["current_request", "last_tool_result"]
    # The window shrank after each fold, and only then.
    sizes = [len(r.messages) for r in seen]
    assert any(b < a for a, b in zip(sizes, sizes[1:], strict=False))
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok


def test_summarize_oldest_folds_into_a_framed_summary_from_a_recorded_call(tmp_path: Path) -> None:
    provider, seen = researcher(6, usage=True)
    summarizer = mock(
        reply="Searched q1 to q3; found lorem ipsum.", usage={"input_tokens": 9, "output_tokens": 9}
    )
    agent = build(
        provider,
        tmp_path,
        summarize_oldest(
            threshold_tokens=500, summarizer=summarizer, model="small", keep_recent_turns=1
        ),
    )
    assert agent.run("research") == "done"
    first = folds(agent.last_recording)[0]
    assert first["summary"]["by"] == "mock:small"
    after = seen[first["iteration"]]  # the request sent after the fold
    summary = after.messages[1]
    assert isinstance(summary, UserMessage) and summary.content.startswith(
        f"[Summary of {first['count']} earlier messages ({first['folded'][0]} .. "
    )
    assert "<summary>\nSearched q1 to q3; found lorem ipsum.\n</summary>" in summary.content
    assert "not an instruction" in summary.content
    with rec.open_recording(agent.last_recording) as r:
        call = r.call(first["summary"]["call"])
        assert call.rsid.startswith("summarize#") and call.model == "small"
        assert r.check_call(call.call).ok
        transcript = r.message(call.window[0][0])
        assert transcript["content"].startswith(f"Transcript of {first['count']} messages")
        report = rec.verify(r)
        assert report.ok, report.problems
        assert r.end is not None and r.end.calls == len(seen) + len(folds(agent.last_recording))


def test_a_failed_or_useless_summary_refuses_the_fold_and_the_run_goes_on(tmp_path: Path) -> None:
    def broken(request: Request) -> Any:
        raise RuntimeError("summarizer down")

    for summarizer, reason in (
        (mock(respond=broken), "summarizer_failed"),
        (mock(reply=LOREM * 40), "summary_not_smaller"),
    ):
        provider, seen = researcher(4, usage=True)
        agent = build(
            provider,
            tmp_path,
            summarize_oldest(threshold_tokens=300, summarizer=summarizer, keep_recent_turns=1),
            run_id=reason,
        )
        assert agent.run("research") == "done"
        made = folds(agent.last_recording)
        assert made and all(f["count"] == 0 and f["after"] == f["before"] for f in made)
        assert made[0]["refusals"][-1]["reason"] == reason
        if reason == "summarizer_failed":
            assert "summarizer down" in made[0]["refusals"][-1]["error"]
        assert all(
            not isinstance(m, UserMessage) or not m.content.startswith("[Summary")
            for r in seen
            for m in r.messages
        )
        with rec.open_recording(agent.last_recording) as r:
            assert rec.verify(r).ok


def test_compaction_is_summarize_oldest_to_the_byte(tmp_path: Path) -> None:
    def agent(door: str) -> Any:
        provider, _ = researcher(6, usage=True)
        summarizer = mock(reply="Short summary.")
        builder = Agent.create(
            provider=provider, model="m", record=fixed_recording(tmp_path / door, "same")
        ).tool(search_tool())
        if door == "compaction":
            builder = builder.compaction(threshold_tokens=500, summarizer=summarizer)
        else:
            builder = builder.window(summarize_oldest(threshold_tokens=500, summarizer=summarizer))
        return builder.build()

    paths = []
    for door in ("compaction", "window"):
        a = agent(door)
        a.run("research")
        paths.append(a.last_recording)
    assert folds(paths[0])
    # The same records; where the writes (and so their seals) fall depends on timing.
    assert unsealed(paths[0]) == unsealed(paths[1])


def test_without_a_strategy_nothing_changes(tmp_path: Path) -> None:
    plain_provider, plain = researcher(5)
    idle_provider, idle = researcher(5)
    none = build(plain_provider, tmp_path / "none", None)
    # A strategy that never acts sends the very requests an agent without one does.
    wide = build(idle_provider, tmp_path / "wide", sliding_window(keep_recent_turns=1000))
    none.run("research")
    wide.run("research")
    assert [r.messages for r in plain] == [r.messages for r in idle]
    records = lines(none.last_recording)
    assert "window" not in records[0]["config"]
    assert not [r for r in records if r.get("stage") == "window" or r["t"] == "context_evicted"]
    hashes = [
        [r["hash"] for r in lines(p) if r["t"] == "call"]
        for p in (none.last_recording, wide.last_recording)
    ]
    assert hashes[0] == hashes[1]


def test_counted_never_guessed(tmp_path: Path) -> None:
    provider, _ = researcher(3)  # the mock estimates: not a count
    agent = build(provider, tmp_path, token_budget(threshold_tokens=10))
    with pytest.raises(CompactionUnmeasurableError, match="reported only an estimate") as caught:
        agent.run("research")
    assert caught.value.strategy == "token_budget" and caught.value.call == 1
    records = lines(agent.last_recording)
    assert records[-1]["status"] == "error"
    assert records[-1]["error"]["kind"] == "CompactionUnmeasurableError"
    assert any(
        r["t"] == "error" and r["error"]["kind"] == "CompactionUnmeasurableError" for r in records
    )
    # Told its estimates are authoritative, the mock's numbers count.
    told = build(
        mock(
            reply={
                "content": "x",
                "tool_calls": [{"id": "1", "name": "search", "args": {"q": "a"}}],
            },
            authoritative=True,
        ),
        None,
        token_budget(threshold_tokens=10),
    )
    told.max_iterations = 3
    told.run("research")
    assert told.last_result.status == "max_iterations"


class Silent(Provider):
    """A provider that reports no usage at all."""

    name = "silent"

    async def complete(self, request: Request, *, on_stream: Any = None) -> Response:
        return Response(
            content=(TextBlock("more"), ToolCall("c", "search", {"q": "x"})),
            stop_reason="tool_use",
            usage=None,
        )


def test_a_provider_that_reports_no_usage_cannot_be_measured() -> None:
    agent = build(Silent(), None, summarize_oldest(threshold_tokens=10, summarizer=mock(reply="s")))
    with pytest.raises(CompactionUnmeasurableError, match="silent reported no usage"):
        agent.run("research")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: sliding_window(keep_recent_turns=-1), "keep_recent_turns"),
        (lambda: token_budget(threshold_tokens=0), "threshold_tokens"),
        (lambda: token_budget(threshold_tokens=10, keep_recent_turns=True), "keep_recent_turns"),
        (
            lambda: summarize_oldest(threshold_tokens=-5, summarizer=mock(reply="s")),
            "threshold_tokens",
        ),
        (lambda: summarize_oldest(threshold_tokens=5, summarizer="gpt"), "summarizer"),
        (
            lambda: Agent.create(provider=mock(reply="x"), model="m").compaction(
                threshold_tokens=5, summarizer=object()
            ),
            "summarizer",
        ),
        (
            lambda: (
                Agent.create(provider=mock(reply="x"), model="m")
                .window(sliding_window(keep_recent_turns=2))
                .compaction(threshold_tokens=5, summarizer=mock(reply="s"))
            ),
            "one window strategy",
        ),
        (lambda: Agent.create(provider=mock(reply="x"), model="m").window("sliding"), "strategy"),
    ],
)
def test_bad_strategies_are_refused_naming_the_argument(make: Any, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        make()


def test_verify_finds_a_fold_whose_evicted_messages_are_not_accounted_for(tmp_path: Path) -> None:
    provider, _ = researcher(5)
    agent = build(provider, tmp_path, sliding_window(keep_recent_turns=1))
    agent.run("research")
    path = agent.last_recording
    raw = path.read_bytes().splitlines(keepends=True)
    evicted = [i for i, line in enumerate(raw) if b'"context_evicted"' in line]
    dropped = path.with_name("dropped.jsonl")
    dropped.write_bytes(b"".join(line for i, line in enumerate(raw) if i != evicted[0]))
    with rec.open_recording(dropped) as r:
        assert any("without a context_evicted event" in p.message for p in rec.verify(r).problems)
    forged = path.with_name("forged.jsonl")
    record = orjson.loads(raw[evicted[0]])
    record["hash"] = "0" * 64
    forged.write_bytes(
        b"".join(
            orjson.dumps(record) + b"\n" if i == evicted[0] else line for i, line in enumerate(raw)
        )
    )
    with rec.open_recording(forged) as r:
        assert any("left with hash 000000000000" in p.message for p in rec.verify(r).problems)


def test_verify_finds_a_call_sent_a_window_the_folds_do_not_explain(tmp_path: Path) -> None:
    provider, _ = researcher(4)
    agent = build(provider, tmp_path, sliding_window(keep_recent_turns=1))
    agent.run("research")
    path = agent.last_recording
    raw = path.read_bytes().splitlines(keepends=True)
    # Drop the first fold's commit: the calls after it no longer match the live window.
    at = next(i for i, line in enumerate(raw) if b'"rsid":"window#' in line)
    cut = path.with_name("cut.jsonl")
    # Sealed again, as if written so: what is to be caught is the window, not the chain.
    cut.write_bytes(reseal(b"".join(line for i, line in enumerate(raw) if i != at)))
    with rec.open_recording(cut) as r:
        problems = [p.message for p in rec.verify(r).problems]
    assert any("its window differs from what the folds before it leave" in p for p in problems)


def unsealed(path: Path) -> list[bytes]:
    """The file's lines as written, without the seals that close each write."""
    return [line for line in path.read_bytes().splitlines() if not line.startswith(b'{"t":"seal"')]


def test_the_window_check_reads_a_window_by_its_messages_not_by_how_its_ranges_are_cut() -> None:
    """The live window is compared by its ranges where they are the same (a window that grows
    with the run is not expanded at every call); ranges cut or ordered otherwise are compared
    message by message, with the same verdict as ever."""
    from afcore.recording._models import Call, Commit, Write
    from afcore.recording._window_check import WindowReplay

    check = WindowReplay(lambda _: None, lambda _: None)
    writes = [Write(key=f"message:{n}", ref=f"id{n}") for n in (1, 2, 3, 4, 5)]
    check.commit(Commit(seq=1, rsid="seed#0", stage="seed", iter=0, writes=writes[:1]))
    check.commit(Commit(seq=2, rsid="tool:t#1", stage="tool:t", iter=1, writes=writes[1:]))

    def sent(*window: tuple[int, int]) -> str | None:
        return check.call(
            Call(seq=3, rsid="call-llm#2", iter=1, call=1, window=list(window), hash="h")
        )

    assert sent((1, 5)) is None
    assert sent((1, 2), (3, 5)) is None  # the same messages, cut in two
    assert sent((3, 5), (1, 2)) == "its window holds the live messages in another order"
    assert "messages 5 should be in it" in (sent((1, 4)) or "")
    assert "messages 6 should not" in (sent((1, 6)) or "")


def test_cutting_the_window_s_numbers_equals_cutting_them_one_by_one() -> None:
    # The live window keeps its message numbers as ranges and cuts them by arithmetic (a
    # drop inside one range by a shortcut): the same as removing the numbers one by one.
    import random

    from afcore.window._live import _cut, _extend

    def by_hand(
        ranges: list[tuple[int, int]], first: int, count: int, put: list[int]
    ) -> list[tuple[int, int]]:
        numbers = [n for a, b in ranges for n in range(a, b + 1)]
        numbers[first : first + count] = put
        out: list[tuple[int, int]] = []
        for n in numbers:
            _extend(out, n)
        return out

    rnd = random.Random(13)
    for _ in range(3000):
        numbers = rnd.sample(range(1, 40), rnd.randint(1, 20))
        if rnd.random() < 0.5:
            numbers.sort()
        ranges: list[tuple[int, int]] = []
        for n in numbers:
            _extend(ranges, n)
        first = rnd.randrange(len(numbers))
        count = rnd.randint(1, len(numbers) - first)
        put = [] if rnd.random() < 0.8 else [rnd.randint(41, 50)]
        assert _cut(ranges, first, count, put) == by_hand(ranges, first, count, put)


def test_a_fold_is_written_as_its_model_dumps_it() -> None:
    # The window stage writes a fold's value as a plain line, its refusals and summary
    # lines too; the reader's model of it dumps to the same bytes.
    from afcore.loop._window import _fold, _refused, _summary
    from afcore.recording._models import Fold, FoldRefusal, FoldSummary, as_json, trusted

    failed = {"reason": "summarizer_failed", "messages": [(1, 1)], "writers": ["run#1"]}
    kept = {"reason": "current_request", "messages": [(1, 1)], "writers": ["run#1"]}
    summary = {"message": 9, "call": 4, "by": "mock:m"}
    for fields, refusals, made in (
        ({"measured": None, "measured_at": None, "threshold": None}, [kept], None),
        ({"measured": 120, "measured_at": 4, "threshold": 100}, [], None),
        ({"measured": 0, "measured_at": 4, "threshold": 100}, [failed], summary),
    ):
        common: dict[str, Any] = {
            "strategy": "sliding_window",
            "iteration": 3,
            "folded": ["call-llm#2", "tool#3"],
            "messages": [(2, 3)],
            "count": 2,
            "before": 5,
            "after": 3,
            "keep_recent_turns": 1,
            **fields,
        }
        error = {"error": "boom"}
        line = orjson.dumps(
            _fold(
                **common,
                refusals=[_refused(**r, **(error if r is failed else {})) for r in refusals],
                summary=None if made is None else _summary(**made),
            )
        )
        model = orjson.dumps(
            as_json(
                trusted(Fold)(
                    **common,
                    refusals=[
                        trusted(FoldRefusal)(**r, **(error if r is failed else {}))
                        for r in refusals
                    ],
                    summary=None if made is None else trusted(FoldSummary)(**made),
                )
            ),
            default=as_json,
        )
        assert line == model


@pytest.mark.parametrize("inject", [False, True], ids=["plain", "with-injections"])
def test_calls_after_a_fold_hash_their_window_as_a_whole(tmp_path: Path, inject: bool) -> None:
    # After a fold, each call until the next is sent the window before it and what was added
    # since (and, with injections, messages after it that come and go): the writer extends
    # the last window's hash rather than hashing it again, and every call still rebuilds to
    # the hash it was sent with.
    provider, _ = researcher(12, usage=True)
    builder: AgentBuilder = (
        Agent.create(
            provider=provider, model="m", max_iterations=40, record=fixed_recording(tmp_path)
        )
        .tool(search_tool())
        .window(token_budget(threshold_tokens=800, keep_recent_turns=2))
    )
    if inject:
        builder = builder.instruction(
            "Cite the notes you used.", id="cite", when=lambda s: s.iteration % 3 != 1
        )
    agent = builder.build()
    agent.run("research")
    records = lines(agent.last_recording)
    windows = [r["window"] for r in records if r["t"] == "call" and "window" in r]
    grown = [
        b
        for a, b in zip(windows, windows[1:], strict=False)
        if len(a) > 1 and b[: len(a) - 1] == a[:-1] and b[len(a) - 1][1] > a[-1][1]
    ]
    assert grown  # the writer's shortcut was taken
    assert any(r["t"] == "commit" and r["rsid"].startswith("window#") for r in records)
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok
