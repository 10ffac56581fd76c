"""The run's clock and random source: what varies between two runs of the same code, made
part of the recording so that a replay serves it back.

- **The clock** (``ctx.now()`` in a tool, ``s.now()`` in a rule or a fact) reads the
  recording's wall clock, and each reading is written as a ``clock`` record naming its
  reader (``tool:<name>#<k>``, ``iteration:<i>``). A replay serves each reader its recorded
  readings again, in order; a reader that reads more than it did gets the real time.
- **The random source** (``ctx.random``, ``s.random``) is a :class:`random.Random` per
  reader, seeded from the run's seed (written in the header) and the reader's name: no
  record per draw, and the tools of one reply, which run at once, draw the same numbers
  whichever finishes first.

Values taken from anywhere else (``time.time()``, ``uuid.uuid4()``, the global ``random``)
are not recorded: a replay differs where they are used.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
from collections import deque
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime

__all__ = ["Sources", "new_seed", "reader_seed"]


_seeds: list[int] = []
"""Seeds drawn ahead: one read of the system's random source serves many runs."""
_seeds_lock = threading.Lock()


def _forked() -> None:
    _seeds.clear()  # a child draws its own: never its parent's next seeds


os.register_at_fork(after_in_child=_forked)


def new_seed() -> int:
    """A fresh seed for a run's random source (63 bits: a JSON integer any reader holds)."""
    with _seeds_lock:
        if not _seeds:
            pool = os.urandom(256)
            _seeds.extend(int.from_bytes(pool[i : i + 8], "big") >> 1 for i in range(0, 256, 8))
        return _seeds.pop()


def reader_seed(seed: int, by: str) -> int:
    """The seed of one reader's generator: the run's seed and the reader's name, hashed."""
    digest = hashlib.sha256(f"{seed}:{by}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Sources:
    """One run's clock and random source. ``record(by, iso)`` writes a clock reading (it may
    be called from a tool's thread); ``served``: recorded readings by reader, handed out
    first and taken from as they are read (a replay's, which it empties to go live)."""

    def __init__(
        self,
        *,
        seed: int,
        now: Callable[[], datetime],
        record: Callable[[str, str], None] | None = None,
        served: MutableMapping[str, deque[str]] | None = None,
    ) -> None:
        self.seed = seed
        self._now = now
        self._record = record
        self._served: MutableMapping[str, deque[str]] = served if served is not None else {}
        self._randoms: dict[str, random.Random] = {}
        self._lock = threading.Lock()

    def now(self, by: str) -> datetime:
        """The time, as reader ``by`` reads it: a recorded reading when a replay has one left
        for it, else the clock's; always in UTC, and written to the recording."""
        with self._lock:
            waiting = self._served.get(by)
            value = waiting.popleft() if waiting else None
        if value is not None:
            instant = datetime.fromisoformat(value)
        else:
            instant = self._now()
            if instant.tzinfo is None:
                instant = instant.replace(tzinfo=UTC)
            instant = instant.astimezone(UTC)
            value = instant.isoformat(timespec="microseconds")
        if self._record is not None:
            self._record(by, value)
        return instant

    def stop_serving(self) -> None:
        """From now on every reading is the clock's (a replay gone live)."""
        with self._lock:
            self._served.clear()

    def random(self, by: str) -> random.Random:
        """Reader ``by``'s generator: the same object for as long as the run lasts."""
        with self._lock:
            found = self._randoms.get(by)
            if found is None:
                found = self._randoms[by] = random.Random(reader_seed(self.seed, by))
            return found
