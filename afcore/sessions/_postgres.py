"""Sessions in PostgreSQL: for processes on several machines sharing conversations.

Every state change of a session is one transaction that first locks the session's row
(``SELECT ... FOR UPDATE``), so changes of one session are serialized across processes and
machines while different sessions proceed in parallel. Leases are read on the server's
clock, never a client's, so machines whose clocks disagree still agree on whose turn has
run out. Messages are stored as the text of their JSON (``jsonb`` would reorder keys and
refuse a NUL character that a model or a tool may well produce).

Needs ``psycopg`` (3) and ``psycopg_pool``: ``pip install "af[postgres]"``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from afcore.errors import SessionError, UsageError
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
    session_row,
    session_values,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresStore"]

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS af_schema (version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS af_sessions (
        id text PRIMARY KEY,
        agent text NOT NULL,
        created double precision NOT NULL,
        last_activity double precision NOT NULL,
        state text NOT NULL,
        owner text,
        since double precision,
        lease_until double precision,
        interrupt boolean NOT NULL,
        turns integer NOT NULL,
        messages integer NOT NULL,
        version bigint NOT NULL,
        inbox_seq integer NOT NULL,
        open_calls text NOT NULL,
        last_run text
    )""",
    """CREATE TABLE IF NOT EXISTS af_session_messages (
        session text NOT NULL,
        n integer NOT NULL,
        turn integer NOT NULL,
        note text,
        body text NOT NULL,
        PRIMARY KEY (session, n)
    )""",
    """CREATE TABLE IF NOT EXISTS af_session_inbox (
        session text NOT NULL,
        seq integer NOT NULL,
        id text NOT NULL UNIQUE,
        body text NOT NULL,
        principal text,
        posted double precision NOT NULL,
        interrupt boolean NOT NULL,
        turn integer,
        PRIMARY KEY (session, seq)
    )""",
    """CREATE INDEX IF NOT EXISTS af_session_inbox_pending ON af_session_inbox (session, seq)
        WHERE turn IS NULL""",
    """CREATE TABLE IF NOT EXISTS af_session_turns (
        session text NOT NULL,
        n integer NOT NULL,
        status text NOT NULL,
        owner text NOT NULL,
        started double precision NOT NULL,
        ended double precision,
        run_id text,
        recording text,
        messages text NOT NULL,
        answer text NOT NULL,
        note text,
        PRIMARY KEY (session, n)
    )""",
]
_LOCK_SCHEMA = 0x61665F73  # an advisory lock key: two processes creating the tables take turns

_NOW = "extract(epoch from clock_timestamp())::float8"


def safe_url(url: str) -> str:
    """``url`` without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://?"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class PostgresStore(SessionStore):
    """Sessions in the PostgreSQL database at ``url`` (``postgresql://user@host/db``); the
    tables (``af_sessions`` and ``af_session_*``) are created at first use.

    ``max_connections``: the pool's size; a process uses one per transaction in flight.
    """

    def __init__(
        self,
        url: str,
        *,
        lease: float = 30.0,
        poll: float = 0.05,
        max_connections: int = 16,
        connect_timeout: float = 10.0,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
            raise UsageError(f"a PostgreSQL store takes a postgresql:// URL, got {url!r}")
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise UsageError(
                'sessions in PostgreSQL need psycopg 3 and psycopg_pool: pip install "af[postgres]"'
            ) from None
        self.url = url
        self.name = safe_url(url)
        self.lease = lease
        self.poll = poll
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _failed(self, e: Exception, session: str | None = None) -> SessionError:
        return SessionError(
            f"the session store {self.name} failed: {type(e).__name__}: {e}",
            session=session,
            store=self.name,
        )

    def _pool_(self) -> ConnectionPool[Any]:
        with self._lock:
            if self._closed:
                raise SessionError(f"the session store {self.name} is closed")
            if self._pool is None:
                import psycopg
                import psycopg_pool
                from psycopg_pool import ConnectionPool

                pool: ConnectionPool[Any] = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self.max_connections,
                    # Autocommit: a single statement is its own transaction (one round
                    # trip); several go in an explicit one (transaction()).
                    kwargs={
                        "connect_timeout": max(1, int(self.connect_timeout)),
                        "autocommit": True,
                    },
                    timeout=max(self.connect_timeout, 30.0),
                    open=False,
                    name="af-sessions",
                )
                try:
                    pool.open(wait=True, timeout=self.connect_timeout)
                    with pool.connection() as conn, conn.transaction():
                        self._migrate(conn)
                except SessionError:
                    pool.close()
                    raise
                except (psycopg.Error, psycopg_pool.PoolTimeout) as e:
                    pool.close()
                    raise self._failed(e) from None
                self._pool = pool
            return self._pool

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_SCHEMA,))
        for statement in _SCHEMA:
            conn.execute(statement)
        row = conn.execute("SELECT max(version) FROM af_schema").fetchone()
        version = row[0] if row else None
        if version is None:
            conn.execute("INSERT INTO af_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        elif version > SCHEMA_VERSION:
            raise SessionError(
                f"the session store {self.name} was written by a newer af (schema {version}; "
                f"this af reads up to {SCHEMA_VERSION})"
            )

    @contextmanager
    def transaction(self, session_id: str, *, write: bool = True) -> Iterator[StoreTx]:
        import psycopg

        pool = self._pool_()
        try:
            with pool.connection() as conn, conn.transaction():
                if not write:
                    conn.execute("SET TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ")
                yield _Tx(conn, session_id, lock=write)
        except psycopg.Error as e:
            raise self._failed(e, session_id) from e

    def sessions(self) -> list[SessionInfo]:
        import psycopg

        try:
            with self._pool_().connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ")
                rows = conn.execute(
                    f"SELECT {SESSION_COLUMNS} FROM af_sessions ORDER BY last_activity DESC"
                ).fetchall()
                depth = dict(
                    conn.execute(
                        "SELECT session, count(*) FROM af_session_inbox WHERE turn IS NULL "
                        "GROUP BY session"
                    ).fetchall()
                )
                clock = conn.execute(f"SELECT {_NOW}").fetchone()
        except psycopg.Error as e:
            raise self._failed(e) from e
        now = float(clock[0]) if clock is not None else 0.0
        return [_info(r, depth.get(r.id, 0), now) for r in map(session_row, rows)]

    def poll_turns(self, turns: Sequence[tuple[str, str]]) -> dict[str, tuple[bool, bool]]:
        import psycopg

        ours = dict(turns)
        out: dict[str, tuple[bool, bool]] = {}
        try:
            with self._pool_().connection() as conn:
                for sid, owner, state, interrupt in conn.execute(
                    "SELECT id, owner, state, interrupt FROM af_sessions WHERE id = ANY(%s)",
                    (list(ours),),
                ):
                    owned = state == "running" and owner == ours[sid]
                    out[sid] = (bool(interrupt) and owned, owned)
        except psycopg.Error as e:
            raise self._failed(e) from e
        for sid in ours:
            out.setdefault(sid, (False, False))
        return out

    def renew(self, turns: Sequence[tuple[str, str]]) -> None:
        import psycopg

        if not turns:
            return
        try:
            with self._pool_().connection() as conn, conn.transaction():
                conn.cursor().executemany(
                    f"UPDATE af_sessions SET lease_until = {_NOW} + %s "
                    "WHERE id = %s AND owner = %s AND state = 'running'",
                    [(self.lease, sid, owner) for sid, owner in turns],
                )
        except psycopg.Error as e:
            raise self._failed(e) from e

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
        import psycopg

        # One statement, so one round trip: the update that checks the turn still holds
        # the session, and the insert of its messages only when it does.
        values = ", ".join(
            ["(%s::text, %s::integer, %s::integer, %s::text, %s::text)"] * len(messages)
        )
        params: list[Any] = [
            start + len(messages) - 1,
            orjson.dumps(list(open_calls)).decode(),
            self.lease,
            session_id,
            owner,
            turn,
        ]
        for i, m in enumerate(messages):
            params += [session_id, start + i, m.turn, m.note, dump_message(m.message)]
        try:
            with self._pool_().connection() as conn:
                held = conn.execute(
                    "WITH held AS ("
                    f"UPDATE af_sessions SET messages = %s, version = version + 1, "
                    f"open_calls = %s, lease_until = {_NOW} + %s, last_activity = {_NOW} "
                    "WHERE id = %s AND owner = %s AND turns = %s AND state = 'running' "
                    "RETURNING version), "
                    "added AS (INSERT INTO af_session_messages (session, n, turn, note, body) "
                    "SELECT v.session, v.n, v.turn, v.note, v.body FROM held, "
                    f"(VALUES {values}) AS v (session, n, turn, note, body)) "
                    "SELECT version FROM held",
                    params,
                ).fetchone()
        except psycopg.Error as e:
            raise self._failed(e, session_id) from e
        return None if held is None else int(held[0])

    def close(self) -> None:
        self._stop_watcher()
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class _Tx(SqlTx):
    mark = "%s"

    def __init__(self, conn: psycopg.Connection[Any], session_id: str, *, lock: bool) -> None:
        self.conn = conn
        self.session_id = session_id
        self._now: float | None = None
        self._lock = " FOR UPDATE" if lock else ""

    @property
    def now(self) -> float:
        if self._now is None:
            row = self.conn.execute(f"SELECT {_NOW}").fetchone()
            assert row is not None
            self._now = float(row[0])
        return self._now

    def session(self) -> SessionRow | None:
        # The clock is read with the row, once the row is ours: one round trip, not two.
        r = self.conn.execute(
            f"SELECT {SESSION_COLUMNS}, {_NOW} FROM af_sessions WHERE id = %s{self._lock}",
            (self.session_id,),
        ).fetchone()
        if r is None:
            return None
        if self._now is None:
            self._now = float(r[-1])
        return session_row(r)

    def create(self, agent: str) -> SessionRow:
        row = SessionRow(id=self.session_id, agent=agent, created=self.now, last_activity=self.now)
        self.conn.execute(
            f"INSERT INTO af_sessions ({SESSION_COLUMNS}) VALUES ({', '.join(['%s'] * 15)}) "
            "ON CONFLICT (id) DO NOTHING",
            session_values(row),
        )
        created = self.session()  # ours, or the one another process created just now
        assert created is not None
        return created

    def append(self, start: int, messages: Sequence[StoredMessage]) -> None:
        rows = [
            (self.session_id, start + i, m.turn, m.note, dump_message(m.message))
            for i, m in enumerate(messages)
        ]
        sql = (
            "INSERT INTO af_session_messages (session, n, turn, note, body) "
            "VALUES (%s, %s, %s, %s, %s)"
        )
        if len(rows) == 1:
            self.conn.execute(sql, rows[0])
        else:
            self.conn.cursor().executemany(sql, rows)

    def consume(self, ids: Sequence[str], turn: int) -> None:
        self.conn.execute(
            "UPDATE af_session_inbox SET turn = %s WHERE session = %s AND id = ANY(%s) "
            "AND turn IS NULL",
            (turn, self.session_id, list(ids)),
        )
