"""Command-line parameters that several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["OptionalRunArg", "RunArg", "complete_run"]


def complete_run(incomplete: str) -> list[str]:
    """Shell completion of RUN: the run ids in the recordings folder, newest first."""
    from afcli._runs import newest_first
    from afcore.recording import default_dir

    folder = default_dir()
    names = [p.stem for p in newest_first(folder)] if folder.is_dir() else []
    return [n for n in names if n.startswith(incomplete)]


_RUN_HELP = "A recording's path, or a run id (or its unique prefix) in the recordings folder."

RunArg = Annotated[
    str,
    typer.Argument(metavar="RUN", help=_RUN_HELP, show_default=False, autocompletion=complete_run),
]
"""The recording a command reads."""

OptionalRunArg = Annotated[
    str | None,
    typer.Argument(
        metavar="[RUN]",
        help=_RUN_HELP + " Default: the newest recording there.",
        show_default=False,
        autocompletion=complete_run,
    ),
]
"""The recording a command reads, the newest when left out."""
