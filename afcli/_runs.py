"""Opening the recording a command names: a path, a run id or a unique prefix of one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from afcore.recording import Recording

__all__ = ["open_run"]


def open_run(ref: str, *, index: bool = True) -> Recording:
    """The recording named by a path, a run id or a unique prefix of one. ``index=False``:
    for a command that walks the file once (see ``open_recording``)."""
    from afcore.errors import RecordingError, RunNotFoundError
    from afcore.recording import open_recording, resolve_run

    if any(c in ref for c in "*?[") and not Path(ref).is_file():
        # The folder is searched by glob: a pattern here would match runs it does not name.
        raise CliError(f"no recording named {ref!r}: a run id holds no *, ? or [", EXIT_USAGE)
    try:
        path = resolve_run(ref)
    except RunNotFoundError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    try:
        return open_recording(path, index=index)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None
