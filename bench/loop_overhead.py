"""af's loop overhead per iteration against pydantic-ai's: its latest release and its fastest.

All run the same scripted tool loop (one small tool call per model request, then an answer)
with an in-process model that does nothing, so what is timed is the framework's own work per
request -> tool call -> tool result round trip, at 20 and at 200 iterations (a short run pays
the fixed cost per run). af records every run (to a temporary folder), as it would in use.
Each contender is timed the same way, in a fresh process of its own that imports only its
own stack (``bench.peers.releases``): af (``bench._af_loop``), pydantic-ai's latest release
(this environment's) and its fastest, 1.0.x (a virtual environment of its own, made on first
run); each script times its runs after a warm-up, each after a garbage collection. Rounds
interleave af, the latest peer and the fastest peer, so that drift in the machine's speed
falls on all. ``--af-checkout PATH`` times the af of another checkout too, in the same
rounds (a before/after). Run: ``python -m bench.loop_overhead``.
"""

from __future__ import annotations

import argparse
import statistics
from importlib.metadata import version
from pathlib import Path

from bench._report import print_table, verdict
from bench.peers.releases import FASTEST, OldPeer, Separate

TARGET = 0.25
"""af's time per iteration, recording included, at most a quarter of the fastest
pydantic-ai's, at 20 and at 200 iterations."""


def measure(
    iterations: int, rounds: int, contenders: list[tuple[Separate, int]]
) -> list[list[float]]:
    """Seconds per run of each contender (each a process per round, timing the given number
    of runs), interleaved. af runs are much shorter, so each round times more of them."""
    times: list[list[float]] = [[] for _ in contenders]
    for _ in range(rounds):
        for (contender, runs), got in zip(contenders, times, strict=True):
            got += contender.runs(iterations, runs)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="*", default=[200, 20])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fastest", default=FASTEST, help="the pydantic-ai release to compare")
    parser.add_argument(
        "--af-checkout",
        type=Path,
        action="append",
        default=[],
        help="also time the af of this checkout (its bench/_af_loop.py must take --runs)",
    )
    args = parser.parse_args()
    old = OldPeer(args.fastest)
    latest_name = f"pydantic-ai {version('pydantic-ai-slim')}"
    old_name = f"pydantic-ai {args.fastest}"
    others = [
        (f"af of {path.resolve().name} (recording on)", Separate.af(path))
        for path in args.af_checkout
    ]
    verdicts = []
    for n in args.iterations:
        af_runs = max(4, 2000 // n // 5)
        old_runs = 3 if n > 50 else 10
        af_times, latest_times, old_times, *other_times = measure(
            n,
            args.rounds,
            [
                (Separate.af(), af_runs),
                (Separate.latest(), 1),
                (old, old_runs),
                *((contender, af_runs) for _, contender in others),
            ],
        )

        def ms(times: list[float], how: str, n: int = n) -> float:
            pick = min(times) if how == "best" else statistics.median(times)
            return pick / n * 1000

        rows = []
        for name, times in (
            ("af (recording on)", af_times),
            *((name, times) for (name, _), times in zip(others, other_times, strict=True)),
            (latest_name, latest_times),
            (old_name, old_times),
        ):
            rows.append((name, f"{ms(times, 'best'):.3f}", f"{ms(times, 'median'):.3f}"))
        for name, times in ((latest_name, latest_times), (old_name, old_times)):
            rows.append(
                (
                    f"ratio af / {name}",
                    f"{ms(af_times, 'best') / ms(times, 'best'):.3f}",
                    f"{ms(af_times, 'median') / ms(times, 'median'):.3f}",
                )
            )
        for (name, _), times in zip(others, other_times, strict=True):
            rows.append(
                (
                    f"ratio {name.removesuffix(' (recording on)')} / {old_name}",
                    f"{ms(times, 'best') / ms(old_times, 'best'):.3f}",
                    f"{ms(times, 'median') / ms(old_times, 'median'):.3f}",
                )
            )
        print_table(
            f"loop overhead: {n}-iteration scripted tool loop, ms per iteration ({len(af_times)} "
            f"af runs, {len(latest_times)} and {len(old_times)} pydantic-ai runs)",
            ("", "best", "median"),
            rows,
        )
        print()
        ratio = ms(af_times, "best") / ms(old_times, "best")
        verdicts.append(
            f"target at {n} iterations: af / {old_name} <= {TARGET} (best): "
            f"{verdict(ratio <= TARGET)}"
        )
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
