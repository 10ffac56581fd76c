"""af's own bookkeeping threads leave Ctrl-C to the main thread."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from afcore import Agent, mock
from afcore.recording import wait_for_syncs


def _blocked(thread: threading.Thread) -> set[int]:
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16
    )
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def _syncers_after_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The recording's sync threads, after a recorded run whose file is synced."""
    monkeypatch.setenv("AF_RECORDINGS", str(tmp_path))
    agent = Agent.create(provider=mock(reply="hi"), model="m").build()
    assert agent.run("go") == "hi"
    assert wait_for_syncs(10)
    assert list(tmp_path.glob("*.jsonl"))
    syncers = [t for t in threading.enumerate() if t.name == "af-recording-sync"]
    assert syncers
    return syncers


@pytest.mark.skipif(sys.platform != "linux", reason="reads a thread's signal mask in /proc")
def test_the_recording_sync_thread_blocks_sigint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncers = _syncers_after_a_run(tmp_path, monkeypatch)
    assert all(2 in _blocked(t) for t in syncers)  # SIGINT
    # The thread that runs the tests, which started it, still takes it.
    assert 2 not in _blocked(threading.current_thread())


@pytest.mark.skipif(sys.platform != "linux", reason="SCHED_BATCH is Linux's")
def test_the_recording_sync_thread_does_not_preempt_the_run_that_wakes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncers = _syncers_after_a_run(tmp_path, monkeypatch)
    assert all(os.sched_getscheduler(t.native_id or 0) == os.SCHED_BATCH for t in syncers)
    # The thread that runs the tests, which started it, is scheduled as it was.
    assert os.sched_getscheduler(0) != os.SCHED_BATCH


@pytest.mark.skipif(sys.platform != "linux", reason="reads a thread's signal mask in /proc")
def test_threads_a_front_end_starts_under_new_threads_leave_sigint_block_it() -> None:
    from afcore.loop import new_threads_leave_sigint

    release = threading.Event()
    with new_threads_leave_sigint():
        spinner = threading.Thread(target=release.wait, daemon=True)
        spinner.start()
    later = threading.Thread(target=release.wait, daemon=True)
    later.start()
    try:
        assert 2 in _blocked(spinner)
        assert 2 not in _blocked(later)  # the mask is the caller's again after the block
        assert 2 not in _blocked(threading.current_thread())
    finally:
        release.set()
