"""One thread per store and process, beside the turns this process runs: it renews their
leases (so the other processes know they are alive) and tells each when a message asked to
interrupt it, or when another process took it over.

It is a thread, not a task, so that a turn whose tool blocks the event loop still renews its
lease. A turn shorter than one poll is never looked at: the watcher costs a fast turn only
its registration.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from afcore._signals import leave_sigint_to_the_main_thread
from afcore.errors import SessionError

__all__ = ["Watcher"]


class Watched(Protocol):
    """What the watcher asks of the store it watches for (a SessionStore)."""

    lease: float
    poll: float

    def poll_turns(self, turns: Sequence[tuple[str, str]]) -> dict[str, tuple[bool, bool]]: ...

    def renew(self, turns: Sequence[tuple[str, str]]) -> None: ...


@dataclass
class _Watched:
    on_interrupt: Callable[[], None]
    on_lost: Callable[[], None]
    told: bool = False


class Watcher:
    def __init__(self, store: Watched) -> None:
        self.store = store
        self._turns: dict[tuple[str, str], _Watched] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stop = threading.Event()
        self._renewed = time.monotonic()

    def watch(
        self,
        session_id: str,
        owner: str,
        *,
        on_interrupt: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        """Look after the turn ``owner`` runs on ``session_id`` until :meth:`unwatch`. The
        callbacks are called from the watcher's thread, at most one of them once, and must
        not block."""
        with self._cond:
            idle = not self._turns
            self._turns[(session_id, owner)] = _Watched(on_interrupt, on_lost)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="af-session-watcher", daemon=True
                )
                self._thread.start()
            elif idle:
                self._cond.notify()  # wake it from its idle wait; a busy one polls anyway

    def unwatch(self, session_id: str, owner: str) -> None:
        with self._cond:
            self._turns.pop((session_id, owner), None)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._stop.set()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        leave_sigint_to_the_main_thread()
        store = self.store
        while True:
            with self._cond:
                while not self._turns and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
            # A poll's wait, which only stop() cuts short: a turn starting meanwhile is looked
            # at with the others at the next poll, not at once.
            if self._stop.wait(store.poll):
                return
            with self._cond:
                turns = dict(self._turns)
            if not turns:
                continue
            try:
                flags = store.poll_turns(list(turns))
                if time.monotonic() - self._renewed >= store.lease / 3:
                    store.renew([key for key in turns if flags.get(key[0], (False, False))[1]])
                    self._renewed = time.monotonic()
            except SessionError:
                continue  # the store is unreachable for now: try again at the next poll
            with self._cond:
                # Under the lock, and only for turns still watched: once unwatch() returns,
                # no callback of that turn runs (its event loop may be closed by then).
                for key, watched in turns.items():
                    interrupt, owned = flags.get(key[0], (False, False))
                    if watched.told or self._turns.get(key) is not watched:
                        continue
                    if not owned:
                        watched.told = True
                        watched.on_lost()
                    elif interrupt:
                        watched.told = True
                        watched.on_interrupt()
