"""What a session store keeps, and the one interface both stores implement.

Per session a store keeps:

- the **transcript**: the messages of its turns in af's message model, each as the JSON of
  its ``to_json`` (lossless: ``message_from_json`` gives the very message back), with the
  turn that wrote it and a note for messages af wrote itself (an unfinished tool call's
  closing result, a fold's summary);
- the **turn state**: idle, or running with which process (its *owner*), since when, and a
  lease the owner renews while it runs; a turn whose owner is gone loses it;
- the **inbox**: messages sent while a turn runs, in order, each with an id and the turn
  that consumed it (each is consumed exactly once);
- its **turns** in order: status, the run id and path of each turn's recording, the answer;
- when it was created and last active.

A store offers transactions on one session (:meth:`SessionStore.transaction`): each state
change of a session is one transaction, serialized with every other change of that session
whichever process makes it. The semantics (who runs a turn, what a dead turn leaves) live
above, in :mod:`afcore.sessions._turns`, written once for every store.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from afcore.messages import Message, message_from_json
from afcore.sessions._caller import Principal
from afcore.sessions._owner import alive
from afcore.sessions._watch import Watcher

__all__ = [
    "InboxItem",
    "SessionInfo",
    "SessionRow",
    "SessionStore",
    "StoreTx",
    "StoredMessage",
    "TurnInfo",
    "TurnStatus",
    "dump_message",
    "load_message",
]

_WATCHER_LOCK = threading.Lock()

SCHEMA_VERSION = 1
"""The version of the tables a store writes; a store refuses a newer one."""

TurnStatus = Literal["running", "answer", "max_iterations", "error", "interrupted"]


def dump_message(message: Message) -> str:
    return orjson.dumps(message.to_json()).decode()


def load_message(text: str) -> Message:
    return message_from_json(orjson.loads(text))


@dataclass
class SessionRow:
    """A session's record, as read in a transaction and written back with ``save``."""

    id: str
    agent: str
    """The agent that owns the conversation: the name it was opened with, for its life."""
    created: float
    last_activity: float
    state: Literal["idle", "running"] = "idle"
    owner: str | None = None
    """The process running the turn: ``host/pid/start/token``."""
    since: float | None = None
    """When the running turn started."""
    lease_until: float | None = None
    interrupt: bool = False
    """A message asked to interrupt the running turn."""
    turns: int = 0
    """Turns started."""
    messages: int = 0
    """The transcript's length."""
    version: int = 0
    """Changes with every change of the transcript (a reader's cache key)."""
    inbox_seq: int = 0
    """The last inbox position given."""
    open_calls: list[tuple[str, str]] = field(default_factory=list)
    """Tool calls in the transcript that no result answers yet: (id, tool name)."""
    last_run: str | None = None
    """The run id of the last turn's recording."""


@dataclass(frozen=True)
class StoredMessage:
    """A message of a transcript, with the turn that wrote it."""

    message: Message
    turn: int
    note: str | None = None
    """For a message af wrote itself: what it is."""


@dataclass(frozen=True)
class InboxItem:
    """A message sent to a session."""

    id: str
    seq: int
    """Its position in the session's inbox, from 1."""
    text: str
    principal: Principal | None
    posted: float
    """When it was sent (seconds since the epoch, on the store's clock)."""
    interrupt: bool = False
    """It asked to interrupt the turn running when it came."""
    turn: int | None = None
    """The turn that consumed it (None: still waiting in the inbox)."""


@dataclass(frozen=True)
class TurnInfo:
    """One turn of a session."""

    n: int
    """The turn's number, from 1."""
    status: TurnStatus
    owner: str
    """The process that ran it."""
    started: float
    ended: float | None
    run_id: str | None
    """The run id of its recording (None when the agent records nothing)."""
    recording: str | None
    """The path its recording was written to."""
    messages: tuple[str, ...]
    """The ids of the inbox messages it answered, in order."""
    answer: str = ""
    note: str | None = None
    """Why it ended as it did, when it did not answer (the error, what interrupted it)."""


@dataclass(frozen=True)
class SessionInfo:
    """A session at a glance."""

    id: str
    agent: str
    state: Literal["idle", "running"]
    owner: str | None
    """The process running its turn, when one runs."""
    since: float | None
    """When the running turn started."""
    turns: int
    inbox: int
    """Messages waiting in the inbox."""
    messages: int
    """The transcript's length."""
    created: float
    last_activity: float
    stopped: bool = False
    """Its state says running, but the process running the turn is gone (it ran on this
    machine) or its lease ran out: the next message closes that turn as interrupted."""


class StoreTx(ABC):
    """One transaction on one session. ``now`` is the store's clock (the database server's,
    for PostgreSQL, so that processes on several machines agree)."""

    session_id: str

    @property
    @abstractmethod
    def now(self) -> float:
        """The store's clock, read once per transaction."""

    @abstractmethod
    def session(self) -> SessionRow | None:
        """The session's record (None: never seen), locked until the transaction ends."""

    @abstractmethod
    def create(self, agent: str) -> SessionRow:
        """Create the session's record, or lock and return it when another process just
        created it."""

    @abstractmethod
    def save(self, row: SessionRow) -> None: ...

    @abstractmethod
    def transcript(self) -> list[StoredMessage]: ...

    @abstractmethod
    def append(self, start: int, messages: Sequence[StoredMessage]) -> None:
        """Add messages to the transcript, numbered from ``start``."""

    @abstractmethod
    def replace(self, messages: Sequence[StoredMessage]) -> None:
        """Make ``messages`` the whole transcript."""

    @abstractmethod
    def post(self, item: InboxItem) -> None: ...

    @abstractmethod
    def pending(self) -> list[InboxItem]:
        """The inbox's unconsumed messages, in order."""

    @abstractmethod
    def item(self, item_id: str) -> InboxItem | None: ...

    @abstractmethod
    def consume(self, ids: Sequence[str], turn: int) -> None: ...

    @abstractmethod
    def add_turn(self, turn: TurnInfo) -> None: ...

    @abstractmethod
    def end_turn(
        self, n: int, *, status: TurnStatus, ended: float, answer: str, note: str | None
    ) -> None: ...

    @abstractmethod
    def turn(self, n: int) -> TurnInfo | None: ...

    @abstractmethod
    def turns(self) -> list[TurnInfo]: ...


class SessionStore(ABC):
    """Where sessions are kept: :class:`~afcore.sessions.SQLiteStore` (one machine) or
    :class:`~afcore.sessions.PostgresStore` (several processes on several machines).

    ``lease``: seconds a running turn holds its session without being renewed; a process
    renews the leases of its turns every third of it, so a turn whose process died is taken
    over within ``lease`` (at once when the process ran on the same host). ``poll``: how
    often a process looks for interrupts of the turns it runs, and a caller waiting for a
    turn looks at it.
    """

    name: str
    """What the store is, for messages: a path, or a URL without its password."""
    lease: float
    poll: float
    _watcher: Watcher | None = None

    @property
    def watcher(self) -> Watcher:
        """The thread that renews this process's leases and passes interrupts on."""
        with _WATCHER_LOCK:
            if self._watcher is None:
                self._watcher = Watcher(self)
            return self._watcher

    def _stop_watcher(self) -> None:
        with _WATCHER_LOCK:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()

    @abstractmethod
    def transaction(
        self, session_id: str, *, write: bool = True
    ) -> AbstractContextManager[StoreTx]:
        """A transaction on one session: committed when the block ends, rolled back when it
        raises. ``write=False`` reads a consistent snapshot and locks nothing."""

    @abstractmethod
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
        """Add a running turn's messages to the transcript, numbered from ``start``, and set
        its open tool calls, if turn ``turn`` of ``owner`` still holds the session (its lease
        extended). Returns the transcript's new version; None when the turn lost the session.
        The hot path of a turn: one short transaction that reads nothing else."""

    @abstractmethod
    def sessions(self) -> list[SessionInfo]:
        """Every session in the store, the most recently active first."""

    @abstractmethod
    def poll_turns(self, turns: Sequence[tuple[str, str]]) -> dict[str, tuple[bool, bool]]:
        """For each (session, owner) running here: (interrupt asked, still owned)."""

    @abstractmethod
    def renew(self, turns: Sequence[tuple[str, str]]) -> None:
        """Extend the lease of each (session, owner) that still owns its turn."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's connections (and stop its watcher)."""

    def info(self, session_id: str) -> SessionInfo | None:
        with self.transaction(session_id, write=False) as tx:
            row = tx.session()
            return None if row is None else _info(row, len(tx.pending()), tx.now)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _info(row: SessionRow, inbox: int, now: float) -> SessionInfo:
    running = row.state == "running"
    expired = row.lease_until is not None and row.lease_until <= now
    return SessionInfo(
        id=row.id,
        agent=row.agent,
        state=row.state,
        owner=row.owner,
        since=row.since,
        turns=row.turns,
        inbox=inbox,
        messages=row.messages,
        created=row.created,
        last_activity=row.last_activity,
        stopped=running and (expired or not alive(row.owner)),
    )


def iter_chunks(items: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# Both stores select a table's columns in the order its dataclass declares them.

SESSION_COLUMNS = (
    "id, agent, created, last_activity, state, owner, since, lease_until, interrupt, turns, "
    "messages, version, inbox_seq, open_calls, last_run"
)
TURN_COLUMNS = "n, status, owner, started, ended, run_id, recording, messages, answer, note"
ITEM_COLUMNS = "id, seq, body, principal, posted, interrupt, turn"


def session_row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(
        id=r[0],
        agent=r[1],
        created=r[2],
        last_activity=r[3],
        state=r[4],
        owner=r[5],
        since=r[6],
        lease_until=r[7],
        interrupt=bool(r[8]),
        turns=r[9],
        messages=r[10],
        version=r[11],
        inbox_seq=r[12],
        open_calls=[(a, b) for a, b in orjson.loads(r[13])],
        last_run=r[14],
    )


def turn_info(r: Sequence[Any]) -> TurnInfo:
    return TurnInfo(
        n=r[0],
        status=r[1],
        owner=r[2],
        started=r[3],
        ended=r[4],
        run_id=r[5],
        recording=r[6],
        messages=tuple(orjson.loads(r[7])),
        answer=r[8],
        note=r[9],
    )


def inbox_item(r: Sequence[Any]) -> InboxItem:
    return InboxItem(
        id=r[0],
        seq=r[1],
        text=r[2],
        principal=Principal.from_json(orjson.loads(r[3])) if r[3] is not None else None,
        posted=r[4],
        interrupt=bool(r[5]),
        turn=r[6],
    )


class SqlTx(StoreTx):
    """The statements the SQLite and PostgreSQL stores share, written with SQLite's ``?``
    for a parameter; a store whose driver marks them otherwise says so in :attr:`mark`."""

    mark = "?"
    conn: Any
    session_id: str

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql if self.mark == "?" else sql.replace("?", self.mark), params)

    def save(self, row: SessionRow) -> None:
        self._execute(
            "UPDATE af_sessions SET last_activity = ?, state = ?, owner = ?, since = ?, "
            "lease_until = ?, interrupt = ?, turns = ?, messages = ?, version = ?, "
            "inbox_seq = ?, open_calls = ?, last_run = ? WHERE id = ?",
            (*session_values(row)[3:], row.id),
        )

    def transcript(self) -> list[StoredMessage]:
        return [
            StoredMessage(load_message(body), turn, note)
            for turn, note, body in self._execute(
                "SELECT turn, note, body FROM af_session_messages WHERE session = ? ORDER BY n",
                (self.session_id,),
            )
        ]

    def replace(self, messages: Sequence[StoredMessage]) -> None:
        self._execute("DELETE FROM af_session_messages WHERE session = ?", (self.session_id,))
        self.append(1, messages)

    def post(self, item: InboxItem) -> None:
        self._execute(
            f"INSERT INTO af_session_inbox (session, {ITEM_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.session_id,
                item.id,
                item.seq,
                item.text,
                orjson.dumps(item.principal.to_json()).decode() if item.principal else None,
                item.posted,
                item.interrupt,
                item.turn,
            ),
        )

    def pending(self) -> list[InboxItem]:
        return [
            inbox_item(r)
            for r in self._execute(
                f"SELECT {ITEM_COLUMNS} FROM af_session_inbox WHERE session = ? AND turn IS NULL "
                "ORDER BY seq",
                (self.session_id,),
            )
        ]

    def item(self, item_id: str) -> InboxItem | None:
        r = self._execute(
            f"SELECT {ITEM_COLUMNS} FROM af_session_inbox WHERE session = ? AND id = ?",
            (self.session_id, item_id),
        ).fetchone()
        return None if r is None else inbox_item(r)

    def add_turn(self, turn: TurnInfo) -> None:
        self._execute(
            f"INSERT INTO af_session_turns (session, {TURN_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.session_id,
                turn.n,
                turn.status,
                turn.owner,
                turn.started,
                turn.ended,
                turn.run_id,
                turn.recording,
                orjson.dumps(list(turn.messages)).decode(),
                turn.answer,
                turn.note,
            ),
        )

    def end_turn(
        self, n: int, *, status: TurnStatus, ended: float, answer: str, note: str | None
    ) -> None:
        self._execute(
            "UPDATE af_session_turns SET status = ?, ended = ?, answer = ?, note = ? "
            "WHERE session = ? AND n = ?",
            (status, ended, answer, note, self.session_id, n),
        )

    def turn(self, n: int) -> TurnInfo | None:
        r = self._execute(
            f"SELECT {TURN_COLUMNS} FROM af_session_turns WHERE session = ? AND n = ?",
            (self.session_id, n),
        ).fetchone()
        return None if r is None else turn_info(r)

    def turns(self) -> list[TurnInfo]:
        return [
            turn_info(r)
            for r in self._execute(
                f"SELECT {TURN_COLUMNS} FROM af_session_turns WHERE session = ? ORDER BY n",
                (self.session_id,),
            )
        ]


def session_values(row: SessionRow) -> tuple[Any, ...]:
    """A session's row as both stores write it, in :data:`SESSION_COLUMNS`' order."""
    return (
        row.id,
        row.agent,
        row.created,
        row.last_activity,
        row.state,
        row.owner,
        row.since,
        row.lease_until,
        row.interrupt,
        row.turns,
        row.messages,
        row.version,
        row.inbox_seq,
        orjson.dumps(row.open_calls).decode(),
        row.last_run,
    )
