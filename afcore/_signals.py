"""Signals and the threads af starts."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal

__all__ = ["leave_sigint_to_the_main_thread"]


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
