"""The main screen at a fixed size, on each sample: plain, with injections and a skill, with
folds by summarize_oldest (a seam, and the seam opened) and by sliding_window. Review a
changed snapshot by eye (``pytest --snapshot-update`` accepts it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from tests.tui.conftest import SAMPLES
from tui.app import make_lens_app

SIZE = (110, 34)
Compare = Callable[..., bool]


@pytest.mark.parametrize(
    ("sample", "press"),
    [
        ("sample-trip", []),
        ("sample-trip-rain", ["4", "enter"]),  # the skill's segment and tool, new
        ("sample-compaction", ["9", "enter", "m"]),  # the seam of fold 1
        ("sample-sliding", ["end", "m"]),
    ],
    ids=["trip", "rain-skill", "compaction-seam", "sliding"],
)
def test_main_screen(snap_compare: Compare, sample: str, press: list[str]) -> None:
    app = make_lens_app(SAMPLES / f"{sample}.jsonl")
    assert snap_compare(app, press=press, terminal_size=SIZE)


def test_an_open_seam(snap_compare: Compare) -> None:
    async def open_seam(pilot: Pilot[None]) -> None:
        await pilot.press("9", "enter")
        await pilot.pause()
        slots = pilot.app.screen.query_one("#slots")
        slots.go_to("seam:1")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()

    app = make_lens_app(SAMPLES / "sample-compaction.jsonl")
    assert snap_compare(app, run_before=open_seam, terminal_size=SIZE)
