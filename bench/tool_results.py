"""What honest tool results cost inside the loop: af with a tool that returns ``coverage()``
(read by af's one rule, its limits written on each call's record) against the same loop
returning the very same bytes as plain text (so the model reads the same thing and only the
reading and the record differ), and against pydantic-ai's loop, in the same process.

Run: ``python -m bench.tool_results``.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from afcore.loop._values import as_text
from afcore.tools import coverage
from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, timed, verdict
from bench.peers import pydantic_ai_loop

TARGET_PEER = 0.5
"""af with honest results, recording on, at most half of pydantic-ai's time per iteration."""
TARGET_PLAIN = 1.25
"""Honest results cost at most a quarter more than plain ones."""


def honest(n: int) -> Any:
    return coverage(
        f"ok {n}",
        checked=[f"step {n} of the count"],
        cannot_cover=[{"what": "numbers past the last step", "why": "the count stops there"}],
    )


def measure(iterations: int, rounds: int, per_round: int) -> dict[str, list[float]]:
    """Seconds per run of each, interleaved so that drift in the machine's speed falls on
    all alike."""
    times: dict[str, list[float]] = {"honest": [], "plain": [], "peer": []}
    with recordings_dir() as folder:
        with_limits = build_agent(iterations, record=folder, result=honest)
        same_bytes = [as_text(honest(n)) for n in range(iterations + 1)]
        plain = build_agent(iterations, record=folder, result=same_bytes.__getitem__)
        peer = pydantic_ai_loop.build(iterations)
        run_once(with_limits, iterations)
        run_once(plain, iterations)
        peer()
        for _ in range(rounds):
            for _ in range(per_round):
                times["honest"].append(timed_run(with_limits, iterations))
                times["plain"].append(timed_run(plain, iterations))
            times["peer"].append(timed(peer))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="peer runs (af runs 4 per round)")
    args = parser.parse_args()
    n: int = args.iterations
    times = measure(n, args.rounds, per_round=4)

    def ms(name: str, how: str) -> float:
        pick = min(times[name]) if how == "best" else statistics.median(times[name])
        return pick / n * 1000

    rows = [
        ("af, coverage() results", "honest"),
        ("af, the same bytes as plain text", "plain"),
        ("pydantic-ai (FunctionModel), plain", "peer"),
    ]
    to_peer = ms("honest", "best") / ms("peer", "best")
    to_plain = ms("honest", "best") / ms("plain", "best")
    print_table(
        f"tool results in the loop: {n}-iteration scripted tool loop, ms per iteration, "
        f"recording on ({len(times['honest'])} af runs each, {len(times['peer'])} peer runs)",
        ("", "best", "median"),
        [
            *((label, f"{ms(k, 'best'):.3f}", f"{ms(k, 'median'):.3f}") for label, k in rows),
            (
                "ratio honest / pydantic-ai",
                f"{to_peer:.3f}",
                f"{ms('honest', 'median') / ms('peer', 'median'):.3f}",
            ),
            (
                "ratio honest / plain",
                f"{to_plain:.3f}",
                f"{ms('honest', 'median') / ms('plain', 'median'):.3f}",
            ),
        ],
    )
    print(
        f"target: honest / pydantic-ai <= {TARGET_PEER} (best): {verdict(to_peer <= TARGET_PEER)}"
    )
    print(f"target: honest / plain <= {TARGET_PLAIN} (best): {verdict(to_plain <= TARGET_PLAIN)}")


if __name__ == "__main__":
    main()
