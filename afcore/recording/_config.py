"""How an agent records its runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from afcore.recording._redaction import Redaction

__all__ = ["RecordingConfig"]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RecordingConfig:
    """Pass as ``Agent.create(record=RecordingConfig(...))`` to choose more than the folder."""

    dir: Path | None = None
    """The folder; None means ``$AF_RECORDINGS`` or ``recordings/``, read when a run starts."""
    redaction: Redaction = field(default_factory=Redaction)
    """What is kept out of the file."""
    run_id: str | None = None
    """A fixed run id (for reproducible files); None gives each run a fresh, time-sortable one."""
    clock: Callable[[], float] = time.perf_counter
    """Seconds on a monotonic clock, for the durations in the file."""
    now: Callable[[], datetime] = _utc_now
    """The wall clock, for the run's start time and id, and the clock rules and tools read
    (``s.now()``, ``ctx.now()``), whose readings are recorded."""
    origin: float | None = None
    """A reading of ``clock`` from which each call's ``at`` is counted (set by a flow for its
    agents' runs, so that their calls share the flow's time line); None writes no ``at``."""
    seed: int | None = None
    """The seed of the run's random source (``ctx.random``, ``s.random``), written in the
    header; None draws a fresh one for each run."""
