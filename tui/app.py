"""The Lens: a recording replayed in the terminal, one model call at a time (``af lens``).

The app holds the recording and starts on :class:`tui.screens.lens.LensScreen`; the file is
opened as a prefix first, so the first call is on screen at once, and the screen indexes
the whole of it in the background. Its look is in ``lens.tcss``.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.screen import Screen

from afcore.recording import Recording, open_recording
from tui.screens.lens import LensScreen

__all__ = ["PREFIX", "LensApp", "make_lens_app"]

PREFIX = 1024 * 1024
"""Bytes of the file indexed before the first call is drawn."""


def make_lens_app(path: Path, *, follow: bool = False) -> LensApp:
    """The Lens on ``path``: the one factory, used by ``af lens``, ``af run --lens`` and the
    tests. Raises afcore's RecordingError when the file is not a recording."""
    return LensApp(open_recording(path, upto=PREFIX), follow=follow)


class LensApp(App[None]):
    TITLE = "af lens"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = "lens.tcss"

    def __init__(self, rec: Recording, *, follow: bool = False) -> None:
        super().__init__()
        self.rec = rec
        self.follow = follow

    def get_default_screen(self) -> Screen[None]:
        return LensScreen(self.rec, follow=self.follow)
