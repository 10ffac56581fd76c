"""The state changes of a session, each applied inside one store transaction.

    post     a message joins the inbox (and, on an idle session, its sender claims the turn)
    claim    the inbox's messages become the next turn's user message; the session runs
    keep     a reply or a tool result of the running turn joins the transcript
    finish   the turn ends: its open tool calls closed, how it ended noted, the session idle,
             or straight on to the next turn when messages queued meanwhile

Whoever leaves a session idle looks at its inbox in the same transaction, so a message
sent while a turn runs is always delivered at that turn's end, by the process that ran it,
whichever process sent it. Two exceptions leave the inbox to the next message: a turn that
was interrupted (its interrupter is waiting to run the next one), and a turn whose process
died (the next message finds it dead, closes it, and takes the inbox with it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from afcore.errors import TurnLostError, UsageError
from afcore.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from afcore.sessions._caller import Principal, attribution, caller_text, new_mark
from afcore.sessions._store import (
    InboxItem,
    SessionRow,
    SessionStore,
    StoredMessage,
    StoreTx,
    TurnInfo,
    TurnStatus,
)

__all__ = [
    "Claim",
    "Progress",
    "PROCESS_STOPPED",
    "claim",
    "finish",
    "keep",
    "open_session",
    "post",
    "runnable",
]

PROCESS_STOPPED = "the process running the turn stopped"
INTERRUPTED = "the turn was interrupted by a new message"


@dataclass(frozen=True)
class Claim:
    """A turn this process may now run."""

    session: str
    turn: int
    owner: str
    text: str
    """The turn's user message: one message as it was sent, or several in order, each after
    a line saying which it is and who sent it, which starts with the turn's mark."""
    items: tuple[InboxItem, ...]
    principal: Principal | None
    """The principal every message of the turn was sent with (None: none, or not one)."""
    caller: str | None
    """The caller section of the turn's system prompt (None: no message named a caller)."""
    history: tuple[StoredMessage, ...] | None
    """The transcript before the user message; None when it is the one at ``base`` that
    the claimer said it holds."""
    base: int
    """The transcript's version before the user message joined it."""
    version: int
    """... and after."""
    length: int
    """The transcript's length with the user message."""
    run_id: str | None
    recording: str | None
    previous: str | None
    """The run id of the session's previous turn."""


def open_session(tx: StoreTx, agent: str) -> SessionRow:
    """The session's record, created on first use; refused to another agent than its own."""
    row = tx.session() or tx.create(agent)
    if row.agent != agent:
        raise UsageError(
            f"session {row.id!r} is a conversation with the agent {row.agent!r}; the agent "
            f"{agent!r} cannot continue it (an agent's name names its sessions)"
        )
    return row


def post(
    tx: StoreTx, row: SessionRow, text: str, principal: Principal | None, interrupt: bool
) -> InboxItem:
    row.inbox_seq += 1
    item = InboxItem(
        id=secrets.token_hex(8),
        seq=row.inbox_seq,
        text=text,
        principal=principal,
        posted=tx.now,
        interrupt=interrupt,
    )
    tx.post(item)
    row.last_activity = tx.now
    if interrupt and row.state == "running":
        row.interrupt = True
    return item


def runnable(tx: StoreTx, row: SessionRow, alive: Callable[[str | None], bool]) -> bool:
    """Whether no live turn holds the session. A turn whose process is gone, or whose lease
    ran out, is closed here as interrupted, what it stored kept."""
    if row.state == "idle":
        return True
    if row.lease_until is not None and row.lease_until > tx.now and alive(row.owner):
        return False
    _close(tx, row, "interrupted", note=PROCESS_STOPPED, why=PROCESS_STOPPED)
    return True


def claim(
    tx: StoreTx,
    row: SessionRow,
    *,
    owner: str,
    lease: float,
    name_run: Callable[[int], tuple[str | None, str | None]],
    known: int | None,
) -> Claim | None:
    """Start the next turn with every message in the inbox (None: the inbox is empty).
    ``known``: the transcript version the claimer holds, which is then not read again."""
    items = tx.pending()
    if not items:
        return None
    n = row.turns + 1
    text, principal, caller = deliver(items)
    history = None if known == row.version else tuple(tx.transcript())
    base = row.version
    previous = row.last_run
    ids = tuple(i.id for i in items)
    tx.consume(ids, n)
    run_id, recording = name_run(n)
    tx.add_turn(
        TurnInfo(
            n=n,
            status="running",
            owner=owner,
            started=tx.now,
            ended=None,
            run_id=run_id,
            recording=recording,
            messages=ids,
        )
    )
    tx.append(row.messages + 1, [StoredMessage(UserMessage(text), n)])
    row.messages += 1
    row.version += 1
    row.turns = n
    row.state = "running"
    row.owner = owner
    row.since = tx.now
    row.lease_until = tx.now + lease
    row.interrupt = False
    row.last_activity = tx.now
    row.last_run = run_id
    return Claim(
        session=row.id,
        turn=n,
        owner=owner,
        text=text,
        items=tuple(items),
        principal=principal,
        caller=caller,
        history=history,
        base=base,
        version=row.version,
        length=row.messages,
        run_id=run_id,
        recording=recording,
        previous=previous,
    )


def deliver(items: Sequence[InboxItem]) -> tuple[str, Principal | None, str | None]:
    """The user message, the common principal and the caller section for ``items``."""
    principals = [i.principal for i in items]
    common = principals[0] if len(set(principals)) == 1 else None
    if len(items) == 1:
        return items[0].text, common, caller_text(principals)
    # What the senders wrote, and their subjects: the mark is in none of it.
    sent = [i.text for i in items] + [p.subject for p in principals if p and p.subject]
    mark = new_mark(sent)
    count = len(items)
    parts = [
        f"{attribution(mark, k, count, item.principal)}\n{item.text}"
        for k, item in enumerate(items, start=1)
    ]
    return "\n\n".join(parts), common, caller_text(principals, mark)


@dataclass
class Progress:
    """What the process running a turn knows of its transcript (it alone adds to it)."""

    length: int
    version: int
    """The transcript's version after this process's last change."""
    open_calls: list[tuple[str, str]] = field(default_factory=list)
    held: list[Message] = field(default_factory=list)
    """A final answer, stored by ``finish`` with the end of the turn."""


def keep(
    store: SessionStore, turn: Claim, progress: Progress, messages: Sequence[Message]
) -> int | None:
    """Add the running turn's new messages to the transcript; return its new version.

    A reply that asks for no tool is the turn's answer: it is held and stored by
    :func:`finish`, in the transaction that ends the turn, rather than in one of its own
    just before it (a turn killed in between has stored its steps, not its answer)."""
    if len(messages) == 1 and isinstance(messages[0], AssistantMessage):
        if not messages[0].tool_calls:
            progress.held.append(messages[0])
            return None
    # A reply held that was not the answer after all (the vendor paused its turn, and the
    # loop went on) is stored first, in its place.
    messages, progress.held = [*progress.held, *messages], []
    open_calls = list(progress.open_calls)
    for m in messages:
        if isinstance(m, AssistantMessage):
            open_calls += [(c.id, c.name) for c in m.tool_calls]
        elif isinstance(m, ToolResultMessage):
            open_calls = [c for c in open_calls if c[0] != m.tool_call_id]
    version = store.append_turn(
        turn.session,
        owner=turn.owner,
        turn=turn.turn,
        start=progress.length + 1,
        messages=[StoredMessage(m, turn.turn) for m in messages],
        open_calls=open_calls,
    )
    if version is None:
        raise _lost(turn.session, turn.turn)
    progress.length += len(messages)
    progress.version = version
    progress.open_calls = open_calls
    return version


def finish(
    tx: StoreTx,
    row: SessionRow,
    turn: Claim,
    *,
    status: TurnStatus,
    answer: str = "",
    note: str | None = None,
    transcript: Sequence[StoredMessage] | None = None,
    progress: Progress,
    drain: bool,
    lease: float,
    name_run: Callable[[int], tuple[str | None, str | None]],
    known: int | None,
) -> tuple[Claim | None, int | None]:
    """End the running turn; with ``drain``, start the next one when messages are waiting.
    ``transcript``: what the conversation continues from when it is not what was kept (a
    window strategy folded it). ``known``: the transcript version the caller holds (the
    one its last change made).

    Returns the next turn, and the transcript's version when it is exactly what the caller
    holds plus what it kept (None when af closed tool calls, or the transcript changed
    elsewhere)."""
    _check_owner(row, turn)
    before = row.version
    if transcript is not None:
        tx.replace(transcript)
        row.messages = len(transcript)
        row.version += 1
    elif progress.held:
        tx.append(row.messages + 1, [StoredMessage(m, turn.turn) for m in progress.held])
        row.messages += len(progress.held)
        row.version += 1
    closing = bool(row.open_calls)
    why = {"interrupted": note or INTERRUPTED, "error": "the turn stopped on an error"}
    _close(tx, row, status, answer=answer, note=note, why=why.get(status, "the turn ended"))
    held = row.version if known == before and not closing else None
    nxt = (
        claim(tx, row, owner=turn.owner, lease=lease, name_run=name_run, known=held)
        if drain
        else None
    )
    tx.save(row)
    return nxt, held


def _check_owner(row: SessionRow, turn: Claim) -> None:
    if row.state != "running" or row.owner != turn.owner or row.turns != turn.turn:
        raise _lost(row.id, turn.turn)


def _lost(session_id: str, turn: int) -> TurnLostError:
    return TurnLostError(
        f"turn {turn} of session {session_id!r} was taken over by another process: its lease "
        "ran out before this process renewed it",
        session=session_id,
    )


def _close(
    tx: StoreTx,
    row: SessionRow,
    status: TurnStatus,
    *,
    answer: str = "",
    note: str | None,
    why: str,
) -> None:
    """End the running turn: answer every tool call it left open with an error result saying
    it did not finish, note how it ended, and make the session idle."""
    if row.open_calls:
        closing = [
            StoredMessage(
                ToolResultMessage(
                    tool_call_id=call_id,
                    name=name,
                    content=(
                        f"The tool call did not finish: {why} before it returned. Whether it "
                        "did anything before it stopped is unknown."
                    ),
                    is_error=True,
                ),
                row.turns,
                f"closed by af: {why}",
            )
            for call_id, name in row.open_calls
        ]
        tx.append(row.messages + 1, closing)
        row.messages += len(closing)
        row.version += 1
        row.open_calls = []
    tx.end_turn(row.turns, status=status, ended=tx.now, answer=answer, note=note)
    row.state = "idle"
    row.owner = None
    row.since = None
    row.lease_until = None
    row.interrupt = False
    row.last_activity = tx.now
