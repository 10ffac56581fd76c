from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from afcore import recording as rec
from afcore.errors import RecordingFormatError, RunNotFoundError, UnsupportedVersionError
from afcore.recording import Call, Reply, RunEnd, UnknownRecord
from tests.afcore.byte_edits import edited as edited_line

FIXTURES = Path(__file__).parent.parent / "fixtures"
VERSIONS = ("v1.0", "v1.1")
"""The frozen fixtures of each version: a reader reads what every version of major 1 wrote."""


@pytest.fixture(params=VERSIONS)
def fixtures(request: pytest.FixtureRequest) -> Path:
    return FIXTURES / str(request.param)


def test_valid_fixture_reads_and_verifies(fixtures: Path) -> None:
    with rec.open_recording(fixtures / "valid.jsonl") as r:
        assert r.header.agent.name == "orders"
        assert r.problems == [] and r.torn_tail is None
        assert r.call_count == 2 and r.message_count == 4
        assert isinstance(r.call(1), Call) and isinstance(r.reply(2), Reply)
        assert r.message(1) == {"role": "user", "content": "Where is order A-1?"}
        # 1.1 folded the route stage into the reply: one stage fewer before the tool's.
        assert r.message_writer(3) == (
            "tool:lookup#3" if "v1.0" in str(fixtures) else "tool:lookup#2"
        )
        end = r.end
        assert isinstance(end, RunEnd) and end.status == "answer"
        assert r.value(end.answer) == "Order A-1 has shipped."
        report = rec.verify(r)
    assert report.ok and report.verified == 2


def test_torn_last_line_is_reported_and_the_rest_read(fixtures: Path) -> None:
    with rec.open_recording(fixtures / "torn.jsonl") as r:
        assert r.torn_tail is not None
        assert r.torn_tail.line == r.line_count + 1
        assert r.end is None  # the torn line was the run_end
        assert r.call_count == 2 and r.check_call(2).ok
        report = rec.verify(r)
    assert not report.ok and report.torn_tail is not None
    assert report.verified == 2


def test_a_raw_walk_indexes_as_it_goes_and_passes_over_what_is_not_a_record(
    fixtures: Path,
) -> None:
    for name in ("valid.jsonl", "torn.jsonl", "malformed.jsonl"):
        with rec.open_recording(fixtures / name) as whole:
            kinds = {line: whole.kind(line) for line in range(1, whole.line_count + 1)}
        with rec.open_recording(fixtures / name, index=False) as r:
            assert not r.complete
            walked = list(r.raw_records())
            assert r.complete and r.line_count == len(kinds)
        # Every record but the blobs, once, in order, as written; no blob, no bad line.
        assert [line for line, _ in walked] == [
            line for line, kind in kinds.items() if kind not in ("blob", "bad", "blank")
        ]
        assert all(data["t"] == kinds[line] or kinds[line] == "other" for line, data in walked)
        assert walked[0][1]["t"] == "header"


@pytest.mark.parametrize(
    "name", ["sample-sliding.jsonl", "sample-compaction.jsonl", "sample-trip.jsonl"]
)
def test_a_walk_indexes_the_lines_it_does_not_give(name: str) -> None:
    """A run's view asks for no blobs, seals or evictions: the walk passes them over unparsed
    and gives none of them, yet indexes each (the same index, and the same problems, as a
    whole open makes)."""
    from afcore.readmodel._run import _READ

    path = Path(__file__).resolve().parents[2] / "recordings" / name
    with rec.open_recording(path) as whole:
        kinds = [whole.kind(line) for line in range(1, whole.line_count + 1)]
        seals = whole.seal_lines
        problems = [str(p) for p in whole.problems]
        refs = {
            whole.raw(line)["id"]: whole.blob(whole.raw(line)["id"])
            for line, kind in enumerate(kinds, 1)
            if kind == "blob"
        }
    with rec.open_recording(path, index=False) as walk:
        given = [line for line, _ in walk.records(blobs=False, seals=False, only=_READ)]
        assert walk.complete
        assert [walk.kind(line) for line in range(1, walk.line_count + 1)] == kinds
        assert walk.seal_lines == seals and [str(p) for p in walk.problems] == problems
        assert {ref: walk.blob(ref) for ref in refs} == refs
    lines = path.read_bytes().splitlines()
    evicted = {n for n, line in enumerate(lines, 1) if line.startswith(b'{"t":"context_evicted"')}
    assert seals and refs and (evicted or "trip" in name)
    assert not {kinds[line - 1] for line in given} & {"blob", "seal"}
    assert not evicted & set(given)


def test_malformed_line_is_reported_by_line_number(fixtures: Path) -> None:
    with rec.open_recording(fixtures / "malformed.jsonl") as r:
        assert [p.line for p in r.problems] == [5]
        assert "not valid JSON" in r.problems[0].message
        report = rec.verify(r)
    assert not report.ok
    assert any(p.line == 5 for p in report.problems)


def test_unknown_record_type_is_kept_opaque_and_is_not_a_failure(fixtures: Path) -> None:
    with rec.open_recording(fixtures / "unknown_record.jsonl") as r:
        assert r.unknown_records == 1
        kept = [x for _, x in r.records() if isinstance(x, UnknownRecord)]
        assert kept[0].t == "hologram" and kept[0].fields == {"payload": {"x": 1}}
        report = rec.verify(r)
    assert report.ok and report.unknown_records == 1


def test_newer_major_version_is_refused_clearly(fixtures: Path) -> None:
    with pytest.raises(UnsupportedVersionError, match=r"version 2\.0, newer than this af reads"):
        rec.open_recording(fixtures / "future_version.jsonl")


@pytest.mark.parametrize(
    "content, words",
    [
        (b"Dear diary,\nthe agent said hello.\n", "not an af recording: line 1: not valid JSON"),
        (b"", "is empty"),
        (b'{"t":"commit","seq":1}\n', "not an af.recording header"),
        (b"[1, 2, 3]\n", "not a record"),
        (b"\x00\xff\xfe garbage \x1b[31m\n", "not an af recording"),
    ],
)
def test_files_that_are_not_recordings(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(RecordingFormatError, match=words) as info:
        rec.open_recording(path)
    assert info.value.path == path


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(RecordingFormatError, match="no such file"):
        rec.open_recording(tmp_path / "nope.jsonl")
    with pytest.raises(RecordingFormatError, match="is a folder"):
        rec.open_recording(tmp_path)


def test_a_huge_line_is_skipped_without_loading_it(tmp_path: Path, fixtures: Path) -> None:
    path = tmp_path / "huge.jsonl"
    lines = (fixtures / "valid.jsonl").read_bytes().splitlines(keepends=True)
    huge = b'{"t":"blob","id":"x","value":"' + b"A" * (50 * 1024 * 1024) + b'"}\n'
    path.write_bytes(b"".join(lines[:3]) + huge + b"".join(lines[3:]))
    with rec.open_recording(path) as r:
        assert [p.line for p in r.problems] == [4]
        assert "50.0 MB, over the 32.0 MB" in r.problems[0].message
        assert r.call_count == 2 and r.check_call(2).ok
        assert not rec.verify(r).ok


def test_resolve_run_by_path_id_and_prefix(tmp_path: Path, fixtures: Path) -> None:
    for name in ("20260101-000000-000-aaaaaa", "20260101-000000-000-bbbbbb", "20270101-x"):
        shutil.copy(fixtures / "valid.jsonl", tmp_path / f"{name}.jsonl")
    assert rec.resolve_run(str(fixtures / "valid.jsonl")) == fixtures / "valid.jsonl"
    assert rec.resolve_run("2027", tmp_path).name == "20270101-x.jsonl"
    assert rec.resolve_run("20260101-000000-000-aaaaaa", tmp_path).stem.endswith("aaaaaa")
    with pytest.raises(RunNotFoundError, match="matches 2 recordings"):
        rec.resolve_run("2026", tmp_path)
    with pytest.raises(RunNotFoundError, match="starting with '1999'"):
        rec.resolve_run("1999", tmp_path)


def test_call_out_of_range_says_the_range(fixtures: Path) -> None:
    with (
        rec.open_recording(fixtures / "valid.jsonl") as r,
        pytest.raises(IndexError, match="calls 1 to 2"),
    ):
        r.call(3)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"base": "full", "keep": 9, "then": []}, "keeps 9 of 2"),
        ({"base": "full", "keep": -1, "then": []}, "keeps -1"),
        ({"base": "full", "keep": True, "then": []}, "keeps True"),
        ({"base": "delta", "keep": 1, "then": []}, "not based on a full list"),
        ({"base": "full", "keep": 1, "then": "x"}, "not based on a full list"),
        ({"base": 3, "keep": 1, "then": []}, "names no base"),
        ({"keep": 1, "then": []}, "neither a list nor a delta"),
        ("text", "neither a list nor a delta"),
    ],
)
def test_a_malformed_slot_list_delta_is_refused_in_words(value: object, words: str) -> None:
    from afcore.recording._reader import expand_list

    blobs = {
        "full": [{"text": "a"}, {"text": "b"}],
        "delta": {"base": "full", "keep": 1, "then": []},
    }
    assert expand_list({"base": "full", "keep": 1, "then": [{"text": "c"}]}, blobs.__getitem__) == [
        {"text": "a"},
        {"text": "c"},
    ]
    with pytest.raises(ValueError, match=words):
        expand_list(value, blobs.__getitem__)


SAMPLES = Path(__file__).resolve().parents[2] / "recordings"


def _tampered(tmp_path: Path, sample: str) -> list[Path]:
    """A sample, and copies of it broken in the ways a hash check must see: a message's blob
    changed (it no longer hashes to its id), a blob dropped, a window range moved."""
    lines = (SAMPLES / sample).read_bytes().splitlines(keepends=True)
    out = []
    blobs = [i for i, line in enumerate(lines) if line.startswith(b'{"t":"blob"')]
    changed = list(lines)
    changed[blobs[len(blobs) // 2]] = changed[blobs[len(blobs) // 2]].replace(b'"', b'"x', 3)
    dropped = [line for i, line in enumerate(lines) if i != blobs[-3]]
    calls = [i for i, line in enumerate(lines) if line.startswith(b'{"t":"call"')]
    moved = list(lines)
    moved[calls[-1]] = moved[calls[-1]].replace(b'"window":[[1,', b'"window":[[2,')
    for name, content in (("changed", changed), ("dropped", dropped), ("moved", moved)):
        path = tmp_path / f"{name}-{sample}"
        path.write_bytes(b"".join(content))
        out.append(path)
    return [SAMPLES / sample, *out]


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("sample-*.jsonl")))
def test_verify_extends_hashes_and_says_what_a_rebuild_says(sample: str, tmp_path: Path) -> None:
    # verify checks each call from the hashes it has seen, extending the window's hash from
    # the call before's; its verdict must be the reader's, which rebuilds the call whole.
    for path in _tampered(tmp_path, sample):
        with rec.open_recording(path) as r:
            report = rec.verify(r)
            assert [c.call for c in report.checks] == r.call_numbers
            for check in report.checks:
                assert check == r.check_call(check.call), (path.name, check.call)
    with rec.open_recording(SAMPLES / sample) as r:
        assert rec.verify(r).ok


GOVERNED = {"v1.0": "governed-1.3.jsonl", "v1.1": "governed.jsonl"}


def test_a_paused_and_continued_run_reads_and_verifies(fixtures: Path) -> None:
    """1.3's governance folded into 1.1: a run paused by a question and continued in the
    same file reads as one run, from a file saying 1.3 as from one saying 1.1."""
    with rec.open_recording(fixtures / GOVERNED[fixtures.name]) as r:
        types = [x.t for _, x in r.records(blobs=False)]
        assert types.count("run_end") == 2 and types.count("resume") == 1
        assert types.index("pause") < types.index("resume")
        assert [x.status for _, x in r.records(blobs=False) if isinstance(x, RunEnd)] == [
            "paused",
            "answer",
        ]
        end = r.end
        assert isinstance(end, RunEnd) and end.status == "answer"
        assert str(r.value(end.answer)).startswith("Refunded 250; the order came late")
        report = rec.verify(r)
    assert report.ok, [str(p) for p in report.problems]
    assert report.verified == report.calls == 2


@pytest.mark.parametrize("keep", [1 << 30, 2048, 1])
def test_a_walk_resolves_each_ref_as_the_whole_index_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: int
) -> None:
    """A walk takes the blobs it just passed from memory (``keep``: how many bytes of them at
    most; 1: none stay). Either way a ref resolves to what the indexed file says: the first blob
    stored under an id, wherever the walk is."""
    from afcore.recording import _reader

    monkeypatch.setattr(_reader, "RECENT_BYTES", keep)
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    blobs = [i for i, line in enumerate(lines) if line.startswith(b'{"t":"blob",')]
    # Another value under the id of a blob stored later: the first one stored is the value;
    # and one under an id stored before it, which is not.
    early, late = blobs[len(blobs) // 2], blobs[1]
    ids = [lines[i][: lines[i].index(b'","value":')] for i in (early, late)]
    lines.insert(blobs[0], ids[0] + b'","value":"stored first"}\n')
    lines.insert(len(lines) - 1, ids[1] + b'","value":"stored last"}\n')
    path = tmp_path / "twice.jsonl"
    path.write_bytes(b"".join(lines))
    with rec.open_recording(path) as whole:
        assert whole.blob(ids[0][18:].decode()) == "stored first"
        assert whole.blob(ids[1][18:].decode()) != "stored last"
        with rec.open_recording(path, index=False) as walk:
            resolved = 0
            for _, record in walk.records(blobs=False):
                assert sum(len(raw) for _, raw in walk._recent.values()) <= keep
                for w in getattr(record, "writes", None) or []:
                    if w.ref is not None:
                        assert walk.blob(w.ref) == whole.blob(w.ref)
                        resolved += 1
                for ref in (getattr(record, "system", None), getattr(record, "tools", None)):
                    if ref:
                        assert walk.listed(ref) == whole.listed(ref)
                        resolved += 1
            for ref in (i[18:].decode() for i in ids):
                assert walk.blob(ref) == whole.blob(ref)
    assert resolved > 20


_EVICTION = (
    b'{"t":"context_evicted","rsid":"window#31","iter":5,"fold":1,"message":2,'
    b'"hash":"QJsunmuGIpbg9m1xgO2MPg"}'
)


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        (_EVICTION.replace(b'"iter":5', b'"iter":05'), True),  # not JSON
        (_EVICTION.replace(b'"iter":5', b'"iter":"5"'), False),  # as the models coerce it
        (_EVICTION.replace(b'"iter":5', b'"iter":[5]'), True),  # not the record
        (_EVICTION.replace(b'"fold":1', b'"fold":-'), True),
        (_EVICTION.replace(b'"message":2', b'"message":123456789012345678901234567'), True),
        (_EVICTION.replace(b'"rsid":"', b'"rsid":"\\u001b'), False),  # escaped: parsed
        (_EVICTION.replace(b'"rsid":"', b'"rsid":"\xff'), True),  # not UTF-8
        (_EVICTION.replace(b'"rsid":"', b'"rsid":"\xc3\xa9'), False),  # UTF-8: parsed
        (_EVICTION.replace(b',"hash":"QJsunmuGIpbg9m1xgO2MPg"', b""), True),
        (_EVICTION.replace(b'"hash":"', b'"hash":5,"h":"'), True),
        (_EVICTION[:-1] + b',"extra":[1]}', False),
        (_EVICTION + b" ", False),
        (_EVICTION.replace(b"}", b"", 1) + b"\t}", False),
        (b'{"t":"context_evicted"}', True),
    ],
)
def test_a_walk_for_some_records_checks_the_others_as_ever(
    line: bytes, bad: bool, tmp_path: Path
) -> None:
    """A reader that asks for some record types (``only``) is not given the others, which are
    still checked: a bad line among them is reported in the same words, on the same line,
    as a reader given every record is told; af's own evictions are taken by their bytes."""
    lines = (SAMPLES / "sample-compaction.jsonl").read_bytes().splitlines(keepends=True)
    at = len(lines) // 2
    lines[at:at] = [_EVICTION + b"\n", line + b"\n", _EVICTION + b"\n"]
    path = tmp_path / "edited.jsonl"
    path.write_bytes(b"".join(lines))
    wanted = {"call", "reply", "commit"}
    for index in (False, True):
        with rec.open_recording(path, index=index) as every:
            given = [(n, r) for n, r in every.records(blobs=False) if r.t in wanted]
            said = [str(p) for p in every.problems]
            kinds = [every.kind(n) for n in range(1, len(lines) + 1)]
        with rec.open_recording(path, index=index) as some:
            assert list(some.records(blobs=False, only=wanted)) == given
            assert [str(p) for p in some.problems] == said
            assert [some.kind(n) for n in range(1, len(lines) + 1)] == kinds
            assert kinds[at] == kinds[at + 2] == "other"
        assert len(given) > 20
        assert [p.line for p in every.problems] == ([at + 2] if bad else [])


def test_only_lines_that_are_valid_evictions_are_taken_by_their_bytes() -> None:
    """What the eviction shape takes is valid JSON and a valid record, whatever bytes of it
    were changed."""
    import msgspec
    import orjson
    from hypothesis import given
    from hypothesis import strategies as st

    from afcore.recording._reader import EVICTED_LINE
    from afcore.recording._structs import ContextEvicted

    written = [
        line
        for line in (SAMPLES / "sample-compaction.jsonl").read_bytes().splitlines()
        if line.startswith(b'{"t":"context_evicted"')
    ]
    assert written and all(EVICTED_LINE.fullmatch(line) for line in written)

    @given(st.data())
    def edited(data: st.DataObject) -> None:
        line = edited_line(data, data.draw(st.sampled_from([*written, _EVICTION])))
        if EVICTED_LINE.fullmatch(bytes(line)):
            msgspec.convert(orjson.loads(bytes(line)), ContextEvicted)

    edited()
