"""Runs killed part of the way through, for the tests of what a kill leaves behind.

Where a kill lands is set by how far the run got (the bytes its recordings hold), not by a
clock: on a loaded machine a run goes slower, and a kill timed in seconds lands elsewhere in
it, or after it ended, or before it began.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

GUARD = 120.0
"""Seconds to wait for a run before calling it hung: a guard, not a measure."""


def written(folder: Path) -> int:
    """The bytes the files in ``folder`` hold (0 while it does not exist)."""
    total = 0
    for path in folder.iterdir() if folder.exists() else ():
        try:
            total += path.stat().st_size
        except FileNotFoundError:  # renamed meanwhile
            pass
    return total


class Run:
    """A run in a process of its own, writing its recordings into ``folder``."""

    def __init__(self, argv: list[str], folder: Path, **popen: Any) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **popen
        )

    def kill_at(self, at: int | None, how: signal.Signals = signal.SIGKILL) -> str:
        """Send ``how`` once the recordings hold ``at`` bytes (0: at once, before the
        interpreter is up; None: no signal, the run ends by itself), then wait for the
        process to end. Returns what it wrote to stderr."""
        if at is not None:
            deadline = time.monotonic() + GUARD
            while written(self.folder) < at and self.process.poll() is None:
                assert time.monotonic() < deadline, f"the run never wrote {at} bytes"
                time.sleep(0.001)
            self.process.send_signal(how)  # does nothing once the run has ended
        _, err = self.process.communicate(timeout=GUARD)
        return err.decode(errors="replace")


def full_size(argv: list[str], folder: Path, **popen: Any) -> int:
    """The bytes a run writes when nothing stops it."""
    run = Run(argv, folder, **popen)
    err = run.kill_at(None)
    assert run.process.returncode == 0, err
    size = written(folder)
    assert size > 0, f"the run wrote nothing: {err}"
    return size
