"""The ``af`` command line: one typer app, one module per command in ``afcli/commands``.

Exit codes: 0 ok, 1 the run or the check failed, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Annotated, Any, get_type_hints

import typer

from afcli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, say_error, settings
from afcli._help import Command, Group, reflow

__all__ = ["app", "main"]

# Each command's module, named as the command, defines a function of the same name. In the
# order of af --help.
COMMANDS = (
    "run",
    "resume",
    "chat",
    "ls",
    "show",
    "verify",
    "schema",
    "why",
    "lens",
    "sessions",
    "replay",
    "diff",
    "export",
    "report",
)


class _App(typer.Typer):
    """The app, whose commands are registered when typer first reads them (it builds the
    group then): all of them, or for the console script running a named command, that one
    alone. A command's module, its imports and its signature cost ~0.5 ms of every start."""

    _pending: tuple[str, ...] = ()
    _commands: list[Any]

    @property
    def registered_commands(self) -> list[Any]:
        if self._pending:
            names, self._pending = self._pending, ()
            for name in names:
                _add(name)
        return self._commands

    @registered_commands.setter
    def registered_commands(self, value: list[Any]) -> None:
        self._commands = value
        self._pending = COMMANDS

    def only(self, name: str) -> None:
        """Register ``name`` alone, if no command is registered yet."""
        if self._pending == COMMANDS:
            self._pending = (name,)


app = _App(
    name="af",
    # Rich markup, not Markdown: typer's Markdown pulls in a parser the help never needs.
    rich_markup_mode="rich",
    cls=Group,
    help="Run LLM agents and read the recordings their runs leave.",
    no_args_is_help=True,
    # Our own --install-completion/--show-completion (below): typer's say "Shell  not
    # supported." when no shell is among af's parent processes. Its completion itself stays.
    add_completion=False,
    # Errors are ours to print (one sentence); a traceback with locals could show secrets.
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from afcore import __version__

        print(f"af {__version__}")
        raise typer.Exit()


def _typer_completion() -> Callable[[], str | None]:
    """typer's completion as af uses it, without ``add_completion``: its shells registered
    with the click it carries, as its scripts call them back (``_AF_COMPLETE=complete_bash``),
    and the function that names the shell its install picks (None: none found).

    typer makes neither public (up to 0.26; click's own ``add_completion_class`` fills click's
    registry, not that of the click typer vendors), so this is af's one use of typer's private
    modules: tests/afcli/test_new_user.py fails, naming what moved, when typer changes them."""
    from typer._completion_classes import completion_init
    from typer._completion_shared import _get_shell_name

    completion_init()
    return _get_shell_name


_shell_name = _typer_completion()
_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def _completion(ctx: typer.Context, param: Any, value: bool) -> None:
    """typer's completion install or script, for the shell af runs in, once there is one."""
    if not value or ctx.resilient_parsing:
        return
    shell = _shell_name()  # the shell typer's install would pick
    if shell not in _SHELLS:
        found = (
            f"af runs in {shell}, which it cannot complete in"
            if shell
            else "af cannot tell which shell it runs in (none among the processes that started it)"
        )
        say_error(
            f"{found}: run af {param.opts[0]} from bash, zsh, fish or PowerShell, or load the "
            'script yourself, e.g. in ~/.bashrc: eval "$(_AF_COMPLETE=source_bash af)" '
            "(source_zsh, source_fish)"
        )
        raise typer.Exit(EXIT_USAGE)
    from typer.completion import install_callback, show_callback

    (install_callback if param.name == "install_completion" else show_callback)(ctx, param, value)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an error.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Show af's version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
    install_completion: Annotated[
        bool,
        typer.Option(
            "--install-completion",
            help="Install completion for the current shell.",
            callback=_completion,
            expose_value=False,
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        typer.Option(
            "--show-completion",
            help="Show completion for the current shell, to copy it or customize the installation.",
            callback=_completion,
            expose_value=False,
        ),
    ] = False,
) -> None:
    settings.debug = debug


def _add(name: str) -> None:
    fn = getattr(importlib.import_module(f"afcli.commands.{name}"), name)
    # typer reads each signature six times per start and compiles every string annotation
    # each time (``from __future__ import annotations``): resolved once here, they are not.
    fn.__annotations__.update(get_type_hints(fn, include_extras=True))
    app.command(name, cls=Command, help=reflow(fn.__doc__))(fn)


def main() -> None:
    """The console script: run the app and turn anything that escapes into an exit code."""
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        app.only(sys.argv[1])
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
