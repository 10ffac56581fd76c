"""af's loop overhead per iteration against pydantic-ai's: its latest release and its fastest.

All run the same scripted tool loop (one small tool call per model request, then an answer)
with an in-process model that does nothing, so what is timed is the framework's own work per
request -> tool call -> tool result round trip, at 20 and at 200 iterations (a short run pays
the fixed cost per run). af records every run (to a temporary folder), as it would in use.
pydantic-ai's latest release runs in this process; its fastest, 1.0.x, in a virtual
environment of its own, made on first run (``bench.peers.releases``), whose script times its
runs after a warm-up. Rounds interleave af, the latest peer and the fastest peer, so that
drift in the machine's speed falls on all. Run: ``python -m bench.loop_overhead``.
"""

from __future__ import annotations

import argparse
import statistics
from importlib.metadata import version

from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, timed, verdict
from bench.peers import pydantic_ai_loop
from bench.peers.releases import FASTEST, OldPeer

TARGET = 0.25
"""af's time per iteration, recording included, at most a quarter of the fastest
pydantic-ai's, at 20 and at 200 iterations."""


def measure(
    iterations: int, rounds: int, old: OldPeer
) -> tuple[list[float], list[float], list[float]]:
    """Seconds per run of af, of the latest peer and of the fastest, interleaved. af runs are
    much shorter, so each round times several."""
    af_times: list[float] = []
    latest_times: list[float] = []
    old_times: list[float] = []
    per_round = max(4, 2000 // iterations // 5)
    with recordings_dir() as folder:
        agent = build_agent(iterations, record=folder)
        latest = pydantic_ai_loop.build(iterations)
        # Warm-up: imports, first-call caches, the peer's lazily built graph.
        run_once(agent, iterations)
        latest()
        for _ in range(rounds):
            af_times += [timed_run(agent, iterations) for _ in range(per_round)]
            latest_times.append(timed(latest))
            old_times += old.runs(iterations, 3 if iterations > 50 else 10)
    return af_times, latest_times, old_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="*", default=[200, 20])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fastest", default=FASTEST, help="the pydantic-ai release to compare")
    args = parser.parse_args()
    old = OldPeer(args.fastest)
    latest_name = f"pydantic-ai {version('pydantic-ai-slim')}"
    old_name = f"pydantic-ai {args.fastest}"
    verdicts = []
    for n in args.iterations:
        af_times, latest_times, old_times = measure(n, args.rounds, old)

        def ms(times: list[float], how: str, n: int = n) -> float:
            pick = min(times) if how == "best" else statistics.median(times)
            return pick / n * 1000

        rows = []
        for name, times in (
            ("af (recording on)", af_times),
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
