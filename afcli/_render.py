"""Rich output for the commands, over the read model's plain text.

Everything a model, a tool or a recording wrote is untrusted text: it goes through
:func:`afcore.readmodel.safe` and is printed as a rich ``Text`` (so ``[bold]`` stays
literal). Consoles are made with markup, emoji and highlighting off, so that even a plain
string passed by mistake is printed as it is.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
from rich.cells import cell_len
from rich.console import COLOR_SYSTEMS, Console
from rich.text import Text

from afcore.readmodel import line, more_text, safe

__all__ = [
    "Printer",
    "block",
    "err_console",
    "fit",
    "out_console",
    "print_indented",
    "print_json",
]


def fit(head: Text, tail: str, width: int, *, total: int | None = None) -> Text:
    """``head`` followed by as much of the untrusted ``tail`` as fits on one line of ``width``."""
    out = head.copy()
    out.append(line(tail, width - len(head) - 1, total=total))
    return out


def block(text: str, limit: int = 4000) -> Text:
    """A multi-line value made safe, cut after ``limit`` characters with the cut stated."""
    if len(text) <= limit:
        return Text(safe(text))
    out = Text(safe(text[:limit]))
    out.append(f"\n{more_text(len(text) - limit)} (--json shows all of it)", style="dim")
    return out


class Printer:
    """Prints lines of ``Text`` as a console would, fast enough for a file of 100,000 calls.

    A console renders each print through its whole pipeline (options, size, wrapping), and
    that costs more than reading the record the line came from. A line that fits the width
    and holds no newline is written here from its segments (or as plain text when the
    output has no colour), the same bytes the console would write; anything else goes to
    the console. Output is written in blocks as it is produced."""

    _BLOCK = 64 * 1024

    def __init__(self, console: Console) -> None:
        self.console = console
        self.width = console.width
        self._plain = console.color_system is None
        self._out: list[str] = []
        self._size = 0

    def print(self, text: Text | str = "", *, style: str = "", soft_wrap: bool = False) -> None:
        if isinstance(text, str):
            text = Text(text)
        if style:
            text = Text.assemble(text, style=style)
        plain = text.plain
        if "\n" in plain or cell_len(plain) > self.width:
            self.flush()
            self.console.print(text, soft_wrap=soft_wrap)
            return
        if self._plain:
            line = plain
        else:
            color = COLOR_SYSTEMS.get(self.console.color_system or "")
            # A text's own style is not among its spans: the console adds it as one.
            styled = Text()
            styled.append(text)
            line = "".join(
                seg.style.render(seg.text, color_system=color) if seg.style else seg.text
                for seg in styled.render(self.console, end="")
            )
        self._out.append(line)
        self._size += len(line) + 1
        if self._size > self._BLOCK:
            self.flush()

    def flush(self) -> None:
        if self._out:
            self._out.append("")
            self.console.file.write("\n".join(self._out))
            self.console.file.flush()
            self._out.clear()
            self._size = 0


def print_indented(console: Console | Printer, text: Text, indent: int = 4) -> None:
    """``text`` wrapped to the console, every line indented, no trailing spaces."""
    pad = " " * indent
    if "\n" not in text.plain and cell_len(text.plain) <= max(console.width - indent, 20):
        line = text.copy()
        line.rstrip()
        console.print(Text(pad) + line, soft_wrap=True)
        return
    full = console.console if isinstance(console, Printer) else console
    for wrapped in text.wrap(full, max(console.width - indent, 20)):
        wrapped.rstrip()
        console.print(Text(pad) + wrapped, soft_wrap=True)


def _console(*, stderr: bool) -> Console:
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def err_console() -> Console:
    """For people: progress, messages, errors (stderr)."""
    return _console(stderr=True)


def out_console() -> Console:
    """For what a command prints as its result in human form (stdout)."""
    return _console(stderr=False)


def print_json(data: Any) -> None:
    """Machine output: JSON on stdout, nothing else."""
    sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()
