"""The synchronous doors (``Agent.run``, ``Flow.run``, ``replay``, ``Session.send``): a
coroutine run to its end on the calling thread's own event loop, made on its first run and
kept for the next.

``asyncio.run`` makes and tears down a loop for every call (a selector, a self-pipe, the
default executor's threads joined, the SIGINT handler swapped through ``signal``'s enum
lookups): about 70 us, which is most of a short scripted run's fixed cost. A loop kept per
thread costs a task and a ``run_until_complete``. What ``asyncio.run`` promised each run is
kept:

- **Context.** Each run's task runs in a copy of the caller's context, taken at the call:
  it sees the caller's context variables as they are now, and what it sets stays inside.
- **No leftovers.** Tasks a run leaves pending are cancelled and awaited when it ends, and
  async generators it left open are closed, as ``asyncio.run`` did at its loop's close.
- **Ctrl-C.** On the main thread, with Python's default SIGINT handler in force, the first
  Ctrl-C cancels the run and the call raises ``KeyboardInterrupt``; a second one raises at
  once (the same handler ``asyncio.run`` installs, set through the C functions, which skip
  ``signal``'s enum lookup that formats the task's repr on every run). A Ctrl-C taken by
  another thread of the process wakes the loop all the same (the loop's
  :class:`~afcore.loop._interrupt.SignalWake`, armed for the run as it first waits).
- **The file's sync.** A run's recording is complete on disk when the door returns; its
  closing fsync is handed to the recording's sync thread as the door returns, not as the
  run closes the file: woken earlier, that thread would take the GIL from the run's last
  steps (whenever the loop lets it go), on the caller's clock.
- **Inside a running loop** the door refuses with :class:`UsageError`, before anything is
  made, naming the async form to await.

What changes, by design: objects bound to an event loop outlive a run on the same thread.
An HTTP client a provider holds (its pooled connections), a tool's ``asyncio.Lock`` or
session, all keep working across a thread's sync runs, where a new loop per run broke them
or opened new connections. Another thread has another loop, as before. The default
executor (``asyncio.to_thread``) keeps its threads between runs. Callbacks a run scheduled
on the loop without a task (``loop.call_soon``) and never awaited run at the thread's next
run, not never.

The loop is closed when its thread ends (its last reference goes with the thread's locals)
and at interpreter exit. A process forked after a run does not use its parent's loops: the
child makes its own, and the inherited ones are closed without touching what the kernel
shares with the parent (the epoll instance; removing the parent's self-pipe from it would
leave the parent's loop deaf to wake-ups from other threads).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal
import asyncio
import atexit
import contextvars
import os
import selectors
import signal
import sys
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

from afcore.errors import UsageError
from afcore.loop._interrupt import SignalWake, ToolInterrupted, reaches_tools, tool_running
from afcore.recording._writer import hold_syncs, release_syncs

__all__ = ["run_sync"]

T = TypeVar("T")

_MAIN = threading.main_thread().ident


class _OwnSelector(selectors.DefaultSelector):
    """The platform's selector, made safe to drop in a forked child: there its kernel object
    (an epoll instance) is shared with the parent, and an unregister would remove the
    parent's registration. In a child it only forgets the file object.

    It also arms a run's :class:`SignalWake` as the loop is first about to sleep in it
    (see :meth:`arm_at_wait`): a signal only needs to wake a loop that sleeps, and a run
    that never does (a scripted model, inline tools) is spared the two system calls of
    arming it. A signal taken before the arming has marked itself for the main thread,
    which runs its handler at the next bytecode it runs: before it reaches the wait."""

    def __init__(self) -> None:
        super().__init__()
        self._pid = os.getpid()
        self._unarmed: SignalWake | None = None
        self._armed: tuple[SignalWake, int | None] | None = None

    def arm_at_wait(self, wake: SignalWake) -> None:
        """Arm ``wake`` before the loop next sleeps in this selector, until :meth:`disarm`."""
        self._unarmed = wake

    def disarm(self) -> None:
        """Disarm the wake :meth:`arm_at_wait` was given, if it was armed."""
        self._unarmed = None
        armed, self._armed = self._armed, None
        if armed is not None:
            armed[0].disarm(armed[1])

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._unarmed is not None and (timeout is None or timeout > 0):
            wake, self._unarmed = self._unarmed, None
            self._armed = (wake, wake.arm())
        return super().select(timeout)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        if os.getpid() == self._pid:
            return super().unregister(fileobj)
        return selectors._BaseSelectorImpl.unregister(self, fileobj)


class _Home:
    """One thread's event loop, and the process it was made in."""

    __slots__ = ("__weakref__", "loop", "pid", "selector", "wake")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.selector: _OwnSelector | None = None
        if sys.platform != "win32" and type(asyncio.get_event_loop_policy()) is (
            asyncio.DefaultEventLoopPolicy
        ):
            self.selector = _OwnSelector()
            self.loop: asyncio.AbstractEventLoop = asyncio.SelectorEventLoop(self.selector)
        else:  # an installed policy's loop (uvloop), or Windows' proactor
            self.loop = asyncio.new_event_loop()
        self.wake: SignalWake | None = None
        """made at the first run that takes Ctrl-C"""
        _homes.add(self)

    def close(self) -> None:
        loop = self.loop
        if loop.is_closed() or loop.is_running():
            return
        try:
            if self.pid == os.getpid():
                _settle(loop)
            if self.wake is not None:
                self.wake.close()
            loop.close()
        except Exception:  # a thread's or the process's end: nothing to report it to
            pass

    def __del__(self) -> None:  # the thread that owned it ended
        self.close()


_local = threading.local()
_homes: weakref.WeakSet[_Home] = weakref.WeakSet()


def _home() -> _Home:
    # A forked child finds no home here (dropped at the fork, see _forked): no process id
    # to ask for at each run.
    home: _Home | None = getattr(_local, "home", None)
    if home is None or home.loop.is_closed():
        if home is not None:
            home.close()
        home = _local.home = _Home()
    return home


def run_sync(coro: Coroutine[Any, Any, T], door: str, instead: str | None = None) -> T:
    """Run ``coro`` to its end on this thread's event loop. ``door`` names the sync method
    and ``instead`` its async form (``a`` + door unless given), for the error raised inside
    a running loop."""
    if asyncio._get_running_loop() is not None:
        coro.close()
        raise UsageError(
            f"{door}() was called inside a running event loop; "
            f"await {instead or 'a' + door}(...) instead"
        )
    home = _home()
    loop = home.loop
    task = loop.create_task(coro, context=contextvars.copy_context())
    interrupts = 0

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupts
        # An inline tool is unwound too (ToolInterrupted), after the run is cancelled: the
        # loop's wrapper of the handler is this handler's own part (see reaches_tools).
        running = tool_running()
        interrupts += 1
        if interrupts == 1 and not task.done():
            task.cancel()
            loop.call_soon_threadsafe(lambda: None)  # wake a select() with a long timeout
            if running:
                raise ToolInterrupted
            return
        raise KeyboardInterrupt

    handler = None
    if threading.get_ident() == _MAIN and _signal.getsignal(signal.SIGINT) is (
        signal.default_int_handler
    ):
        try:
            _signal.signal(signal.SIGINT, on_sigint)
            handler = on_sigint
            reaches_tools(on_sigint)
        except ValueError:  # an embedded interpreter that does not take signals
            pass
    wake = selector = woken = None
    if handler is not None:
        wake = home.wake
        if wake is None:
            wake = home.wake = SignalWake(loop)
        selector = home.selector
        if selector is not None:
            selector.arm_at_wait(wake)
        else:  # a loop of another kind: armed for the whole run
            woken = wake.arm()
    held = hold_syncs()
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if interrupts and task.uncancel() == 0:
            raise KeyboardInterrupt from None
        raise
    finally:
        try:
            if selector is not None:
                selector.disarm()
            elif wake is not None:
                wake.disarm(woken)
            if handler is not None:
                reaches_tools(None)
                if _signal.getsignal(signal.SIGINT) is handler:
                    _signal.signal(signal.SIGINT, signal.default_int_handler)
            _settle(loop, task)
        finally:
            release_syncs(held)


_TASKS = getattr(asyncio.tasks, "_all_tasks", None)
"""Where Python 3.11 registers every task of the process (a WeakSet), or None: later
Pythons keep them otherwise, and are asked through ``asyncio.all_tasks``."""
if not isinstance(_TASKS, weakref.WeakSet):
    _TASKS = None


def _settle(loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any] | None = None) -> None:
    """What ``asyncio.run`` did at its loop's close, short of closing it: cancel the tasks a
    run left pending and close the async generators it left open. ``task``: the run's
    own; while it is the only task the process holds, none is left (found without the
    copy and walk of every task ``asyncio.all_tasks`` makes: ~10 us of a short run)."""
    alone = task is not None and _TASKS is not None and len(_TASKS) == 1 and task in _TASKS
    left = () if alone else asyncio.all_tasks(loop)
    if left:
        for task in left:
            task.cancel()
        loop.run_until_complete(_gather(left))
        for task in left:
            if not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler(
                    {
                        "message": "unhandled exception in a task a run left behind",
                        "exception": task.exception(),
                        "task": task,
                    }
                )
    # The loop's registry of open async generators: loop.shutdown_asyncgens() would close
    # them too, but marks the loop as finished with generators for good.
    agens = getattr(loop, "_asyncgens", None)
    if agens:
        opened = list(agens)
        agens.clear()
        loop.run_until_complete(_gather([agen.aclose() for agen in opened]))


async def _gather(aws: Any) -> None:
    # Gathered inside a coroutine so that the gathering belongs to the loop that runs it
    # (outside one, gather() would take the thread's current loop, which is not this one).
    await asyncio.gather(*aws, return_exceptions=True)


def _forked() -> None:
    # The child's loops are its own: the inherited ones are dropped (their selectors leave
    # the parent's registrations alone) and the next run makes a new one.
    for home in list(_homes):
        home.close()
    _local.__dict__.pop("home", None)


def _exit() -> None:
    for home in list(_homes):
        home.close()


os.register_at_fork(after_in_child=_forked)
atexit.register(_exit)
