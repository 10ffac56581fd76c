"""Opening the recording a command names: a path, a run id or a unique prefix of one, or the
newest recording when none is named."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError

if TYPE_CHECKING:
    from afcore.readmodel import SessionRuns, TurnRun
    from afcore.recording import Recording

__all__ = [
    "find_session",
    "newest",
    "newest_first",
    "open_run",
    "reading_only",
    "resolve",
    "session_turn",
]

_RUN_ID = re.compile(r"\d{8}-\d{6}-\d{3}-")


def reading_only() -> None:
    """For a command that reads recordings and runs no agent: pydantic's plugins (a
    tracer's, say) have nothing to see in af's own records, so pydantic is told not to look
    for them (``PYDANTIC_DISABLE_PLUGINS``, unless set): finding them reads the metadata of
    every installed package, ~8 ms of each start-up."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def newest_first(folder: Path) -> list[Path]:
    """The recordings in ``folder``, newest first. Run ids start with the time the run
    started, so name order is time order; files named otherwise (the shipped samples, a
    renamed copy) follow, by name."""
    files = [p for p in folder.glob("*.jsonl") if p.is_file()]
    runs = sorted((p for p in files if _RUN_ID.match(p.name)), reverse=True)
    others = sorted(p for p in files if not _RUN_ID.match(p.name))
    return runs + others


def newest(command: str) -> Path:
    """The newest recording in the recordings folder, for a command given no RUN."""
    from afcore.recording import default_dir

    folder = default_dir()
    found = newest_first(folder) if folder.is_dir() else []
    if not found:
        raise CliError(f"no recordings in {folder}: name one ({command} RUN)", EXIT_USAGE)
    return found[0]


def resolve(ref: str) -> Path:
    """The path of the recording ``ref`` names, or a one-sentence usage error."""
    from afcore.errors import RunNotFoundError
    from afcore.recording import resolve_run

    if any(c in ref for c in "*?[") and not _is_file(ref):
        # The folder is searched by glob: a pattern here would match runs it does not name.
        raise CliError(f"no recording named {ref!r}: a run id holds no *, ? or [", EXIT_USAGE)
    try:
        return resolve_run(ref)
    except RunNotFoundError as e:
        raise CliError(str(e) + _folded_note(ref), EXIT_USAGE) from None


def _folded_note(ref: str) -> str:
    """For a flow's agent run that is gone because its flow ended and holds it: where."""
    import shlex

    from afcore.recording import folded_into

    found = folded_into(Path(ref)) if ref.endswith(".jsonl") else None
    if found is None:
        return ""
    flow, step = found
    log = shlex.quote(str(flow.path))
    return (
        f": its flow ended and its log {flow.path} holds it (af lens {log}, af why {log} "
        f"KEY --step {shlex.quote(step.path)})"
    )


def open_run(ref: str | Path, *, index: bool = True) -> Recording:
    """The recording named by a path, a run id or a unique prefix of one (a Path: that
    file). ``index=False``: for a command that walks the file once (see ``open_recording``)."""
    from afcore.errors import RecordingError
    from afcore.recording import open_recording

    path = ref if isinstance(ref, Path) else resolve(ref)
    try:
        return open_recording(path, index=index)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None


def _is_file(ref: str) -> bool:
    try:
        return Path(ref).is_file()
    except OSError:  # a name too long for the file system, ...
        return False


def find_session(ref: str, store: str | None = None) -> SessionRuns:
    """The session ``--session REF`` names, as its turns' recordings in order. REF is a
    session id, whose turns the session store names (``store``, by default the one beside
    the recordings folder); a session the store does not hold (its recordings attached to a
    report, say) is found in the recordings folder by the links their headers hold. REF may
    also be any turn's recording (a path, a run id or a unique prefix of one): its turns are
    found beside it."""
    from afcore.errors import UsageError
    from afcore.readmodel import session_runs
    from afcore.recording import default_dir
    from afcore.sessions import check_session_id

    folder = default_dir()
    try:
        check_session_id(ref)
    except UsageError:
        runs = None
    else:
        runs = _stored(ref, store)
        if runs is None and store is not None:
            raise CliError(f"the session store {store} holds no session {ref!r}", EXIT_USAGE)
        if runs is None:
            runs = session_runs(ref, folder)
    if runs is not None:
        return runs
    try:
        path = resolve(ref)
    except CliError:
        raise CliError(
            f"no session {ref!r} in the session store, nor any recording in {folder} that is "
            f"a turn of it, nor is {ref!r} a recording (--session takes a session id, or a "
            "run of one of its turns)",
            EXIT_USAGE,
        ) from None
    runs = session_runs(path)
    if runs is None:
        raise CliError(f"{path.name} is not a turn of a session: its header names none", EXIT_USAGE)
    return runs


def session_turn(runs: SessionRuns, n: int | None) -> TurnRun:
    """Turn ``n`` of the session (None: its last), or a usage error saying which it has."""
    if n is None:
        return runs.turns[-1]
    found = runs.turn(n)
    if found is None:
        have = ", ".join(str(t.turn) for t in runs.turns)
        raise CliError(
            f"session {runs.id!r} has no turn {n} recorded here (its turns: {have})", EXIT_USAGE
        )
    return found


def _stored(sid: str, spec: str | None) -> SessionRuns | None:
    """The session's turns as the store says them, each with its recording (None: no store
    here, or it does not hold the session)."""
    from afcli._stores import open_store
    from afcore.errors import SessionError
    from afcore.readmodel import SessionRuns, TurnRun

    opened = open_store(spec, create=False)
    if opened is None:
        return None
    try:
        with opened, opened.transaction(sid, write=False) as tx:
            if tx.session() is None:
                return None
            turns = tx.turns()
    except SessionError as e:
        raise CliError(str(e), EXIT_FAILED) from None  # it names the store and what failed
    found: list[TurnRun] = []
    gaps: list[str] = []
    previous: str | None = None
    for t in turns:
        if t.run_id is None or t.recording is None:
            gaps.append(f"turn {t.n} ({t.status.replace('_', ' ')}) has no recording")
        elif not Path(t.recording).is_file():
            gaps.append(f"turn {t.n}'s recording is not at {t.recording}")
        else:
            found.append(TurnRun(t.n, t.run_id, Path(t.recording), previous, t.status, t.note))
        previous = t.run_id or previous
    if not found:
        said = "; ".join(gaps) if gaps else "it has had no turn yet"
        raise CliError(f"session {sid!r} has no recorded turn to open: {said}", EXIT_FAILED)
    return SessionRuns(sid, found[-1].path.parent, found, gaps)
