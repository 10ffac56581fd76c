"""The Lens on honest tool results: each result's own status, what became of it, and the run
an agent called as a tool made, opened from the call that made it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from afcore import Agent, agent_tool, define_tool, mock
from afcore.tools import ResultCeiling, absent
from tests.tui.conftest import lens, main, on_top, screen_text, showing, until
from tests.tui.test_governance import events_text
from tui.screens.lens import LensScreen
from tui.widgets.item_list import ItemList

OPEN: dict[str, Any] = {"type": "object", "properties": {}}


def refund(args: dict[str, Any], ctx: Any) -> Any:
    effect = {"kind": "require-instruction", "instruction_id": "playbook", "lease": "next-call"}
    return {"content": "refused (policy P-12)", "status": "denied", "effects": [effect]}


async def honest_run(folder: Path) -> tuple[Path, Path]:
    translator = Agent.create(
        provider=mock(replies=["Hola, ¿cómo estás?"]),
        model="m",
        name="translator",
        record=folder,
    ).build()
    desk = (
        Agent.create(
            provider=mock(
                replies=[
                    {
                        "tool_calls": [
                            {"id": "c1", "name": "failures", "args": {}},
                            {"id": "c2", "name": "export", "args": {}},
                            {"id": "c3", "name": "translate", "args": {"message": "Hello"}},
                            {"id": "c4", "name": "refund", "args": {}},
                        ]
                    },
                    {"tool_calls": [{"id": "c5", "name": "export", "args": {}}]},
                    "Done.",
                ]
            ),
            model="m",
            name="desk",
            record=folder,
        )
        .tool(
            define_tool(
                "failures",
                "Failures.",
                OPEN,
                lambda a, c: absent(what="failed backups", checked=["the nightly export"]),
            )
        )
        .tool(
            define_tool(
                "export",
                "Export.",
                OPEN,
                lambda a, c: "ROW," * 1000,
                result_ceiling=ResultCeiling(max_chars=100),
            )
        )
        .tool(agent_tool(translator, name="translate", description="To Spanish."))
        .tool(define_tool("refund", "Refund.", OPEN, refund))
        .instruction("Offer store credit.", id="playbook", when=lambda s: False)
        .build()
    )
    await desk.arun("go")
    assert desk.last_recording is not None and translator.last_recording is not None
    return desk.last_recording, translator.last_recording


async def test_the_lens_shows_each_results_status_and_what_became_of_it(tmp_path: Path) -> None:
    outer, inner = await honest_run(tmp_path)
    async with lens(outer) as (app, pilot):
        text = events_text(app)
        assert "← ok · absent" in text
        assert "limits (absent): checked: the nightly export" in text
        assert "← ok · invalid" in text
        assert "refused over its ceiling: 4,000 chars, the ceiling is 100" in text
        assert "from agent:translator" in text
        assert "⏎ opens the run it made" in text
        assert "← ok · denied" in text
        assert "effect: require-instruction playbook → pushed into the next call" in text
        # Enter on the call that ran the agent opens its run; Esc comes back.
        events = main(app).query_one("#events", ItemList)
        linked = next(i for i, item in events.items.items() if item.run is not None)
        assert events.items[linked].run == inner.name
        events.focus()
        events.go_to(linked)
        await until(pilot, lambda: app.focused is events, "the events have the focus")
        await pilot.press("enter")
        first = app.screen_stack[0]
        await until(
            pilot, lambda: on_top(app, LensScreen) and app.screen is not first, "the inner run"
        )
        assert isinstance(app.screen, LensScreen)
        assert app.screen.rec.header.agent.name == "translator"
        assert "translator" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is first, "back on the outer run")
        # The next call: the pushed instruction, and the repeated call's nudge.
        await pilot.press("right")
        await until(pilot, lambda: showing(app, 2), "call 2")
        assert "identical call #2 with the same result: the model read the nudge" in (
            events_text(app)
        )
        assert "instruction:playbook" in screen_text(app)
