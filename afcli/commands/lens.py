"""``af lens``: a recording replayed in the terminal, call by call (the app lives in tui/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import OptionalRunArg
from afcli._stores import StoreOption

if TYPE_CHECKING:
    from afcore.readmodel import SessionRuns

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
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            metavar="ID|RUN",
            help="Open a session's turns: its id, or any of its turns' runs; [ and ] step "
            "from turn to turn.",
            show_default=False,
        ),
    ] = None,
    turn: Annotated[
        int | None,
        typer.Option(
            "--turn",
            "-t",
            min=1,
            metavar="N",
            help="With --session: open at turn N (default: the last).",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            metavar="B",
            help="Compare with another recording (a path or a run id; a flow's log with a "
            "flow's): the calls that differ are marked ≠ on the scrubber, and the selected "
            "call's differences are listed; for flows, the steps that differ and the decisions "
            "that went the other way are marked in the tree.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Open a recording in the Lens: the scrubber, each call's slots as sent, its response.

    Keys: ← → move a call, [ ] move a turn of a session, / searches, w says why, ? lists
    them all, q quits.
    """
    from afcli._runs import find_session, newest, resolve, session_turn

    if session is None:
        if turn is not None or store is not None:
            raise CliError("--turn and --store name a session's turn: give --session ID too")
        path = newest("af lens") if run is None else resolve(run)
        run_lens(path, follow=follow, against=None if diff is None else resolve(diff))
        return
    if run is not None:
        raise CliError(
            "--session opens a session's turns; name one with --turn N (or af lens RUN)",
            EXIT_USAGE,
        )
    runs = find_session(session, store)
    run_lens(session_turn(runs, turn).path, follow=follow, session=runs)


def run_lens(
    path: Path,
    *,
    follow: bool = False,
    session: SessionRuns | None = None,
    against: Path | None = None,
) -> None:
    """Open the Lens on ``path`` in this terminal until it is left: the one place a command
    starts the Lens (``af lens``, ``af run --lens``, ``af chat``'s /lens). ``session``: the
    turns of the session ``path`` is a turn of, when known; ``against``: a recording to
    compare it with (``--diff``)."""
    from afcore.errors import RecordingError
    from tui import make_lens_app

    try:
        app = make_lens_app(path, follow=follow, session=session, against=against)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None
    app.run()
