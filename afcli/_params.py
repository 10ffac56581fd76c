"""Command-line parameters that several commands share, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["RunArg"]

RunArg = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        help="A recording's path, or a run id (or its unique prefix) in the recordings folder.",
        show_default=False,
    ),
]
"""The recording a command reads."""
