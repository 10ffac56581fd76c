"""``?``: the keys, and what the scrubber's marks mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.widgets.scrubber import LEGEND

__all__ = ["KEYS", "Help"]

KEYS: list[tuple[str, str]] = [
    ("← → or h l", "the call before, the call after"),
    ("Home End", "the first call, the last call"),
    ("12 Enter", "go to call 12 (type the number, then Enter; Esc forgets it)"),
    ("↑ ↓ PgUp PgDn", "move in the list that has the focus"),
    ("Tab", "the other list (slots, response and events)"),
    ("s m t", "jump to SYSTEM, MESSAGES, TOOLS"),
    ("Enter", "open the item: all of a long text, a fold's messages, a call"),
    ("w", "why: the causal slice of the item (Enter on a stage goes to its call)"),
    ("/", "search every text in the recording (Enter on a result goes there)"),
    ("?", "this help"),
    ("q", "quit"),
    ("mouse", "click a mark to go to its call, an item to open it; the wheel scrolls"),
]


class Help(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Back", id="help.back")]

    def __init__(self, keys: list[tuple[str, str]] | None = None, legend: str = "") -> None:
        """``keys``: the screen's own (the Lens's by default); ``legend``: what its
        scrubber's marks mean besides the Lens's."""
        super().__init__()
        self.keys = KEYS if keys is None else keys
        self.legend = legend

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, what in self.keys:
            keys.add_row(key, what)
        marks = Table.grid(padding=(0, 2))
        marks.add_column(no_wrap=True)
        marks.add_column()
        for char, style, what in LEGEND:
            marks.add_row(Text(char, style=style), what)
        with VerticalScroll():
            yield Static(Text("af lens: keys", style="bold"))
            yield Static(keys)
            yield Static(Text("\nthe scrubber's marks", style="bold"))
            yield Static(marks)
            if self.legend:
                yield Static(Text(self.legend))
            yield Static(Text("\nEsc: back", style="dim"))
