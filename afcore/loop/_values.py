"""A tool's return value as the text the model reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["as_text"]


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
