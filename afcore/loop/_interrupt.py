"""A run that can always be stopped: sync tools run in daemon threads the loop can walk away
from, and a tool call a stop left unfinished is recorded as interrupted.

A sync tool that blocks (``time.sleep(60)``, a hung socket) cannot be stopped from outside
its thread. Run on the loop's own thread it would hold the run until it returned, whatever
the user pressed; run on a daemon thread, a cancel reaches the loop at once, the run records
its end, and the thread is abandoned: it finishes (or not) on its own, and neither the run
nor the process waits for it. The threads are kept for reuse, so a tool call costs a hand-off,
not a thread start.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["INTERRUPTED_TEXT", "in_thread"]

INTERRUPTED_TEXT = (
    "The tool call did not finish: the run was interrupted before it returned. Whether it "
    "did anything before it stopped is unknown."
)
"""The result a tool call the run stopped during is answered with, in the transcript."""

_IDLE_SECONDS = 30.0
"""An idle worker thread ends after this long."""


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a daemon worker thread. Cancelled, the await ends at once and the
    thread is left to finish on its own; what it returns then is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    _POOL.submit(lambda: fn(*args), loop, future)
    return await future


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: the run has moved on
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class _Worker(threading.Thread):
    def __init__(self, pool: _Pool) -> None:
        super().__init__(name="af-tool", daemon=True)
        self.pool = pool
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], Any, Any]] = queue.SimpleQueue()

    def run(self) -> None:
        while True:
            try:
                job = self.jobs.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                if self.pool.retire(self):
                    return
                continue  # taken for a job just as it timed out: the job is on its way
            fn, loop, future = job
            value: Any = None
            error: BaseException | None = None
            try:
                value = fn()
            except BaseException as e:  # the tool's to raise; the loop reports it
                error = e
            # Idle before the result is handed over: the call the loop makes next (the
            # next tool of the run) finds this thread free instead of starting another.
            self.pool.idle(self)
            try:
                loop.call_soon_threadsafe(_settle, future, value, error)
            except RuntimeError:
                pass  # the loop has closed: an abandoned call whose run is over
            del fn, job, value, error


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []

    def submit(self, fn: Callable[[], Any], loop: Any, future: Any) -> None:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self)
            worker.start()
        worker.jobs.put((fn, loop, future))

    def idle(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def retire(self, worker: _Worker) -> bool:
        """Whether ``worker`` may end: it is idle and no job was handed to it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


_POOL = _Pool()
