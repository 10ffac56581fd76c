"""Run ids sort by start time (UTC, to the millisecond) and never repeat in a process."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from afcore.recording import _paths
from afcore.recording._paths import new_run_id, started_at


@pytest.fixture(autouse=True)
def _own_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # The last id's time is the process's: the ids made here leave it as it was.
    monkeypatch.setattr(_paths, "_last_ms", 0)


def test_a_run_id_names_its_start_to_the_millisecond_in_utc() -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC)
    run_id = new_run_id(at)
    assert re.fullmatch(r"20300102-030405-999-[0-9a-f]{6}", run_id), run_id


def test_run_ids_of_one_process_strictly_increase_even_within_a_millisecond() -> None:
    at = datetime(2031, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    ids = [new_run_id(at) for _ in range(3)]
    stamps = [i.rsplit("-", 1)[0] for i in ids]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    # The next millisecond after 23:59:59.999 is the next day's first.
    assert stamps[1] == "20320101-000000-000", stamps


def test_a_header_writes_its_start_as_isoformat_does() -> None:
    instants = [
        datetime(2030, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC),
        datetime(2030, 1, 2, 3, 4, 5, 1_000, tzinfo=UTC),  # the same second, kept
        datetime(2030, 1, 2, 3, 4, 6, tzinfo=UTC),
        datetime(987, 6, 5, 4, 3, 2, 1, tzinfo=UTC),
        datetime(2030, 1, 2, 3, 4, 5, 500, tzinfo=timezone(timedelta(hours=2))),
        datetime(2030, 1, 2, 3, 4, 5, 500),  # naive: as the clock gave it
    ]
    for at in instants:
        assert started_at(at) == at.isoformat(timespec="milliseconds")


def test_a_forked_child_draws_its_own_run_id_suffixes() -> None:
    new_run_id()  # the parent has suffixes drawn ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, through the pipe
        os.close(read)
        os.write(write, " ".join(new_run_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        child = f.read().decode().split()
    os.waitpid(pid, 0)
    parent = [new_run_id() for _ in range(8)]
    assert len(child) == 8
    assert not {i.rsplit("-", 1)[1] for i in child} & {i.rsplit("-", 1)[1] for i in parent}


def test_runs_write_where_the_recordings_folder_is_as_each_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default folder's Path is kept per value of $AF_RECORDINGS: a changed value, or a
    # relative one read from another working directory, is where the next run writes.
    from afcore import Agent, mock

    agent = Agent.create(provider=mock(reply="hi"), model="m").build()
    wheres = []
    for env, cwd in (
        ("one", tmp_path),
        ("two", tmp_path),
        ("one", tmp_path / "sub"),
        (None, tmp_path),
    ):
        cwd.mkdir(exist_ok=True)
        monkeypatch.chdir(cwd)
        if env is None:
            monkeypatch.delenv("AF_RECORDINGS", raising=False)
        else:
            monkeypatch.setenv("AF_RECORDINGS", env)
        assert agent.run("go") == "hi"
        path = agent.last_recording
        assert path is not None and path.is_file()
        wheres.append(path.resolve().parent)
    assert wheres == [
        tmp_path / "one",
        tmp_path / "two",
        tmp_path / "sub" / "one",
        tmp_path / "recordings",
    ]
