"""A built agent: run it, synchronously or not; each run leaves a recording."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Self

from afcore.agent._builder import AgentBuilder
from afcore.errors import OutputSchemaError, RunInFlightError, RunPausedError, UsageError
from afcore.governance._pause import Paused
from afcore.governance._rules import Governance
from afcore.injections._engine import InjectionEngine
from afcore.injections._model import ConfigureContext
from afcore.loop._conversation import Conversation, as_conversation
from afcore.loop._run import run_loop
from afcore.loop._state import Replayer, RunResult
from afcore.loop._sync import run_sync
from afcore.messages import Message, SystemSegment, ToolSpec
from afcore.providers._base import Provider, StreamHandler
from afcore.recording._config import RecordingConfig
from afcore.recording._paths import SUFFIX, default_dir, new_run_id
from afcore.recording._redaction import Redaction, Redactor
from afcore.recording._writer import (
    Frames,
    NullRecorder,
    Recorder,
    RecordObserver,
    Watcher,
    Watchers,
)
from afcore.reliability._policy import Reliability
from afcore.secrets import screening
from afcore.tools._tool import Tool, ToolValidation
from afcore.window._strategies import WindowStrategy

if TYPE_CHECKING:
    from afcore.sessions import Session, SessionStore

__all__ = ["Agent"]

History = Sequence[Message] | Conversation


class Agent:
    """An agent: a provider, a model, a system prompt and tools, run by the loop.

    Make one with ``Agent.create(provider=..., model=...)``, add its parts, ``.build()``.
    """

    name: str
    source: str | None
    provider: Provider
    model: str
    system: tuple[SystemSegment, ...]
    tools: Mapping[str, Tool]
    tool_specs: tuple[ToolSpec, ...]
    max_iterations: int
    tool_arg_validation: ToolValidation
    params: Mapping[str, Any]
    recording: RecordingConfig | None
    engine: InjectionEngine
    """The agent's injections, tools and tool providers, composed into slots each iteration."""
    configure_fn: Callable[[ConfigureContext], Any] | None
    window: WindowStrategy | None
    """How the live window is kept in budget (None: every message stays)."""
    reliability: Reliability | None
    """The rules each model call's attempts follow (None: one attempt, its error raised)."""
    sessions: SessionStore | str | Path | None
    """Where the agent's sessions are kept: a store, a SQLite file or a PostgreSQL URL (None:
    ``.af/sessions.db`` beside the recordings folder, opened at the first session)."""
    governance: Governance
    """The tool and message middleware, and the answer's contract."""
    watchers: Watchers
    """The observers that see each record of each run as it is written."""
    max_tool_result_chars: int | None
    """The cap on a tool result the model reads: over it, a verbatim head and a marker."""
    repeated_call_nudge: bool
    """Whether a call landing exactly as an earlier one this turn gets one note."""
    limits_travel: bool
    """Whether the limits the tools declared are appended to the answer."""
    replayer: Replayer | None = None
    """For an agent made by ``afcore.replay.replaying``: the recording its runs replay
    (every model call answered from it). None: runs call the agent's providers."""

    @classmethod
    def create(
        cls,
        *,
        provider: Provider | None = None,
        model: str,
        max_iterations: int = 10,
        record: bool | str | Path | RecordingConfig = True,
        name: str | None = None,
        tool_arg_validation: ToolValidation = "enforce",
        params: Mapping[str, Any] | None = None,
        sessions: SessionStore | str | Path | None = None,
        max_tool_result_chars: int | None = None,
        repeated_call_nudge: bool = True,
    ) -> AgentBuilder[Self]:
        """Start building an agent.

        ``model``: the model's name; without a ``provider``, a ``provider:model`` id
        (``anthropic:claude-sonnet-4-5``, ``openai:gpt-4o``, ``ollama:llama3.1``) that
        builds the provider, its key taken from the environment.
        ``record``: True writes each run to ``$AF_RECORDINGS`` or ``recordings/``; a folder
        writes there; False records nothing; a :class:`RecordingConfig` chooses more.
        ``params`` are sent with every call (``max_tokens``, ``temperature``, ...).
        ``sessions``: where :meth:`session` keeps conversations: a ``SessionStore``, a SQLite
        file, or a ``postgresql://`` URL; by default ``.af/sessions.db`` beside the
        recordings folder.
        ``max_tool_result_chars``: cut any tool result longer than this (at least 512) to a
        verbatim head and a marker saying it is not the whole result: for tools whose author
        declared no ``result_ceiling``. ``repeated_call_nudge=False``: no note when the same
        call returns the same result again (for tools that are polled on purpose).
        """
        caller = sys._getframe(1)
        source = f"{caller.f_globals.get('__name__', '?')}:{caller.f_lineno}"
        if provider is None:
            from afcore.providers import from_model_id

            provider, model = from_model_id(model)
        return AgentBuilder(
            make=cls._from_builder,
            provider=provider,
            model=model,
            max_iterations=max_iterations,
            record=record,
            name=name,
            tool_arg_validation=tool_arg_validation,
            params=params,
            source=source,
            sessions=sessions,
            max_tool_result_chars=max_tool_result_chars,
            repeated_call_nudge=repeated_call_nudge,
        )

    @classmethod
    def _from_builder(cls, **parts: Any) -> Self:
        agent = cls.__new__(cls)
        for key, value in parts.items():
            setattr(agent, key, value)
        agent.tools = MappingProxyType(dict(parts["tools"]))
        agent.tool_specs = tuple(t.spec for t in parts["tools"].values())
        agent.params = MappingProxyType(dict(parts["params"]))
        agent.last_result = None
        agent._store = None
        agent._in_flight = None
        agent._frames = Frames()
        return agent

    def __copy__(self) -> Self:
        other = self.__class__.__new__(self.__class__)
        other.__dict__.update(self.__dict__)
        # A copy's observers are its own: attaching to it leaves this agent as it is.
        other.watchers = self.watchers.copy()
        other._in_flight = None  # a copy is another instance: it runs on its own
        other._frames = Frames()
        return other

    def attach(self, observer: Watcher) -> Callable[[], None]:
        """Have ``observer`` see each record of this agent's runs as it is written (a run
        under way too, from its next record); returns the function that detaches it."""
        if not callable(observer):
            raise UsageError(f"attach(...) takes a function of a record, got {type(observer)}")
        return self.watchers.attach(observer)

    last_result: RunResult | None
    """How the last finished run ended (status, answer, iterations, usage, recording)."""
    _store: SessionStore | None
    _in_flight: str | None
    """The run id of the run under way (None: none is)."""
    _frames: Frames
    """What frames this agent's calls in a recording, made once for its runs."""

    def _claim(self, run_id: str) -> None:
        """Mark a run of this instance under way, or refuse a second one."""
        if self._in_flight is not None:
            raise RunInFlightError(
                f"agent {self.name!r} is already running (run {self._in_flight}): one run at a "
                "time per agent instance; build one agent per caller that can reach it at once",
                run_id=self._in_flight,
            )
        self._in_flight = run_id

    def with_model(self, model_id: str) -> Agent:
        """A copy of this agent that calls the model a ``provider:model`` id names (its
        tools, injections and strategy unchanged): run a scripted agent against a real
        model, or one model's agent against another."""
        from afcore.providers import from_model_id

        provider, model = from_model_id(model_id)
        provider.check_params(self.params)
        other = copy.copy(self)
        other.provider, other.model, other.last_result = provider, model, None
        return other

    @property
    def last_recording(self) -> Path | None:
        """The path of the last finished run's recording (None when recording is off)."""
        return self.last_result.recording if self.last_result else None

    def run(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
    ) -> str | Paused:
        """Run the agent on ``message`` and return its answer, or, when a tool middleware
        link asked a person, the :class:`Paused` run (what is asked; continue it with
        :meth:`resume`).

        The run ends on an answer, at max_iterations (the last text the model wrote is
        returned, and ``last_result.status`` says ``max_iterations``), or on an error, which is
        recorded and then raised. ``observe`` sees each record as it is written (it needs
        recording on); ``stream`` sees the model's text, thinking and tool calls as they
        arrive (the recording keeps each reply whole, not its pieces). ``history``: the
        conversation so far (its messages, oldest first), which the run continues from;
        ``last_result.transcript`` is what the next one continues from.
        """
        return run_sync(
            self.arun(
                message,
                state=state,
                identity=identity,
                observe=observe,
                stream=stream,
                history=history,
            ),
            "run",
        )

    async def arun(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
    ) -> str | Paused:
        """The async form of :meth:`run`."""
        if not isinstance(message, str):
            raise UsageError(
                f"run(...) takes the user's message as a string, got {type(message).__name__}"
            )
        result = await self.arun_result(
            message, state=state, identity=identity, observe=observe, stream=stream, history=history
        )
        return result.paused if result.paused is not None else result.answer

    async def arun_result(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
        typed: bool = False,
        redaction: Redactor | None = None,
    ) -> RunResult:
        """Like :meth:`arun`, returning the whole :class:`RunResult`. ``typed``: the caller
        wants the typed value (``result.output.value``): an answer that fails the output
        schema goes through the fallback tiers. ``redaction``: the redaction of a calling
        run (``ctx.redaction`` in a tool), handed on: it adds to this agent's own policy.

        One run at a time per agent instance: another, while this one is under way, raises
        :class:`RunInFlightError`."""
        result, raised = await self._execute(
            message,
            state=state,
            identity=identity,
            observe=observe,
            stream=stream,
            history=history,
            typed=typed,
            redaction=redaction,
        )
        self.last_result = result
        if raised is not None:
            raise raised
        return result

    async def _execute(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
        typed: bool = False,
        recording: RecordingConfig | None = None,
        redaction: Redactor | None = None,
    ) -> tuple[RunResult, BaseException | None]:
        """One run, whatever happens: how it ended, and what to raise for it. A flow runs
        its agents this way (the same agent may run in two branches at once, so the result
        is not left in ``last_result``), with ``recording`` saying where the run is written
        (in place of the agent's own choice)."""
        conversation = as_conversation(history)
        config = recording if recording is not None else self.recording
        started = None
        # The loop reads the agent's recording config (its clocks): the one in effect. A
        # flow's step runs a copy, which is an instance of its own (one run at a time each).
        runner = self
        if recording is not None and recording is not self.recording:
            runner = copy.copy(self)
            runner.recording = recording
        if runner._in_flight is not None:
            runner._claim("")  # refused before anything is opened
        if config is None and observe is not None:
            raise UsageError("observe= sees the records a run writes; this agent records nothing")
        if config is None and self.watchers.observers:
            # Watched but not recorded: the records go to the observers only.
            run_id = new_run_id()
            rec: Recorder = Recorder(
                None,
                run_id=run_id,
                redactor=_policy(Redaction(), redaction).compile(self.provider.secrets()),
                watchers=self.watchers,
            )
        elif config is None:
            rec = NullRecorder()
            run_id = new_run_id()
        else:
            # One reading of the wall clock names the run and says when it started.
            started = config.now()
            run_id = config.run_id or new_run_id(started)
            folder = config.dir or default_dir()
            name = f"{run_id}{SUFFIX}"
            fresh = config.run_id is None
            rec = Recorder(
                folder / name,
                run_id=run_id,
                redactor=_policy(config.redaction, redaction).compile(self.provider.secrets()),
                clock=config.clock,
                observers=(observe,) if observe else (),
                watchers=self.watchers,
                frames=runner._frames,
                origin=config.origin,
                fresh=fresh,
                # A generated id is one part: the file is that name in the folder (whose
                # Path keeps its string once asked for it).
                split=(str(folder), name) if fresh else None,
            )
        runner._claim(run_id)
        try:
            with screening(rec.redactor):
                result, raised = await run_loop(
                    runner,
                    message,
                    rec,
                    run_id,
                    state if state is not None else {},
                    identity,
                    stream,
                    conversation,
                    typed=typed,
                    started=started,
                )
        finally:
            runner._in_flight = None
        return result, raised

    # -- typed answers ------------------------------------------------------------------

    def run_typed(
        self, message: str, *, state: dict[str, Any] | None = None, identity: Any = None
    ) -> Any:
        """Run the agent and return its answer as the output schema types it (a model
        instance, or the JSON a JSON Schema describes); with ``output_fallback(...)``, the
        fallback's or the canned value when the answer fails. Raises
        :class:`OutputSchemaError` when there is no valid value, :class:`MessageDeniedError`
        when message middleware withheld the answer, :class:`RunPausedError` (carrying the
        pause) when the run waits for a person."""
        return run_sync(self.arun_typed(message, state=state, identity=identity), "run_typed")

    async def arun_typed(
        self, message: str, *, state: dict[str, Any] | None = None, identity: Any = None
    ) -> Any:
        """The async form of :meth:`run_typed`."""
        self._typed_check("run_typed")
        result = await self.arun_result(message, state=state, identity=identity, typed=True)
        return self._typed_value(result)

    def _typed_check(self, door: str) -> None:
        if self.governance.contract is None:
            raise UsageError(f"{door}() needs output_schema(...): this agent's answer has no type")

    def _typed_value(self, result: RunResult) -> Any:
        if result.paused is not None:
            raise RunPausedError(result.paused)
        output = result.output
        if output is not None and output.tier is not None:
            return output.value
        contract = self.governance.contract
        assert contract is not None
        errors = output.errors if output is not None else []
        raw = output.raw if output is not None else result.answer
        if result.status != "answer" and not errors:
            errors = [{"path": "$", "message": f"the run ended {result.status}, with no answer"}]
        said = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:3])
        raise OutputSchemaError(
            f"the answer does not hold to {contract.name}: {said}",
            errors=errors,
            raw=raw,
            checks=output.checks if output is not None else 0,
        )

    # -- paused runs --------------------------------------------------------------------

    def resume(
        self,
        paused: Paused | str | Path,
        *,
        approve: bool,
        why: str | None = None,
        by: str | None = None,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
    ) -> str | Paused:
        """Continue a paused run (a :class:`Paused`, or its recording's path) with a
        person's answer: ``approve=True`` runs the call that was asked about (its chain goes
        on after the link that asked), ``False`` has the model read that a person declined
        it, with ``why``. ``by``: who decided (default: the user running this process). The
        continuation is appended to the run's recording. Returns the answer, or the run
        paused again."""
        return run_sync(
            self.aresume(
                paused,
                approve=approve,
                why=why,
                by=by,
                state=state,
                identity=identity,
                observe=observe,
                stream=stream,
            ),
            "resume",
        )

    async def aresume(
        self,
        paused: Paused | str | Path,
        *,
        approve: bool,
        why: str | None = None,
        by: str | None = None,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
    ) -> str | Paused:
        """The async form of :meth:`resume`."""
        result = await self.aresume_result(
            paused,
            approve=approve,
            why=why,
            by=by,
            state=state,
            identity=identity,
            observe=observe,
            stream=stream,
        )
        return result.paused if result.paused is not None else result.answer

    def resume_typed(
        self, paused: Paused | str | Path, *, approve: bool, why: str | None = None
    ) -> Any:
        """:meth:`resume` for a typed run: the value :meth:`run_typed` would return."""
        self._typed_check("resume_typed")

        async def go() -> Any:
            result = await self.aresume_result(paused, approve=approve, why=why, typed=True)
            return self._typed_value(result)

        return run_sync(go(), "resume_typed")

    async def aresume_result(
        self,
        paused: Paused | str | Path,
        *,
        approve: bool,
        why: str | None = None,
        by: str | None = None,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        typed: bool = False,
    ) -> RunResult:
        """Like :meth:`aresume`, returning the whole :class:`RunResult`."""
        from afcore.loop._resume import resume_loop

        if not isinstance(approve, bool):
            raise UsageError("resume(approve=...) takes True or False")
        path = paused.recording if isinstance(paused, Paused) else Path(paused)
        self._claim(path.stem)
        try:
            result, raised = await resume_loop(
                self,
                path,
                approve=approve,
                why=why,
                by=by,
                state=state,
                identity=identity,
                stream=stream,
                observe=observe,
                typed=typed,
            )
        finally:
            self._in_flight = None
        self.last_result = result
        if raised is not None:
            raise raised
        return result

    def session(self, session_id: str) -> Session:
        """The conversation kept under ``session_id`` in the agent's session store: its
        ``send(message)`` runs one turn on the stored transcript and stores it back. A
        session never seen starts empty. See :mod:`afcore.sessions`."""
        from afcore.sessions import Session, open_store

        if self._store is None:
            self._store = open_store(self.sessions, recordings=self.recording)
        return Session(self, self._store, session_id)

    def __repr__(self) -> str:
        return f"<Agent {self.name!r} model={self.model!r} tools={list(self.tools)}>"


def _policy(own: Redaction, handed: Redactor | None) -> Redaction:
    return own if handed is None else handed.handed_on(own)
