"""The opening benchmark's probe of the Lens, on a small file: it must find the first call on
screen, the last one, and steps back. What it measures is bench/lens_open.py's to judge (on
300 MB, against its targets); here only that it measured."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.big_recording import QUESTION, write
from bench.peers import lens_open
from bench.peers.lens_open import probe


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write(tmp_path, mb=1, shape="short-lines", run_id="small")


async def test_the_probe_sees_the_first_and_the_last_call(
    small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The probe times from its process's start; in this process, that is now, not whenever
    # the suite happened to import it.
    monkeypatch.setattr(lens_open, "START", time.perf_counter())
    found = await probe(small, QUESTION, limit=30)
    assert isinstance(found["first_call"], float)
    assert isinstance(found["calls"], int) and found["calls"] > 21
    assert isinstance(found["per_step"], float) and found["per_step"] > 0
    assert isinstance(found["peak_rss_mb"], float) and found["peak_rss_mb"] > 0
