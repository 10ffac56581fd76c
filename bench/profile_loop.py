"""Where af's time per iteration goes: the scripted 200-iteration loop, recording on, under
cProfile. Prints the top functions by cumulative and by own time, in microseconds per
iteration, to decide what to optimize next. Run: ``python -m bench.profile_loop``; with
``--injections``, the loop carries the 200 injections of ``bench.injections``.

cProfile sees only the loop's thread and slows every Python call, so read the figures as
shares, not as the loop's speed (``bench.loop_overhead`` measures that). Time another thread
makes the loop wait for (the GIL) shows up in whatever call was waiting, typically
``posix.write``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
from typing import Any

from bench import injections
from bench._af_loop import build_agent, recordings_dir, run_once
from bench._report import print_table

# The event loop's and the harness's own frames: every run passes through them, so they top
# any cumulative list while saying nothing about af.
_WRAPPERS = ("asyncio", "_contextvars", "bench/", "runners.py", "<built-in method builtins.exec>")


def _label(key: tuple[str, int, str]) -> str:
    file, line, func = key
    if file == "~":  # a builtin: cProfile names it in the function field
        return func
    parts = file.replace("\\", "/").split("/")
    # From the package folder down: afcore/loop/_run.py, jsonschema/validators.py, ...
    for anchor in ("afcore", "site-packages", "lib"):
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            parts = parts[i + 1 :] if anchor != "afcore" else parts[i:]
            break
    return f"{'/'.join(parts)}:{line}({func})"


def profile(iterations: int, runs: int, *, injected: bool = False) -> pstats.Stats:
    extend = injections.add_injections if injected else None
    state = injections.STATE if injected else None
    with recordings_dir() as folder:
        agent = build_agent(iterations, record=folder, extend=extend)
        run_once(agent, iterations, state=state)
        profiler = cProfile.Profile()
        for _ in range(runs):
            profiler.enable()
            run_once(agent, iterations, state=state)
            profiler.disable()
            path = agent.last_recording
            if path is not None:
                path.unlink()
    return pstats.Stats(profiler)


def _rows(stats: pstats.Stats, per: int, column: int, top: int) -> list[tuple[str, ...]]:
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]
    entries = [
        (key, value)
        for key, value in table.items()
        if not any(w in key[0] or w in key[2] for w in _WRAPPERS)
        # run(), arun() and run_loop() hold the whole run: nothing to learn from their total.
        and value[3] < 0.95 * total
    ]
    entries.sort(key=lambda kv: kv[1][column], reverse=True)
    rows: list[tuple[str, ...]] = []
    for key, (_cc, calls, own, cumulative, _callers) in entries[:top]:
        rows.append(
            (
                _label(key),
                f"{calls / per:.1f}",
                f"{cumulative / per * 1e6:.1f}",
                f"{own / per * 1e6:.1f}",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument(
        "--injections",
        action="store_true",
        help=f"with the {injections.STEERING + injections.RULES} injections of bench.injections",
    )
    args = parser.parse_args()
    stats = profile(args.iterations, args.runs, injected=args.injections)
    per = args.iterations * args.runs
    total: float = stats.total_tt  # type: ignore[attr-defined]
    header = ("function", "calls/iter", "cum us/iter", "own us/iter")
    carrying = f", {injections.STEERING + injections.RULES} injections" if args.injections else ""
    print(
        f"profile: {args.iterations}-iteration scripted af loop{carrying}, recording on, "
        f"{args.runs} runs; "
        f"{total / per * 1e6:.1f} us per iteration under cProfile\n"
    )
    print_table(f"top {args.top} by cumulative time", header, _rows(stats, per, 3, args.top))
    print()
    print_table(f"top {args.top} by own time", header, _rows(stats, per, 2, args.top))


if __name__ == "__main__":
    main()
