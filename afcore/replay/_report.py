"""What a replay found: identical, or where it first departed from the recording."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from afcore.readmodel import Change, plural

__all__ = ["Divergence", "FlowDivergence", "FlowReplayReport", "ReplayReport", "ReplayStatus"]

ReplayStatus = Literal["identical", "diverged", "failed"]


@dataclass(frozen=True, slots=True)
class Divergence:
    """The first place a replay departed from the recording."""

    call: int
    """The call it is at: the call whose request differs, or whose reply asked for the tool
    whose result differs."""
    slot: str
    """``model``, ``system``, ``messages``, ``tools``, ``params``, ``cache``, ``attempt``,
    ``tool_result``, ``tool_args`` (with served tool results: the arguments a tool would
    run with), or ``run`` (a call one side has and the other has not, the ending, a pause
    for a person)."""
    path: str
    """Where in the slot: ``segment 3 (instruction currency)``, ``message 7: content``,
    ``tool weather: input_schema.properties.city.type``, ``params.temperature``,
    ``tool:find_places#1``, ``status``."""
    kind: Literal["added", "removed", "changed"]
    recorded: Any
    """The value the recording holds there (None: the replay added it)."""
    replayed: Any
    """The value the replay has there (None: the replay left it out)."""
    why_key: str | None
    """The ``af why`` key that explains the recorded side (with ``--at call:<call>``)."""
    where: dict[str, Any] = field(default_factory=dict)
    """The place as data: ``segment``, ``injection``, ``message``, ``tool``, ``field``,
    ``param``."""
    others: int = 0
    """How many more differences the same call has (``af diff`` lists them)."""

    @classmethod
    def of(cls, call: int, change: Change, others: int = 0) -> Divergence:
        return cls(
            call=call,
            slot=change.slot,
            path=change.path,
            kind=change.kind,
            recorded=change.a,
            replayed=change.b,
            why_key=change.why_key,
            where=dict(change.where),
            others=others,
        )

    def describe(self) -> str:
        """One line: where, and what happened there."""
        return _describe(f"call {self.call}", self.slot, self.path, self.kind)

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)


@dataclass(slots=True)
class ReplayReport:
    """How a replay went."""

    status: ReplayStatus
    """``identical``: every call the recording holds was sent again exactly, every tool
    result compared the same and the run ended as it did; ``diverged``: see
    :attr:`divergence`; ``failed``: the replay could not be run (:attr:`error`)."""
    calls: int
    """Calls the replay made (answered from the recording, or live past a divergence)."""
    identical_calls: int
    """Calls sent exactly as recorded before the first difference."""
    replay_of: Path
    """The recording replayed."""
    recording: Path | None = None
    """The replay's own recording (its header's ``replay_of`` names the one replayed)."""
    divergence: Divergence | None = None
    live_from: int | None = None
    """With ``then_live``: the first call the agent's own provider answered."""
    ended_at: int | None = None
    """The call at which the recording ends without what the run needed next (its run
    stopped there): the replay stopped with it, everything before it identical."""
    error: str | None = None
    """Why the replay failed, or the error its run ended on."""
    answer: str | None = None
    """The replay's answer (the recorded one, for an identical replay)."""
    resumed: list[str] = field(default_factory=list)
    """Each pause for a person the replay met where the recorded run did, answered as the
    person answered it then (``approved by jo: known customer``)."""
    paused: str | None = None
    """The question the replay ends paused on, as the recorded run did (nobody answered it
    in the recording)."""
    finished: bool = True
    """False when the recording ends before its run did (a torn file, a run killed): what
    it holds was compared, and the rest of the run cannot be. An identical replay of an
    unfinished run is not :attr:`ok`."""

    @property
    def ok(self) -> bool:
        """Identical, and to the end of the recorded run: a replay that stopped where the
        recording could not answer (:attr:`ended_at`) compared only part of it."""
        return self.status == "identical" and self.finished and self.ended_at is None

    def summary(self) -> str:
        """``23 calls, identical``; ``diverged at call 5, ...``; ``failed: ...``."""
        if self.status == "identical":
            calls = plural(self.calls, "call")
            text = f"{calls}, identical"
            if not self.finished and self.ended_at is None:
                # Every call it holds was answered: only its ending is missing.
                text = (
                    f"the recorded run did not finish: {calls} identical, the recording ends "
                    "before the run did"
                )
            elif self.ended_at is not None:
                text += f" (the recording ends at call {self.ended_at}, before its answer)"
            notes = [f"paused and {how}" for how in self.resumed]
            if self.paused is not None:
                notes.append(f"paused, as recorded: {self.paused}")
            if notes:
                text += "; " + "; ".join(notes)
            return text
        if self.status == "diverged" and self.divergence is not None:
            return f"diverged at {self.divergence.describe()}"
        return f"failed: {self.error}"

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)


@dataclass(frozen=True, slots=True)
class FlowDivergence:
    """The first place a replay of a flow departed from the recorded flow run: in the flow
    itself (a step that ran in one only, a decision, a merge, what a step gave or wrote,
    the ending), or inside an agent step's run (``call`` says which call)."""

    step: str
    """The path of the step it is in (``""``: the top flow)."""
    slot: str
    """For the flow's own difference: ``step``, ``decision``, ``merge`` or ``end``; inside
    an agent's run, the call's slot as for an agent's replay (``system``, ``messages``,
    ``tools``, ``tool_result``, ``run``, ...)."""
    path: str
    """Where in it: ``predicate billing: answered``, ``wrote state.intent``, ``chosen``,
    ``ran``; inside an agent's run, as :attr:`Divergence.path`."""
    kind: Literal["added", "removed", "changed"]
    recorded: Any
    replayed: Any
    why_key: str | None
    """The ``af why`` key that explains the recorded side: of the flow's log (``state.intent``,
    ``route/billing``, ``answer``), or, with :attr:`run`, of that agent's recorded run (with
    ``--at call:<call>``)."""
    call: int | None = None
    """Inside an agent step's run: the call it is at."""
    run: str | None = None
    """Inside an agent step's run: the recorded run's file, relative to the log's folder."""
    where: dict[str, Any] = field(default_factory=dict)
    others: int = 0

    @classmethod
    def of_change(cls, change: Change) -> FlowDivergence:
        where = dict(change.where)
        return cls(
            step=str(where.get("step", "")),
            slot=change.slot,
            path=change.path,
            kind=change.kind,
            recorded=change.a,
            replayed=change.b,
            why_key=change.why_key,
            where=where,
        )

    @classmethod
    def in_agent(cls, step: str, run: str | None, d: Divergence) -> FlowDivergence:
        return cls(
            step=step,
            slot=d.slot,
            path=d.path,
            kind=d.kind,
            recorded=d.recorded,
            replayed=d.replayed,
            why_key=d.why_key,
            call=d.call,
            run=run,
            where=dict(d.where),
            others=d.others,
        )

    def describe(self) -> str:
        """One line: where, and what happened there."""
        step = f"step {self.step}" if self.step else "the top flow"
        if self.call is not None:
            return f"{step}, {_describe(f'call {self.call}', self.slot, self.path, self.kind)}"
        return _describe(step, self.slot, self.path, self.kind)

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)


@dataclass(slots=True)
class FlowReplayReport:
    """How a replay of a flow went."""

    status: ReplayStatus
    """``identical``: every step ran as recorded (the same decisions on the same evidence,
    the same outputs and writes), every agent step's calls were sent again exactly and the
    flow ended as it did; ``diverged``: see :attr:`divergence`; ``failed``: the replay
    could not be run (:attr:`error`)."""
    steps: int
    """Steps the replay ran to their end (the top flow among them)."""
    calls: int
    """Model calls its agents made, all answered from the recording."""
    identical_calls: int
    """Calls sent exactly as recorded before the first difference."""
    replay_of: Path
    recording: Path | None = None
    """The replay's own log (its header's ``replay_of`` names the one replayed)."""
    divergence: FlowDivergence | None = None
    ended_at: str | None = None
    """The step at which the recording ends without what the replay needed next (the
    recorded flow stopped there): the replay stopped with it."""
    error: str | None = None
    """Why the replay failed, or the error the flow ended on (as recorded)."""
    answer: str | None = None
    finished: bool = True
    """False when the recorded flow did not finish (no ``flow_end``)."""
    then_live: bool = False
    """The replay went on live past its first difference (``then_live``)."""
    live_steps: list[str] = field(default_factory=list)
    """With ``then_live``: the agent steps whose calls, some or all, their agents' own
    providers answered, in the order they ended or started live."""

    @property
    def ok(self) -> bool:
        return self.status == "identical" and self.finished and self.ended_at is None

    def summary(self) -> str:
        """``4 steps, 2 calls, identical``; ``diverged at step route, ...``; ``failed: ...``."""
        if self.status == "identical":
            steps = f"{self.steps} step{'s' if self.steps != 1 else ''}"
            calls = plural(self.calls, "call")
            if self.ended_at is not None or not self.finished:
                where = f" in step {self.ended_at}" if self.ended_at else ""
                return (
                    f"the recorded flow did not finish: {steps}, {calls} identical, the "
                    f"recording ends{where} before the flow did"
                )
            return f"{steps}, {calls}, identical"
        if self.status == "diverged" and self.divergence is not None:
            return f"diverged at {self.divergence.describe()}"
        return f"failed: {self.error}"

    def to_json(self) -> dict[str, Any]:
        return _as_json(self)


def _describe(at: str, slot: str, path: str, kind: str) -> str:
    what = {"added": "only in the replay", "removed": "only in the recording"}.get(kind, "differs")
    words = {"tool_result": "tool result", "tool_args": "tool arguments"}
    return f"{at}, {words.get(slot, slot)}, {path}: {what}"


def _as_json(report: Any) -> dict[str, Any]:
    """Every field as JSON: paths as text, a divergence as its own JSON."""
    out: dict[str, Any] = {}
    for f in fields(report):
        value = getattr(report, f.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, Divergence | FlowDivergence):
            value = value.to_json()
        out[f.name] = value
    return out
