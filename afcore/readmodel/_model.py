"""The typed objects of the read model: what a recording says about a run and about each
call, as both front ends show it. Each has ``to_json()``, the form ``af show --json`` prints
(keys in a fixed order); a front end reads the attributes.

Values from the file that are the recording's own models (a usage, a skipped provider, an
attempt's decision) stay those models; values the file holds as free JSON (a message, a tool
result's content, arguments, a tool's spec) stay JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from msgspec import Struct, field
from msgspec.structs import replace

from afcore.readmodel._text import evidence_text, usage_json
from afcore.recording._typed import dump

if TYPE_CHECKING:
    from afcore.recording import AttemptDecision, SkippedProvider, UsageInfo

__all__ = [
    "Attempt",
    "CallError",
    "CallSummary",
    "Decision",
    "Decisions",
    "FoldPart",
    "FoldView",
    "Gone",
    "Governed",
    "InvalidArgs",
    "MessageEntry",
    "Provenance",
    "Refusal",
    "Removed",
    "Response",
    "RunHead",
    "RunOutcome",
    "Seam",
    "SystemEntry",
    "ToolCall",
    "ToolEntry",
    "ToolResult",
]


def _decision_json(decision: AttemptDecision | None) -> dict[str, Any] | None:
    return dump(decision, exclude_defaults=True) if decision is not None else None


# -- decisions ---------------------------------------------------------------------------


class Decision(Struct, frozen=True):
    """One injection's decision at an iteration: whether it fired, and why."""

    id: str
    flavor: str | None
    trigger: str | None
    fired: bool
    reason: str
    """Why, in words; for a rule, its verdict and what it read."""
    reads: dict[str, Any] | None = None
    """What its rule (or its content function) read, and the values."""
    error: str | None = None
    """Why a rule that failed was skipped."""

    def at(self, iteration: int) -> Decision:
        """The decision carried over to a later iteration: a read of the iteration reads
        that one."""
        if self.reads is not None and "iteration" in self.reads:
            # Built whole: dataclasses.replace costs more than the rest of an inject stage.
            reads = {**self.reads, "iteration": iteration}
            return Decision(
                self.id, self.flavor, self.trigger, self.fired, self.reason, reads, self.error
            )
        return self

    def worded(self) -> Decision:
        """The reason with what its rule read, in words: the record keeps the evidence as
        data and the reason as the verdict alone; a person reads both."""
        if self.trigger != "rule" or not self.reads or not self.reason.startswith("rule returned"):
            return self
        return replace(self, reason=f"{self.reason} reading {evidence_text(self.reads)}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "flavor": self.flavor,
            "trigger": self.trigger,
            "fired": self.fired,
            "reason": self.reason,
        }
        if self.reads is not None:
            out["reads"] = self.reads
        if self.error is not None:
            out["error"] = self.error
        return out


class Decisions(Struct, frozen=True):
    """An iteration's injections: every one evaluated, those that fired, those skipped."""

    evaluated: int
    fired: list[Decision]
    skipped: list[Decision]

    def to_json(self) -> dict[str, Any]:
        return {
            "evaluated": self.evaluated,
            "fired": [d.to_json() for d in self.fired],
            "skipped": [d.to_json() for d in self.skipped],
        }


# -- attempts, responses, what followed a call -------------------------------------------


class Attempt(Struct):
    """Which attempt at its iteration's model call a call is (agents with reliability
    rules), of how many, and where it went."""

    n: int
    provider: str
    via: str
    skipped: list[SkippedProvider]
    """Providers passed over before it."""
    of: int | None = None
    """How many attempts its call took (None: not known yet)."""

    @property
    def plain(self) -> bool:
        """The only attempt, at the agent's own provider, nothing passed over."""
        return self.n == 1 and self.of == 1 and self.via == "agent" and not self.skipped

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "provider": self.provider,
            "via": self.via,
            "skipped": [dump(s, exclude_defaults=True) for s in self.skipped],
        }
        if self.of is not None:
            out["of"] = self.of
        return out


class ToolCall(Struct, frozen=True):
    """A tool call a reply asked for."""

    id: Any
    name: Any
    args: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "args": self.args}


class Response(Struct, frozen=True):
    """A model's reply to a call."""

    text: str
    tool_calls: list[ToolCall]
    thinking_chars: int
    stop_reason: str
    usage: UsageInfo | None
    model: str | None
    ms: float
    decision: AttemptDecision | None
    """For agents with reliability rules: what was decided about this answer, when it was
    not simply kept."""
    missing: str | None = None
    """Why the reply's message could not be read."""
    response_id: str | None = None
    """The vendor's id for the response (``msg_...``, ``chatcmpl-...``)."""
    unsent_params: list[str] = field(default_factory=list)
    """Params of the call the provider could not send (``thinking``)."""
    redacted_thinking: int = 0
    """Thinking blocks the vendor sent encrypted: there was thinking, unreadable."""
    opaque: list[str] = field(default_factory=list)
    """Blocks af keeps whole without reading them, each by its vendor's type and name."""

    @property
    def refused(self) -> bool:
        return self.decision is not None and self.decision.verb != "ok"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "tool_calls": [t.to_json() for t in self.tool_calls],
            "thinking_chars": self.thinking_chars,
            "redacted_thinking": self.redacted_thinking,
            "opaque": self.opaque,
            "stop_reason": self.stop_reason,
            "usage": usage_json(self.usage),
            "model": self.model,
            "response_id": self.response_id,
            "unsent_params": self.unsent_params,
            "ms": self.ms,
            "decision": _decision_json(self.decision),
        }
        if self.missing:
            out["missing"] = self.missing
        return out


class CallError(Struct, frozen=True):
    """An error event: what failed and, for an attempt at a model call, what came next."""

    kind: str
    message: str
    reason: str | None = None
    status: int | None = None
    mid_stream: bool = False
    ms: float | None = None
    decision: AttemptDecision | None = None
    attempt: Attempt | None = None
    """For a fail-fast before any attempt at its call: the attempt that was not made."""
    error_type: str | None = None
    """The vendor's word for the error."""
    request_id: str | None = None
    """The vendor's id for the request, to find it in its logs."""
    details: dict[str, Any] | None = None
    """The other fields of the vendor's error object, as sent."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.status is not None:
            out["status"] = self.status
        if self.error_type is not None:
            out["error_type"] = self.error_type
        if self.request_id is not None:
            out["request_id"] = self.request_id
        if self.details:
            out["details"] = self.details
        if self.mid_stream:
            out["mid_stream"] = True
        if self.ms is not None:
            out["ms"] = self.ms
        if self.decision is not None:
            out["decision"] = _decision_json(self.decision)
        if self.attempt is not None:
            out["attempt"] = self.attempt.to_json()
        return out


class ToolResult(Struct, frozen=True):
    """What a tool answered to one of a reply's tool calls."""

    name: str
    call_id: str
    status: str
    ms: float
    content: Any
    is_error: bool
    missing: str | None = None
    """Why the result's message could not be read."""
    result_status: str | None = None
    """The result's status in the tools' words (`success`, `absent`, ...; None: a file
    written before tool commits said it)."""
    shown: str = ""
    """The status as a reader is shown it (``ok · absent``)."""
    notes: tuple[str, ...] = ()
    """What became of the result, one line each (a refusal, a cut, the nudge, limits)."""
    run: dict[str, Any] | None = None
    """For an agent called as a tool: the run it made (``run_id``, ``recording``, ...)."""
    k: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "call_id": self.call_id,
            "status": self.status,
            "ms": self.ms,
            "content": self.content,
            "is_error": self.is_error,
        }
        if self.result_status is not None:
            out["result_status"] = self.result_status
        if self.notes:
            out["notes"] = list(self.notes)
        if self.run is not None:
            out["run"] = self.run
        if self.missing:
            out["missing"] = self.missing
        return out


class InvalidArgs(Struct, frozen=True):
    """A tool call whose arguments broke its schema."""

    name: str
    call_id: str
    problems: list[dict[str, str]]
    enforced: bool
    """True when the call was refused; false when it ran anyway."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "call_id": self.call_id,
            "problems": self.problems,
            "enforced": self.enforced,
        }


class Governed(Struct, frozen=True):
    """A governance step after a call: a middleware chain's decision (``rules``), the run
    pausing for a person (``pause``), a person's answer (``resume``), a check of the answer
    against the output schema (``check``)."""

    kind: Literal["rules", "pause", "resume", "check"]
    line: int
    verb: str
    """``allow``/``deny``/``ask`` (rules, pause), ``approve``/``decline`` (resume),
    ``ok``/``failed`` (check)."""
    words: list[str]
    """What happened, in words, one line each."""
    moment: str | None = None
    """For rules: ``tool_call``, ``tool_result``, ``input``, ``output``."""
    tool: str | None = None
    k: int | None = None
    value: Any = None
    """For rules that changed the arguments: the arguments as changed; for a pause, its
    checkpoint; for a resume, who answered, when and why; for a check, the check."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "line": self.line, "verb": self.verb}
        if self.moment is not None:
            out["moment"] = self.moment
        if self.tool is not None:
            out |= {"tool": self.tool, "k": self.k}
        return out | {"words": self.words, "value": self.value}


# -- a run, call by call -----------------------------------------------------------------


class RunHead(Struct, frozen=True):
    """What ran."""

    run_id: str
    path: str
    started_at: str
    agent: dict[str, Any]
    model: str
    provider: dict[str, Any]
    session: dict[str, Any] | None = None
    """For a turn of a session: ``{"id", "turn", "previous"}`` (the previous turn's run id)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "path": self.path,
            "started_at": self.started_at,
            "agent": self.agent,
            "model": self.model,
            "provider": self.provider,
            "session": self.session,
        }


class CallSummary(Struct):
    """One call of a run as the overview shows it: its slots' sizes, the decisions that
    shaped it, its reply, and the tool results and errors that followed it."""

    call: int
    iteration: int
    rsid: str
    model: str
    line: int
    kind: Literal["agent", "summarizer"]
    fold: int | None
    """For a summarizer's call: the fold it summarized for."""
    segments: int | None
    """System segments (None: the list cannot be read)."""
    chars: int | None
    """Characters in the system segments (None: unknown)."""
    messages: int
    window: list[list[int]]
    tools: int | None
    tools_added: list[str]
    tools_removed: list[str]
    injections: Decisions | None
    attempt: Attempt | None
    response: Response | None = None
    results: list[ToolResult] = field(default_factory=list)
    invalid_args: list[InvalidArgs] = field(default_factory=list)
    errors: list[CallError] = field(default_factory=list)
    governed: list[Governed] = field(default_factory=list)
    """Middleware decisions, a pause and a person's answer, output checks, in file order."""

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.governed:
            out["governed"] = [g.to_json() for g in self.governed]
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "iteration": self.iteration,
            "rsid": self.rsid,
            "model": self.model,
            "line": self.line,
            "kind": self.kind,
            "fold": self.fold,
            "system": {"segments": self.segments, "chars": self.chars},
            "messages": self.messages,
            "window": self.window,
            "tools": self.tools,
            "tools_added": self.tools_added,
            "tools_removed": self.tools_removed,
            "injections": self.injections.to_json() if self.injections else None,
            "attempt": self.attempt.to_json() if self.attempt else None,
            "response": self.response.to_json() if self.response else None,
            "results": [r.to_json() for r in self.results],
            "invalid_args": [a.to_json() for a in self.invalid_args],
            "errors": [e.to_json() for e in self.errors],
        }


class Refusal(Struct, frozen=True):
    """Messages old enough to leave the window that stayed, and why."""

    reason: str
    messages: list[tuple[int, int]]
    writers: list[str]
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "messages": self.messages,
            "writers": self.writers,
            "error": self.error,
        }


class FoldView(Struct, frozen=True):
    """A fold of the live window, each field of its type (a field the file does not hold
    as it should is None, or ``?`` for a word)."""

    fold: int
    strategy: str
    iteration: int | None
    count: int
    """How many messages left."""
    messages: list[tuple[int, int]]
    """The messages that left, as inclusive ranges."""
    folded: list[str]
    """The stages that wrote them."""
    measured: int | None
    threshold: int | None
    summary: int | None
    """The summary message that took their place."""
    summary_call: int | None
    refusals: list[Refusal]

    def to_json(self) -> dict[str, Any]:
        return {
            "fold": self.fold,
            "strategy": self.strategy,
            "iteration": self.iteration,
            "count": self.count,
            "messages": self.messages,
            "folded": self.folded,
            "measured": self.measured,
            "threshold": self.threshold,
            "summary": self.summary,
            "summary_call": self.summary_call,
            "refusals": [r.to_json() for r in self.refusals],
        }


class FoldPart(Struct, frozen=True):
    """A fold of the window as the overview gives it, after the call it follows."""

    view: FoldView
    value: dict[str, Any]
    """The fold's value as the file holds it."""
    rsid: str
    after_call: int | None
    """The call it follows (None: before the first)."""
    missing: str | None = None
    """Why its value could not be read."""

    def to_json(self) -> dict[str, Any]:
        out = self.value | {"fold": self.view.fold, "rsid": self.rsid}
        if self.missing:
            out["missing"] = self.missing
        return out | {"after_call": self.after_call}


class RunOutcome(Struct, frozen=True):
    """How the run ended, and what reading the file met."""

    status: str
    iterations: int
    calls: int
    answer: Any
    usage: UsageInfo | None
    error: dict[str, Any] | None
    errors: list[CallError]
    """Errors that concern no call."""
    ms: float | None
    problems: list[dict[str, Any]]
    torn_tail: dict[str, Any] | None
    unknown_records: int
    paused: dict[str, Any] | None = None
    """For a run that ends paused: its checkpoint (the question, the link, the calls)."""
    contract: dict[str, Any] | None = None
    """For agents with an output schema: whether the answer met it."""

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.paused is not None:
            out["paused"] = self.paused
        if self.contract is not None:
            out["contract"] = self.contract
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "iterations": self.iterations,
            "calls": self.calls,
            "answer": self.answer,
            "usage": usage_json(self.usage),
            "error": self.error,
            "errors": [e.to_json() for e in self.errors],
            "ms": self.ms,
            "problems": self.problems,
            "torn_tail": self.torn_tail,
            "unknown_records": self.unknown_records,
        }


# -- one call as sent --------------------------------------------------------------------


class Provenance(Struct, frozen=True):
    """Where a piece of context came from and, for an injection, why it is there."""

    source: str | None
    """``base``, ``static``, an injection's flavor, ``provider``, ``summary``, ..."""
    id: str | None
    trigger: str | None = None
    reason: str | None = None
    cache: str | None = None
    reads: dict[str, Any] | None = None
    """What the decision that put it there read."""
    turn: int | None = None
    """For a message of a session's history: the turn that wrote it (``reason`` is then
    af's note, for a message af wrote itself)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "id": self.id,
            "trigger": self.trigger,
            "reason": self.reason,
            "cache": self.cache,
        }
        if self.reads is not None:
            out["reads"] = self.reads
        if self.turn is not None:
            out["turn"] = self.turn
        return out

    @property
    def label(self) -> str | None:
        """For a message the run continued from, where it came from in words: ``turn 3``
        (a session's), ``history`` (given to the run); None for anything else."""
        if self.turn is not None:
            return f"turn {self.turn}"
        if self.source in ("history", "session"):
            return "history"
        return None


Change = Literal["new", "changed"] | None
"""``new`` (not in the call before), ``changed`` (there, different), or None."""


class SystemEntry(Struct, frozen=True):
    """A system segment as sent."""

    position: int
    text: str
    provenance: Provenance
    cache_breakpoint: bool
    change: Change

    def to_json(self) -> dict[str, Any]:
        return (
            {"position": self.position, "text": self.text}
            | self.provenance.to_json()
            | {"cache_breakpoint": self.cache_breakpoint, "change": self.change}
        )


class MessageEntry(Struct, frozen=True):
    """A message of the window as sent."""

    n: int
    message: dict[str, Any]
    """The message as stored (role, content, and what else its role carries)."""
    writer: str | None
    """The stage that wrote it."""
    provenance: Provenance | None
    """For a message an injection or the window strategy put there."""
    change: Change

    @property
    def role(self) -> Any:
        return self.message.get("role")

    @property
    def content(self) -> Any:
        return self.message.get("content")

    @property
    def source(self) -> str | None:
        return self.provenance.source if self.provenance is not None else None

    @property
    def id(self) -> str | None:
        return self.provenance.id if self.provenance is not None else None

    def to_json(self) -> dict[str, Any]:
        out = {"n": self.n, "role": self.role, "content": self.content} | self.message
        out |= {"n": self.n, "writer": self.writer}
        if self.provenance is not None:
            out |= self.provenance.to_json()
        return out | {"change": self.change}


class ToolEntry(Struct, frozen=True):
    """A tool as the model saw it."""

    name: str
    spec: dict[str, Any]
    """Its spec as sent: name, description, input schema."""
    source: str | None
    id: str | None
    cache_breakpoint: bool
    change: Change

    @property
    def description(self) -> Any:
        return self.spec.get("description")

    @property
    def input_schema(self) -> Any:
        return self.spec.get("input_schema")

    def to_json(self) -> dict[str, Any]:
        return (
            {"name": self.name}
            | self.spec
            | {
                "name": self.name,
                "source": self.source,
                "id": self.id,
                "cache_breakpoint": self.cache_breakpoint,
                "change": self.change,
            }
        )


class Gone(Struct, frozen=True):
    """Something the call before was sent that this one was not: a segment (``text``), a
    message (``n``) or a tool (``name``)."""

    source: str | None = None
    id: str | None = None
    text: str | None = None
    n: int | None = None
    name: str | None = None
    fold: int | None = None
    """For a message: the fold it left in since the call before."""

    def to_json(self) -> dict[str, Any]:
        if self.n is not None:
            out: dict[str, Any] = {"n": self.n}
            if self.source is not None or self.id is not None:
                out |= {"source": self.source, "id": self.id}
            return out | ({"fold": self.fold} if self.fold is not None else {})
        if self.name is not None:
            return {"name": self.name, "source": self.source, "id": self.id}
        return {"source": self.source, "id": self.id, "text": self.text}


class Removed(Struct, frozen=True):
    """What the call before was sent that this one was not."""

    system: list[Gone]
    messages: list[Gone]
    tools: list[Gone]

    def to_json(self) -> dict[str, Any]:
        return {
            "system": [g.to_json() for g in self.system],
            "messages": [g.to_json() for g in self.messages],
            "tools": [g.to_json() for g in self.tools],
        }


class Seam(Struct, frozen=True):
    """Where a call's window shows a fold."""

    fold: FoldView
    rsid: str
    """The window stage that folded."""
    before: int | None
    """The message the seam goes before (None: after the last)."""

    def to_json(self) -> dict[str, Any]:
        return self.fold.to_json() | {"rsid": self.rsid, "before": self.before}
