"""Printing a benchmark's figures as a compact, aligned table."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["child_env", "print_table", "timed", "verdict"]

ROOT = Path(__file__).resolve().parent.parent


def child_env() -> dict[str, str]:
    """The environment of a timed ``af`` process: this checkout's sources first on the path
    (the console script imports whichever af its environment installed, which need not be the
    checkout the bench was run from and compiled), read from their compiled bytecode whatever
    the caller's environment says (with PYTHONDONTWRITEBYTECODE set, every run would pay
    compiling af's sources, and a baseline's site-packages would not)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


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
