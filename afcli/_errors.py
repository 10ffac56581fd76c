"""Exit codes, and turning errors into one sentence on stderr.

Commands raise :class:`CliError` (or let an af error through); :func:`command` prints it as
one line and exits with its code. The traceback is shown only under ``af --debug``. This
lives in a decorator rather than only in ``main()`` so that the test runner, which calls the
command directly, sees the same behaviour as a person does.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

__all__ = [
    "EXIT_FAILED",
    "EXIT_CLOSED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "CliError",
    "command",
    "key_words",
    "say_error",
    "settings",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""The run or the check failed (or a recording could not be read)."""
EXIT_USAGE = 2
"""Bad arguments, a missing file, an agent that does not load."""
EXIT_INTERRUPTED = 130
EXIT_CLOSED = 141
"""Whoever read the output went away (``af show RUN | head``): 128 + SIGPIPE, as a shell
reports a program the closed pipe stopped."""

P = ParamSpec("P")
R = TypeVar("R")


class _Settings:
    debug: bool = False


settings = _Settings()
"""Global options, set by the app's callback for each invocation."""


class CliError(Exception):
    """An error to show as one sentence, ending the command with ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def say_error(message: str) -> None:
    from rich.text import Text

    from afcli._render import err_console
    from afcore.readmodel import safe

    err_console().print(Text.assemble(("error: ", "bold red"), safe(message)), soft_wrap=True)


def key_words(error: BaseException) -> str | None:
    """A missing API key as a command-line user fixes it: by setting a variable."""
    from afcore.errors import MissingKeyError

    if not isinstance(error, MissingKeyError):
        return None
    return (
        f"no {error.vendor} API key: set the {error.variable} environment variable "
        f"(export {error.variable}=...)"
    )


def _code_for(error: BaseException) -> int:
    from afcore.errors import RunNotFoundError, UsageError

    # Naming a run or a call that is not there, or misusing the library, is the caller's
    # to fix (the read model's CallNotFoundError is a LookupError).
    caller = RunNotFoundError | UsageError | LookupError
    return EXIT_USAGE if isinstance(error, caller) else EXIT_FAILED


def command(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a command, mapping errors to a sentence and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except KeyboardInterrupt:
            say_error("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except CliError as e:
            if settings.debug:
                traceback.print_exc(file=sys.stderr)
            say_error(e.message)
            raise typer.Exit(e.code) from None
        except Exception as e:
            from afcore.errors import AfError

            if isinstance(e, BrokenPipeError) and _reader_gone():
                # Nothing to say, and nobody to say it to: stop quietly.
                _quiet_stdout()
                raise typer.Exit(EXIT_CLOSED) from None

            if "KeyboardInterrupt" in f"{type(e.__context__).__name__} {e}":
                # pydantic-core reports an interrupt inside its validator build as its own
                # error: it is the Ctrl-C all the same.
                say_error("interrupted")
                raise typer.Exit(EXIT_INTERRUPTED) from None

            if settings.debug:
                traceback.print_exc(file=sys.stderr)
            if isinstance(e, AfError):
                say_error(key_words(e) or str(e))
            else:
                say_error(
                    f"af failed unexpectedly: {type(e).__name__}: {e} "
                    "(run af --debug ... for the traceback)"
                )
            raise typer.Exit(_code_for(e)) from None

    return wrapper


def _reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it."""
    import select

    if not hasattr(select, "poll"):
        return False
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no file behind stdout (a test's capture)
        return False


def _quiet_stdout() -> None:
    """Point stdout at the null device: what is still buffered is dropped, where flushing
    it at exit would fail once more, with a message on stderr."""
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
