"""A session: one conversation kept in a store, continued one turn at a time by any process.

``agent.session("ticket-4711").send("Where is my order?")`` posts the message to the
session's inbox and, when no turn is running, runs one: the inbox becomes the user message,
the turn runs on the stored transcript, and each reply and tool result is stored as it
comes. A message sent while a turn runs is queued and delivered at the end of that turn by
the process running it. See :mod:`afcore.sessions._turns` for the state changes.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from afcore.errors import TurnLostError, UsageError
from afcore.injections._engine import InjectionEngine
from afcore.loop._conversation import Conversation
from afcore.loop._state import RunResult
from afcore.loop._sync import run_sync
from afcore.messages import Message, Source, SystemSegment, UserMessage
from afcore.providers._base import StreamHandler
from afcore.recording._config import RecordingConfig
from afcore.recording._paths import SUFFIX, default_dir, new_run_id
from afcore.recording._writer import RecordObserver
from afcore.sessions import _turns
from afcore.sessions._caller import CALLER_ID, Principal, caller_injection
from afcore.sessions._ids import check_session_id
from afcore.sessions._owner import alive, new_owner, release
from afcore.sessions._store import (
    InboxItem,
    SessionInfo,
    SessionStore,
    StoredMessage,
    TurnInfo,
)
from afcore.sessions._turns import Claim
from afcore.tools._tool import Tool

__all__ = ["SendResult", "SendStatus", "Session", "SessionAgent"]


class SessionAgent(Protocol):
    """What a session asks of the agent whose turns it runs (an :class:`~afcore.Agent`)."""

    name: str
    system: tuple[SystemSegment, ...]
    tools: Mapping[str, Tool]
    engine: InjectionEngine
    recording: RecordingConfig | None
    last_result: RunResult | None

    async def arun_result(
        self,
        message: str,
        *,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: Conversation | None = None,
    ) -> RunResult: ...


SendStatus = Literal["answer", "max_iterations", "interrupted", "error", "queued", "running"]


@dataclass(frozen=True)
class SendResult:
    """What became of a message sent to a session."""

    status: SendStatus
    """``answer`` (or ``max_iterations``): the turn that took the message ended, and
    ``answer`` is its reply; ``queued``: a turn was running, and the message waits in the
    inbox for the end of it; ``interrupted``: the turn that took the message was
    interrupted before it answered; ``running``: the turn that took it has not ended yet
    (from :meth:`Session.wait` with a timeout); ``error``: that turn stopped on an error
    (from :meth:`Session.wait`; ``send`` raises it)."""
    message_id: str
    """The message's id in the session's inbox."""
    answer: str = ""
    turn: int | None = None
    """The turn that took the message."""
    run_id: str | None = None
    """The run id of that turn's recording."""
    recording: Path | None = None
    note: str | None = None
    """Why the turn ended as it did, when it did not answer."""


@dataclass(frozen=True)
class _Seen:
    """Who sees a send's turns as they run: the model's words, the records written."""

    stream: StreamHandler | None = None
    observe: RecordObserver | None = None


@dataclass
class _Turn:
    """What is known of a turn this process runs, as it runs."""

    claim: Claim
    kept: list[Message] = field(default_factory=list)
    interrupted: bool = False
    lost: bool = False


class Session:
    """A conversation in a session store, continued by :meth:`send`.

    Made by ``agent.session(session_id)``. Any number of handles, in any number of
    processes, may name the same session: its turns still run one at a time.
    """

    def __init__(self, agent: SessionAgent, store: SessionStore, session_id: str) -> None:
        self.id = check_session_id(session_id)
        if any(i.id == CALLER_ID for i in agent.engine.injections):
            raise UsageError(
                f"the agent has an injection with the id {CALLER_ID!r}, the id a session gives "
                "the caller section of its turns; rename it"
            )
        self.agent = agent
        self.store = store
        self._cache: tuple[int, tuple[StoredMessage, ...]] | None = None
        """The transcript at a version this handle read or wrote."""
        self._lock = threading.Lock()
        self._sources: dict[tuple[int, str | None], Source] = {}

    def __repr__(self) -> str:
        return f"<Session {self.id!r} of {self.agent.name!r} in {self.store.name}>"

    # -- sending -------------------------------------------------------------------------

    def send(
        self,
        message: str,
        *,
        interrupt: bool = False,
        principal: Principal | None = None,
        stream: StreamHandler | None = None,
        observe: RecordObserver | None = None,
    ) -> SendResult:
        """Send ``message`` to the session.

        When no turn is running, a turn runs now on the stored transcript, and the result
        carries its answer. When one is running, the message is queued (status
        ``queued``): the process running that turn delivers it at the turn's end, together
        with whatever else queued, as the next turn. ``send`` returns once the turns it
        ran are over, the ones that messages queued during them included.

        ``interrupt=True``: cancel the running turn at its next checkpoint (a running tool
        sees the cancellation; its call is closed in the transcript by an error result
        saying it did not finish), then run the next turn, which starts with this message,
        and return its answer. ``principal``: who sent the message; the turn's system
        prompt then says who is calling (:class:`Principal`). ``stream`` sees the model's
        words as they come, and ``observe`` each record of the turns' recordings as it is
        written, as in ``Agent.run`` (for every turn this call runs). A turn that stops on
        an error raises it, like ``Agent.run``, once what it stored is safe.
        """
        return run_sync(
            self.asend(
                message,
                interrupt=interrupt,
                principal=principal,
                stream=stream,
                observe=observe,
            ),
            "send",
        )

    async def asend(
        self,
        message: str,
        *,
        interrupt: bool = False,
        principal: Principal | None = None,
        stream: StreamHandler | None = None,
        observe: RecordObserver | None = None,
    ) -> SendResult:
        """The async form of :meth:`send`."""
        if not isinstance(message, str):
            raise UsageError(
                f"send(...) takes the message as a string, got {type(message).__name__}"
            )
        if observe is not None and self.agent.recording is None:
            raise UsageError("observe= sees the records a turn writes; this agent records nothing")
        if principal is not None and not isinstance(principal, Principal):
            raise UsageError(
                f"send(principal=...) takes a Principal, got {type(principal).__name__}"
            )
        owner = new_owner()
        try:
            with self.store.transaction(self.id) as tx:
                row = _turns.open_session(tx, self.agent.name)
                item = _turns.post(tx, row, message, principal, bool(interrupt))
                claim = None
                if _turns.runnable(tx, row, alive):
                    claim = _turns.claim(
                        tx,
                        row,
                        owner=owner,
                        lease=self.store.lease,
                        name_run=self._name_run,
                        known=self._known(),
                    )
                tx.save(row)
            seen = _Seen(stream, observe)
            if claim is not None:
                return await self._run_from(claim, item.id, seen)
            if not interrupt:
                return SendResult(status="queued", message_id=item.id)
            return await self._await(item.id, owner, seen, timeout=None)
        finally:
            release(owner)

    def wait(self, message_id: str, *, timeout: float | None = None) -> SendResult:
        """What became of the message ``message_id``: waits until the turn that takes it has
        ended (at most ``timeout`` seconds; then its status is ``queued`` or ``running``).
        A message left in the inbox because the process that would have delivered it died
        is delivered here, by running its turn."""
        return run_sync(self.await_(message_id, timeout=timeout), "wait", "await_")

    async def await_(self, message_id: str, *, timeout: float | None = None) -> SendResult:
        """The async form of :meth:`wait`."""
        owner = new_owner()
        try:
            return await self._await(message_id, owner, _Seen(), timeout=timeout)
        finally:
            release(owner)

    async def _await(
        self, message_id: str, owner: str, seen: _Seen, timeout: float | None
    ) -> SendResult:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            claim = None
            with self.store.transaction(self.id) as tx:
                row = tx.session()
                item = tx.item(message_id) if row is not None else None
                if row is None or item is None:
                    raise UsageError(f"session {self.id!r} has no message {message_id!r}")
                turn = tx.turn(item.turn) if item.turn is not None else None
                if turn is not None and turn.status != "running":
                    return _result(message_id, turn)
                mine = None
                if _turns.runnable(tx, row, alive):
                    turn = tx.turn(item.turn) if item.turn is not None else None
                    if turn is not None and turn.status != "running":
                        mine = _result(message_id, turn)  # it died with the turn that took it
                    # Whoever finds the session idle delivers its inbox.
                    claim = _turns.claim(
                        tx,
                        row,
                        owner=owner,
                        lease=self.store.lease,
                        name_run=self._name_run,
                        known=self._known(),
                    )
                    tx.save(row)
            if claim is not None:
                ran = await self._run_from(claim, message_id, seen)
                return mine or ran
            if mine is not None:
                return mine
            if deadline is not None and loop.time() >= deadline:
                return SendResult(
                    status="running" if turn is not None else "queued",
                    message_id=message_id,
                    turn=item.turn,
                )
            await asyncio.sleep(self.store.poll)

    async def _run_from(self, claim: Claim, message_id: str, seen: _Seen) -> SendResult:
        """Run ``claim``'s turn, then each turn that messages queued meanwhile make; the
        result is the first turn's (the one that took ``message_id``)."""
        first: SendResult | None = None
        failure: BaseException | None = None
        next_claim: Claim | None = claim
        while next_claim is not None:
            result, error, next_claim = await self._turn(next_claim, message_id, seen)
            if first is None:
                first, failure = result, error
        assert first is not None
        if failure is not None:
            raise failure
        return first

    # -- one turn ------------------------------------------------------------------------

    async def _turn(
        self, claim: Claim, message_id: str, seen: _Seen
    ) -> tuple[SendResult, BaseException | None, Claim | None]:
        """Run one turn; return its result, the error it stopped on, and the next turn to
        run (messages that queued while it ran)."""
        history = self._history(claim)
        state = _Turn(claim)
        agent = self._agent_for(claim)
        lease = self.store.lease
        progress = _turns.Progress(claim.length, claim.version)

        def keep(message: Message) -> None:
            _turns.keep(self.store, claim, progress, [message])
            state.kept.append(message)

        conversation = Conversation(
            history=tuple(m.message for m in history),
            sources=tuple(self._source(m) for m in history),
            keep=keep,
            session={"id": self.id, "turn": claim.turn, "previous": claim.previous},
        )
        before = (*history, StoredMessage(_user(claim), claim.turn))
        with self._lock:
            self._cache = (claim.version, before)
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            agent.arun_result(
                claim.text,
                history=conversation,
                identity=claim.principal,
                stream=seen.stream,
                observe=seen.observe,
            )
        )

        def on_interrupt() -> None:
            state.interrupted = True
            loop.call_soon_threadsafe(task.cancel)

        def on_lost() -> None:
            state.lost = True
            loop.call_soon_threadsafe(task.cancel)

        watcher = self.store.watcher
        watcher.watch(self.id, claim.owner, on_interrupt=on_interrupt, on_lost=on_lost)
        result: RunResult | None = None
        error: BaseException | None = None
        cancelled = False
        try:
            result = await task
        except asyncio.CancelledError as e:
            if state.lost:
                error = TurnLostError(
                    f"turn {claim.turn} of session {self.id!r} was taken over by another "
                    "process while it ran (its lease ran out)",
                    session=self.id,
                )
            elif not state.interrupted:
                cancelled, error = True, e  # cancelled from outside: keep state, re-raise
        except (Exception, KeyboardInterrupt) as e:
            error = e
        finally:
            watcher.unwatch(self.id, claim.owner)
        if isinstance(error, TurnLostError):
            raise error  # another process owns the session now: nothing here to store
        if result is not None:
            status: Literal["answer", "max_iterations", "error", "interrupted"] = (
                "answer" if result.status == "answer" else "max_iterations"
            )
            note = None
        elif error is None:
            status, note = "interrupted", _turns.INTERRUPTED
        elif cancelled or isinstance(error, KeyboardInterrupt):
            status, note = "interrupted", "the turn was cancelled in its process"
        else:
            status, note = "error", f"{type(error).__name__}: {error}"[:2000]
        answer = result.answer if result is not None else ""
        folded = self._folded(claim, history, state, result)
        with self.store.transaction(self.id) as tx:
            row = tx.session()
            assert row is not None
            nxt, held = _turns.finish(
                tx,
                row,
                claim,
                status=status,
                answer=answer,
                note=note,
                transcript=folded,
                progress=progress,
                drain=status != "interrupted",
                lease=lease,
                name_run=self._name_run,
                known=progress.version,
            )
        if held is not None:  # what this handle knows is the transcript: the next turn's
            with self._lock:
                self._cache = (
                    held,
                    tuple(folded)
                    if folded is not None
                    else (*before, *(StoredMessage(m, claim.turn) for m in state.kept)),
                )
        if cancelled or isinstance(error, KeyboardInterrupt):
            assert error is not None
            raise error
        sent = SendResult(
            status=status,
            message_id=message_id,
            answer=answer,
            turn=claim.turn,
            run_id=claim.run_id,
            recording=Path(claim.recording) if claim.recording else None,
            note=note,
        )
        return sent, (error if status == "error" else None), nxt

    def _agent_for(self, claim: Claim) -> SessionAgent:
        """The agent as this turn runs it: its recording named for the turn, and the caller
        section among its injections when the turn's messages named a caller."""
        agent = copy.copy(self.agent)
        agent.last_result = None
        if agent.recording is not None and claim.run_id is not None:
            agent.recording = replace(agent.recording, run_id=claim.run_id)
        if claim.caller is not None:
            engine = agent.engine
            agent.engine = InjectionEngine(
                base=agent.system,
                tools=list(agent.tools.values()),
                injections=[*engine.injections, caller_injection(claim.caller)],
                providers=engine.providers,
            )
        return agent

    def _name_run(self, turn: int) -> tuple[str | None, str | None]:
        config = self.agent.recording
        if config is None:
            return None, None
        run_id = f"{config.run_id}-{turn}" if config.run_id else new_run_id(config.now())
        return run_id, str((config.dir or default_dir()).absolute() / f"{run_id}{SUFFIX}")

    def _source(self, stored: StoredMessage) -> Source:
        key = (stored.turn, stored.note)
        source = self._sources.get(key)
        if source is None:
            reason = f"turn {stored.turn}" + (f"; {stored.note}" if stored.note else "")
            source = self._sources[key] = Source(kind="session", id=self.id, reason=reason)
        return source

    # -- the transcript, cached between turns --------------------------------------------

    def _known(self) -> int | None:
        with self._lock:
            return self._cache[0] if self._cache is not None else None

    def _history(self, claim: Claim) -> tuple[StoredMessage, ...]:
        if claim.history is not None:
            return claim.history
        with self._lock:
            if self._cache is not None and self._cache[0] == claim.base:
                return self._cache[1]
        # Another thread's turn moved this handle's cache on: read what the claim saw.
        with self.store.transaction(self.id, write=False) as tx:
            return tuple(tx.transcript()[:-1])

    def _folded(
        self,
        claim: Claim,
        history: tuple[StoredMessage, ...],
        turn: _Turn,
        result: RunResult | None,
    ) -> list[StoredMessage] | None:
        """The transcript a window strategy left, when it is not the one kept message by
        message (None: it is)."""
        if result is None:
            return None
        user = _user(claim)
        if result.transcript == (*(m.message for m in history), user, *turn.kept):
            return None
        known = {id(m.message): m for m in history}
        ours = {id(m) for m in turn.kept}
        out: list[StoredMessage] = []
        for m in result.transcript:
            stored = known.get(id(m))
            if stored is None:
                ours_ = id(m) in ours or m == user
                note = None if ours_ else "a summary written by the window strategy"
                stored = StoredMessage(m, claim.turn, note)
            out.append(stored)
        return out

    # -- reading ---------------------------------------------------------------------------

    def info(self) -> SessionInfo | None:
        """The session at a glance (None: the store has never seen it)."""
        return self.store.info(self.id)

    def transcript(self) -> list[Message]:
        """The conversation as the next turn continues from it."""
        with self.store.transaction(self.id, write=False) as tx:
            return [m.message for m in tx.transcript()]

    def history(self) -> list[StoredMessage]:
        """The transcript as :meth:`transcript` gives it, each message with the turn that
        wrote it and, for a message af wrote itself (a tool call it closed, a fold's
        summary), a note saying what it is."""
        with self.store.transaction(self.id, write=False) as tx:
            return tx.transcript()

    def turns(self) -> list[TurnInfo]:
        """The session's turns, in order."""
        with self.store.transaction(self.id, write=False) as tx:
            return tx.turns()

    def inbox(self) -> list[InboxItem]:
        """Messages waiting for the next turn, in order."""
        with self.store.transaction(self.id, write=False) as tx:
            return tx.pending()


def _user(claim: Claim) -> Message:
    return UserMessage(claim.text)


def _result(message_id: str, turn: TurnInfo) -> SendResult:
    status = turn.status if turn.status != "running" else "running"
    return SendResult(
        status=status,
        message_id=message_id,
        answer=turn.answer,
        turn=turn.n,
        run_id=turn.run_id,
        recording=Path(turn.recording) if turn.recording else None,
        note=turn.note,
    )
