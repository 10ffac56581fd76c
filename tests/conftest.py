from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from afcore import RecordingConfig


def ticking_clock(step: float = 0.001) -> Callable[[], float]:
    """A clock that advances by ``step`` seconds each time it is read: durations in the
    recording become deterministic."""
    counter = itertools.count()
    return lambda: next(counter) * step


FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def fixed_recording(folder: Path, run_id: str = "test-run") -> RecordingConfig:
    return RecordingConfig(dir=folder, run_id=run_id, clock=ticking_clock(), now=lambda: FIXED_NOW)


@pytest.fixture(autouse=True)
def _recordings_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No test writes into the project's recordings/ folder by accident."""
    folder = tmp_path / "recordings"
    monkeypatch.setenv("AF_RECORDINGS", str(folder))
    return folder
