"""The four control flows: Sequence, Parallel, Conditional and Loop, and how a flow runs its
steps. A step's runnable is an agent, another flow, or a plain function of the flow's state
(``def step(s): ...``, or ``async def``); flows nest.

What each step is given and gives back:

- an agent is run on the message as text (a value that is not a string, as JSON), with the
  flow's state as its run's ``state`` (its rules read it, its tools write ``ctx.state``);
  its output is its answer;
- a function is called with ``s``, the :class:`FlowView` (``s.message`` is what it is
  given); its output is what it returns (None: the message passes through unchanged);
- a flow runs its own steps on the message; its output is theirs.

Each step's output is written to the state under the step's name.

A step that pauses (an agent whose tool middleware asked a person) ends the flow: the flow
returns that :class:`Paused` and its result says which step paused. A flow does not resume:
answer the paused agent's run (``agent.resume`` or ``af resume``) and run the flow again.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self, TypeAlias

import orjson

from afcore.agent._agent import Agent
from afcore.errors import AfError, UsageError
from afcore.flows._log import FlowLog
from afcore.flows._replayer import FlowReplayer
from afcore.flows._result import (
    FlowDecision,
    FlowResult,
    StepKind,
    StepResult,
    StepStatus,
    Verdict,
)
from afcore.flows._state import FlowView, Scope, Writes, evidence, reset_writing, writing
from afcore.governance._pause import Paused
from afcore.loop._interrupt import beside_others
from afcore.loop._sync import run_sync
from afcore.messages import Usage
from afcore.recording._config import RecordingConfig
from afcore.recording._flows import FlowNode

__all__ = [
    "BranchesFailedError",
    "Conditional",
    "Flow",
    "FlowError",
    "Loop",
    "Parallel",
    "Predicate",
    "Runnable",
    "Sequence",
    "StepEvent",
]

Runnable: TypeAlias = "Agent | Flow | Callable[[FlowView], Any]"
Predicate: TypeAlias = Callable[[FlowView], Any]
Merge: TypeAlias = Callable[[FlowView, dict[str, StepResult]], Any]
StepEvent: TypeAlias = "tuple[str, StepResult | None, str, StepKind]"
"""What a progress observer is handed: ``("start", None, path, kind)`` when a step starts,
``("end", result, path, kind)`` when it ends."""

_DEFAULT_MAX = 10


class FlowError(AfError):
    """A flow's step failed: ``path`` names it; ``__cause__`` is what it raised."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class BranchesFailedError(FlowError):
    """Branches of a Parallel without ``merge_with`` failed (a merge decides what a partial
    result means; without one, any failure fails the Parallel)."""

    def __init__(self, message: str, *, path: str, failed: Mapping[str, StepResult]) -> None:
        super().__init__(message, path=path)
        self.failed = dict(failed)


def as_text(value: Any) -> str:
    """A step's output as the message an agent reads: a string as it is, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except TypeError:
        return str(value)


def runnable_name(runnable: Any) -> str:
    if isinstance(runnable, Agent):
        return runnable.name
    if isinstance(runnable, Flow):
        return runnable.name
    return getattr(runnable, "__name__", None) or type(runnable).__name__


def _check_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise UsageError(f"{where} takes a step name (a non-empty string), got {name!r}")
    if "/" in name or "@" in name:
        raise UsageError(f"a step name has no '/' or '@' (they separate a step's path): {name!r}")
    return name


def _check_runnable(runnable: Any, where: str) -> Any:
    if isinstance(runnable, Agent | Flow) or callable(runnable):
        return runnable
    raise UsageError(
        f"{where} takes an agent, a flow or a function of the flow's state, "
        f"got {type(runnable).__name__}"
    )


def _kind(runnable: Any) -> StepKind:
    if isinstance(runnable, Agent):
        return "agent"
    if isinstance(runnable, Flow):
        return runnable.kind
    return "function"


class _Run:
    """One run of a top flow: its state, its log, its progress observer."""

    def __init__(
        self,
        scope: Scope,
        user_message: str,
        log: FlowLog | None,
        progress: Callable[[StepEvent], Any] | None,
    ) -> None:
        self.scope = scope
        self.user_message = user_message
        self.log = log
        self.progress = progress
        self.agents = 0
        self.clock = log.config.clock if log is not None else time.perf_counter
        """Seconds on a monotonic clock: the recording's, for the durations in it."""

    def tell(self, event: StepEvent) -> None:
        if self.progress is not None:
            self.progress(event)


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    out = fn(*args)
    if inspect.isawaitable(out):
        out = await out
    return out


def _verdict(run: _Run, name: str, predicate: Predicate, message: Any, turn: int | None) -> Verdict:
    """Ask ``predicate``; its answer with the values it read."""
    view = FlowView(run.scope, input=message, user_message=run.user_message, turn=turn)
    try:
        answer = predicate(view)
    except Exception as e:  # noqa: BLE001 - a predicate's failure is recorded, then raised
        return Verdict(
            name,
            False,
            f"predicate raised {type(e).__name__}",
            tuple(evidence(view._take_reads())),
            error=f"{type(e).__name__}: {e}",
        )
    reads = tuple(evidence(view._take_reads()))
    if inspect.isawaitable(answer):
        if inspect.iscoroutine(answer):
            answer.close()
        return Verdict(name, False, "predicate is async", reads, error="a predicate is sync")
    if not isinstance(answer, bool):
        return Verdict(
            name,
            False,
            f"predicate returned {type(answer).__name__}",
            reads,
            error=f"a predicate returns True or False, got {answer!r:.80}",
        )
    return Verdict(name, answer, f"predicate returned {str(answer).lower()}", reads)


class Flow:
    """A control flow: run it like an agent (``run``, ``arun``, ``arun_result``), or use it
    as a step of another flow. Build one with ``Sequence.create()``, ``Parallel.create()``,
    ``Conditional.create()`` or ``Loop.create()``."""

    kind: StepKind
    name: str
    recording: RecordingConfig | None
    last_result: FlowResult | None
    source: str | None = None
    """Where the flow was loaded from (``file.py:NAME``, ``module:function``), as ``af run``
    loads it: the log's header names it, for ``af replay``."""
    replayer: FlowReplayer | None = None
    """For a flow made by ``afcore.replay.replaying_flow``: the recorded run its runs
    replay."""

    def __init__(self, name: str, recording: RecordingConfig | None) -> None:
        self.name = name
        self.recording = recording
        self.last_result = None

    # -- running ------------------------------------------------------------------------

    def run(self, message: str, *, state: dict[str, Any] | None = None) -> str | Paused:
        """Run the flow on ``message``; its answer (the last step's output as text), or the
        :class:`Paused` run of the step that asked a person. A step's error is recorded,
        then raised (as :class:`FlowError` naming the step, the step's error its cause)."""
        return run_sync(self.arun(message, state=state), "run")

    async def arun(self, message: str, *, state: dict[str, Any] | None = None) -> str | Paused:
        """The async form of :meth:`run`."""
        result = await self.arun_result(message, state=state)
        return result.paused if result.paused is not None else result.answer

    async def arun_result(
        self,
        message: str,
        *,
        state: dict[str, Any] | None = None,
        progress: Callable[[StepEvent], Any] | None = None,
    ) -> FlowResult:
        """Like :meth:`arun`, returning the whole :class:`FlowResult`. ``state``: the
        state's first values (the dict is not changed; ``result.state`` is the state at the
        end). ``progress`` is handed a :data:`StepEvent` as each step starts and ends."""
        if not isinstance(message, str):
            raise UsageError(
                f"run(...) takes the user's message as a string, got {type(message).__name__}"
            )
        scope = Scope(state or {})
        log = None
        if self.recording is not None:
            log = FlowLog(
                describe(self, self.name),
                self.recording,
                source=self.source,
                replayer=self.replayer,
            )
        elif self.replayer is not None:
            raise UsageError("a replay of a flow writes its own recording: give it one")
        run = _Run(scope, message, log, progress)
        started = run.clock()
        try:
            top = await self._run_step(run, "", self.name, self, message, None)
        except BaseException as e:
            if log is not None:
                log.abort(e)
            raise
        result = _result(top, run, log, run.clock() - started)
        if log is not None:
            log.end(result)
        self.last_result = result
        if result.status == "error" and result.error is not None:
            raise _raised(top, result.error)
        return result

    # -- a step ---------------------------------------------------------------------------

    async def _run_step(
        self,
        run: _Run,
        path: str,
        name: str,
        runnable: Any,
        message: Any,
        turn: int | None,
    ) -> StepResult:
        """Run ``runnable`` as the step at ``path``; never raises for the step's own failure
        (it is the result's ``error``)."""
        kind = _kind(runnable)
        run.tell(("start", None, path, kind))
        if run.log is not None:
            run.log.step_start(path, name, kind, message)
        writes = Writes()
        token = writing(writes)
        started = run.clock()
        try:
            if isinstance(runnable, Agent):
                step = await _agent_step(run, path, name, runnable, message)
            elif isinstance(runnable, Flow):
                step = await runnable._body(run, path, name, message, turn)
            else:
                step = await _function_step(run, path, name, runnable, message, turn, writes)
            if step.status in ("ok", "max_iterations"):
                run.scope[name] = step.output
        finally:
            reset_writing(token)
        step = _replace(
            step,
            ms=(run.clock() - started) * 1000,
            writes=tuple(writes.values),
        )
        if run.log is not None:
            run.log.step_end(step, writes.values)
        run.tell(("end", step, path, kind))
        return step

    async def _body(
        self, run: _Run, path: str, name: str, message: Any, turn: int | None
    ) -> StepResult:
        """Run this flow's steps; ``turn``: the turn of the loop it runs in (None: none)."""
        raise NotImplementedError

    def _child(
        self,
        run: _Run,
        path: str,
        name: str,
        runnable: Any,
        message: Any,
        turn: int | None,
        *,
        at: int | None = None,
    ) -> Awaitable[StepResult]:
        """``at``: the loop turn this step is the body of, written in its path."""
        child = _join(path, name) if at is None else f"{_join(path, name)}@{at}"
        return self._run_step(run, child, name, runnable, message, turn)

    def runnables(self) -> Iterator[Any]:
        """Every runnable under this flow, nested flows' too, depth first."""
        for _, child in self._named():
            yield child
            if isinstance(child, Flow):
                yield from child.runnables()

    def _named(self) -> list[tuple[str, Any]]:
        """Each step it may run, with its name, in order."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _replace(step: StepResult, **changes: Any) -> StepResult:
    from dataclasses import replace

    return replace(step, **changes)


async def _agent_step(run: _Run, path: str, name: str, agent: Agent, message: Any) -> StepResult:
    run.agents += 1
    config = run.log.agent_recording(agent, path, run.agents) if run.log is not None else None
    replayer = run.log.replayer if run.log is not None else None
    if replayer is not None:
        agent = replayer.agent(agent, path)
    result, raised = await agent._execute(as_text(message), state=run.scope, recording=config)
    if replayer is not None:
        replayer.agent_ended(path, agent, result)
    status: StepStatus = {
        "answer": "ok",
        "max_iterations": "max_iterations",
        "paused": "paused",
        "interrupted": "interrupted",
    }.get(result.status, "error")  # type: ignore[assignment]
    error = raised if raised is not None else result.error
    if status == "error" and error is None:
        error = FlowError(f"agent {agent.name!r} ended {result.status}", path=path)
    return StepResult(
        path=path,
        name=name,
        kind="agent",
        status=status,
        output=result.paused if status == "paused" else result.answer,
        error=error if status in ("error", "interrupted") else None,
        run=result,
        produced_by=path,
    )


async def _function_step(
    run: _Run,
    path: str,
    name: str,
    fn: Callable[[FlowView], Any],
    message: Any,
    turn: int | None,
    writes: Writes,
) -> StepResult:
    view = FlowView(
        run.scope, input=message, user_message=run.user_message, turn=turn, writes=writes
    )
    try:
        out = await _call(fn, view)
    except Exception as e:  # noqa: BLE001 - the step's failure is its result
        return StepResult(
            path, name, "function", "error", error=e, reads=tuple(evidence(view._take_reads()))
        )
    if isinstance(out, Paused):
        return StepResult(
            path, name, "function", "paused", output=out, reads=tuple(evidence(view._take_reads()))
        )
    return StepResult(
        path,
        name,
        "function",
        "ok",
        output=message if out is None else out,
        produced_by=path,
        reads=tuple(evidence(view._take_reads())),
    )


def _failed(step: StepResult) -> bool:
    return step.status in ("error", "interrupted", "paused")


def _ended(
    path: str, name: str, kind: StepKind, last: StepResult, steps: list[StepResult], **more: Any
) -> StepResult:
    """A flow's result when ``last`` (one of its steps) ended it without an answer."""
    return StepResult(
        path,
        name,
        kind,
        last.status,
        output=last.output,
        error=last.error,
        steps=tuple(steps),
        produced_by=last.produced_by,
        **more,
    )


# -- building -----------------------------------------------------------------------------


class _Builder:
    """A flow's ``create(name, record=...)`` is its builder class: ``record`` is True (the
    recordings folder), False, a folder, or a RecordingConfig."""

    def __init__(self, name: str, record: bool | str | Path | RecordingConfig) -> None:
        self._name = _check_name(name, "create(name)")
        self._recording = _recording(record)
        self._names: set[str] = set()

    def _add_name(self, name: str, where: str) -> str:
        _check_name(name, where)
        if name in self._names:
            raise UsageError(f"{where}: a step named {name!r} is already in this flow")
        self._names.add(name)
        return name


def _recording(record: bool | str | Path | RecordingConfig) -> RecordingConfig | None:
    if record is True:
        return RecordingConfig()
    if record is False:
        return None
    if isinstance(record, RecordingConfig):
        return record
    if isinstance(record, str | Path):
        return RecordingConfig(dir=Path(record))
    raise UsageError(f"record= takes True, False, a folder or a RecordingConfig, got {record!r}")


# -- Sequence -----------------------------------------------------------------------------


class SequenceBuilder(_Builder):
    def __init__(
        self, name: str = "sequence", *, record: bool | str | Path | RecordingConfig = True
    ) -> None:
        super().__init__(name, record)
        self._steps: list[tuple[str, Any]] = []

    def step(self, name: str, runnable: Runnable) -> Self:
        """Add a step: an agent, a flow, or a function of the flow's state."""
        self._steps.append(
            (self._add_name(name, "step(...)"), _check_runnable(runnable, "step(...)"))
        )
        return self

    def build(self) -> Sequence:
        if not self._steps:
            raise UsageError("a Sequence needs at least one step(...)")
        return Sequence(self._name, self._recording, self._steps)


class Sequence(Flow):
    """Steps one after the other: each step is given the output of the step before it (the
    first, the flow's message); the flow's output is the last step's."""

    kind: StepKind = "sequence"

    def __init__(self, name: str, recording: RecordingConfig | None, steps: list[tuple[str, Any]]):
        super().__init__(name, recording)
        self.steps = tuple(steps)

    create = SequenceBuilder

    def _named(self) -> list[tuple[str, Any]]:
        return list(self.steps)

    async def _body(
        self, run: _Run, path: str, name: str, message: Any, turn: int | None
    ) -> StepResult:
        done: list[StepResult] = []
        for step_name, runnable in self.steps:
            step = await self._child(run, path, step_name, runnable, message, turn)
            done.append(step)
            if _failed(step):
                return _ended(path, name, "sequence", step, done)
            message = step.output
        last = done[-1]
        return StepResult(
            path,
            name,
            "sequence",
            "ok",
            output=message,
            steps=tuple(done),
            produced_by=last.produced_by,
        )


# -- Parallel -----------------------------------------------------------------------------


class ParallelBuilder(_Builder):
    def __init__(
        self, name: str = "parallel", *, record: bool | str | Path | RecordingConfig = True
    ) -> None:
        super().__init__(name, record)
        self._branches: list[tuple[str, Any]] = []
        self._merge: Merge | None = None

    def branch(self, name: str, runnable: Runnable) -> Self:
        """Add a branch: an agent, a flow, or a function of the flow's state."""
        self._branches.append(
            (self._add_name(name, "branch(...)"), _check_runnable(runnable, "branch(...)"))
        )
        return self

    def merge_with(self, fn: Merge) -> Self:
        """``fn(s, branches)`` -> the Parallel's output; ``branches`` maps each branch's
        name to its result, failed ones included. It may write the state through ``s``."""
        if not callable(fn):
            raise UsageError(f"merge_with(...) takes a function, got {type(fn).__name__}")
        self._merge = fn
        return self

    def build(self) -> Parallel:
        if not self._branches:
            raise UsageError("a Parallel needs at least one branch(...)")
        return Parallel(self._name, self._recording, self._branches, self._merge)


class Parallel(Flow):
    """Branches run at the same time on the same message. A branch that fails (raises,
    errors, is interrupted) does not stop the others; each is recorded. ``merge_with(fn)``
    decides the output from ``fn(s, branches)``, ``branches`` mapping each branch's name to
    its :class:`StepResult` (``status``, ``output``, ``error``), failed ones included.
    Without a merge the output is ``{name: output}``, and any failed branch fails the
    Parallel (:class:`BranchesFailedError`)."""

    kind: StepKind = "parallel"

    def __init__(
        self,
        name: str,
        recording: RecordingConfig | None,
        branches: list[tuple[str, Any]],
        merge: Merge | None,
    ) -> None:
        super().__init__(name, recording)
        self.branches = tuple(branches)
        self.merge = merge

    create = ParallelBuilder

    def _named(self) -> list[tuple[str, Any]]:
        return list(self.branches)

    async def _body(
        self, run: _Run, path: str, name: str, message: Any, turn: int | None
    ) -> StepResult:
        # Each branch is a task, with its own copy of the context: a state write is
        # attributed to the branch that made it, and an agent's sync tool goes to a thread
        # rather than hold the loop the other branches run on.
        with beside_others():
            tasks = [
                asyncio.ensure_future(self._child(run, path, branch, runnable, message, turn))
                for branch, runnable in self.branches
            ]
        try:
            done = list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        paused = next((b for b in done if b.status == "paused"), None)
        if paused is not None:
            return _ended(path, name, "parallel", paused, done)
        by_name = {b.name: b for b in done}
        if self.merge is None:
            failed = {b.name: b for b in done if _failed(b)}
            if failed:
                said = ", ".join(f"{n} ({_said(b)})" for n, b in failed.items())
                error = BranchesFailedError(
                    f"{len(failed)} of {len(done)} branches failed: {said}",
                    path=path,
                    failed=failed,
                )
                return StepResult(path, name, "parallel", "error", error=error, steps=tuple(done))
            output = {b.name: b.output for b in done}
            return StepResult(
                path, name, "parallel", "ok", output=output, steps=tuple(done), produced_by=path
            )
        writes = Writes()
        view = FlowView(
            run.scope, input=message, user_message=run.user_message, turn=turn, writes=writes
        )
        token = writing(writes)
        merge_error: BaseException | None = None
        try:
            merged = await _call(self.merge, view, by_name)
        except Exception as e:  # noqa: BLE001 - the merge's failure is the Parallel's
            merged, merge_error = None, e
        finally:
            reset_writing(token)
        reads = tuple(evidence(view._take_reads()))
        if run.log is not None:
            statuses: dict[str, str] = {b.name: b.status for b in done}
            run.log.merge(path, statuses, reads, writes.values, merged, merge_error)
        if merge_error is not None:
            return StepResult(
                path,
                name,
                "parallel",
                "error",
                error=merge_error,
                steps=tuple(done),
                merge_reads=reads,
            )
        return StepResult(
            path,
            name,
            "parallel",
            "ok",
            output=merged,
            steps=tuple(done),
            produced_by=path,
            merge_reads=reads,
        )


def _said(step: StepResult) -> str:
    if step.error is not None:
        return f"{type(step.error).__name__}: {step.error}"
    return step.status


# -- Conditional --------------------------------------------------------------------------


class ConditionalBuilder(_Builder):
    def __init__(
        self, name: str = "conditional", *, record: bool | str | Path | RecordingConfig = True
    ) -> None:
        super().__init__(name, record)
        self._whens: list[tuple[str, Predicate, Any]] = []
        self._otherwise: tuple[str, Any] | None = None

    def when(self, name: str, predicate: Predicate, runnable: Runnable) -> Self:
        """A branch: ``runnable`` runs when ``predicate(s)`` returns True (the first that
        does, in the order given)."""
        if not callable(predicate):
            raise UsageError(
                f"when(...) takes a predicate function, got {type(predicate).__name__}"
            )
        self._whens.append(
            (self._add_name(name, "when(...)"), predicate, _check_runnable(runnable, "when(...)"))
        )
        return self

    def otherwise(self, name: str, runnable: Runnable) -> Self:
        """What runs when no predicate holds."""
        if self._otherwise is not None:
            raise UsageError("a Conditional has one otherwise(...)")
        self._otherwise = (
            self._add_name(name, "otherwise(...)"),
            _check_runnable(runnable, "otherwise(...)"),
        )
        return self

    def build(self) -> Conditional:
        if not self._whens:
            raise UsageError("a Conditional needs at least one when(...)")
        return Conditional(self._name, self._recording, self._whens, self._otherwise)


class Conditional(Flow):
    """The first branch whose predicate holds runs on the message; ``otherwise`` when none
    does (without it, the message passes through). A predicate reads the state through
    ``s``; what it read is the evidence of the decision."""

    kind: StepKind = "conditional"

    def __init__(
        self,
        name: str,
        recording: RecordingConfig | None,
        whens: list[tuple[str, Predicate, Any]],
        otherwise: tuple[str, Any] | None,
    ) -> None:
        super().__init__(name, recording)
        self.whens = tuple(whens)
        self.otherwise = otherwise

    create = ConditionalBuilder

    def _named(self) -> list[tuple[str, Any]]:
        out = [(n, r) for n, _, r in self.whens]
        return out + [self.otherwise] if self.otherwise is not None else out

    async def _body(
        self, run: _Run, path: str, name: str, message: Any, turn: int | None
    ) -> StepResult:
        verdicts: list[Verdict] = []
        chosen: tuple[str, Any] | None = None
        for branch, predicate, runnable in self.whens:
            verdict = _verdict(run, branch, predicate, message, turn)
            verdicts.append(verdict)
            if verdict.error is not None:
                decision = FlowDecision(tuple(verdicts), None)
                if run.log is not None:
                    run.log.decision(path, decision)
                error = FlowError(
                    f"the predicate of {branch!r} could not decide: {verdict.error}",
                    path=_join(path, branch),
                )
                return StepResult(
                    path, name, "conditional", "error", error=error, decisions=(decision,)
                )
            if verdict.fired:
                chosen = (branch, runnable)
                break
        if chosen is None and self.otherwise is not None:
            chosen = self.otherwise
        decision = FlowDecision(tuple(verdicts), chosen[0] if chosen else None)
        if run.log is not None:
            run.log.decision(path, decision)
        if chosen is None:
            return StepResult(
                path,
                name,
                "conditional",
                "ok",
                output=message,
                decisions=(decision,),
                produced_by=None,
            )
        step = await self._child(run, path, chosen[0], chosen[1], message, turn)
        if _failed(step):
            return _ended(path, name, "conditional", step, [step], decisions=(decision,))
        return StepResult(
            path,
            name,
            "conditional",
            step.status,
            output=step.output,
            steps=(step,),
            decisions=(decision,),
            produced_by=step.produced_by,
        )


# -- Loop ---------------------------------------------------------------------------------


class LoopBuilder(_Builder):
    def __init__(
        self, name: str = "loop", *, record: bool | str | Path | RecordingConfig = True
    ) -> None:
        super().__init__(name, record)
        self._body: tuple[str, Any] | None = None
        self._until: Predicate | None = None
        self._limit = _DEFAULT_MAX

    def repeat(self, runnable: Runnable, *, name: str | None = None) -> Self:
        """The body: an agent, a flow or a function of the state; ``name``: its step name
        (default: the agent's, flow's or function's name)."""
        _check_runnable(runnable, "repeat(...)")
        self._body = (_check_name(name or runnable_name(runnable), "repeat(name=...)"), runnable)
        return self

    def until(self, predicate: Predicate) -> Self:
        """Asked after each turn: True ends the loop."""
        if not callable(predicate):
            raise UsageError(
                f"until(...) takes a predicate function, got {type(predicate).__name__}"
            )
        self._until = predicate
        return self

    def max_iterations(self, n: int) -> Self:
        """At most ``n`` turns (default 10)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise UsageError(
                f"max_iterations(...) takes a whole number of turns, at least 1, got {n!r}"
            )
        self._limit = n
        return self

    def build(self) -> Loop:
        if self._body is None:
            raise UsageError("a Loop needs repeat(...)")
        return Loop(self._name, self._recording, self._body, self._until, self._limit)


class Loop(Flow):
    """Its body runs again and again, each turn given the output of the turn before (the
    first, the flow's message), until ``until(s)`` holds after a turn (``s.message`` is the
    turn's output, ``s.turn`` its number) or ``max_iterations`` turns have run; the output
    is the last turn's. A loop that reaches its limit ends ``max_iterations`` and the flow
    goes on with that output."""

    kind: StepKind = "loop"

    def __init__(
        self,
        name: str,
        recording: RecordingConfig | None,
        body: tuple[str, Any],
        until: Predicate | None,
        limit: int,
    ) -> None:
        super().__init__(name, recording)
        self.body = body
        self.until = until
        self.limit = limit

    create = LoopBuilder

    def _named(self) -> list[tuple[str, Any]]:
        return [self.body]

    async def _body(
        self, run: _Run, path: str, name: str, message: Any, turn: int | None
    ) -> StepResult:
        body_name, runnable = self.body
        done: list[StepResult] = []
        decisions: list[FlowDecision] = []
        for n in range(1, self.limit + 1):
            step = await self._child(run, path, body_name, runnable, message, n, at=n)
            done.append(step)
            if _failed(step):
                return _ended(path, name, "loop", step, done, decisions=tuple(decisions))
            message = step.output
            if self.until is None:
                chosen = "again" if n < self.limit else "limit"
                decision = FlowDecision((), chosen, n)
            else:
                verdict = _verdict(run, "until", self.until, message, n)
                chosen = "done" if verdict.fired else ("again" if n < self.limit else "limit")
                decision = FlowDecision((verdict,), None if verdict.error else chosen, n)
            decisions.append(decision)
            if run.log is not None:
                run.log.decision(path, decision)
            if decision.chosen is None:
                error = FlowError(
                    f"the loop's until could not decide: {decision.verdicts[0].error}", path=path
                )
                return StepResult(
                    path,
                    name,
                    "loop",
                    "error",
                    error=error,
                    steps=tuple(done),
                    decisions=tuple(decisions),
                )
            if chosen == "done":
                break
        status: StepStatus = (
            "ok" if decisions[-1].chosen == "done" or self.until is None else "max_iterations"
        )
        return StepResult(
            path,
            name,
            "loop",
            status,
            output=message,
            steps=tuple(done),
            decisions=tuple(decisions),
            produced_by=done[-1].produced_by,
        )


# -- the result ---------------------------------------------------------------------------


def _result(top: StepResult, run: _Run, log: FlowLog | None, seconds: float) -> FlowResult:
    usage = Usage()
    calls = iterations = 0
    for step in top.walk():
        if step.run is not None:
            usage = usage + step.run.usage
            calls += step.run.calls
            iterations += step.run.iterations
    status = {
        "ok": "answer",
        "max_iterations": "answer",
        "paused": "paused",
        "interrupted": "interrupted",
    }.get(top.status, "error")
    paused = None
    if top.status == "paused":
        paused = next(
            (s.output for s in top.walk() if s.status == "paused" and isinstance(s.output, Paused)),
            None,
        )
    producer = top.find(top.produced_by) if top.produced_by else None
    return FlowResult(
        status=status,  # type: ignore[arg-type]
        answer=as_text(top.output) if status == "answer" else "",
        output=top.output,
        steps=top,
        state=dict(run.scope),
        run_id=log.run_id if log is not None else "",
        recording=log.path if log is not None else None,
        usage=usage,
        calls=calls,
        iterations=iterations,
        error=top.error,
        stop_reason=producer.run.stop_reason
        if producer is not None and producer.run is not None
        else None,
        paused=paused,
        seconds=seconds,
    )


def _raised(top: StepResult, error: BaseException) -> BaseException:
    """What a failed flow raises: a FlowError naming the step that failed, with its error
    as the cause (the step's own FlowError as it is)."""
    if isinstance(error, FlowError):
        return error
    failed = next((s for s in top.walk() if s.error is error and not s.steps), top)
    out = FlowError(
        f"step {failed.path or failed.name!r} failed: {type(error).__name__}: {error}",
        path=failed.path,
    )
    out.__cause__ = error
    return out


def describe(runnable: Any, name: str) -> FlowNode:
    """The composition under ``runnable`` as the header holds it."""
    if isinstance(runnable, Agent):
        return FlowNode(name=name, kind="agent", agent=runnable.name, source=runnable.source)
    if not isinstance(runnable, Flow):
        return FlowNode(name=name, kind="function", source=getattr(runnable, "__qualname__", None))
    steps = [describe(r, n) for n, r in runnable._named()]
    return FlowNode(name=name, kind=runnable.kind, steps=steps)
