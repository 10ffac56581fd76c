"""A process's private scratch folder for copies of recordings it reads (a bundle's recording
unpacked, a flow's runs unfolded): removed when the process ends, and by the next process
that makes one when it did not end cleanly.

A process ended by a signal that Python does not turn into an exit (closing the terminal of
``af lens``, SIGTERM, SIGKILL) runs no exit handlers, and its folder would stay in the
temporary directory with copies of what it read. Each folder is named by its process id, so
the next process that needs one removes those of processes no longer alive.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["scratch_folder"]


def scratch_folder(prefix: str) -> Path:
    """A new private folder ``<prefix><pid>-<random>`` in the temporary directory, removed at
    exit; first, those of this prefix left by processes that are gone."""
    _sweep(prefix)
    made = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    atexit.register(shutil.rmtree, made, True)
    return made


def _sweep(prefix: str) -> None:
    if os.name != "posix":  # os.kill(pid, 0) asks whether a process lives on POSIX alone
        return
    uid = os.getuid()
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix) :].partition("-")[0]
        if not pid.isdecimal() or int(pid) == os.getpid():
            continue
        try:
            if folder.lstat().st_uid != uid or not folder.is_dir() or folder.is_symlink():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)  # its process is gone
        except (OSError, OverflowError):
            continue  # alive (another user's), or not a pid: left alone
