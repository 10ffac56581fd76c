"""A scrolling list of items a person moves through with the arrows, the building block of the
slots and the response panes: each item is drawn from text made safe (never markup), with a
gutter on its left saying where it came from, and knows what Enter and ``w`` do on it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, replace

from rich.console import Console
from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.css.styles import RulesMap
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual, VisualType
from textual.widgets import OptionList
from textual.widgets.option_list import Option

__all__ = ["GUTTER", "Item", "ItemList", "Part", "Row", "heading", "row", "rule"]

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
    run: str | None = None
    """A recording Enter opens in a Lens of its own (the run an agent called as a tool
    made), relative to this recording's folder."""


Part = Text | tuple[int, Text]
"""A piece of an item's content: a text, or a text indented by some columns."""


class Row(Visual):
    """An item's lines: its source in a gutter on the left, its content beside it.

    A list measures every item's height and then draws the ones on screen, and a call's items
    are drawn again each time it is selected: this is where scrubbing spends its time. So a
    row is wrapped once per width and kept (with the strips made of it), and the slots keep
    the rows of the messages that the calls next to each other share."""

    def __init__(
        self, gutter: Text | None, parts: list[Part], width: int = GUTTER, crop: bool = False
    ) -> None:
        self.gutter = gutter
        self.parts = parts
        self.width = width if gutter is not None else 0
        self.crop = crop
        """one line per part, cut with an ellipsis, rather than wrapped"""
        self._lines: tuple[int, list[list[Segment]]] | None = None
        self._strips: dict[tuple[int, RichStyle], list[Strip]] = {}

    def lines(self, width: int) -> list[list[Segment]]:
        if self._lines is None or self._lines[0] != width:
            self._lines = (width, self._draw(width))
            self._strips.clear()
        return self._lines[1]

    def _draw(self, width: int) -> list[list[Segment]]:
        console = _CONSOLE
        room = max(width - self.width - 1, 8) if self.gutter is not None else width
        left = list(self.gutter.wrap(console, self.width, overflow="fold")) if self.gutter else []
        right: list[Text] = []
        for part in self.parts:
            indent, text = part if isinstance(part, tuple) else (0, part)
            if self.crop:
                cut = text.copy()
                cut.truncate(max(room - indent, 8), overflow="ellipsis")
                right.append(cut)
                continue
            for line in text.wrap(console, max(room - indent, 8), overflow="fold"):
                right.append(Text(" " * indent) + line if indent else line)
        out: list[list[Segment]] = []
        for i in range(max(len(left), len(right), 1)):
            segments: list[Segment] = []
            if self.gutter is not None:
                g = left[i] if i < len(left) else Text()
                g.truncate(self.width, pad=True)
                segments.extend(g.render(console))
                segments.append(Segment(" "))
            if i < len(right):
                segments.extend(right[i].render(console))
            out.append(segments)
        return out

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        base = style.rich_style
        strips = self._strips.get((width, base))
        if strips is None:
            strips = [Strip(Segment.apply_style(line, base)) for line in self.lines(width)]
            self._strips[(width, base)] = strips
        return strips if height is None else strips[:height]

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return len(self.lines(width))


_CONSOLE = Console(width=1000, file=io.StringIO(), color_system=None, legacy_windows=False)
"""Wraps and splits the rows' text (nothing is printed with it)."""


def row(gutter: Text | None, *parts: Part) -> Row:
    """An item: its source in the gutter, its content beside it."""
    return Row(gutter, list(parts))


def heading(title: str, note: Text | str = "") -> Row:
    """A section's title and what it holds, on one line (cut, never wrapped: a jump to a
    section shows the line above its first item)."""
    out = Text(title, style="bold reverse")
    if note:
        out.append("  ")
        out.append(note if isinstance(note, Text) else Text(note, style="dim"))
    return Row(None, [out], crop=True)


def rule(label: str, style: str = "dim") -> Text:
    return Text(f"┈┈┈┈ {label} ┈┈┈┈", style=style)


class ItemList(OptionList):
    """An OptionList of items, drawn without markup, that keeps its place when refilled."""

    # The scrollbar is always there: a list measures its items at one width and draws them
    # at another if a scrollbar comes and goes between the two, and a line goes missing.
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, markup=False)
        self.items: dict[str, Item] = {}

    def fill(self, entries: Iterable[tuple[VisualType, Item | None]], keep: bool) -> None:
        """Replace the list: each entry a prompt and its item (None: a line that cannot be
        selected). ``keep``: stay on the item that was highlighted, if it is still there."""
        was = self.current
        scrolled = self.scroll_y
        self.items = {}
        options: list[Option] = []
        for prompt, item in entries:
            if item is None:
                options.append(Option(prompt, disabled=True))
                continue
            if item.id in self.items:
                # Ids come from what the file names (a tool, a decision), which may repeat;
                # the list takes each id once. A go_to finds the first.
                item = replace(item, id=f"{item.id}~{len(options)}")
            self.items[item.id] = item
            options.append(Option(prompt, id=item.id))
        self.set_options(options)
        target = was.id if keep and was is not None and was.id in self.items else None
        if target is not None:
            # Where it was on screen, as far as the new items allow, and in view.
            self.highlighted = self.get_option_index(target)
            self.scroll_to(y=scrolled, animate=False, immediate=True)
            self.scroll_to_highlight()
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
