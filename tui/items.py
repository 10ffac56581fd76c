"""A scrolling list of items a person moves through with the arrows, the building block of the
slots and the response panes: each item is drawn from text made safe (never markup), with a
gutter on its left saying where it came from, and knows what Enter and ``w`` do on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

__all__ = ["GUTTER", "Item", "ItemList", "heading", "row", "rule"]

GUTTER = 24
"""Columns of the gutter that names each item's source."""


@dataclass
class Item:
    id: str
    full: str | None = None
    """The whole text, when the list shows only its head: Enter opens it."""
    title: str = ""
    """What the viewer calls it."""
    why: str | None = None
    """The key ``w`` asks afcore.why about."""
    jump: int | None = None
    """A call Enter goes to."""
    seam: int | None = None
    """A fold whose seam Enter opens or closes."""


def row(gutter: Text, body: RenderableType) -> Table:
    """An item: its source in the gutter, its content beside it."""
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(width=GUTTER, overflow="fold")
    table.add_column(ratio=1, overflow="fold")
    table.add_row(gutter, body)
    return table


def heading(title: str, note: Text | str = "") -> Text:
    out = Text(title, style="bold reverse")
    if note:
        out.append("  ")
        out.append(note if isinstance(note, Text) else Text(note, style="dim"))
    return out


def rule(label: str, style: str = "dim") -> Text:
    return Text(f"┈┈┈┈ {label} ┈┈┈┈", style=style)


class ItemList(OptionList):
    """An OptionList of items, drawn without markup, that keeps its place when refilled."""

    DEFAULT_CSS = """
    ItemList { height: 1fr; border: none; padding: 0; }
    ItemList:focus { border: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.items: dict[str, Item] = {}

    def fill(self, entries: Iterable[tuple[RenderableType, Item | None]], keep: bool) -> None:
        """Replace the list: each entry a prompt and its item (None: a line that cannot be
        selected). ``keep``: stay on the item that was highlighted, if it is still there."""
        was = self.current
        self.items = {}
        options: list[Option] = []
        for prompt, item in entries:
            if item is None:
                options.append(Option(prompt, disabled=True))
            else:
                self.items[item.id] = item
                options.append(Option(prompt, id=item.id))
        self.set_options(options)
        target = was.id if keep and was is not None and was.id in self.items else None
        if target is not None:
            self.highlighted = self.get_option_index(target)
        else:
            self.highlighted = next((i for i, o in enumerate(options) if not o.disabled), None)
            self.scroll_to(y=0, animate=False)

    @property
    def current(self) -> Item | None:
        option = self.highlighted_option
        if option is None or option.id is None:
            return None
        return self.items.get(option.id)

    def go_to(self, item_id: str) -> bool:
        """Highlight the item ``item_id``, scrolled to the top; False when it is not here."""
        if item_id not in self.items:
            return False
        self.highlighted = self.get_option_index(item_id)
        self.scroll_to_highlight(top=True)
        return True
