from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from afcore import RecordingConfig

# Property tests: no check that measures time (a loaded machine is slow, and that says nothing
# of af), and in CI the same examples at every run, so that a submission does not fail on
# inputs the one before it never drew.
settings.register_profile(
    "af",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("af")

# A suite started in the background of a non-interactive shell (`pytest &`) has SIGINT
# ignored, and every process it starts would inherit that: the Ctrl-C tests' processes would
# never hear theirs. Their own, as a terminal's foreground job has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def ticking_clock(step: float = 0.001) -> Callable[[], float]:
    """A clock that advances by ``step`` seconds each time it is read: durations in the
    recording become deterministic."""
    counter = itertools.count()
    return lambda: next(counter) * step


FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


FIXED_SEED = 7


def fixed_recording(folder: Path, run_id: str = "test-run") -> RecordingConfig:
    """A recording whose every varying part is fixed (run id, clocks, seed): two runs of
    the same agent write the same bytes."""
    return RecordingConfig(
        dir=folder, run_id=run_id, clock=ticking_clock(), now=lambda: FIXED_NOW, seed=FIXED_SEED
    )


@pytest.fixture(autouse=True)
def _recordings_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test writes into the project's recordings/ folder by accident."""
    folder = tmp_path / "recordings"
    monkeypatch.setenv("AF_RECORDINGS", str(folder))
    return folder


def reseal(data: bytes) -> bytes:
    """A 1.1 recording's bytes with its seals made again over what the lines now are: what
    the writer would have sealed had it written them so (a test that adds a record of a newer
    minor version, or edits one to see a check other than the chain's catch it). Lines after
    the last seal are left unsealed."""
    from afcore.recording._hashing import seal, short_id

    out: list[bytes] = []
    batch: list[bytes] = []
    chain = b""
    for line in data.splitlines(keepends=True):
        if line.startswith(b'{"t":"seal",'):
            chain = seal(chain, b"".join(batch))
            out += batch
            out.append(b'{"t":"seal","h":"' + short_id(chain).encode() + b'"}\n')
            batch = []
        else:
            batch.append(line)
    return b"".join(out + batch)


def without_folded_runs(data: bytes) -> bytes:
    """A finished flow's log without the agents' runs folded into it (its ``run`` frames),
    resealed: as a writer that did not fold them left it, read from the runs beside it."""
    lines = data.splitlines(keepends=True)
    first = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"run",'))
    end = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"flow_end"'))
    return reseal(b"".join(lines[:first] + lines[end:]))


def runs_beside(log: Path) -> Path:
    """A finished flow's log with its agents' runs written back beside it from the copies
    folded into it (a finished flow removes its own once its log is durable): the folder a
    flow killed before its end leaves. Returns ``log``."""
    from afcore.recording import open_flow, unfold, wait_for_syncs

    wait_for_syncs()  # the flow's own removal of the folder is done first
    flow = open_flow(log)
    assert flow.frames, f"{log} has no runs folded into it"
    for path, frame in flow.frames.items():
        copy, problem = unfold(flow.path, frame)
        assert problem is None, problem
        file = log.parent / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(copy.read_bytes())
    return log
