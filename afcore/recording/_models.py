"""The records of a recording, one pydantic model each, read through one discriminated union,
and the values af writes under its keys (folds, injection decisions) and in its slot lists.

These models are the format's specification: ``af schema`` prints their JSON Schema, and the
field docstrings are its documentation. docs/recording-format.md explains how they fit.

The writer makes the same models and serializes them with :func:`dump`: fields in the order
they are declared here, and a field marked :data:`Sparse` left out while it holds its default
(the ``tool`` of a commit that is not a tool's), so that a model's line is the format's line.
It makes them with :func:`trusted`, which skips validation: the writer's values have the
model's types by construction (mypy checks every call against the model's own signature),
and validating each record would cost the loop more than writing it.
"""

# No ``from __future__ import annotations``: pydantic would compile and evaluate each of
# the ~350 field annotations from a string when the models are built, which every read
# command does at start-up; as objects they cost nothing more.

from collections.abc import Callable
from operator import attrgetter
from types import UnionType
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    NewType,
    ParamSpec,
    TypeAlias,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
)

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from afcore.recording._format import FORMAT, FORMAT_VERSION

__all__ = [
    "CeilingRefusal",
    "EffectInfo",
    "RepeatInfo",
    "ResultStatus",
    "SubRun",
    "Truncation",
    "FORMAT",
    "FORMAT_VERSION",
    "RECORD_ADAPTER",
    "AgentInfo",
    "Approval",
    "Checkpoint",
    "ContractEnd",
    "LinkDecision",
    "MiddlewareDecision",
    "MiddlewareInfo",
    "ObserverError",
    "OutputCheck",
    "OutputSchemaInfo",
    "Pause",
    "PendingCall",
    "Resume",
    "ArgsInvalid",
    "AttemptDecision",
    "AttemptInfo",
    "Blob",
    "BreakerInfo",
    "Call",
    "CallTool",
    "Commit",
    "ClockRead",
    "ContextEvicted",
    "ErrorEvent",
    "ErrorInfo",
    "Fold",
    "FoldRefusal",
    "FoldSummary",
    "Header",
    "InjectionDecision",
    "InjectionDecisions",
    "InjectionInfo",
    "KNOWN_TYPES",
    "Line",
    "Record",
    "RedactionInfo",
    "ReliabilityInfo",
    "ReliabilityRuleInfo",
    "ReplayLink",
    "Reply",
    "ReplyToolCall",
    "RunConfig",
    "RunEnd",
    "Seal",
    "Segment",
    "SessionLink",
    "SkippedProvider",
    "SlotDelta",
    "SourceInfo",
    "Sparse",
    "TargetInfo",
    "ToolInfo",
    "ToolOutcome",
    "ToolProgress",
    "ToolStart",
    "ToolStatus",
    "UnknownRecord",
    "UsageInfo",
    "WindowInfo",
    "Write",
    "as_json",
    "dump",
    "record_schema",
    "line",
    "trusted",
]


class _SparseMarker:
    def __repr__(self) -> str:
        return "Sparse"


_SPARSE: Final = _SparseMarker()
_T = TypeVar("_T")
Sparse: TypeAlias = Annotated[_T, _SPARSE]
"""A field written only when it differs from its default: absent from the line otherwise.
Fields not so marked are always written, ``null`` included (a reply's ``usage``)."""


class _Model(BaseModel):
    # Newer minor versions may add fields; an older reader ignores them. Validators are built
    # when a model is first used and field docstrings read only for the schema
    # (:func:`record_schema`): a read command starts without building all fifty.
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


# -- pieces ----------------------------------------------------------------------------


class AgentInfo(_Model):
    name: str
    """The agent's name (the builder's, or the name of what `af run` loaded)."""
    source: str | None = None
    """Where the agent was defined: `module:line`, or what `af run` was given."""


class ToolInfo(_Model):
    name: str
    """The tool's name as the model sees it."""
    ref: str
    """Hash of the blob holding the tool's spec (name, description, input_schema)."""


class InjectionInfo(_Model):
    """An injection as the header lists it."""

    id: str
    """The injection's id."""
    flavor: str
    """What kind of context it is: `steering`, `instruction`, `fact`, `skill`, or the
    application's own."""
    trigger: str
    """When it fires: `always`, `rule`, `on_tool_return`, `llm_activated`."""
    after: Sparse[str | None] = None
    """For `on_tool_return`: the tool's name, or `/regex/`."""
    slots: list[str]
    """The slots it puts something in: `system`, `messages`, `tools`."""
    cache: str
    """Its cache policy: `always`, `while_active`, `never`, or `predicate`."""
    tools: Sparse[list[str]] = []
    """The names of the tools it makes visible while active."""


class WindowInfo(_Model):
    """The window strategy as the header describes it."""

    strategy: str
    """`sliding_window`, `token_budget` or `summarize_oldest`."""
    keep_recent_turns: int
    """How many of the newest turns always stay."""
    threshold_tokens: Sparse[int | None] = None
    """The counted input tokens over which it acts (token strategies)."""
    summarizer: Sparse[str | None] = None
    """The name of the provider that writes summaries (`summarize_oldest`)."""
    model: Sparse[str | None] = None
    """The summarizer's model, when it is not the agent's."""


class ReliabilityRuleInfo(_Model):
    """A reliability rule as the header lists it."""

    rule: str
    """Its kind, or `pre_check[i]` / `post_decide[i]`."""
    then: str
    """The verb it decides."""
    delay: Sparse[int | float | str | None] = None
    """Seconds waited before the next attempt; for a delay worked out at each attempt, the
    function's name or `computed` (the decisions record the seconds)."""


class TargetInfo(_Model):
    """A provider a call's attempts may go to."""

    provider: dict[str, Any]
    """The provider, as it describes itself (never its credentials)."""
    model: Sparse[str | None] = None
    """The model it is asked, when it is not the agent's."""


class BreakerInfo(_Model):
    """The circuit breaker's settings."""

    failures: int
    """Failed attempts in a row on one provider that open its circuit."""
    cooldown: float
    """Seconds the circuit stays open."""


class ReliabilityInfo(_Model):
    """The reliability rules as the header describes them."""

    pre_check: list[ReliabilityRuleInfo]
    """The rules that look at an attempt before it is made, in order."""
    post_decide: list[ReliabilityRuleInfo]
    """The rules that look at an attempt's outcome, in order."""
    providers: list[TargetInfo]
    """The other providers `retry_other` moves to, in order."""
    max_attempts: int
    """The most attempts one call may take."""
    fallback: Sparse[TargetInfo | None] = None
    """The provider `fallback` moves to."""
    circuit_breaker: Sparse[BreakerInfo | None] = None
    """The circuit breaker, if any."""


class MiddlewareInfo(_Model):
    """A middleware link as the header lists it."""

    name: str
    """The link's name."""
    hooks: list[str]
    """The hooks it has: `on_tool_call`, `on_tool_result`, `on_message`."""


class OutputSchemaInfo(_Model):
    """The answer's contract as the header describes it."""

    name: str
    """The schema's name (a pydantic model's class name, a JSON Schema's `title`)."""
    json_schema: dict[str, Any]
    """The JSON Schema the answer is validated against."""
    retries: int
    """How many times a failed answer is sent back with its validation errors."""
    fallback: Sparse[bool] = False
    """Whether a fallback function is set (run for typed runs when the answer fails)."""
    canned: Sparse[bool] = False
    """Whether a canned value is set (the last tier of typed runs)."""


class RunConfig(_Model):
    max_iterations: int
    """The most model calls the loop makes before it stops with `max_iterations`."""
    tool_arg_validation: Literal["enforce", "warn", "off"]
    """What happens to tool arguments that break the tool's schema."""
    tools: list[ToolInfo] = []
    """The tools registered on the agent, in registration order."""
    params: dict[str, Any] = {}
    """Model parameters sent with every call (temperature, max_tokens, ...)."""
    injections: Sparse[list[InjectionInfo]] = []
    """The injections registered, in registration order."""
    tool_providers: Sparse[list[str]] = []
    """Names of the tool providers consulted at every iteration."""
    configure: Sparse[str | None] = None
    """The name of the function that decides each run's model and instructions, if any."""
    window: Sparse[WindowInfo | None] = None
    """The window strategy, if any. Its folds are the `fold:<n>` writes of `window` stages."""
    reliability: Sparse[ReliabilityInfo | None] = None
    """The reliability rules, if any."""
    tool_middleware: Sparse[list[MiddlewareInfo]] = []
    """The links of the tool middleware chain, in call order. (Since 1.1.)"""
    message_middleware: Sparse[list[MiddlewareInfo]] = []
    """The links of the message middleware chain, in call order. (Since 1.1.)"""
    output_schema: Sparse[OutputSchemaInfo | None] = None
    """The contract the final answer is held to, if any. (Since 1.1.)"""
    max_tool_result_chars: Sparse[int | None] = None
    """The agent-wide cap on a tool result the model reads (cut with a marker), if any.
    (Since 1.1.)"""
    repeated_call_nudge: Sparse[bool] = True
    """Whether a call landing exactly as an earlier one gets the nudge. (Since 1.1.)"""
    limits_travel: Sparse[bool] = False
    """Whether the limits the tools declared are appended to the answer. (Since 1.1.)"""
    watchers: Sparse[list[str]] = []
    """The names of the observers attached when the run started. (Since 1.1.)"""


class RedactionInfo(_Model):
    fields: list[str] = []
    """Object keys whose string values are replaced wherever they occur."""
    patterns: list[str] = []
    """Names of the patterns whose matches are replaced (`anthropic_key`, `bearer`, ...)."""
    env: list[str] = []
    """Names (never values) of environment variables whose values are replaced."""


class SourceInfo(_Model):
    """Where a piece of context came from: its provenance."""

    kind: str
    """What put this piece of context there: `base` (the builder's system text), `static`
    (its tools), an injection's flavor (`steering`, `instruction`, `fact`, `skill`,
    `caller`, ...), `provider` (a tool provider); for a message the run continued from,
    `history` (given to the run) or `session` (a session's stored transcript)."""
    id: Sparse[str | None] = None
    """The injection's id, for injected context."""
    trigger: Sparse[str | None] = None
    """Why it fires: `always`, `rule`, `on_tool_return`, `llm_activated`."""
    reason: Sparse[str | None] = None
    """Why it fired this time, in words (the full evidence is in the `inject` commit)."""
    cache: Sparse[str | None] = None
    """The cache policy it was placed under: `always`, `while_active` or `never`."""


class Segment(_Model):
    """One system-prompt segment of a call, in the list its call's `system` blob holds."""

    text: Sparse[str | None] = None
    """The segment's text, inline (short segments)."""
    ref: Sparse[str | None] = None
    """Hash of a blob holding `{"text": ...}` (long segments, stored once)."""
    source: SourceInfo
    """Where the segment came from."""


class CallTool(_Model):
    """One visible tool of a call, in the list its call's `tools` blob holds."""

    name: str
    """The tool's name."""
    ref: str
    """Hash of the blob holding the tool's spec as sent."""
    source: SourceInfo
    """Where the tool came from."""


class SlotDelta(_Model):
    """A slot list stored as the change from the last one stored in full: the base's first
    `keep` entries, then `then`. A call's `system` or `tools` blob holds a list of entries
    or this."""

    base: str
    """Hash of the blob holding the base list (always a list, never a delta)."""
    keep: int
    """How many of the base's first entries the list starts with."""
    then: list[Any]
    """The entries after them (each a Segment, or each a CallTool)."""


class UsageInfo(_Model):
    input_tokens: int = 0
    """Tokens the request took."""
    output_tokens: int = 0
    """Tokens the reply took."""
    cache_read_tokens: Sparse[int] = 0
    """Input tokens served from the provider's prompt cache."""
    cache_write_tokens: Sparse[int] = 0
    """Input tokens written to the provider's prompt cache."""
    estimated: Sparse[bool] = False
    """True when af guessed the numbers; false when the provider reported them."""


class Write(_Model):
    key: str
    """The key written: `user_message`, `message:3`, `system`, `tools`, `route`, `answer`, ..."""
    value: Sparse[Any] = None
    """The value, inline (short values)."""
    ref: Sparse[str | None] = None
    """Hash of the blob holding the value (long or repeated values)."""
    source: Sparse[SourceInfo | None] = None
    """For an injected message: the injection that put it there, and why; for a message of
    the conversation the run continued from (a `history` stage): where it came from (for a
    session, `id` is the session and `reason` the turn that wrote it)."""


class ReplyToolCall(_Model):
    id: str
    """The tool call's id, answered by a tool message with the same `tool_call_id`."""
    name: str
    """The tool asked for."""
    k: int
    """Which call of this tool in the run, from 1: the `k` of the key `tool:<name>#<k>`."""


ToolStatus: TypeAlias = Literal[
    "ok", "error", "rejected", "unknown_tool", "interrupted", "denied", "withheld"
]

ResultStatus: TypeAlias = Literal[
    "success", "failure", "denied", "invalid", "partial", "pending", "absent", "interrupted"
]


class CeilingRefusal(_Model):
    """A result over its tool's ceiling, refused."""

    size: int
    """The result's true size, in characters."""
    max_chars: int
    """The tool's ceiling."""
    narrow_by: Sparse[list[str]] = []
    """The arguments the refusal named to narrow the call by."""
    declared_status: Sparse[str | None] = None
    """The status the tool's envelope declared (the delivered one is `invalid`)."""


class Truncation(_Model):
    """A result cut by the agent's cap."""

    size: int
    """The result's true size, in characters."""
    kept: int
    """The characters of its head the model read."""


class RepeatInfo(_Model):
    """The repeated-call nudge: fingerprints, never values."""

    occurrences: int
    """How many times this call has landed with this result this turn."""
    args_fingerprint: str
    """A short hash of the arguments (keys sorted)."""
    result_fingerprint: str
    """A short hash of the result text."""


class EffectInfo(_Model):
    """One effect a result envelope asked for."""

    kind: str
    """`require-instruction`."""
    instruction_id: Sparse[str | None] = None
    """The instruction pushed."""
    lease: Sparse[str | None] = None
    """`next-call`."""
    outcome: Literal["accepted", "refused"]
    """Whether it was taken."""
    why: Sparse[str | None] = None
    """For a refusal, the sentence the model read."""


class SubRun(_Model):
    """The run an agent called as a tool made."""

    run_id: str
    """Its run id."""
    recording: Sparse[str | None] = None
    """Its recording, as a path relative to this file's folder when it is beside it."""
    agent: str
    """The agent's name."""
    status: str
    """How it ended (`answer`, `error`, ...)."""


class ToolOutcome(_Model):
    name: str
    """The tool's name."""
    k: int
    """Which call of this tool in the run, from 1."""
    call_id: str
    """The id of the tool call this answers."""
    status: ToolStatus
    """`ok`; `error` (execute raised); `rejected` (arguments failed validation and the tool
    did not run); `unknown_tool` (the model named a tool the agent does not have);
    `interrupted`; `denied` (tool middleware refused the call: the tool did not run; since
    1.1); `withheld` (the tool ran and tool middleware refused its result; since 1.1)."""
    ms: float
    """How long the tool took, in milliseconds."""
    result_status: Sparse[ResultStatus | None] = None
    """The result's status in the tools' own words: `success`, `failure` (execute raised),
    `denied`, `invalid` (the call must be fixed: arguments refused, an unknown tool, a
    result over the tool's ceiling), `partial` (cut by the agent's cap), `pending`,
    `absent` (the tool looked and found nothing), `interrupted`; a status the tool declared
    in an envelope wins. (Since 1.1.)"""
    source: Sparse[str | None] = None
    """Where the tool comes from when it is not the agent's own code (`mcp:<server>`,
    `agent:<name>`). (Since 1.1.)"""
    ceiling: Sparse[CeilingRefusal | None] = None
    """The result was over the tool's declared ceiling: the model read a refusal and no
    data. (Since 1.1.)"""
    truncated: Sparse[Truncation | None] = None
    """The result was cut by the agent's `max_tool_result_chars`. (Since 1.1.)"""
    repeat: Sparse[RepeatInfo | None] = None
    """The call landed exactly as an earlier one this turn and the model read the nudge.
    (Since 1.1.)"""
    effects: Sparse[list[EffectInfo]] = []
    """The effects the tool's result envelope asked for, each accepted or refused.
    (Since 1.1.)"""
    run: Sparse[SubRun | None] = None
    """For an agent called as a tool: the run it made. (Since 1.1.)"""


class ErrorInfo(_Model):
    kind: str
    """The error's class name (`MockExhaustedError`, `ProviderError`, ...)."""
    message: str
    """The error's message."""
    reason: Sparse[str | None] = None
    """The kind word rules decide on: a provider error's (`rate_limited`, `overloaded`,
    `stream_cut`, ...; `unknown` for another exception), or a ReliabilityFailFastError's
    (`mid-stream-not-retryable`, `attempts-exhausted`, ...). Written by agents with
    reliability rules."""
    status: Sparse[int | None] = None
    """The HTTP status of a provider error, when the vendor gave one."""
    mid_stream: Sparse[bool] = False
    """True when the call failed after its reply had begun streaming."""
    error_type: Sparse[str | None] = None
    """For a provider error: the vendor's word for it (`rate_limit_error`,
    `invalid_request_error`, ...), when it said one. (Since 1.1.)"""
    request_id: Sparse[str | None] = None
    """For a provider error: the vendor's id for the request, to find it in the vendor's
    logs. (Since 1.1.)"""
    details: Sparse[dict[str, Any] | None] = None
    """For a provider error: the other fields of the vendor's error object, as it sent them
    (a code, `failed_generation`, `metadata`, ...). (Since 1.1.)"""
    retry_after: Sparse[float | None] = None
    """For a provider error: the seconds the vendor asked to wait before trying again
    (`retry-after`), which reliability rules may read. (Since 1.1.)"""


class AttemptDecision(_Model):
    """What was decided after (or before) an attempt at a model call, by a reliability rule
    or by af."""

    verb: str
    """`continue`, `ok` (the outcome stands: an answer is kept, an error stops the run),
    `retry` (the same provider again), `retry_other` (the next provider), `fallback` (the
    fallback provider) or `fail_fast` (the call is given up)."""
    rule: Sparse[str | None] = None
    """The rule that decided: its kind, or `pre_check[i]` / `post_decide[i]`. Absent when
    no rule did (the default)."""
    kind: Sparse[str | None] = None
    """For `fail_fast`: why, as a word (the rule's kind, or af's: `mid-stream-not-retryable`,
    `no-provider-left`, `no-fallback-left`, `attempts-exhausted`, `circuit-open`,
    `rule-failed`)."""
    reason: Sparse[str | None] = None
    """Why, in words, when af decided (a default, an override, a fail-fast)."""
    asked: Sparse[str | None] = None
    """The verb asked for, when af overrode it (with `fail_fast`)."""
    delay: Sparse[float] = 0.0
    """Seconds waited before the next attempt."""


class SkippedProvider(_Model):
    """A provider passed over before an attempt was made on it."""

    provider: str
    """The provider's name."""
    model: str
    """The model it would have been asked."""
    via: str
    """`agent`, `providers[i]` or `fallback`."""
    decision: AttemptDecision
    """The pre_check decision that passed it over (`retry_other`, `fallback`)."""


class AttemptInfo(_Model):
    """Which attempt at its iteration's model call a call is (agents with reliability
    rules). The attempts of one call share its `rsid`."""

    n: int
    """The attempt's number, from 1."""
    provider: str
    """The name of the provider it went to (the model is the call's `model`)."""
    via: str
    """`agent` (the agent's own provider), `providers[i]` (the i-th of the reliability
    providers) or `fallback`."""
    skipped: Sparse[list[SkippedProvider]] = []
    """Providers passed over before it (an open circuit breaker, a pre_check rule)."""


# -- values written under keys ---------------------------------------------------------


class InjectionDecision(_Model):
    """One injection's decision at an iteration, in the `injections` value of an `inject`
    commit."""

    id: str
    """The injection's id."""
    flavor: str
    """Its flavor: `steering`, `instruction`, `fact`, `skill`, or the application's own."""
    trigger: str
    """Its trigger: `always`, `rule`, `on_tool_return`, `llm_activated`."""
    fired: bool
    """Whether its content is in the call."""
    reason: str
    """Why, in words: a rule's verdict (`rule returned true`), the tool that returned, the
    skill's activation, or why it was skipped."""
    reads: Sparse[list[tuple[str] | tuple[str, Any]]] = []
    """The evidence: `[key, value]` for every value the rule (or a content function) read,
    values cut to 200 characters; a read of the iteration is `["iteration"]`, its value being
    the stage's `iter`."""
    error: Sparse[str | None] = None
    """Why a rule that raised or returned a non-bool, or whose content could not be made,
    was skipped."""


class InjectionDecisions(_Model):
    """The value of an `injections` write: the decisions that changed since the iteration
    before (all of them the first time)."""

    evaluated: int
    """The decisions the iteration holds: those listed and those carried over."""
    decisions: list[InjectionDecision]
    """The decisions that differ from the iteration before, in the engine's order."""
    unchanged: int
    """How many decisions carried over unchanged (their last written version holds)."""


class FoldRefusal(_Model):
    """Messages old enough to leave the window that stayed, and why."""

    reason: str
    """`current_request`, `unresolved_tool_call`, `last_tool_result`, or for a span the
    summarizer refused, `summarizer_failed` or `summary_not_smaller`."""
    messages: list[tuple[int, int]]
    """The messages that stayed, as inclusive ranges of message numbers, in window order."""
    writers: list[str]
    """The stages that wrote them, each once, in order."""
    error: Sparse[str | None] = None
    """For `summarizer_failed`: what the summarizer raised or answered."""


class FoldSummary(_Model):
    """The summary that took a fold's place in the window."""

    message: int
    """The summary message's number."""
    call: int
    """The summarizer's call that wrote it."""
    by: str
    """Who summarized: `provider:model`."""


class Fold(_Model):
    """The value of a `fold:<n>` write of a `window` stage: what left the live window."""

    strategy: str
    """The window strategy that folded."""
    iteration: int
    """The iteration it folded at."""
    folded: list[str]
    """The stages that wrote the messages that left, each once, in order."""
    messages: list[tuple[int, int]]
    """The messages that left, as inclusive ranges of message numbers, in window order."""
    count: int
    """How many messages left (0: everything refused)."""
    before: int
    """Messages in the live window before the fold."""
    after: int
    """Messages in the live window after it."""
    keep_recent_turns: int
    """The newest turns the strategy keeps."""
    refusals: list[FoldRefusal] = []
    """What was old enough to leave but stayed, and why."""
    measured: Sparse[int | None] = None
    """For a token threshold: the input tokens the provider counted for `measured_at`."""
    measured_at: Sparse[int | None] = None
    """The call whose usage was measured."""
    threshold: Sparse[int | None] = None
    """The strategy's threshold, in tokens."""
    summary: Sparse[FoldSummary | None] = None
    """For `summarize_oldest`: the summary that took the place of what left."""


class LinkDecision(_Model):
    """One middleware link's answer, in a `MiddlewareDecision`. (Since 1.1.)"""

    link: str
    """The link's name."""
    verb: Literal["allow", "deny", "ask"]
    """What it answered. A link that raised, or answered anything but a verb its hook may
    give, is a `deny` carrying `error`."""
    changed: Sparse[bool] = False
    """For `allow(value, why)`: it changed the value (the arguments, the result, the text)."""
    why: Sparse[str | None] = None
    """For a change: why, in the link's words."""
    reason: Sparse[str | None] = None
    """For `deny`: the reason, which the model reads verbatim (tool calls and results) or
    the caller's error carries (messages)."""
    question: Sparse[str | None] = None
    """For `ask`: the question put to a person."""
    error: Sparse[str | None] = None
    """What the link raised, or what it returned instead of a verb."""


class MiddlewareDecision(_Model):
    """The value of a `govern:...` write: what a middleware chain decided at one moment.
    (Since 1.1.)"""

    moment: Literal["tool_call", "tool_result", "input", "output"]
    """When: before a tool call runs, after it ran (before the model reads its result), on
    the user's message before the run commits it, on the answer before the caller gets it."""
    verb: Literal["allow", "deny", "ask"]
    """The chain's answer: the first link's answer other than `allow`, else `allow`."""
    links: list[LinkDecision]
    """Each link walked, in the order walked (tool results: from the last link to the first)."""
    not_walked: Sparse[list[str]] = []
    """The links after the one that decided, which were not asked."""
    changed: Sparse[bool] = False
    """Whether the value leaves the chain changed."""
    tool: Sparse[str | None] = None
    """For a tool moment: the tool."""
    k: Sparse[int | None] = None
    """For a tool moment: which call of the tool in the run, from 1."""
    call_id: Sparse[str | None] = None
    """For a tool moment: the tool call's id."""
    problems: Sparse[list[dict[str, str]]] = []
    """For changed arguments that break the tool's schema: each problem `{"path",
    "message"}`; the call is then denied."""
    resumed: Sparse[bool] = False
    """The walk goes on from a person's approval: the links before and the one that asked
    are in the decision written before the pause."""


class Approval(_Model):
    """The value of an `approval:<tool>#<k>` write: a person's answer to a link's `ask`.
    (Since 1.1.)"""

    verb: Literal["approve", "decline"]
    """`approve`: the chain goes on and the tool runs; `decline`: the model reads a denial."""
    by: str
    """Who decided."""
    at: str
    """When, ISO 8601 in UTC."""
    why: Sparse[str | None] = None
    """Why, in the person's words."""
    link: str
    """The link that asked."""
    question: str
    """What it asked."""


class OutputCheck(_Model):
    """The value of an `output:<n>` write: the n-th check of an answer against the agent's
    output schema. (Since 1.1.)"""

    attempt: int
    """The check's number in the run, from 1."""
    tier: Literal["answer", "fallback", "canned"]
    """What was checked: the model's answer, the fallback function's value, the canned value."""
    ok: bool
    """Whether it holds to the schema."""
    errors: Sparse[list[dict[str, str]]] = []
    """Why not: each problem `{"path", "message"}`."""
    retry: Sparse[bool] = False
    """The errors were sent back to the model (the message this stage wrote)."""
    error: Sparse[str | None] = None
    """For `fallback`: what the function raised."""
    value: Sparse[Any] = None
    """For `fallback` and `canned`: the value the typed caller received."""


# -- records ---------------------------------------------------------------------------


class SessionLink(_Model):
    """Which turn of which session a run is (a session's turns, in order, are a
    conversation)."""

    id: str
    """The session's id."""
    turn: int
    """The turn's number in the session, from 1."""
    previous: str | None = None
    """The run id of the session's turn before this one (None for its first)."""


class ReplayLink(_Model):
    """The run a replay re-ran (`af replay`): its recording is this one's reference."""

    run_id: str
    """The run id of the recording replayed."""
    file: str
    """The name of that recording's file (its name only: no folder of the machine)."""
    tools: Literal["run", "recorded"] = "run"
    """`run`: the tools ran again and their results were compared with the recorded ones;
    `recorded`: the recorded results were served and no tool ran."""
    then_live: Sparse[bool] = False
    """True when the replay went on past its first difference with the agent's own
    provider (`--then-live`)."""


class Header(_Model):
    """The first line of every recording: what ran."""

    t: Literal["header"] = "header"
    format: Literal["af.recording"] = "af.recording"
    """Always `af.recording`."""
    version: str = FORMAT_VERSION
    """The format's version, major.minor."""
    run_id: str
    """The run's id; also the file's name. Ids sort by start time."""
    started_at: str
    """When the run started, ISO 8601 in UTC."""
    af_version: str
    """The af that wrote the file."""
    python: str
    """The Python that ran the agent."""
    hash: Literal["sha256", "sha256-128"] = "sha256-128"
    """How the file's ids (every blob `id`, `ref` and call `hash`) are made: `sha256-128`
    (1.1), the first 128 bits of the sha256 of the value's canonical JSON, base64url without
    padding (22 characters); `sha256` (1.0), the hex sha256 (64 characters)."""
    agent: AgentInfo
    """The agent that ran."""
    provider: dict[str, Any]
    """The provider, as it describes itself (never its credentials)."""
    model: str
    """The model the agent was built with."""
    config: RunConfig
    """The agent's configuration."""
    redaction: RedactionInfo
    """The redaction policy every value in the file went through."""
    session: Sparse[SessionLink | None] = None
    """For a turn of a session: the session and the turn."""
    seed: Sparse[int | None] = None
    """The seed of the run's random source (`ctx.random`, `s.random`): each reader's
    generator is seeded from it and the reader's name, so a replay draws the same numbers.
    (Since 1.1.)"""
    replay_of: Sparse[ReplayLink | None] = None
    """For a replay (`af replay`): the run it re-ran. (Since 1.1.)"""


class Blob(_Model):
    """A value stored once and referred to by its hash."""

    t: Literal["blob"] = "blob"
    id: str
    """The id of the value's canonical JSON (sorted keys, no spaces, UTF-8), as the header's
    `hash` says."""
    value: Any
    """The value, as canonical JSON."""


class Commit(_Model):
    """One executed stage of the loop: what it read and what it wrote."""

    t: Literal["commit"] = "commit"
    seq: int
    """Position in the commit log, from 1, one more than the commit before."""
    rsid: str
    """Runtime stage id: the stage's name, `#`, a run-wide execution counter (`tool:search#7`)."""
    stage: Sparse[str] = ""
    """The stage's name: `seed`, `tool:<name>`, `finalize`, ... Not written since 1.1: it is
    the `rsid` up to its `#` (the reader fills it in)."""
    iter: int
    """The loop iteration, from 1 (0 for what happens before the first call)."""
    reads: list[tuple[str, int]] = []
    """Keys the stage read, each with the seq of the commit that wrote the version it read."""
    writes: list[Write] = []
    """Keys the stage wrote."""
    tool: Sparse[ToolOutcome | None] = None
    """For a tool stage: which call it answered and how it went."""


class Call(_Model):
    """A model call, written as it is sent: a commit of the `call-llm` stage that writes
    `call:<n>`. Rebuild the request from it with the blobs and messages it names."""

    t: Literal["call"] = "call"
    seq: int
    """Position in the commit log."""
    rsid: str
    """Runtime stage id of the `call-llm` stage."""
    iter: int
    """The loop iteration."""
    call: int
    """The call's number in the run, from 1, in the order calls were sent."""
    reads: list[tuple[str, int]] = []
    """Keys the call read, with the seq of the commit that wrote each."""
    model: Sparse[str] = ""
    """The model asked. Since 1.1, `model`, `system`, `tools`, `params` and `cache` are
    written together when any of them differs from the call before's, and left out when none
    does: a call line without `system` has the five of the last call line that has it (the
    reader fills them in); a line with it and without `params` or `cache` sends none."""
    system: Sparse[str] = ""
    """Id of the blob holding the system prompt's segments, in order, each with its source
    (a list of Segment). Calls with the same segments share one blob."""
    window: list[tuple[int, int]]
    """The messages sent, as inclusive ranges of message numbers (`[[1, 7]]`: messages 1 to 7)."""
    tools: Sparse[str] = ""
    """Id of the blob holding the tools visible to the model, in order, each with its
    source (a list of CallTool). Calls with the same tools share one blob."""
    params: Sparse[dict[str, Any]] = {}
    """Parameters sent (max_tokens, temperature, ...)."""
    cache: Sparse[list[dict[str, Any]]] = []
    """Cache breakpoints, provider-neutral: `{"slot", "index"}`."""
    hash: str
    """sha256 of the request, taken when it was sent; see docs/recording-format.md."""
    attempt: Sparse[AttemptInfo | None] = None
    """For agents with reliability rules: which attempt this is, and where it went. Its
    outcome follows: a `reply`, or an `error` event with the decision taken."""
    at: Sparse[float | None] = None
    """For a run that is a step of a flow: when the call was sent, in ms (to the µs) on the
    monotonic clock of the composed run, from the flow log's start (see `step_start.at`);
    absent for a run of its own."""


class Reply(_Model):
    """The model's answer to a call: the second commit of its `call-llm` stage. Writes
    `reply:<n>` and the assistant message."""

    t: Literal["reply"] = "reply"
    seq: int
    """Position in the commit log."""
    rsid: str
    """Runtime stage id of the `call-llm` stage (the same as its call's)."""
    iter: int
    """The loop iteration."""
    call: int
    """The call this answers."""
    writes: list[Write]
    """The assistant message written (`message:<n>`); since 1.1, then `route`: where the
    loop went after the reply (`tools`, `answer`, or `continue` for a paused turn), for the
    reply the loop goes on from (not a refused attempt's, nor a summarizer's)."""
    stop_reason: str
    """Why the model stopped: `end_turn`, `tool_use`, `max_tokens` (the answer was cut
    short), `stop_sequence`, `refusal`, `pause_turn` (the vendor paused a long turn; the loop
    sends the reply back to continue it), or the vendor's own word."""
    tool_calls: list[ReplyToolCall] = []
    """The tool calls the reply asked for, in order."""
    usage: Sparse[UsageInfo | None] = None
    """Tokens used, as reported (or estimated, and marked so)."""
    model: Sparse[str | None] = None
    """The model the vendor says answered."""
    response_id: Sparse[str | None] = None
    """The vendor's id for the response (`msg_...`, `chatcmpl-...`, `gen-...`), to find it in
    the vendor's logs. (Since 1.1.)"""
    unsent_params: Sparse[list[str]] = []
    """Params of the call the provider did not send, having no way to say them to its
    server (`thinking` to a server with no thinking parameter). (Since 1.1.)"""
    ms: float
    """How long the call took, in milliseconds."""
    decision: Sparse[AttemptDecision | None] = None
    """For agents with reliability rules, when a rule decided about this answer, or it was
    refused (any verb but `ok`): then the answer does not join the conversation, its
    message is stored but in no window, and the attempts go on (or fail fast)."""


class ToolStart(_Model):
    """A tool began running. Written by 1.0 only: since 1.1 a tool's call is in the reply
    that asked for it, and the tool's commit says how it went."""

    t: Literal["tool_start"] = "tool_start"
    rsid: str
    """Runtime stage id of the tool stage."""
    iter: int
    """The loop iteration."""
    name: str
    """The tool."""
    k: int
    """Which call of this tool in the run, from 1."""
    call_id: str
    """The tool call's id."""


class ToolProgress(_Model):
    """A running tool reported progress."""

    t: Literal["tool_progress"] = "tool_progress"
    rsid: str
    """Runtime stage id of the tool stage."""
    message: str
    """What a person is shown: the payload's `message` field, cut at 120 characters with
    the cut stated, or a line naming the tool and how many times it reported."""
    payload: Sparse[Any] = None
    """What the tool reported, as it reported it (redacted like every value). Never part of
    what the model reads. (Since 1.1.)"""


class ArgsInvalid(_Model):
    """A tool call's arguments broke the tool's schema."""

    t: Literal["args_invalid"] = "args_invalid"
    rsid: str
    """Runtime stage id of the tool stage."""
    name: str
    """The tool."""
    call_id: str
    """The tool call's id."""
    problems: list[dict[str, str]]
    """Each problem: `{"path", "message"}`; messages quote at most a short prefix of a value."""
    enforced: bool
    """True when the call was refused; false under `warn`, when it ran anyway."""


class ContextEvicted(_Model):
    """A message left the live window in a fold. It stays in the file as it was written;
    `hash` is its content hash, so a reader can check it is the very message."""

    t: Literal["context_evicted"] = "context_evicted"
    rsid: str
    """Runtime stage id of the `window` stage that folded it."""
    iter: int
    """The loop iteration."""
    fold: int
    """The fold (`fold:<n>`) it left in."""
    message: int
    """The message's number."""
    hash: str
    """The message's content hash (its blob id)."""


class ClockRead(_Model):
    """A reading of the run's clock by a rule, a fact or a tool (`s.now()`, `ctx.now()`),
    written when it is read, so that a replay serves the same instant back. (Since 1.1.)"""

    t: Literal["clock"] = "clock"
    by: str
    """Who read it: `tool:<name>#<k>` (the k-th call of a tool), or `iteration:<i>` (the
    rules and facts decided before the i-th call). A reader's readings are served back in
    the order they were read."""
    value: str
    """The instant read: ISO 8601 in UTC, to the microsecond."""


class ErrorEvent(_Model):
    """An error stopped the run, a stage, or one attempt at a model call (agents with
    reliability rules: `decision` says what came next). The run_end record says how the run
    ended."""

    t: Literal["error"] = "error"
    rsid: str | None = None
    """The stage where it happened, when there is one."""
    iter: int
    """The loop iteration."""
    call: Sparse[int | None] = None
    """The model call it concerns, when it concerns one."""
    error: ErrorInfo
    """What went wrong."""
    ms: Sparse[float | None] = None
    """For a failed attempt at a model call (agents with reliability rules): how long it
    took, in milliseconds."""
    decision: Sparse[AttemptDecision | None] = None
    """For agents with reliability rules: what was decided after this failed attempt (or,
    for a fail-fast before any attempt, the decision that gave up)."""
    attempt: Sparse[AttemptInfo | None] = None
    """For a fail-fast decided before an attempt was made (`call` absent): the attempt that
    was not made, and the providers passed over before it."""


class ContractEnd(_Model):
    """How the answer fared against the output schema, in `run_end`. (Since 1.1.)"""

    met: bool
    """Whether the answer the run ended with holds to the schema."""
    checks: int
    """Checks made (answers, and the tiers of typed runs)."""
    tier: Sparse[Literal["answer", "fallback", "canned"] | None] = None
    """Where the typed value came from, when there is one."""


class RunEnd(_Model):
    """The last record of a finished run: how it ended."""

    t: Literal["run_end"] = "run_end"
    status: Literal["answer", "error", "max_iterations", "interrupted", "paused"]
    """How the run ended."""
    iterations: int
    """Loop iterations run."""
    calls: int
    """Model calls made."""
    usage: UsageInfo
    """Tokens used by all calls together."""
    answer: Sparse[Write | None] = None
    """The answer (key `answer`), when the run produced one."""
    error: Sparse[ErrorInfo | None] = None
    """What stopped the run, for status `error`."""
    ms: float
    """How long the run took, in milliseconds."""
    redactions: int = 0
    """How many values the redaction policy replaced in this file."""
    contract: Sparse[ContractEnd | None] = None
    """For agents with an output schema: whether the answer met it. (Since 1.1.)"""


class PendingCall(_Model):
    """A tool call of the reply a paused run stopped at."""

    id: str
    """The tool call's id."""
    name: str
    """The tool."""
    k: int
    """Which call of the tool in the run, from 1."""
    state: Literal["decided", "asked", "waiting"]
    """`decided`: its chain was walked (its `govern:` write says how); `asked`: its chain
    asked the question; `waiting`: its chain is walked after the answer."""


class Checkpoint(_Model):
    """What a paused run continues from: plain JSON, with the file it is in."""

    reply: int
    """The call whose reply asked for the tools."""
    iteration: int
    """The loop iteration."""
    asked: str
    """The id of the tool call whose chain asked."""
    link: str
    """The link that asked."""
    question: str
    """What it asked."""
    calls: list[PendingCall]
    """The reply's tool calls, in order: none of them has run."""
    model_calls: int
    """Model calls made so far."""
    usage: UsageInfo
    """Tokens used so far."""
    tool_counts: dict[str, int]
    """Calls of each tool so far (the `k` of the next one)."""
    model: str
    """The model the run calls (what `configure()` resolved, or the agent's)."""
    last_text: str = ""
    """The last text the model wrote."""
    history: list[tuple[int, int]]
    """The run's history as ranges of message numbers."""
    live: Sparse[list[tuple[int, int]] | None] = None
    """For agents with a window strategy: the live window as ranges, in window order."""
    folded: Sparse[bool] = False
    """Whether a fold changed the live window."""
    request: Sparse[int | None] = None
    """The message number of the user message the run answers (window strategies)."""
    folds: Sparse[int] = 0
    """Folds so far."""
    last_call: Sparse[int] = 0
    """The agent's last call (what a token threshold measures)."""
    last_usage: Sparse[UsageInfo | None] = None
    """What the provider reported for it."""
    active_skills: Sparse[dict[str, int]] = {}
    """Skills activated so far, with the iteration each was."""
    last_tool_results: Sparse[dict[str, int]] = {}
    """Tool name -> the message holding its last result (what on-tool-return rules read)."""
    output_checks: Sparse[int] = 0
    """Checks of answers against the output schema so far."""
    ms: float = 0.0
    """Milliseconds the run had taken."""


class Pause(_Model):
    """A run paused for a person: a middleware link asked a question. The `run_end` that
    follows says `paused`; `af resume` (or `agent.resume()`) continues the run in this file,
    after a `resume` record. (Since 1.1.)"""

    t: Literal["pause"] = "pause"
    rsid: str
    """The `govern` stage that asked."""
    iter: int
    """The loop iteration."""
    checkpoint: Checkpoint
    """What the run continues from."""


class Resume(_Model):
    """A paused run continues: a person answered. Follows the paused `run_end`; what the
    continuation writes follows it, and a `run_end` closes it. (Since 1.1.)"""

    t: Literal["resume"] = "resume"
    verb: Literal["approve", "decline"]
    """The person's answer."""
    by: str
    """Who answered."""
    at: str
    """When, ISO 8601 in UTC."""
    why: Sparse[str | None] = None
    """Why, in their words."""
    af_version: str
    """The af that continued the run."""
    python: str
    """The Python that continued it."""


class ObserverError(_Model):
    """An observer attached with `watch()` or `attach()` raised. It sees no more records of
    the run; the run goes on. (Since 1.1.)"""

    t: Literal["observer_error"] = "observer_error"
    observer: str
    """The observer's name."""
    record: str
    """The type of the record it was handed."""
    error: ErrorInfo
    """What it raised."""


class Seal(_Model):
    """The last line of every write (since 1.1): a hash chain over the file, so that no
    record can be changed, added, removed or moved without `af verify` seeing it."""

    t: Literal["seal"] = "seal"
    h: str
    """The first 128 bits (base64url) of the sha256 of the seal before's 16 bytes (none for
    the first) followed by every byte of the file after that seal, up to this line."""


class UnknownRecord(BaseModel):
    """A record of a type this reader does not know, kept as it was."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    t: str


Record = Annotated[
    Header
    | Blob
    | Commit
    | Call
    | Reply
    | ToolStart
    | ToolProgress
    | ArgsInvalid
    | ContextEvicted
    | ClockRead
    | ErrorEvent
    | RunEnd
    | Pause
    | Resume
    | ObserverError
    | Seal,
    Field(discriminator="t"),
]
RECORD_ADAPTER: TypeAdapter[Record] = TypeAdapter(Record, config=ConfigDict(defer_build=True))
KNOWN_TYPES = frozenset(
    m.model_fields["t"].default
    for m in (
        Header,
        Blob,
        Commit,
        Call,
        Reply,
        ToolStart,
        ToolProgress,
        ArgsInvalid,
        ContextEvicted,
        ClockRead,
        ErrorEvent,
        RunEnd,
        Pause,
        Resume,
        ObserverError,
        Seal,
    )
)


def record_schema(
    adapter: TypeAdapter[Any] | None = None, modules: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The JSON Schema of a record (of ``adapter``'s records; by default an agent's
    recording's), each field described by its docstring here or in ``modules``."""
    import ast
    import inspect
    import sys

    docs: dict[str, dict[str, str]] = {}
    for module in (__name__, *modules):
        for node in ast.parse(inspect.getsource(sys.modules[module])).body:
            if not isinstance(node, ast.ClassDef):
                continue
            fields = docs.setdefault(node.name, {})
            for before, after in zip(node.body, node.body[1:], strict=False):
                if (
                    isinstance(before, ast.AnnAssign)
                    and isinstance(before.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    fields[before.target.id] = inspect.cleandoc(after.value.value)
    schema = (adapter or RECORD_ADAPTER).json_schema()
    for name, definition in schema.get("$defs", {}).items():
        for field, prop in definition.get("properties", {}).items():
            doc = docs.get(name, {}).get(field)
            if doc and "description" not in prop:
                prop["description"] = doc
    return schema


# -- writing -----------------------------------------------------------------------------

_P = ParamSpec("_P")
_M = TypeVar("_M")

# A model's instance state, set directly: what pydantic's own model_construct sets.
_slots = BaseModel.__dict__
_new = object.__new__
_set_dict = object.__setattr__
_set_fields_set = _slots["__pydantic_fields_set__"].__set__
_set_extra = _slots["__pydantic_extra__"].__set__
_set_private = _slots["__pydantic_private__"].__set__
_FRESH = object()
"""The default of a field whose default is a list or a dict: each record gets its own."""

_WRITERS: dict[type, Callable[[Any], Any]] = {}
"""For each model: a function of an instance returning what orjson writes for it."""


def _compile(name: str, source: list[str], names: dict[str, Any]) -> Any:
    """The function ``f`` that ``source`` defines, named ``name``: made once per model from
    its own field names, as dataclasses makes ``__init__``."""
    namespace: dict[str, Any] = {}
    exec("\n".join(source), names, namespace)  # noqa: S102
    f = namespace["f"]
    f.__name__ = f.__qualname__ = name
    return f


def _holds(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """Whether a field holds a model: (`one` | `optional` | `list`, the model), else None."""
    args = get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "one", annotation
    if get_origin(annotation) in (Union, UnionType) and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return "optional", inner
    if get_origin(annotation) is list and len(args) == 1:
        inner = args[0]
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            return "list", inner
    return None


def _conversion(name: str, annotation: Any, names: dict[str, Any]) -> str | None:
    """How a field's value ``v`` is written when it holds models (None: as it is)."""
    held = _holds(annotation)
    if held is None:
        return None
    how, model = held
    inner = _WRITERS.get(model) or _writer(model)
    # A model written as its own __dict__ is read by a C getter: no Python call per item.
    names[f"w_{name}"] = _DICT if inner is _own_dict else inner
    if how == "list":
        return f"list(map(w_{name}, v))"
    if how == "optional":
        return f"None if v is None else w_{name}(v)"
    return f"w_{name}(v)"


def _absent(name: str, f: Any, names: dict[str, Any]) -> str | None:
    """The test of a sparse field's value ``v`` being its default (None: not sparse)."""
    if not any(m is _SPARSE for m in f.metadata):
        return None
    if f.default is None:
        return "v is None"
    names[f"d_{name}"] = f.default
    return f"v == d_{name}"


def _writer(cls: type) -> Callable[[Any], Any]:
    """The function writing ``cls``'s instances as plain JSON: fields in order, the sparse
    ones only when they differ from their default, the models they hold written in turn.
    A model with no sparse, extra or model fields is written as its own ``__dict__``."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise TypeError(f"{cls.__name__} is not JSON")
    names: dict[str, Any] = {}
    lines = ["def f(o):", "    out = o.__dict__.copy()"]
    for name, f in cls.model_fields.items():
        key = repr(name)
        convert = _conversion(name, f.annotation, names)
        absent = _absent(name, f, names)
        if absent is not None:
            lines += [f"    v = out[{key}]", f"    if {absent}:", f"        del out[{key}]"]
            if convert is not None:
                lines += ["    else:", f"        out[{key}] = {convert}"]
        elif convert is not None:
            lines += [f"    v = out[{key}]", f"    out[{key}] = {convert}"]
    if cls.model_config.get("extra") == "allow":
        lines.append("    if o.__pydantic_extra__: out.update(o.__pydantic_extra__)")
    lines.append("    return out")
    write = _own_dict if len(lines) == 3 else _compile(f"write({cls.__name__})", lines, names)
    _WRITERS[cls] = write
    return write


def _own_dict(obj: Any) -> Any:
    return obj.__dict__


_DICT = attrgetter("__dict__")


def as_json(obj: Any) -> Any:
    """A model as orjson writes it: its fields in order, sparse ones at their default left
    out (orjson calls this for every object it cannot write itself)."""
    write = _WRITERS.get(type(obj)) or _writer(type(obj))
    return write(obj)


def dump(value: Any, *, canonical: bool = False) -> bytes:
    """``value`` (a record, a model, or plain JSON holding them) as the JSON af writes;
    ``canonical``: with keys sorted, as blobs are hashed."""
    return orjson.dumps(value, default=as_json, option=orjson.OPT_SORT_KEYS if canonical else 0)


def trusted(cls: Callable[_P, _M]) -> Callable[_P, _M]:
    """A constructor of the model ``cls`` that takes its arguments as they are, unvalidated,
    with the same signature: for the records af writes itself, which are made of values of
    the right types (mypy checks the calls). Defaults fill the fields not given. Its
    records have every field set (``model_fields_set``)."""
    model = cast(type[BaseModel], cls)
    fields = model.model_fields
    names: dict[str, Any] = {
        "cls": model,
        "new": _new,
        "set_dict": _set_dict,
        "set_fields_set": _set_fields_set,
        "set_extra": _set_extra,
        "set_private": _set_private,
        "FRESH": _FRESH,
        "every": set(fields),
    }
    params, entries = [], []
    for name, f in fields.items():
        if f.is_required():
            params.append(name)
            entries.append(f"{name!r}: {name}")
        elif isinstance(f.default, list | dict):
            params.append(f"{name}=FRESH")
            names[f"kind_{name}"] = type(f.default)
            entries.append(f"{name!r}: kind_{name}() if {name} is FRESH else {name}")
        else:
            names[f"d_{name}"] = f.default
            params.append(f"{name}=d_{name}")
            entries.append(f"{name!r}: {name}")
    make = _compile(
        f"trusted({model.__name__})",
        [
            f"def f(*, {', '.join(params)}):",
            "    r = new(cls)",
            f"    set_dict(r, '__dict__', {{{', '.join(entries)}}})",
            # Shared: a frozen record's set is never changed in place (model_copy copies it).
            "    set_fields_set(r, every)",
            "    set_extra(r, None)",
            "    set_private(r, None)",
            "    return r",
        ],
        names,
    )
    return cast(Callable[_P, _M], make)


Line = NewType("Line", dict[str, Any])
"""A record as it is written, made by :func:`line` from its model's fields."""


def line(cls: Callable[_P, Any], *, plain: bool = False) -> Callable[_P, Line]:
    """A function taking the fields of the model ``cls`` (its signature) and returning the
    record as :func:`dump` writes an instance of it, without making the instance: for the
    lines the writer makes and writes at once (a commit, a call), where an instance would
    be made only to be taken apart. ``plain``: the fields that hold models are given as
    they are written (lines, or ``as_json`` of a model), not as models, so nothing is
    converted (mypy sees the model's signature: such a builder is typed ``Any``)."""
    model = cast(type[BaseModel], cls)
    names: dict[str, Any] = {}
    params: list[str] = []
    before: list[str] = []
    literal: list[str] = []
    after: list[str] = []
    for name, f in model.model_fields.items():
        if f.is_required():
            params.append(name)
        else:
            names[f"d_{name}"] = f.default
            params.append(f"{name}=d_{name}")
        convert = None if plain else _conversion(name, f.annotation, names)
        absent = _absent(name, f, names)
        value = name
        if convert is not None:
            # Worked out first, in a local of its own, whatever its place in the line.
            before.append(f"    v = {name}")
            before.append(f"    {name}_ = {convert}")
            value = f"{name}_"
        if absent is None and not after:  # the leading fields, always written: a literal
            literal.append(f"{name!r}: {value}")
        elif absent is None:
            after.append(f"    out[{name!r}] = {value}")
        else:
            after.append(f"    v = {name}")
            after.append(f"    if not ({absent}): out[{name!r}] = {value}")
    lines = [
        f"def f(*, {', '.join(params)}):",
        *before,
        f"    out = {{{', '.join(literal)}}}",
        *after,
        "    return out",
    ]
    return cast(Callable[_P, Line], _compile(f"line({model.__name__})", lines, names))
