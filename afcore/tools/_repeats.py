"""The repeated-call nudge: the second time one tool, called with exactly the same
arguments, returns exactly the same result in one turn, the model reads one sentence
saying so. A note, never a refusal: the call ran and a third is not blocked (polling a job
is a loop of identical calls on purpose; only the model knows which it is doing).

Fingerprints, never values, are kept and recorded: arguments carry what redaction exists
for, and a fingerprint answers the only question asked here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from afcore.recording._lossless import lossless
from afcore.tools._notes import TEMPLATES

__all__ = ["Repeat", "RepeatedCalls", "fingerprint", "with_note"]

NUDGE_AT = 2
"""The landing that gets the note: the first repeat, and only it."""


def fingerprint(value: Any) -> str:
    """A short stable hash of a JSON value (keys sorted) or of a text."""
    return hashlib.sha256(_bytes(value)).hexdigest()[:16]


def _bytes(value: Any) -> bytes:
    """What :func:`fingerprint` hashes: the text, or the value's canonical JSON."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")  # a lone surrogate is hashed too
    try:
        return orjson.dumps(value, option=_SORTED, default=str)
    except TypeError:  # a big integer, a lone surrogate: hashed in their lossless form
        return orjson.dumps(lossless(value), option=_SORTED, default=str)


_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


@dataclass(frozen=True, slots=True)
class Repeat:
    """A call that landed exactly as an earlier one: what the record keeps, and the note."""

    tool: str
    occurrences: int
    args_fingerprint: str
    result_fingerprint: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "occurrences": self.occurrences,
            "args_fingerprint": self.args_fingerprint,
            "result_fingerprint": self.result_fingerprint,
        }


@dataclass
class RepeatedCalls:
    """The tally of one turn (make one per run; it is never part of the run's state)."""

    _seen: dict[tuple[str, bytes, str], int] = field(default_factory=dict)
    """(tool, the arguments' canonical JSON, the result) -> landings; hashed only for the
    landing that is reported (the result text is the history's own)."""

    def observe(self, tool: str, args: Any, result: str) -> Repeat | None:
        """Count this landing; the :class:`Repeat` when it is the one that gets the note."""
        key = (tool, _bytes(args), result)
        n = self._seen.get(key, 0) + 1
        self._seen[key] = n
        if n != NUDGE_AT:
            return None
        note = TEMPLATES["REPEATED_CALL_NUDGE"].format(tool=tool, count=n)
        return Repeat(tool, n, fingerprint(args), fingerprint(result), note)


def with_note(text: str, note: str) -> str:
    """A result's text with a note the library adds after it."""
    return f"{text}{TEMPLATES['NOTE_SEPARATOR']}{note}" if text else note
