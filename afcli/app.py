"""The ``af`` command line: one typer app, one module per command in ``afcli/commands``.

Exit codes: 0 ok, 1 the run or the check failed, 2 usage error, 130 interrupted.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Annotated, Any, get_type_hints

import typer

from afcli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, say_error, settings
from afcli._help import Command, Group, reflow

__all__ = ["app", "main"]

# Each command's module, named as the command, defines a function of the same name; here with
# the first paragraph of its docstring, the line ``af --help`` lists it with (a test keeps the
# two equal). In the order of af --help.
SUMMARIES = {
    "run": "Run an agent on a message and record the run.",
    "resume": "Continue a paused run: a tool middleware link asked a person about a tool call.",
    "chat": (
        "Talk with an agent: each message is one turn of a session, kept in a store, so the "
        "conversation outlives this process and any process can continue it."
    ),
    "ls": "List recordings, newest first: start time, agent, status, iterations, tokens.",
    "show": (
        "Show a recorded run: each call's slot sizes, tool calls and results, and the outcome. "
        "A flow's recording shows as the tree of its steps with each agent's calls."
    ),
    "verify": ("Check a recording: every call rebuilt byte for byte, the commit log consistent."),
    "schema": (
        "Print the JSON Schema of a recording's lines (one record each), as JSON on stdout."
    ),
    "why": (
        "Why does KEY hold what it holds? Walks back from the stage that wrote it through what "
        "each stage read, with the rules that decided on the way and their evidence, offline."
    ),
    "lens": (
        "Open a recording in the Lens: the scrubber, each call's slots as sent, its response."
    ),
    "sessions": (
        "List the sessions in a store, the most recently active first: agent, turn state, "
        "turns, inbox depth, last activity. With an ID: that session's turns (status, run id, "
        "answer) and the messages waiting in its inbox."
    ),
    "replay": (
        "Run a recorded agent again with every model call answered from the recording: no "
        "network, no key. Each request the agent builds is compared with the recorded one; the "
        "first difference stops the replay and is shown with the `af why` key that explains "
        "the recorded side."
    ),
    "diff": (
        "Compare two recordings (a run and its replay, or two runs of one agent before and "
        "after a change), call by call: what differs in each slot (segments with their "
        "injections, messages, tools, params), in the tool calls and their results, and in the "
        "answers."
    ),
    "export": (
        "Write a run (an agent's, or a flow's composed run) as a bundle to attach to a bug "
        "report, safe by default."
    ),
    "report": (
        "Print a Markdown summary of a run to paste into an issue: the agent, the model, the "
        "outcome, the answer, the calls (the one that failed or was refused picked out), the "
        "verification, af's version, and how to open the attached bundle."
    ),
}
COMMANDS = tuple(SUMMARIES)

# The arguments with which af prints its own help and nothing else: its list of commands needs
# each one's name and summary, not its module.
_HELP = frozenset({"--help", "-h"})
_ROOT_HELP = _HELP | {"--debug"}


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

    def listed(self) -> None:
        """Register each command as its name and summary alone, if no command is registered
        yet: for af's own help, which lists them and runs none. Importing the 14 modules and
        building their options is half of ``af --help``'s start-up otherwise."""
        if self._pending == COMMANDS:
            self._pending = ()
            for name, summary in SUMMARIES.items():
                self.command(name, cls=Command, help=reflow(summary))(_listed)


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


def _listed() -> None:
    """A command as ``af --help`` lists it: never run (the help exits first)."""
    raise AssertionError("a command registered for af --help alone was run")


def root_help(args: list[str], environ: Mapping[str, str]) -> bool:
    """Whether ``af ARGS`` prints af's own help and runs nothing: no arguments, or a help flag
    with no command (and not shell completion, which reads the commands' options)."""
    if "_AF_COMPLETE" in environ or not _ROOT_HELP.issuperset(args):
        return False
    return not args or not _HELP.isdisjoint(args)


def main() -> None:
    """The console script: run the app and turn anything that escapes into an exit code."""
    if len(sys.argv) > 1 and sys.argv[1] in COMMANDS:
        app.only(sys.argv[1])
    elif root_help(sys.argv[1:], os.environ):
        app.listed()
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
