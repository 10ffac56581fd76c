"""What one run carries from stage to stage, what it reads of the agent it runs, and how it
ends: the ground the loop's stages (``_run``, ``_attempts``, ``_window``) share."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from afcore.errors import ProviderError
from afcore.governance._pause import Paused
from afcore.governance._rules import Governance
from afcore.injections._engine import Composition, Decision, InjectionEngine, TurnState
from afcore.injections._model import ConfigureContext
from afcore.loop._conversation import Conversation
from afcore.loop._sources import Sources
from afcore.messages import (
    Message,
    Request,
    Source,
    SystemSegment,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from afcore.providers._base import Provider, StreamHandler
from afcore.recording._config import RecordingConfig
from afcore.recording._models import (
    AttemptInfo,
    Line,
    MiddlewareDecision,
    ReplayLink,
    ResultStatus,
    ToolOutcome,
    ToolStatus,
)
from afcore.recording._writer import Recorder, Watchers
from afcore.reliability._policy import Reliability
from afcore.tools._assume import Assumed
from afcore.tools._reading import AnswerCoverage, Limits
from afcore.tools._repeats import RepeatedCalls
from afcore.tools._tool import Tool, ToolValidation
from afcore.window._live import LiveWindowState
from afcore.window._strategies import WindowStrategy
from afcore.window._turns import LiveMessage

__all__ = [
    "AgentParts",
    "Output",
    "Replayer",
    "Served",
    "RunResult",
    "RunState",
    "RunStatus",
    "last_value",
    "provider_error",
]

RunStatus = Literal["answer", "error", "max_iterations", "interrupted", "paused"]


@dataclass(frozen=True)
class Served:
    """A tool call's recorded outcome, served by a replay in place of running the tool."""

    result: ToolResultMessage
    """The result as the model read it (after the result chain, for an agent with one)."""
    status: ToolStatus
    ruled: MiddlewareDecision | None = None
    """What the result chain decided then (it does not walk a served result again)."""
    outcome: ToolOutcome | None = None
    """The recorded tool commit's outcome: the result's status and what became of it (a
    ceiling, a cut, the nudge, effects, an agent tool's run), written again as recorded."""
    limits: Mapping[str, Any] | None = None
    """The recorded ``limits:`` write of the call (the limits declared, the values assumed)."""


class Replayer(Protocol):
    """A replay's hold on the run it re-runs (made by ``afcore.replay``): every model call
    is answered from a recording, and what the run does is checked against it. The loop
    asks it where the provider is chosen and where a tool runs; anything it finds
    different, it raises as a ``ReplayDivergedError`` there, or goes live."""

    link: ReplayLink
    """What the replay's header says it replays."""
    seed: int | None
    """The recorded run's seed (None: it had none, and this run draws its own)."""
    clock: MutableMapping[str, deque[str]]
    """The recorded clock readings still to serve back, by reader."""
    live: bool
    """True once the replay went on with the agent's own providers (``then_live``)."""

    def start(self, recording: Path | None) -> None:
        """A run begins, writing ``recording``: the replay starts over."""

    def provider(
        self, provider: Provider, call: int, hash: str, attempt: AttemptInfo | None
    ) -> Provider:
        """The provider that answers call ``call``, just recorded with ``hash``, which the
        loop meant to send to ``provider``."""

    def tool(self, call: ToolCall, k: int) -> Served | None:
        """The recorded outcome of the k-th call of ``call.name``, to serve instead of
        running it (None: run it)."""

    def tool_done(
        self,
        call: ToolCall,
        k: int,
        result: ToolResultMessage,
        status: ToolStatus,
        result_status: ResultStatus | None = None,
    ) -> ToolResultMessage:
        """A tool call's outcome (how the call went, and the result's own status), to compare
        with the recorded one; returns the result to keep."""

    def finished(self, status: RunStatus) -> None:
        """The run ended as ``status``: what is still different is raised now."""

    def paused(self, asked: Paused) -> None:
        """The run paused for a person with ``asked``: compared with the recorded pause
        (a difference is held until the run goes on)."""


class AgentParts(Protocol):
    """What the loop reads of the agent it runs (an :class:`~afcore.Agent` has them all)."""

    name: str
    source: str | None
    provider: Provider
    model: str
    system: tuple[SystemSegment, ...]
    tools: Mapping[str, Tool]
    max_iterations: int
    tool_arg_validation: ToolValidation
    params: Mapping[str, Any]
    recording: RecordingConfig | None
    engine: InjectionEngine
    configure_fn: Callable[[ConfigureContext], Any] | None
    window: WindowStrategy | None
    reliability: Reliability | None
    governance: Governance
    watchers: Watchers
    max_tool_result_chars: int | None
    repeated_call_nudge: bool
    limits_travel: bool
    replayer: Replayer | None


@dataclass(frozen=True)
class Output:
    """How the answer fared against the agent's output schema."""

    met: bool
    """Whether the answer holds to the schema."""
    value: Any = None
    """The typed value: the answer's (``met``), or for a typed run a fallback tier's."""
    errors: list[dict[str, str]] = field(default_factory=list)
    """Why the last answer checked does not hold (``{"path", "message"}`` each)."""
    checks: int = 0
    """How many checks were made (each answer, each tier)."""
    tier: Literal["answer", "fallback", "canned"] | None = None
    """Where ``value`` came from (None: there is none)."""
    raw: str = ""
    """The last answer checked, as the model gave it."""


@dataclass(frozen=True)
class RunResult:
    """How a run ended."""

    status: RunStatus
    answer: str
    """The final answer; for `max_iterations`, the last text the model wrote (maybe empty)."""
    iterations: int
    calls: int
    usage: Usage
    run_id: str
    recording: Path | None
    error: BaseException | None = field(default=None, repr=False)
    """What stopped the run, for `error` and `interrupted`."""
    stop_reason: str | None = None
    """Why the model stopped its last reply (`end_turn`, `max_tokens` when the answer was
    cut short, ...); None when no reply came."""
    transcript: tuple[Message, ...] = field(default=(), repr=False)
    """The conversation as a next run continues from it (``history=``): the run's history,
    or under a window strategy the live window it ended with."""
    paused: Paused | None = None
    """For status ``paused``: what is asked, and where the run continues from."""
    output: Output | None = None
    """For agents with an output schema: whether the answer met it, and the typed value."""
    answer_coverage: AnswerCoverage | None = None
    """The limits the run's tools declared (and the values their rules assumed), as data,
    duplicates said once; None when none was declared."""


@dataclass(slots=True)  # fields read all through the loop: see Recorder's slots
class RunState:
    """One run in progress."""

    agent: AgentParts
    rec: Recorder
    run_id: str
    state: dict[str, Any]
    identity: Any = None
    history: list[Message] = field(default_factory=list)
    iteration: int = 0
    calls: int = 0
    usage: Usage = Usage()  # frozen: shared by the runs until their first reply adds to it
    tool_counts: dict[str, int] = field(default_factory=dict)
    loop_thread: int = 0
    last_text: str = ""
    last_stop: str | None = None
    model: str = ""
    base: tuple[SystemSegment, ...] = ()
    """The base system segments: the builder's, or what configure() resolved for this run."""
    turn: TurnState | None = None
    fixed: Composition | None = None
    """The slots of an agent with no injections and no tool providers, composed once."""
    composition: Composition | None = None
    decisions: Sequence[Decision] | None = None
    """The injection decisions of the last iteration the recording holds (None: none yet)."""
    last_composed: Composition | None = None
    """The composition whose slots and decisions the last `inject` stage recorded (the
    engine hands the same object back while nothing changes)."""
    composed: dict[int, tuple[Composition, list[int], list[Message], list[str]]] = field(
        default_factory=dict
    )
    """id -> a composition of this run, its injected messages' numbers and messages, and the
    keys its decisions read (the engine hands an earlier one back when a rule flips back)."""
    result_keys: dict[str, str] = field(default_factory=dict)
    """Tool name -> the key of the message holding its last result."""
    injected: dict[tuple[str, str, str], tuple[int, Message]] = field(default_factory=dict)
    """(injection id, role, text) -> its message number and the message, reused while the
    injection sends the same text."""
    last_injected: tuple[object, list[int], list[Message]] | None = None
    """The last composition's injected messages, their numbers and messages as sent."""
    live: LiveWindowState | None = None
    """The live window, for agents with a window strategy (None: the whole history)."""
    request: LiveMessage | None = None
    """The user message the run answers, as the live window holds it."""
    folds: int = 0
    last_usage: Usage | None = None
    """What the provider reported for the agent's last call (not a summarizer's)."""
    last_call: int = 0
    """The number of the agent's last call (summarizer calls are numbered among them)."""
    stream: StreamHandler | None = None
    conversation: Conversation | None = None
    keep: Callable[[Message], None] | None = None
    """The conversation's keeper, called as each reply and tool result joins the history."""
    typed: bool = False
    """The caller wants a typed value (``run_typed``): the fallback tiers may run."""
    output_checks: int = 0
    output: Output | None = None
    ms_before: float = 0.0
    """Milliseconds a paused run had taken before it was continued."""
    recorded: Any = None
    """For a continued run: the recording as the pause left it (a reader's Recording)."""
    repeats: RepeatedCalls | None = None
    """The repeated-call tally of this turn (None: the nudge is off)."""
    started: datetime | None = None
    """When the run started, as the reading that named it (None: not read yet)."""
    declared: list[tuple[str, str, Limits]] = field(default_factory=list)
    """``(tool, call id, limits)``: every limit a tool declared this run, in order."""
    assumed: list[Assumed] = field(default_factory=list)
    """Every argument value a tool's rule filled this run, in order."""
    limits_keys: list[str] = field(default_factory=list)
    """The keys the limits were written under (what a limits block appended reads)."""
    required: list[tuple[str, str]] = field(default_factory=list)
    """``(instruction id, why)``: instructions a tool's envelope pushed into the next call."""
    answered: tuple[str, Line, tuple[Any, ...]] | None = None
    """The answer the finalize stage wrote, its write (run_end names it again) and the
    redactor's shape as it was written."""

    def rec_value(self, key: str) -> Any:
        """For a continued run: the value of ``key``'s last write before the pause."""
        return None if self.recorded is None else last_value(self.recorded, key)

    def remember(
        self, message: Message, rsid: str, source: Source | None = None, *, keep: bool = True
    ) -> Line:
        """Append a message to the history (and the live window); return its write.
        ``keep=False``: not handed to a session (which closes an interrupted call in its own
        words)."""
        self.history.append(message)
        n, write = self.rec.message(message, source=source)
        if self.live is not None:
            self.live.append(LiveMessage(n, message, rsid))
        if self.keep is not None and keep:
            self.keep(message)
        return write

    sources: Sources | None = None
    """The run's recorded clock and random source."""

    def record_call(
        self,
        rsid: str,
        n: int,
        request: Request,
        window: list[tuple[int, int]] | None,
        extra: list[int],
        attempt: AttemptInfo | None = None,
    ) -> str:
        """Record call ``n`` as it is about to be sent; return its hash."""
        return self.rec.call(
            rsid,
            self.iteration,
            n,
            model=request.model,
            system=request.system,
            window=window,
            extra=extra,
            tools=request.tools,
            params=request.params,
            cache=request.cache,
            attempt=attempt,
        )


def last_value(recording: Any, key: str) -> Any:
    """The value of the last write of ``key`` in a recording (a reader's Recording), or
    None when nothing wrote it."""
    lines = recording.writer_lines(key)
    if not lines:
        return None
    for _, record in recording.records([lines[-1]]):
        for w in getattr(record, "writes", ()):
            if w.key == key:
                return recording.value(w)
    return None


def provider_error(e: Exception, provider: str, n: int) -> ProviderError:
    """``e`` as a ProviderError naming call ``n``: itself when it is one, else one that
    says what ``provider`` raised."""
    error = (
        e
        if isinstance(e, ProviderError)
        else ProviderError(
            f"{provider} failed on call {n}: {type(e).__name__}: {e}", provider=provider, call=n
        )
    )
    if error.call is None:
        error.call = n
    return error
