"""Toolong's side of the opening benchmark (``bench/lens_open.py``): open a file headless, as
``tl FILE`` does, and print as JSON the seconds from this module's start to the first line of
a call record on screen (Toolong opens at the end of a file, so it is the last call), and the
process's peak resident memory. Runs in Toolong's own virtual environment.

    python -m bench.peers.toolong_open FILE LIMIT
"""

from __future__ import annotations

import time

START = time.perf_counter()

import asyncio  # noqa: E402  (the clock starts before the imports: they are part of opening)
import json  # noqa: E402
import sys  # noqa: E402

from toolong.ui import UI  # noqa: E402

from bench.peers._screen import peak_rss_mb, screen_text  # noqa: E402

SIZE = (120, 40)
CALL = '{"t":"call"'


async def probe(path: str, limit: float) -> dict[str, object]:
    app = UI([path])
    async with app.run_test(size=SIZE):
        while time.perf_counter() - START < limit:
            if CALL in screen_text(app):
                return {"first_call": time.perf_counter() - START, "peak_rss_mb": peak_rss_mb()}
            await asyncio.sleep(0.005)
    return {"first_call": None, "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    print(json.dumps(asyncio.run(probe(sys.argv[1], float(sys.argv[2])))))


if __name__ == "__main__":
    main()
