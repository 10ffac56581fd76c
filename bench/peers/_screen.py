"""What a Textual app running headless shows, as plain text, for the opening benchmark's
probes. It uses only rich and textual, so that it runs beside either app (each in its own
virtual environment), and works with the Textual of both."""

from __future__ import annotations

import io
import resource
from typing import Any

from rich.console import Console

__all__ = ["peak_rss_mb", "screen_text"]


def screen_text(app: Any) -> str:
    """The whole screen as the terminal would show it, without styles."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB. Linux's ``VmHWM``: ``ru_maxrss``
    keeps the peak of the process that started this one across ``exec``."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
