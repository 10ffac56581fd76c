"""The checking walk of ``af verify`` takes lines af writes in a known shape by their bytes; what
it says of a file is what it says when every line is parsed and converted, whatever was edited.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import recording as rec
from afcore.recording import _reader
from afcore.recording._hashing import V11
from afcore.recording._reader import TOOL_COMMIT, CheckedTool
from afcore.recording._structs import Commit, Write
from afcore.recording._typed import record
from tests.afcore.byte_edits import edited as edited_line
from tests.afcore.test_tamper import _mangled, _verdict
from tests.conftest import reseal

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = [ROOT / "recordings" / f"sample-{name}.jsonl" for name in ("trip", "sliding")]


def by_ref(path: Path) -> list[bytes]:
    """The sample's lines with each tool's message in a blob line before its commit, under its
    id, as af writes a long tool result, and sealed again."""
    out = []
    for line in path.read_bytes().splitlines(keepends=True):
        data = orjson.loads(line)
        if data.get("t") == "commit" and data.get("tool") and data.get("writes"):
            write = data["writes"][0]
            if "value" in write:
                value = write.pop("value")
                write["ref"] = ref = V11.content(value)
                blob = {"t": "blob", "id": ref, "value": value}
                out.append(orjson.dumps(blob, option=orjson.OPT_SORT_KEYS) + b"\n")
                if isinstance(data["tool"].get("ms"), int):
                    data["tool"]["ms"] += 0.5
                data["tool"].setdefault("result_status", "success")
                line = orjson.dumps(data) + b"\n"
        out.append(line)
    return reseal(b"".join(out)).splitlines(keepends=True)


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """No tool commit taken by its bytes: each parsed and converted, as any line."""
    monkeypatch.setattr(_reader, "TOOL_COMMIT", re.compile(b"(?!)"))


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """verify's say on ``path`` from the walk that takes tool commits by their bytes, having
    checked that the walk that parses them, and a reader of the file indexed first, say the
    same."""
    fast = _verdict(path, index=False)
    with monkeypatch.context() as m:
        _general(m)
        assert _verdict(path, index=False) == fast
    assert _verdict(path, index=True) == fast
    return fast


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_af_s_tool_commits_are_taken_by_their_bytes(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's commit with its message by ref comes out of the checking walk as a
    CheckedTool (a change to the walk must not route them past it), and the file verifies."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(by_ref(sample)))
    with rec.open_recording(path, index=False) as walk:
        kinds = [type(r) for _, r in walk.records(blobs="checked", seals=False, tool_lines=True)]
    assert kinds.count(CheckedTool) >= 5
    assert Commit in kinds  # the others (inject, window, seed) as their records
    verdict = _both(path, monkeypatch)
    assert verdict[0]["ok"], verdict


def test_the_other_walks_give_tool_commits_as_records(tmp_path: Path) -> None:
    """Only a walk that asks for them gets CheckedTools (a continuing writer reads Commits)."""
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(by_ref(SAMPLES[0])))
    with rec.open_recording(path, index=False) as walk:
        assert not any(isinstance(r, CheckedTool) for _, r in walk.records(blobs="checked"))


_COMMON = (
    b'{"t":"commit","seq":5,"rsid":"tool:search#3","iter":1,"reads":[["reply:1",4]],'
    b'"writes":[{"key":"message:3","ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"}],"tool":{"name":"search",'
    b'"k":1,"call_id":"c1","status":"ok","ms":4.693,"result_status":"success"}}'
)


def _as_record(line: bytes) -> Any:
    """The line as a reader that parses it takes it (a 1.1 commit's stage from its rsid)."""
    data = orjson.loads(line)
    data.setdefault("stage", data["rsid"].partition("#")[0])
    return record(data)


def test_what_the_shape_takes_is_a_tool_commit_with_its_values() -> None:
    """A line the shape takes is valid JSON and a valid commit, whatever bytes of it were
    changed: its stage a tool's, its one write the message by ref, and the CheckedTool holds
    its values."""
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.data())
    def edited(data: st.DataObject) -> None:
        line = edited_line(data, _COMMON)
        found = TOOL_COMMIT.fullmatch(line)
        if found is None:
            return
        commit = _as_record(line)
        assert isinstance(commit, Commit)
        assert commit.stage.startswith("tool:")
        assert commit.tool is not None
        seq, reads, n, ref = int(found[1]), orjson.loads(found[3]), int(found[4]), found[5]
        assert (seq, [tuple(r) for r in reads]) == (commit.seq, commit.reads)
        assert commit.writes == [Write(key=f"message:{n}", ref=ref.decode())]
        assert f"{found[6].decode()}#{int(found[7])}" == f"{commit.tool.name}#{commit.tool.k}"

    edited()


@pytest.mark.parametrize(
    "edit",
    [
        (b'"seq":5', b'"seq":6'),
        (b'"seq":5', b'"seq":-5'),
        (b'"seq":5', b'"seq":5.0'),
        (b'"seq":5', b'"seq":"5"'),
        (b'"seq":5', b'"seq":123456789012345678901'),
        (b'"message:3"', b'"message:03"'),
        (b'"message:3"', b'"message:4"'),
        (b'"message:3"', b'"message:0"'),
        (b'"message:3"', b'"message:999999999999999999"'),
        (b'"message:3"', b'"message:x"'),
        (b'"message:3"', b'"fold:3"'),
        (b'"ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"', b'"ref":"nowhere"'),
        (b'"ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"', b'"ref":"2Ixn7A3X_Bt2Y7yN8x3-ng","value":1'),
        (b'"reads":[["reply:1",4]]', b'"reads":[]'),
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1",4],["reply:1",4]]'),
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1",99]]'),
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1",-0]]'),
        (b'"reads":[["reply:1",4]]', b'"reads":[["reply:1"]]'),
        (b'"rsid":"tool:search#3"', b'"rsid":"inject#3"'),
        (b'"rsid":"tool:search#3"', b'"rsid":"tool:search#3","stage":"inject"'),
        (b'"status":"ok"', b'"status":"fine"'),
        (b'"k":1', b'"k":-0'),
        (b"}}", b'},"extra":1}'),
        (b'"seq":5', b'"seq":5,"seq":6'),
    ],
)
@pytest.mark.parametrize("resealed", [False, True])
def test_a_tool_commit_edited_says_what_a_parsed_one_says(
    edit: tuple[bytes, bytes], resealed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool commit changed in its bytes, whether the shape still takes it or not: verify
    says what it says when the line is parsed."""
    lines = by_ref(SAMPLES[0])
    at = next(i for i, x in enumerate(lines) if TOOL_COMMIT.fullmatch(x.rstrip(b"\n")))
    common = lines[at].rstrip(b"\n")
    old, new = edit
    line = _COMMON.replace(old, new, 1)
    assert line != _COMMON
    # The same edit on the sample's own first tool commit.
    found = TOOL_COMMIT.fullmatch(common)
    assert found is not None
    ours = {
        b'"seq":5': b'"seq":' + found[1],
        b'"message:3"': b'"message:' + found[4] + b'"',
        b'"ref":"2Ixn7A3X_Bt2Y7yN8x3-ng"': b'"ref":"' + found[5] + b'"',
        b'"reads":[["reply:1",4]]': b'"reads":' + found[3],
        b'"rsid":"tool:search#3"': common[common.index(b'"rsid":') : common.index(b',"iter"')],
        b'"k":1': b'"k":' + found[7],
    }
    mine = ours.get(old, old)
    if mine not in common:
        pytest.skip("the sample's commit says it otherwise")
    if old in ours:
        new = new.replace(old, mine)
    lines[at] = common.replace(mine, new, 1) + b"\n"
    data = b"".join(lines)
    path = tmp_path / "edited.jsonl"
    path.write_bytes(reseal(data) if resealed else data)
    _both(path, monkeypatch)


@pytest.mark.parametrize("seed", range(64))
def test_verify_says_the_same_of_an_edited_file_whichever_way_it_reads_tool_commits(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line lost, doubled, moved or cut short, a value or a byte changed, a seal forged, the
    file torn, sealed again or not: verify says the same taking tool commits by their bytes
    or parsing them, and the same as of the file indexed first."""
    lines = by_ref(SAMPLES[seed % len(SAMPLES)])
    tools = [i for i, x in enumerate(lines) if TOOL_COMMIT.fullmatch(x.rstrip(b"\n"))]
    if seed % 3 == 0:
        # Near a tool commit: the lines the fast path reads and those around it.
        at = tools[seed % len(tools)]
        lines = [*lines[: at - 1], *_mangled(lines[at - 1 : at + 2], seed).splitlines(True)]
        lines += by_ref(SAMPLES[seed % len(SAMPLES)])[at + 2 :]
        data = b"".join(lines)
    else:
        data = _mangled(lines, seed)
    for resealed in (False, True):
        path = tmp_path / f"edited-{resealed}.jsonl"
        path.write_bytes(reseal(data) if resealed else data)
        _both(path, monkeypatch)


def _fold_as_ever(live: list[int], removed: list[int], numbers: list[int]) -> tuple[Any, ...]:
    """What a fold leaves, worked out one message at a time (the window check's way before
    it took a fold's stretch whole): the live window, its runs, the absent messages."""
    from itertools import pairwise

    gone = set(removed)
    absent = [n for n in removed if n not in set(live)]
    at = next((i for i, n in enumerate(live) if n in gone), len(live))
    kept = [n for n in live if n not in gone]
    now = kept[:at] + [n for n in numbers if n not in gone] + kept[at:]
    runs: list[tuple[int, int]] = []
    for a, b in pairwise([None, *now]):
        if a is not None and b == a + 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    return now, runs, absent


def test_a_fold_leaves_the_window_it_left_taken_whole_or_one_by_one() -> None:
    """The window check takes the stretch a fold removes whole when it lies together in the
    live window; whatever the window and the fold (duplicates, numbers not in it, a stretch
    in pieces), what it leaves and what it reports are what taking them one by one gives."""
    from hypothesis import given
    from hypothesis import strategies as st

    from afcore.recording._window_check import WindowReplay, _short

    numbers = st.lists(st.integers(0, 12), max_size=14)

    @given(numbers, st.data(), st.lists(st.integers(0, 14), max_size=2))
    def folded(live: list[int], data: st.DataObject, summaries: list[int]) -> None:
        if live and data.draw(st.booleans()):  # a stretch of the window, as af folds
            a = data.draw(st.integers(0, len(live) - 1))
            removed = live[a : data.draw(st.integers(a, len(live)))]
        else:
            removed = data.draw(numbers)
        ranges = [[n, n] for n in removed]
        fold = Write(key="fold:1", ref="f")
        check = WindowReplay(lambda _: {"messages": ranges}, lambda _: None)
        check.join(list(live))
        commit = Commit(seq=1, rsid="window#1", stage="window", iter=1, writes=[fold])
        problems = check.commit(commit, summaries)
        now, runs, absent = _fold_as_ever(live, removed, summaries)
        assert (check.live, check._runs) == (now, runs)
        said = f"fold:1 removes messages {_short(absent)}, not in the window"
        assert problems == ([said] if absent else [])
        assert check.folds[1] == set(removed)

    folded()


def test_a_blob_is_keyed_alike_by_its_id_as_bytes_and_as_text() -> None:
    """The index keys a blob by its id as a walk reads it from the line (bytes) and a reader
    finds it by the ref a record names (text): one key for both, within its 36 bits, and an
    id whose first six characters are not all base64url digits is none (ValueError)."""
    from hypothesis import given
    from hypothesis import strategies as st

    from afcore.recording._reader import _prefix

    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ids = st.text(alphabet=digits + '"\\é+/= ', max_size=24) | st.text(max_size=24)

    @given(ids)
    def keyed(ref: str) -> None:
        valid = all(c in digits for c in ref[:6])
        try:
            key = _prefix(ref, V11.size)
        except ValueError:
            assert not valid
            with pytest.raises(ValueError):
                _prefix(ref.encode("utf-8", "surrogatepass"), V11.size)
            return
        assert valid
        assert key == _prefix(ref.encode(), V11.size)
        assert 0 <= key < 2**36

    keyed()


def test_walks_index_blobs_by_their_ids_whatever_the_digits() -> None:
    """Blob lines in af's layout whose ids hold any characters: every walk (a run's view, a
    check, a whole open) takes a line as a blob by its bytes exactly when its id is one (see
    ``_prefix``), keys it as ``_prefix`` keys the id as text, and finds it by that ref."""
    import tempfile

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from afcore.readmodel._run import _READ
    from afcore.recording._reader import _LINE_BITS, _prefix

    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    head = by_ref(SAMPLES[0])[:1]
    ids = st.text(alphabet=digits + "+/=é#", min_size=22, max_size=22)

    @settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(ids, min_size=1, max_size=8, unique=True))
    def walked(refs: list[str]) -> None:
        lines = [*head]
        for n, ref in enumerate(refs):
            blob = {"t": "blob", "id": ref, "value": f"v{n}"}
            lines.append(orjson.dumps(blob) + b"\n")
        valid = {ref: all(c in digits for c in ref[:6]) for ref in refs}
        keys = sorted(
            (_prefix(ref, V11.size) << _LINE_BITS) | (n + 1)
            for n, ref in enumerate(refs)
            if valid[ref]
        )
        kinds = b"h" + bytes(ord("b") if valid[ref] else ord("!") for ref in refs)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "run.jsonl"
            path.write_bytes(b"".join(lines))
            for how in ("view", "check", "whole"):
                with rec.open_recording(path, index=how == "whole") as r:
                    if how == "view":
                        for _ in r.records(blobs=False, seals=False, only=_READ, tool_lines=True):
                            pass
                    elif how == "check":
                        for _ in r.records(blobs="checked", seals=False, tool_lines=True):
                            pass
                    assert bytes(r._index.kinds) == kinds, how
                    assert list(r._index.blob_keys) == keys, how
                    for n, ref in enumerate(refs):
                        if valid[ref]:
                            assert r.blob(ref) == f"v{n}", how

    walked()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.stem)
def test_the_checking_walk_indexes_as_a_whole_open_does(sample: Path, tmp_path: Path) -> None:
    """What verify's walk leaves indexed is what opening the file whole indexes: every blob
    found under its id, every line of its kind."""
    lines = by_ref(sample)
    tool = next(x for x in lines if TOOL_COMMIT.fullmatch(x.rstrip(b"\n")))
    minus = re.sub(rb'"k":\d+', b'"k":-0', tool).replace(b'"name":"', b'"name":"x', 1)
    assert TOOL_COMMIT.fullmatch(minus.rstrip(b"\n"))
    path = tmp_path / "run.jsonl"
    # A blob stored twice (a second under its id), a tool's k written -0.
    path.write_bytes(b"".join([*lines, lines[3], minus]))
    with rec.open_recording(path, index=False) as walked, rec.open_recording(path) as whole:
        rec.verify(walked)
        assert walked._index.blob_keys == whole._index.blob_keys
        assert walked._index.kinds == whole._index.kinds
        assert walked._index.starts == whole._index.starts
        assert walked._index.tools == whole._index.tools
        assert walked._index.tool_commits == whole._index.tool_commits
        assert walked._index.commits == whole._index.commits
        assert walked._index.messages.dense == whole._index.messages.dense
