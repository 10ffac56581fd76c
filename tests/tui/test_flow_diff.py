"""``af lens A --diff B`` of two flows' logs: the tree says which steps ran in one run only
(B's where they would have been), which decisions went the other way with the values their
predicates read on each side, and how each shared step differs; the scrubber marks the calls
that differ and the selected call's differences head its events; hostile text stays text."""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import OptionList
from typer.testing import CliRunner

from afcli.app import app as af
from afcore import Agent, RecordingConfig, mock
from afcore.errors import RecordingFormatError
from afcore.flows import Conditional, FlowView, Sequence
from tests.tui.conftest import GUARD, SAMPLES, on_top, screen_text, until
from tui.app import LensApp, make_lens_app
from tui.screens.flow import FlowScreen
from tui.screens.flow_why import FlowWhyScreen
from tui.screens.viewer import Viewer
from tui.widgets.item_list import ItemList
from tui.widgets.scrubber import Scrubber

HOSTILE = "crash \x1b[31m[bold red]BOOM[/bold red]\x1b]0;pwned\x07 [link=x]y[/link]"


def _triage(s: FlowView) -> str:
    message = str(s.message)
    s["intent"] = "billing" if "invoice" in message.lower() else "tech"
    return message


def _desk(name: str) -> Agent:
    def respond(request: Any) -> str:
        return f"{name} desk: {request.messages[-1].content}"

    return Agent.create(provider=mock(respond=respond), model=f"mock-{name}", name=name).build()


def _writer() -> Agent:
    def respond(request: Any) -> str:
        return f"Dear customer, {request.messages[-1].content}"

    return Agent.create(provider=mock(respond=respond), model="mock-writer", name="writer").build()


def support(folder: Path, run_id: str, message: str) -> Path:
    """A ticket triaged, routed to one desk, answered by a writer: reproducible files (a
    ticking clock, a fixed wall clock and run id)."""
    ticks = itertools.count()
    config = RecordingConfig(
        dir=folder,
        run_id=run_id,
        clock=lambda: next(ticks) / 1000,
        now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        seed=7,
    )
    flow = (
        Sequence.create("support", record=config)
        .step("triage", _triage)
        .step(
            "route",
            Conditional.create("route")
            .when("billing", lambda s: s["intent"] == "billing", _desk("billing"))
            .otherwise("tech", _desk("tech"))
            .build(),
        )
        .step("reply", _writer())
        .build()
    )
    flow.run(message)
    return folder / f"{run_id}.jsonl"


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path]:
    a = support(tmp_path, "ticket-a", "Invoice 1042 was charged twice.")
    b = support(tmp_path, "ticket-b", HOSTILE)
    return a, b


@asynccontextmanager
async def compared(
    a: Path, b: Path, size: tuple[int, int] = (160, 40)
) -> AsyncIterator[tuple[LensApp, Any]]:
    app = make_lens_app(a, against=b)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: compared_and_drawn(app), "compared")
        yield app, pilot


def compared_and_drawn(app: LensApp) -> bool:
    """Whether the comparison, run on a thread, has landed and the call is drawn with it."""
    screen = app.screen
    return (
        isinstance(screen, FlowScreen)
        and screen.is_mounted
        and screen.compared is not None
        and screen.shown == screen.index
    )


def flow_screen(app: LensApp) -> FlowScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FlowScreen)
    return screen


def at(app: LensApp, index: int) -> bool:
    """Whether the flow's screen has the call at ``index`` selected and drawn."""
    screen = flow_screen(app)
    return screen.index == index and screen.shown == index


def rows(app: LensApp) -> list[str]:
    steps = flow_screen(app).query_one("#steps")
    return [
        str(steps.get_option_at_index(i).prompt)  # type: ignore[attr-defined]
        for i in range(steps.option_count)  # type: ignore[attr-defined]
    ]


async def test_steps_only_in_one_run_and_the_decision_that_went_the_other_way(
    two: tuple[Path, Path],
) -> None:
    a, b = two
    async with compared(a, b) as (app, _):
        text = screen_text(app)
        assert "≠ b = ticket-b.jsonl: " in text and "the endings differ" in text
        listed = rows(app)
        billing = next(r for r in listed if "billing agent" in r)
        assert "billing agent only here ok" in billing
        tech = next(r for r in listed if "+ tech agent" in r)
        assert "only in b" in tech
        # B's step is where it would have been: under route, after this run's branch.
        assert (
            listed.index(billing)
            < listed.index(tech)
            < next(i for i, r in enumerate(listed) if r.startswith("  reply"))
        )
        # The predicate that answered otherwise, and what it read on each side.
        answered = next(r for r in listed if "predicate billing: answered" in r)
        assert "true → b false" in answered
        at = listed.index(answered)
        assert listed[at + 1].strip() == 'a read state.intent = "billing"'
        assert listed[at + 2].strip() == 'b read state.intent = "tech"'
        assert any("≠ chosen 'billing' → b 'tech'" in r for r in listed)
        # A shared agent step, differing call by call.
        reply = next(r for r in listed if r.startswith("  reply agent"))
        assert "≠ 1 of 1 call differs" in reply


async def test_the_calls_that_differ_are_marked_and_listed_first(
    two: tuple[Path, Path],
) -> None:
    a, b = two
    async with compared(a, b) as (app, pilot):
        screen = flow_screen(app)
        # Call 1 is billing's (its step ran only here); call 2 the writer's, which differs.
        assert screen.query_one(Scrubber).differing == {1, 2}
        events = screen.query_one("#events", ItemList)
        assert "DIFF  its step ran only here, not in" in screen_text(app)
        await pilot.press("right")
        await until(pilot, lambda: at(app, 1), "call 2")
        text = screen_text(app)
        assert "DIFF  2 differences from reply of ticke" in text
        assert "~ messages message 1: content" in text
        assert "b 'tech desk: crash" in text
        said = [item for key, item in events.items.items() if key.startswith("diff:")]
        assert [item.title for item in said] == [
            "call 1 · messages · message 1: content",
            "call 1 · reply · reply: content[0].text",
        ]


async def test_enter_shows_a_difference_whole_and_w_asks_why_of_this_side(
    two: tuple[Path, Path],
) -> None:
    a, b = two
    async with compared(a, b) as (app, pilot):
        screen = flow_screen(app)
        steps = screen.query_one("#steps")
        listed = rows(app)
        assert app.focused is steps
        steps.highlighted = next(  # type: ignore[attr-defined]
            i for i, r in enumerate(listed) if "predicate billing: answered" in r
        )
        await pilot.press("enter")
        await until(pilot, lambda: on_top(app, Viewer), "the viewer")
        assert isinstance(app.screen, Viewer)
        assert app.screen.title_text == "route · predicate billing: answered"
        assert 'b read: state.intent = "tech"' in app.screen.text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the viewer closed")
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, FlowWhyScreen), "why opened")
        assert "intent" in screen_text(app)


async def test_hostile_text_in_the_other_run_stays_text(two: tuple[Path, Path]) -> None:
    a, b = two
    for size in ((80, 24), (160, 40)):
        async with compared(a, b, size) as (app, pilot):
            calls = len(flow_screen(app).timeline.calls)
            for k in range(calls):
                if k:
                    await pilot.press("right")
                    await until(pilot, lambda: at(app, k), f"call {k + 1}")  # noqa: B023
                text = screen_text(app)
                assert "\x1b" not in text and "\x07" not in text
            listed = "\n".join(rows(app))
            assert "\x1b" not in listed
            if size[0] >= 120:  # beside the call, the rows have room for it
                assert "b 'crash \\x1b[31m[bold re" in listed  # the value, as text
        # Whole, in the viewer: as text too, the terminal's title untouched.
        async with compared(a, b) as (app, pilot):
            steps = flow_screen(app).query_one("#steps")
            assert app.focused is steps
            steps.highlighted = next(  # type: ignore[attr-defined]
                i for i, r in enumerate(rows(app)) if "≠ input" in r
            )
            await pilot.press("enter")
            await until(pilot, lambda: on_top(app, Viewer), "the viewer")
            assert isinstance(app.screen, Viewer)
            assert "\\x1b[31m[bold red]BOOM[/bold red]\\x1b]0;pwned\\x07" in app.screen.text
            assert "[bold red]BOOM" in screen_text(app)


@pytest.fixture
def twins(tmp_path: Path) -> tuple[Path, Path]:
    return (
        support(tmp_path, "same-a", "Invoice 7 is wrong."),
        support(tmp_path, "same-b", "Invoice 7 is wrong."),
    )


async def test_identical_runs_say_so(twins: tuple[Path, Path]) -> None:
    a, b = twins
    async with compared(a, b) as (app, _):
        assert "= identical to same-b.jsonl: 5 steps, the same ending" in screen_text(app)
        assert flow_screen(app).query_one(Scrubber).differing == set()


def test_a_flow_is_compared_with_a_flow_only(two: tuple[Path, Path]) -> None:
    a, _ = two
    agent_run = SAMPLES / "sample-trip.jsonl"
    for x, y in ((a, agent_run), (agent_run, a)):
        with pytest.raises(RecordingFormatError, match="compares two flows' logs"):
            make_lens_app(x, against=y)
    ran = CliRunner().invoke(af, ["lens", str(a), "--diff", str(agent_run)])
    assert ran.exit_code != 0 and "compares two flows' logs" in ran.output


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "wide"])
def test_the_flow_diff_screen(
    snap_compare: Callable[..., bool], size: tuple[int, int], two: tuple[Path, Path]
) -> None:
    a, b = two

    async def compare_done(pilot: Any) -> None:
        await until(pilot, lambda: compared_and_drawn(pilot.app), "compared")
        await pilot.press("right")
        await until(pilot, lambda: at(pilot.app, 1), "call 2")

    assert snap_compare(make_lens_app(a, against=b), run_before=compare_done, terminal_size=size)


async def test_a_row_chosen_in_the_tree_stays_chosen_when_the_comparison_lands(
    two: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The comparison runs on a thread; once it landed, the call was drawn again and the
    # tree's highlight put back on that call's step, or kept at its number among rows that
    # the differences had moved: Enter or w then took a row the person had left.
    import afcore.readmodel

    gate = threading.Event()
    diff_flows = afcore.readmodel.diff_flows

    def held(*args: Any) -> Any:
        assert gate.wait(GUARD), "the test never let the comparison end"
        return diff_flows(*args)

    monkeypatch.setattr(afcore.readmodel, "diff_flows", held)
    a, b = two
    app = make_lens_app(a, against=b)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: app.screen.is_mounted and at(app, 0), "the first call")
            screen = flow_screen(app)
            steps = screen.query_one("#steps", OptionList)
            chosen = next(i for i, (_, key) in enumerate(screen.rows_of) if key)
            row = screen.rows_of[chosen]  # a decision's row, not a call's step
            steps.highlighted = chosen
            gate.set()
            await until(pilot, lambda: compared_and_drawn(app), "compared")
            assert steps.highlighted is not None
            assert screen.rows_of[steps.highlighted] == row
    finally:
        gate.set()
