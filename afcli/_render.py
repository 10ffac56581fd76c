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
from rich.console import Console
from rich.text import Text

from afcore.readmodel import line, more_text, safe

__all__ = [
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


def print_indented(console: Console, text: Text, indent: int = 4) -> None:
    """``text`` wrapped to the console, every line indented, no trailing spaces."""
    pad = " " * indent
    for wrapped in text.wrap(console, max(console.width - indent, 20)):
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
