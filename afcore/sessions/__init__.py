"""Sessions: conversations that outlive the process.

A session is a conversation kept in a store under an id, not a process: any process may
continue it, one turn at a time, and a process that dies mid-turn leaves it resumable::

    agent = Agent.create(provider=..., model=..., sessions="postgresql://db/af").build()
    chat = agent.session("ticket-4711")
    chat.send("Where is my order?").answer
    chat.send("Cancel it", interrupt=True, principal=Principal(subject="u_42"))

Stores: :class:`SQLiteStore` (the default, ``.af/sessions.db`` beside the recordings
folder) and :class:`PostgresStore` (``postgresql://...``, for several machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from afcore.errors import UsageError
from afcore.recording._config import RecordingConfig
from afcore.recording._paths import default_dir
from afcore.sessions._caller import Principal
from afcore.sessions._ids import SESSION_ID, check_session_id
from afcore.sessions._postgres import PostgresStore
from afcore.sessions._session import SendResult, SendStatus, Session
from afcore.sessions._sqlite import SQLiteStore
from afcore.sessions._store import (
    InboxItem,
    SessionInfo,
    SessionStore,
    StoredMessage,
    TurnInfo,
    TurnStatus,
)

__all__ = [
    "SESSION_ID",
    "InboxItem",
    "PostgresStore",
    "Principal",
    "SQLiteStore",
    "SendResult",
    "SendStatus",
    "Session",
    "SessionInfo",
    "SessionStore",
    "StoredMessage",
    "TurnInfo",
    "TurnStatus",
    "check_session_id",
    "check_store_spec",
    "default_store_path",
    "open_store",
]

DEFAULT_FILE = Path(".af") / "sessions.db"


def check_store_spec(spec: Any) -> SessionStore | str | Path:
    """``sessions=`` as given to ``Agent.create``: a store, a ``postgresql://`` URL, or the
    path of a SQLite file. Checked when the agent is built; opened at its first session."""
    if isinstance(spec, SessionStore):
        return spec
    if isinstance(spec, Path):
        return spec
    if isinstance(spec, str) and spec:
        if "://" in spec and not spec.startswith(("postgresql://", "postgres://")):
            raise UsageError(
                f"sessions= takes a postgresql:// URL, a SQLite file's path or a store; "
                f"{spec.split('://')[0]}:// is not a store af knows"
            )
        return spec
    raise UsageError(
        "Agent.create(sessions=...) takes a SessionStore, a postgresql:// URL or the path of "
        f"a SQLite file, got {spec!r}"
    )


def default_store_path(recordings: RecordingConfig | None = None) -> Path:
    """``.af/sessions.db`` beside the recordings folder (the folder itself when the agent
    records nothing: ``$AF_RECORDINGS`` or ``recordings/``)."""
    folder = recordings.dir if recordings is not None and recordings.dir else default_dir()
    return folder.absolute().parent / DEFAULT_FILE


def open_store(
    spec: SessionStore | str | Path | None, *, recordings: RecordingConfig | None = None
) -> SessionStore:
    """The store ``spec`` names (None: the default SQLite file)."""
    if spec is None:
        return SQLiteStore(default_store_path(recordings))
    spec = check_store_spec(spec)
    if isinstance(spec, SessionStore):
        return spec
    if isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://")):
        return PostgresStore(spec)
    return SQLiteStore(Path(spec))
