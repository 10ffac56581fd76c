"""Two flow runs side by side (``af diff`` of two composed runs, and the first difference
``af replay`` of a flow stops at): the steps that ran in one and not the other, the decisions
that went another way and the values their predicates read, what the steps gave and wrote,
the merges, then call by call inside the agent steps both ran (:func:`diff_runs`).

Steps are aligned by path (a loop's turns by their ``@turn``), so a branch taken in one run
and not the other is one step only in each, however the two runs interleaved their parallel
branches. The record comparisons here are the ones a replay makes as the flow runs again.

A difference is a :class:`Change` whose ``slot`` is one of :data:`FLOW_SLOTS`; its
``why_key`` is an ``af why`` key of the first run's flow (``state.intent``,
``route/billing``, ``answer``), and ``where`` holds the step's path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from afcore.readmodel._diff import Change, RunDiff, diff_runs

if TYPE_CHECKING:
    from afcore.recording import (
        FlowEnd,
        FlowLogStep,
        FlowRecording,
        StepDecision,
        StepEnd,
        StepMerge,
        StepStart,
    )

__all__ = [
    "FLOW_SLOTS",
    "FlowDiff",
    "FlowSide",
    "StepDiff",
    "decision_changes",
    "diff_flows",
    "end_changes",
    "merge_changes",
    "start_changes",
    "step_changes",
    "step_end_changes",
]

FLOW_SLOTS = ("step", "decision", "merge", "end")
"""Where a flow's own difference can be: a step (that it ran, its input, status, output,
writes, reads), a decision, a merge, the flow's ending."""


def _said(path: str) -> str:
    return path or "(top)"


def _change(
    slot: str, step: str, path: str, a: Any, b: Any, why: str | None, **where: Any
) -> Change:
    kind = "added" if a is None and b is not None else "removed" if b is None else "changed"
    return Change(slot, path, kind, a, b, {"step": step, **where}, why)  # type: ignore[arg-type]


def _state_changes(kind: str, step: str, a: Any, b: Any, why: str | None) -> list[Change]:
    """What a step or a merge read and wrote differently, key by key."""
    out: list[Change] = []
    reads_a, reads_b = dict(a.reads), dict(b.reads)
    for key in _keys(reads_a, reads_b):
        if reads_a.get(key, _NONE) != reads_b.get(key, _NONE):
            because = key if key.startswith("state.") else why
            out.append(
                _change(
                    kind,
                    step,
                    f"read {key}",
                    reads_a.get(key),
                    reads_b.get(key),
                    because,
                    field="reads",
                    key=key,
                )
            )
    for key in _keys(a.writes, b.writes):
        if a.writes.get(key, _NONE) != b.writes.get(key, _NONE):
            out.append(
                _change(
                    kind,
                    step,
                    f"wrote state.{key}",
                    a.writes.get(key),
                    b.writes.get(key),
                    f"state.{key}",
                    field="writes",
                    key=key,
                )
            )
    return out


def start_changes(a: StepStart, b: StepStart) -> list[Change]:
    """A step began otherwise: its kind, or the message it was given."""
    out = []
    if a.kind != b.kind:
        out.append(_change("step", a.path, "kind", a.kind, b.kind, a.path or None, field="kind"))
    if a.input != b.input:
        out.append(
            _change("step", a.path, "input", a.input, b.input, a.path or None, field="input")
        )
    return out


def step_end_changes(a: StepEnd, b: StepEnd) -> list[Change]:
    """A step ended otherwise: its status, the values it read (a function), what it wrote,
    its output, the calls its agent made, its error. Not its duration, nor its run's file
    and usage (a replay's are its own)."""
    step, out = a.path, []
    why = step or None
    if a.status != b.status:
        out.append(_change("step", step, "status", a.status, b.status, why, field="status"))
    out += _state_changes("step", step, a, b, why)
    if a.output != b.output and a.status != "paused":
        out.append(_change("step", step, "output", a.output, b.output, why, field="output"))
    if a.produced_by != b.produced_by:
        out.append(
            _change(
                "step", step, "produced by", a.produced_by, b.produced_by, why, field="produced_by"
            )
        )
    if a.calls != b.calls:
        out.append(_change("step", step, "calls", a.calls, b.calls, why, field="calls"))
    ea = None if a.error is None else f"{a.error.kind}: {a.error.message}"
    eb = None if b.error is None else f"{b.error.kind}: {b.error.message}"
    if ea != eb:
        out.append(_change("step", step, "error", ea, eb, why, field="error"))
    return out


def decision_changes(a: StepDecision, b: StepDecision) -> list[Change]:
    """A decision made otherwise: for each predicate asked, in order, the values it read
    (the evidence), then what it answered; a predicate asked in one run only; then the
    branch chosen. The ``af why`` key of a value read is that state key; of the rest, the
    branch the first run chose (which says what chose it and why)."""
    step, out = a.path, []
    where: dict[str, Any] = {} if a.turn is None else {"turn": a.turn}
    turn = "" if a.turn is None else f"turn {a.turn}: "
    chosen_key = f"{step}/{a.chosen}" if a.chosen and a.turn is None else step or None
    verdicts_b = {v.name: v for v in b.verdicts}
    for va in a.verdicts:
        vb = verdicts_b.pop(va.name, None)
        if vb is None:
            out.append(
                _change(
                    "decision",
                    step,
                    f"{turn}predicate {va.name}",
                    _verdict(va),
                    None,
                    chosen_key,
                    verdict=va.name,
                    **where,
                )
            )
            continue
        reads_a, reads_b = dict(va.reads), dict(vb.reads)
        read_otherwise = [
            k for k in _keys(reads_a, reads_b) if reads_a.get(k, _NONE) != reads_b.get(k, _NONE)
        ]
        if va.fired != vb.fired or va.error != vb.error:
            # Answered otherwise: the values it read say whether the evidence or the
            # predicate changed.
            state = next((k for k in read_otherwise if k.startswith("state.")), None)
            out.append(
                _change(
                    "decision",
                    step,
                    f"{turn}predicate {va.name}: answered",
                    _verdict(va),
                    _verdict(vb),
                    state or chosen_key,
                    verdict=va.name,
                    field="fired",
                    reads_a=reads_a,
                    reads_b=reads_b,
                    **where,
                )
            )
            continue
        for key in read_otherwise:
            out.append(
                _change(
                    "decision",
                    step,
                    f"{turn}predicate {va.name}: read {key}",
                    reads_a.get(key, _MISSING_READ),
                    reads_b.get(key, _MISSING_READ),
                    key if key.startswith("state.") else chosen_key,
                    verdict=va.name,
                    field="reads",
                    key=key,
                    **where,
                )
            )
    for vb in verdicts_b.values():
        out.append(
            _change(
                "decision",
                step,
                f"{turn}predicate {vb.name}",
                None,
                _verdict(vb),
                chosen_key,
                verdict=vb.name,
                **where,
            )
        )
    if a.chosen != b.chosen:
        out.append(
            Change(
                "decision",
                f"{turn}chosen",
                "changed",
                a.chosen,
                b.chosen,
                {"step": step, "field": "chosen", **where},
                chosen_key,
            )
        )
    return out


def merge_changes(a: StepMerge, b: StepMerge) -> list[Change]:
    """A merge made otherwise: its branches' statuses, what it read and wrote, its output,
    its error."""
    step, out = a.path, []
    why = step or None
    for name in _keys(a.branches, b.branches):
        if a.branches.get(name) != b.branches.get(name):
            out.append(
                _change(
                    "merge",
                    step,
                    f"branch {name}",
                    a.branches.get(name),
                    b.branches.get(name),
                    f"{step}/{name}" if step else name,
                    field="branches",
                    branch=name,
                )
            )
    out += _state_changes("merge", step, a, b, why)
    if a.output != b.output:
        out.append(_change("merge", step, "output", a.output, b.output, why, field="output"))
    ea = None if a.error is None else f"{a.error.kind}: {a.error.message}"
    eb = None if b.error is None else f"{b.error.kind}: {b.error.message}"
    if ea != eb:
        out.append(_change("merge", step, "error", ea, eb, why, field="error"))
    return out


def end_changes(a: FlowEnd | None, b: FlowEnd | None) -> list[Change]:
    """The flows ended otherwise: status, answer, the step that produced it."""
    if a is None and b is None:
        return []
    if a is None or b is None:
        return [
            _change(
                "end",
                "",
                "status",
                a.status if a else "did not finish",
                b.status if b else "did not finish",
                "answer",
                field="status",
            )
        ]
    out = []
    for name, x, y in (
        ("status", a.status, b.status),
        ("answer", a.answer, b.answer),
        ("produced_by", a.produced_by, b.produced_by),
    ):
        if x != y:
            out.append(_change("end", "", name.replace("_", " "), x, y, "answer", field=name))
    return out


@dataclass(frozen=True, slots=True)
class FlowSide:
    """One of the two flow runs, as a diff names it."""

    path: str
    run_id: str
    flow: str
    steps: int
    calls: int
    status: str | None
    """How it ended (None: it did not finish)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "run_id": self.run_id,
            "flow": self.flow,
            "steps": self.steps,
            "calls": self.calls,
            "status": self.status,
        }


@dataclass(slots=True)
class StepDiff:
    """A step that differs: it ran in one run only, or it ran in both and something of it
    (or inside its agent's run) differs."""

    path: str
    kind: str
    in_a: bool
    in_b: bool
    changes: list[Change] = field(default_factory=list)
    """Its own differences: how it began and ended, its decisions, its merge."""
    run: RunDiff | None = None
    """For an agent step both ran: its two runs, call by call (None: identical, or one
    could not be read)."""
    run_error: str | None = None
    """Why its two runs could not be compared (a file missing or unreadable)."""
    carried: int = 0
    """Differences it only passes on (a flow's output, taken from a step inside it; the
    state key its output is written under), not listed."""

    @property
    def only_in(self) -> str | None:
        return None if self.in_a and self.in_b else ("a" if self.in_a else "b")

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "in_a": self.in_a,
            "in_b": self.in_b,
            "changes": [c.to_json() for c in self.changes],
            "run": None if self.run is None else self.run.to_json(),
            "run_error": self.run_error,
            "carried": self.carried,
        }


@dataclass(slots=True)
class FlowDiff:
    """Two flow runs aligned step by step: the steps that differ, and how each ended."""

    a: FlowSide
    b: FlowSide
    steps: list[StepDiff]
    """The steps that differ, in the order of the composition (an identical step is not
    listed)."""
    end: list[Change]
    compared: int = 0
    """How many step paths were aligned (those of either run)."""

    @property
    def identical(self) -> bool:
        return not self.steps and not self.end

    def to_json(self) -> dict[str, Any]:
        return {
            "identical": self.identical,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "compared": self.compared,
            "steps": [s.to_json() for s in self.steps],
            "end": [c.to_json() for c in self.end],
        }


def diff_flows(a: FlowRecording, b: FlowRecording) -> FlowDiff:
    """Flow recordings ``a`` and ``b`` aligned step by step (by path), and inside each agent
    step both ran, call by call."""
    steps: list[StepDiff] = []
    compared = 0
    for sa, sb in _aligned(a.top, b.top):
        compared += 1
        one = _diff_step(a, b, sa, sb)
        if one is not None:
            steps.append(one)
    return FlowDiff(_side(a), _side(b), steps, end_changes(a.end, b.end), compared)


def step_changes(a: FlowLogStep, b: FlowLogStep) -> list[Change]:
    """Every difference of one step that ran in both runs: how it began, its decisions
    (turn by turn), its merge, how it ended."""
    out = start_changes(a.start, b.start)
    decisions_b = {d.turn: d for d in b.decisions}
    for da in a.decisions:
        db = decisions_b.pop(da.turn, None)
        if db is None:
            out.append(_change("decision", a.path, _turn(da.turn), da.chosen, None, a.path or None))
        else:
            out.extend(decision_changes(da, db))
    for db in decisions_b.values():
        out.append(_change("decision", a.path, _turn(db.turn), None, db.chosen, a.path or None))
    if a.merge is not None and b.merge is not None:
        out.extend(merge_changes(a.merge, b.merge))
    elif a.merge is not None or b.merge is not None:
        out.append(
            _change(
                "merge",
                a.path,
                "merge",
                a.merge.output if a.merge else None,
                b.merge.output if b.merge else None,
                a.path or None,
            )
        )
    if a.end is not None and b.end is not None:
        out.extend(step_end_changes(a.end, b.end))
    elif a.end is not None or b.end is not None:
        out.append(
            _change("step", a.path, "status", a.status, b.status, a.path or None, field="status")
        )
    return out


def _turn(turn: int | None) -> str:
    return "decision" if turn is None else f"turn {turn}: decision"


def _diff_step(
    a: FlowRecording, b: FlowRecording, sa: FlowLogStep | None, sb: FlowLogStep | None
) -> StepDiff | None:
    if sa is None or sb is None:
        one = sa if sa is not None else sb
        assert one is not None
        return StepDiff(one.path, one.kind, sa is not None, sb is not None)
    changes = step_changes(sa, sb)
    name = sa.name if sa.path else a.header.flow.name
    kept = [c for c in changes if not _carried(sa, sb, name, c)]
    diff = StepDiff(sa.path, sa.kind, True, True, kept, carried=len(changes) - len(kept))
    if sa.kind == "agent" and sb.kind == "agent":
        diff.run, diff.run_error = _agent_runs(a, b, sa, sb)
        if diff.run is not None:
            # Its answer and its count of calls are its run's, which says them call by call.
            inside = [c for c in diff.changes if c.where.get("field") in ("output", "calls")]
            diff.changes = [c for c in diff.changes if c not in inside]
            diff.carried += len(inside)
    if diff.changes or diff.run is not None or diff.run_error is not None:
        return diff
    return None


def _carried(a: FlowLogStep, b: FlowLogStep, name: str, change: Change) -> bool:
    """A difference the step only passes on: a flow's output (and its producer) taken from
    a step inside it; the state key every step's output is written under (its own name),
    which says what its output says; its input, which is the output of the step before it
    (or what the flow above was given): only the top flow's, the user's message, is its
    own."""
    if change.slot != "step":
        return False
    field = change.where.get("field")
    if field == "writes" and change.where.get("key") == name:
        return True
    if field == "input" and a.path:
        return True  # the output of the step before, or the message of the flow above
    if a.kind in ("agent", "function") or field not in ("output", "produced_by"):
        return False
    inside = [s.end.produced_by for s in (a, b) if s.end is not None]
    return any(p is not None and p != s.path for p, s in zip(inside, (a, b), strict=False))


def _agent_runs(
    a: FlowRecording, b: FlowRecording, sa: FlowLogStep, sb: FlowLogStep
) -> tuple[RunDiff | None, str | None]:
    from afcore.errors import RecordingError
    from afcore.recording import open_recording

    fa, fb = a.run_file(sa), b.run_file(sb)
    if fa is None or fb is None:
        return None, None  # a step cut off: its status says so
    try:
        with open_recording(fa) as ra, open_recording(fb) as rb:
            diff = diff_runs(ra, rb)
    except (OSError, ValueError, RecordingError) as e:  # ValueError: a NUL in a run's name
        return None, f"the runs of step {_said(sa.path)} cannot be compared: {e}"
    if diff.identical:
        return None, None
    # Each side named as its log names it, not by the copy a folded run is read from.
    diff.a = replace(diff.a, path=str(a.run_shown(sa) or fa))
    diff.b = replace(diff.b, path=str(b.run_shown(sb) or fb))
    return diff, None


def _aligned(
    a: FlowLogStep | None, b: FlowLogStep | None
) -> Iterator[tuple[FlowLogStep | None, FlowLogStep | None]]:
    """Both trees walked together, depth first: each step with the step at its path in the
    other run (None: it did not run there), in the first run's order, the second's own
    steps after those they follow."""
    if a is None and b is None:
        return
    yield a, b
    children_b = {s.path: s for s in b.steps} if b is not None else {}
    for child in a.steps if a is not None else ():
        yield from _aligned(child, children_b.pop(child.path, None))
    for child in children_b.values():
        yield from _aligned(None, child)


def _side(flow: FlowRecording) -> FlowSide:
    steps = list(flow.steps())
    calls = sum(s.end.calls for s in steps if s.end is not None and s.kind == "agent")
    return FlowSide(
        path=str(flow.shown),  # the file given (a bundle), not where it was unpacked
        run_id=flow.header.run_id,
        flow=flow.header.flow.name,
        steps=len(steps),
        calls=calls,
        status=flow.end.status if flow.end is not None else None,
    )


def _keys(a: Any, b: Any) -> list[str]:
    return list(a) + [k for k in b if k not in a]


def _verdict(v: Any) -> Any:
    return f"error: {v.error}" if v.error else v.fired


class _Missing:
    def __repr__(self) -> str:
        return "(not read)"


_NONE = _Missing()
_MISSING_READ = None
