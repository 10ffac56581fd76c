"""Replaying a recorded flow run: the flow's code runs again (its functions, predicates and
merges for real), each agent step runs a copy of its agent that replays that step's recorded
run (every model call answered from it: zero API calls), and every record the flow writes is
compared with the recorded one as it is written. The first difference stops the flow where
it is: a step that ran in one run only, a decision that went another way (with the values
its predicates read), what a step gave or wrote, a merge, the ending, or a call inside an
agent step (as an agent's replay names it).

With ``then_live``, the first difference is kept and the flow goes on: from there every
step runs as it would live (an agent step in the middle of its replay hands its run to its
agent's own provider at its own first difference, as an agent's replay with ``then_live``
does; an agent step that starts after it, or that the recording does not hold, runs live
from its first call), and nothing more is compared. What the flow does after an edit is
then a whole composed run, to open in the Lens or compare with ``af diff``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from afcore.errors import (
    AfError,
    RecordingError,
    ReplayDivergedError,
    ReplayEndedError,
    ReplayError,
    UsageError,
)
from afcore.loop._sync import run_sync
from afcore.readmodel import (
    Change,
    decision_changes,
    end_changes,
    merge_changes,
    start_changes,
    step_end_changes,
)
from afcore.recording import (
    FLOW_TYPES,
    FlowEnd,
    FlowRecording,
    InvalidRecord,
    StepDecision,
    StepEnd,
    StepMerge,
    StepStart,
    open_flow,
    typed,
)
from afcore.recording._models import ReplayLink  # written in the replay's log
from afcore.replay._replay import replaying, replaying_copy
from afcore.replay._replayer import Replayer, ToolsMode
from afcore.replay._report import FlowDivergence, FlowReplayReport
from afcore.replay._tape import Tape

if TYPE_CHECKING:
    from afcore.agent import Agent
    from afcore.flows import Flow
    from afcore.loop import RunResult

__all__ = ["FlowReplayer", "areplay_flow", "replay_flow", "replaying_flow"]


class FlowReplayer:
    """A replay's hold on one run of a flow (``afcore.flows.FlowReplayer``): see the module.
    One per replaying flow; each run of it replays the recorded run from its start."""

    def __init__(
        self, recorded: FlowRecording, *, tools: ToolsMode = "run", then_live: bool = False
    ) -> None:
        if tools not in ("run", "recorded"):
            raise UsageError(f"tools= is 'run' or 'recorded', not {tools!r}")
        self.recorded = recorded
        self.tools: ToolsMode = tools
        self.then_live = then_live
        self.link = ReplayLink(
            run_id=recorded.header.run_id,
            file=recorded.shown.name,
            tools=tools,
            then_live=then_live,
        )
        self.by_path = {s.path: s for s in recorded.steps()}
        self.recording: Path | None = None
        self._tapes: list[Tape] = []
        self.start(None)

    def start(self, recording: Path | None) -> None:
        self.recording = recording
        self.close()
        self.ran: set[str] = set()
        self.steps = 0
        """steps ended"""
        self.calls = 0
        self.identical_calls = 0
        self.divergence: FlowDivergence | None = None
        self.live = False
        """With then_live: the first difference was found; the flow runs live from there."""
        self.live_steps: list[str] = []
        """The agent steps whose calls (some or all) their agents' providers answered."""
        self.ended_at: str | None = None
        self.error: str | None = None
        self._held: dict[str, Callable[[], None]] = {}
        """step path -> what its agent's replay found, raised once the step's end is written"""

    # -- agent steps -------------------------------------------------------------------

    def agent(self, agent: Agent, path: str) -> Agent:
        if self.live:
            self.live_steps.append(path)
            return agent
        recorded = self.by_path.get(path)
        assert recorded is not None  # its start was compared: it is a recorded agent step
        file = self.recorded.run_file(recorded) or self._found_run(path)
        shown = (recorded.end.run if recorded.end is not None else None) or (
            _shown(self.recorded, file) if file is not None else None
        )
        if file is None:
            self._end(path, f"the recording ends in step {path}, before it names its run")
        assert file is not None
        if not file.is_file():
            raise ReplayError(
                f"the run of step {path} is not in the recording: {shown} is missing (a "
                "finished composed run holds its agents' runs in its log; one that did not "
                "finish, in the folder beside it)"
            )
        try:
            tape = Tape.read(file)
        except (OSError, RecordingError) as e:
            raise ReplayError(f"the run of step {path} ({shown}) cannot be replayed: {e}") from e
        self._tapes.append(tape)
        expected = recorded.end.run_id if recorded.end is not None else None
        if expected is not None and tape.run_id != expected:
            raise ReplayError(
                f"{shown} is run {tape.run_id}, not {expected}: the step's run is not in the "
                "recording"
            )
        return replaying(agent, tape, tools=self.tools, then_live=self.then_live)

    def agent_ended(self, path: str, agent: Agent, result: RunResult) -> None:
        replayer = agent.replayer
        if not isinstance(replayer, Replayer):  # run live (see agent)
            self.calls += result.calls
            return
        replayer.settle()
        try:
            replayer.ended(result.status)
        except ReplayDivergedError:
            pass
        self.calls += result.calls
        # Raised once the step's end is written, so that the replay's log names the run
        # that departed (af diff of the two then goes into its calls).
        d = replayer.divergence
        if d is not None:
            self.identical_calls += 0 if self.live else replayer.identical
            recorded = self.by_path[path]
            run = recorded.end.run if recorded.end is not None else None
            if replayer.live:
                self.live_steps.append(path)
            if self.then_live:  # it went on live: the flow does too, from its step's end
                found = FlowDivergence.in_agent(path, run, d)
                self._held[path] = lambda: self._go_live(found)
                return
            self._held[path] = lambda: self._diverge(FlowDivergence.in_agent(path, run, d))
            return
        if self.live:
            return
        self.identical_calls += result.calls
        if replayer.ended_at is not None or not replayer.recorded_finished:
            self._held[path] = lambda: self._end(
                path, f"the run of step {path} ends before its agent did"
            )

    # -- the flow's records ------------------------------------------------------------

    def written(self, raw: bytes) -> None:
        if self.live:
            return  # nothing is compared after the first difference
        try:
            data = orjson.loads(raw)
            record = typed(FLOW_TYPES[data["t"]], data)
        except (orjson.JSONDecodeError, KeyError, TypeError, InvalidRecord):
            return  # not a record a replay compares (the header)
        if not self.then_live:
            self._compare(record)
            return
        try:
            self._compare(record)
        except ReplayDivergedError:
            self.live = True  # kept as the divergence: the flow goes on
        except ReplayEndedError:
            self.live = True  # the recording holds no more: the rest runs live

    def _compare(self, record: Any) -> None:
        if isinstance(record, StepStart):
            self._started(record)
        elif isinstance(record, StepDecision):
            self._decided(record)
        elif isinstance(record, StepMerge):
            self._merged(record)
        elif isinstance(record, StepEnd):
            self._ended(record)
        elif isinstance(record, FlowEnd):
            self._flow_ended(record)

    def _started(self, record: StepStart) -> None:
        path = record.path
        self.ran.add(path)
        recorded = self.by_path.get(path)
        if recorded is None:
            parent = self.by_path.get(path.rpartition("/")[0]) if path else None
            if parent is not None and parent.end is None:  # the log was cut while it ran
                self._end(path, f"the recording ends before step {path} began")
            self._check(
                [Change("step", "ran", "added", None, record.kind, {"step": path}, _up(path))]
            )
        assert recorded is not None
        self._check(start_changes(recorded.start, record))

    def _decided(self, record: StepDecision) -> None:
        recorded = self.by_path[record.path]
        found = next((d for d in recorded.decisions if d.turn == record.turn), None)
        if found is None:
            if recorded.end is None:
                self._end(record.path, f"the recording ends in step {record.path or '(top)'}")
            self._check(
                [
                    Change(
                        "decision",
                        "decision" if record.turn is None else f"turn {record.turn}: decision",
                        "added",
                        None,
                        record.chosen,
                        {"step": record.path},
                        record.path or None,
                    )
                ]
            )
        assert found is not None
        self._check(decision_changes(found, record))

    def _merged(self, record: StepMerge) -> None:
        recorded = self.by_path[record.path]
        if recorded.merge is None:
            if recorded.end is None:
                self._end(record.path, f"the recording ends in step {record.path or '(top)'}")
            self._check(
                [
                    Change(
                        "merge",
                        "merge",
                        "added",
                        None,
                        record.output,
                        {"step": record.path},
                        record.path or None,
                    )
                ]
            )
        assert recorded.merge is not None
        self._check(merge_changes(recorded.merge, record))

    def _ended(self, record: StepEnd) -> None:
        held = self._held.pop(record.path, None)
        if held is not None:
            held()
        recorded = self.by_path[record.path]
        if recorded.end is None:
            self._end(record.path, f"the recording ends in step {record.path or '(top)'}")
        assert recorded.end is not None
        self._check(step_end_changes(recorded.end, record))
        self.steps += 1

    def _flow_ended(self, record: FlowEnd) -> None:
        for step in self.recorded.steps():
            if step.path not in self.ran:
                self._check(
                    [
                        Change(
                            "step",
                            "ran",
                            "removed",
                            step.kind,
                            None,
                            {"step": step.path},
                            step.path or None,
                        )
                    ]
                )
        if self.recorded.end is None:
            self._end("", "the recording ends before the flow did")
        self._check(end_changes(self.recorded.end, record))

    # -- stopping ----------------------------------------------------------------------

    def _check(self, changes: list[Change]) -> None:
        if changes:
            d = dataclasses.replace(FlowDivergence.of_change(changes[0]), others=len(changes) - 1)
            self._diverge(d)

    def _go_live(self, d: FlowDivergence) -> None:
        if self.divergence is None:
            self.divergence = d
        self.live = True

    def _diverge(self, d: FlowDivergence) -> None:
        if self.divergence is None:
            self.divergence = d
        raise ReplayDivergedError(
            f"the replay of {self.recorded.path.name} departed from it at {d.describe()}",
            divergence=d,
        )

    def _end(self, path: str, why: str) -> None:
        if self.ended_at is None:
            self.ended_at = path
        raise ReplayEndedError(f"{why}: the recorded flow stopped there")

    def _found_run(self, path: str) -> Path | None:
        """The run of an agent step whose end the log does not hold (a log cut off while
        it ran): named by the order it started in and its path."""
        from afcore.flows._log import _slug

        folder = self.recorded.path.parent / self.recorded.path.stem
        found = sorted(folder.glob(f"[0-9][0-9][0-9]-{_slug(path)}.jsonl"))
        return found[0] if len(found) == 1 else None

    def close(self) -> None:
        for tape in self._tapes:
            tape.close()
        self._tapes = []


def _up(path: str) -> str | None:
    return path.rpartition("/")[0] or None if "/" in path else None


def _shown(flow: FlowRecording, file: Path) -> str:
    try:
        return file.relative_to(flow.path.parent).as_posix()
    except ValueError:
        return file.name


def replaying_flow(
    flow: Flow,
    recording: str | Path | FlowRecording,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
) -> Flow:
    """A copy of ``flow`` whose runs replay the recorded flow run ``recording``: each agent
    step replays its recorded run, and the first difference raises ``ReplayDivergedError``
    (its ``divergence`` a :class:`FlowDivergence`; ``then_live``: the flow goes on live
    from there, see the module). Each run writes its own recording (``out``, or the flow's
    folder), whose header's ``replay_of`` names the one replayed."""
    recorded = recording if isinstance(recording, FlowRecording) else open_flow(recording)
    return replaying_copy(flow, FlowReplayer(recorded, tools=tools, then_live=then_live), out)


def replay_flow(
    recording: str | Path | FlowRecording,
    flow: Flow,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
    state: dict[str, Any] | None = None,
) -> FlowReplayReport:
    """Run ``flow`` again on the message the recorded flow run was given, every agent step
    answered from its recorded run, and say whether the run is the recorded one
    (:class:`FlowReplayReport`). ``then_live``: go on past the first difference, live (see
    the module). ``state``: the state's first values, as the recorded run was given them."""
    return run_sync(
        areplay_flow(recording, flow, tools=tools, then_live=then_live, out=out, state=state),
        "replay_flow",
    )


async def areplay_flow(
    recording: str | Path | FlowRecording,
    flow: Flow,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
    state: dict[str, Any] | None = None,
) -> FlowReplayReport:
    """The async form of :func:`replay_flow`."""
    where = recording.shown if isinstance(recording, FlowRecording) else Path(recording)
    try:
        recorded = recording if isinstance(recording, FlowRecording) else open_flow(recording)
    except (OSError, RecordingError) as e:
        return FlowReplayReport("failed", 0, 0, 0, where, error=str(e))
    message = recorded.top.start.input if recorded.top is not None else None
    if not isinstance(message, str):
        said = "holds no step" if recorded.top is None else "does not hold the message it was given"
        return FlowReplayReport(
            "failed", 0, 0, 0, where, error=f"{where.name} {said}: there is no flow run to replay"
        )
    replayed = replaying_flow(flow, recorded, tools=tools, then_live=then_live, out=out)
    replayer = replayed.replayer
    assert isinstance(replayer, FlowReplayer)
    failure: BaseException | None = None
    try:
        await replayed.arun_result(message, state=state)
    except (ReplayDivergedError, ReplayEndedError):
        pass
    except ReplayError as e:
        return FlowReplayReport(
            "failed",
            replayer.steps,
            replayer.calls,
            replayer.identical_calls,
            where,
            recording=replayer.recording,
            error=str(e),
        )
    except AfError as e:  # the flow ended on an error, as its log says: compared above
        failure = e
    finally:
        replayer.close()
    result = replayed.last_result
    d = replayer.divergence
    return FlowReplayReport(
        status="diverged" if d is not None else "identical",
        steps=replayer.steps,
        calls=replayer.calls,
        identical_calls=replayer.identical_calls,
        replay_of=where,
        recording=replayer.recording,
        divergence=d,
        ended_at=replayer.ended_at,
        error=None if failure is None else f"{type(failure).__name__}: {failure}",
        answer=result.answer if result is not None and result.answer else None,
        finished=recorded.end is not None,
        live_steps=list(replayer.live_steps) if then_live else [],
        then_live=then_live,
    )
