"""A built agent: run it, synchronously or not; each run leaves a recording."""

from __future__ import annotations

import asyncio
import copy
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Self

from afcore.agent._builder import AgentBuilder
from afcore.errors import UsageError
from afcore.injections._engine import InjectionEngine
from afcore.injections._model import ConfigureContext
from afcore.loop._conversation import Conversation, as_conversation
from afcore.loop._run import run_loop
from afcore.loop._state import RunResult
from afcore.messages import Message, SystemSegment, ToolSpec
from afcore.providers._base import Provider, StreamHandler
from afcore.recording._config import RecordingConfig
from afcore.recording._paths import SUFFIX, default_dir, new_run_id
from afcore.recording._writer import NullRecorder, Recorder, RecordObserver
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
        return agent

    last_result: RunResult | None
    """How the last finished run ended (status, answer, iterations, usage, recording)."""
    _store: SessionStore | None

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
    ) -> str:
        """Run the agent on ``message`` and return its answer.

        The run ends on an answer, at max_iterations (the last text the model wrote is
        returned, and ``last_result.status`` says ``max_iterations``), or on an error, which is
        recorded and then raised. ``observe`` sees each record as it is written (it needs
        recording on); ``stream`` sees the model's text, thinking and tool calls as they
        arrive (the recording keeps each reply whole, not its pieces). ``history``: the
        conversation so far (its messages, oldest first), which the run continues from;
        ``last_result.transcript`` is what the next one continues from.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(
                self.arun(
                    message,
                    state=state,
                    identity=identity,
                    observe=observe,
                    stream=stream,
                    history=history,
                )
            )
        raise UsageError("run() was called inside a running event loop; await arun(...) instead")

    async def arun(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
    ) -> str:
        """The async form of :meth:`run`."""
        if not isinstance(message, str):
            raise UsageError(
                f"run(...) takes the user's message as a string, got {type(message).__name__}"
            )
        result = await self.arun_result(
            message, state=state, identity=identity, observe=observe, stream=stream, history=history
        )
        return result.answer

    async def arun_result(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        identity: Any = None,
        observe: RecordObserver | None = None,
        stream: StreamHandler | None = None,
        history: History | None = None,
    ) -> RunResult:
        """Like :meth:`arun`, returning the whole :class:`RunResult`."""
        conversation = as_conversation(history)
        config = self.recording
        if config is None and observe is not None:
            raise UsageError("observe= sees the records a run writes; this agent records nothing")
        if config is None:
            rec: Recorder = NullRecorder()
            run_id = new_run_id()
        else:
            run_id = config.run_id or new_run_id(config.now())
            folder = config.dir or default_dir()
            rec = Recorder(
                folder / f"{run_id}{SUFFIX}",
                run_id=run_id,
                redactor=config.redaction.compile(self.provider.secrets()),
                clock=config.clock,
                observers=(observe,) if observe else (),
            )
        with screening(rec.redactor):
            result, raised = await run_loop(
                self,
                message,
                rec,
                run_id,
                state if state is not None else {},
                identity,
                stream,
                conversation,
            )
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
