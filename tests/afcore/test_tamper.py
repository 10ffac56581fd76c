"""The recording is tamper-evident as a whole: every record, not only the calls. A campaign
of edits (a value changed anywhere, a record added, removed or moved, the file cut short)
against real recordings, each of which `verify` must catch; and a run killed at any moment,
whose file verifies up to its last complete record."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, ToolMiddleware, allow, ask, define_tool, mock
from afcore import recording as rec
from afcore.errors import RecordingError
from afcore.messages import Request
from tests.conftest import fixed_recording
from tests.kills import Run, full_size

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = [ROOT / "recordings" / f"sample-{name}.jsonl" for name in ("trip-rain", "trip")]
NO_END = "no run_end record"

LONG_ANSWER = "Refunded, and here is why, at length: " + "the order came late. " * 20


def _governed(folder: Path) -> Path:
    """A run paused by a question and continued in the same file, whose answer is a blob:
    pause, resume, govern stages, usage, a tool's status and timing, an answer blob."""
    paid: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return {"tool_calls": [{"id": "c1", "name": "refund", "args": {"amount": 250}}]}
        return LONG_ANSWER

    tool = define_tool(
        "refund",
        "Refund an amount.",
        {"type": "object", "properties": {"amount": {"type": "number"}}},
        lambda args, ctx: paid.append(args) or f"refunded {args['amount']}",
    )
    approval = ToolMiddleware(
        "approval",
        on_tool_call=lambda c: (
            ask(f"Refund {c.args['amount']}?") if c.args["amount"] > 100 else allow()
        ),
    )
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=fixed_recording(folder))
        .tool(tool)
        .tool_middleware(approval)
        .build()
    )
    paused = agent.run("refund my order")
    assert agent.resume(paused, approve=True, by="ana") == LONG_ANSWER
    assert paid == [{"amount": 250}]
    path = paused.recording
    assert path is not None
    return Path(path)


@pytest.fixture(scope="module")
def governed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _governed(tmp_path_factory.mktemp("governed"))


def _report(data: bytes, folder: Path, name: str = "edited.jsonl") -> rec.VerifyReport | None:
    """verify's report on ``data``; None when the file cannot even be opened (that is
    caught too: the reader refuses it)."""
    path = folder / name
    path.write_bytes(data)
    try:
        with rec.open_recording(path) as r:
            return rec.verify(r)
    except RecordingError:  # a header that no longer reads: refused, so caught (a crash is not)
        return None


def _caught(data: bytes, folder: Path) -> bool:
    report = _report(data, folder)
    return report is None or not report.ok


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("y" if value.endswith("x") else "x") if value else "x"
    return "x"  # null


def _edit(record: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    out = orjson.loads(orjson.dumps(record))
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _changed(target[path[-1]])
    return out


def _files(governed: Path) -> list[Path]:
    return [*SAMPLES, governed]


def test_the_files_of_the_campaign_verify_and_hold_every_kind_of_record(governed: Path) -> None:
    kinds: set[str] = set()
    for path in _files(governed):
        with rec.open_recording(path) as r:
            report = rec.verify(r)
        assert report.ok, (path.name, [str(p) for p in report.problems])
        kinds |= {orjson.loads(x)["t"] for x in path.read_bytes().splitlines()}
    assert {"header", "blob", "commit", "call", "reply", "run_end", "seal"} <= kinds
    assert {"pause", "resume"} <= kinds
    lines = [orjson.loads(x) for x in governed.read_bytes().splitlines()]
    end = [x for x in lines if x["t"] == "run_end"][-1]
    assert "ref" in end["answer"]  # the answer is a blob the campaign edits too


@pytest.mark.parametrize("which", [0, 1, 2], ids=["trip-rain", "trip", "governed"])
def test_any_value_changed_anywhere_is_caught(which: int, governed: Path, tmp_path: Path) -> None:
    """Every value of every line (header fields, user messages, answer blobs, injection
    decisions, tool status and timing, usage, seals), one at a time."""
    data = _files(governed)[which].read_bytes()
    lines = data.splitlines(keepends=True)
    missed: list[str] = []
    edits = 0
    for i, raw in enumerate(lines):
        record = orjson.loads(raw)
        assert orjson.dumps(record) + b"\n" == raw  # an edit changes only what it edits
        paths = list(_leaves(record))
        if len(paths) > 40:  # long lines (slot lists): forty of their values, spread out
            paths = paths[:: len(paths) // 40 + 1]
        for path in paths:
            edited = orjson.dumps(_edit(record, path)) + b"\n"
            forged = b"".join([*lines[:i], edited, *lines[i + 1 :]])
            edits += 1
            if not _caught(forged, tmp_path):
                missed.append(f"line {i + 1} {record['t']} {'.'.join(map(str, path))}")
    assert edits > 200
    assert missed == []


@pytest.mark.parametrize("which", [0, 2], ids=["trip-rain", "governed"])
def test_any_record_removed_added_or_moved_is_caught(
    which: int, governed: Path, tmp_path: Path
) -> None:
    lines = _files(governed)[which].read_bytes().splitlines(keepends=True)
    missed: list[str] = []
    for i in range(len(lines)):
        removed = lines[:i] + lines[i + 1 :]
        if not _caught(b"".join(removed), tmp_path):
            missed.append(f"removed line {i + 1}")
        for j in (0, i - 1, i + 1, len(lines) - 1):  # a copy of a line put somewhere else
            if j != i and 0 <= j < len(lines):
                added = lines[: j + 1] + [lines[i]] + lines[j + 1 :]
                if not _caught(b"".join(added), tmp_path):
                    missed.append(f"line {i + 1} added after line {j + 1}")
        if i + 1 < len(lines) and lines[i] != lines[i + 1]:
            moved = [*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]]
            if not _caught(b"".join(moved), tmp_path):
                missed.append(f"lines {i + 1} and {i + 2} swapped")
    # A line from another recording, and an unsealed forged end.
    stranger = SAMPLES[1].read_bytes().splitlines(keepends=True)[3]
    assert _caught(b"".join([*lines[:5], stranger, *lines[5:]]), tmp_path)
    forged_end = b'{"t":"run_end","status":"answer","iterations":1,"calls":1,"ms":1.0}\n'
    assert _caught(b"".join([*lines, forged_end]), tmp_path)
    assert missed == []


def test_whole_writes_cut_from_the_end_read_as_a_run_that_did_not_finish(
    governed: Path, tmp_path: Path
) -> None:
    """Cutting whole writes from the end is what a killed run leaves: every call still
    verifies, and verify says the run did not finish (or, cut after a pause, that it is
    paused and was not continued). A cut inside a write, what only a machine stopping
    mid-write leaves, says its lines are not sealed."""
    data = SAMPLES[0].read_bytes()
    lines = data.splitlines(keepends=True)
    ends = [i + 1 for i, x in enumerate(lines) if x.startswith(b'{"t":"seal"')]
    assert len(ends) > 5
    for n in ends[:-1]:
        report = _report(b"".join(lines[:n]), tmp_path)
        assert report is not None and report.verified == report.calls
        assert [p.message.split(":")[0] for p in report.problems] == [NO_END], n
    inside = [n for n in range(1, len(lines)) if n not in ends]
    for n in inside:
        report = _report(b"".join(lines[:n]), tmp_path)
        assert report is not None and not report.ok
        assert any("after the last seal" in p.message for p in report.problems), n


def _killed_run(folder: Path, run_id: str) -> list[str]:
    return [sys.executable, "-m", "tests.afcore.killed_run", str(folder), run_id]


def test_a_run_killed_at_any_moment_verifies_up_to_its_last_complete_record(
    tmp_path: Path,
) -> None:
    """Runs killed with SIGKILL at points spread over their length: each file holds whole
    writes (a torn last line at worst), every call in it verifies, and the only thing verify
    says is that the run did not finish."""
    size = full_size(_killed_run(tmp_path / "full", "full"), tmp_path / "full", cwd=ROOT)
    parts = [0.02, 0.1, 0.25, 0.45, 0.7]  # of what a whole run writes
    runs = []
    for k, part in enumerate(parts):  # side by side, each killed when its point comes
        folder = tmp_path / f"k{k}"
        runs.append((part, Run(_killed_run(folder, f"k{k}"), folder, cwd=ROOT)))
    for part, run in runs:
        run.kill_at(int(size * part))
    cut = 0
    for part, run in runs:
        path = run.folder / f"{run.folder.name}.jsonl"
        with rec.open_recording(path) as r:
            report = rec.verify(r)
        assert report.calls >= 1 and report.verified == report.calls, (part, report.problems)
        problems = [p.message for p in report.problems]
        assert len(problems) <= 1 and all(NO_END in p for p in problems), (part, problems)
        cut += bool(problems)
    assert cut >= len(parts) // 2  # most were killed mid-run, not after it ended


def _paused(folder: Path, name: str = "refunds") -> tuple[Any, Any]:
    """An agent and the run it paused (the file ends with the paused run_end's write)."""

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return {"tool_calls": [{"id": "c1", "name": "refund", "args": {"amount": 250}}]}
        return "refunded"

    tool = define_tool(
        "refund", "Refund an amount.", {"type": "object"}, lambda args, ctx: "refunded"
    )
    agent = (
        Agent.create(
            provider=mock(respond=respond), model="m", name=name, record=fixed_recording(folder)
        )
        .tool(tool)
        .tool_middleware(ToolMiddleware("approval", on_tool_call=lambda c: ask("Refund?")))
        .build()
    )
    return agent, agent.run("refund my order")


def test_a_continued_run_extends_the_chain_of_the_paused_one(tmp_path: Path) -> None:
    agent, paused = _paused(tmp_path)
    before = Path(paused.recording).read_bytes()
    assert agent.resume(paused, approve=True) == "refunded"
    after = Path(paused.recording).read_bytes()
    assert after.startswith(before)  # appended, nothing rewritten
    with rec.open_recording(paused.recording) as r:
        report = rec.verify(r)
        seals = r.seal_lines
    assert report.ok, [str(p) for p in report.problems]
    assert seals[-1] == len(after.splitlines()) and len(seals) > len(before.splitlines()) // 20
    # The continuation's first seal is over the paused file's last: not a chain of its own.
    tail = after[len(before) :].splitlines(keepends=True)
    assert _caught(b"".join(tail), tmp_path)
    assert _caught(before[: before.rindex(b'{"t":"seal"')] + b"".join(tail), tmp_path)


def test_a_paused_file_changed_after_the_pause_is_not_continued(tmp_path: Path) -> None:
    from afcore import UsageError

    agent, paused = _paused(tmp_path)
    path = Path(paused.recording)
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'{"t":"seal"')])  # its last seal removed
    with pytest.raises(UsageError, match="does not end with a seal"):
        agent.resume(paused, approve=True)
    assert path.read_bytes() == data[: data.rindex(b'{"t":"seal"')]


def test_a_paused_run_of_the_unreleased_1_3_is_refused_in_a_sentence(tmp_path: Path) -> None:
    """A file paused by an af that wrote 1.3 (sha256 ids, no seals) reads and verifies, but
    is not continued: its lines and the ones 1.1 would append could not be one chain."""
    from afcore import UsageError

    fixture = ROOT / "tests" / "fixtures" / "v1.0" / "governed-1.3.jsonl"
    lines = fixture.read_bytes().splitlines(keepends=True)
    paused_end = next(i for i, x in enumerate(lines) if b'"status":"paused"' in x)
    path = tmp_path / "governed-1.3.jsonl"
    path.write_bytes(b"".join(lines[: paused_end + 1]))
    agent, _ = _paused(tmp_path / "other")
    with pytest.raises(UsageError, match="format 1.3"):
        agent.resume(path, approve=True)


def test_a_read_or_an_eviction_that_names_the_wrong_commit_is_told_in_words(
    tmp_path: Path,
) -> None:
    """Resealed, so that the chain does not hide them: a read of the messages at a commit
    that wrote a fold is a read of them; at one that wrote no message, or at a later one, it
    is named; an eviction of a message its fold already let go of is named too."""
    from tests.conftest import reseal

    lines = (ROOT / "recordings" / "sample-sliding.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"commit","seq":18,'))
    assert b'"reads":[["messages",17]]' in lines[at]

    def problems(edited: list[bytes]) -> list[str]:
        report = _report(reseal(b"".join(edited)), tmp_path)
        assert report is not None
        return [str(p) for p in report.problems]

    def reading(seq: int) -> list[str]:
        read = lines[at].replace(b'["messages",17]', f'["messages",{seq}]'.encode())
        return problems([*lines[:at], read, *lines[at + 1 :]])

    assert problems(lines) == []
    assert reading(13) == []  # seq 13 wrote fold:1: the messages changed there
    assert reading(2) == [f"line {at + 1}: reads messages at seq 2, which did not write it"]
    assert reading(18) == [f"line {at + 1}: reads messages at seq 18, not an earlier commit"]
    last = max(i for i, x in enumerate(lines) if x.startswith(b'{"t":"context_evicted"'))
    again = [*lines[: last + 1], lines[last], *lines[last + 1 :]]
    said = orjson.loads(lines[last])
    assert problems(again) == [
        f"line {last + 2}: message {said['message']} was not folded by fold {said['fold']}"
    ]


def _verdict(path: Path, *, index: bool) -> Any:
    """verify's whole say on ``path`` (its report, each call's check), or the reader's
    refusal."""
    try:
        with rec.open_recording(path, index=index) as r:
            report = rec.verify(r)
    except RecordingError as e:
        return str(e)
    checks = [(c.call, c.ok, c.recorded, c.rebuilt, c.problem) for c in report.checks]
    return report.to_json(), checks


def _mangled(lines: list[bytes], seed: int) -> bytes:
    """One of the edits a damaged or hostile file holds: a line lost, doubled, moved or cut
    short, a value or a byte changed, a seal forged, the file torn."""
    import random

    pick = random.Random(seed)
    out = list(lines)
    at = pick.randrange(1, len(out))
    how = seed % 8
    if how == 0:
        del out[at]
    elif how == 1:
        out.insert(at, out[at])
    elif how == 2:
        out.insert(pick.randrange(1, len(out)), out.pop(at))
    elif how == 3:
        out[at] = out[at][: pick.randrange(len(out[at]))] + b"\n"
    elif how == 4:
        record = orjson.loads(out[at])
        paths = list(_leaves(record))
        out[at] = orjson.dumps(_edit(record, pick.choice(paths))) + b"\n"
    elif how == 5:
        line = bytearray(out[at])
        line[pick.randrange(len(line) - 1)] = pick.choice(b'"{}[]:,0aZ\\ \xff')
        out[at] = bytes(line)
    elif how == 6:
        seals = [i for i, x in enumerate(out) if x.startswith(b'{"t":"seal"')] or [at]
        out[pick.choice(seals)] = b'{"t":"seal","h":"' + b"A" * 22 + b'"}\n'
    data = b"".join(out)
    return data[: pick.randrange(len(data) - 200, len(data))] if how == 7 else data


@pytest.mark.parametrize("seed", range(48))
def test_verify_says_the_same_of_a_file_it_indexes_as_it_walks_and_of_one_indexed_first(
    seed: int, tmp_path: Path
) -> None:
    """``af verify`` opens a file unindexed and indexes it in its checking walk, which takes
    each line in one loop; a file opened indexed is walked line by line from its index.
    Whatever the file holds, both say the same, in 1.1 and in 1.0."""
    from tests.conftest import reseal

    sources = [
        *SAMPLES,
        ROOT / "recordings" / "sample-sliding.jsonl",
        ROOT / "tests" / "fixtures" / "v1.0" / "valid.jsonl",
        ROOT / "tests" / "fixtures" / "v1.1" / "governed.jsonl",
    ]
    source = sources[seed % len(sources)]
    data = _mangled(source.read_bytes().splitlines(keepends=True), seed)
    for resealed in (False, True):
        path = tmp_path / f"edited-{resealed}.jsonl"
        path.write_bytes(reseal(data) if resealed and b'"t":"seal"' in data else data)
        assert _verdict(path, index=False) == _verdict(path, index=True)


_COMMIT_EDITS = {
    # what is edited: (the bytes, what they become, typed straight by msgspec)
    "an exponent": (b'"iter":2,', b'"iter":2,"x":1e400,', False),
    "a number past 64 bits": (b'"iter":2,', b'"iter":%d,' % 2**64, False),
    "19 digits in a string": (b'"inject#4"', b'"inject#1234567890123456789"', False),
    "an escape": (b'"inject#4"', b'"inject\\u00234"', False),
    "a byte past ASCII": (b'"inject#4"', '"inject#4é"'.encode(), False),
    "a stage said empty": (b'"iter":2,', b'"iter":2,"stage":"",', False),
    "a message key not a number": (b'"key":"injections"', b'"key":"message:x"', False),
    "a message key with a sign": (b'"key":"injections"', b'"key":"message:+1"', False),
    "a field of the wrong type": (b'"reads":[]', b'"reads":{}', False),
    "a stage said": (b'"iter":2,', b'"iter":2,"stage":"window",', True),
    "a field twice": (b'"reads":[]', b'"reads":[],"reads":[["tools",2]]', True),
    "a field unknown": (b'"reads":[]', b'"reads":[],"x":[[{"y":null}]]', True),
}


@pytest.mark.parametrize("how", sorted(_COMMIT_EDITS))
def test_a_commit_not_in_the_shape_af_writes_is_read_as_any_line_is(
    how: str, tmp_path: Path
) -> None:
    """The checking walk decodes a commit line straight to its record when it is in the shape
    af writes (plain ASCII, no escapes, numbers within 64 bits and without exponents); any
    other is parsed and converted as every reader does. Either way verify says of the file
    what it says of the same file indexed first, whose lines are all parsed."""
    from afcore.recording._reader import Recording
    from tests.conftest import reseal

    source = ROOT / "recordings" / "sample-sliding.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"commit","seq":6,'))
    old, new, typed = _COMMIT_EDITS[how]
    assert old in lines[at]
    edited = lines[at].replace(old, new, 1)
    for line, straight in ((lines[at], True), (edited, typed)):
        with rec.open_recording(source, index=False) as fresh:
            assert isinstance(fresh, Recording)
            assert (fresh._typed_commit(at, line) is not None) is straight
    for resealed in (False, True):
        data = b"".join([*lines[:at], edited, *lines[at + 1 :]])
        path = tmp_path / f"edited-{resealed}.jsonl"
        path.write_bytes(reseal(data) if resealed else data)
        assert _verdict(path, index=False) == _verdict(path, index=True)


@pytest.mark.parametrize(
    "edit",
    [
        (b'"message":2,', b'"message":12345678901234567890,'),
        (b'"fold":1,', b'"fold":1.0,'),
        (b'"iter":3,', b'"iter":3,"x":1e400,'),
        (b'"rsid":"window#9",', b'"rsid":"window\\u00239",'),
        (b'"message":2,', b'"message":2,"message":3,'),
    ],
)
def test_an_eviction_not_in_the_shape_af_writes_is_read_as_any_line_is(
    edit: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """An eviction in af's shape is taken by its pattern and decoded straight to its record;
    any other is parsed, and verify says of it what a reader of the indexed file says."""
    from tests.conftest import reseal

    lines = (ROOT / "recordings" / "sample-sliding.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"context_evicted"'))
    assert edit[0] in lines[at]
    data = b"".join([*lines[:at], lines[at].replace(*edit), *lines[at + 1 :]])
    for resealed in (False, True):
        path = tmp_path / f"edited-{resealed}.jsonl"
        path.write_bytes(reseal(data) if resealed else data)
        assert _verdict(path, index=False) == _verdict(path, index=True)


def test_the_checking_walk_types_the_commits_in_af_s_shape_straight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk of ``af verify`` hands af's usual commits to the straight decode (a change to
    how lines are told apart by their first bytes must not route them past it)."""
    from afcore.recording._reader import Recording

    typed: list[int] = []
    straight = Recording._typed_commit

    def counted(self: Recording, i: int, raw: bytes) -> Any:
        found = straight(self, i, raw)
        if found is not None:
            typed.append(i)
        return found

    monkeypatch.setattr(Recording, "_typed_commit", counted)
    with rec.open_recording(ROOT / "recordings" / "sample-sliding.jsonl", index=False) as r:
        assert rec.verify(r).ok
    assert len(typed) >= 20
