"""What recording costs: the same scripted af loop with recording on and with ``record=False``.

Runs alternate on/off (and which goes first alternates each round), so that drift in the
machine's speed falls on both alike; the ratio is taken between the best run of each, the
figure least disturbed by noise. Run: ``python -m bench.recording_cost``.
"""

from __future__ import annotations

import argparse
import statistics

from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, verdict

TARGET = 1.15
"""A recorded run takes at most 15% longer than the same run unrecorded."""


def measure(iterations: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds per run with recording on and off, interleaved."""
    on_times: list[float] = []
    off_times: list[float] = []
    with recordings_dir() as folder:
        on = build_agent(iterations, record=folder)
        off = build_agent(iterations, record=None)
        run_once(on, iterations)
        run_once(off, iterations)
        for r in range(rounds):
            order = ((on, on_times), (off, off_times))
            for agent, times in order if r % 2 == 0 else reversed(order):
                times.append(timed_run(agent, iterations))
    return on_times, off_times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    n: int = args.iterations
    on_times, off_times = measure(n, args.rounds)

    def ms(seconds: float) -> float:
        return seconds / n * 1000

    on_best, off_best = ms(min(on_times)), ms(min(off_times))
    on_med, off_med = ms(statistics.median(on_times)), ms(statistics.median(off_times))
    ratio = on_best / off_best
    print_table(
        f"recording cost: {n}-iteration scripted af loop, ms per iteration "
        f"({args.rounds} interleaved runs each)",
        ("", "best", "median"),
        [
            ("af, recording on", f"{on_best:.3f}", f"{on_med:.3f}"),
            ("af, record=False", f"{off_best:.3f}", f"{off_med:.3f}"),
            ("added by recording", f"{on_best - off_best:.3f}", f"{on_med - off_med:.3f}"),
            ("ratio on / off", f"{ratio:.2f}", f"{on_med / off_med:.2f}"),
        ],
    )
    print(f"target: ratio <= {TARGET} (best): {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
