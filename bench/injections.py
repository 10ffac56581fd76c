"""What 200 injections cost: the scripted af loop with 100 steering segments and 100 rule
instructions evaluated at every iteration, against the same loop with none.

Both loops record (to a temporary folder). Runs alternate between the two (and which goes
first alternates each round), so drift in the machine's speed falls on both alike. Then the
size bounds of ``bench.recording_size`` are checked again with the 200 injections: the file
must still grow with the content a run produces, not restate unchanged segments and decisions
at every call. Run: ``python -m bench.injections``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from afcore import AgentBuilder
from afcore.injections import RunView
from afcore.recording import Commit, canonical, open_recording
from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, verdict
from bench.recording_size import (
    INJECTED_OVERHEAD_TARGET,
    RATIO_TARGET,
    RESULT_BYTES,
    fresh_text,
    unique_texts,
)

TARGET = 1.5
"""The loop with 200 injections takes at most 1.5x as long per iteration as with none."""
STEERING = 100
RULES = 100

STATE: dict[str, Any] = {"mode": "strict", "tier": "pro", "locale": "fr", "budget": 200}
"""What the application puts in the run's state (``s.state``), the same at every iteration."""

Predicate = Callable[[RunView], bool]

# The rules' templates, each used RULES / 20 times. Most read values that stay the same for
# the whole run (the user's message, the application's state), as routing and policy rules
# do, so their evidence repeats; the last two read the iteration, so their evidence is new at
# every iteration (content the recording must hold). Nine fire at every iteration, nine never,
# and the iteration rules now and then.
TEMPLATES: tuple[tuple[str, Predicate], ...] = (
    # stable, firing
    ("strict", lambda s: s.state["mode"] == "strict"),
    ("pro", lambda s: s.state.get("tier") == "pro"),
    ("go", lambda s: "go" in s.user_message),
    ("europe", lambda s: s.state["locale"] in ("fr", "de")),
    ("short", lambda s: len(s.user_message) < 80 and s.state["mode"] != "lenient"),
    ("funded", lambda s: s.state["budget"] >= 100),
    ("plain", lambda s: not s.user_message.startswith("/")),
    ("pro-fr", lambda s: s.state.get("tier") in ("pro", "team") and s.state["locale"] == "fr"),
    ("no-region", lambda s: "region" not in s.state),
    # stable, never firing
    ("lenient", lambda s: s.state["mode"] == "lenient"),
    ("free", lambda s: s.state.get("tier") == "free"),
    ("refund", lambda s: "refund" in s.user_message),
    ("japan", lambda s: s.state["locale"] == "ja"),
    ("beta", lambda s: s.state.get("beta", False)),
    ("command", lambda s: s.user_message.startswith("/")),
    ("broke", lambda s: s.state["budget"] < 10),
    ("urgent", lambda s: "urgent" in s.user_message.lower()),
    ("team", lambda s: s.state.get("tier") == "team" and s.state["mode"] == "strict"),
    # new evidence at every iteration: a periodic reminder, and wrap-up past 3/4 of the budget
    ("every-10", lambda s: s.iteration % 10 == 0),
    ("wrap-up", lambda s: s.iteration > s.state["budget"] * 3 // 4),
)


def add_injections(builder: AgentBuilder) -> AgentBuilder:
    """100 steering segments (always, system slot, cached) and 100 rule instructions: in
    blocks of 20, three blocks in the messages slot and two in the system slot."""
    for i in range(STEERING):
        # 60 to ~400 bytes: a sentence to a paragraph; those over 256 bytes are stored as blobs.
        text = fresh_text(1_000_000 + i, 60 + (i * 37) % 340, label=f"Steering {i}:")
        builder = builder.steering(text, id=f"steer-{i:03d}")
    for i in range(RULES):
        name, when = TEMPLATES[i % len(TEMPLATES)]
        slot: Literal["system", "messages"] = "system" if (i // len(TEMPLATES)) % 2 else "messages"
        text = fresh_text(2_000_000 + i, 40 + (i * 53) % 260, label=f"Instruction {i}:")
        builder = builder.instruction(text, id=f"rule-{i:03d}-{name}", when=when, slot=slot)
    return builder


def measure_time(iterations: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds per run with the 200 injections and with none, interleaved."""
    with_times: list[float] = []
    none_times: list[float] = []
    with recordings_dir() as folder:
        injected = build_agent(iterations, record=folder, extend=add_injections)
        plain = build_agent(iterations, record=folder)
        run_once(injected, iterations, state=STATE)
        run_once(plain, iterations, state=STATE)
        for r in range(rounds):
            order = ((injected, with_times), (plain, none_times))
            for agent, times in order if r % 2 == 0 else reversed(order):
                times.append(timed_run(agent, iterations, state=STATE))
    return with_times, none_times


def evidence_texts(path: Path) -> set[str]:
    """The distinct values the rules read (``[key, value]`` as canonical JSON): the evidence
    of their decisions, content the run produced like its messages."""
    texts: set[str] = set()
    with open_recording(path) as rec:
        for _, record in rec.records():
            if not isinstance(record, Commit) or record.stage != "inject":
                continue
            for write in record.writes:
                if write.key != "injections":
                    continue
                for decision in rec.value(write)["decisions"]:
                    for pair in decision.get("reads", ()):
                        texts.add(canonical(pair).decode())
    return texts


def measure_size(iterations: int, folder: Path) -> tuple[int, int]:
    """The recording's size and its unique content, in bytes, for one run with the 200
    injections and ~1 KB of fresh text per tool result. Unique content: what
    ``bench.recording_size`` counts (the injected messages and system segments among it, each
    text once) and the evidence the rules read, each distinct value once."""
    agent = build_agent(iterations, record=folder, result=fresh_text, extend=add_injections)
    run_once(agent, iterations, state=STATE)
    path = agent.last_recording
    assert path is not None
    texts = unique_texts(path) | evidence_texts(path)
    return path.stat().st_size, sum(len(t.encode()) for t in texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--small", type=int, default=100, help="size run, fewer iterations")
    parser.add_argument("--large", type=int, default=1000, help="size run, more iterations")
    parser.add_argument("--no-size", action="store_true", help="time only")
    args = parser.parse_args()
    n: int = args.iterations
    count = STEERING + RULES
    with_times, none_times = measure_time(n, args.rounds)

    def ms(seconds: float) -> float:
        return seconds / n * 1000

    with_best, none_best = ms(min(with_times)), ms(min(none_times))
    with_med, none_med = ms(statistics.median(with_times)), ms(statistics.median(none_times))
    ratio = with_best / none_best
    print_table(
        f"injections: {n}-iteration scripted af loop, recording on, ms per iteration "
        f"({args.rounds} interleaved runs each)",
        ("", "best", "median"),
        [
            (f"af, {count} injections", f"{with_best:.3f}", f"{with_med:.3f}"),
            ("af, no injections", f"{none_best:.3f}", f"{none_med:.3f}"),
            (
                "added by the injections",
                f"{with_best - none_best:.3f}",
                f"{with_med - none_med:.3f}",
            ),
            (
                "added per injection (us)",
                f"{(with_best - none_best) / count * 1000:.2f}",
                f"{(with_med - none_med) / count * 1000:.2f}",
            ),
            ("ratio with / none", f"{ratio:.2f}", f"{with_med / none_med:.2f}"),
        ],
    )
    print(f"target: ratio <= {TARGET} (best): {verdict(ratio <= TARGET)}")
    if args.no_size:
        return

    print()
    rows = []
    at_small = 0.0
    worst = 0.0
    sizes = []
    with recordings_dir() as folder:
        for iterations in (args.small, args.large):
            size, unique = measure_size(iterations, folder)
            beyond = (size - unique) / iterations
            worst = max(worst, beyond)
            if iterations == args.small:
                at_small = beyond
            sizes.append(size)
            rows.append(
                (
                    f"{iterations:,} iterations",
                    f"{size:,}",
                    f"{unique:,}",
                    f"{size - unique:,}",
                    f"{beyond:,.0f}",
                )
            )
    size_ratio = sizes[1] / sizes[0]
    print_table(
        f"recording size with {count} injections: ~{RESULT_BYTES} B of fresh text per tool "
        "result (bytes)",
        ("run", "file", "unique content", "beyond", "beyond / iteration"),
        rows,
    )
    growth = args.large / args.small
    print(
        f"size ratio {args.large:,} / {args.small:,} iterations: {size_ratio:.2f}x "
        f"(tool results {growth:.0f}x); target <= {RATIO_TARGET:g}x: "
        f"{verdict(size_ratio <= RATIO_TARGET)}"
    )
    print(
        f"bytes beyond unique content at {args.small:,} iterations: {at_small:,.0f} per "
        f"iteration (at worst {worst:,.0f}); target <= {INJECTED_OVERHEAD_TARGET:,}: "
        f"{verdict(at_small <= INJECTED_OVERHEAD_TARGET)}"
    )


if __name__ == "__main__":
    main()
