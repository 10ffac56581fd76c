from __future__ import annotations

import io
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen

from tui.app import LensApp, make_lens_app
from tui.screens.lens import LensScreen
from tui.screens.search import SearchScreen

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "recordings"
SIZE = (120, 40)
GUARD = 60
"""Seconds a test lets the app run for something to show before calling it hung: a guard,
not a measure."""


def screen_text(app: App[object]) -> str:
    """What the screen shows, as plain text: laid out first, as the next frame would be (a
    list refilled since the last frame would otherwise show its old lines)."""
    app.screen._on_timer_update()
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
        await until(pilot, lambda: app.screen.is_mounted, "the first screen")
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


def on_top(app: App[object], kind: type[Screen[Any]]) -> bool:
    """Whether a screen of ``kind`` is on top with its own ``on_mount`` done: what a key that
    opens it has done once it is done."""
    return isinstance(app.screen, kind) and app.screen.is_mounted


def showing(app: LensApp, n: int) -> bool:
    """Whether the Lens has call ``n`` selected and its lists drawn: a key that moves the
    selection changes the position at once and draws the call after what is waiting."""
    screen = main(app)
    marks = screen.timeline.marks
    return bool(marks) and marks[screen.index].n == n and screen.shown == n


async def open_search(pilot: Pilot[None]) -> SearchScreen:
    """Press ``/`` and wait until the search's input has the focus: keys typed before it has
    it go elsewhere."""
    app = pilot.app
    before = app.screen
    await pilot.press("slash")
    await until(
        pilot,
        lambda: (
            on_top(app, SearchScreen)
            and app.screen is not before
            and app.focused is app.screen.query_one("#query")
        ),
        "the search's input has the focus",
    )
    screen = app.screen
    assert isinstance(screen, SearchScreen)
    return screen
