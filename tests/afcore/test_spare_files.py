"""A recording's file made ahead: the next run in a folder takes an unnamed file the sync
thread opened while the run before went on, and names it once its header is in it, so a run
does not wait on the filesystem to make a file. Every promise of a file made by the run
itself holds: a run killed before its header leaves nothing, a name is never taken over,
and where the system cannot name such a file its lines are copied into one made then."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, UsageError, define_tool, mock
from afcore import recording as rec
from afcore.messages import Request
from afcore.recording import _writer
from afcore.recording._writer import Recorder
from afcore.secrets import Redaction, Redactor

pytestmark = pytest.mark.skipif(
    not _writer._SPARES.usable, reason="the system makes no unnamed files (O_TMPFILE)"
)


def _agent(folder: Path) -> Agent:
    echo = define_tool("echo", "Echo.", {"type": "object"}, lambda a, c: "ok")
    replies = [{"tool_calls": [{"id": "c1", "name": "echo", "args": {}}]}, "done"]

    def respond(request: Request) -> Any:
        return replies[sum(1 for m in request.messages if m.role == "tool")]

    return (
        Agent.create(
            provider=mock(respond=respond),
            model="m",
            record=folder,
        )
        .tool(echo)
        .build()
    )


def _ready(folder: Path) -> int:
    """Wait until the file for the next run in ``folder`` is made; take it (its fd)."""
    assert rec.wait_for_syncs(timeout=30)
    fd = _writer._SPARES.take(str(folder))
    assert fd >= 0, "no file was made ahead"
    return fd


def _recorder(path: Path) -> Recorder:
    return Recorder(path, run_id=path.stem, redactor=Redactor(Redaction()))


def test_runs_after_the_first_write_to_files_made_ahead_and_verify(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    paths = []
    for _ in range(3):
        assert rec.wait_for_syncs(timeout=30)
        if paths:  # the run about to start has a file made ahead
            assert str(tmp_path) in _writer._SPARES._files
        assert agent.run("go") == "done"
        assert agent.last_recording is not None
        paths.append(agent.last_recording)
    assert rec.wait_for_syncs(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        with rec.open_recording(path) as r:
            report = rec.verify(r)
            assert report.ok and report.calls == report.verified == 2, report.problems


def test_a_file_made_ahead_that_nothing_was_written_to_leaves_nothing(tmp_path: Path) -> None:
    _recorder(tmp_path / "first.jsonl").close()  # made by the run; asks for the next
    os.close(_ready(tmp_path))
    _recorder(tmp_path / "warm.jsonl").close()
    assert rec.wait_for_syncs(timeout=30)
    assert str(tmp_path) in _writer._SPARES._files
    r = _recorder(tmp_path / "killed.jsonl")
    assert r._unnamed is _writer._SPARE
    r.close()  # as a run killed before its header: the file never had a name
    assert rec.wait_for_syncs(timeout=30)
    assert list(tmp_path.iterdir()) == []


def test_a_file_made_ahead_never_takes_over_a_name(tmp_path: Path) -> None:
    _recorder(tmp_path / "first.jsonl").close()
    assert rec.wait_for_syncs(timeout=30)
    path = tmp_path / "clash.jsonl"
    r = _recorder(path)
    assert r._unnamed is _writer._SPARE
    path.write_bytes(b"another's\n")  # made under the same name meanwhile
    r.header({"t": "header"})
    with pytest.raises(UsageError, match="already exists"):
        r.flush()
    r.close()
    assert path.read_bytes() == b"another's\n"


def test_where_the_system_cannot_name_it_its_lines_are_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent(tmp_path)
    agent.run("go")
    assert rec.wait_for_syncs(timeout=30)

    def refuse(fd: int, path: Path) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(_writer._SPARES, "link", refuse)
    monkeypatch.setattr(_writer._SPARES, "usable", True)
    assert agent.run("go") == "done"
    assert _writer._SPARES.usable is False  # runs make their own files from then on
    path = agent.last_recording
    assert path is not None
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.ok and report.calls == report.verified == 2, report.problems


def test_a_forked_child_never_takes_its_parents_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recorder(tmp_path / "first.jsonl").close()
    assert rec.wait_for_syncs(timeout=30)
    parent = os.getpid()
    monkeypatch.setattr(_writer.os, "getpid", lambda: parent + 1)
    assert _writer._SPARES.take(str(tmp_path)) == -1


def test_a_relative_folder_is_the_one_of_the_working_directory_at_each_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _agent(Path("recordings"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    agent.run("go")
    agent.run("go")  # leaves a file made ahead in a/recordings
    assert rec.wait_for_syncs(timeout=30)
    monkeypatch.chdir(tmp_path / "b")
    assert agent.run("go") == "done"
    assert agent.last_recording is not None
    assert (tmp_path / "b" / agent.last_recording).is_file()
    assert len(list((tmp_path / "a" / "recordings").iterdir())) == 2


def test_a_folder_removed_after_its_file_was_made_is_made_again(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    agent = _agent(folder)
    agent.run("go")
    assert rec.wait_for_syncs(timeout=30)
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    assert agent.run("go") == "done"
    assert agent.last_recording is not None and agent.last_recording.parent == folder
    with rec.open_recording(agent.last_recording) as r:
        assert rec.verify(r).ok
