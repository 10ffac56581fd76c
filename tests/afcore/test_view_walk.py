"""The walk of a run's view (``af show``) takes the lines af writes in a known shape by their bytes
or by one typed decode, and gives the records itself as it indexes the file: what it gives, the
problems it reports and the index it leaves are what parsing and converting every line gives,
whatever was edited."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from afcore import recording as rec
from afcore.readmodel import overview
from afcore.readmodel._run import _READ
from afcore.recording import _reader
from afcore.recording._reader import TOOL_COMMIT, Recording
from tests.afcore.byte_edits import edited as edited_line
from tests.afcore.test_verify_walk import by_ref

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "recordings").glob("sample-*.jsonl"))


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """No commit taken by its bytes or typed in one decode: each parsed and converted."""
    monkeypatch.setattr(_reader, "TOOL_COMMIT", re.compile(b"(?!)"))
    monkeypatch.setattr(Recording, "_typed_commit", lambda self, i, raw: None)


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


def _read(path: Path, *, index: bool = False) -> tuple[Any, ...]:
    """The run's view as one JSON object, the problems, the torn tail, and the index the walk
    leaves; each line, as the walk gives it, read back from the file by the index as it
    stands then."""
    lines = path.read_bytes().split(b"\n")
    with rec.open_recording(path, index=index) as walk:
        for n, _ in walk.records(blobs=False, seals=False, only=_READ, tool_lines=True):
            assert walk.line_bytes(n) == lines[n - 1]
        walk.problems.clear()
    with rec.open_recording(path, index=index) as walk:
        view = overview(walk)
        return view, [str(p) for p in walk.problems], walk.torn_tail, _index(walk)


def _same(path: Path, monkeypatch: pytest.MonkeyPatch, *, whole: bool = True) -> tuple[Any, ...]:
    """``_read`` of ``path`` by the view's walk, having checked that the walk that parses every
    line says the same, and (``whole``) a whole open too: it indexes every line first, then
    reads the records from the index (a walk finds only the blobs it passed: on a file
    edited at random the two may differ, as they always have)."""
    fast = _read(path)
    with monkeypatch.context() as m:
        _general(m)
        assert _read(path) == fast
    if whole:
        assert _read(path, index=True) == fast
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


@pytest.mark.parametrize("sample", SAMPLES[:2], ids=lambda p: p.stem)
def test_an_edited_commit_reads_as_a_parsed_one(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few bytes of a commit changed, of a tool's commit, of a blob or an eviction: the view,
    the problems and the index are those of the walk that parses every line."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lines = by_ref(sample)
    kinds = [b'{"t":"commit"', b'{"t":"blob"', b'{"t":"context_evicted"', b'{"t":"seal"']
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
