"""The Lens's main screen: a recording replayed one model call at a time.

The screen: what ran (the header), the scrubber (a mark per call), the three slots of the
selected call as it was sent (left) and its response and the events after it (right). The
file is opened as a prefix first, so the first call is on screen at once; the whole file is
then indexed in the background and takes over (and, with ``follow``, again whenever the
file grows).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from afcore.errors import RecordingError
from afcore.readmodel import (
    CallDiff,
    CallView,
    RunDiff,
    SessionRuns,
    Timeline,
    build,
    call_view,
    line,
    plural,
    safe,
    status_style,
)
from afcore.recording import Recording, open_recording
from tui.response import response_entries
from tui.slots import Rows, slot_entries
from tui.widgets.item_list import Item, ItemList
from tui.widgets.scrubber import Scrubber

if TYPE_CHECKING:
    from tui.screens.search import LogMatch, Match


@runtime_checkable
class _Turns(Protocol):
    """The app, when it can open a session's other turns (the Lens app can)."""

    def session_runs(self) -> SessionRuns | None: ...
    def open_turn(self, rec: Recording, step: int) -> None: ...


# The screens a key opens (search, why, help, the viewer) are imported when first opened:
# the first call is on screen sooner.

__all__ = ["FOLLOW_EVERY", "LensScreen"]

FOLLOW_EVERY = 0.5
"""Seconds between two looks at a followed file."""
_VIEWS = 32
"""Calls whose views are kept, for going back and forth."""


STACK_BELOW = 100
"""Below this many columns the slots and the response are stacked, not side by side."""
NAMED = 48
"""Characters of a name (a run's, an agent's, a model's) the header shows at most."""


class LensScreen(Screen[None]):
    BINDINGS = [
        Binding("left,h", "move(-1)", "Prev call", priority=True, id="lens.prev-call"),
        Binding("right,l", "move(1)", "Next call", priority=True, id="lens.next-call"),
        Binding("home", "edge(0)", "First call", priority=True, show=False, id="lens.first"),
        Binding("end", "edge(1)", "Last call", priority=True, show=False, id="lens.last"),
        *[
            Binding(
                str(d),
                f"digit({d})",
                "Type a call number",
                show=False,
                priority=True,
                id=f"lens.digit-{d}",
            )
            for d in range(10)
        ],
        Binding("enter", "enter", "Open", priority=True, id="lens.open"),
        Binding(
            "escape",
            "forget",
            "Forget the number typed",
            show=False,
            priority=True,
            id="lens.forget",
        ),
        Binding(
            "backspace",
            "untype",
            "Erase a digit typed",
            show=False,
            priority=True,
            id="lens.untype",
        ),
        Binding("s", "section('seg:')", "System segments", show=False, id="lens.system"),
        Binding("m", "section('msg:')", "Messages", show=False, id="lens.messages"),
        Binding("t", "section('tool:')", "Tools", show=False, id="lens.tools"),
        Binding("left_square_bracket", "turn(-1)", "Prev turn", id="lens.prev-turn"),
        Binding("right_square_bracket", "turn(1)", "Next turn", id="lens.next-turn"),
        Binding("w", "why", "Why", id="lens.why"),
        Binding("slash", "search", "Search", id="lens.search"),
        Binding("question_mark", "help", "Keys", id="lens.help"),
        Binding("q", "app.quit", "Quit", id="lens.quit"),
    ]

    def __init__(self, rec: Recording, *, follow: bool, against: Path | None = None) -> None:
        super().__init__()
        self.rec = rec
        self.follow = follow
        self.against = against
        """With --diff: the recording this one is compared with."""
        self.diff: RunDiff | None = None
        self.uncompared: str | None = None
        """Why the comparison failed, if it did."""
        self.differs: dict[int, CallDiff] = {}
        self.timeline = Timeline()
        self.index = 0
        self.typed = ""
        self.opened: set[int] = set()
        """folds whose seams are open"""
        self.views: OrderedDict[int, CallView] = OrderedDict()
        self.rows: Rows = OrderedDict()
        """messages drawn, kept from call to call"""
        self.shown: int | None = None
        """the call whose items the lists hold"""
        self.indexing: float | None = None
        """share of the file indexed while the whole of it is being read (None: done)"""
        self._loaded = 0
        self._last_search = ""

    def on_resize(self, event: events.Resize) -> None:
        # Side by side, a narrow terminal leaves the text a column of a few words: stack.
        self.query_one("#body").set_class(event.size.width < STACK_BELOW, "-stacked")

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield Scrubber()
        with Horizontal(id="body"):
            yield ItemList(id="slots")
            yield ItemList(id="events")
        yield Footer()

    def on_mount(self) -> None:
        for _ in build(self.rec, self.timeline):
            pass
        if self.rec.partial:
            self.indexing = self.rec.indexed_bytes / max(self.rec.size, 1)
        # A run being followed opens at its newest call, and stays there as calls land.
        self.select(len(self.timeline.marks) - 1 if self.follow else 0)
        if self.timeline.marks:
            self._draw_call(self.timeline.marks[self.index].n)  # now, not after a frame
        self.query_one("#slots", ItemList).focus()
        if self.rec.partial:
            self.reindex()
        if self.follow:
            self.set_interval(FOLLOW_EVERY, self._look)
        if self.against is not None:
            self.compare()

    # -- the file ------------------------------------------------------------------------

    def _look(self) -> None:
        if self.indexing is not None:
            return
        if self.rec.grown():
            self.indexing = 0.0
            self.reindex()
        elif not self.rec.path.exists():
            # A flow's agent run: the flow ended, its log took the run whole and the file
            # beside it went. What was written since the last look is read from the log.
            from afcore.recording import folded_run

            copy = folded_run(self.rec.path)
            if copy is not None:
                self.indexing = 0.0
                self.reindex(copy)

    @work(thread=True, exclusive=True, group="index")
    def reindex(self, copy: Path | None = None) -> None:
        """Index the file as it is now, whole, off the screen's thread; then show it.
        ``copy``: the same run read from elsewhere (its copy in its flow's log)."""
        worker = get_current_worker()
        try:
            if copy is None:
                rec = self.rec.reopen()
            else:
                rec = open_recording(copy)
                rec.origin = self.rec.origin
        except (OSError, RecordingError) as e:
            self.app.call_from_thread(self._failed, str(e))
            return
        timeline = Timeline()
        shown = time.monotonic()
        for done in build(rec, timeline):
            if worker.is_cancelled:
                return
            if time.monotonic() - shown > 0.2:
                shown = time.monotonic()
                self.app.call_from_thread(self._progress, done)
        self.app.call_from_thread(self._swap, rec, timeline)

    @work(thread=True, exclusive=True, group="diff")
    def compare(self) -> None:
        """Compare the recording with the other one (--diff), off the screen's thread."""
        from afcore.readmodel import diff_runs
        from afcore.recording import open_recording

        assert self.against is not None
        try:
            with open_recording(self.rec.path) as mine, open_recording(self.against) as other:
                found = diff_runs(mine, other)
        except RecordingError as e:
            self.app.call_from_thread(self._uncompared, str(e))
            return
        self.app.call_from_thread(self._compared, found)

    # What a worker hands back lands after whatever the screen did meanwhile: closed (Esc on
    # a run opened from a tool call, a turn switched for another), it has nothing to draw in.

    def _compared(self, found: RunDiff) -> None:
        if not self.is_attached:
            return
        self.diff = found
        self.differs = {c.call: c for c in found.calls}
        marks = self.timeline.marks
        self._draw_top()
        if marks:
            self._draw_call(marks[self.index].n, force=True)

    def _uncompared(self, message: str) -> None:
        # Not _failed: the indexing, if it still runs, is not over.
        if not self.is_attached:
            return
        self.uncompared = message
        self.notify(safe(message), severity="error", markup=False)
        self._draw_top()

    def _progress(self, done: float) -> None:
        if not self.is_attached:
            return
        self.indexing = done
        self._draw_top()

    def _failed(self, message: str) -> None:
        if not self.is_attached:
            return
        self.indexing = None
        self.notify(safe(message), severity="error", markup=False)
        self._draw_top()

    def _swap(self, rec: Recording, timeline: Timeline) -> None:
        if not self.is_attached:
            return
        marks = self.timeline.marks
        current = marks[self.index].n if marks else None
        at_end = not marks or self.index == len(marks) - 1
        self.rec, self.timeline = rec, timeline
        self.views.clear()
        self.rows.clear()
        self.indexing = None
        index = timeline.position.get(current, 0) if current is not None else 0
        if self.follow and at_end and timeline.marks:
            index = len(timeline.marks) - 1
        self.shown = None
        self.select(index)

    # -- the selection -------------------------------------------------------------------

    def select(self, index: int) -> None:
        marks = self.timeline.marks
        if not marks:
            self._draw_top()
            self._draw_empty()
            return
        self.index = max(0, min(index, len(marks) - 1))
        self._draw_top()
        # Drawn after what is waiting: holding a key down draws only the call it stops at.
        self.call_later(self._draw_call, marks[self.index].n)

    def view(self, n: int) -> CallView:
        cached = self.views.get(n)
        if cached is not None:
            self.views.move_to_end(n)
            return cached
        view = call_view(self.rec, self.timeline, n)
        self.views[n] = view
        if len(self.views) > _VIEWS:
            self.views.popitem(last=False)
        self._loaded += 1
        if self._loaded % 64 == 0:
            self.rec.release_pages()
        return view

    def _draw_call(self, n: int, force: bool = False) -> None:
        marks = self.timeline.marks
        if not marks or marks[self.index].n != n:
            return  # the selection moved on
        if not force and self.shown == n:
            return
        view = self.view(n)
        slots = self.query_one("#slots", ItemList)
        events = self.query_one("#events", ItemList)
        # Before the first layout the lists have no size yet: their share of the screen.
        left = slots.size.width or self.app.size.width * 3 // 5
        right = events.size.width or self.app.size.width * 2 // 5
        entries = slot_entries(view, self.rec, self.opened, max(left - 26, 30), self.rows)
        slots.fill(entries, keep=True)
        shown = response_entries(view, max(right, 30))
        if self.diff is not None and self.against is not None:
            from itertools import chain

            from tui.diff import diff_entries

            found = self.differs.get(n)
            mine = diff_entries(n, found, self.against.name, max(right, 30))
            shown = chain(mine, shown)
        events.fill(shown, keep=True)
        self.shown = n
        self._draw_top()

    def _flush(self) -> None:
        """Draw the selected call now, if its drawing is still waiting: what a key does to
        the lists must be done to the call selected, not to the one before."""
        marks = self.timeline.marks
        if marks:
            self._draw_call(marks[self.index].n)

    def _draw_empty(self) -> None:
        note = Text("no calls in this recording yet", style="yellow")
        if self.follow:
            note.append(" · waiting for the run to make one", style="dim")
        self.query_one("#slots", ItemList).fill([(note, None)], keep=False)
        self.query_one("#events", ItemList).fill([], keep=False)

    def _draw_top(self) -> None:
        self.query_one("#header", Static).update(self._header())
        marks = self.timeline.marks
        differing = set(self.differs) if self.diff is not None else None
        self.query_one(Scrubber).show(marks, self.index, self._position(), differing)

    def _header(self) -> Text:
        rec = self.rec
        h = rec.header
        # Each name on one line and cut: with a newline or a page of text in a name, the
        # header took the screen and left the calls no room.
        text = Text.assemble(("af lens ", "bold"), (line(h.run_id, NAMED), "bold cyan"), "  ")
        text.append(line(h.agent.name, NAMED), style="bold")
        text.append(f"  model {line(h.model, NAMED)}", style="dim")
        stored = None
        if h.session is not None:
            runs = self.app.session_runs() if isinstance(self.app, _Turns) else None
            total = f"/{runs.turns[-1].turn}" if runs is not None and runs.turns else ""
            text.append(f"  turn {h.session.turn}{total}", style="bold")
            text.append(" of session ", style="dim")
            text.append(line(h.session.id, NAMED), style="bold cyan")
            stored = runs.turn(h.session.turn) if runs is not None else None
        end = rec.end
        if end is None and stored is not None and stored.status is not None:
            # Its process died: the session store knows how the turn ended, the file cannot.
            status = stored.status
            text.append(f"  {status.replace('_', ' ')}", style=f"bold {status_style(status)}")
            if stored.note:
                text.append(f": {line(stored.note, 120)}", style="dim")
            text.append(" (the session store says; the file has no run_end)", style="dim")
        elif self.indexing is not None:
            text.append("  reading the file…", style="yellow")
        elif end is not None:
            status = end.status
            text.append(f"  {status.replace('_', ' ')}", style=f"bold {status_style(status)}")
            text.append(
                f" after {plural(end.iterations, 'iteration')} · {plural(end.calls, 'call')}",
                style="dim",
            )
        elif self.follow:
            text.append("  following: the run is still going", style="bold cyan")
        else:
            text.append("  incomplete: no run_end (cut off, or still running)", style="yellow")
        notes = []
        if rec.torn_tail is not None and not self.follow:
            t = rec.torn_tail
            notes.append(
                (
                    f"line {t.line} is torn ({t.size:,} bytes): the run was cut off mid-write; "
                    "the rest is shown",
                    "yellow",
                )
            )
        if rec.problems:
            first = line(str(rec.problems[0]), 120)
            notes.append(
                (f"{plural(len(rec.problems), 'problem')} reading the file: {first}", "red")
            )
        if rec.unknown_records:
            notes.append(
                (
                    f"{plural(rec.unknown_records, 'record')} of types this af does not know "
                    "(shown raw in the events)",
                    "dim",
                )
            )
        for note, style in notes:
            text.append(f"\n{note}", style=style)
        return text

    def _position(self) -> Text:
        marks = self.timeline.marks
        if not marks:
            return Text("no calls yet", style="dim")
        mark = marks[self.index]
        total = f"{len(marks)}" if self.indexing is None else f"{len(marks)}+"
        text = Text(f"call {mark.n}/{total}", style="bold")
        text.append(f" · iteration {mark.iteration} · turn {mark.turn}", style="")
        if not mark.agent:
            text.append(" · the summarizer's call", style="magenta")
        if mark.attempt:
            text.append(f" · {safe(mark.attempt)}", style="cyan")
        view = self.views.get(mark.n)
        if view is not None and view.detail is not None:
            if view.detail.verified:
                text.append(" · ✓ verified", style="green")
            else:
                text.append(" · ✗ not verified", style="bold red")
        elif view is not None:
            text.append(" · ✗ cannot be read", style="bold red")
        if mark.folds:
            text.append(
                f" · then {plural(mark.folded, 'message')} folded out of the window", style="yellow"
            )
        if self.against is not None:
            if self.uncompared is not None:
                text.append(f" · cannot compare: {line(self.uncompared, 200)}", style="red")
            elif self.diff is None:
                text.append(" · comparing…", style="dim")
            elif mark.n in self.differs:
                text.append(f" · differs from {safe(self.against.name)}", style="bold magenta")
            else:
                text.append(f" · the same in {safe(self.against.name)}", style="dim")
        if self.indexing is not None:
            text.append(f"  (indexing {self.indexing:.0%})", style="dim")
        if self.typed:
            text.append(f"   go to call {self.typed}▏ Enter", style="bold reverse")
        return text

    # -- actions -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "turn":
            return self.rec.header.session is not None  # shown only on a session's turn
        return True

    def action_turn(self, step: int) -> None:
        """Open the session's turn before (-1) or after (1) this one."""
        if isinstance(self.app, _Turns) and self.rec.header.session is not None:
            self.app.open_turn(self.rec, step)

    def action_move(self, step: int) -> None:
        self.typed = ""
        self.select(self.index + step)

    def action_edge(self, end: int) -> None:
        self.typed = ""
        self.select(len(self.timeline.marks) - 1 if end else 0)

    def action_digit(self, digit: int) -> None:
        if len(self.typed) < 9:
            self.typed += str(digit)
        self._draw_top()

    def action_untype(self) -> None:
        self.typed = self.typed[:-1]
        self._draw_top()

    def action_forget(self) -> None:
        if not self.typed and self.app.screen_stack[0] is not self:
            self.app.pop_screen()  # a run opened from a tool call: back to the one that made it
            return
        self.typed = ""
        self._draw_top()

    def action_enter(self) -> None:
        self._flush()
        if self.typed:
            n = int(self.typed)
            self.typed = ""
            self.go_to(n)
            return
        focused = self.focused
        if isinstance(focused, ItemList):
            focused.action_select()

    def go_to(self, n: int, item: str | None = None) -> None:
        position = self.timeline.position.get(n)
        if position is None:
            last = self.timeline.marks[-1].n if self.timeline.marks else 0
            self.notify(f"there is no call {n} (calls 1 to {last})", severity="warning")
            self._draw_top()
            return
        self.select(position)
        if item is not None:
            self.call_later(self._highlight, n, item)

    def _highlight(self, n: int, item: str) -> None:
        self._draw_call(n)
        for name in ("#slots", "#events"):
            listed = self.query_one(name, ItemList)
            if listed.go_to(item):
                listed.focus()
                return

    def action_section(self, prefix: str) -> None:
        self._flush()
        slots = self.query_one("#slots", ItemList)
        first = next((i for i in slots.items if i.startswith(prefix)), None)
        if first is not None:
            slots.go_to(first)
            # The section's heading is the line above its first item: keep it in view.
            slots.scroll_to(y=max(slots.scroll_y - 1, 0), animate=False, immediate=True)
            slots.focus()

    @on(ItemList.OptionSelected)
    def _open(self, event: ItemList.OptionSelected) -> None:
        listed = event.option_list
        if not isinstance(listed, ItemList) or event.option.id is None:
            return
        item = listed.items.get(event.option.id)
        if item is None:
            return
        if item.seam is not None:
            self.opened ^= {item.seam}
            n = self.timeline.marks[self.index].n
            self._draw_call(n, force=True)
        elif item.jump is not None:
            self.go_to(item.jump)
        elif item.run is not None:
            self._open_run(item.run)
        elif item.full is not None:
            from tui.screens.viewer import Viewer

            self.app.push_screen(Viewer(item.title, item.full))

    def _open_run(self, relative: str) -> None:
        """The run an agent called as a tool made, in a Lens of its own (Esc comes back)."""
        from tui.app import PREFIX

        here = Path(self.rec.path).parent if self.rec.path is not None else Path.cwd()
        try:
            inner = open_recording(here / relative, upto=PREFIX)
        except (RecordingError, OSError, ValueError) as e:  # ValueError: a NUL in the name
            self.notify(safe(f"cannot open {relative}: {e}"), severity="warning", markup=False)
            return
        self.app.push_screen(LensScreen(inner, follow=False))

    @on(Scrubber.Picked)
    def _picked(self, event: Scrubber.Picked) -> None:
        self.typed = ""
        self.select(event.index)

    def action_why(self) -> None:
        from tui.locate import locate
        from tui.screens.why import WhyScreen

        self._flush()
        focused = self.focused
        item: Item | None = focused.current if isinstance(focused, ItemList) else None
        marks = self.timeline.marks
        if not marks:
            return
        mark = marks[self.index]
        key = item.why if item is not None and item.why else f"call:{mark.n}"
        at = f"call:{mark.n}" if key.startswith("system:") else None

        def chosen(line: int | None) -> None:
            if line is None:
                return
            place = locate(self.rec, self.timeline, line)
            if place is not None:
                self.go_to(place.call, place.item)

        self.app.push_screen(WhyScreen(self.rec, key, at), chosen)

    def action_search(self) -> None:
        from tui.screens.search import Match, SearchScreen, Source

        def chosen(match: Match | LogMatch | None) -> None:
            if isinstance(match, Match):
                self.go_to(match.place.call, match.place.item)

        screen = SearchScreen([Source(self.rec, self.timeline)], self._last_search)

        def remember(match: Match | LogMatch | None) -> None:
            self._last_search = screen.query_text
            chosen(match)

        self.app.push_screen(screen, remember)

    def action_help(self) -> None:
        from tui.screens.help import Help

        self.app.push_screen(Help())
