"""The scrubber: one mark per model call, in the order of the file, grouped by turn, with the
calls that asked for tools, the summarizer's calls, the folds between calls and the calls that
ran into trouble marked; under it, with ``--diff``, a ``≠`` under each call that differs from
the other recording; then where the selection is.

A run longer than the screen is wide shows the stretch of calls around the selection.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from afcore.readmodel import Mark

__all__ = ["LEGEND", "Scrubber", "mark_cell"]

LEGEND: list[tuple[str, str, str]] = [
    ("◆", "cyan", "a call whose reply asked for tools"),
    ("●", "green", "a call whose reply answered"),
    ("○", "yellow", "a call with no reply (the run stopped)"),
    ("σ", "magenta", "the summarizer's call (the window strategy's)"),
    ("◇", "yellow", "it asked for tools, and a tool call's arguments were refused"),
    ("◈", "red", "it asked for tools, and a tool failed"),
    ("✗", "bold red", "an error at this call (a failed attempt, or what stopped the run)"),
    ("┊", "yellow", "the window was folded here"),
    ("│", "dim", "a new turn (a user message) starts"),
    ("≠", "bold magenta", "under a call: it differs from the other recording (af lens --diff)"),
]
DIFFERS = ("≠", "bold magenta")


def mark_cell(mark: Mark) -> tuple[str, str]:
    """The character and style of a call's mark."""
    if mark.trouble == "error":
        return "✗", "bold red"
    if not mark.agent:
        return "σ", "magenta"
    if not mark.replied:
        return "○", "yellow"
    # Told apart by shape, not only by colour.
    if mark.trouble == "rejected":
        return "◇", "yellow"
    if mark.trouble == "tool":
        return "◈", "red"
    if mark.asked:
        return "◆", "cyan"
    return "●", "green"


@dataclass
class _Cell:
    char: str
    style: str
    index: int | None
    """the call's position in the timeline (None: a fold or turn separator)"""


class Scrubber(Widget):
    """Three lines: call numbers and turns, the marks, the position; four with ``--diff``,
    the calls that differ marked under their marks."""

    class Picked(Message):
        """A mark was clicked."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[Mark] = []
        self.index = 0
        self.status = Text()
        self._start = 0
        self._cells: list[_Cell] = []
        self.differing: set[int] | None = None
        """With --diff, once compared: the numbers of the calls that differ."""

    def show(
        self, marks: list[Mark], index: int, status: Text, differing: set[int] | None = None
    ) -> None:
        self.marks = marks
        self.index = index
        self.status = status
        if differing is not None and self.differing is None:
            self.styles.height = 4
        self.differing = differing
        self.refresh()

    def _layout(self, width: int) -> list[_Cell]:
        """The cells of the stretch of calls on screen, the selection in it."""
        marks = self.marks
        if not marks:
            return []
        # Keep the window still while the selection moves inside it, with a margin.
        room = max(width, 8)
        margin = min(8, room // 4)
        if self.index < self._start + margin or self.index >= self._start + room - margin:
            self._start = max(0, self.index - room // 2)
        self._start = min(self._start, max(0, len(marks) - room))
        cells: list[_Cell] = []
        turn = marks[self._start].turn
        for i in range(self._start, len(marks)):
            mark = marks[i]
            if mark.turn != turn and cells:
                cells.append(_Cell("│", "dim", None))
            turn = mark.turn
            char, style = mark_cell(mark)
            if i == self.index:
                style += " reverse"
            cells.append(_Cell(char, style, i))
            if mark.folds:
                cells.append(_Cell("┊", "yellow", None))
            if len(cells) >= room:
                break
        return cells[:room]

    def render(self) -> Text:
        width = self.size.width or 80
        self._cells = cells = self._layout(width)
        numbers = [" "] * len(cells)
        last_turn = None
        for x, cell in enumerate(cells):
            if cell.index is None:
                continue
            mark = self.marks[cell.index]
            label = ""
            if mark.turn != last_turn and (last_turn is not None or self._start == 0):
                label = f"turn {mark.turn}" if self._turns() > 1 else ""
            last_turn = mark.turn
            if not label and (mark.n % 10 == 0 or cell.index == 0 or cell.index == self.index):
                label = str(mark.n)
            # A label needs a free column on each side, so that 9 and 10 do not read 910.
            if label and all(c == " " for c in numbers[max(x - 1, 0) : x + len(label) + 1]):
                numbers[x : x + len(label)] = list(label)
        top = Text("".join(numbers)[:width], style="dim")
        middle = Text()
        for cell in cells:
            middle.append(cell.char, style=cell.style)
        rows = [top, middle]
        if self.differing is not None:
            under = Text()
            for cell in cells:
                differs = cell.index is not None and self.marks[cell.index].n in self.differing
                under.append(DIFFERS[0] if differs else " ", style=DIFFERS[1])
            rows.append(under)
        out = Text("\n").join([*rows, self.status])
        out.no_wrap = True
        out.overflow = "ellipsis"
        return out

    def _turns(self) -> int:
        return self.marks[-1].turn if self.marks else 0

    def on_click(self, event: events.Click) -> None:
        # The marks are on the second line; x is counted inside the padding.
        x = event.x - 1
        if event.y != 1 or not 0 <= x < len(self._cells):
            return
        index = self._cells[x].index
        if index is not None:
            self.post_message(self.Picked(index))
