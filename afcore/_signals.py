"""Signals and the threads af starts: how they are scheduled."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal
import os

__all__ = ["leave_sigint_to_the_main_thread", "yield_to_the_threads_that_wake_this_one"]


def leave_sigint_to_the_main_thread() -> None:
    """Called first on each thread af starts: SIGINT is blocked there, so that the kernel
    hands a process-directed Ctrl-C to the main thread, where it interrupts a blocking call
    (a prompt's read, a selector's wait) and its Python handler runs, instead of to this
    thread, where CPython's C handler would only leave a mark for the main thread to find
    when something else wakes it. Where threads have no signal mask (Windows): nothing.

    Only for af's own bookkeeping threads: a thread that runs a tool or starts a process
    keeps SIGINT, since a child inherits its mask and would be deaf to Ctrl-C."""
    mask = getattr(_signal, "pthread_sigmask", None)
    if mask is not None:
        mask(_signal.SIG_BLOCK, (_signal.SIGINT,))


def yield_to_the_threads_that_wake_this_one() -> None:
    """For a bookkeeping thread that others wake (the recording's sync thread): scheduled
    as batch work (Linux's SCHED_BATCH), so that, woken, it does not take the CPU from the
    thread that woke it, which then goes on until its time slice ends or it waits. It keeps
    its share of the CPU; only the preemption at its wake-up is given up. Measured under
    load (8 on 2 cores): a short run whose end woke that thread took a median 3 to 13 ms
    (the run's thread preempted, then queued behind other processes) against 0.8 ms as
    batch work, the same as with the wake left until after the run. Elsewhere, or where
    the system refuses: nothing."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:
        pass
