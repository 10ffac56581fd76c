"""The Lens driven by keys and the mouse, headless: scrubbing, jumping, seams, the viewer,
search, why, help, quit, and following a recording while it is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Log, Static, Tree

from bench.big_recording import write
from tests.tui.conftest import (
    SAMPLES,
    lens,
    main,
    on_top,
    open_search,
    position,
    screen_text,
    showing,
    until,
)
from tui.app import LensApp
from tui.locate import Place
from tui.screens.help import Help
from tui.screens.search import Match, SearchScreen
from tui.screens.viewer import Viewer
from tui.screens.why import WhyScreen
from tui.widgets.item_list import ItemList, Row

TRIP = SAMPLES / "sample-trip.jsonl"
COMPACTION = SAMPLES / "sample-compaction.jsonl"


def slots(app: LensApp) -> ItemList:
    return main(app).query_one("#slots", ItemList)


def prompt(app: LensApp, item: str) -> str:
    """An item's text, as it would be without wrapping."""
    row = slots(app).get_option(item).prompt
    assert isinstance(row, Row)
    return " ".join(p.plain if isinstance(p, Text) else p[1].plain for p in row.parts)


async def test_first_call_is_on_screen() -> None:
    async with lens(TRIP) as (app, _):
        assert position(app).startswith("call 1/5 · iteration 1 · turn 1 · ✓ verified")
        text = screen_text(app)
        assert "SYSTEM" in text and "MESSAGES" in text and "TOOLS" in text
        assert "I have a free Saturday in Lisbon" in text
        assert "RESPONSE" in text and '→ weather(city="Lisbon")' in text


async def test_scrubbing_with_arrows_and_letters() -> None:
    async with lens(TRIP) as (app, pilot):
        await pilot.press("right", "right")
        await until(pilot, lambda: showing(app, 3), "call 3")
        assert position(app).startswith("call 3/5")
        await pilot.press("l", "left", "h")
        await until(pilot, lambda: showing(app, 2), "call 2")
        assert position(app).startswith("call 2/5")
        await pilot.press("end")
        await until(pilot, lambda: showing(app, 5), "call 5")
        assert position(app).startswith("call 5/5")
        # Past the end: stays. The digit is handled after the arrow, in the order pressed.
        await pilot.press("right", "1")
        await until(pilot, lambda: "go to call 1" in position(app), "the digit")
        assert position(app).startswith("call 5/5")
        await pilot.press("escape", "home")
        await until(pilot, lambda: showing(app, 1), "call 1")
        assert position(app).startswith("call 1/5")


async def test_typing_a_number_goes_to_that_call() -> None:
    async with lens(COMPACTION) as (app, pilot):
        await pilot.press("1", "2")
        await until(pilot, lambda: "go to call 12" in position(app), "the number typed")
        await pilot.press("enter")
        await until(pilot, lambda: showing(app, 12), "call 12")
        assert position(app).startswith("call 12/14")
        await pilot.press("9", "9", "enter")
        await until(pilot, lambda: "go to call" not in position(app), "the number taken")
        assert position(app).startswith("call 12/14")  # there is no call 99: it says so
        # Enter after Esc goes nowhere; the digit after it is handled after it.
        await pilot.press("3", "escape", "enter", "5")
        await until(pilot, lambda: "go to call 5" in position(app), "the digit")
        assert position(app).startswith("call 12/14")


async def test_clicking_a_mark_selects_its_call() -> None:
    async with lens(TRIP) as (app, pilot):
        # Marks are on the scrubber's second line, one column each after a padding column.
        await pilot.click("Scrubber", offset=(1 + 3, 1))
        await until(pilot, lambda: showing(app, 4), "call 4")
        assert position(app).startswith("call 4/5")


async def test_a_seam_opens_to_show_the_folded_messages() -> None:
    async with lens(COMPACTION) as (app, pilot):
        await pilot.press("9", "enter")
        await until(pilot, lambda: showing(app, 9), "call 9")
        text = screen_text(app)
        assert "── 6 messages folded by summarize_oldest at iteration 5 (fold 1) ──" in text
        assert slots(app).go_to("seam:1")
        await pilot.press("enter")
        await until(pilot, lambda: 1 in main(app).opened, "the seam opened")
        folded = [i for i in slots(app).items if i.startswith("folded:1:")]
        assert folded == [f"folded:1:{n}" for n in range(2, 8)]
        await pilot.press("enter")  # closes again
        await until(pilot, lambda: 1 not in main(app).opened, "the seam closed")
        assert not any(i.startswith("folded:") for i in slots(app).items)


async def test_clicking_a_seam_opens_it() -> None:
    async with lens(COMPACTION) as (app, pilot):
        await pilot.press("9", "enter", "m")
        await until(pilot, lambda: showing(app, 9) and _on(app, "msg:"), "call 9's messages")
        lines = screen_text(app).splitlines()
        y = next(i for i, line in enumerate(lines) if "▸ ── 6 messages folded" in line)
        await pilot.click(offset=(4, y))
        await until(pilot, lambda: 1 in main(app).opened, "the seam opened")
        assert "▾ ── 6 messages folded" in screen_text(app)


async def test_folds_before_the_call_before_are_one_seam() -> None:
    async with lens(SAMPLES / "sample-sliding.jsonl") as (app, pilot):
        last = main(app).timeline.marks[-1].n
        await pilot.press("end")
        await until(pilot, lambda: showing(app, last), "the last call")
        earlier, recent = (prompt(app, "seam:earlier"), prompt(app, "seam:9"))
        assert "16 messages left in 8 earlier folds (sliding_window, iterations 3–10)" in earlier
        assert "2 messages dropped by sliding_window at iteration 11 (fold 9)" in recent
        assert slots(app).go_to("seam:earlier")
        await pilot.press("enter")
        await until(pilot, lambda: "folded:1:2" in slots(app).items, "the seam opened")
        folded = [i for i in slots(app).items if i.startswith("folded:")]
        assert len(folded) == 16 and folded[0] == "folded:1:2"


async def test_enter_on_a_long_text_opens_all_of_it() -> None:
    async with lens(COMPACTION) as (app, pilot):
        await pilot.press("6", "enter")  # the summarizer's call: sent a long transcript
        await until(pilot, lambda: showing(app, 6), "call 6")
        assert "the summarizer's call" in position(app)
        assert slots(app).go_to("msg:11")
        assert slots(app).current is not None and slots(app).current.full is not None
        await pilot.press("enter")
        # The viewer writes its lines once it knows its width.
        await until(
            pilot,
            lambda: on_top(app, Viewer) and bool(app.screen.query_one(Log).lines),
            "the text in the viewer",
        )
        shown = app.screen.query_one(Log).lines
        assert sum(len(line) for line in shown) > 3000
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main(app), "the viewer closed")


async def test_sections_and_focus() -> None:
    async with lens(TRIP) as (app, pilot):
        await pilot.press("m")
        await until(pilot, lambda: _on(app, "msg:1"), "the messages")
        await pilot.press("t")
        await until(pilot, lambda: _on(app, "tool:"), "the tools")
        await pilot.press("tab")
        events = main(app).query_one("#events", ItemList)
        await until(pilot, lambda: app.focused is events, "the events have the focus")


def _on(app: LensApp, item: str) -> bool:
    """Whether the slots' highlighted item is ``item`` (or starts with it)."""
    current = slots(app).current
    return current is not None and current.id.startswith(item)


def _landed(app: LensApp, place: Place) -> bool:
    """Whether the Lens shows ``place``: its call, its item highlighted where the focus is."""
    focused = app.focused
    return (
        app.screen is main(app)
        and showing(app, place.call)
        and (
            place.item is None
            or (
                isinstance(focused, ItemList)
                and focused.current is not None
                and focused.current.id == place.item
            )
        )
    )


async def test_search_lists_matches_and_enter_goes_there() -> None:
    async with lens(TRIP) as (app, pilot):
        search = await open_search(pilot)
        await pilot.press(*"convert_currency")
        await until(pilot, lambda: _searched(search, "convert_currency"), "the search ended")
        assert search.matches, screen_text(app)
        results = search.query_one(ItemList)
        places = [m.place for m in search.matches.values()]
        assert any(p.call == 4 for p in places)  # the call that first had the tool
        await pilot.press("enter")  # from the query to the results
        await until(pilot, lambda: app.focused is results, "the results have the focus")
        target = search.matches[results.current.id]  # type: ignore[union-attr]
        assert isinstance(target, Match)
        await pilot.press("enter")
        await until(pilot, lambda: _landed(app, target.place), "the match shown")
        assert position(app).startswith(f"call {target.place.call}/5")


def _searched(search: SearchScreen, query: str) -> bool:
    """Whether the search for ``query`` (typed in full, not a part typed before a pause) is
    over."""
    status = str(search.query_one("#status", Static).render())
    return search.query_text == query and "Enter goes there" in status and "searching" not in status


async def test_a_search_reopened_runs_its_last_query_once_and_keeps_the_highlight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The input says its first value once mounted; that once restarted the search a
    # quarter second in, clearing the results and moving the highlight back to the top.
    started: list[str] = []
    start = SearchScreen.start

    def counted(self: SearchScreen, query: str) -> None:
        started.append(query)
        start(self, query)

    monkeypatch.setattr(SearchScreen, "start", counted)
    async with lens(TRIP) as (app, pilot):
        search = await open_search(pilot)
        await pilot.press(*"call")
        await until(pilot, lambda: _searched(search, "call"), "the search ended")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main(app), "the first search closed")
        again = await open_search(pilot)
        await until(pilot, lambda: _searched(again, "call"), "the search ran again")
        results = again.query_one(ItemList)
        assert results.option_count > 1, screen_text(app)
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is results, "the results have the focus")
        results.highlighted = 1
        await pilot.pause(0.5)
        assert started.count("call") == 2  # once per opening
        assert results.highlighted == 1


async def test_a_batch_of_matches_handed_over_once_the_search_closed_goes_nowhere() -> None:
    # The scan hands its batches to the screen from its thread: one handed over as Enter or
    # Esc closed the screen found no list to add to, and the Lens stopped on a traceback.
    async with lens(TRIP) as (app, pilot):
        search = await open_search(pilot)
        await pilot.press(*"call")
        await until(pilot, lambda: _searched(search, "call"), "the search ended")
        late = list(search.matches.values())[:1]
        await pilot.press("escape")
        await until(pilot, lambda: not search.is_attached, "the search taken down")
        search._add("call", late, 1.0)  # as the scan's thread hands a batch over
        assert app.screen is main(app)


async def test_search_ignores_keys_and_hashes() -> None:
    async with lens(TRIP) as (app, pilot):
        search = await open_search(pilot)
        await pilot.press(*"role")
        await until(pilot, lambda: _searched(search, "role"), "the search ended")
        assert app.screen is search
        # "role" is a key of every message; no text holds it.
        assert not app.screen.matches


async def test_why_shows_the_slice_and_enter_goes_to_a_stage() -> None:
    async with lens(TRIP) as (app, pilot):
        await pilot.press("end", "m")  # the last call's messages
        await until(pilot, lambda: showing(app, 5) and _on(app, "msg:"), "call 5's messages")
        assert slots(app).go_to("msg:2")  # the currency instruction, injected by a rule
        await pilot.press("w")
        # The footer takes the popup's keys once it has drawn them.
        await until(
            pilot,
            lambda: on_top(app, WhyScreen) and "Go to the stage's call" in screen_text(app),
            "the slice and its keys",
        )
        assert isinstance(app.screen, WhyScreen)
        tree = app.screen.query_one(Tree)
        text = screen_text(app)
        popup = inside(text)
        assert "why message:2" in popup and "the injections of iteration 1" in popup
        assert "decided" in popup and "#" not in popup
        # While it is open, the footer lists the popup's keys, not the scrubber's.
        footer = text.strip().splitlines()[-1]
        assert "Back" in footer and "Go to the stage's call" in footer
        assert "Prev call" not in footer
        seed = next(n for n in _nodes(tree.root) if "the user's message" in str(n.label))
        tree.select_node(seed)
        await until(pilot, lambda: app.screen is main(app) and showing(app, 1), "call 1")
        assert position(app).startswith("call 1/5")


def inside(text: str) -> str:
    """What a popup shows, within its border."""
    return "\n".join(line.split("│")[1] for line in text.splitlines() if line.count("│") >= 2)


def _nodes(node):  # type: ignore[no-untyped-def]
    yield node
    for child in node.children:
        yield from _nodes(child)


async def test_help_and_quit() -> None:
    async with lens(TRIP) as (app, pilot):
        await pilot.press("question_mark")
        await until(pilot, lambda: on_top(app, Help), "the help")
        assert "the summarizer's call" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main(app), "the help closed")
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "the app ended")
        assert app.return_code == 0


async def test_follow_shows_calls_as_they_land(tmp_path: Path) -> None:
    lines = TRIP.read_bytes().splitlines(keepends=True)
    calls = [i for i, line in enumerate(lines) if line.startswith(b'{"t":"call"')]
    live = tmp_path / "live.jsonl"
    live.write_bytes(b"".join(lines[: calls[1]]))  # the run has made one call
    import tui.screens.lens

    every, tui.screens.lens.FOLLOW_EVERY = tui.screens.lens.FOLLOW_EVERY, 0.05
    try:
        async with lens(live, follow=True) as (app, pilot):
            assert position(app).startswith("call 1/1")
            assert "following" in screen_text(app)
            with live.open("ab") as f:
                f.write(b"".join(lines[calls[1] : calls[3]]))
            # At the newest call, the Lens moves on with the run.
            await until(pilot, lambda: position(app).startswith("call 3/3"), "call 3/3")
            await pilot.press("home")
            with live.open("ab") as f:
                f.write(b"".join(lines[calls[3] :]))
            await until(pilot, lambda: "answer after" in screen_text(app), "the answer")
            assert position(app).startswith("call 1/5")  # elsewhere, it stays put
            assert "answer after 5 iterations" in screen_text(app)
    finally:
        tui.screens.lens.FOLLOW_EVERY = every


@pytest.fixture
def big(tmp_path: Path) -> Path:
    return write(tmp_path, mb=3, shape="prose", run_id="big")


async def test_a_big_file_shows_its_first_call_then_indexes_the_rest(big: Path) -> None:
    import tui.app

    path = big
    prefix, tui.app.PREFIX = tui.app.PREFIX, 400_000
    try:
        async with lens(path) as (app, pilot):
            await app.workers.wait_for_complete()  # the whole file indexed, and shown
            assert "+" not in position(app).split()[1]
            last = main(app).timeline.marks[-1].n
            await pilot.press("end")
            await until(pilot, lambda: showing(app, last), "the last call")
            assert position(app).startswith(f"call {last}/{last}")
    finally:
        tui.app.PREFIX = prefix


async def test_why_shows_the_key_figure_in_full_and_fits_the_screen() -> None:
    async with lens(COMPACTION, size=(100, 30)) as (app, pilot):
        await pilot.press("9", "enter", "m")
        await until(pilot, lambda: showing(app, 9) and _on(app, "msg:"), "call 9's messages")
        assert slots(app).go_to("seam:1")
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, WhyScreen), "the slice")
        popup = inside(screen_text(app))
        # Wrapped, never cut: the figure the CLI prints, whole.
        assert "1,297 tokens measured, threshold 1,200" in " ".join(popup.split())
        assert "more chars" not in popup.split("▼")[0]
        tree = app.screen.query_one(Tree)
        assert tree.virtual_size.width <= tree.size.width  # no line runs off the right


async def test_a_narrow_terminal_stacks_the_panes() -> None:
    async with lens(TRIP, size=(80, 24)) as (app, pilot):
        body = main(app).query_one("#body")
        # Set when the screen hears its size; laid out on the next frame.
        await until(pilot, lambda: body.has_class("-stacked"), "the panes stacked")
        text = screen_text(app)
        left, right = slots(app), main(app).query_one("#events", ItemList)
        assert left.size.width == right.size.width >= 78
        assert right.region.y > left.region.y
        assert "You are trip-demo, a travel assistant who plans one" in text
    async with lens(TRIP, size=(120, 40)) as (app, pilot):
        assert not main(app).query_one("#body").has_class("-stacked")


async def test_json_wraps_between_tokens() -> None:
    async with lens(TRIP, size=(100, 40)) as (app, pilot):
        lines = [line.partition("▕")[2] for line in screen_text(app).splitlines()]
        assert '"high_c": 24, "low_c": 16' in " ".join(" ".join(lines).split())
        for line in lines:
            # No number is broken across lines.
            assert not line.rstrip().endswith(('"low_c":1', '"high_c":2'))


async def test_help_tells_the_marks_apart_by_shape() -> None:
    from tui.widgets.scrubber import LEGEND

    glyphs = [char for char, _, _ in LEGEND]
    assert len(glyphs) == len(set(glyphs)), "two marks share a glyph"
    async with lens(TRIP) as (app, pilot):
        assert "◆◆◇◆●" in screen_text(app)  # call 3's arguments were refused
        await pilot.press("question_mark")
        await until(pilot, lambda: on_top(app, Help), "the help")
        text = screen_text(app)
        assert "◇" in text and "arguments were refused" in text
        assert "◈" in text and "a tool failed" in text
