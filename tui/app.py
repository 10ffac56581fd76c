"""The Lens: a recording replayed in the terminal, one model call at a time (``af lens``).

The app holds the recording and starts on :class:`tui.screens.lens.LensScreen`; the file is
opened as a prefix first, so the first call is on screen at once, and the screen indexes
the whole of it in the background. Its look is in ``lens.tcss``.

A turn of a session is one recording among its session's: ``[`` and ``]`` open the turn
before and after it, each on a screen of its own (found by the links the recordings' headers
hold, or given as the session's turns in order).
"""

from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.screen import Screen

from afcore.errors import RecordingError, RecordingFormatError
from afcore.readmodel import SessionRuns, safe, session_runs
from afcore.recording import FlowRecording, Recording, is_flow, open_flow, open_recording
from tui.screens.flow import FlowScreen
from tui.screens.lens import LensScreen

__all__ = ["PREFIX", "LensApp", "make_lens_app"]

PREFIX = 1024 * 1024
"""Bytes of the file indexed before the first call is drawn."""


def make_lens_app(
    path: Path,
    *,
    follow: bool = False,
    session: SessionRuns | None = None,
    against: Path | None = None,
) -> LensApp:
    """The Lens on ``path``: the one factory, used by ``af lens``, ``af run --lens`` and the
    tests. ``session``: the turns of the session ``path`` is a turn of, when known (else
    found beside it when first asked for). ``against``: another recording to compare it
    with, call by call (``--diff``): an agent's run with an agent's run, a flow's log with a
    flow's log. Raises afcore's RecordingError when a file is not a recording (or, with
    ``against``, not one of the same kind). A flow's recording opens on the tree of its
    steps."""
    if is_flow(path):
        if against is not None and not is_flow(against):
            raise RecordingFormatError(
                f"{path} is a flow's log and {against} is one agent's run: --diff compares "
                "two flows' logs, or two agents' runs (a flow's agents' runs are in its "
                "log)",
                path=against,
            )
        if against is not None:
            open_flow(against)  # not a flow's log: said now
        return LensApp(None, flow=open_flow(path), against=against)
    if against is not None and is_flow(against):
        raise RecordingFormatError(
            f"{against} is a flow's log and {path} is one agent's run: --diff compares two "
            "flows' logs, or two agents' runs (a flow's agents' runs are in its log)",
            path=against,
        )
    if against is not None:
        open_recording(against, index=False).close()  # not a recording: said now
    try:
        rec = open_recording(path, upto=PREFIX)
    except RecordingFormatError:
        # Its first line is longer than the prefix (a header with a very long config), or
        # the file is no recording: read whole, it opens or says exactly what is wrong.
        rec = open_recording(path)
    return LensApp(rec, follow=follow, session=session, against=against)


class LensApp(App[None]):
    TITLE = "af lens"
    ENABLE_COMMAND_PALETTE = False
    CSS_PATH = "lens.tcss"

    def __init__(
        self,
        rec: Recording | None,
        *,
        follow: bool = False,
        session: SessionRuns | None = None,
        against: Path | None = None,
        flow: FlowRecording | None = None,
    ) -> None:
        super().__init__()
        self.rec = rec
        self.follow = follow
        self.against = against
        self._session = session
        self._looked = session is not None
        self.flow = flow

    def get_default_screen(self) -> Screen[None]:
        if self.flow is not None:
            return FlowScreen(self.flow, against=self.against)
        assert self.rec is not None
        return LensScreen(self.rec, follow=self.follow, against=self.against)

    def session_runs(self) -> SessionRuns | None:
        """The session the first recording is a turn of (None: it is no turn of one)."""
        if not self._looked:
            self._looked = True
            if self.rec is not None and self.rec.header.session is not None:
                self._session = session_runs(Path(self.rec.path))
        return self._session

    def open_turn(self, rec: Recording, step: int) -> None:
        """Open the session's turn ``step`` turns after the one ``rec`` holds, in place of
        the screen on it."""
        runs = self.session_runs()
        if runs is None:
            self.notify("this run is no turn of a session", severity="warning")
            return
        at = runs.position(Path(rec.path))
        if at is None:
            self.notify("this run is not among its session's turns", severity="warning")
            return
        to = at + step
        if not 0 <= to < len(runs.turns):
            edge = "first" if to < 0 else "last"
            self.notify(f"turn {runs.turns[at].turn} is the session's {edge} one here")
            return
        try:
            opened = open_recording(runs.turns[to].path, upto=PREFIX)
        except RecordingError as e:
            self.notify(safe(str(e)), severity="error", markup=False)
            return
        screen = LensScreen(opened, follow=False)
        # The first turn's screen is the app's default one, which cannot be switched away.
        if len(self.screen_stack) > 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)
