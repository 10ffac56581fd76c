"""The main screen at a fixed size, on each sample: plain, with injections and a skill, with
folds by summarize_oldest (a seam, and the seam opened) and by sliding_window. Review a
changed snapshot by eye (``pytest --snapshot-update`` accepts it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from tests.tui.conftest import SAMPLES, main, showing, until
from tui.app import LensApp, make_lens_app
from tui.widgets.item_list import ItemList

SIZE = (110, 34)
Compare = Callable[..., bool]


def at(call: int | None, *keys: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    """Go to ``call`` (None: the last), then press ``keys``, each waited for: the picture is
    taken of what they did, not of what they had done by then."""

    async def go(pilot: Pilot[None]) -> None:
        app = pilot.app
        assert isinstance(app, LensApp)
        await until(pilot, lambda: app.screen.is_mounted, "the first screen")
        n = main(app).timeline.marks[-1].n if call is None else call
        await pilot.press(*(["end"] if call is None else [*str(call), "enter"]))
        await until(pilot, lambda: showing(app, n), f"call {n}")
        slots = main(app).query_one("#slots", ItemList)
        for key in keys:  # a section's key: s, m or t
            await pilot.press(key)
            await until(
                pilot,
                lambda: slots.current is not None and slots.current.id.startswith(SECTION[key]),  # noqa: B023
                f"the section of {key}",
            )

    return go


SECTION = {"s": "seg:", "m": "msg:", "t": "tool:"}


async def _first(pilot: Pilot[None]) -> None:
    """The first call, as the Lens opens on it."""
    await until(pilot, lambda: pilot.app.screen.is_mounted, "the first screen")


@pytest.mark.parametrize(
    ("sample", "run_before"),
    [
        ("sample-trip", _first),
        ("sample-trip-rain", at(4)),  # the skill's segment and tool, new
        ("sample-compaction", at(9, "m")),  # the seam of fold 1
        ("sample-sliding", at(None, "m")),
    ],
    ids=["trip", "rain-skill", "compaction-seam", "sliding"],
)
def test_main_screen(
    snap_compare: Compare, sample: str, run_before: Callable[[Pilot[None]], Awaitable[None]]
) -> None:
    app = make_lens_app(SAMPLES / f"{sample}.jsonl")
    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_an_open_seam(snap_compare: Compare) -> None:
    async def open_seam(pilot: Pilot[None]) -> None:
        await at(9)(pilot)
        app = pilot.app
        assert isinstance(app, LensApp)
        slots = main(app).query_one("#slots", ItemList)
        slots.go_to("seam:1")
        await pilot.press("enter")
        await until(pilot, lambda: 1 in main(app).opened, "the seam opened")

    app = make_lens_app(SAMPLES / "sample-compaction.jsonl")
    assert snap_compare(app, run_before=open_seam, terminal_size=SIZE)
