"""Rich output for the commands, over the read model's plain text.

Everything a model, a tool or a recording wrote is untrusted text: it goes through
:func:`afcore.readmodel.safe` and is printed as a rich ``Text`` (so ``[bold]`` stays
literal). Consoles are made with markup, emoji and highlighting off, so that even a plain
string passed by mistake is printed as it is.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Sequence
from typing import Any, overload

import orjson
from rich.cells import cell_len
from rich.console import COLOR_SYSTEMS, Console
from rich.style import Style
from rich.text import Text

from afcore.readmodel import line, more_text, safe

__all__ = [
    "Line",
    "Printer",
    "block",
    "cells",
    "columns",
    "err_console",
    "fit",
    "out_console",
    "print_hanging",
    "print_indented",
    "print_json",
]


class Line:
    """One line of styled pieces: what a long output is made of. Cheaper to build and to
    write than a Rich ``Text`` (a run of 100,000 calls prints a million of them); a
    :class:`Printer` writes it as the console would write the same ``Text``. ``style``
    applies to the whole line, under each piece's own."""

    __slots__ = ("pieces", "style")

    def __init__(self, *pieces: str | tuple[str, str], style: str = "") -> None:
        # An empty piece is left out: ``p[0]`` is a piece's text, or a string's first letter.
        self.pieces: list[tuple[str, str]] = [
            (p, "") if isinstance(p, str) else p for p in pieces if p and p[0]
        ]
        self.style = style

    def copied(self) -> Line:
        """A copy to append to, this one left as it is."""
        out = Line.__new__(Line)
        out.pieces = self.pieces.copy()
        out.style = self.style
        return out

    def append(self, text: str, style: str = "") -> Line:
        if text:
            self.pieces.append((text, style))
        return self

    def extend(self, other: Line) -> Line:
        """``other``'s pieces after these, each under ``other``'s line style."""
        self.pieces.extend(other.flat().pieces)
        return self

    def flat(self) -> Line:
        """The same line with its line style moved into each piece's own."""
        if not self.style:
            return self
        base = self.style
        return Line(*((t, f"{base} {style}".rstrip()) for t, style in self.pieces))

    @property
    def plain(self) -> str:
        return "".join([t for t, _ in self.pieces])

    def __len__(self) -> int:
        return sum(len(t) for t, _ in self.pieces)

    def rstrip(self) -> Line:
        """Without trailing whitespace."""
        pieces = self.pieces
        while pieces:
            text, style = pieces[-1]
            kept = text.rstrip()
            if kept:
                pieces[-1] = (kept, style)
                break
            pieces.pop()
        return self

    def text(self) -> Text:
        """The same line as a Rich ``Text`` (for what only Rich does: wrapping)."""
        return Text.assemble(*self.pieces, style=self.style)


Printable = Line | Text | str


def _joined(*pieces: str | tuple[str, str], style: str = "") -> str:
    """The text of the line :class:`Line` would make of ``pieces``: a line without colour."""
    return "".join([p if p.__class__ is str else p[0] for p in pieces])


def _plain(text: Printable) -> str:
    return text if text.__class__ is str else text.plain  # type: ignore[union-attr]


_WIDE = re.compile("[^\x20-\x7e·–…←→⇢⏎─┈▸▾✓✗]")
"""A character that may not take exactly one cell: anything but printable ASCII and the
marks af prints itself (each one cell wide)."""

_NARROW = "\xa0-\u02ff\u0370-\u0482\u048a-\u0590"
"""Latin-1 and Latin Extended, Greek and Cyrillic (their combining marks left out): one cell
each in every Unicode version Rich knows. European text is measured without Rich's walk
over each character (a big run prints 100,000 lines of it)."""
_UNCOUNTED = re.compile(f"[^\x20-\x7e{_NARROW}·–…←→⇢⏎─┈▸▾✓✗]")
_COUNTED = re.compile(f"[\x20-\x7e{_NARROW}·–…←→⇢⏎─┈▸▾✓✗]*")
"""Text of characters one cell each: matched in one run, not searched character by
character."""


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes."""
    if text.isascii():
        if text.isprintable():
            return len(text)
    elif _COUNTED.fullmatch(text):  # most text beyond ASCII: European, af's own marks
        return len(text)
    odd = _UNCOUNTED.findall(text)
    if not odd:
        return len(text)
    if "\u200d" in text or "\ufe0f" in text:
        return cell_len(text)  # a joined emoji or a variation: Rich measures the sequence
    # Rich adds up each character's cells (cached by character): the others take one each.
    return len(text) - len(odd) + sum(map(cell_len, odd))


@overload
def fit(head: str, tail: str, width: int, *, total: int | None = None) -> str: ...


@overload
def fit(head: Line, tail: str, width: int, *, total: int | None = None) -> Line: ...


@overload
def fit(head: Text, tail: str, width: int, *, total: int | None = None) -> Text: ...


@overload
def fit(head: Line | str, tail: str, width: int, *, total: int | None = None) -> Line | str: ...


def fit(
    head: Line | Text | str, tail: str, width: int, *, total: int | None = None
) -> Line | Text | str:
    """``head`` followed by as much of the untrusted ``tail`` as fits on one line of ``width``
    (a plain string head: the line's text, as a :class:`Printer` without colour makes it)."""
    _, room = _head_room(_plain(head), width)
    cut, _ = _cut(tail, room, total)
    if isinstance(head, str):
        return head + cut
    if isinstance(head, Text):
        text = head.copy()
        text.append(cut)
        return text
    return head.copied().append(cut)


def _head_room(head: str, width: int) -> tuple[int, int]:
    """The cells ``head`` takes, and the room left after it on a line of ``width`` (less
    one)."""
    size = cells(head)
    return size, width - size - 1


def _cut(tail: str, room: int, total: int | None, cut: str | None = None) -> tuple[str, int]:
    """As much of ``tail`` as fits in ``room`` cells (at least 24 characters), and the cells
    it takes. ``cut``: ``line(tail, room, total=total)``, when the caller has it."""
    if cut is None:
        cut = line(tail, room, total=total)
    most = room if room > 24 else 24
    size = cells(cut)
    while size > most and len(cut) > 24:
        # Wide characters (東京) take two cells: cut shorter until the line fits.
        cut = line(tail, len(cut) - (size - room), total=total)
        size = cells(cut)
    return cut, size


def columns(
    heads: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: Collection[int] = ()
) -> Callable[[tuple[str, ...]], list[str]]:
    """A table's cells padded to its widest (heading or row) in each column, the columns
    whose index is in ``right`` aligned right (numbers)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def cells(values: tuple[str, ...]) -> list[str]:
        return [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]

    return cells


def block(text: str, limit: int = 4000) -> Text:
    """A multi-line value made safe, cut after ``limit`` characters with the cut stated."""
    if len(text) <= limit:
        return Text(safe(text))
    out = Text(safe(text[:limit]))
    out.append(f"\n{more_text(len(text) - limit)} (--json shows all of it)", style="dim")
    return out


class Printer:
    """Prints lines as a console would, fast enough for a file of 100,000 calls.

    A console renders each print through its whole pipeline (options, size, wrapping), and
    that costs more than reading the record the line came from. A line that fits the width
    and holds no newline is written here from its pieces (or as plain text when the output
    has no colour), the same bytes the console would write; anything else goes to the
    console. Output is written in blocks as it is produced."""

    _BLOCK = 64 * 1024

    def __init__(self, console: Console) -> None:
        self.console = console
        self.width = console.width
        self.plain = console.color_system is None
        """Without colour: a line is written as its text."""
        self._color = COLOR_SYSTEMS.get(console.color_system or "")
        self._styles: dict[tuple[str, str], tuple[str, str]] = {}
        self._out: list[str] = []
        self._size = 0
        self.line: Callable[..., Line | str] = _joined if self.plain else Line
        """A line of pieces, as :class:`Line` takes them: without colour its text alone (a
        string, no object to build and take apart), else a :class:`Line`."""

    def _codes(self, base: str, style: str) -> tuple[str, str]:
        """What goes before and after a piece in ``style`` on a line in ``base``."""
        key = (base, style)
        codes = self._styles.get(key)
        if codes is None:
            get = self.console.get_style
            combined = get(base, default=Style.null()) + get(style, default=Style.null())
            before, _, after = combined.render("\0", color_system=self._color).partition("\0")
            codes = self._styles[key] = (before, after)
        return codes

    def print(self, text: Printable = "", *, style: str = "", soft_wrap: bool = False) -> None:
        if self.plain and text.__class__ is str:
            # Without colour most lines come as their text: written as they are when they fit.
            assert isinstance(text, str)
            if text.isascii() and text.isprintable():
                fits = len(text) <= self.width
            elif "\n" in text:
                fits = False
            else:
                # No character takes more than two cells: a short line is not measured.
                fits = 2 * len(text) <= self.width or cells(text) <= self.width
            if fits:  # as put() writes it, without the call (most lines come this way)
                self._out.append(text)
                self._size += len(text) + 1
                if self._size > self._BLOCK:
                    self.flush()
                return
        if style and not self.plain:  # without colour a style changes no byte
            if isinstance(text, str):
                text = Line(text)
            text = (
                Line(*text.pieces, style=style)
                if isinstance(text, Line) and not text.style
                else Text.assemble(text.text() if isinstance(text, Line) else text, style=style)
            )
        if isinstance(text, str):
            plain = text
        else:
            plain = "".join([t for t, _ in text.pieces]) if text.__class__ is Line else text.plain
        if plain.isascii() and plain.isprintable():  # most lines: one cell a character
            fits = len(plain) <= self.width
        else:
            fits = "\n" not in plain and cells(plain) <= self.width
        if not fits:
            self.flush()
            if isinstance(text, str):
                text = Line(text)
            self.console.print(text.text() if isinstance(text, Line) else text, soft_wrap=soft_wrap)
            return
        if self.plain or isinstance(text, str):  # an unstyled string is written as it is
            out = plain
        elif isinstance(text, Line):
            if not text.style and all(not s for _, s in text.pieces):
                out = plain
            else:
                parts = []
                pieces = text.pieces
                i = 0
                while i < len(pieces):
                    piece, piece_style = pieces[i]
                    i += 1
                    if not piece_style:
                        # Unstyled pieces in a row are one run of the line's style, as in
                        # a Text, where only styled pieces make spans.
                        while i < len(pieces) and not pieces[i][1]:
                            piece += pieces[i][0]
                            i += 1
                    if piece_style or text.style:
                        before, after = self._codes(text.style, piece_style)
                        parts.append(f"{before}{piece}{after}")
                    else:
                        parts.append(piece)
                out = "".join(parts)
        else:
            # A text's own style is not among its spans: the console adds it as one.
            styled = Text()
            styled.append(text)
            out = "".join(
                seg.style.render(seg.text, color_system=self._color) if seg.style else seg.text
                for seg in styled.render(self.console, end="")
            )
        self._out.append(out)
        self._size += len(out) + 1
        if self._size > self._BLOCK:
            self.flush()

    def put(self, text: str) -> None:
        """Write a line known to fit as it is (a blank line, a line of ASCII shorter than
        the width), without testing it again."""
        self._out.append(text)
        self._size += len(text) + 1
        if self._size > self._BLOCK:
            self.flush()

    def print_sized(self, text: str, size: int) -> None:
        """``print(text)`` without colour, for a line of one line known to take ``size``
        cells (made of parts measured once)."""
        if size <= self.width:
            self.put(text)
        else:
            self.print(text)

    def print_fit(self, head: Line | str, tail: str, width: int) -> None:
        """``print(fit(head, tail, width))``, the line measured once."""
        if not self.plain or head.__class__ is not str:
            self.print(fit(head, tail, width))
            return
        assert isinstance(head, str)
        if "\n" in head:
            self.print(fit(head, tail, width))
            return
        self.print_cut(head, cells(head), tail, width)

    def print_cut(self, head: str, size: int, tail: str, width: int) -> None:
        """:meth:`print_fit` without colour, for a ``head`` known to take ``size`` cells and
        to hold no newline (a line whose head is made of parts measured once)."""
        room = width - size - 1
        most = room if room > 24 else 24
        cut = line(tail, room)
        # Most cuts take a cell a character and fit at once: _cut's first step, measured as
        # cells() measures them. What line() makes of an ASCII head (its characters, escapes,
        # ⏎ and the stated cut) takes a cell a character: such a cut is not searched.
        if tail[: most + 1].isascii() or _COUNTED.fullmatch(cut):
            more = len(cut)
            if more > most:
                cut, more = _cut(tail, room, None, cut)
        else:
            cut, more = _cut(tail, room, None, cut)
        if size + more <= self.width:
            text = head + cut  # the cut holds no newline: line() flattens them
            self._out.append(text)  # as put() writes it, without the call
            self._size += len(text) + 1
            if self._size > self._BLOCK:
                self.flush()
        else:
            self.print(head + cut)

    def flush(self) -> None:
        if self._out:
            self._out.append("")
            self.console.file.write("\n".join(self._out))
            self.console.file.flush()
            self._out.clear()
            self._size = 0


_WORD = re.compile(r"\s*\S+\s*")


def _breaks(text: str, width: int) -> list[int]:
    """Where Rich's word wrap breaks ``text`` (every character one cell wide) to ``width``:
    a word goes to the next line when it does not fit, a word longer than a line is cut."""
    breaks: list[int] = []
    offset = at = 0
    # The words follow one another from the text's start (each takes the spaces after it):
    # where each starts is counted, not asked of a match object.
    for word in _WORD.findall(text):
        start = at
        at += len(word)
        size = len(word.rstrip())
        if width - offset >= size:
            offset += len(word)
        elif size > width:
            chunks = [word[i : i + width] for i in range(0, len(word), width)]
            for i, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if i == len(chunks) - 1:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks


def _split(text: Line, breaks: list[int]) -> list[Line]:
    """``text`` cut at character offsets, each piece keeping its style."""
    out: list[Line] = []
    current = Line(style=text.style)
    at, edges = 0, iter([*breaks, -1])
    edge = next(edges)
    for piece, style in text.pieces:
        while edge >= 0 and at + len(piece) > edge:
            current.append(piece[: edge - at], style)
            out.append(current)
            current = Line(style=text.style)
            piece, at = piece[edge - at :], edge
            edge = next(edges)
        current.append(piece, style)
        at += len(piece)
    out.append(current)
    return out


def _wrapped(console: Console | Printer, text: Printable, room: int) -> list[Line | Text]:
    if isinstance(text, str):
        text = Line(text)
    if isinstance(text, Line):
        plain = text.plain
        if not _WIDE.search(plain) and "\t" not in plain and "\n" not in plain:
            return [*_split(text, _breaks(plain, room))]
        text = text.text()
    full = console.console if isinstance(console, Printer) else console
    return list(text.wrap(full, room))


def print_hanging(console: Console | Printer, text: Printable, indent: int, more: int = 2) -> None:
    """``text`` wrapped to the console, its first line indented by ``indent``, the rest by
    ``more`` more, no trailing spaces."""
    if text.__class__ is str and console.__class__ is Printer and console.plain:
        # Without colour most of these lines are one short line of text: written as it is
        # when it fits (a big run prints one a fold and one a call), as below.
        assert isinstance(console, Printer) and isinstance(text, str)
        if console.width - indent - more >= 20 and "\n" not in text:
            if text.isascii() and text.isprintable():
                size = len(text)
            else:
                size = cells(text)
            if size <= console.width - indent - more:
                console.put(" " * indent + text.rstrip())
                return
    room = max(console.width - indent - more, 20)
    plain = _plain(text)
    # Without colour a line is its text.
    bare = console if isinstance(console, Printer) and console.plain else None
    if "\n" not in plain and cells(plain) <= room:
        if bare is not None and bare.width - indent - more >= 20:
            # It fits: its cells are within room, and room within the width.
            bare.put(" " * indent + plain.rstrip())
        elif bare is not None:
            bare.print(" " * indent + plain.rstrip(), soft_wrap=True)
        elif isinstance(text, Line):
            _print_one(console, text, indent)
        else:
            one = text.copy() if isinstance(text, Text) else Text(text)
            one.rstrip()
            console.print(Text(" " * indent) + one, soft_wrap=True)
        return
    if bare is not None and not isinstance(text, Text):
        if not _WIDE.search(plain) and "\t" not in plain:
            # Without colour the lines are cut from the text where _split would cut them:
            # each takes at most room cells (a cell a character), so with room to spare each
            # is written as it is.
            edges = [0, *_breaks(plain, room), len(plain)]
            spare = bare.width - indent - more >= 20
            for i in range(len(edges) - 1):
                cut = " " * (indent + (more if i else 0)) + plain[edges[i] : edges[i + 1]].rstrip()
                if spare:
                    bare.put(cut)
                else:
                    bare.print(cut, soft_wrap=True)
            return
    for i, wrapped in enumerate(_wrapped(console, text, room)):
        pad = indent + (more if i else 0)
        if isinstance(wrapped, Line):
            _print_one(console, wrapped, pad)
            continue
        wrapped.rstrip()
        console.print(Text(" " * pad) + wrapped, soft_wrap=True)


def _print_one(console: Console | Printer, text: Line, indent: int) -> None:
    if isinstance(console, Printer) and console.plain:
        # Without colour a line is its text: the same bytes, no pieces to copy.
        console.print(" " * indent + text.plain.rstrip(), soft_wrap=True)
        return
    line = Line(" " * indent)
    line.pieces += text.flat().copied().rstrip().pieces
    console.print(line if isinstance(console, Printer) else line.text(), soft_wrap=True)


def print_indented(console: Console | Printer, text: Printable, indent: int = 4) -> None:
    """``text`` wrapped to the console, every line indented, no trailing spaces."""
    print_hanging(console, text, indent, more=0)


def _console(*, stderr: bool) -> Console:
    return Console(stderr=stderr, markup=False, emoji=False, highlight=False)


def err_console() -> Console:
    """For people: progress, messages, errors (stderr). Not a terminal (a log file, a CI
    job): each line whole, never broken at 80 columns."""
    console = _console(stderr=True)
    if not console.is_terminal:
        console.soft_wrap = True
    return console


def out_console() -> Console:
    """For what a command prints as its result in human form (stdout)."""
    return _console(stderr=False)


# What a terminal would act on or hide, escaped in JSON as \uXXXX: the same JSON value,
# safe to print. C1 controls (U+009B is a CSI), bidi controls, line separators, zero-width
# characters and marks; orjson already escapes the C0 controls.
_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]"
)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(data: Any) -> str:
    """JSON for machines, indented: exact (a program reads the same values), with what a
    terminal would act on written as escapes."""
    return _JSON_UNSAFE.sub(_json_escape, orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())


def print_json(data: Any) -> None:
    """Machine output: JSON on stdout, nothing else (see ``dumps``)."""
    sys.stdout.write(dumps(data) + "\n")
    sys.stdout.flush()
