"""A session as its turns in order, read from the recordings alone.

Each turn of a session writes its own recording, whose header says which session, which
turn, and the run id of the turn before it (``session: {id, turn, previous}``). Reading a
session is finding those recordings in a folder and following the links: no store is needed,
so a session's recordings attached to a bug report read as the session they were.

A turn's recording starts with the conversation it continued (its ``history`` stage), each
message with the turn that wrote it. :func:`history_origin` follows such a message back to
the recording of that turn and the message there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from msgspec import Struct, field
from msgspec.structs import replace

from afcore.recording._typed import dump

if TYPE_CHECKING:
    from afcore.recording import Recording

__all__ = [
    "HEADER_LIMIT",
    "HistoryOrigin",
    "SessionRuns",
    "TurnRun",
    "history_origin",
    "history_source",
    "session_runs",
    "turn_header",
    "user_message",
]

HEADER_LIMIT = 1024 * 1024
"""Bytes of a file's first line read for its header; a longer first line is no turn's."""

CLOSED = "closed by af"
"""How af's note on a tool call it closed starts: the session wrote that result itself."""

_TURN = re.compile(r"turn (\d+)(?:; (.*))?\Z", re.DOTALL)


def history_source(source: dict[str, Any]) -> tuple[int | None, str | None]:
    """The turn that wrote a message of a session's history, and af's note on it when af
    wrote it itself (``closed by af: ...``), from its recorded source (``{"kind":
    "session", "reason": "turn 3; closed by af: ..."}``). (None, None) for another source."""
    if source.get("kind") != "session":
        return None, None
    reason = source.get("reason")
    found = _TURN.match(reason) if isinstance(reason, str) else None
    if found is None:
        return None, reason if isinstance(reason, str) else None
    return int(found.group(1)), found.group(2)


class TurnRun(Struct, frozen=True):
    """One turn of a session, as its recording's header says."""

    turn: int
    run_id: str
    path: Path
    previous: str | None
    """The run id of the turn before it (None for the first)."""
    status: str | None = None
    """How the turn ended, as the session store says it (None: read from the recordings
    alone). A turn whose process died has no ``run_end``: the store says ``interrupted``."""
    note: str | None = None
    """The store's note on how it ended, when it did not answer."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "turn": self.turn,
            "run_id": self.run_id,
            "path": str(self.path),
            "previous": self.previous,
        }
        if self.status is not None:
            out |= {"status": self.status, "note": self.note}
        return out


class SessionRuns(Struct):
    """A session's turns found in a folder, in order."""

    id: str
    folder: Path
    turns: list[TurnRun]
    """The turns linked to each other, oldest first."""
    gaps: list[str] = field(default_factory=list)
    """What is missing from the chain, in words (a turn whose recording is not here, other
    recordings that name the session but are not linked to these turns)."""

    def position(self, path: Path) -> int | None:
        """The index in :attr:`turns` of the turn recorded at ``path``."""
        want = _same(path)
        return next((i for i, t in enumerate(self.turns) if _same(t.path) == want), None)

    def turn(self, n: int) -> TurnRun | None:
        return next((t for t in self.turns if t.turn == n), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.id,
            "folder": str(self.folder),
            "turns": [t.to_json() for t in self.turns],
            "gaps": self.gaps,
        }


def _same(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def turn_header(path: Path) -> tuple[str, TurnRun] | None:
    """The session id and the turn a recording's first line names (None: it names none, or
    the file is not a recording). Reads at most :data:`HEADER_LIMIT` bytes."""
    try:
        with path.open("rb") as f:
            first = f.readline(HEADER_LIMIT)
    except OSError:
        return None
    cut = len(first) >= HEADER_LIMIT and not first.endswith(b"\n")
    if cut or b'"session"' not in first:
        return None
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("t") != "header":
        return None
    link, run_id = header.get("session"), header.get("run_id")
    if not isinstance(link, dict) or not isinstance(run_id, str):
        return None
    sid, turn, previous = link.get("id"), link.get("turn"), link.get("previous")
    if not isinstance(sid, str) or not isinstance(turn, int) or isinstance(turn, bool):
        return None
    if previous is not None and not isinstance(previous, str):
        return None
    return sid, TurnRun(turn, run_id, path, previous)


def session_runs(ref: str | Path, folder: Path | None = None) -> SessionRuns | None:
    """The session ``ref`` names, as its turns' recordings in order: ``ref`` is a session id
    (looked for in ``folder``, by default the recordings folder) or the path of any of its
    turns' recordings (looked for beside it). None when no recording there is a turn of it.

    The turns are followed by their links (each names the run before it) from the one given
    (or the session's latest), back to the first and on to the last; a folder holding turns
    of two sessions that share an id (two stores) gives the chain of the one asked about."""
    from afcore.recording import default_dir

    given: TurnRun | None = None
    if isinstance(ref, Path):
        found = turn_header(ref)
        if found is None:
            return None
        sid, given = found
        folder = ref.parent
    else:
        sid = ref
        folder = folder if folder is not None else default_dir()
    if not folder.is_dir():
        return None
    runs: dict[str, TurnRun] = {}
    for path in sorted(folder.glob("*.jsonl")):
        found = turn_header(path)
        if found is not None and found[0] == sid:
            runs.setdefault(found[1].run_id, found[1])
    if given is not None:
        runs[given.run_id] = given
    if not runs:
        return None
    start = given or max(runs.values(), key=lambda t: (t.turn, t.run_id))
    after: dict[str, list[TurnRun]] = {}
    for t in runs.values():
        if t.previous is not None:
            after.setdefault(t.previous, []).append(t)
    chain = [start]
    seen = {start.run_id}
    gaps: list[str] = []
    while chain[0].previous is not None:
        before = runs.get(chain[0].previous)
        if before is None or before.run_id in seen:
            gaps.append(
                f"turn {chain[0].turn - 1}'s recording (run {chain[0].previous}) is not in {folder}"
            )
            break
        chain.insert(0, before)
        seen.add(before.run_id)
    if chain[0].previous is None and chain[0].turn > 1:
        gaps.append(f"the recordings of turns 1 to {chain[0].turn - 1} are not in {folder}")
    while True:
        nxt = [t for t in after.get(chain[-1].run_id, []) if t.run_id not in seen]
        if not nxt:
            break
        chain.append(max(nxt, key=lambda t: t.run_id))
        seen.add(chain[-1].run_id)
    others = len(runs) - len(chain)
    if others:
        gaps.append(
            f"{others} other recording{'s' if others != 1 else ''} in {folder} name "
            f"session {sid!r} but are not linked to these turns"
        )
    return SessionRuns(sid, folder, chain, gaps)


def user_message(rec: Recording) -> str | None:
    """What the user said to start the run (its ``user_message``), None when the file does
    not hold it. Needs the file indexed."""
    from afcore.errors import RecordingError
    from afcore.recording import Commit

    lines = rec.writer_lines("user_message")
    if not lines:
        return None
    try:
        for _, record in rec.records(lines[:1]):
            if isinstance(record, Commit):
                write = next((w for w in record.writes if w.key == "user_message"), None)
                value = rec.value(write) if write is not None else None
                return value if isinstance(value, str) else None
    except (RecordingError, KeyError, ValueError):
        return None
    return None


class HistoryOrigin(Struct, frozen=True):
    """Where a message a turn continued from was written."""

    turn: int
    """The session's turn that wrote it."""
    note: str | None
    """af's note, for a message af wrote itself: a tool call it closed (``closed by af:
    ...``, in no turn's own recording), a fold's summary."""
    run: TurnRun | None
    """That turn's recording (None: not found beside this one)."""
    key: str | None
    """The message's key in that recording (None: af wrote it, or it is not there)."""

    @property
    def closed(self) -> bool:
        """af wrote it to close a tool call the turn left unfinished: no recording but the
        turns after holds it."""
        return (self.note or "").startswith(CLOSED)


def history_origin(rec: Recording, n: int, runs: SessionRuns | None = None) -> HistoryOrigin | None:
    """For message ``n`` of ``rec`` written by its ``history`` stage from a session's
    transcript: the turn that wrote it, and the key it has in that turn's recording (found
    by its content hash among the messages that turn wrote itself). None when message ``n``
    is not such a message. ``runs``: the session's turns, when already found."""
    from afcore.recording import Commit

    line = rec.message_line(n)
    record = next((r for _, r in rec.records((line,))), None) if line is not None else None
    if not isinstance(record, Commit) or record.stage != "history":
        return None
    write = next((w for w in record.writes if w.key == f"message:{n}"), None)
    if write is None or write.source is None:
        return None
    turn, note = history_source(dump(write.source, exclude_none=True))
    if turn is None:
        return None
    if runs is None and rec.header.session is not None:
        runs = session_runs(Path(rec.path))
    run = runs.turn(turn) if runs is not None else None
    origin = HistoryOrigin(turn, note, run, None)
    if run is not None and not origin.closed:
        # 1.1 writes a small message inline: its id is then that of its canonical JSON.
        origin = replace(origin, key=_find(run.path, rec.message_ref(n), n))
    return origin


def _find(path: Path, ref: str, n: int) -> str | None:
    """The key of the message stored under ``ref`` among those the run at ``path`` wrote
    itself (not its history): at position ``n`` when it is there (a transcript that grew
    one message at a time keeps its numbers), else the first found."""
    from afcore.errors import RecordingError
    from afcore.recording import open_recording

    try:
        with open_recording(path) as other:
            count = other.message_count

            def own(k: int) -> bool:
                try:
                    return other.message_ref(k) == ref and not other.message_writer(k).startswith(
                        "history#"
                    )
                except (IndexError, KeyError, ValueError):
                    return False

            if 1 <= n <= count and own(n):
                return f"message:{n}"
            return next((f"message:{k}" for k in range(1, count + 1) if own(k)), None)
    except (RecordingError, OSError):
        return None
