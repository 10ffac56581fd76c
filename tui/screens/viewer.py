"""The whole of one value (a message, a tool result, a segment), in a scrolling view: the
lists show only the head of long values. The text is made safe first, so a control character
shows as its escape, as everywhere in the Lens; long lines are folded to the view's width
here, once, so that a 1 MB line costs no more to scroll than a page of short ones."""

from __future__ import annotations

from rich.cells import cell_len, chop_cells
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Log, Static

from afcore.readmodel import plural, safe
from tui.text import literal

__all__ = ["Viewer", "fold_lines"]


def fold_lines(text: str, width: int) -> list[str]:
    """``text``'s lines, each cut into pieces at most ``width`` cells wide, tabs expanded
    as the log draws them. A wide character (CJK, most emoji) takes two cells: cut by
    characters, its lines ran past the view's right edge."""
    width = max(width, 10)
    out: list[str] = []
    for line in text.split("\n"):
        if "\t" in line:
            line = line.expandtabs()
        if line.isascii():  # a cell a character: cut without measuring
            if len(line) <= width:
                out.append(line)
            else:
                out.extend(line[i : i + width] for i in range(0, len(line), width))
        elif cell_len(line) <= width:
            out.append(line)
        else:
            out.extend(chop_cells(line, width))
    return out


class Viewer(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "dismiss", "Back", id="viewer.back")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = safe(text)
        self._width = 0

    def compose(self) -> ComposeResult:
        with Vertical():
            lines = self.text.count("\n") + 1
            note = f"{plural(len(self.text), 'char')}, {plural(lines, 'line')} · Esc: back"
            yield Static(literal(f"{self.title_text} · {note}", "bold"), markup=False)
            yield Log(highlight=False)

    def on_mount(self) -> None:
        self.query_one(Log).focus()

    def on_resize(self, event: events.Resize) -> None:
        log = self.query_one(Log)
        width = log.scrollable_content_region.width or event.size.width - 6
        if width != self._width:
            self._width = width
            log.clear()
            log.write_lines(fold_lines(self.text, width), scroll_end=False)
