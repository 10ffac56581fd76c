"""A flow's run as one timeline: every agent step's calls, from every agent's recording, in
the order they happened, each with the step that ran it, so that a front end scrubs across
agents as it scrubs one run's calls.

Since 1.1 a flow writes when each step started and each of its agents' calls was sent
(``at``: ms on one monotonic clock from the flow's start), and the timeline is in that
order. A file without them (written before) holds durations only: a step's ``ms``, a
reply's ``ms``, a tool call's ``ms``, and the times are placed from them: a step starts
when the step before it in its flow ended (a Parallel's branches when the Parallel
started), and an agent's call when its run's calls and tools before it are done. Calls of
branches running at the same time are interleaved by that time; a tie goes to the step
that started first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from afcore.errors import RecordingError
from afcore.readmodel._timeline import Mark, Timeline, build
from afcore.recording import FlowLogStep, FlowRecording, Recording, dump, open_recording

__all__ = [
    "AgentRun",
    "FlowCall",
    "FlowText",
    "FlowTimeline",
    "flow_texts",
    "flow_timeline",
    "step_starts",
]


@dataclass(eq=False)
class AgentRun:
    """An agent step's run, opened for reading (or why it cannot be)."""

    step: FlowLogStep
    agent: str
    """The agent's name (its run's header's; the step's name when the run cannot be read)."""
    file: Path | None
    rec: Recording | None
    timeline: Timeline
    start_ms: float
    """When the step started, in ms from the flow's start (as recorded, else placed from
    durations)."""
    problem: str | None = None
    """Why its calls cannot be shown: no run named, the file missing or not a recording."""
    order: int = 0
    """Its place among the agent steps in the order they started, from 0."""


@dataclass(slots=True)
class FlowCall:
    """One model call of one agent of the flow."""

    index: int
    """Its place on the flow's timeline, from 0."""
    run: AgentRun
    mark: Mark
    at_ms: float
    """When it was sent, in ms from the flow's start (as recorded, else placed from
    durations: see :attr:`placed`)."""
    placed: bool = False
    """True when ``at_ms`` is an estimate from durations (the call line has no ``at``)."""

    @property
    def step(self) -> str:
        return self.run.step.path

    @property
    def n(self) -> int:
        """Its number in its agent's run."""
        return self.mark.n


@dataclass(eq=False)
class FlowTimeline:
    """Every agent's calls of a flow run, in the order they happened. Holds the agents'
    recordings open: close it (or use it as a context manager)."""

    flow: FlowRecording
    runs: list[AgentRun] = field(default_factory=list)
    calls: list[FlowCall] = field(default_factory=list)
    starts: dict[str, float] = field(default_factory=dict)
    """Each step's path -> when it started, in ms from the flow's start."""

    def first_call(self, path: str) -> int | None:
        """The index of the first call made under the step at ``path`` (by itself or by a
        step inside it); None when none was."""
        inside = path + "/"
        return next(
            (
                c.index
                for c in self.calls
                if not path or c.step == path or c.step.startswith(inside)
            ),
            None,
        )

    def index_of(self, run: AgentRun, n: int) -> int | None:
        """The index of call ``n`` of ``run``."""
        return next((c.index for c in self.calls if c.run is run and c.n == n), None)

    def run_of(self, path: str) -> AgentRun | None:
        return next((r for r in self.runs if r.step.path == path), None)

    def close(self) -> None:
        for run in self.runs:
            if run.rec is not None:
                run.rec.close()

    def __enter__(self) -> FlowTimeline:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def step_starts(flow: FlowRecording) -> dict[str, float]:
    """When each step started, in ms from the flow's start: as its ``step_start`` says
    (``at``), else placed from the durations the log holds: a Parallel's branches start
    together, any other flow's steps one after the other (a loop's turns too)."""
    out: dict[str, float] = {}

    def place(step: FlowLogStep, at: float) -> None:
        recorded = step.start.at
        at = out[step.path] = at if recorded is None else recorded
        t = at
        for child in step.steps:
            place(child, at if step.kind == "parallel" else t)
            if child.end is not None:
                t = out[child.path] + child.end.ms

    if flow.top is not None:
        place(flow.top, 0.0)
    return out


def flow_timeline(flow: FlowRecording) -> FlowTimeline:
    """Open every agent step's run of ``flow`` and lay their calls on one timeline."""
    out = FlowTimeline(flow, starts=step_starts(flow))
    placed: list[tuple[float, int, int, AgentRun, Mark, bool]] = []
    for step in flow.steps():
        if step.kind != "agent":
            continue
        run = _open(flow, step, out.starts.get(step.path, 0.0), len(out.runs))
        out.runs.append(run)
        at = run.start_ms
        for i, mark in enumerate(run.timeline.marks):
            guessed = mark.at is None
            if mark.at is not None:
                at = mark.at
            placed.append((at, run.order, i, run, mark, guessed))
            at += mark.ms + mark.tools_ms
    placed.sort(key=lambda p: p[:3])
    out.calls = [
        FlowCall(i, run, mark, at, guessed)
        for i, (at, _, _, run, mark, guessed) in enumerate(placed)
    ]
    return out


def _open(flow: FlowRecording, step: FlowLogStep, start: float, order: int) -> AgentRun:
    file = flow.run_file(step)
    run = AgentRun(step, step.name, file, None, Timeline(), start, order=order)
    if file is None:
        run.problem = (
            "the step never ended: its run is not named"
            if step.end is None
            else "the step names no run"
        )
        return run
    try:
        rec = open_recording(file)
    except (OSError, ValueError, RecordingError) as e:
        # ValueError: a name no file can have (a NUL in it), as the log wrote it.
        run.problem = f"{file.name} cannot be read: {e}"
        return run
    run.rec = rec
    run.agent = rec.header.agent.name or step.name
    _drain(build(rec, run.timeline))
    return run


def _drain(steps: Iterator[float]) -> None:
    for _ in steps:
        pass


@dataclass(frozen=True, slots=True)
class FlowText:
    """A value of a flow's own log, as a front end searches it: what a step was given, gave,
    wrote, read or failed with, a decision with its evidence, a merge, the flow's answer."""

    step: str
    """The path of the step it belongs to ("" the top flow)."""
    what: str
    """What it is: ``input``, ``output``, ``state.KEY written``, ``reads``, ``error``,
    ``decision``, ``merge``, ``answer``."""
    value: Any
    key: str | None = None
    """The ``af why`` key of a decision or a merge (``decision:PATH#N``, ``merge:PATH``);
    None for the step's own values."""


def flow_texts(flow: FlowRecording) -> list[FlowText]:
    """Every value of ``flow``'s own records (not its agents' runs), step by step in the
    order of the tree, then the flow's end. A value only passed on is said where it was
    made: an input that is the parent's input or the output of the step before, an output
    that is the step's input unchanged or another step's (``produced_by``)."""
    out: list[FlowText] = []

    def add(step: FlowLogStep, given: Any) -> None:
        path = step.path
        if step.start.input is not None and step.start.input != given:
            out.append(FlowText(path, "input", step.start.input))
        end = step.end
        if end is not None:
            made = end.produced_by in (None, path) and end.output != step.start.input
            if end.output is not None and made:
                out.append(FlowText(path, "output", end.output))
            name = step.name or flow.header.flow.name
            for key, v in end.writes.items():
                if key != name:  # its output, written under its name: said once
                    out.append(FlowText(path, f"state.{key} written", v))
            if end.reads:
                out.append(FlowText(path, "reads", dict(end.reads)))
            if end.error is not None:
                out.append(FlowText(path, "error", f"{end.error.kind}: {end.error.message}"))
        for k, d in enumerate(step.decisions, 1):
            try:
                said = dump(d, mode="json", exclude={"t", "path"}, exclude_none=True)
            except RecursionError:  # a value it read, nested past the stack: not searched
                continue
            out.append(FlowText(path, "decision", said, f"decision:{path}#{k}"))
        before = step.start.input
        for child in step.steps:
            add(child, before)
            if step.kind in ("sequence", "loop") and child.end is not None:
                before = child.end.output
        if step.merge is not None:
            said = dump(step.merge, mode="json", exclude={"t", "path"}, exclude_none=True)
            out.append(FlowText(path, "merge", said, f"merge:{path}"))

    if flow.top is not None:
        add(flow.top, None)
    end = flow.end
    if end is not None:
        top = flow.top.path if flow.top is not None else ""
        if end.answer:
            out.append(FlowText(top, "answer", end.answer))
        if end.error is not None:
            out.append(FlowText(top, "error", f"{end.error.kind}: {end.error.message}"))
    return out
