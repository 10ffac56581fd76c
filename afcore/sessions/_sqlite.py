"""Sessions in one SQLite file: the default store, for the processes of one machine.

The file is in WAL mode (readers never wait for the writer), with a busy timeout (a writer
waits for another's transaction instead of failing), and every state change of a session is
one ``BEGIN IMMEDIATE`` transaction, so two processes changing one session take turns.
Connections are pooled, one in use per transaction.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson

from afcore.errors import SessionError
from afcore.sessions._store import (
    SCHEMA_VERSION,
    SESSION_COLUMNS,
    SessionInfo,
    SessionRow,
    SessionStore,
    SqlTx,
    StoredMessage,
    StoreTx,
    _info,
    dump_message,
    iter_chunks,
    session_row,
    session_values,
)

__all__ = ["SQLiteStore"]

_SCHEMA = """
CREATE TABLE af_sessions (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    created REAL NOT NULL,
    last_activity REAL NOT NULL,
    state TEXT NOT NULL,
    owner TEXT,
    since REAL,
    lease_until REAL,
    interrupt INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    messages INTEGER NOT NULL,
    version INTEGER NOT NULL,
    inbox_seq INTEGER NOT NULL,
    open_calls TEXT NOT NULL,
    last_run TEXT
);
CREATE TABLE af_session_messages (
    session TEXT NOT NULL,
    n INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    note TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (session, n)
) WITHOUT ROWID;
CREATE TABLE af_session_inbox (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL UNIQUE,
    body TEXT NOT NULL,
    principal TEXT,
    posted REAL NOT NULL,
    interrupt INTEGER NOT NULL,
    turn INTEGER,
    PRIMARY KEY (session, seq)
);
CREATE INDEX af_session_inbox_pending ON af_session_inbox (session, seq) WHERE turn IS NULL;
CREATE TABLE af_session_turns (
    session TEXT NOT NULL,
    n INTEGER NOT NULL,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL,
    run_id TEXT,
    recording TEXT,
    messages TEXT NOT NULL,
    answer TEXT NOT NULL,
    note TEXT,
    PRIMARY KEY (session, n)
) WITHOUT ROWID;
"""


_IDLE_CONNECTIONS = 8


class SQLiteStore(SessionStore):
    """Sessions in a SQLite file at ``path`` (its folder is created when missing).

    ``busy_timeout``: seconds a transaction waits for another process's to end before
    failing with :class:`SessionError`. ``clock``: the wall clock leases are read on.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        lease: float = 30.0,
        poll: float = 0.05,
        busy_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self.lease = lease
        self.poll = poll
        self.busy_timeout = busy_timeout
        self.clock = clock
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,  # transactions are begun and ended here, explicitly
                check_same_thread=False,  # pooled: used by one thread at a time
            )
        except (OSError, sqlite3.Error) as e:
            raise SessionError(f"cannot open the session store {self.path}: {e}") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self._wal(conn)
            # In WAL mode a commit is durable once the WAL is synced at checkpoints: a
            # killed process loses nothing, a power cut at most the last transactions.
            conn.execute("PRAGMA synchronous = NORMAL")
            if not self._ready:
                self._migrate(conn)
        except sqlite3.Error as e:
            conn.close()
            raise SessionError(f"cannot open the session store {self.path}: {e}") from None
        return conn

    def _wal(self, conn: sqlite3.Connection) -> None:
        """WAL mode, which the file keeps once set. Reading or setting the mode does not wait
        for the busy timeout when another process holds the file (setting it needs the file
        to itself), so a process opening the file while others write tries again until the
        timeout."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                raise SessionError(
                    f"the session store {self.path} was written by a newer af (schema "
                    f"{version}; this af reads up to {SCHEMA_VERSION})"
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._ready = True

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise SessionError(f"the session store {self.path} is closed")
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _give(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _IDLE_CONNECTIONS:
                self._idle.append(conn)
                return
        conn.close()

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # an error inside a statement: leave nothing open
                conn.execute("ROLLBACK")
            self._give(conn)

    # -- the interface -------------------------------------------------------------------

    @contextmanager
    def transaction(self, session_id: str, *, write: bool = True) -> Iterator[StoreTx]:
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                tx = _Tx(conn, session_id, self.clock())
                try:
                    yield tx
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise SessionError(
                    f"the session store {self.path} failed: {e}",
                    session=session_id,
                    store=self.name,
                ) from e

    def sessions(self) -> list[SessionInfo]:
        with self._connection() as conn:
            try:
                conn.execute("BEGIN")
                rows = conn.execute(
                    f"SELECT {SESSION_COLUMNS} FROM af_sessions ORDER BY last_activity DESC"
                ).fetchall()
                depth = dict(
                    conn.execute(
                        "SELECT session, count(*) FROM af_session_inbox WHERE turn IS NULL "
                        "GROUP BY session"
                    ).fetchall()
                )
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise SessionError(f"the session store {self.path} failed: {e}") from e
        now = self.clock()
        return [_info(r, depth.get(r.id, 0), now) for r in map(session_row, rows)]

    def poll_turns(self, turns: Sequence[tuple[str, str]]) -> dict[str, tuple[bool, bool]]:
        ours = dict(turns)
        out: dict[str, tuple[bool, bool]] = {}
        with self._connection() as conn:
            try:
                for chunk in iter_chunks(list(ours)):
                    marks = ",".join("?" * len(chunk))
                    for sid, owner, state, interrupt in conn.execute(
                        "SELECT id, owner, state, interrupt FROM af_sessions "
                        f"WHERE id IN ({marks})",
                        list(chunk),
                    ):
                        owned = state == "running" and owner == ours[sid]
                        out[sid] = (bool(interrupt) and owned, owned)
            except sqlite3.Error as e:
                raise SessionError(f"the session store {self.path} failed: {e}") from e
        for sid in ours:
            out.setdefault(sid, (False, False))
        return out

    def renew(self, turns: Sequence[tuple[str, str]]) -> None:
        if not turns:
            return
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                until = self.clock() + self.lease
                conn.executemany(
                    "UPDATE af_sessions SET lease_until = ? WHERE id = ? AND owner = ? "
                    "AND state = 'running'",
                    [(until, sid, owner) for sid, owner in turns],
                )
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise SessionError(f"the session store {self.path} failed: {e}") from e

    def append_turn(
        self,
        session_id: str,
        *,
        owner: str,
        turn: int,
        start: int,
        messages: Sequence[StoredMessage],
        open_calls: Sequence[tuple[str, str]],
    ) -> int | None:
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                now = self.clock()
                held = conn.execute(
                    "UPDATE af_sessions SET messages = ?, version = version + 1, open_calls = ?, "
                    "lease_until = ?, last_activity = ? WHERE id = ? AND owner = ? AND turns = ? "
                    "AND state = 'running' RETURNING version",
                    (
                        start + len(messages) - 1,
                        orjson.dumps(list(open_calls)).decode(),
                        now + self.lease,
                        now,
                        session_id,
                        owner,
                        turn,
                    ),
                ).fetchone()
                if held is not None:
                    _Tx(conn, session_id, now).append(start, messages)
                conn.execute("COMMIT")
            except sqlite3.Error as e:
                raise SessionError(
                    f"the session store {self.path} failed: {e}",
                    session=session_id,
                    store=self.name,
                ) from e
        return None if held is None else int(held[0])

    def close(self) -> None:
        self._stop_watcher()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _Tx(SqlTx):
    def __init__(self, conn: sqlite3.Connection, session_id: str, now: float) -> None:
        self.conn = conn
        self.session_id = session_id
        self._now = now

    @property
    def now(self) -> float:
        return self._now

    def session(self) -> SessionRow | None:
        r = self.conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM af_sessions WHERE id = ?", (self.session_id,)
        ).fetchone()
        return None if r is None else session_row(r)

    def create(self, agent: str) -> SessionRow:
        row = SessionRow(id=self.session_id, agent=agent, created=self.now, last_activity=self.now)
        self.conn.execute(
            f"INSERT INTO af_sessions ({SESSION_COLUMNS}) VALUES ({','.join('?' * 15)})",
            session_values(row),
        )
        return row

    def append(self, start: int, messages: Sequence[StoredMessage]) -> None:
        self.conn.executemany(
            "INSERT INTO af_session_messages (session, n, turn, note, body) VALUES (?, ?, ?, ?, ?)",
            [
                (self.session_id, start + i, m.turn, m.note, dump_message(m.message))
                for i, m in enumerate(messages)
            ],
        )

    def consume(self, ids: Sequence[str], turn: int) -> None:
        self.conn.executemany(
            "UPDATE af_session_inbox SET turn = ? WHERE session = ? AND id = ? AND turn IS NULL",
            [(turn, self.session_id, i) for i in ids],
        )
