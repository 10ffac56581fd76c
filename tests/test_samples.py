"""The sample recordings in recordings/ are current (what scripts/make_samples.py writes
today) and every call in them rebuilds and verifies."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from afcore import recording as rec
from scripts.make_samples import make_samples

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "recordings").glob("sample-*.jsonl")) + sorted(
    (ROOT / "recordings").glob("flow-*.jsonl")
)


def _normalized(path: Path) -> list[bytes]:
    # The header names the af and Python that wrote the file; those may differ between the
    # machine that made the samples and the one checking them.
    # A tool's duration is the ticking clock's readings between its start and its end, and
    # the tools of one reply run at once on threads: which ends first is the threads' race.
    # A flow's log holds its agents' runs (each line after a space), normalized alike; the
    # frame's length, sha256 and line count follow where the run's seals fell.
    out = []
    for line in path.read_bytes().splitlines():
        folded = line.startswith(b" ")
        line = line.removeprefix(b" ")
        if line.startswith(b'{"t":"seal"'):
            continue  # a seal covers the tool durations too; the chain has tests of its own
        if line.startswith((b'{"t":"header"', b'{"t":"flow"', b'{"t":"run"')) or (
            line.startswith(b'{"t":"commit"') and b'"tool":{' in line
        ):
            record = orjson.loads(line)
            if record["t"] == "run":
                record["bytes"] = record["sha256"] = record["lines"] = "-"
            elif record["t"] == "commit":
                record["tool"]["ms"] = "-"
            else:
                record["af_version"] = record["python"] = "-"
            line = orjson.dumps(record)
        out.append(b" " + line if folded else line)
    return out


def test_there_are_samples() -> None:
    assert SAMPLES, "recordings/ holds no sample-*.jsonl; run python -m scripts.make_samples"


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_every_call_of_every_sample_verifies(path: Path) -> None:
    if rec.is_flow(path):
        report = rec.verify_flow(rec.open_flow(path))
        assert report.ok, report.problems
        assert report.calls >= 1 and report.verified == report.calls
        return
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert r.call_count >= 1
    assert report.ok, [str(p) for p in report.problems]
    assert report.verified == report.calls


BEFORE = sorted((ROOT / "tests" / "fixtures" / "v1.0" / "samples").glob("sample-*.jsonl"))
"""The samples as they were before 1.1 (frozen): a reader of 1.1 reads and verifies them."""


@pytest.mark.parametrize("path", BEFORE, ids=lambda p: p.stem)
def test_the_samples_of_before_still_read_and_verify(path: Path) -> None:
    assert BEFORE
    with rec.open_recording(path) as r:
        assert r.header.hash == "sha256"
        report = rec.verify(r)
        assert r.call_count >= 1
        # Every call's request rebuilds the same from the old file and from the new one
        # (but for a summary, which names the stages it folded: 1.1 has no route stage).
        with rec.open_recording(ROOT / "recordings" / path.name) as now:
            calls = r.call_numbers if "compaction" not in path.name else [1, 2, 3]
            for n in calls:
                assert r.request(n) == now.request(n), f"{path.name}: call {n}"
    assert report.ok, [str(p) for p in report.problems]
    assert report.verified == report.calls


def test_samples_are_current(tmp_path: Path) -> None:
    fresh = {p.relative_to(tmp_path).as_posix(): p for p in make_samples(tmp_path)}
    kept = SAMPLES + [run for p in SAMPLES for run in sorted(p.with_suffix("").glob("*.jsonl"))]
    names = {p.relative_to(ROOT / "recordings").as_posix(): p for p in kept}
    assert sorted(fresh) == sorted(names), "the set of samples changed"
    for name, path in names.items():
        assert _normalized(fresh[name]) == _normalized(path), (
            f"{name} is out of date: run python -m scripts.make_samples"
        )
