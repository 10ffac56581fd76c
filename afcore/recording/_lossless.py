"""Values JSON cannot carry as they are, in a lossless form a recording can hold.

A run's values are mostly JSON already. Two kinds are not, and either would end the run at
the first write: an integer past 64 bits (a tool returning ``2**70``, a model sending one in
a tool call's arguments) and a string holding a lone surrogate (``os.listdir`` of a name that
is not UTF-8). The writer tries the value as it is first; only when that fails is the value
walked, each such part replaced by a one-key object (docs/recording-format.md):

- ``{"$af:int": "1180591620717411303424"}``: the integer, in decimal;
- ``{"$af:str": ["a", 55296, "b"]}``: the string as runs of text and, between them, each
  lone surrogate as its code point;
- ``{"$af:obj": {...}}``: an object of the value's own that has a single key starting with
  ``$af:``, so that it is never taken for one of the two above.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lossless"]

_LIMIT = 2**63
_U64 = 2**64


def lossless(value: Any) -> Any:
    """``value`` as plain JSON: models as their fields, the parts JSON cannot carry replaced
    (see the module's docstring); everything else as it is."""
    from pydantic import BaseModel

    from afcore.recording._models import as_json

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return {"$af:str": _runs(v)}
            return v
        if isinstance(v, bool) or v is None or isinstance(v, float):
            return v
        if isinstance(v, int):
            return v if -_LIMIT <= v < _U64 else {"$af:int": str(v)}
        if isinstance(v, BaseModel):
            return walk(as_json(v))
        if isinstance(v, dict):
            out = {str(k) if not isinstance(k, str) else k: walk(x) for k, x in v.items()}
            if any(not _encodes(k) for k in out):
                out = {_escaped(k): x for k, x in out.items()}
            if len(out) == 1 and next(iter(out)).startswith("$af:"):
                return {"$af:obj": out}
            return out
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        return v  # anything else is the caller's to refuse, as it would have been

    return walk(value)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _escaped(key: str) -> str:
    """A key holding a lone surrogate, with each written as its ``\\udXXX`` escape (keys are
    names; a run never reads them back)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _runs(text: str) -> list[str | int]:
    out: list[str | int] = []
    start = 0
    for i, c in enumerate(text):
        if 0xD800 <= ord(c) <= 0xDFFF:
            if i > start:
                out.append(text[start:i])
            out.append(ord(c))
            start = i + 1
    if start < len(text):
        out.append(text[start:])
    return out
