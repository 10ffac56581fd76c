"""The Lens shows what a vendor said besides the content (af show's side is in
tests/afcli/test_vendor_details.py, which makes the run)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.afcli.test_vendor_details import answered_run
from tests.tui.conftest import main, screen_text, showing, until
from tui import make_lens_app


async def test_the_lens_shows_ids_pauses_cuts_and_redacted_thinking(tmp_path: Path) -> None:
    app = make_lens_app(await asyncio.to_thread(answered_run, tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        first = screen_text(app)
        assert "pause_turn (paused, continued)" in first
        assert "msg_01Paused" in first
        assert "(redacted thinking: the vendor sent it" in first  # (wrapped)
        assert "(server_tool_use web_search, kept for" in first
        assert "probe()  strict" in first
        n = main(app).timeline.marks[-1].n
        await pilot.press("end")
        await until(pilot, lambda: showing(app, n), "the last call")
        last = screen_text(app)
        assert "msg_03Cut" in last and "the answer was cut at the model's token limit" in last
