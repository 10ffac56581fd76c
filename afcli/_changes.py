"""A difference between two runs, as ``af replay`` and ``af diff`` print it: where, then the
value on each side, cut around where they first differ."""

from __future__ import annotations

from typing import Any

from afcli._render import Line
from afcore.readmodel import excerpts, json_text, line

__all__ = ["MARKS", "change_lines", "value_text"]

MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow")}
"""How a change is marked: added (only in the second run), removed, changed."""

SLOT_NAMES = {
    "model": "model",
    "system": "system",
    "messages": "messages",
    "tools": "tools",
    "params": "params",
    "cache": "cache",
    "attempt": "attempt",
    "reply": "reply",
    "tool_result": "tool result",
    "tool_args": "tool arguments",
    "run": "run",
    "request": "request",
    "step": "step",
    "decision": "decision",
    "merge": "merge",
    "end": "end",
}


def value_text(value: Any, width: int) -> str:
    """A value on one line: a string quoted, anything else as JSON, nothing as ``—``."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return "'" + line(value, max(width - 2, 24)) + "'"
    return line(json_text(value), width)


def change_lines(
    kind: str,
    path: str,
    a: Any,
    b: Any,
    *,
    labels: tuple[str, str],
    width: int,
    indent: int = 2,
) -> list[Line]:
    """A change's lines: its mark and where it is, then each side's value (the side it is
    absent from left out), both cut from a little before where they first differ."""
    mark, style = MARKS.get(kind, ("~", "yellow"))
    pad = " " * indent
    out = [Line(pad, (f"{mark} ", style), (path, "bold"))]
    wide = max(len(x) for x in labels)
    room = max(width - indent - 4 - wide - 2 - 2, 24)
    if isinstance(a, str) and isinstance(b, str):
        a, b = excerpts(a, b, room)
    for label, value, present in (
        (labels[0], a, kind != "added"),
        (labels[1], b, kind != "removed"),
    ):
        if present:
            out.append(
                Line(
                    pad,
                    "    ",
                    (label.ljust(max(len(x) for x in labels)), "dim"),
                    "  ",
                    value_text(value, room),
                )
            )
    return out
