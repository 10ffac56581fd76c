"""The records of a flow's recording: a composed run (Sequence, Parallel, Conditional,
Loop) written as one log of its steps, its decisions with their evidence, its merges and
loop turns, each agent step naming the recording of its agent's run.

A flow's recording is ``<run_id>.jsonl`` and, while it runs, the folder ``<run_id>/``
beside it holding each agent step's run as an ordinary recording (every call in it rebuilds
and verifies as an agent's does). Branches that run at the same time write to their own
files, and the flow's own records are written by one writer on the event loop, each line
whole: nothing interleaves inside a line. When the flow ends its runs are folded into the
log (:class:`RunFrame`) and their files removed: a finished flow is one file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union, get_args

from pydantic import ConfigDict, Field, TypeAdapter

from afcore.recording._models import (
    FORMAT_VERSION,
    ErrorInfo,
    Record,
    RedactionInfo,
    ReplayLink,
    Sparse,
    UsageInfo,
    _Model,
    record_schema,
)

__all__ = [
    "EVERY_RECORD_ADAPTER",
    "FLOW_TYPES",
    "FlowEnd",
    "FlowRecord",
    "FlowHeader",
    "FlowNode",
    "RunFrame",
    "StepDecision",
    "StepEnd",
    "StepMerge",
    "StepStart",
    "VerdictInfo",
    "every_record_schema",
]


class FlowNode(_Model):
    """A step of the composition as it was built."""

    name: str
    kind: Literal["sequence", "parallel", "conditional", "loop", "agent", "function"]
    steps: Sparse[list[Any]] = []
    """A flow's steps, branches or body, in the order given: each a `FlowNode`."""
    agent: Sparse[str | None] = None
    """For an agent's step: the agent's name."""
    source: Sparse[str | None] = None
    """For a function, its qualified name; for an agent, where it was built."""


class FlowHeader(_Model):
    """The first line of a flow's recording."""

    t: Literal["flow"] = "flow"
    format: Literal["af.recording"] = "af.recording"
    version: str = FORMAT_VERSION
    run_id: str
    started_at: str
    af_version: str
    python: str
    flow: FlowNode
    """The composition: the top flow and everything under it."""
    redaction: RedactionInfo
    """The policy the flow's own records went through (the agents' files name their own)."""
    source: Sparse[str | None] = None
    """Where the flow was loaded from, as `af run` loads it (`examples/router.py:router`,
    `afcore.demos.router:build_flow`): what `af replay` runs again."""
    replay_of: Sparse[ReplayLink | None] = None
    """For a replay's log (`af replay`): the flow run it re-ran (its agents' runs name
    theirs)."""


class StepStart(_Model):
    """A step began (written before it runs: a crash inside a step leaves a trace)."""

    t: Literal["step_start"] = "step_start"
    path: str
    """The step's place: names from the top joined by `/`, a loop body's turn after `@`
    (`review/draft@2`); the top flow is `""`."""
    kind: str
    input: Any = None
    """The message it was given."""
    at: Sparse[float | None] = None
    """When it started, in ms (to the µs) on a monotonic clock from the flow log's start
    (its header written); the calls of the flow's agents' runs carry `at` on the same clock
    from the same start, so calls of branches running at the same time order by it."""


class StepEnd(_Model):
    """A step ended."""

    t: Literal["step_end"] = "step_end"
    path: str
    status: Literal["ok", "error", "max_iterations", "interrupted", "paused"]
    output: Any = None
    """Its output (an agent's answer, a function's value, a flow's last step's)."""
    ms: float = 0.0
    produced_by: Sparse[str | None] = None
    """The path of the step whose output this output is."""
    writes: Sparse[dict[str, Any]] = {}
    """The state keys it wrote and the last value written to each (its own name among
    them; a key it removed: null)."""
    reads: Sparse[list[tuple[str, Any]]] = []
    """For a function, the values it read through `s`: `[key, value]`, values cut to a line."""
    run: Sparse[str | None] = None
    """For an agent's step: its run's recording, relative to this file's folder."""
    run_id: Sparse[str | None] = None
    calls: Sparse[int] = 0
    usage: Sparse[UsageInfo | None] = None
    error: Sparse[ErrorInfo | None] = None


class VerdictInfo(_Model):
    name: str
    """The branch the predicate guards; `until` for a loop's."""
    fired: bool
    reason: str
    reads: list[tuple[str, Any]] = []
    """The evidence: every value the predicate read, `[key, value]`."""
    error: Sparse[str | None] = None


class StepDecision(_Model):
    """Where a Conditional went, or whether a Loop goes round again, and why."""

    t: Literal["decision"] = "decision"
    path: str
    """The Conditional's or the Loop's path."""
    chosen: str | None
    """A Conditional's branch (null: none held, no otherwise, the message passed through);
    a loop's `again`, `done` or `limit`; null when a predicate could not decide."""
    verdicts: list[VerdictInfo] = []
    turn: Sparse[int | None] = None
    """For a loop, the turn after which it was asked."""


class StepMerge(_Model):
    """A Parallel's merge: what it read, wrote and made of its branches."""

    t: Literal["merge"] = "merge"
    path: str
    branches: dict[str, str]
    """Each branch's status."""
    reads: list[tuple[str, Any]] = []
    writes: Sparse[dict[str, Any]] = {}
    output: Any = None
    error: Sparse[ErrorInfo | None] = None


class FlowEnd(_Model):
    """The last line of a flow's recording."""

    t: Literal["flow_end"] = "flow_end"
    status: Literal["answer", "error", "interrupted", "paused"]
    answer: str = ""
    produced_by: str | None = None
    """The path of the step whose output is the answer."""
    calls: int = 0
    iterations: int = 0
    usage: UsageInfo
    duration_ms: float = 0.0
    error: Sparse[ErrorInfo | None] = None
    paused: Sparse[str | None] = None
    """For status `paused`: the path of the step that asked a person."""


class RunFrame(_Model):
    """An agent step's run, folded into the log once the flow ended: this line, then the
    run's file byte for byte, each of its lines after one space (so that every line of the
    log is still a JSON value, and none of the run's seals reads as one of the log's), and
    a newline after a last line that had none. The log's next seal covers it all."""

    t: Literal["run"] = "run"
    path: str
    """The run's file as the log names it (`step_end.run`), relative to the log's folder."""
    bytes: int
    """The run's file's length."""
    sha256: str
    """The sha256 of the run's file, in hex."""
    lines: int
    """How many lines follow (the run's lines, a last one without a newline counted)."""


FlowRecord = FlowHeader | StepStart | StepEnd | StepDecision | StepMerge | FlowEnd | RunFrame

FLOW_TYPES = {
    m.model_fields["t"].default: m
    for m in (FlowHeader, StepStart, StepEnd, StepDecision, StepMerge, FlowEnd, RunFrame)
}
"""Record type -> its model, for the records of a flow's recording."""

_EVERY: Any = Annotated[
    Union[get_args(get_args(Record)[0]) + get_args(FlowRecord)],  # noqa: UP007 - built from tuples
    Field(discriminator="t"),
]
EVERY_RECORD_ADAPTER: TypeAdapter[Any] = TypeAdapter(_EVERY, config=ConfigDict(defer_build=True))
"""Every record of an agent's recording or a flow's log (``af schema``)."""


def every_record_schema() -> dict[str, Any]:
    """The JSON Schema of every record of an agent's recording or a flow's log, each field
    described by its docstring."""
    return record_schema(EVERY_RECORD_ADAPTER, (__name__,))
