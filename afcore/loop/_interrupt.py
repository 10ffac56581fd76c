"""A run that can always be stopped, without a thread hop per tool call.

A sync tool that blocks (``time.sleep(60)``, a hung socket) cannot be stopped from outside
its thread. Two ways keep Ctrl-C working:

- **Inline, on the main thread.** A lone sync tool runs on the loop's own thread, when that
  is the main thread, inside :func:`inline`. The SIGINT handler in force (the event loop's,
  or the command's) is wrapped for the run (:func:`sigint_reaches_tools`): it runs as before
  (it cancels the run, says the run is stopping) and then raises :class:`ToolInterrupted`
  into the tool, which is unwound there and then (a sync door's own handler does both
  itself: it has nothing to wrap). No thread, no hand-off: a tool call costs a
  function call. What cannot be unwound this way is a tool stuck in C code that does not
  return to Python on a signal (CPython runs handlers between bytecodes), and a cancel that
  is not a signal (``asyncio.wait_for``'s timeout) waits for the tool to return; a tool that
  may block in such ways is best written ``async``.
- **On a daemon thread**, for the tools of one reply that run together, and for a loop that
  is not on the main thread (no signal reaches it): a cancel reaches the loop at once, the
  run records its end, and the thread is abandoned: it finishes (or not) on its own, and
  neither the run nor the process waits for it. The threads are kept for reuse, so such a
  call costs a hand-off, not a thread start.

Wherever a Ctrl-C lands, the event loop hears it: a process-directed signal may be taken by
any thread that does not block it (one of af's, or a library's), and CPython's C handler
then only marks it for the main thread, which, asleep in its selector with a long timeout,
would not run the Python handler until something woke it. :class:`SignalWake` makes the
loop's selector listen to the interpreter's wakeup fd for the length of a run, as
``loop.add_signal_handler`` does, while the handler stays the Python one (which can raise
into an inline tool). A sync tool blocking inline is not in the selector: a Ctrl-C reaches it
only when the kernel hands the signal to the main thread, so the threads af starts leave
SIGINT to it (:func:`new_threads_leave_sigint`, and each bookkeeping thread's own mask).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal
import asyncio
import contextvars
import os
import queue
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "INTERRUPTED_TEXT",
    "SignalWake",
    "ToolInterrupted",
    "beside_others",
    "can_inline",
    "in_thread",
    "inline",
    "new_threads_leave_sigint",
    "reaches_tools",
    "sigint_reaches_tools",
    "tool_running",
]

INTERRUPTED_TEXT = (
    "The tool call did not finish: the run was interrupted before it returned. Whether it "
    "did anything before it stopped is unknown."
)
"""The result a tool call the run stopped during is answered with, in the transcript."""

_IDLE_SECONDS = 30.0
"""An idle worker thread ends after this long."""


class ToolInterrupted(BaseException):  # noqa: N818 - a stop, like KeyboardInterrupt
    """Raised into a sync tool running inline when Ctrl-C comes. A BaseException, so that a
    tool's own ``except Exception`` does not swallow it."""


_MAIN = threading.main_thread().ident
_inline_depth = 0
"""How many inline tools the main thread is running (more than one: a tool that runs an
agent of its own)."""
_wrapped = 0
"""How many runs on the main thread have the SIGINT handler wrapped (nested runs share it)."""
_reaching: Any = None
"""The SIGINT handler a sync door installed for its run, which raises into an inline tool
itself (see :func:`reaches_tools`): a run under it has nothing to wrap."""


_beside: contextvars.ContextVar[bool] = contextvars.ContextVar("af_beside", default=False)
"""The run shares its event loop with others running at the same time (see
:func:`beside_others`)."""


@contextmanager
def beside_others() -> Iterator[None]:
    """Tasks created inside run beside one another on one event loop (a flow's Parallel
    branches): their sync tools go to threads, as the tools of one reply do, since a tool
    inline would hold the loop the others run on."""
    token = _beside.set(True)
    try:
        yield
    finally:
        _beside.reset(token)


def can_inline() -> bool:
    """Whether a sync tool may run on this thread: the main thread, where a SIGINT handler
    can raise into it, with the handler wrapped by :func:`sigint_reaches_tools`, and no other
    run sharing the event loop (:func:`beside_others`)."""
    return _wrapped > 0 and threading.get_ident() == _MAIN and not _beside.get()


def inline(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on this thread, where Ctrl-C raises :class:`ToolInterrupted` into it."""
    global _inline_depth
    _inline_depth += 1
    try:
        return fn(*args)
    finally:
        _inline_depth -= 1


@contextmanager
def sigint_reaches_tools() -> Iterator[None]:
    """For the length of a run on the main thread: the SIGINT handler in force, and then, if
    a sync tool runs inline, :class:`ToolInterrupted` raised into it. Elsewhere (another
    thread, a handler that is not Python's, or SIGINT ignored): nothing, and tools go to
    threads."""
    global _wrapped
    if threading.get_ident() != _MAIN:
        yield
        return
    if _wrapped:  # a run inside a run (an agent as a tool): the outer one's wrapper holds
        _wrapped += 1
        try:
            yield
        finally:
            _wrapped -= 1
        return
    # The C functions: signal.getsignal() and signal.signal() try each handler as an enum
    # member first, and the failed lookup formats the handler's repr, which for the event
    # loop's handler is its task's, callbacks and source lines: ~60 us a run.
    previous = _signal.getsignal(signal.SIGINT)
    if previous is _reaching and previous is not None:
        # A sync door's own handler, which raises into an inline tool already: two
        # sigactions a run fewer.
        _wrapped = 1
        try:
            yield
        finally:
            _wrapped = 0
        return
    if not callable(previous):
        yield  # SIG_IGN, SIG_DFL or a handler not set from Python: leave it alone
        return

    def handler(signum: int, frame: Any) -> None:
        running = _inline_depth > 0
        previous(signum, frame)  # may raise KeyboardInterrupt itself: it unwinds the tool
        if running:
            raise ToolInterrupted

    _signal.signal(signal.SIGINT, handler)
    _wrapped = 1
    try:
        yield
    finally:
        _wrapped = 0
        if _signal.getsignal(signal.SIGINT) is handler:
            _signal.signal(signal.SIGINT, previous)


def reaches_tools(handler: Callable[[int, Any], None] | None) -> None:
    """``handler`` (None: none) is the SIGINT handler a sync door put in force for its run,
    which raises :class:`ToolInterrupted` into an inline tool after its own work
    (:func:`tool_running` says whether one was, as the signal came), as the wrapper of
    :func:`sigint_reaches_tools` does: a run under it is not wrapped again."""
    global _reaching
    _reaching = handler


def tool_running() -> bool:
    """Whether an inline tool is running on the main thread (see :func:`reaches_tools`)."""
    return _inline_depth > 0


@contextmanager
def new_threads_leave_sigint() -> Iterator[None]:
    """Threads started in the block are born with SIGINT blocked (a thread takes its
    creator's mask), so a Ctrl-C goes to the main thread: for a front end's own threads (a
    spinner's refresh), never for one that runs a tool or starts a process (a child keeps the
    mask, deaf to Ctrl-C). A Ctrl-C typed meanwhile waits, blocked, and lands at the end."""
    mask = getattr(_signal, "pthread_sigmask", None)
    if mask is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = mask(_signal.SIG_BLOCK, (_signal.SIGINT,))
    try:
        yield
    finally:
        mask(_signal.SIG_SETMASK, before)


class SignalWake:
    """A socket pair whose reading end ``loop`` watches: armed, its writing end is the
    interpreter's wakeup fd, so that a signal taken by any thread wakes the loop's selector
    and the main thread runs the signal's Python handler at once. Made once per loop (a
    socket pair and a reader), armed for each run that waits (two C calls)."""

    __slots__ = ("_loop", "_read", "_write")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)
        try:
            loop.add_reader(self._read.fileno(), self._drain)
        except NotImplementedError:  # a loop without readers (Windows' proactor): unarmed
            self._read.close()
            self._write.close()

    def _drain(self) -> None:
        try:
            while self._read.recv(4096):
                pass
        except OSError:  # drained (BlockingIOError), or closed underneath
            pass

    def arm(self) -> int | None:
        """From now on signals wake the loop; the wakeup fd in force before, for
        :meth:`disarm` (None: not armed, off the main thread or once closed)."""
        fd = self._write.fileno()
        if fd < 0:
            return None
        try:
            return signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            return None

    def disarm(self, previous: int | None) -> None:
        """Put back the wakeup fd :meth:`arm` found, unless another was set meanwhile."""
        if previous is None:
            return
        now = signal.set_wakeup_fd(previous)
        if now != self._write.fileno():  # set by someone else meanwhile: theirs stays
            signal.set_wakeup_fd(now)

    @contextmanager
    def armed(self) -> Iterator[None]:
        """For the block: signals wake the loop (:meth:`arm`, :meth:`disarm`)."""
        previous = self.arm()
        try:
            yield
        finally:
            self.disarm(previous)

    def close(self) -> None:
        if self._read.fileno() < 0:
            return
        if not self._loop.is_closed():
            try:
                self._loop.remove_reader(self._read.fileno())
            except Exception:  # a forked child's loop, already dropped: nothing to undo
                pass
        self._read.close()
        self._write.close()


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a daemon worker thread. Cancelled, the await ends at once and the
    thread is left to finish on its own; what it returns then is dropped. It runs in a
    copy of the caller's context (a flow's step attributes the state a tool writes)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()
    _POOL.submit(lambda: context.run(fn, *args), loop, future)
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

    def forked(self) -> None:
        """In a forked child: the parent's workers are not there (a fork copies one thread),
        so a job handed to one would never run."""
        self._lock = threading.Lock()
        self._idle = []

    def retire(self, worker: _Worker) -> bool:
        """Whether ``worker`` may end: it is idle and no job was handed to it."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                return True
            return False


_POOL = _Pool()
os.register_at_fork(after_in_child=_POOL.forked)
