"""Hostile and broken recordings in the Lens: model and tool text with markup, escape
sequences, control characters, bidi overrides and a 1 MB line is shown literally and never
acted on, in the panes, the header, the toasts and the viewer (folded to its width however
wide its characters); a torn file opens and says so; a record of an unknown type is shown
raw; a window naming more messages than the file holds is refused, not expanded; names the
file repeats, values of the wrong type, a run named with a NUL and a comparison that fails
are said, not raised; a worker's result for a screen closed since is dropped."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
from rich.cells import cell_len
from textual.pilot import Pilot

from afcore import Agent, define_tool, mock
from afcore.readmodel import Timeline, build
from afcore.recording import open_recording
from tests.conftest import fixed_recording
from tests.tui.conftest import GUARD, SAMPLES, SIZE, lens, main, position, screen_text, until
from tui.app import LensApp, make_lens_app
from tui.screens.lens import LensScreen
from tui.screens.search import SearchScreen, Source, search
from tui.screens.viewer import Viewer, fold_lines
from tui.widgets.item_list import ItemList

MARKUP = "[bold red]alert[/] [link=https://evil.example]click[/link] [@click=app.quit]quit[/]"
ANSI = "\x1b[31mred\x1b[0m\x1b[2J"
CONTROLS = "bell\x07 back\x08 bidi\u202eevil\u202c"
HUGE = 1_000_000


def trip_edited(
    folder: Path, name: str, where: Callable[[bytes], bool], edit: Callable[[bytes], bytes]
) -> Path:
    """The trip sample written as ``folder/name``, its first line that ``where`` picks
    rewritten by ``edit`` (the line ends as it did)."""
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if where(line))
    lines[at] = edit(lines[at].rstrip(b"\n")) + b"\n"
    path = folder / name
    path.write_bytes(b"".join(lines))
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    echo = define_tool(
        "echo",
        "Echo [bold]this[/bold].",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        lambda args, ctx: ANSI + "x" * HUGE,
    )
    replies: list[object] = [
        {
            "content": f"{MARKUP} {ANSI} {CONTROLS}",
            "tool_calls": [{"id": "h1", "name": "echo", "args": {"text": "[b]x[/b]"}}],
        },
        f"done {MARKUP}",
    ]
    agent = (
        Agent.create(provider=mock(replies=replies), model="m", record=fixed_recording(folder))
        .system(f"System {MARKUP}")
        .tool(echo)
        .build()
    )
    agent.run(f"user {MARKUP}")
    assert agent.last_recording is not None
    return agent.last_recording


async def test_markup_and_escapes_are_shown_literally(hostile: Path) -> None:
    async with lens(hostile) as (app, pilot):
        text = screen_text(app)
        assert "[bold red]alert[/]" in text
        assert "[link=https://evil.example]click[/link]" in text
        assert "[@click=app.quit]quit[/]" in text
        assert "\\x1b[31mred\\x1b[0m" in text and "\x1b" not in text
        assert "bell\\x07" in text and "\\u202eevil\\u202c" in text
        assert "Echo [bold]this[/bold]." in text


async def test_clicking_markup_does_nothing(hostile: Path) -> None:
    async with lens(hostile) as (app, pilot):
        text = screen_text(app).splitlines()
        y = next(i for i, line in enumerate(text) if "[@click=app.quit]" in line)
        x = text[y].index("[@click=app.quit]") + 3
        await pilot.click(offset=(x, y))
        await pilot.pause()
        assert app.is_running


async def test_a_1_mb_line_is_cut_and_opens_whole(hostile: Path) -> None:
    async with lens(hostile) as (app, pilot):
        text = screen_text(app)
        assert "more chars" in text  # the tool result, cut in the response
        await pilot.press("right")  # the call whose window holds the result
        await pilot.pause()
        slots = main(app).query_one("#slots", ItemList)
        assert slots.go_to("msg:3")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, Viewer)
        await pilot.press("end")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, Viewer)


async def test_a_torn_file_opens_and_says_so(tmp_path: Path) -> None:
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    # The last write (run_end, then its seal) cut off in its first line.
    torn.write_bytes(b"".join(lines[:-2]) + lines[-2][:25])
    async with lens(torn) as (app, pilot):
        text = screen_text(app)
        assert f"line {len(lines) - 1} is torn (25 bytes)" in text
        assert "incomplete: no run_end" in text
        assert position(app).startswith("call 1/5")


async def test_an_unknown_record_is_shown_raw(tmp_path: Path) -> None:
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"t":"reply"'))
    strange = {"t": "telemetry", "cpu": 0.5, "note": "[bold]hi[/bold]\x1b[1m"}
    lines.insert(at + 1, orjson.dumps(strange) + b"\n")
    path = tmp_path / "unknown.jsonl"
    path.write_bytes(b"".join(lines))
    async with lens(path) as (app, pilot):
        text = screen_text(app)
        assert "1 record of types this af does not know" in text
        assert "unknown record" in text and '{"t":"telemetry","cpu":0.5,' in text
        assert "\\u001b[1m" in text  # wrapped across lines: the pieces


@pytest.mark.parametrize(
    ("last", "said"),
    [(10**12, "cannot be rebuilt"), (10**30, "cannot be read:")],
    ids=["10**12", "10**30"],
)
async def test_a_window_naming_too_many_messages_is_refused(
    tmp_path: Path, last: int, said: str
) -> None:
    def window(line: bytes) -> bytes:
        call = orjson.loads(line)
        call["window"] = [[1, last]]
        return json.dumps(call, separators=(",", ":")).encode()  # orjson stops at 2**64

    path = trip_edited(
        tmp_path, "huge-window.jsonl", lambda line: line.startswith(b'{"t":"call"'), window
    )
    async with lens(path) as (app, pilot):
        assert said in screen_text(app)
        assert "✗ cannot be read" in position(app)
        await pilot.press("right")
        await pilot.pause()
        assert position(app).startswith("call 2/5 · iteration 2 · turn 1 · ✓ verified")


async def test_a_call_that_does_not_verify_is_marked(tmp_path: Path) -> None:
    path = trip_edited(
        tmp_path,
        "changed.jsonl",
        lambda line: b"I have a free Saturday" in line,
        lambda line: line.replace(b"free Saturday", b"free Sunday"),  # the hash stays
    )
    async with lens(path) as (app, pilot):
        assert "✗ not verified" in position(app)
        text = screen_text(app)
        assert "✗ not verified: the rebuilt request's" in text  # first in the response


@asynccontextmanager
async def toasting(path: Path) -> AsyncIterator[tuple[LensApp, Pilot[None]]]:
    """The Lens on ``path`` with its notifications drawn (the tests' own Lens leaves them
    out), so that what a toast says is on the screen and drawn as it would be."""
    app = make_lens_app(path)
    app.NOTIFICATION_TIMEOUT = GUARD  # a toast stays however slow the machine
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        yield app, pilot


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ("[/x] \x1b[2J[red]gone[/].jsonl", "cannot open [/x] \\x1b[2J[red]gone[/].jsonl"),
        ("a\x00b.jsonl", "cannot open a\\x00b.jsonl: embedded null byte"),
    ],
    ids=["markup", "nul"],
)
async def test_a_run_link_that_does_not_open_is_said_literally(
    tmp_path: Path, named: str, said: str
) -> None:
    # A tool's result links the run it made by a name the file chose: opening it fails,
    # and the toast saying so names it. Read as markup, "[/x]" closed no tag and stopped
    # the Lens; a NUL, which no file name holds, raised from opening and stopped it too.

    def linked(line: bytes) -> bytes:
        commit = orjson.loads(line)
        run = {"run_id": "r", "recording": named, "agent": "a", "status": "answer"}
        commit["tool"]["run"] = run
        return orjson.dumps(commit)

    path = trip_edited(
        tmp_path, "linked.jsonl", lambda line: b'"tool":{"name":"weather"' in line, linked
    )
    async with toasting(path) as (app, pilot):
        events = main(app).query_one("#events", ItemList)
        linked = next(i for i, item in events.items.items() if item.run == named)
        events.focus()
        events.go_to(linked)
        await pilot.press("enter")
        await until(pilot, lambda: "cannot open" in screen_text(app), "the toast")
        text = screen_text(app)
        assert app.is_running
        assert said in text
        assert "\x1b" not in text and "\x00" not in text


async def test_a_steps_kind_is_shown_made_safe(tmp_path: Path) -> None:
    # A step's kind is any string its start wrote: drawn as it was, its escape sequence
    # reached the terminal.
    data = (SAMPLES / "flow-router.jsonl").read_bytes()
    path = tmp_path / "kind.jsonl"
    start = b'"path":"triage","kind":"function"'
    path.write_bytes(data.replace(start, start[:-1] + b'\\u001b[2J\\u0007"'))
    async with lens(path) as (app, pilot):
        text = screen_text(app)
        assert "triage function\\x1b[2J\\x07" in text
        assert "\x1b" not in text and "\x07" not in text


async def test_a_run_ends_status_is_shown_made_safe(tmp_path: Path) -> None:
    # The run_end record's status, as the file wrote it, heads its event: not one af knows
    # (the run is then shown unfinished), drawn as it was it reached the terminal.
    path = trip_edited(
        tmp_path,
        "status.jsonl",
        lambda line: line.startswith(b'{"t":"run_end"'),
        lambda line: line.replace(b'"status":"answer"', b'"status":"\\u001b[2Jdone"'),
    )
    async with lens(path) as (app, pilot):
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        assert "run ended: \\x1b[2Jdone" in text
        assert "\x1b" not in text


async def test_two_tools_of_one_name_are_both_listed(tmp_path: Path) -> None:
    # The slots name each tool's item by the tool's name, and a list takes an id once: a
    # call whose tools list named one tool twice stopped the Lens (DuplicateID).
    data = (SAMPLES / "sample-trip.jsonl").read_bytes()
    listed = b'"name":"find_places","ref":"KYndHBZnXJDXAPqhZM_CbA","source"'
    assert listed in data
    path = tmp_path / "twice.jsonl"
    path.write_bytes(data.replace(listed, listed.replace(b"find_places", b"weather")))
    async with lens(path) as (app, pilot):
        slots = main(app).query_one("#slots", ItemList)
        named = [i for i in slots.items if i.startswith("tool:weather")]
        assert len(named) == 2
        slots.focus()
        assert slots.go_to(named[1])
        await pilot.press("w")
        await pilot.pause()
        assert app.is_running


async def test_long_names_with_newlines_leave_the_calls_room(tmp_path: Path) -> None:
    # The header names the run, its agent and its model as the file wrote them: names with
    # newlines and a page of text took the whole of a 24-line terminal.
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    header = orjson.loads(lines[0])
    page = "\n".join(["[b]word[/b] \x1b[2J"] * 40)
    header["run_id"] += page
    header["agent"]["name"] += page
    header["model"] += page
    path = tmp_path / "names.jsonl"
    path.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]))
    async with lens(path, size=(80, 24)) as (app, pilot):
        await pilot.pause()
        assert main(app).query_one("#header").size.height <= 4
        assert main(app).query_one("#slots").size.height >= 5
        text = screen_text(app)
        assert "af lens sample-trip[b]word[/b] \\x1b[2J… (663 more chars)" in text
        assert "\x1b" not in text


async def test_a_workers_result_after_its_screen_closed_is_dropped(tmp_path: Path) -> None:
    # A run opened from a tool call is indexed, and a search scanned, off the screen's
    # thread; each hands its results to its screen. Closed in between (Esc), the screen has
    # no widgets left, and drawing the results in it stopped the Lens.
    async with lens(SAMPLES / "sample-trip.jsonl") as (app, pilot):
        rec = open_recording(SAMPLES / "sample-compaction.jsonl", upto=4096)
        inner = LensScreen(rec, follow=False)
        await app.push_screen(inner)
        await pilot.pause()
        app.pop_screen()
        await pilot.pause()
        whole = open_recording(SAMPLES / "sample-compaction.jsonl")
        timeline = Timeline()
        for _ in build(whole, timeline):
            pass
        inner._progress(0.5)
        inner._failed("gone")
        inner._swap(whole, timeline)
        search = SearchScreen([Source(whole, timeline)], "")
        await app.push_screen(search)
        await pilot.pause()
        search.dismiss(None)
        await pilot.pause()
        search._add("", [], 1.0)
        assert app.is_running and app.screen is main(app)


def test_a_match_in_a_value_is_placed_where_the_value_is_first_named(tmp_path: Path) -> None:
    # A blob is placed by the first record naming its id. Since 1.1 an id is 22 characters,
    # and only 64 were looked for: every value was "a value no record names"; and a first
    # record naming it that is not JSON stopped the search.
    def places(path: Path, query: str) -> list[str]:
        with open_recording(path) as rec:
            timeline = Timeline()
            for _ in build(rec, timeline):
                pass
            return [m.place.what for _, batch in search(rec, timeline, query) for m in batch]

    trip = SAMPLES / "sample-trip.jsonl"
    assert places(trip, "a travel assistant")[0] == "injections"
    lines = trip.read_bytes().splitlines(keepends=True)
    blob = next(i for i, line in enumerate(lines) if b"a travel assistant" in line)
    ref = orjson.loads(lines[blob])["id"].encode()
    user = next(i for i in range(blob + 1, len(lines)) if b'"' + ref + b'"' in lines[i])
    lines[user] = lines[user].replace(b'"reads"', b'"\xff\xfe"', 1)
    path = tmp_path / "unreadable.jsonl"
    path.write_bytes(b"".join(lines))
    assert places(path, "a travel assistant")[0] == "a value"


def test_the_viewer_folds_wide_text_and_tabs_to_the_views_width() -> None:
    # A CJK character takes two cells and a tab up to eight: folded a character at a time,
    # the viewer's lines ran past its right edge, their ends out of sight.
    text = "東京の天気は晴れ。" * 20 + "\n" + "\tcol" * 30 + "\nplain " * 3
    folded = fold_lines(text, 40)
    assert all(cell_len(piece) <= 40 for piece in folded)
    assert "".join(folded).replace(" ", "") == text.replace("\n", "").replace("\t", "").replace(
        " ", ""
    )
    assert fold_lines("x" * 95, 40) == ["x" * 40, "x" * 40, "x" * 15]


async def test_a_comparison_that_fails_says_so_where_it_said_comparing(tmp_path: Path) -> None:
    # --diff against a run one of whose calls is no valid record: the comparison stops, and
    # its toast goes; each call still said "comparing…" as if it were under way.
    other = trip_edited(
        tmp_path,
        "other.jsonl",
        lambda line: line.startswith(b'{"t":"call"'),
        lambda line: line.replace(b'"model":"mock-trip"', b'"model":7'),
    )
    app = make_lens_app(SAMPLES / "sample-trip.jsonl", against=other)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "comparing…" not in position(app), "the comparison")
        assert "cannot compare:" in position(app)
        assert "is not a valid call record" in position(app)


async def test_a_result_nested_a_thousand_levels_deep_is_drawn(tmp_path: Path) -> None:
    # A tool's result as a value nested 1,020 levels deep, and as text holding JSON nested
    # as deep: writing the one and spacing the other ran out of stack, and the Lens stopped.
    lines = (SAMPLES / "sample-trip.jsonl").read_bytes().splitlines(keepends=True)
    deep = b"[" * 1_020 + b"1" + b"]" * 1_020
    at = [i for i, line in enumerate(lines) if b'"tool":{"name":' in line][:2]
    quoted = re.compile(rb'"content":"(?:[^"\\]|\\.)*"')
    for i, content in zip(at, (deep, orjson.dumps(deep.decode())), strict=True):
        lines[i] = quoted.sub(b'"content":' + content, lines[i], count=1)
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b"".join(lines))
    async with lens(path) as (app, pilot):
        text = screen_text(app)
        assert "(a value nested too deep to be written" in text  # wrapped before "out"
        assert "[[[[[[[[[[" in text


async def test_a_flow_with_a_value_nested_a_thousand_deep_opens_and_searches(
    tmp_path: Path,
) -> None:
    # Past the stack, a RecursionError in the Lens did not even stop it: drawing the
    # error's traceback through the deep value hung it on a blank screen.
    from tests.afcore.test_readmodel_hostile import _deep_state

    path = _deep_state(tmp_path, 1_015)
    async with lens(path) as (app, pilot):
        assert "read state.intent = (a value" in screen_text(app)
        await pilot.press("slash", *"billing")
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        await until(pilot, lambda: "matches ·" in screen_text(app), "the search")
        assert "searching" not in screen_text(app)
