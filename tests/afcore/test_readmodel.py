"""The read model under both front ends: the timeline of calls, and each call's view as the
Lens shows it, which must be what `af show --call` says of it while reading only the records
the call depends on."""

from __future__ import annotations

from pathlib import Path

import pytest

from afcore.readmodel import Timeline, build, call_detail, call_view
from afcore.recording import Call, Recording, open_recording, verify
from bench.big_recording import write

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"
SAMPLE_FILES = sorted(SAMPLES.glob("sample-*.jsonl"))


def timeline_of(rec: Recording) -> Timeline:
    timeline = Timeline()
    for _ in build(rec, timeline):
        pass
    return timeline


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Small recordings of the bench's generator, in both its shapes."""
    folder = tmp_path_factory.mktemp("big")
    return [
        write(folder, mb=1.5, shape="prose", run_id="prose"),
        write(folder, mb=0.5, shape="short-lines", run_id="short"),
    ]


def test_samples_are_there() -> None:
    names = {p.stem for p in SAMPLE_FILES}
    assert {"sample-trip", "sample-trip-rain", "sample-compaction", "sample-sliding"} <= names


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.stem)
def test_every_call_is_what_af_show_says(path: Path) -> None:
    rec = open_recording(path)
    timeline = timeline_of(rec)
    assert [m.n for m in timeline.marks] == rec.call_numbers
    for mark in timeline.marks:
        view = call_view(rec, timeline, mark.n)
        assert view.problem is None
        assert view.detail == call_detail(rec, mark.n), f"call {mark.n}"


def test_generated_recordings_verify_and_show_the_same(generated: list[Path]) -> None:
    for path in generated:
        rec = open_recording(path)
        report = verify(rec)
        assert report.ok, report.problems
        timeline = timeline_of(rec)
        assert len(timeline.marks) > 15
        assert any(m.folds for m in timeline.marks)
        # Every call late in the run, and the first: the walk is shortest there.
        for mark in [timeline.marks[0], *timeline.marks[-12:]]:
            assert call_view(rec, timeline, mark.n).detail == call_detail(rec, mark.n)


def test_prose_has_summarizer_calls_and_short_lines_stay_short(generated: list[Path]) -> None:
    prose, short = generated
    assert any(not m.agent for m in timeline_of(open_recording(prose)).marks)
    # One tool call in forty has an argument the schema refuses.
    assert any(m.trouble == "rejected" for m in timeline_of(open_recording(short)).marks)
    longest = max(len(line) for line in short.read_bytes().splitlines())
    assert longest < 10_000


def test_timeline_marks_the_trip() -> None:
    timeline = timeline_of(open_recording(SAMPLES / "sample-trip.jsonl"))
    marks = timeline.marks
    assert all(m.agent and m.turn == 1 and m.replied for m in marks)
    assert [m.asked > 0 for m in marks] == [True] * (len(marks) - 1) + [False]
    assert any(m.trouble == "rejected" for m in marks)  # the convert_currency argument


def test_prefix_open_indexes_only_the_first_bytes(generated: list[Path]) -> None:
    prose = generated[0]
    whole = open_recording(prose)
    part = open_recording(prose, upto=200_000)
    assert part.partial and not whole.partial
    assert 0 < part.call_count < whole.call_count
    assert part.indexed_bytes < whole.indexed_bytes == prose.stat().st_size
    assert part.torn_tail is None  # a prefix ends where a line ends
    first = part.call_numbers[0]
    assert call_view(part, timeline_of(part), first).detail == call_detail(whole, first)


def test_events_after_a_call(generated: list[Path]) -> None:
    rec = open_recording(SAMPLES / "sample-compaction.jsonl")
    timeline = timeline_of(rec)
    folded = next(m for m in timeline.marks if m.folds)
    kinds = [e["kind"] for e in call_view(rec, timeline, folded.n).events]
    assert "fold" in kinds
    asked = next(m for m in timeline.marks if m.agent and m.asked)
    before_fold = call_view(rec, timeline, asked.n)
    assert any(e["kind"] == "tool" and e["status"] == "ok" for e in before_fold.events)


def test_a_file_that_grows_while_it_is_opened_is_read_as_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run still going appends lines between the reader mapping the file and indexing it;
    what was appended waits for the next open instead of being indexed past the map."""
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    calls = [i for i, line in enumerate(lines) if line.startswith(b'{"t":"call"')]
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"".join(lines[: calls[2] + 2]))
    indexed = Recording._index_all

    def grows(self: Recording) -> None:
        with path.open("ab") as f:
            f.write(b"".join(lines[calls[2] + 2 : calls[3] + 1]))
        indexed(self)

    monkeypatch.setattr(Recording, "_index_all", grows)
    rec = open_recording(path)
    monkeypatch.undo()
    timeline = timeline_of(rec)
    assert rec.call_numbers == [m.n for m in timeline.marks] == [1, 2, 3]
    assert rec.grown()
    assert call_view(rec, timeline, 3).detail == call_detail(rec, 3)
    assert rec.reopen().call_numbers == [1, 2, 3, 4]


@pytest.fixture
def attempts(tmp_path: Path) -> Path:
    """A run whose second call is rate limited, fails on the server, then moves on to a
    backup provider, which answers: four calls, two of them failed attempts."""
    from afcore import Agent, RateLimitedError, ServerError, define_tool, rule
    from tests.afcli.test_attempts import scripted

    weather = define_tool("weather", "Weather.", {"type": "object"}, lambda a, c: "sunny")
    call = {"tool_calls": [{"id": "c1", "name": "weather", "args": {}}]}
    primary = scripted(
        [call, RateLimitedError("slow down", status=429), ServerError("oops", status=500)], "a"
    )
    agent = (
        Agent.create(provider=primary, model="m", record=tmp_path / "runs")
        .tool(weather)
        .reliability(
            post_decide=[
                rule(lambda s: s.error_kind == "rate_limited", "retry", kind="transient"),
                rule(lambda s: s.error_kind == "server_error", "retry_other", kind="5xx"),
            ],
            providers=[(scripted(["It is sunny."], "b"), "m2")],
        )
        .build()
    )
    assert agent.run("Weather?") == "It is sunny."
    assert agent.last_recording is not None
    return agent.last_recording


def test_attempts_at_a_call(attempts: Path) -> None:
    rec = open_recording(attempts)
    timeline = timeline_of(rec)
    marks = timeline.marks
    assert [m.trouble for m in marks] == ["", "error", "error", ""]
    assert marks[3].attempt == "attempt 3 via providers[0] (b)"
    for mark in marks:
        view = call_view(rec, timeline, mark.n)
        assert view.detail == call_detail(rec, mark.n)
    failed = call_view(rec, timeline, 2).events
    assert [e["decision"].get("verb") for e in failed if e["kind"] == "error"] == ["retry"]


def test_the_run_is_given_call_by_call_as_the_file_is_read(generated: list[Path]) -> None:
    from afcore.readmodel import overview, run_view

    for path in generated:
        rec = open_recording(path)
        read: list[int] = []
        walk = rec.records

        def records(lines=None, walk=walk, read=read, **how):  # type: ignore[no-untyped-def]
            for line, record in walk(lines, **how):
                read.append(line)
                yield line, record

        rec.records = records  # type: ignore[method-assign]
        parts = []
        for part in run_view(rec):
            parts.append((part.kind, read[-1] if read else 0))
        kinds = [k for k, _ in parts]
        assert kinds[0] == "header" and kinds[-1] == "end"
        # Each call is given long before the walk ends: a call is held only until the
        # agent's next call begins.
        rec.records = walk  # type: ignore[method-assign]
        agent_calls = [
            line
            for line, r in rec.records(blobs=False)
            if isinstance(r, Call) and r.rsid.startswith("call-llm#")
        ]
        first_call = next(at for kind, at in parts if kind == "call")
        assert first_call == agent_calls[1] < rec.line_count // 5
        whole = overview(rec)
        assert len(whole["calls"]) == kinds.count("call") == len(rec.call_numbers)
        assert len(whole["folds"]) == kinds.count("fold") > 0


def test_the_read_model_s_values_are_values() -> None:
    # What the front ends rely on: keyword and positional construction, defaults (a fresh list
    # for each), equality and hashing by value, frozen types that refuse assignment, and
    # replace() for a changed copy.
    from msgspec.structs import replace

    from afcore.readmodel import CallSummary, Gone, Provenance

    a = Provenance("injection", "rules", trigger="always")
    b = Provenance(source="injection", id="rules", trigger="always")
    assert a == b and hash(a) == hash(b) and a.reason is None and a.turn is None
    assert a != replace(a, turn=2) and replace(a, turn=2).turn == 2 and a.turn is None
    with pytest.raises(AttributeError):
        a.turn = 3  # type: ignore[misc]
    assert Gone(n=1) != Gone(n=2) and Gone() == Gone()

    one = CallSummary(
        1, 1, "call#1", "m", 2, "agent", None, None, None, 3, [], None, [], [], None, None
    )
    two = CallSummary(
        1, 1, "call#1", "m", 2, "agent", None, None, None, 3, [], None, [], [], None, None
    )
    assert one == two and one.results == [] and one.results is not two.results
    one.results.append(None)  # type: ignore[arg-type]
    assert one != two
    with pytest.raises(TypeError):
        hash(one)  # a mutable summary is not hashable, as before


def test_the_walks_values_are_values() -> None:
    # The reader's, the slice's, the timeline's and the session's types, as Structs: what
    # they were as dataclasses (defaults, a fresh list or dict for each, equality and hashing
    # by value for the frozen ones, none for the mutable ones, frozen ones refusing
    # assignment).
    from msgspec.structs import replace

    from afcore.readmodel import FoldMark, HistoryOrigin, Mark, TurnRun
    from afcore.recording import CallCheck, Problem
    from afcore.why import Edge, KeyInfo, Node, Slice

    edges = {Edge("a#1", "b#2", "data", "k"), Edge("a#1", "b#2", "data", "k", "")}
    assert len(edges) == 1 and next(iter(edges)).label == ""
    assert Edge("a#1", "b#2", "data", "k") != Edge("a#1", "b#2", "control", "k")
    assert KeyInfo("answer", "end#9", 12) == KeyInfo("answer", "end#9", 12, "")
    assert Problem(3, "bad") == Problem(line=3, message="bad") and str(Problem(0, "x")) == "x"
    assert CallCheck(1, True, "h", "h").problem is None
    with pytest.raises(AttributeError):
        Problem(3, "bad").line = 4  # type: ignore[misc]

    one, two = Node("a#1", "a", 1, 2, ["k"]), Node("a#1", "a", 1, 2, ["k"])
    assert one == two and one.decisions == [] and one.decisions is not two.decisions
    one.value = "v"
    assert one != two and one.label == "" and one.rest is None
    with pytest.raises(TypeError):
        hash(one)
    whole = Slice("answer", "end#9", {}, [], {})
    assert whole.inner == {} and whole.flow_state == {}
    assert whole.inner is not Slice("answer", "end#9", {}, [], {}).inner

    mark = Mark(1, 5, 1, "call-llm#2", 0, True)
    assert (mark.replied, mark.stop, mark.ms, mark.at) == (False, "", 0.0, None)
    mark.folds += 1
    assert mark != Mark(1, 5, 1, "call-llm#2", 0, True)
    fold = FoldMark(7, 1, "sliding", 2, 3, 1)
    assert {fold, FoldMark(7, 1, "sliding", 2, 3, 1)} == {fold}
    assert Timeline().marks == [] and Timeline().marks is not Timeline().marks

    run = TurnRun(1, "r1", Path("r1.jsonl"), None)
    origin = HistoryOrigin(1, None, run, None)
    assert replace(origin, key="message:2").key == "message:2" and origin.key is None
    assert hash(origin) == hash(HistoryOrigin(1, None, run, None))
