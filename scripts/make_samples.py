"""Writes the sample recordings in recordings/: the built-in demos, run with a fixed run id,
seed and wall clock and a ticking clock so that the files are reproducible.
tests/test_samples.py checks that they are current; run this after changing the loop, the
recording or a demo.

    python -m scripts.make_samples [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from afcore import Agent, RecordingConfig
from afcore.demos import compaction, router, trip
from afcore.recording import wait_for_syncs

ROOT = Path(__file__).resolve().parent.parent
STARTED = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SEED = 20260101
"""The samples' random source: fixed, like their clock, so the files are reproducible."""


SAMPLES: list[tuple[str, Callable[..., Agent], str]] = [
    ("sample-trip", trip.build_agent, trip.DEFAULT_MESSAGE),
    # Rain is likely: the instruction that comes with the forecast sends the plan indoors.
    ("sample-trip-rain", trip.build_agent, trip.RAINY_MESSAGE),
    # A long research run folded twice by summarize_oldest, each fold with its refusals.
    ("sample-compaction", compaction.build_agent, compaction.DEFAULT_MESSAGE),
    # The same run under sliding_window, its findings kept in a notebook fact.
    ("sample-sliding", compaction.build_sliding_agent, compaction.DEFAULT_MESSAGE),
]


def _ticking() -> Callable[[], float]:
    ticks = itertools.count()
    return lambda: next(ticks) / 1000  # each reading is one millisecond after the last


def _config(folder: Path, run_id: str) -> RecordingConfig:
    return RecordingConfig(
        dir=folder, run_id=run_id, clock=_ticking(), now=lambda: STARTED, seed=SEED
    )


FLOWS = [
    # A composed run: a ticket triaged, then routed to the billing agent; its agent's run
    # is folded into the flow's log (one file).
    ("flow-router", router.build_flow, router.DEFAULT_MESSAGE),
]


def make_samples(folder: Path) -> list[Path]:
    """Write the samples; returns every file written (a flow's agents' runs too)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build, message in SAMPLES:
        path = folder / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        agent = build(record=_config(folder, name))
        agent.run(message)
        assert agent.last_recording == path
        written.append(path)
    for name, build_flow, message in FLOWS:
        path = folder / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        runs = folder / name
        for old in runs.glob("*.jsonl") if runs.is_dir() else ():
            old.unlink()
        flow = build_flow(record=_config(folder, name))
        flow.run(message)
        assert flow.last_result is not None and flow.last_result.recording == path
        wait_for_syncs()  # the runs beside the log are removed once it is durable
        assert not runs.exists(), f"{runs} is left beside the finished flow's log"
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "recordings")
    for path in make_samples(parser.parse_args().out):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
