"""The Lens on a governed run: each rule's decision, the pause, who answered and when."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from afcore import Agent, Paused, ToolMiddleware, allow, ask, define_tool, mock
from tests.conftest import fixed_recording
from tests.tui.conftest import lens, main, showing, until
from tui.widgets.item_list import ItemList, Row

AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}


async def governed_run(folder: Path) -> Path:
    agent = (
        Agent.create(
            provider=mock(
                replies=[
                    {"tool_calls": [{"id": "c1", "name": "refund", "args": {"amount": 250}}]},
                    "Refunded 100.",
                ]
            ),
            model="m",
            name="refunds",
            record=fixed_recording(folder),
        )
        .tool(define_tool("refund", "Refund.", AMOUNT, lambda a, c: f"refunded {a['amount']}"))
        .tool_middleware(
            ToolMiddleware(
                "ceiling", on_tool_call=lambda c: allow({"amount": 100}, "capped at 100")
            ),
            ToolMiddleware("approval", on_tool_call=lambda c: ask("Refund 100 EUR?")),
        )
        .build()
    )
    paused = await agent.arun("refund me")
    assert isinstance(paused, Paused)
    await agent.aresume(paused, approve=True, why="known customer", by="jo")
    return paused.recording


def events_text(app: Any) -> str:
    events = main(app).query_one("#events", ItemList)
    out = []
    for i in range(events.option_count):
        prompt = events.get_option_at_index(i).prompt
        parts = prompt.parts if isinstance(prompt, Row) else [prompt]
        for p in parts:
            text = p if isinstance(p, Text) else p[1] if isinstance(p, tuple) else None
            if isinstance(text, Text):
                out.append(text.plain)
    return "\n".join(out)


async def test_the_lens_shows_the_rules_the_pause_and_the_answer(tmp_path: Path) -> None:
    path = await governed_run(tmp_path)
    async with lens(path) as (app, pilot):
        text = events_text(app)
        assert "ceiling changed the arguments: capped at 100" in text
        assert "approval asked a person: Refund 100 EUR?" in text
        assert "⏸ paused: approval asks a person: Refund 100 EUR?" in text
        assert "▶ approved by jo at 2026-01-02 03:04:05 UTC: known customer" in text
        assert "refunded 100" in text
        # The rules' event answers why with the arguments they changed.
        events = main(app).query_one("#events", ItemList)
        whys = [
            getattr(events.get_option_at_index(i), "id", None) for i in range(events.option_count)
        ]
        assert whys  # the list is populated
        await pilot.press("right")
        await until(pilot, lambda: showing(app, 2), "call 2")
        assert "Refunded 100." in events_text(app)
