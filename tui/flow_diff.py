"""A flow run against another (``af lens A --diff B`` of two flows' logs), as the flow screen
draws it: under each step of the tree that differs, one row per difference of its own (a
decision that went the other way with the values its predicates read on each side, what it
gave or wrote), the steps that ran only in the other run where they would have been, and
for the selected call the differences of its agent's run at that call
(:func:`tui.diff.diff_entries`). Every text shown is made safe and cut to one line; Enter
on a row shows it whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from afcore.readmodel import (
    CallDiff,
    Change,
    FlowDiff,
    StepDiff,
    as_text,
    evidence_text,
    line,
    plural,
    safe,
    status_style,
)
from afcore.recording import FlowLogStep, FlowRecording
from tui.diff import shown, whole

__all__ = ["DiffRow", "FlowAgainst", "change_rows", "other_rows"]

_MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("≠", "yellow")}


@dataclass(frozen=True, slots=True)
class DiffRow:
    """A row of the tree that says a difference."""

    text: Text
    why: str | None
    """An ``af why`` key of this run's flow (``w``)."""
    title: str
    full: str
    """What Enter shows."""


class FlowAgainst:
    """The flow's run compared with another: what the screen asks while it draws."""

    def __init__(self, found: FlowDiff, other: FlowRecording, name: str) -> None:
        self.found = found
        self.other = other
        self.name = name
        """The other log's file name."""
        self.steps: dict[str, StepDiff] = {s.path: s for s in found.steps}
        self._only_b: dict[str, list[StepDiff]] = {}
        for s in found.steps:
            if s.only_in == "b":
                self._only_b.setdefault(_parent(s.path), []).append(s)

    def summary(self) -> Text:
        d = self.found
        if d.identical:
            return Text(
                f"= identical to {safe(self.name)}: {plural(d.compared, 'step')}, the same ending",
                "green",
            )
        text = Text(f"≠ b = {safe(self.name)}: ", "bold yellow")
        text.append(f"{len(d.steps)} of {_differ(d.compared, 'step', len(d.steps))}")
        only_a = sum(1 for s in d.steps if s.only_in == "a")
        only_b = sum(1 for s in d.steps if s.only_in == "b")
        if only_a or only_b:
            text.append(f" ({only_a} only here, {only_b} only in b)", "dim")
        calls = sum(len(s.run.calls) for s in d.steps if s.run is not None)
        if calls:
            text.append(f" · {_differ(calls, 'call')}", "magenta")
        if d.end:
            text.append(" · the endings differ", "bold")
        return text

    def mark(self, path: str) -> Text | None:
        """What the step's row of the tree adds (None: the same in both)."""
        s = self.steps.get(path)
        if s is None:
            return None
        if s.only_in == "a":
            return Text("only here", "bold yellow")
        said = []
        if s.changes:
            said.append(plural(len(s.changes), "difference"))
        if s.run is not None:
            said.append(
                f"{len(s.run.calls)} of {_differ(s.run.compared, 'call', len(s.run.calls))}"
            )
        if s.run_error is not None:
            said.append("runs not compared")
        return Text(f"≠ {', '.join(said)}", "yellow")

    def rows(self, path: str, pad: str, width: int) -> Iterator[DiffRow]:
        """The rows under the step at ``path``, ``width`` columns each at most: its own
        differences, then for the top step how the flows ended."""
        s = self.steps.get(path)
        if s is not None:
            for change in s.changes:
                yield from change_rows(change, path, pad, width)
            if s.run_error is not None:
                yield DiffRow(
                    Text.assemble(pad, "  ", ("✗ ", "red"), line(s.run_error, 200)),
                    path or None,
                    f"{path or '(top)'} · runs not compared",
                    s.run_error,
                )
            if s.run is not None:
                for change in s.run.end:
                    yield from change_rows(change, path, pad, width, prefix="run end ")
        if not path:
            for change in self.found.end:
                yield from change_rows(change, path, pad, width, prefix="flow end ")

    def only_b(self, parent: str) -> list[StepDiff]:
        """The steps directly under ``parent`` that ran only in the other run."""
        return self._only_b.get(parent, [])

    def call(self, step: str, n: int) -> tuple[str, CallDiff | None]:
        """How call ``n`` of the step at ``step`` compares: ``same``, ``differs`` (with its
        differences), ``only`` (its step ran only here) or ``unknown`` (its runs could not
        be compared)."""
        s = self.steps.get(step)
        if s is None:
            return "same", None
        if s.only_in == "a":
            return "only", None
        if s.run_error is not None:
            return "unknown", None
        if s.run is None:
            return "same", None
        found = next((c for c in s.run.calls if c.call == n), None)
        return ("same", None) if found is None else ("differs", found)


def change_rows(
    change: Change, step: str, pad: str, width: int, prefix: str = ""
) -> Iterator[DiffRow]:
    """A difference of the step at ``step`` on a row (the values cut short, or each on a
    row of its own), and for a predicate that answered otherwise the values it read on
    each side."""
    mark, style = _MARKS.get(change.kind, ("≠", "yellow"))
    text = Text.assemble(pad, "  ", (f"{mark} ", style), (safe(prefix + change.path), "bold"))
    room = max(width - len(pad) - 8, 24)
    below: list[Text] = []
    if change.kind == "added":
        text.append(f" only in b: {_short(change.b, room)}", "green")
    elif change.kind == "removed":
        text.append(f" only here: {_short(change.a, room)}", "red")
    else:
        a, b = shown(change.a), shown(change.b)
        if len(text) + len(a) + len(b) + 6 <= width:
            text.append(f" {_short(change.a, room)}", "")
            text.append(" → b ", "dim")
            text.append(_short(change.b, room), "yellow")
        else:  # each on a row of its own, where it has the room
            for label, value, style in (("a", change.a, ""), ("b", change.b, "yellow")):
                below.append(
                    Text.assemble(pad, "    ", (f"{label} ", "dim"), (_short(value, room), style))
                )
    full = f"a: {whole(change.a)}\n\nb: {whole(change.b)}"
    title = f"{step or '(top)'} · {prefix}{change.path}"
    reads = [(label, change.where.get(key)) for label, key in (("a", "reads_a"), ("b", "reads_b"))]
    said = [(label, r) for label, r in reads if isinstance(r, dict) and r]
    if said:
        full += "\n\n" + "\n".join(f"{label} read: {evidence_text(r)}" for label, r in said)
    yield DiffRow(text, change.why_key, title, full)
    for row in below:
        yield DiffRow(row, change.why_key, title, full)
    for label, r in said:
        assert isinstance(r, dict)
        row = Text.assemble(pad, "    ", (f"{label} read ", "dim"), line(evidence_text(r), 400))
        yield DiffRow(row, change.why_key, title, full)


def other_rows(against: FlowAgainst, step: StepDiff, pad: str) -> Iterator[DiffRow]:
    """A step that ran only in the other run, and those under it."""
    found: FlowLogStep | None = against.other.find(step.path)
    status = found.status if found is not None else "?"
    label = step.path.rsplit("/", 1)[-1]
    text = Text.assemble(
        pad, ("+ ", "green"), (safe(label), "bold green"), (f" {safe(step.kind)} ", "dim")
    )
    text.append("only in b ", "bold green")
    text.append(status, status_style(status))
    full = f"step {step.path} ({step.kind}) ran only in {against.name}: {status}"
    if found is not None and found.end is not None:
        end = found.end
        if end.output is not None:
            full += f"\n\noutput: {as_text(end.output)}"
        if end.calls:
            full += f"\n\n{plural(end.calls, 'call')}"
        if end.error is not None:
            full += f"\n\nerror: {end.error.kind}: {end.error.message}"
    yield DiffRow(text, None, f"{step.path} · only in b", full)
    for child in against.only_b(step.path):
        yield from other_rows(against, child, pad + "  ")


def _differ(n: int, what: str, differing: int | None = None) -> str:
    """``3 calls differ``, ``1 call differs``; with ``differing``: ``(1 of) 2 calls
    differ``, ``(1 of) 1 call differs``."""
    verb = "differs" if (n if differing is None else differing) == 1 else "differ"
    return f"{plural(n, what)} {verb}"


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _short(value: Any, room: int) -> str:
    return line(shown(value), room)
