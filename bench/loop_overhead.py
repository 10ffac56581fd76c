"""af's loop overhead per iteration against pydantic-ai's, in the same process.

Both run the same scripted 200-iteration tool loop (one small tool call per model request, then
an answer) with an in-process model that does nothing, so what is timed is the framework's own
work per request -> tool call -> tool result round trip. af records every run (to a temporary
folder), as it would in use. Run: ``python -m bench.loop_overhead``.
"""

from __future__ import annotations

import argparse
import statistics

from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, timed, verdict
from bench.peers import pydantic_ai_loop

TARGET = 0.5
"""af's time per iteration, recording included, at most half of pydantic-ai's."""


def measure(iterations: int, rounds: int, af_per_round: int) -> tuple[list[float], list[float]]:
    """Seconds per run of af and of the peer, interleaved so that drift in the machine's speed
    falls on both alike. af runs are much shorter, so each round times several."""
    af_times: list[float] = []
    peer_times: list[float] = []
    with recordings_dir() as folder:
        agent = build_agent(iterations, record=folder)
        peer = pydantic_ai_loop.build(iterations)
        # Warm-up: imports, first-call caches, the peer's lazily built graph.
        run_once(agent, iterations)
        peer()
        for _ in range(rounds):
            af_times += [timed_run(agent, iterations) for _ in range(af_per_round)]
            peer_times.append(timed(peer))
    return af_times, peer_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="peer runs (af runs 4 per round)")
    args = parser.parse_args()
    n: int = args.iterations
    af_times, peer_times = measure(n, args.rounds, af_per_round=4)

    def ms(times: list[float], how: str) -> float:
        pick = min(times) if how == "best" else statistics.median(times)
        return pick / n * 1000

    af_best, peer_best = ms(af_times, "best"), ms(peer_times, "best")
    ratio = af_best / peer_best
    print_table(
        f"loop overhead: {n}-iteration scripted tool loop, ms per iteration "
        f"({len(af_times)} af runs, {len(peer_times)} pydantic-ai runs)",
        ("", "best", "median"),
        [
            ("af (recording on)", f"{af_best:.3f}", f"{ms(af_times, 'median'):.3f}"),
            ("pydantic-ai (FunctionModel)", f"{peer_best:.3f}", f"{ms(peer_times, 'median'):.3f}"),
            (
                "ratio af / pydantic-ai",
                f"{ratio:.3f}",
                f"{ms(af_times, 'median') / ms(peer_times, 'median'):.3f}",
            ),
        ],
    )
    print(f"target: ratio <= {TARGET} (best): {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
