"""Opening the recording a command names: a path, a run id or a unique prefix of one, or the
newest recording when none is named."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from afcore.recording import Recording

__all__ = ["newest", "newest_first", "open_run", "resolve"]

_RUN_ID = re.compile(r"\d{8}-\d{6}-\d{3}-")


def newest_first(folder: Path) -> list[Path]:
    """The recordings in ``folder``, newest first. Run ids start with the time the run
    started, so name order is time order; files named otherwise (the shipped samples, a
    renamed copy) follow, by name."""
    files = [p for p in folder.glob("*.jsonl") if p.is_file()]
    runs = sorted((p for p in files if _RUN_ID.match(p.name)), reverse=True)
    others = sorted(p for p in files if not _RUN_ID.match(p.name))
    return runs + others


def newest(command: str) -> Path:
    """The newest recording in the recordings folder, for a command given no RUN."""
    from afcore.recording import default_dir

    folder = default_dir()
    found = newest_first(folder) if folder.is_dir() else []
    if not found:
        raise CliError(f"no recordings in {folder}: name one ({command} RUN)", EXIT_USAGE)
    return found[0]


def resolve(ref: str) -> Path:
    """The path of the recording ``ref`` names, or a one-sentence usage error."""
    from afcore.errors import RunNotFoundError
    from afcore.recording import resolve_run

    if any(c in ref for c in "*?[") and not _is_file(ref):
        # The folder is searched by glob: a pattern here would match runs it does not name.
        raise CliError(f"no recording named {ref!r}: a run id holds no *, ? or [", EXIT_USAGE)
    try:
        return resolve_run(ref)
    except RunNotFoundError as e:
        raise CliError(str(e), EXIT_USAGE) from None


def open_run(ref: str | Path, *, index: bool = True) -> Recording:
    """The recording named by a path, a run id or a unique prefix of one (a Path: that
    file). ``index=False``: for a command that walks the file once (see ``open_recording``)."""
    from afcore.errors import RecordingError
    from afcore.recording import open_recording

    path = ref if isinstance(ref, Path) else resolve(ref)
    try:
        return open_recording(path, index=index)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None


def _is_file(ref: str) -> bool:
    try:
        return Path(ref).is_file()
    except OSError:  # a name too long for the file system, ...
        return False
