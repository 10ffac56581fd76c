"""Where recordings live, how runs are named, and how a run id finds its file."""

from __future__ import annotations

import functools
import glob
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from afcore.errors import RunNotFoundError

__all__ = ["SUFFIX", "default_dir", "is_flow", "new_run_id", "resolve_run", "started_at"]

SUFFIX = ".jsonl"
ENV_DIR = "AF_RECORDINGS"


def default_dir() -> Path:
    """The recordings folder: ``$AF_RECORDINGS``, or ``recordings/`` in the current folder."""
    return _folder(os.environ.get(ENV_DIR) or "recordings")


_folder = functools.lru_cache(maxsize=16)(Path)
"""A folder's Path, parsed once per value (parsing it cost each run ~10 us)."""


_last_ms = 0
_id_lock = threading.Lock()
_stamp: tuple[int, str] = (-1, "")
"""The last second a run id named, as its id writes it (runs a second apart are rare)."""
_suffixes: list[str] = []
"""Random suffixes drawn ahead (one read of the system's random source serves many runs)."""


def _forked() -> None:
    _suffixes.clear()  # a child draws its own: never the same suffixes as its parent


os.register_at_fork(after_in_child=_forked)


def new_run_id(now: datetime | None = None) -> str:
    """A run id that sorts by start time: ``20261129-130512-345-a1b2c3`` (UTC to the
    millisecond, then random hex so that runs of different processes never collide). Within
    one process ids strictly increase: a run started in the same millisecond as the one
    before it takes the next millisecond."""
    global _last_ms, _stamp
    now = now or datetime.now(UTC)
    ms = int(now.timestamp() * 1000)
    with _id_lock:
        ms = _last_ms = max(ms, _last_ms + 1)
        seconds, milli = divmod(ms, 1000)
        if _stamp[0] != seconds:
            # time.strftime of the UTC tuple: a fifth of what formatting a datetime costs
            _stamp = (seconds, time.strftime("%Y%m%d-%H%M%S", time.gmtime(seconds)))
        stamp = _stamp[1]
        if not _suffixes:
            # os.urandom is what secrets.token_hex reads; importing secrets (hmac, its hashes)
            # cost every read command that finds a run by its id a millisecond or two.
            pool = os.urandom(192).hex()
            _suffixes.extend(pool[i : i + 6] for i in range(0, len(pool), 6))
        suffix = _suffixes.pop()
    return f"{stamp}-{milli:03d}-{suffix}"


_iso_second: tuple[tuple[int, ...] | None, str] = (None, "")


def started_at(now: datetime) -> str:
    """``now`` as a header's ``started_at`` writes it: ISO 8601 to the millisecond
    (``now.isoformat(timespec="milliseconds")``). The second's part is kept for the runs
    that start within it, found by the second's fields (making the second's datetime to
    compare, and comparing two aware datetimes, cost twice the rest): formatting a
    datetime costs a short run more than its id."""
    global _iso_second
    if now.tzinfo is not UTC:
        return now.isoformat(timespec="milliseconds")
    second = (now.second, now.minute, now.hour, now.day, now.month, now.year)
    last = _iso_second
    if last[0] != second:
        last = _iso_second = (second, now.replace(microsecond=0).isoformat()[:19])
    return f"{last[1]}.{now.microsecond // 1000:03d}+00:00"


def resolve_run(ref: str, folder: Path | None = None) -> Path:
    """A path to a recording from a path, or a run id or unique prefix of one in ``folder``."""
    shown = ref if len(ref) <= 80 else f"{ref[:40]}… ({len(ref):,} characters)"
    if not ref:
        raise RunNotFoundError("no recording named '': give a path or a run id")
    as_path = Path(ref)
    try:
        if as_path.is_file():
            return as_path
        if as_path.is_dir():
            raise RunNotFoundError(
                f"{shown} is a folder, not a recording: name a file in it, or a run id "
                f"(af ls {shown} lists them)"
            )
    except OSError as e:  # a name too long for the file system, ...
        raise RunNotFoundError(f"no recording named {shown}: {e.strerror or e}") from None
    folder = folder or default_dir()
    name = ref.removesuffix(SUFFIX)
    if os.sep in ref or (os.altsep and os.altsep in ref):
        raise RunNotFoundError(f"no recording at {shown}")
    exact = folder / f"{name}{SUFFIX}"
    try:
        if exact.is_file():
            return exact
    except OSError as e:
        raise RunNotFoundError(f"no recording named {shown}: {e.strerror or e}") from None
    if not folder.is_dir():
        raise RunNotFoundError(f"no recording named {shown!r}: the folder {folder} does not exist")
    matches = sorted(p for p in folder.glob(f"{glob.escape(name)}*{SUFFIX}") if p.is_file())
    if not matches:
        raise RunNotFoundError(f"no recording in {folder} has a run id starting with {shown!r}")
    if len(matches) > 1:
        shown = ", ".join(p.stem for p in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise RunNotFoundError(f"{shown!r} matches {len(matches)} recordings in {folder}: {shown}")
    return matches[0]


# Here, not beside the flow reader: af show, why and verify ask it of every run, and the
# flow reader's import builds the flow records' models.
def is_flow(path: str | Path) -> bool:
    """Whether the file at ``path`` is a flow's recording (its first line a ``flow``), or
    a bundle holding one."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    if first.startswith(b"PK\x03\x04"):  # a bundle (af export): the recording it holds
        from afcore.errors import RecordingError
        from afcore.recording._bundled import recording_path

        try:
            return is_flow(recording_path(path))
        except RecordingError:
            return False
    return first.startswith(b'{"t":"flow"')
