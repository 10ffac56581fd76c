"""``af lens``: a recording replayed in the terminal, call by call (the app lives in tui/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command

__all__ = ["lens", "run_lens"]


@command
def lens(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN]",
            help="A recording's path, or a run id (or its unique prefix) in the recordings "
            "folder. Default: the newest recording there.",
            show_default=False,
        ),
    ] = None,
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
    run_lens(_newest() if run is None else _resolve(run), follow=follow)


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


def _resolve(ref: str) -> Path:
    from afcore.errors import RunNotFoundError
    from afcore.recording import resolve_run

    if any(c in ref for c in "*?[") and not Path(ref).is_file():
        raise CliError(f"no recording named {ref!r}: a run id holds no *, ? or [", EXIT_USAGE)
    try:
        return resolve_run(ref)
    except RunNotFoundError as e:
        raise CliError(str(e), EXIT_USAGE) from None


def _newest() -> Path:
    from afcli.commands.ls import _newest_first as newest_first
    from afcore.recording import default_dir

    folder = default_dir()
    found = newest_first(folder) if folder.is_dir() else []
    if not found:
        raise CliError(f"no recordings in {folder}: name one (af lens RUN)", EXIT_USAGE)
    return found[0]
