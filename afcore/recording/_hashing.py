"""Canonical JSON and the hashes built on it.

Canonical JSON is what orjson writes with sorted keys: no spaces, UTF-8, keys in code-point
order. A blob's id is the sha256 of its value's canonical JSON. A call's hash covers the
whole request without serializing the window again on every call: it is the sha256 of the
canonical JSON of the request's *digest*, in which each system segment and tool is replaced
by the hash of its own canonical JSON, and the messages by one hash over their hashes
(sha256 of the hex hashes joined, in window order), which the writer extends as the history
grows. Changing any byte of any part changes the call's hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

__all__ = ["canonical", "content_hash", "messages_digest", "request_digest", "request_hash"]

_SORTED = orjson.OPT_SORT_KEYS


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=_SORTED)


def content_hash(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=_SORTED)).hexdigest()


def messages_digest(hashes: Iterable[str]) -> str:
    """One hash for a window: sha256 over its messages' hex hashes, in order, nothing between."""
    h = hashlib.sha256()
    for one in hashes:
        h.update(one.encode())
    return h.hexdigest()


def request_digest(
    *,
    model: str,
    system: Iterable[str],
    messages: str,
    tools: Iterable[str],
    params: Mapping[str, Any],
    cache: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """The request with every part replaced by its content hash (see the module's docstring)."""
    return {
        "model": model,
        "system": list(system),
        "messages": messages,
        "tools": list(tools),
        "params": dict(params),
        "cache": [dict(c) for c in cache],
    }


def request_hash(digest: Mapping[str, Any]) -> str:
    return content_hash(digest)
