"""The records as frozen msgspec Structs: what the readers hand out. Generated from the
record models (``_models.py``, ``_flows.py``) by ``scripts/make_structs.py``: do not edit.

Each class has its model's name, fields (in order), defaults and types; a record type is
tagged by its ``t`` (a class attribute here, the first key when dumped). ``_typed.py`` makes
them, and leaves to the models what msgspec would not take as they take it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from msgspec import Struct


class _Value(Struct, frozen=True, kw_only=True):
    """A value written inside a record."""


class _Record(Struct, frozen=True, kw_only=True, tag_field="t"):
    """A line of a recording or a flow's log, tagged by its ``t``."""

    t: ClassVar[str]


class UnknownRecord(Struct, frozen=True, kw_only=True):
    """A record of a type this reader does not know, kept as it was: its ``t`` and the rest
    of its fields, in their order."""

    t: str
    fields: dict[str, Any] = {}


class AgentInfo(_Value, frozen=True, kw_only=True):
    name: str
    source: str | None = None


class Approval(_Value, frozen=True, kw_only=True):
    verb: Literal["approve", "decline"]
    by: str
    at: str
    why: str | None = None
    link: str
    question: str


class ArgsInvalid(_Record, frozen=True, kw_only=True, tag="args_invalid"):
    t: ClassVar[str] = "args_invalid"
    rsid: str
    name: str
    call_id: str
    problems: list[dict[str, str]]
    enforced: bool


class AttemptDecision(_Value, frozen=True, kw_only=True):
    verb: str
    rule: str | None = None
    kind: str | None = None
    reason: str | None = None
    asked: str | None = None
    delay: float = 0.0


class AttemptInfo(_Value, frozen=True, kw_only=True):
    n: int
    provider: str
    via: str
    skipped: list[SkippedProvider] = []


class Blob(_Record, frozen=True, kw_only=True, tag="blob"):
    t: ClassVar[str] = "blob"
    id: str
    value: Any


class BreakerInfo(_Value, frozen=True, kw_only=True):
    failures: int
    cooldown: float


class Call(_Record, frozen=True, kw_only=True, tag="call"):
    t: ClassVar[str] = "call"
    seq: int
    rsid: str
    iter: int
    call: int
    reads: list[tuple[str, int]] = []
    model: str = ""
    system: str = ""
    window: list[tuple[int, int]]
    tools: str = ""
    params: dict[str, Any] = {}
    cache: list[dict[str, Any]] = []
    hash: str
    attempt: AttemptInfo | None = None
    at: float | None = None


class CallTool(_Value, frozen=True, kw_only=True):
    name: str
    ref: str
    source: SourceInfo


class CeilingRefusal(_Value, frozen=True, kw_only=True):
    size: int
    max_chars: int
    narrow_by: list[str] = []
    declared_status: str | None = None


class Checkpoint(_Value, frozen=True, kw_only=True):
    reply: int
    iteration: int
    asked: str
    link: str
    question: str
    calls: list[PendingCall]
    model_calls: int
    usage: UsageInfo
    tool_counts: dict[str, int]
    model: str
    last_text: str = ""
    history: list[tuple[int, int]]
    live: list[tuple[int, int]] | None = None
    folded: bool = False
    request: int | None = None
    folds: int = 0
    last_call: int = 0
    last_usage: UsageInfo | None = None
    active_skills: dict[str, int] = {}
    last_tool_results: dict[str, int] = {}
    output_checks: int = 0
    ms: float = 0.0


class ClockRead(_Record, frozen=True, kw_only=True, tag="clock"):
    t: ClassVar[str] = "clock"
    by: str
    value: str


class Commit(_Record, frozen=True, kw_only=True, tag="commit"):
    t: ClassVar[str] = "commit"
    seq: int
    rsid: str
    stage: str = ""
    iter: int
    reads: list[tuple[str, int]] = []
    writes: list[Write] = []
    tool: ToolOutcome | None = None


class ContextEvicted(_Record, frozen=True, kw_only=True, tag="context_evicted"):
    t: ClassVar[str] = "context_evicted"
    rsid: str
    iter: int
    fold: int
    message: int
    hash: str


class ContractEnd(_Value, frozen=True, kw_only=True):
    met: bool
    checks: int
    tier: Literal["answer", "fallback", "canned"] | None = None


class EffectInfo(_Value, frozen=True, kw_only=True):
    kind: str
    instruction_id: str | None = None
    lease: str | None = None
    outcome: Literal["accepted", "refused"]
    why: str | None = None


class ErrorEvent(_Record, frozen=True, kw_only=True, tag="error"):
    t: ClassVar[str] = "error"
    rsid: str | None = None
    iter: int
    call: int | None = None
    error: ErrorInfo
    ms: float | None = None
    decision: AttemptDecision | None = None
    attempt: AttemptInfo | None = None


class ErrorInfo(_Value, frozen=True, kw_only=True):
    kind: str
    message: str
    reason: str | None = None
    status: int | None = None
    mid_stream: bool = False
    error_type: str | None = None
    request_id: str | None = None
    details: dict[str, Any] | None = None
    retry_after: float | None = None


class FlowEnd(_Record, frozen=True, kw_only=True, tag="flow_end"):
    t: ClassVar[str] = "flow_end"
    status: Literal["answer", "error", "interrupted", "paused"]
    answer: str = ""
    produced_by: str | None = None
    calls: int = 0
    iterations: int = 0
    usage: UsageInfo
    duration_ms: float = 0.0
    error: ErrorInfo | None = None
    paused: str | None = None


class FlowHeader(_Record, frozen=True, kw_only=True, tag="flow"):
    t: ClassVar[str] = "flow"
    format: Literal["af.recording"] = "af.recording"
    version: str = "1.1"
    run_id: str
    started_at: str
    af_version: str
    python: str
    flow: FlowNode
    redaction: RedactionInfo
    source: str | None = None
    replay_of: ReplayLink | None = None


class FlowNode(_Value, frozen=True, kw_only=True):
    name: str
    kind: Literal["sequence", "parallel", "conditional", "loop", "agent", "function"]
    steps: list[Any] = []
    agent: str | None = None
    source: str | None = None


class Fold(_Value, frozen=True, kw_only=True):
    strategy: str
    iteration: int
    folded: list[str]
    messages: list[tuple[int, int]]
    count: int
    before: int
    after: int
    keep_recent_turns: int
    refusals: list[FoldRefusal] = []
    measured: int | None = None
    measured_at: int | None = None
    threshold: int | None = None
    summary: FoldSummary | None = None


class FoldRefusal(_Value, frozen=True, kw_only=True):
    reason: str
    messages: list[tuple[int, int]]
    writers: list[str]
    error: str | None = None


class FoldSummary(_Value, frozen=True, kw_only=True):
    message: int
    call: int
    by: str


class Header(_Record, frozen=True, kw_only=True, tag="header"):
    t: ClassVar[str] = "header"
    format: Literal["af.recording"] = "af.recording"
    version: str = "1.1"
    run_id: str
    started_at: str
    af_version: str
    python: str
    hash: Literal["sha256", "sha256-128"] = "sha256-128"
    agent: AgentInfo
    provider: dict[str, Any]
    model: str
    config: RunConfig
    redaction: RedactionInfo
    session: SessionLink | None = None
    seed: int | None = None
    replay_of: ReplayLink | None = None


class InjectionDecision(_Value, frozen=True, kw_only=True):
    id: str
    flavor: str
    trigger: str
    fired: bool
    reason: str
    reads: list[tuple[str] | tuple[str, Any]] = []
    error: str | None = None


class InjectionDecisions(_Value, frozen=True, kw_only=True):
    evaluated: int
    decisions: list[InjectionDecision]
    unchanged: int


class InjectionInfo(_Value, frozen=True, kw_only=True):
    id: str
    flavor: str
    trigger: str
    after: str | None = None
    slots: list[str]
    cache: str
    tools: list[str] = []


class LinkDecision(_Value, frozen=True, kw_only=True):
    link: str
    verb: Literal["allow", "deny", "ask"]
    changed: bool = False
    why: str | None = None
    reason: str | None = None
    question: str | None = None
    error: str | None = None


class MiddlewareDecision(_Value, frozen=True, kw_only=True):
    moment: Literal["tool_call", "tool_result", "input", "output"]
    verb: Literal["allow", "deny", "ask"]
    links: list[LinkDecision]
    not_walked: list[str] = []
    changed: bool = False
    tool: str | None = None
    k: int | None = None
    call_id: str | None = None
    problems: list[dict[str, str]] = []
    resumed: bool = False


class MiddlewareInfo(_Value, frozen=True, kw_only=True):
    name: str
    hooks: list[str]


class ObserverError(_Record, frozen=True, kw_only=True, tag="observer_error"):
    t: ClassVar[str] = "observer_error"
    observer: str
    record: str
    error: ErrorInfo


class OutputCheck(_Value, frozen=True, kw_only=True):
    attempt: int
    tier: Literal["answer", "fallback", "canned"]
    ok: bool
    errors: list[dict[str, str]] = []
    retry: bool = False
    error: str | None = None
    value: Any = None


class OutputSchemaInfo(_Value, frozen=True, kw_only=True):
    name: str
    json_schema: dict[str, Any]
    retries: int
    fallback: bool = False
    canned: bool = False


class Pause(_Record, frozen=True, kw_only=True, tag="pause"):
    t: ClassVar[str] = "pause"
    rsid: str
    iter: int
    checkpoint: Checkpoint


class PendingCall(_Value, frozen=True, kw_only=True):
    id: str
    name: str
    k: int
    state: Literal["decided", "asked", "waiting"]


class RedactionInfo(_Value, frozen=True, kw_only=True):
    fields: list[str] = []
    patterns: list[str] = []
    env: list[str] = []


class ReliabilityInfo(_Value, frozen=True, kw_only=True):
    pre_check: list[ReliabilityRuleInfo]
    post_decide: list[ReliabilityRuleInfo]
    providers: list[TargetInfo]
    max_attempts: int
    fallback: TargetInfo | None = None
    circuit_breaker: BreakerInfo | None = None


class ReliabilityRuleInfo(_Value, frozen=True, kw_only=True):
    rule: str
    then: str
    delay: int | float | str | None = None


class RepeatInfo(_Value, frozen=True, kw_only=True):
    occurrences: int
    args_fingerprint: str
    result_fingerprint: str


class ReplayLink(_Value, frozen=True, kw_only=True):
    run_id: str
    file: str
    tools: Literal["run", "recorded"] = "run"
    then_live: bool = False


class Reply(_Record, frozen=True, kw_only=True, tag="reply"):
    t: ClassVar[str] = "reply"
    seq: int
    rsid: str
    iter: int
    call: int
    writes: list[Write]
    stop_reason: str
    tool_calls: list[ReplyToolCall] = []
    usage: UsageInfo | None = None
    model: str | None = None
    response_id: str | None = None
    unsent_params: list[str] = []
    ms: float
    decision: AttemptDecision | None = None


class ReplyToolCall(_Value, frozen=True, kw_only=True):
    id: str
    name: str
    k: int


class Resume(_Record, frozen=True, kw_only=True, tag="resume"):
    t: ClassVar[str] = "resume"
    verb: Literal["approve", "decline"]
    by: str
    at: str
    why: str | None = None
    af_version: str
    python: str


class RunConfig(_Value, frozen=True, kw_only=True):
    max_iterations: int
    tool_arg_validation: Literal["enforce", "warn", "off"]
    tools: list[ToolInfo] = []
    params: dict[str, Any] = {}
    injections: list[InjectionInfo] = []
    tool_providers: list[str] = []
    configure: str | None = None
    window: WindowInfo | None = None
    reliability: ReliabilityInfo | None = None
    tool_middleware: list[MiddlewareInfo] = []
    message_middleware: list[MiddlewareInfo] = []
    output_schema: OutputSchemaInfo | None = None
    max_tool_result_chars: int | None = None
    repeated_call_nudge: bool = True
    limits_travel: bool = False
    watchers: list[str] = []


class RunEnd(_Record, frozen=True, kw_only=True, tag="run_end"):
    t: ClassVar[str] = "run_end"
    status: Literal["answer", "error", "max_iterations", "interrupted", "paused"]
    iterations: int
    calls: int
    usage: UsageInfo
    answer: Write | None = None
    error: ErrorInfo | None = None
    ms: float
    redactions: int = 0
    contract: ContractEnd | None = None


class RunFrame(_Record, frozen=True, kw_only=True, tag="run"):
    t: ClassVar[str] = "run"
    path: str
    bytes: int
    sha256: str
    lines: int


class Seal(_Record, frozen=True, kw_only=True, tag="seal"):
    t: ClassVar[str] = "seal"
    h: str


class Segment(_Value, frozen=True, kw_only=True):
    text: str | None = None
    ref: str | None = None
    source: SourceInfo


class SessionLink(_Value, frozen=True, kw_only=True):
    id: str
    turn: int
    previous: str | None = None


class SkippedProvider(_Value, frozen=True, kw_only=True):
    provider: str
    model: str
    via: str
    decision: AttemptDecision


class SlotDelta(_Value, frozen=True, kw_only=True):
    base: str
    keep: int
    then: list[Any]


class SourceInfo(_Value, frozen=True, kw_only=True):
    kind: str
    id: str | None = None
    trigger: str | None = None
    reason: str | None = None
    cache: str | None = None


class StepDecision(_Record, frozen=True, kw_only=True, tag="decision"):
    t: ClassVar[str] = "decision"
    path: str
    chosen: str | None
    verdicts: list[VerdictInfo] = []
    turn: int | None = None


class StepEnd(_Record, frozen=True, kw_only=True, tag="step_end"):
    t: ClassVar[str] = "step_end"
    path: str
    status: Literal["ok", "error", "max_iterations", "interrupted", "paused"]
    output: Any = None
    ms: float = 0.0
    produced_by: str | None = None
    writes: dict[str, Any] = {}
    reads: list[tuple[str, Any]] = []
    run: str | None = None
    run_id: str | None = None
    calls: int = 0
    usage: UsageInfo | None = None
    error: ErrorInfo | None = None


class StepMerge(_Record, frozen=True, kw_only=True, tag="merge"):
    t: ClassVar[str] = "merge"
    path: str
    branches: dict[str, str]
    reads: list[tuple[str, Any]] = []
    writes: dict[str, Any] = {}
    output: Any = None
    error: ErrorInfo | None = None


class StepStart(_Record, frozen=True, kw_only=True, tag="step_start"):
    t: ClassVar[str] = "step_start"
    path: str
    kind: str
    input: Any = None
    at: float | None = None


class SubRun(_Value, frozen=True, kw_only=True):
    run_id: str
    recording: str | None = None
    agent: str
    status: str


class TargetInfo(_Value, frozen=True, kw_only=True):
    provider: dict[str, Any]
    model: str | None = None


class ToolInfo(_Value, frozen=True, kw_only=True):
    name: str
    ref: str


class ToolOutcome(_Value, frozen=True, kw_only=True):
    name: str
    k: int
    call_id: str
    status: Literal["ok", "error", "rejected", "unknown_tool", "interrupted", "denied", "withheld"]
    ms: float
    result_status: (
        Literal[
            "success", "failure", "denied", "invalid", "partial", "pending", "absent", "interrupted"
        ]
        | None
    ) = None
    source: str | None = None
    ceiling: CeilingRefusal | None = None
    truncated: Truncation | None = None
    repeat: RepeatInfo | None = None
    effects: list[EffectInfo] = []
    run: SubRun | None = None


class ToolProgress(_Record, frozen=True, kw_only=True, tag="tool_progress"):
    t: ClassVar[str] = "tool_progress"
    rsid: str
    message: str
    payload: Any = None


class ToolStart(_Record, frozen=True, kw_only=True, tag="tool_start"):
    t: ClassVar[str] = "tool_start"
    rsid: str
    iter: int
    name: str
    k: int
    call_id: str


class Truncation(_Value, frozen=True, kw_only=True):
    size: int
    kept: int


class UsageInfo(_Value, frozen=True, kw_only=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    estimated: bool = False


class VerdictInfo(_Value, frozen=True, kw_only=True):
    name: str
    fired: bool
    reason: str
    reads: list[tuple[str, Any]] = []
    error: str | None = None


class WindowInfo(_Value, frozen=True, kw_only=True):
    strategy: str
    keep_recent_turns: int
    threshold_tokens: int | None = None
    summarizer: str | None = None
    model: str | None = None


class Write(_Value, frozen=True, kw_only=True):
    key: str
    value: Any = None
    ref: str | None = None
    source: SourceInfo | None = None


TYPES: dict[str, type[_Record]] = {
    "args_invalid": ArgsInvalid,
    "blob": Blob,
    "call": Call,
    "clock": ClockRead,
    "commit": Commit,
    "context_evicted": ContextEvicted,
    "decision": StepDecision,
    "error": ErrorEvent,
    "flow": FlowHeader,
    "flow_end": FlowEnd,
    "header": Header,
    "merge": StepMerge,
    "observer_error": ObserverError,
    "pause": Pause,
    "reply": Reply,
    "resume": Resume,
    "run": RunFrame,
    "run_end": RunEnd,
    "seal": Seal,
    "step_end": StepEnd,
    "step_start": StepStart,
    "tool_progress": ToolProgress,
    "tool_start": ToolStart,
}
"""Each record type, by its ``t``."""

Record = (
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
    | Seal
)
"""A line of an agent's recording."""

FlowRecord = FlowHeader | StepStart | StepEnd | StepDecision | StepMerge | FlowEnd | RunFrame
"""A line of a flow's log."""

FLOW_TYPES: dict[str, type[FlowRecord]] = {
    "flow": FlowHeader,
    "step_start": StepStart,
    "step_end": StepEnd,
    "decision": StepDecision,
    "merge": StepMerge,
    "flow_end": FlowEnd,
    "run": RunFrame,
}
"""Each record type of a flow's log, by its ``t``."""

KNOWN_TYPES = frozenset(
    [
        "args_invalid",
        "blob",
        "call",
        "clock",
        "commit",
        "context_evicted",
        "error",
        "header",
        "observer_error",
        "pause",
        "reply",
        "resume",
        "run_end",
        "seal",
        "tool_progress",
        "tool_start",
    ]
)
"""The types of an agent's recording's records."""
