"""``af lens``: a recording replayed in the terminal, call by call (the app lives in tui/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from afcli._errors import EXIT_FAILED, CliError, command
from afcli._params import OptionalRunArg

__all__ = ["lens", "run_lens"]


@command
def lens(
    run: OptionalRunArg = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Follow a recording still being written: new calls appear."
        ),
    ] = False,
) -> None:
    """Open a recording in the Lens: the scrubber, each call's slots as sent, its response.

    Keys: ← → move a call, / searches, w says why, ? lists them all, q quits.
    """
    from afcli._runs import newest, resolve

    run_lens(newest("af lens") if run is None else resolve(run), follow=follow)


def run_lens(path: Path, *, follow: bool = False) -> None:
    """Open the Lens on ``path`` in this terminal until it is left: the one place a command
    starts the Lens (``af lens``, ``af run --lens``)."""
    from afcore.errors import RecordingError
    from tui import make_lens_app

    try:
        app = make_lens_app(path, follow=follow)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None
    app.run()
