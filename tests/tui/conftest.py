from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot

from tui.app import LensApp, make_lens_app
from tui.screens.lens import LensScreen

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "recordings"
SIZE = (120, 40)
GUARD = 60
"""Seconds a test lets the app run for something to show before calling it hung: a guard,
not a measure."""


def screen_text(app: App[object]) -> str:
    """What the screen shows, as plain text."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


@asynccontextmanager
async def lens(
    path: Path, *, follow: bool = False, size: tuple[int, int] = SIZE
) -> AsyncIterator[tuple[LensApp, Pilot[None]]]:
    app = make_lens_app(path, follow=follow)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        yield app, pilot


def main(app: LensApp) -> LensScreen:
    screen = app.screen
    if not isinstance(screen, LensScreen):
        screen = app.screen_stack[0]
    assert isinstance(screen, LensScreen)
    return screen


def position(app: LensApp) -> str:
    """The scrubber's position line."""
    return main(app).query_one("Scrubber").status.plain  # type: ignore[attr-defined]


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    """Let the app run (its timers, workers and messages) until ``condition`` holds."""
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await pilot.pause(0.05)
