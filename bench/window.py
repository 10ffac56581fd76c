"""What a window strategy costs: the scripted af loop holding a live window of ~2,000 messages,
with a strategy visiting at every iteration, against the same loop with no strategy.

A run cannot start with a history, so each run builds its window first: 1,000 tool
iterations (one turn, two messages, each) bring it to 2,001 messages (with the user's). Then
200 more iterations are timed, from the model call sent 2,001 messages to the call 200
iterations later; the clock is read inside the run, when the mock is called. Every variant
builds up the same way and is timed over the same 200 iterations, so the comparison is at
the same window size, not over the build-up:

- no strategy: the window keeps growing, from 2,001 to 2,401 messages over the timed stretch,
  never fewer than the strategies hold; af's time per iteration without a strategy barely
  grows with the history (the scaling table's first column), so this favors neither side;
- ``sliding_window(keep_recent_turns=1000)``: visits at every iteration of the run and, once
  full, drops the oldest turn at each (a fold, recorded): the window stays at 2,001 messages.
  Folding at every call means the window is named and hashed message by message at every
  call (the request's hash covers the window, as the recording format defines it: about
  70 us for 2,000 messages here), where the plain loop extends one running hash;
- ``token_budget`` and ``summarize_oldest`` under their threshold: they read the last call's
  counted tokens at every iteration and fold nothing: a strategy visit at every iteration,
  the target's case;
- the same two with the threshold at the 2,000-message mark and ``keep_recent_turns=1000``:
  from then on they fold one turn at every iteration, as the sliding window does;
  ``summarize_oldest`` calls its summarizer (a mock) each time and keeps one summary message
  in the window (2,002 messages).

The mock reports counted usage, 10 input tokens per message it is sent (a count it takes
from the request's length, not by walking it), so the token thresholds read counts. Each
tool result is ~160 characters, so that one turn is larger than the framed summary that
replaces it (summarize_oldest refuses to fold a span whose summary would not be smaller).

Recording is on for every run (to a temporary folder, deleted after each run, off the
clock). Runs alternate between the variants, and which goes first rotates each round.
Every run is checked: its answer, its iterations, and the size of the window sent at each
model call (which shows the folds happened when expected); the warm-up run of each variant
is also read back to count its folds and the messages they evicted.

Then the same comparison at windows of 500, 1,000, 2,000 and 4,000 messages: what the
sliding window adds per iteration, divided by the window's size, should stay flat if the
strategy's work is linear in the window. ``--profile NAME`` profiles the timed stretch of a
variant under cProfile instead. ``--clock cpu`` times by the loop thread's CPU time, not the
wall clock (steadier on a loaded machine). Run: ``python -m bench.window``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from afcore import (
    Agent,
    RecordingConfig,
    WindowStrategy,
    define_tool,
    mock,
    sliding_window,
    summarize_oldest,
    token_budget,
)
from afcore.messages import Request, ToolResultMessage
from afcore.providers import Provider
from afcore.recording import Commit, ContextEvicted, open_recording
from bench._af_loop import ANSWER, ECHO_SCHEMA, SYSTEM, recordings_dir
from bench._report import print_table, verdict
from bench.profile_loop import _rows

TARGET = 2.0
"""With a strategy visiting at every iteration, at most 2x the time per iteration of the same
loop with none, at a 2,000-message window."""
WINDOW = 2000
STEPS = 200
TOKENS_PER_MESSAGE = 10
NEVER = 10**12
"""A threshold no run reaches."""
FILLER = (
    "The echo service acknowledged the number, wrote it to the log and reported no "
    "anomalies; the next number may be sent whenever the caller is ready."
)
SUMMARY = "The agent echoed the numbers in order; every echo succeeded."
USAGE = {"input_tokens": 1, "output_tokens": 1}

Folds = Literal["none", "drop", "summary"]
clock: Callable[[], float] = time.perf_counter
"""What the probe reads at each model call: wall time, or with ``--clock cpu`` the CPU time
of the thread that runs the loop (steadier on a loaded machine; the writer's own thread,
which syncs the file, is left out of both sides alike)."""


@dataclass(frozen=True)
class Variant:
    key: str
    """Its name for ``--profile``."""
    label: str
    strategy: Callable[[int, Provider], WindowStrategy | None]
    """The strategy, given the turns the window keeps and the summarizer."""
    folds: Folds
    """What it does at each timed iteration: nothing, drop a turn, or fold one into a summary."""


VARIANTS = (
    Variant("none", "no strategy", lambda turns, s: None, "none"),
    Variant(
        "sliding",
        "sliding_window, drops 1 turn per iteration",
        lambda turns, s: sliding_window(keep_recent_turns=turns),
        "drop",
    ),
    Variant(
        "budget",
        "token_budget, under threshold",
        lambda turns, s: token_budget(threshold_tokens=NEVER),
        "none",
    ),
    Variant(
        "summary",
        "summarize_oldest, under threshold",
        lambda turns, s: summarize_oldest(threshold_tokens=NEVER, summarizer=s),
        "none",
    ),
    Variant(
        "budget-fold",
        "token_budget, drops 1 turn per iteration",
        lambda turns, s: token_budget(
            threshold_tokens=TOKENS_PER_MESSAGE * 2 * turns, keep_recent_turns=turns
        ),
        "drop",
    ),
    Variant(
        "summary-fold",
        "summarize_oldest, folds 1 turn per iteration",
        lambda turns, s: summarize_oldest(
            threshold_tokens=TOKENS_PER_MESSAGE * 2 * turns, summarizer=s, keep_recent_turns=turns
        ),
        "summary",
    ),
)
HEADLINE = VARIANTS[1]
VISIT = VARIANTS[2]
NONE = VARIANTS[0]


class Probe:
    """When each model call of a run came to the mock and how many messages it was sent, by
    its step (the tool results before it). Optionally profiles steps ``start`` to ``stop``."""

    def __init__(self, steps: int) -> None:
        self.stamps = [0.0] * (steps + 1)
        self.sizes = [0] * (steps + 1)
        self.profiler: cProfile.Profile | None = None
        self.start = self.stop = -1

    def see(self, step: int, size: int) -> None:
        self.stamps[step] = clock()
        self.sizes[step] = size
        if self.profiler is not None:
            if step == self.start:
                self.profiler.enable()
            elif step == self.stop:
                self.profiler.disable()


@dataclass
class Loop:
    """One variant's agent, built once and run many times."""

    variant: Variant
    turns: int
    """Turns the window keeps: it holds 2 x turns + 1 messages at steady state."""
    steps: int
    """Timed iterations, after the ``turns`` that build the window."""
    agent: Agent
    probe: Probe
    summarizer: Provider
    times: list[float] = field(default_factory=list)
    """Seconds per timed iteration, one figure per timed run."""
    recorded: tuple[int, int] | None = None
    """(folds, messages evicted) read back from the verified run's recording."""

    @property
    def total(self) -> int:
        return self.turns + self.steps

    def expected_sizes(self) -> list[int]:
        """The messages sent at each call: the user's and two per turn, bounded by the
        strategy once full; a summary stays in the window as one more message."""
        grown = [2 * step + 1 for step in range(self.total + 1)]
        if self.variant.folds == "none":
            return grown
        full = 2 * self.turns + 1
        summary = 1 if self.variant.folds == "summary" else 0
        return [
            min(size, full) + (summary if step > self.turns else 0)
            for step, size in enumerate(grown)
        ]

    def expected_folds(self) -> tuple[int, int]:
        """(folds, messages evicted) in one run: one fold at each timed iteration; a drop
        evicts a turn, a summary also the summary before it (not at the first fold)."""
        if self.variant.folds == "none":
            return 0, 0
        if self.variant.folds == "drop":
            return self.steps, 2 * self.steps
        return self.steps, 3 * self.steps - 1

    def checked_run(self) -> Path:
        """One run, checked so that a broken loop cannot pass for a fast one; its
        recording's path."""
        summarizer_calls = getattr(self.summarizer, "calls", 0)
        gc.collect()
        answer = self.agent.run("go")
        last = self.agent.last_result
        if answer != ANSWER or last is None or last.iterations != self.total + 1:
            raise RuntimeError(f"{self.variant.label}: the scripted run went wrong: {last!r}")
        if self.probe.sizes != self.expected_sizes():
            raise RuntimeError(f"{self.variant.label}: the window was not the expected size")
        summaries = getattr(self.summarizer, "calls", 0) - summarizer_calls
        if summaries != (self.steps if self.variant.folds == "summary" else 0):
            raise RuntimeError(f"{self.variant.label}: {summaries} summarizer calls")
        assert last.recording is not None
        return last.recording

    def run(self) -> None:
        """One checked run, timed over its last ``steps`` iterations; its recording is
        deleted after."""
        path = self.checked_run()
        stamps = self.probe.stamps
        self.times.append((stamps[self.total] - stamps[self.turns]) / self.steps)
        path.unlink()

    def verify(self) -> None:
        """One checked run whose recording is read back: its folds and evicted messages
        counted."""
        path = self.checked_run()
        folds = evicted = 0
        with open_recording(path) as rec:
            for _, record in rec.records():
                if isinstance(record, Commit) and record.stage == "window":
                    folds += 1
                elif isinstance(record, ContextEvicted):
                    evicted += 1
        path.unlink()
        self.recorded = folds, evicted
        if self.recorded != self.expected_folds():
            raise RuntimeError(
                f"{self.variant.label}: {folds} folds evicting {evicted} messages recorded, "
                f"expected {self.expected_folds()}"
            )


def build(variant: Variant, window: int, steps: int, folder: Path) -> Loop:
    """The scripted loop with ``variant``'s strategy, its window built to ``window`` messages
    (and one, the user's) before ``steps`` timed iterations."""
    turns = window // 2
    total = turns + steps
    probe = Probe(total)

    def respond(request: Request) -> dict[str, object]:
        # The step is the call id of the tool result being answered: the window's last
        # message (the run's first call answers the user's).
        last = request.messages[-1]
        done = int(last.tool_call_id) if isinstance(last, ToolResultMessage) else 0
        probe.see(done, len(request.messages))
        usage = {"input_tokens": TOKENS_PER_MESSAGE * len(request.messages), "output_tokens": 1}
        if done < total:
            n = done + 1
            return {
                "tool_calls": [{"id": str(n), "name": "echo", "args": {"n": n}}],
                "usage": usage,
            }
        return {"content": ANSWER, "usage": usage}

    echo = define_tool(
        name="echo",
        description="Echo the number back.",
        input_schema=ECHO_SCHEMA,
        execute=lambda args, ctx: f"Echoed {args['n']}. {FILLER}",
    )
    summarizer = mock(reply=SUMMARY, usage=USAGE)
    builder = (
        Agent.create(
            provider=mock(respond=respond),
            model="mock",
            max_iterations=total + 1,
            record=RecordingConfig(dir=folder),
            name="bench-window",
        )
        .system(SYSTEM)
        .tool(echo)
    )
    strategy = variant.strategy(turns, summarizer)
    if strategy is not None:
        builder = builder.window(strategy)
    return Loop(variant, turns, steps, builder.build(), probe, summarizer)


def measure(
    variants: Sequence[Variant], window: int, steps: int, rounds: int, *, verify: bool
) -> list[Loop]:
    """Each variant's loop after ``rounds`` timed runs, interleaved. With ``verify``, each
    first runs once off the clock, read back to count its folds (a warm-up too)."""
    with recordings_dir() as folder:
        loops = [build(v, window, steps, folder) for v in variants]
        if verify:
            for loop in loops:
                loop.verify()
        for r in range(rounds):
            shift = r % len(loops)
            for loop in loops[shift:] + loops[:shift]:
                loop.run()
    return loops


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def window_span(variant: Variant, window: int, steps: int) -> str:
    """The messages sent per call over the timed stretch."""
    if variant.folds == "none":
        return f"{window + 1:,}-{window + 1 + 2 * steps:,}"
    return f"{window + 1 + (variant.folds == 'summary'):,}"


def headline(steps: int, rounds: int) -> None:
    loops = measure(VARIANTS, WINDOW, steps, rounds, verify=True)
    by_key = {loop.variant.key: loop for loop in loops}
    base_best = min(by_key[NONE.key].times)
    base_median = statistics.median(by_key[NONE.key].times)
    rows = []
    for loop in loops:
        v = loop.variant
        best, median = min(loop.times), statistics.median(loop.times)
        assert loop.recorded is not None
        rows.append(
            (
                v.label,
                window_span(v, WINDOW, steps),
                f"{loop.recorded[0]} / {loop.recorded[1]}",
                us(best),
                us(median),
                f"{best / base_best:.2f}",
                f"{median / base_median:.2f}",
            )
        )
    print_table(
        f"window: scripted af loop at a ~{WINDOW:,}-message window, {steps} iterations timed, "
        f"recording on, us per iteration ({rounds} interleaved runs each)",
        ("", "messages/call", "folds / evicted", "best", "median", "ratio best", "ratio median"),
        rows,
    )
    visit = min(by_key[VISIT.key].times) / base_best
    print(
        f"target: a strategy visit at every iteration (token_budget, measuring each call) / "
        f"no strategy <= {TARGET:g} (best): {visit:.2f}, {verdict(visit <= TARGET)}"
    )
    ratio = min(by_key[HEADLINE.key].times) / base_best
    print(
        f"        a visit and a fold at every iteration (sliding_window once full) / no "
        f"strategy <= {TARGET:g} (best): {ratio:.2f}, {verdict(ratio <= TARGET)}"
    )


def scaling(windows: Sequence[int], steps: int, rounds: int) -> None:
    # No warm-up: the headline's runs went through the same code; the largest window's
    # warm-up alone would take longer than the rest of this table at the defaults.
    rows = []
    for window in windows:
        plain, strategy = measure((NONE, HEADLINE), window, steps, rounds, verify=False)
        none, sliding = min(plain.times), min(strategy.times)
        rows.append(
            (
                f"{window:,}",
                us(none),
                us(sliding),
                us(sliding - none),
                f"{(sliding - none) / window * 1e9:,.0f}",
                f"{sliding / none:.2f}",
            )
        )
    print_table(
        f"sliding_window by window size: us per iteration, best of {rounds} runs each, "
        f"{steps} iterations timed",
        ("messages", "no strategy", "sliding", "added", "added/message (ns)", "ratio"),
        rows,
    )
    print("linear in the window when the added time per message stays flat")


def profile(variant: Variant, steps: int, runs: int, top: int) -> None:
    """The timed stretch of ``variant``'s runs under cProfile: what each iteration spends
    at a steady ~2,000-message window, build-up left out."""
    with recordings_dir() as folder:
        loop = build(variant, WINDOW, steps, folder)
        loop.checked_run().unlink()
        profiler = cProfile.Profile()
        loop.probe.profiler = profiler
        loop.probe.start, loop.probe.stop = loop.turns, loop.total
        for _ in range(runs):
            loop.run()
    stats = pstats.Stats(profiler)
    per = steps * runs
    total: float = stats.total_tt  # type: ignore[attr-defined]
    header = ("function", "calls/iter", "cum us/iter", "own us/iter")
    print(
        f"profile: {variant.label}, {steps} iterations at a ~{WINDOW:,}-message window, "
        f"{runs} runs; {total / per * 1e6:,.1f} us per iteration under cProfile\n"
    )
    print_table(f"top {top} by cumulative time", header, _rows(stats, per, 3, top))
    print()
    print_table(f"top {top} by own time", header, _rows(stats, per, 2, top))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS, help="timed iterations per run")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--windows",
        default="500,1000,2000,4000",
        help="window sizes (messages) for the scaling table; empty to skip it",
    )
    parser.add_argument("--scaling-rounds", type=int, default=2)
    parser.add_argument(
        "--profile",
        choices=[v.key for v in VARIANTS],
        help="profile this variant's timed iterations instead",
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time the iterations by the wall clock or by the loop thread's CPU time",
    )
    args = parser.parse_args()
    if args.clock == "cpu":
        global clock
        clock = time.thread_time
    if args.profile:
        variant = next(v for v in VARIANTS if v.key == args.profile)
        profile(variant, args.steps, runs=3, top=args.top)
        return
    headline(args.steps, args.rounds)
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    if windows:
        print()
        scaling(windows, args.steps, args.scaling_rounds)


if __name__ == "__main__":
    main()
