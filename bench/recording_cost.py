"""What recording costs: the same scripted af loop with recording on and with ``record=False``,
at 200 iterations and at 10 (a short run, the common case, pays the fixed cost per run: the
header, the file's creation, its closing).

Runs alternate on/off (and which goes first alternates each round), so that drift in the
machine's speed falls on both alike; the ratio is taken between the best run of each, the
figure least disturbed by noise. Run: ``python -m bench.recording_cost``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from afcore.recording import Recorder, wait_for_syncs
from afcore.secrets import Redaction
from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, verdict

TARGETS = {200: 1.3, 10: 1.5}
"""Iterations -> how much longer a recorded run may take than the same run unrecorded."""


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


def fixed_costs(rounds: int) -> list[tuple[str, float]]:
    """Microseconds (best of ``rounds``) of what a recorded run pays once: making (or taking)
    its file, its first write (the header, sealed, and the file named), and closing it (its
    fsync is the sync thread's). Each file is deleted off the clock, as the loop's are."""
    policy = Redaction()
    header = {"t": "header", "format": "af.recording", "version": "1.1", "run_id": "x"}
    parts: dict[str, list[float]] = {"make the file": [], "first write": [], "close": []}
    clock = time.perf_counter
    with recordings_dir() as folder:
        for i in range(rounds + 1):
            path = Path(folder) / f"fixed-{i}.jsonl"
            redactor = policy.compile()
            wait_for_syncs()  # a file made ahead is ready, as it is after a model call
            t0 = clock()
            rec = Recorder(path, run_id=path.stem, redactor=redactor)
            t1 = clock()
            rec.header(header)
            rec.flush()
            t2 = clock()
            rec.close()
            t3 = clock()
            path.unlink()
            if i:  # the first makes its own file: the folder has none made ahead yet
                parts["make the file"].append(t1 - t0)
                parts["first write"].append(t2 - t1)
                parts["close"].append(t3 - t2)
    return [(name, min(times) * 1e6) for name, times in parts.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, nargs="*", default=sorted(TARGETS, reverse=True))
    parser.add_argument("--rounds", type=int, default=30, help="runs of each (x5 at 10 or fewer)")
    args = parser.parse_args()
    verdicts = []
    for n in args.iterations:
        rounds = args.rounds * (5 if n <= 10 else 1)
        on_times, off_times = measure(n, rounds)

        def ms(seconds: float, n: int = n) -> float:
            return seconds / n * 1000

        on_best, off_best = ms(min(on_times)), ms(min(off_times))
        on_med, off_med = ms(statistics.median(on_times)), ms(statistics.median(off_times))
        ratio = on_best / off_best
        print_table(
            f"recording cost: {n}-iteration scripted af loop, ms per iteration "
            f"({rounds} interleaved runs each)",
            ("", "best", "median"),
            [
                ("af, recording on", f"{on_best:.3f}", f"{on_med:.3f}"),
                ("af, record=False", f"{off_best:.3f}", f"{off_med:.3f}"),
                ("added by recording", f"{on_best - off_best:.3f}", f"{on_med - off_med:.3f}"),
                ("ratio on / off", f"{ratio:.2f}", f"{on_med / off_med:.2f}"),
            ],
        )
        target = TARGETS.get(n)
        if target is not None:
            verdicts.append(
                f"target at {n} iterations: ratio <= {target} (best): {verdict(ratio <= target)}"
            )
    fixed = fixed_costs(args.rounds * 5)
    print_table(
        f"recording's fixed cost per run, us (best of {args.rounds * 5})",
        ("", "us"),
        [(name, f"{us:.1f}") for name, us in fixed]
        + [("total", f"{sum(us for _, us in fixed):.1f}")],
    )
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
