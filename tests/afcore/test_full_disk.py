"""A disk that fills up during a run: af says what happened and where the recording is, and
the file holds every call it has whole, intact (it reads as a run cut off mid-write)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool, mock
from afcore import recording as rec
from afcore.errors import RecordingWriteError
from afcore.recording import _writer
from tests.conftest import fixed_recording


def _agent(tmp_path: Path) -> Agent:
    replies: list[Any] = [
        {"tool_calls": [{"id": f"c{i}", "name": "echo", "args": {"i": i}}]} for i in range(30)
    ]
    echo = define_tool("echo", "Echo.", {"type": "object"}, lambda a, c: f"{a['i']} " + "x" * 2000)
    return (
        Agent.create(
            provider=mock(replies=[*replies, "done"]), model="m", record=fixed_recording(tmp_path)
        )
        .tool(echo)
        .build()
    )


@pytest.mark.parametrize("room", [0, 5_000, 20_000])
def test_a_full_disk_says_where_the_file_is_and_its_calls_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int
) -> None:
    left = [room]
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        """The disk as the OS gives it: what fits is written (a short write), then ENOSPC."""
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[: left[0]]))
        left[0] -= n
        return n

    agent = _agent(tmp_path)
    monkeypatch.setattr(_writer.os, "write", write)
    with pytest.raises(RecordingWriteError) as raised:
        agent.run("go")
    monkeypatch.undo()
    said = str(raised.value)
    path = agent.last_recording
    assert path is not None
    assert "the disk is full" in said and str(path) in said and "intact" in said, said
    if room == 0:  # not even the header fitted: no empty file is left, under any name
        assert not path.exists() and not any(tmp_path.glob(".*.part")), list(tmp_path.iterdir())
        return
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.calls == report.verified, report.problems
        assert r.end is None, "the run is cut off, not finished"
        # What it reports is the cut: a torn last line (alone, when the last whole line is a
        # seal: where the cut falls depends on how the writes were batched, which is timing),
        # or whole lines the last write left without their seal.
        cut = ("torn", "cut", "after the last seal")
        assert not report.ok, "a run cut off verified as whole"
        assert all(any(w in str(p) for w in cut) for p in report.problems), report.problems
