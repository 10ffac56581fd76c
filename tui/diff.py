"""The difference of the selected call from the other recording (``af lens A --diff B``): each
change first seen at this call, where it is and the value on each side (Enter shows both in
full, ``w`` asks why of this recording's side), and how many earlier ones it carries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.text import Text
from textual.visual import VisualType

from afcore.readmodel import CallDiff, Change, excerpts, json_text, plural, safe
from tui.text import flat
from tui.widgets.item_list import Item, Part, heading, row

__all__ = ["diff_entries", "shown", "whole"]

Entry = tuple[VisualType, Item | None]

_MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}
_SLOTS = {"tool_result": "tool result", "run": "run"}


def diff_entries(call: int, found: CallDiff | None, other: str, width: int) -> Iterator[Entry]:
    """The rows for call ``call``: None means it is the same in ``other`` (the file name)."""
    if found is None:
        yield heading("DIFF", f"the same in {safe(other)}"), None
        yield Text(""), None
        return
    note = f"{plural(len(found.changes), 'difference')} from {safe(other)}"
    if found.same_request:
        note += " · the same request"
    yield heading("DIFF", note), None
    for i, change in enumerate(found.changes):
        yield _change(call, i, change, width)
    if found.carried:
        yield (
            Text(f"{plural(found.carried, 'difference')} carried from earlier calls", "dim"),
            None,
        )
    yield Text(""), None


def _change(call: int, i: int, change: Change, width: int) -> Entry:
    mark, style = _MARKS.get(change.kind, ("~", "yellow"))
    slot = _SLOTS.get(change.slot, change.slot)
    # A path that starts with its slot's word (`reply: ...`) says it once.
    said = "" if change.path.split(":")[0].split(" ")[0] == slot else f"{slot} "
    head = Text.assemble((f"{mark} ", style), (said, "cyan"), (safe(change.path), "bold"))
    room = max(width - 6, 24)
    a, b = change.a, change.b
    if isinstance(a, str) and isinstance(b, str):
        a, b = excerpts(a, b, room)
    parts: list[Part] = [head]
    if change.kind != "added":
        parts.append((2, Text.assemble(("a ", "dim"), flat(shown(a), room))))
    if change.kind != "removed":
        parts.append((2, Text.assemble(("b ", "dim"), flat(shown(b), room))))
    full = f"a: {whole(change.a)}\n\nb: {whole(change.b)}"
    return row(None, *parts), Item(
        f"diff:{i}",
        full=full,
        title=f"call {call} · {slot} · {change.path}",
        why=change.why_key,
    )


def shown(value: Any) -> str:
    """A changed value on one line: text quoted, anything else as JSON, absent as a dash."""
    if value is None:
        return "—"
    return f"'{value}'" if isinstance(value, str) else json_text(value)


def whole(value: Any) -> str:
    """A changed value in full, for the viewer."""
    if value is None:
        return "(absent)"
    return value if isinstance(value, str) else json_text(value)
