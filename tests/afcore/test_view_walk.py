"""The walk of a run's view (``af show``) takes the lines af writes in a known shape by their bytes
or by one typed decode, and gives the records itself as it indexes the file: what it gives, the
problems it reports and the index it leaves are what parsing and converting every line gives,
whatever was edited."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import recording as rec
from afcore.readmodel import overview, run_view
from afcore.readmodel._run import _READ
from afcore.readmodel._text import shown_status
from afcore.recording import _reader
from afcore.recording._reader import TOOL_COMMIT, Recording
from tests.afcore.byte_edits import edited as edited_line
from tests.afcore.test_verify_walk import by_ref

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "recordings").glob("sample-*.jsonl"))


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """No commit taken by its bytes, no commit or call typed in one decode: each parsed and
    converted."""
    monkeypatch.setattr(_reader, "TOOL_COMMIT", re.compile(b"(?!)"))
    monkeypatch.setattr(Recording, "_typed_commit", lambda self, i, raw: None)
    monkeypatch.setattr(Recording, "_typed_call", lambda self, i, raw: None)


def _index(walk: Recording) -> tuple[Any, ...]:
    idx = walk._index
    return (
        bytes(idx.kinds),
        list(idx.starts),
        list(idx.blob_keys),
        list(idx.seals),
        list(idx.commits),
        list(idx.tool_commits),
        dict(idx.tools),
        {k: list(v) for k, v in idx.keys.items()},
        idx.messages.numbers(),
        idx.calls.numbers(),
        idx.replies.numbers(),
        idx.frames.numbers(),
        [walk.line_size(n) for n in range(1, walk.line_count + 1)],
    )


def _read(path: Path, *, index: bool = False, max_line: int = rec.MAX_LINE) -> tuple[Any, ...]:
    """The run's view as one JSON object, the problems, the torn tail, and the index the walk
    leaves; each line, as the walk gives it, read back from the file by the index as it
    stands then."""
    lines = path.read_bytes().split(b"\n")
    with rec.open_recording(path, index=index, max_line=max_line) as walk:
        for n, _ in walk.records(blobs=False, seals=False, only=_READ, tool_lines=True):
            assert walk.line_bytes(n) == lines[n - 1]
        walk.problems.clear()
    with rec.open_recording(path, index=index, max_line=max_line) as walk:
        view = overview(walk)
        return view, [str(p) for p in walk.problems], walk.torn_tail, _index(walk)


def _same(
    path: Path, monkeypatch: pytest.MonkeyPatch, *, whole: bool = True, max_line: int = rec.MAX_LINE
) -> tuple[Any, ...]:
    """``_read`` of ``path`` by the view's walk, having checked that the walk that parses every
    line says the same, and (``whole``) a whole open too: it indexes every line first, then
    reads the records from the index (a walk finds only the blobs it passed: on a file
    edited at random the two may differ, as they always have)."""
    fast = _read(path, max_line=max_line)
    with monkeypatch.context() as m:
        _general(m)
        assert _read(path, max_line=max_line) == fast
    if whole:
        assert _read(path, index=True, max_line=max_line) == fast
    lines = path.read_bytes().split(b"\n")
    sizes = fast[3][-1]
    assert sizes == [len(line) for line in lines[: len(sizes)]]
    return fast


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_the_view_walk_gives_what_parsing_gives(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(by_ref(sample)))
    view = _same(path, monkeypatch)[0]
    assert view["calls"] and any(c["results"] for c in view["calls"])
    # Torn: the last line cut short, and a last line without its newline that is whole.
    whole = path.read_bytes()
    path.write_bytes(whole[:-30])
    assert _same(path, monkeypatch)[2] is not None
    path.write_bytes(whole[:-1])
    assert _same(path, monkeypatch)[2] is None
    # Lines that are no records, among those that are.
    lines = whole.splitlines(keepends=True)
    lines[4:4] = [b"not json\n", b"  \n", b'["t"]\n', b'{"t":"future"}\n', b"{" * 30 + b"\n"]
    path.write_bytes(b"".join(lines))
    assert len(_same(path, monkeypatch)[1]) == 3


def _commits(sample: Path) -> list[bytes]:
    """The sample's commits that are not a tool's in the common shape (injections, windows,
    seeds, ...): the lines the view walk types in one decode."""
    return [
        line
        for line in by_ref(sample)
        if line.startswith(b'{"t":"commit"') and not TOOL_COMMIT.fullmatch(line.rstrip(b"\n"))
    ]


def test_the_samples_hold_commits_typed_in_one_decode() -> None:
    typed = []
    for sample in SAMPLES:
        with rec.open_recording(sample) as whole:
            for i, line in enumerate(_commits(sample)):
                typed.append(whole._typed_commit(i, line.rstrip(b"\n")) is not None)
    assert sum(typed) >= 10


def test_the_samples_hold_calls_typed_in_one_decode() -> None:
    typed = []
    for sample in SAMPLES:
        with rec.open_recording(sample) as whole:
            for i, line in enumerate(by_ref(sample)):
                if line.startswith(b'{"t":"call"'):
                    typed.append(whole._typed_call(i, line.rstrip(b"\n")) is not None)
    assert sum(typed) >= 5


@pytest.mark.parametrize("sample", SAMPLES[:2], ids=lambda p: p.stem)
def test_an_edited_commit_reads_as_a_parsed_one(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few bytes of a commit changed, of a tool's commit, a call, a blob or an eviction: the
    view, the problems and the index are those of the walk that parses every line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lines = by_ref(sample)
    kinds = [
        b'{"t":"commit"',
        b'{"t":"call"',
        b'{"t":"blob"',
        b'{"t":"context_evicted"',
        b'{"t":"seal"',
    ]
    at = [i for i, line in enumerate(lines) if line.startswith(tuple(kinds))]
    path = tmp_path / "run.jsonl"

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def edited(data: st.DataObject) -> None:
        copy = list(lines)
        for i in data.draw(st.lists(st.sampled_from(at), min_size=1, max_size=3)):
            copy[i] = edited_line(data, copy[i].rstrip(b"\n")) + b"\n"
        path.write_bytes(b"".join(copy))
        with monkeypatch.context() as m:
            _same(path, m, whole=False)

    edited()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_a_call_s_tool_changes_are_from_the_agent_s_call_before(sample: Path) -> None:
    """Calls that send the same tools list share its names: the changes each call shows are
    those between its tools and the agent's call before, as the file lists them."""
    with rec.open_recording(sample) as whole:
        calls = overview(whole)["calls"]
        before: list[str] | None = None
        changed = 0
        for c in calls:
            if c["kind"] != "agent":
                continue
            names = [t.name for t in whole.tools(c["call"])]
            added = [t for t in names if t not in (before or [])] if before is not None else []
            removed = [t for t in before or [] if t not in names]
            assert (c["tools_added"], c["tools_removed"]) == (added, removed)
            changed += bool(added or removed)
            before = names
    if sample.stem in ("sample-trip", "sample-trip-rain"):
        assert changed


@pytest.mark.parametrize("k", [b"-0", b"0", b"7"])
def test_a_tool_s_k_written_any_way_is_indexed_as_parsing_indexes_it(
    k: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index names a tool call ``name#k`` with k as the parsed integer: ``-0`` is 0."""
    lines = by_ref(SAMPLES[0])
    at = next(i for i, line in enumerate(lines) if TOOL_COMMIT.fullmatch(line.rstrip(b"\n")))
    lines[at] = re.sub(rb'"k":-?\d+', b'"k":' + k, lines[at], count=1)
    assert TOOL_COMMIT.fullmatch(lines[at].rstrip(b"\n"))
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(lines))
    tools = _same(path, monkeypatch, whole=False)[3][6]
    assert any(key.endswith(f"#{int(k)}") for key in tools)


_CALL_EDITS = [
    (rb'"model":"[^"]*",', b""),  # the frame left to the call before
    (rb'"system":"[^"]*",', b""),
    (rb'"system":"[^"]*"', b'"system":""'),
    (rb"\}$", b',"system":""}'),  # a key given twice: the last is the record's
    (rb"\}$", b',"call":1}'),
    (rb'"call":\d+', b'"call":-1'),
    (rb'"call":\d+', b'"call":12345678901234567890123'),
    (rb'"call":\d+', b'"call":true'),
    (rb'"call":\d+', b'"call":2e0'),
    (rb'"hash":', b'"params":{"system":"x","t":1.5e300},"hash":'),
    (rb'"hash":', b'"at":1e400,"hash":'),
    (rb'"rsid":"', b'"rsid":"\xc3\xa9'),
    (rb'"rsid":"', b'"rsid":"\\u00e9'),
    (rb'"window":\[', b'"window":[[1,1.0],'),
]
"""Edits that take a call just outside the shape typed in one decode, or keep it in."""


@pytest.mark.parametrize("sample", ["sample-compaction", "sample-trip"])
def test_an_edited_call_reads_as_a_parsed_one(
    sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's line changed (its frame left out or said twice, its number out of range or of
    another type, escapes, bytes that are not ASCII, a few bytes at random): the view, the
    problems and the index are those of the walk that parses every line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lines = by_ref(ROOT / "recordings" / f"{sample}.jsonl")
    with rec.open_recording(ROOT / "recordings" / f"{sample}.jsonl") as whole:
        # the calls typed in one decode, edited
        at = [
            i
            for i, line in enumerate(lines)
            if line.startswith(b'{"t":"call"') and whole._typed_call(i, line.rstrip(b"\n"))
        ]
    assert at
    path = tmp_path / "run.jsonl"

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def edited(data: st.DataObject) -> None:
        copy = list(lines)
        for i in data.draw(st.lists(st.sampled_from(at), min_size=1, max_size=3)):
            line = copy[i].rstrip(b"\n")
            for old, new in data.draw(st.lists(st.sampled_from(_CALL_EDITS), max_size=2)):
                line = re.sub(old, lambda _, new=new: new, line, count=1)
            if data.draw(st.booleans()):
                line = edited_line(data, line)
            copy[i] = line + b"\n"
        path.write_bytes(b"".join(copy))
        with monkeypatch.context() as m:
            _same(path, m, whole=False)

    edited()


def test_lines_over_the_limit_are_passed_over_as_ever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader opened with a small limit: each line longer, blobs and commits alike (one just
    over it, one at it), is reported and skipped by the view's walk as by the others."""
    lines = by_ref(SAMPLES[0])
    limit = len(lines[0]) - 1  # the header at it
    pad = b'{"t":"future","pad":"'
    for size in (limit, limit + 1):  # a line at the limit, and one over it by a byte
        lines.insert(5, pad + b"x" * (size - len(pad) - 2) + b'"}\n')
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(lines))
    problems = _same(path, monkeypatch, max_line=limit)[1]
    over = sum(len(line) - 1 > limit for line in lines)
    assert over and sum("over the" in p for p in problems) == over


@pytest.mark.parametrize(
    "line",
    [
        b'{"t":"seal","h":"Yl_8Gr1SeJJ-ol5EOGDAC!"}',  # 42 bytes, not an id
        b'{"t":"seal","h":"Yl_8Gr1SeJJ-ol5EOGDACA"} ',
        b'{"t":"seal","h":"Yl_8Gr1SeJJ-ol5EOGDAC"}',
        b'{"t":"seal","H":"Yl_8Gr1SeJJ-ol5EOGDACA"}',
        b'{"t":"blob","id":"2Ixn7A3X_Bt2Y7yN8x3-ng","value":1}x',
        b'{"t":"blob","id":"2Ixn7A3X_Bt2Y7yN8x3-ng","value":1} ',
        b'{"t":"blob","id":"2Ixn7A3X_Bt2Y7yN8x3-ng"}',
        b'{"t":"context_evicted","rsid":"w#1","iter":1,"fold":1,"message":2,"hash":"Q"} ',
        b'{"t":"commit","seq":1}',
        b'{"t":"call"}',
    ],
)
def test_lines_just_outside_the_shapes_read_as_parsed(
    line: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that start as a seal, a blob, an eviction, a commit or a call as af writes them
    and are not one: each read as a parse reads it (the same kinds, problems and view), none
    taken by its bytes."""
    lines = by_ref(SAMPLES[0])
    lines[5:5] = [line + b"\n"]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(lines))
    _, problems, _, index = _same(path, monkeypatch, whole=False)
    assert index[0][5] not in (_reader._SEALED, _reader._EVICTED)
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        assert any(p.startswith("line 6: not valid JSON") for p in problems)


def test_each_tool_line_shows_its_own_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tool lines in a row with statuses of every kind, some as the line before: each result
    shows its own, as the walk that parses every line shows it."""
    outcomes = [b"ok", b"error", b"error", b"rejected", b"ok", b"denied"]
    results = [b"success", b"failure", b"failure", b"success", b"absent", b"denied"]
    lines, n = [], 0
    for sample in SAMPLES:
        for line in by_ref(sample):
            if TOOL_COMMIT.fullmatch(line.rstrip(b"\n")):
                outcome, result = outcomes[n % len(outcomes)], results[(n // 2) % len(results)]
                line = re.sub(rb'"status":"\w+"', b'"status":"' + outcome + b'"', line)
                line = re.sub(rb'"result_status":"\w+"', b'"result_status":"' + result + b'"', line)
                assert TOOL_COMMIT.fullmatch(line.rstrip(b"\n"))
                n += 1
            lines.append(line)
        path = tmp_path / sample.name
        path.write_bytes(b"".join(lines))
        lines = []
        _same(path, monkeypatch, whole=False)
        with rec.open_recording(path, index=False) as walk:
            given = [r for p in run_view(walk) if p.kind == "call" for r in p.data.results]
        for r in given:
            assert r.shown == shown_status({"status": r.status, "result_status": r.result_status})
        assert len({r.shown for r in given}) > 1 or len(given) < 2
    assert n > len(outcomes)
