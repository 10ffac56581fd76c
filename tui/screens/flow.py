"""A flow's recording in the Lens: the tree of its steps (each with its status, the decisions
taken with the values their predicates read, merges and loop turns) beside one scrubber of
every agent's calls in the order they happened, and the selected call's three slots and
response as the Lens shows any run's.

← → scrub across agents without leaving the screen; Enter on a step goes to its first call;
``w`` asks why of the selected item (a call's, as in any run; a step or a decision: the
graph of what produced it, with the values its predicates read); ``o`` opens the selected
call's agent run in a Lens of its own, ``b`` comes back.

With another flow's log to compare with (``af lens A --diff B``), the tree says under each
step what differs (:mod:`tui.flow_diff`) and shows the steps that ran only in B, the
scrubber marks the calls that differ, and the selected call's differences head its events.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

from msgspec.structs import replace
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from afcore.readmodel import (
    AgentRun,
    CallView,
    FlowCall,
    FlowTimeline,
    Mark,
    as_text,
    call_view,
    evidence_text,
    flow_timeline,
    line,
    ms_text,
    plural,
    safe,
    status_style,
)
from afcore.recording import FlowLogStep, FlowRecording, open_recording
from tui.diff import Entry
from tui.flow_diff import DiffRow, FlowAgainst, other_rows
from tui.response import response_entries
from tui.screens.lens import NAMED, STACK_BELOW, LensScreen
from tui.slots import Rows, slot_entries
from tui.widgets.item_list import Item, ItemList
from tui.widgets.scrubber import Scrubber

__all__ = ["FLOW_KEYS", "AgentRunScreen", "FlowScrubber", "FlowScreen"]

FLOW_KEYS: list[tuple[str, str]] = [
    ("← → or h l", "the call before, the call after, whichever agent made it"),
    ("Home End", "the first call, the last call"),
    ("Tab", "the next pane: the steps, the slots, the response and events"),
    ("Enter", "on a step: go to its first call; in the slots or events: open the item"),
    ("w", "why: of a call's item, as in any run; of a step or a decision, what produced it"),
    ("o", "open the selected call's agent run in a Lens of its own (b comes back)"),
    ("/", "search the flow's log and every agent's run; Enter goes to the step or the call"),
    ("?", "this help"),
    ("q", "quit"),
]

WIDE = 120
"""From this many columns the steps are beside the call, below it above."""

STEPS = 40
"""Columns of the steps' pane beside the call (lens.tcss says the same)."""
DIFF_STEPS = 56
"""The same when compared with another run (--diff): its rows say the differences."""
_VIEWS = 32


class AgentRunScreen(LensScreen):
    """An agent's run opened from a flow: the Lens as for any run, with a way back."""

    BINDINGS = [Binding("b", "back", "Back to the flow", id="flow.back")]
    """Added to the Lens's own, which it inherits."""

    def action_back(self) -> None:
        self.app.pop_screen()

    def on_unmount(self) -> None:
        self.rec.close()


class FlowScrubber(Scrubber):
    """The Lens's scrubber over every agent's calls: numbered along the flow, a ``│``
    where the next call is another agent's."""

    def _turns(self) -> int:
        return 1


class FlowScreen(Screen[None]):
    BINDINGS = [
        Binding("left,h", "move(-1)", "Prev call", priority=True, id="flow.prev-call"),
        Binding("right,l", "move(1)", "Next call", priority=True, id="flow.next-call"),
        Binding("home", "edge(0)", "First call", priority=True, show=False, id="flow.first"),
        Binding("end", "edge(1)", "Last call", priority=True, show=False, id="flow.last"),
        Binding("enter", "enter", "Go / open", priority=True, id="flow.enter"),
        Binding("w", "why", "Why", id="flow.why"),
        Binding("o", "open", "Agent's run", id="flow.open"),
        Binding("slash", "search", "Search", id="flow.search"),
        Binding("question_mark", "help", "Keys", id="flow.help"),
        Binding("q", "app.quit", "Quit", id="flow.quit"),
    ]

    def __init__(self, flow: FlowRecording, against: Path | None = None) -> None:
        super().__init__()
        self.flow = flow
        self.against = against
        """With --diff: the other flow's log this one is compared with."""
        self.compared: FlowAgainst | None = None
        self.said: dict[int, DiffRow] = {}
        """rows of the steps list that say a difference: what Enter shows"""
        self.timeline: FlowTimeline = FlowTimeline(flow)
        self.index = 0
        self.marks: list[Mark] = []
        """each call's mark, numbered along the flow, for the scrubber"""
        self.rows_of: list[tuple[str, str | None]] = []
        """each row of the steps list: (step path, decision key or None)"""
        self.views: OrderedDict[tuple[int, int], CallView] = OrderedDict()
        self.rows: dict[int, Rows] = {}
        """per agent run: its messages drawn, kept from call to call"""
        self.opened: dict[int, set[int]] = {}
        """per agent run: the folds whose seams are open"""
        self.shown: int | None = None
        self._width = 38
        """columns a row of the steps may take"""
        self._last_search = ""

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield FlowScrubber()
        with Horizontal(id="flow-body"):
            yield OptionList(id="steps", markup=False)
            with Horizontal(id="body"):
                yield ItemList(id="slots")
                yield ItemList(id="events")
        yield Footer()

    def on_resize(self, event: events.Resize) -> None:
        wide = event.size.width >= WIDE
        body = self.query_one("#flow-body")
        body.set_class(not wide, "-narrow")
        body.set_class(self.against is not None, "-diff")
        steps = DIFF_STEPS if self.against is not None else STEPS
        room = event.size.width - (steps if wide else 0)
        self.query_one("#body").set_class(room < STACK_BELOW, "-stacked")
        width = (steps if wide else event.size.width) - 4  # its border and scrollbar
        if width != self._width:
            self._width = width
            self._fill_steps()

    def on_mount(self) -> None:
        self.timeline = flow_timeline(self.flow)
        # The scrubber's marks, numbered along the flow; a new "turn" where the agent changes.
        agent_turn = 0
        last: AgentRun | None = None
        for c in self.timeline.calls:
            if c.run is not last:
                agent_turn += 1
                last = c.run
            self.marks.append(replace(c.mark, n=c.index + 1, turn=agent_turn))
        self._fill_steps()
        self.select(0)
        self.query_one("#steps", OptionList).focus()
        if self.against is not None:
            self.compare()

    @work(thread=True, exclusive=True, group="diff")
    def compare(self) -> None:
        """Compare the flow with the other one (--diff), off the screen's thread."""
        from afcore.errors import RecordingError
        from afcore.readmodel import diff_flows
        from afcore.recording import open_flow

        assert self.against is not None
        try:
            other = open_flow(self.against)
            found = diff_flows(self.flow, other)
        except (OSError, RecordingError) as e:
            self.app.call_from_thread(
                self.notify, f"cannot compare: {safe(str(e))}", severity="error", markup=False
            )
            return
        self.app.call_from_thread(self._compared, FlowAgainst(found, other, self.against.name))

    def _compared(self, against: FlowAgainst) -> None:
        self.compared = against
        self._fill_steps()
        if self.timeline.calls:
            self._draw_call(self.index, force=True)
        else:
            self._draw_top()

    def on_unmount(self) -> None:
        self.timeline.close()

    # -- the steps -----------------------------------------------------------------------

    def _fill_steps(self) -> None:
        options = self.query_one("#steps", OptionList)
        was = options.highlighted
        row = self.rows_of[was] if was is not None and was < len(self.rows_of) else None
        self.rows_of = []
        self.said = {}
        prompts: list[Option] = []
        if self.flow.top is not None:
            self._add(prompts, self.flow.top, 0)
        options.set_options(prompts)
        if prompts:
            # The same row, wherever the rows of a comparison put it.
            options.highlighted = self.rows_of.index(row) if row in self.rows_of else 0

    def _row(self, prompts: list[Option], text: Text, path: str, key: str | None) -> None:
        # One line a row, cut to the pane: the tree stays a tree (w says it all).
        text.truncate(max(self._width - 1, 8), overflow="ellipsis")
        prompts.append(Option(text, id=f"row:{len(self.rows_of)}"))
        self.rows_of.append((path, key))

    def _add(self, prompts: list[Option], step: FlowLogStep, depth: int) -> None:
        pad = "  " * depth
        label = step.path.rsplit("/", 1)[-1] if step.path else self.flow.header.flow.name
        text = Text.assemble(pad, (safe(label), "bold"), (f" {safe(step.kind)} ", "dim"))
        against = self.compared
        mark = against.mark(step.path) if against is not None else None
        if mark is not None:  # first: the row is cut to the pane
            text.append_text(mark)
            text.append(" ")
        text.append(step.status, status_style(step.status))
        end = step.end
        if end is not None:
            text.append(f" {ms_text(end.ms)}", "dim")
            if end.calls:
                text.append(f" {plural(end.calls, 'call')}", "cyan")
            if end.error is not None:
                text.append(f" {line(end.error.kind + ': ' + end.error.message, 80)}", "red")
            elif step.kind == "function" and end.output is not None:
                text.append(f" → {line(as_text(end.output), 60)}", "dim")
        run = self.timeline.run_of(step.path) if step.kind == "agent" else None
        if run is not None and run.problem is not None:
            text.append(f" ✗ {safe(run.problem)}", "red")
        self._row(prompts, text, step.path, None)
        if against is not None:
            for diff_row in against.rows(step.path, pad, self._width - 1):
                self._said(prompts, diff_row, step.path)
        for k, d in enumerate(step.decisions, 1):
            which = f"turn {d.turn}: " if d.turn is not None else ""
            chosen = d.chosen if d.chosen is not None else "nothing"
            note = Text.assemble(pad, "  ", ("⤷ ", "magenta"), f"{which}chose ")
            note.append(safe(chosen), "magenta")
            self._row(prompts, note, step.path, f"decision:{step.path}#{k}")
            reads = [r for v in d.verdicts for r in v.reads]
            if reads:
                evidence = line(evidence_text(dict(reads)), 400)
                said = Text.assemble(pad, "    ", (f"read {evidence}", "dim"))
                self._row(prompts, said, step.path, f"decision:{step.path}#{k}")
        for child in step.steps:
            self._add(prompts, child, depth + 1)
        if against is not None:
            for only in against.only_b(step.path):
                for diff_row in other_rows(against, only, "  " * (depth + 1)):
                    self._said(prompts, diff_row, only.path)
        if step.merge is not None:
            m = step.merge
            branches = " ".join(f"{safe(k)}={safe(v)}" for k, v in m.branches.items())
            merged = Text.assemble(pad, "  ", ("⤶ merge ", "magenta"), branches)
            self._row(prompts, merged, step.path, f"merge:{step.path}")

    def _said(self, prompts: list[Option], said: DiffRow, path: str) -> None:
        self.said[len(self.rows_of)] = said
        self._row(prompts, said.text, path, said.why)

    def _follow_step(self, call: FlowCall) -> None:
        """Keep the step of the selected call highlighted in the tree."""
        options = self.query_one("#steps", OptionList)
        rows = enumerate(self.rows_of)
        at = next((i for i, (p, k) in rows if p == call.step and k is None), None)
        if at is not None:
            options.highlighted = at

    # -- the selection -------------------------------------------------------------------

    def select(self, index: int) -> None:
        calls = self.timeline.calls
        if not calls:
            self._draw_top()
            note = Text("no agent's calls in this flow's recording", style="yellow")
            self.query_one("#slots", ItemList).fill([(note, None)], keep=False)
            self.query_one("#events", ItemList).fill([], keep=False)
            return
        self.index = max(0, min(index, len(calls) - 1))
        self._draw_top()
        self.call_later(self._draw_call, self.index)

    def view(self, call: FlowCall) -> CallView:
        key = (call.run.order, call.n)
        cached = self.views.get(key)
        if cached is not None:
            self.views.move_to_end(key)
            return cached
        assert call.run.rec is not None
        view = call_view(call.run.rec, call.run.timeline, call.n)
        self.views[key] = view
        if len(self.views) > _VIEWS:
            self.views.popitem(last=False)
        return view

    def _draw_call(self, index: int, force: bool = False) -> None:
        if index != self.index or (not force and self.shown == index):
            return
        call = self.timeline.calls[index]
        run = call.run
        assert run.rec is not None
        view = self.view(call)
        slots = self.query_one("#slots", ItemList)
        events = self.query_one("#events", ItemList)
        left = slots.size.width or self.app.size.width * 2 // 5
        right = events.size.width or self.app.size.width // 4
        rows = self.rows.setdefault(run.order, OrderedDict())
        opened = self.opened.setdefault(run.order, set())
        slots.fill(slot_entries(view, run.rec, opened, max(left - 26, 30), rows), keep=True)
        shown = response_entries(view, max(right, 30))
        if self.compared is not None:
            shown = chain(self._diff_entries(call, max(right, 30)), shown)
        events.fill(shown, keep=True)
        if self.shown != index:  # drawn again, the call leaves the tree where a person put it
            self._follow_step(call)
        self.shown = index
        self._draw_top()

    def _diff_entries(self, call: FlowCall, width: int) -> Iterator[Entry]:
        from tui.diff import diff_entries
        from tui.widgets.item_list import heading

        assert self.compared is not None
        name = self.compared.name
        how, found = self.compared.call(call.step, call.n)
        if how == "only":
            yield (
                heading("DIFF", f"its step ran only here, not in {safe(name)}"),
                None,
            )
            yield Text(""), None
        elif how == "unknown":
            yield heading("DIFF", f"its runs could not be compared ({safe(name)})"), None
            yield Text(""), None
        else:
            yield from diff_entries(call.n, found, f"{call.step} of {name}", width)

    def _differing(self) -> set[int] | None:
        """The scrubber's numbers of the calls that differ from the other run's."""
        against = self.compared
        if against is None:
            return None
        return {c.index + 1 for c in self.timeline.calls if against.call(c.step, c.n)[0] != "same"}

    def _draw_top(self) -> None:
        self.query_one("#header", Static).update(self._header())
        self.query_one(FlowScrubber).show(
            self.marks, self.index, self._position(), self._differing()
        )

    def _header(self) -> Text:
        h = self.flow.header
        end = self.flow.end
        text = Text.assemble(
            ("af lens ", "bold"),
            (line(h.run_id, NAMED), "bold cyan"),
            "  ",
            (line(h.flow.name, NAMED), "bold"),
        )
        text.append(f"  {h.flow.kind}", "dim")
        if end is None:
            text.append("  unfinished: no flow_end (cut off, or still running)", "yellow")
        else:
            text.append(f"  {end.status}", f"bold {status_style(end.status)}")
            text.append(
                f" · {plural(len(self.timeline.runs), 'agent')} · {plural(end.calls, 'call')}"
                f" · {ms_text(end.duration_ms)}",
                "dim",
            )
            if end.produced_by:
                text.append(f" · answer from {line(end.produced_by, NAMED)}", "cyan")
        if self.compared is not None:
            text.append("\n")
            text.append_text(self.compared.summary())
        elif self.against is not None:
            text.append(f"\ncomparing with {safe(self.against.name)}…", "dim")
        notes = [f"line {n}: {p}" for n, p in self.flow.problems]
        notes += [f"{r.step.path}: {r.problem}" for r in self.timeline.runs if r.problem]
        if notes:
            more = f" (+{len(notes) - 1} more)" if len(notes) > 1 else ""
            text.append(f"\n✗ {line(safe(notes[0]), 160)}{more}", "red")
        return text

    def _position(self) -> Text:
        calls = self.timeline.calls
        if not calls:
            return Text("no calls", style="dim")
        call = calls[self.index]
        mark = call.mark
        text = Text(f"call {self.index + 1}/{len(calls)}", style="bold")
        text.append(" · ")
        text.append(safe(call.step), "bold cyan")
        text.append(f" ({safe(call.run.agent)}) call {mark.n}/{len(call.run.timeline.marks)}")
        text.append(f" · iteration {mark.iteration}", "")
        # An estimate from durations (a file without send times) says so.
        text.append(f" · at {'≈' if call.placed else ''}{ms_text(call.at_ms)}", "dim")
        if not mark.agent:
            text.append(" · the summarizer's call", "magenta")
        view = self.views.get((call.run.order, mark.n))
        if view is not None and view.detail is not None:
            if view.detail.verified:
                text.append(" · ✓ verified", "green")
            else:
                text.append(" · ✗ not verified", "bold red")
        return text

    # -- actions -------------------------------------------------------------------------

    def action_move(self, step: int) -> None:
        self.select(self.index + step)

    def action_edge(self, end: int) -> None:
        self.select(len(self.timeline.calls) - 1 if end else 0)

    def _flush(self) -> None:
        if self.timeline.calls:
            self._draw_call(self.index)

    def action_enter(self) -> None:
        self._flush()
        focused = self.focused
        if isinstance(focused, ItemList):
            focused.action_select()
            return
        if isinstance(focused, OptionList) and focused.highlighted is not None:
            said = self.said.get(focused.highlighted)
            if said is not None:
                from tui.screens.viewer import Viewer

                self.app.push_screen(Viewer(said.title, said.full))
                return
            path, _ = self.rows_of[focused.highlighted]
            first = self.timeline.first_call(path)
            if first is None:
                self.notify("no agent's call was made under this step", severity="warning")
                return
            self.select(first)

    @on(OptionList.OptionSelected, "#steps")
    def _step_clicked(self, event: OptionList.OptionSelected) -> None:
        if event.option_index in self.said:
            return
        path, _ = self.rows_of[event.option_index]
        first = self.timeline.first_call(path)
        if first is not None:
            self.select(first)

    @on(ItemList.OptionSelected)
    def _open_item(self, event: ItemList.OptionSelected) -> None:
        listed = event.option_list
        if not isinstance(listed, ItemList) or event.option.id is None:
            return
        item = listed.items.get(event.option.id)
        if item is None or not self.timeline.calls:
            return
        call = self.timeline.calls[self.index]
        if item.seam is not None:
            self.opened.setdefault(call.run.order, set()).symmetric_difference_update({item.seam})
            self._draw_call(self.index, force=True)
        elif item.jump is not None:
            self._go_to(call.run, item.jump)
        elif item.run is not None:
            self._open_file(call.run, item.run)
        elif item.full is not None:
            from tui.screens.viewer import Viewer

            self.app.push_screen(Viewer(item.title, item.full))

    def _go_to(self, run: AgentRun, n: int, item: str | None = None) -> None:
        at = self.timeline.index_of(run, n)
        if at is None:
            self.notify(safe(f"{run.agent} made no call {n}"), severity="warning", markup=False)
            return
        self.select(at)
        if item is not None:
            self.call_later(self._highlight, at, item)

    def _highlight(self, index: int, item: str) -> None:
        self._draw_call(index)
        for name in ("#slots", "#events"):
            listed = self.query_one(name, ItemList)
            if listed.go_to(item):
                listed.focus()
                return

    def _open_file(self, run: AgentRun, relative: str) -> None:
        from afcore.errors import RecordingError
        from tui.app import PREFIX

        here = run.file.parent if run.file is not None else self.flow.path.parent
        try:
            inner = open_recording(here / relative, upto=PREFIX)
        except (RecordingError, OSError, ValueError) as e:  # ValueError: a NUL in the name
            self.notify(safe(f"cannot open {relative}: {e}"), severity="warning", markup=False)
            return
        self.app.push_screen(AgentRunScreen(inner, follow=False))

    def action_open(self) -> None:
        """The selected call's agent run in a Lens of its own, at that call."""
        from afcore.errors import RecordingError

        if not self.timeline.calls:
            return
        from afcore.recording import folded_run

        call = self.timeline.calls[self.index]
        file = call.run.file
        assert file is not None
        if not file.exists():  # opened while the flow ran; ended since, the run is in the log
            file = folded_run(file) or file
        try:
            rec = open_recording(file)
        except (RecordingError, OSError) as e:
            self.notify(safe(f"cannot open {file.name}: {e}"), severity="error", markup=False)
            return
        screen = AgentRunScreen(rec, follow=False)
        self.app.push_screen(screen)
        screen.call_later(screen.go_to, call.n)

    def action_why(self) -> None:
        focused = self.focused
        if isinstance(focused, OptionList) and not isinstance(focused, ItemList):
            if focused.highlighted is None:
                return
            path, key = self.rows_of[focused.highlighted]
            self._flow_why(key or path or "answer")
            return
        if not self.timeline.calls:
            return
        from tui.locate import locate
        from tui.screens.why import WhyScreen

        self._flush()
        call = self.timeline.calls[self.index]
        run = call.run
        assert run.rec is not None
        item: Item | None = focused.current if isinstance(focused, ItemList) else None
        key = item.why if item is not None and item.why else f"call:{call.n}"
        at = f"call:{call.n}" if key.startswith("system:") else None

        def chosen(at_line: int | None) -> None:
            if at_line is None or run.rec is None:
                return
            place = locate(run.rec, run.timeline, at_line)
            if place is not None:
                self._go_to(run, place.call, place.item)

        self.app.push_screen(WhyScreen(run.rec, key, at), chosen)

    def _flow_why(self, key: str) -> None:
        from tui.screens.flow_why import FlowWhyScreen

        def chosen(index: int | None) -> None:
            if index is not None:
                self.select(index)

        self.app.push_screen(FlowWhyScreen(self.flow, self.timeline, key), chosen)

    def action_search(self) -> None:
        """Search the flow's own log and every agent's run of it: a match in the log goes
        to its step's row in the tree (its decision's, its merge's), one in a run to its
        call."""
        from afcore.readmodel import flow_texts
        from tui.screens.search import LogMatch, Match, SearchScreen, Source

        runs = [r for r in self.timeline.runs if r.rec is not None]
        sources = []
        for run in runs:
            assert run.rec is not None
            # As the position line names a call's run: its step, then its agent.
            sources.append(Source(run.rec, run.timeline, f"{run.step.path} ({run.agent})"))
        screen = SearchScreen(sources, self._last_search, flow_texts(self.flow))

        def chosen(match: Match | LogMatch | None) -> None:
            self._last_search = screen.query_text
            if isinstance(match, LogMatch):
                self._show_row(match.text.step, match.text.key)
            elif match is not None:
                self._go_to(runs[match.source], match.place.call, match.place.item)

        self.app.push_screen(screen, chosen)

    def _show_row(self, path: str, key: str | None) -> None:
        """The tree's row of the step at ``path`` (with ``key``: of its decision or merge)
        highlighted and focused."""
        rows = self.rows_of
        at = next((i for i, row in enumerate(rows) if row == (path, key)), None)
        if at is None:
            at = next((i for i, (p, k) in enumerate(rows) if p == path and k is None), None)
        if at is None:
            return
        steps = self.query_one("#steps", OptionList)
        steps.highlighted = at
        steps.focus()

    def action_help(self) -> None:
        from tui.screens.help import Help

        self.app.push_screen(
            Help(FLOW_KEYS, "│ here: the next call is another agent's (its step is named below)")
        )
