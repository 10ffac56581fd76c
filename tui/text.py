"""Text from a recording, made safe to draw: every string a model, a tool or the file wrote
goes through ``afcore.readmodel.safe`` (control characters and escape sequences become visible
escapes) into a rich ``Text``, which Textual draws as it is: ``[bold red]`` or
``[@click=app.quit]`` in a model's reply stays those characters. Long values are cut, the cut
stated; the full text opens in the viewer.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from afcore.readmodel import args_text, as_text, line, safe

__all__ = [
    "PREVIEW_CHARS",
    "PREVIEW_LINES",
    "args_line",
    "flat",
    "literal",
    "preview",
    "source_label",
    "spaced_json",
]

PREVIEW_CHARS = 1200
PREVIEW_LINES = 12


def literal(text: str, style: str = "") -> Text:
    """``text`` made safe, as a Text that no markup is read from."""
    return Text(safe(text), style=style)


def flat(value: Any, width: int, style: str = "") -> Text:
    """A value on one line of at most ``width`` characters, made safe, the cut stated."""
    return Text(line(as_text(value), width), style=style)


def args_line(args: Any, width: int) -> str:
    """Tool call arguments on one line: ``city="Lisbon", kind="museum"``."""
    return args_text(args, width)


_SPACED_UP_TO = 256 * 1024
"""JSON longer than this is shown as it is (spacing it would mean parsing it whole)."""


def spaced_json(text: str) -> str:
    """A JSON object or array laid out with a space after each ``,`` and ``:``, so that a
    line wraps between tokens, never inside a number or a key (``"low_c": 16``, not
    ``"low_c":1`` / ``6``). Anything else, as it is."""
    if text[:1] not in ("{", "[") or len(text) > _SPACED_UP_TO:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the stack holds
        return text
    if not isinstance(value, dict | list):
        return text
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def preview(value: Any, chars: int = PREVIEW_CHARS, lines: int = PREVIEW_LINES) -> tuple[Text, int]:
    """The head of a value (at most ``chars`` characters, ``lines`` lines), made safe, and
    how many characters it leaves out; JSON spaced to wrap between tokens. Only the head is
    ever escaped, so a 1 MB value costs no more than a short one."""
    text = spaced_json(as_text(value))
    head = text[:chars]
    cut = len(head)
    at = -1
    for _ in range(lines):
        at = head.find("\n", at + 1)
        if at < 0:
            break
    if at >= 0 and at < cut:
        cut = at
    shown = Text(safe(text[:cut]))
    hidden = len(text) - cut
    if hidden > 0:
        shown.append(f"\n… {hidden:,} more chars (Enter: all of it)", style="dim italic")
    return shown, hidden


def source_label(kind: Any, id: Any = None, trigger: Any = None) -> str:
    """``base``, ``steering:tone``, ``instruction:refunds (rule)``: where a piece of context
    came from, made safe."""
    out = safe(as_text(kind) or "?")
    if id:
        out += f":{safe(as_text(id))}"
    if trigger and trigger not in ("always",):
        out += f" ({safe(as_text(trigger))})"
    return out
