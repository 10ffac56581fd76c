"""A tool's return value as the text the model reads.

Text that JSON cannot carry as it is has one lossless form, the one JSON itself has: a lone
surrogate (``"\\ud800"``, from ``os.listdir`` of a name that is not UTF-8) is written as its
``\\udXXXX`` escape, and an integer past 64 bits (``2**70``) in full, digit by digit. The
run goes on, and the recording holds exactly the text the model read
(docs/recording-format.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["as_text"]


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return _carried(value)
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    try:
        return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson's JSONEncodeError: a big integer, a lone surrogate, depth
        text = json.dumps(value, default=_jsonable, ensure_ascii=False, check_circular=True)
        return _carried(text)


def _carried(text: str) -> str:
    """``text`` with each lone surrogate as its ``\\udXXXX`` escape (the rest as it is)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
