"""The Lens's side of the opening benchmark (``bench/lens_open.py``): open a recording
headless, as ``af lens FILE`` does, and print as JSON the seconds from this module's start to
the first call on screen (its position line and its first message drawn); once the file is
indexed, the seconds from End to the last call on screen and, stepping back through twenty
calls, the median seconds from a step to its call on screen; and the process's peak resident
memory.

    python -m bench.peers.lens_open FILE
"""

from __future__ import annotations

import time

START = time.perf_counter()

import asyncio  # noqa: E402  (the clock starts before the imports: they are part of opening)
import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.peers._screen import peak_rss_mb, screen_text  # noqa: E402
from tui.app import make_lens_app  # noqa: E402
from tui.screens.lens import LensScreen  # noqa: E402

SIZE = (120, 40)


async def _until(app: Any, act: Callable[[], None], position: str) -> float:
    """Seconds from ``act()`` until the screen shows the call at ``position`` drawn: the
    position line says it is verified once its slots are filled in."""
    started = time.perf_counter()
    act()
    while not any(
        position in line and "verified" in line for line in screen_text(app).splitlines()
    ):
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


async def probe(path: Path, first_words: str, limit: float) -> dict[str, object]:
    app = make_lens_app(path)
    async with app.run_test(size=SIZE):
        first = None
        while time.perf_counter() - START < limit:
            text = screen_text(app)
            if "call 1/" in text and first_words in text:
                first = time.perf_counter() - START
                break
            await asyncio.sleep(0.005)
        if first is None:
            return {"first_call": None}
        await app.workers.wait_for_complete()
        indexed = time.perf_counter() - START
        screen = app.screen
        assert isinstance(screen, LensScreen)
        last = screen.timeline.marks[-1].n
        to_last = await _until(app, lambda: screen.action_edge(1), f"call {last}/{last}")
        # Back through twenty calls, each drawn before the next step.
        steps = [
            await _until(app, lambda: screen.action_move(-1), f"call {last - k}/{last}")
            for k in range(1, 21)
        ]
        scrub = sorted(steps)[len(steps) // 2]
        return {
            "first_call": first,
            "indexed": indexed,
            "calls": last,
            "to_last": to_last,
            "per_step": scrub,
            "peak_rss_mb": peak_rss_mb(),
        }


def main() -> None:
    path, first_words, limit = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    print(json.dumps(asyncio.run(probe(path, first_words, limit))))


if __name__ == "__main__":
    main()
