"""A run's view reads a tool's commit in af's common shape by its bytes (``ToolLine``): what it
takes is what parsing the line gives, and a line that only looks like one reads as ever."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import orjson
import pytest

from afcore import recording as rec
from afcore.readmodel import overview
from afcore.recording import _reader
from afcore.recording._reader import (
    TOOL_COMMIT,
    ToolLine,
    _as_text,
    _Index,
    _index_tool_commit,
    _tool_line,
)
from afcore.recording._structs import Commit
from tests.afcore.byte_edits import edited as edited_line

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"


def _by_ref(path: Path) -> list[bytes]:
    """The sample's lines with each tool's message moved into a blob line before its commit,
    as af writes a long tool result."""
    out = []
    for n, line in enumerate(path.read_bytes().splitlines(keepends=True)):
        data = orjson.loads(line)
        if data.get("t") == "commit" and data.get("tool") and data.get("writes"):
            write = data["writes"][0]
            if "value" in write:
                ref = f"{n:06d}tool-message-ref".replace("-", "_")[:22]
                blob = {"t": "blob", "id": ref, "value": write.pop("value")}
                write["ref"] = ref
                if isinstance(data["tool"].get("ms"), int):
                    data["tool"]["ms"] += 0.5
                data["tool"].setdefault("result_status", "success")
                out.append(orjson.dumps(blob) + b"\n")
                line = orjson.dumps(data) + b"\n"
        out.append(line)
    return out


def _taken(line: bytes) -> ToolLine:
    """``line`` as a run's view takes it (a tool's commit in the common shape), read into a
    fresh index."""
    found = _as_text(TOOL_COMMIT).fullmatch(line.decode("latin-1"))
    assert found is not None
    return _tool_line(_Index(), 0, found.groups())


def _write(tmp_path: Path, lines: list[bytes], name: str = "run.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(lines))
    return path


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """No line taken by its bytes: every tool commit parsed and read as its record."""
    monkeypatch.setattr(_reader, "TOOL_COMMIT", re.compile(b"(?!)"))


def _read(path: Path) -> tuple[dict[str, object], list[str], list[str]]:
    with rec.open_recording(path, index=False) as walk:
        view = overview(walk)
        kinds = [walk.kind(n) for n in range(1, walk.line_count + 1)]
        return view, [str(p) for p in walk.problems], kinds


@pytest.mark.parametrize("sample", ["sample-trip.jsonl", "sample-compaction.jsonl"])
def test_a_tool_line_holds_what_its_record_holds(
    sample: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _by_ref(SAMPLES / sample)
    taken = [line for line in lines if TOOL_COMMIT.fullmatch(line.rstrip(b"\n"))]
    assert len(taken) >= 5
    for line in taken:
        found = TOOL_COMMIT.fullmatch(line.rstrip(b"\n"))
        assert found is not None
        record = msgspec.convert(orjson.loads(line), Commit)
        assert record.tool is not None
        tool = record.tool
        assert _taken(line.rstrip(b"\n")) == ToolLine(
            record.iter,
            str(record.writes[0].ref),
            tool.name,
            tool.k,
            tool.call_id,
            tool.status,
            tool.ms,
            str(tool.result_status),
        )
    path = _write(tmp_path, lines)
    fast = _read(path)
    _general(monkeypatch)
    assert _read(path) == fast
    with rec.open_recording(path) as whole:  # the index a whole open makes
        assert [whole.kind(n) for n in range(1, whole.line_count + 1)] == fast[2]
        assert whole.tool_line("weather#1" if "trip" in sample else "search_library#1")


_COMMON = (
    b'{"t":"commit","seq":5,"rsid":"tool:search#3","iter":1,"reads":[["reply:1",4]],'
    b'"writes":[{"key":"message:3","ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"}],"tool":{"name":"search",'
    b'"k":1,"call_id":"c1","status":"ok","ms":4.693,"result_status":"success"}}'
)


@pytest.mark.parametrize(
    "edit",
    [
        (b'"ms":4.693', b'"ms":4'),  # an integer: the record holds 4.0, the line's own says 4
        (b'"ms":4.693', b'"ms":4.6e2'),
        (b'"ms":4.693', b'"ms":"4.693"'),
        (b'"ms":4.693', b'"ms":04.693'),  # not JSON
        (b'"name":"search"', b'"name":"se\\u001barch"'),
        (b'"name":"search"', b'"name":"s\xc3\xa9arch"'),
        (b'"name":"search"', b'"name":"s\xffearch"'),  # not UTF-8
        (b'"call_id":"c1"', b'"call_id":7'),
        (b'"status":"ok"', b'"status":"fine"'),  # not a status: a bad record
        (b'"result_status":"success"', b'"result_status":"absent"'),
        (b',"result_status":"success"', b""),
        (b'"message:3"', b'"message:03"'),
        (b'"message:3"', b'"message:-3"'),
        (b'"message:3"', b'"limits:3"'),
        (b'"ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"', b'"ref":"nowhere"'),  # no such blob: a note
        (b'"iter":1', b'"iter":99'),  # no call of that iteration: not shown
        (b'"iter":1', b'"iter":123456789012345678901'),
        (b'"k":1', b'"k":-1'),
        (b'"reads":[["reply:1",4]]', b'"reads":[]'),
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1",4],]'),  # not JSON
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1"]]'),
        (b'"rsid":"tool:search#3"', b'"rsid":"inject#3"'),  # not a tool's stage
        (b'"rsid":"tool:search#3"', b'"rsid":"tool:search#3","stage":"inject"'),
        (b"}}", b',"source":"mcp:files"}}'),  # said in a note
        (b"}}", b'},"extra":1}'),
        (b"}}", b"}} "),
        (b'{"t":"commit",', b'{"t":"commit" ,'),
        (b'"seq":5', b'"seq":5,"seq":6'),
    ],
)
def test_a_tool_commit_not_quite_common_reads_as_ever(
    edit: tuple[bytes, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that look like a common tool commit, some of them one: each reads as a full
    parse reads it (the same view, problems and kinds)."""
    lines = _by_ref(SAMPLES / "sample-trip.jsonl")
    at = next(i for i, line in enumerate(lines) if TOOL_COMMIT.fullmatch(line.rstrip(b"\n")))
    old, new = edit
    assert old in _COMMON
    assert TOOL_COMMIT.fullmatch(_COMMON)
    edited = _COMMON.replace(old, new, 1)
    blob = b'{"t":"blob","id":"2Ixn7A3X_Bt2Y7yN8x3-ng","value":{"content":"found it"}}\n'
    lines[at + 1 : at + 1] = [blob, _COMMON + b"\n", edited + b"\n", _COMMON + b"\n"]
    path = _write(tmp_path, lines)
    fast = _read(path)
    _general(monkeypatch)
    assert _read(path) == fast
    results = [r for c in fast[0]["calls"] for r in c["results"]]  # type: ignore[attr-defined]
    assert sum(r.get("content") == "found it" for r in results) >= 2


def test_only_valid_tool_commits_are_taken_by_their_bytes() -> None:
    """What the common shape takes is valid JSON and a valid commit, whatever bytes of it were
    changed, and its values are the record's."""
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.data())
    def edited(data: st.DataObject) -> None:
        line = edited_line(data, _COMMON)
        found = TOOL_COMMIT.fullmatch(bytes(line))
        if found:
            record = msgspec.convert(orjson.loads(bytes(line)), Commit)
            assert record.tool is not None
            got = _taken(bytes(line))
            assert (got.iter, got.ref, got.name, got.k) == (
                record.iter,
                record.writes[0].ref,
                record.tool.name,
                record.tool.k,
            )
            assert (got.call_id, got.status, got.ms, got.result_status) == (
                record.tool.call_id,
                record.tool.status,
                record.tool.ms,
                record.tool.result_status,
            )

    edited()


def test_the_shape_names_every_status_the_record_allows() -> None:
    """The common shape's statuses are the record's: a status added to the model is taken too
    (or this fails)."""
    from typing import get_args, get_type_hints

    from afcore.recording._structs import ToolOutcome

    hints = get_type_hints(ToolOutcome)
    statuses = set(get_args(hints["status"]))
    results = {a for arg in get_args(hints["result_status"]) for a in get_args(arg)}
    assert set(_reader._OUTCOME_STATUS.decode().split("|")) == statuses
    assert set(_reader._RESULT_STATUS.decode().split("|")) == results


@pytest.mark.parametrize(
    "ms", ["0.001", "4.693", "0.1", "999.95", "12345.678", "-3.0", "1.00000000000000011"]
)
def test_a_taken_ms_is_the_float_json_gives(ms: str) -> None:
    line = _COMMON.replace(b'"ms":4.693', f'"ms":{ms}'.encode())
    found = TOOL_COMMIT.fullmatch(line)
    assert found is not None
    assert _taken(line).ms == orjson.loads(line)["tool"]["ms"]


def _indexed(idx: _Index) -> tuple[object, ...]:
    return (
        list(idx.commits),
        idx.messages.numbers(),
        list(idx.tool_commits),
        dict(idx.tools),
        bytes(idx.kinds),
    )


def test_the_shape_as_text_takes_what_it_takes_as_bytes() -> None:
    """A run's view matches the shape on the line's text (latin-1): it takes the lines the
    bytes' shape takes, whatever bytes were changed (not ASCII, not UTF-8 too), and indexes
    them as the checking walk indexes them from the bytes."""
    from hypothesis import given
    from hypothesis import strategies as st

    text = _as_text(TOOL_COMMIT)

    @given(st.data())
    def edited(data: st.DataObject) -> None:
        line = edited_line(data, _COMMON)
        found = TOOL_COMMIT.fullmatch(line)
        taken = text.fullmatch(line.decode("latin-1"))
        assert (found is None) == (taken is None)
        if found is not None and taken is not None:
            by_bytes, by_text = _Index(), _Index()
            _index_tool_commit(by_bytes, 3, found.groups())
            _tool_line(by_text, 3, taken.groups())
            assert _indexed(by_text) == _indexed(by_bytes)

    edited()
