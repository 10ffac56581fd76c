"""Printing a benchmark's figures as a compact, aligned table."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence

__all__ = ["print_table", "timed", "verdict"]


def timed(run: Callable[[], object]) -> float:
    """Seconds ``run()`` takes. Garbage left by earlier runs is collected first, off the clock,
    so that one run does not pay for another's."""
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def verdict(met: bool) -> str:
    return "target met" if met else "target missed"


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """The first column left-aligned (labels), the others right-aligned (figures)."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        out = [str(first).ljust(widths[0])]
        out += [str(c).rjust(w) for c, w in zip(rest, widths[1:], strict=True)]
        return "  ".join(out).rstrip()

    print(title)
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
