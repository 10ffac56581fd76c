"""A flow's recording in the Lens: the tree of its steps with the decisions taken, each
agent's calls opened from its step and left again; hostile text in a step stays text."""

from __future__ import annotations

from pathlib import Path

from afcore.flows import Sequence
from tests.tui.conftest import SAMPLES, lens, position, screen_text
from tui.screens.flow import AgentRunScreen, FlowScreen

ROUTER = SAMPLES / "flow-router.jsonl"


async def test_a_flow_opens_on_its_steps_and_their_decisions() -> None:
    async with lens(ROUTER) as (app, _):
        assert isinstance(app.screen, FlowScreen)
        text = screen_text(app)
        assert "flow flow-router  support  answer · 2 calls" in text
        assert "answer from route/billing" in text
        for piece in ("triage function ok", "route conditional ok", "billing agent ok"):
            assert piece in text, piece
        assert '⤷ chose billing  read state.intent = "billing"' in text


async def test_enter_opens_an_agent_s_calls_and_b_comes_back() -> None:
    async with lens(ROUTER) as (app, pilot):
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, AgentRunScreen)
        assert position(app).startswith("call 1/2")
        assert "lookup_invoice" in screen_text(app)
        await pilot.press("right")
        await pilot.pause()
        assert position(app).startswith("call 2/2")
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, FlowScreen)


async def test_a_step_that_is_not_an_agent_opens_nothing(tmp_path: Path) -> None:
    async with lens(ROUTER) as (app, pilot):
        await pilot.press("home", "enter")
        await pilot.pause()
        assert isinstance(app.screen, FlowScreen)


async def test_escape_sequences_and_markup_in_a_step_stay_text(tmp_path: Path) -> None:
    hostile = "\x1b[2J\x1b[31mred[/bold] [link=x]y[/link]"
    flow = Sequence.create("h", record=tmp_path).step("say", lambda s: hostile).build()
    await flow.arun("m")
    assert flow.last_result is not None and flow.last_result.recording is not None
    async with lens(flow.last_result.recording) as (app, _):
        text = screen_text(app)
        assert "\\x1b[2J\\x1b[31mred[/bold] [link=x]y[/link]" in text
