"""``af lens A --diff B``: the calls that differ marked on the scrubber, the selected call's
differences listed first in the response pane, and why asked of this recording's side."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from typer.testing import CliRunner

from afcli.app import app as af
from afcore.demos import trip
from afcore.replay import areplay
from tests.tui.conftest import SAMPLES, SIZE, main, on_top, position, screen_text, showing, until
from tui.app import LensApp, make_lens_app
from tui.screens.viewer import Viewer
from tui.screens.why import WhyScreen
from tui.widgets.item_list import ItemList
from tui.widgets.scrubber import Scrubber

TRIP = SAMPLES / "sample-trip.jsonl"
RAIN = SAMPLES / "sample-trip-rain.jsonl"


@asynccontextmanager
async def compared(a: Path, b: Path) -> AsyncIterator[tuple[LensApp, object]]:
    app = make_lens_app(a, against=b)
    async with app.run_test(size=SIZE) as pilot:
        # The comparison runs on a thread and redraws the call once it lands.
        await until(pilot, lambda: app.screen.is_mounted and main(app).diff is not None, "compared")
        yield app, pilot


def events(app: LensApp) -> ItemList:
    return main(app).query_one("#events", ItemList)


async def test_the_calls_that_differ_are_marked_under_their_marks(tmp_path: Path) -> None:
    body = trip.PRICES_BODY
    try:
        # The skill's body is sent from call 3 on, once the model read it: a replay of an
        # agent whose skill says it otherwise departs at call 3, and goes on live.
        trip.PRICES_BODY = body + " Round to cents."
        report = await areplay(TRIP, trip.build_agent(), out=tmp_path, then_live=True)
    finally:
        trip.PRICES_BODY = body
    assert report.recording is not None and report.live_from == 3
    async with compared(TRIP, report.recording) as (app, pilot):
        scrubber = main(app).query_one(Scrubber)
        assert scrubber.differing == {3, 4, 5}
        text = screen_text(app)
        marks, under = scrubber.render().plain.split("\n")[1:3]
        assert (marks, under.rstrip()) == ("◆◆◇◆●", "  ≠≠≠")
        assert "the same in" in position(app)  # call 1
        assert "DIFF  the same in" in text
        await pilot.press("right", "right")
        await until(pilot, lambda: showing(app, 3), "call 3")
        assert "differs from" in position(app)
        listed = events(app)
        assert listed.items["diff:0"].why == "system:prices"
        text = screen_text(app)
        assert "DIFF  1 difference from" in text
        assert "segment 3 (skill prices)" in text


async def test_an_identical_call_says_so_and_a_differing_one_lists_its_changes() -> None:
    async with compared(TRIP, RAIN) as (app, pilot):
        scrubber = main(app).query_one(Scrubber)
        assert scrubber.differing == {1, 2, 3, 4, 5, 6}  # call 6 is only in the other run
        assert scrubber.styles.height is not None and scrubber.styles.height.value == 4
        await pilot.press("right", "right")  # call 3
        await until(pilot, lambda: showing(app, 3), "call 3")
        text = screen_text(app)
        assert "call 3/5" in position(app)
        assert "segment 3 (skill prices)" in text
        assert "carried from earlier calls" in text
        listed = events(app)
        listed.focus()
        await until(pilot, lambda: app.focused is listed, "the events have the focus")
        first = next(i for i in listed.items if i.startswith("diff:"))
        listed.highlighted = listed.get_option_index(first)
        await pilot.press("enter")
        await until(pilot, lambda: on_top(app, Viewer), "the viewer")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main(app), "the viewer closed")
        await until(pilot, lambda: app.focused is listed, "the events have the focus")
        listed.highlighted = listed.get_option_index(first)
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, WhyScreen), "why opened")


async def test_a_recording_compared_with_itself_marks_nothing() -> None:
    async with compared(TRIP, TRIP) as (app, pilot):
        assert main(app).query_one(Scrubber).differing == set()
        assert "the same in sample-trip.jsonl" in position(app)
        assert "DIFF  the same in sample-trip.jsonl" in screen_text(app)


def test_af_lens_diff_opens_the_lens_on_both(monkeypatch: object, tmp_path: Path) -> None:
    seen: list[tuple[Path, Path | None]] = []

    def run(self: LensApp) -> None:
        seen.append((self.rec.path, self.against))

    import pytest

    patch = pytest.MonkeyPatch()
    patch.setattr(LensApp, "run", run)
    try:
        result = CliRunner().invoke(af, ["lens", str(TRIP), "--diff", str(RAIN)])
        assert result.exit_code == 0, result.stderr
        assert seen == [(TRIP, RAIN)]
        result = CliRunner().invoke(af, ["lens", str(TRIP), "--diff", str(tmp_path / "x.jsonl")])
        assert result.exit_code == 2 and "x.jsonl" in result.stderr
    finally:
        patch.undo()
