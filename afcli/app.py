"""The ``af`` command line: one typer app, one module per command in ``afcli/commands``.

Exit codes: 0 ok, 1 the run or the check failed, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any, get_type_hints

import typer

from afcli._errors import EXIT_FAILED, EXIT_INTERRUPTED, say_error, settings
from afcli._help import Command, Group, reflow
from afcli.commands import (
    chat,
    diff,
    export,
    lens,
    ls,
    replay,
    report,
    resume,
    run,
    schema,
    sessions,
    show,
    verify,
    why,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="af",
    # Rich markup, not Markdown: typer's Markdown pulls in a parser the help never needs.
    rich_markup_mode="rich",
    cls=Group,
    help="Run LLM agents and read the recordings their runs leave.",
    no_args_is_help=True,
    add_completion=True,
    # Errors are ours to print (one sentence); a traceback with locals could show secrets.
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from afcore import __version__

        print(f"af {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an error.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Show af's version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    settings.debug = debug


def _add(name: str, fn: Callable[..., Any]) -> None:
    # typer reads each signature six times per start and compiles every string annotation
    # each time (``from __future__ import annotations``): resolved once here, they are not.
    fn.__annotations__.update(get_type_hints(fn, include_extras=True))
    app.command(name, cls=Command, help=reflow(fn.__doc__))(fn)


_add("run", run.run)
_add("resume", resume.resume)
_add("chat", chat.chat)
_add("ls", ls.ls)
_add("show", show.show)
_add("verify", verify.verify)
_add("schema", schema.schema)
_add("why", why.why)
_add("lens", lens.lens)
_add("sessions", sessions.sessions)
_add("replay", replay.replay)
_add("diff", diff.diff)
_add("export", export.export)
_add("report", report.report)


def main() -> None:
    """The console script: run the app and turn anything that escapes into an exit code."""
    try:
        app(prog_name="af")
    except KeyboardInterrupt:
        say_error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:  # a failure outside any command (the commands map their own)
        if settings.debug:
            raise
        say_error(f"{type(e).__name__}: {e} (run af --debug ... for the traceback)")
        sys.exit(EXIT_FAILED)
