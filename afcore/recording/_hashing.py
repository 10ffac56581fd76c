"""Canonical JSON and the ids and hashes built on it.

Canonical JSON is what orjson writes with sorted keys: no spaces, UTF-8, keys in code-point
order. A value's id is a hash of its canonical JSON. A call's hash covers the whole request
without serializing the window again on every call: it is the id of the canonical JSON of the
request's *digest*, in which each system segment and tool is replaced by its own id, and the
messages by one hash over their ids (joined, in window order, nothing between), which the
writer extends as the history grows. Changing any byte of any part changes the call's hash.

Two schemes, named by the header's ``hash`` field: ``sha256`` (format 1.0: the hex sha256,
64 characters) and ``sha256-128`` (1.1: the first 128 bits of the sha256, base64url without
padding, 22 characters; chance collisions stay out of reach, about one in 10^19 even for a
file of a billion values).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

__all__ = [
    "SCHEMES",
    "Scheme",
    "V10",
    "V11",
    "canonical",
    "content_hash",
    "messages_digest",
    "request_digest",
    "request_hash",
    "seal",
    "short_id",
    "unseal",
]

_SORTED = orjson.OPT_SORT_KEYS
_URLSAFE = bytes.maketrans(b"+/", b"-_")
_sha256 = hashlib.sha256
_b64 = binascii.b2a_base64


def canonical(value: Any) -> bytes:
    return orjson.dumps(value, option=_SORTED)


def short_id(digest: bytes) -> str:
    """The first 128 bits of a sha256 digest, base64url without padding (22 characters)."""
    # b2a_base64's newline and padding fall after the 22 characters kept.
    return _b64(digest[:16])[:22].translate(_URLSAFE).decode()


def seal(chain: bytes, written: bytes | memoryview) -> bytes:
    """The 16 bytes of the seal that closes a write (1.1): the sha256 of the seal before's
    bytes (``b""`` for the first) followed by every byte written after it, up to the seal's
    line. Its line holds them as :func:`short_id` text (``{"t":"seal","h":"..."}``)."""
    h = _sha256(chain)
    h.update(written)
    return h.digest()[:16]


def unseal(text: object) -> bytes:
    """The 16 bytes a seal's ``h`` stands for (what the next seal's hash starts from).
    Raises ValueError when ``text`` is not a seal's."""
    if not isinstance(text, str) or len(text) != 22:
        raise ValueError(f"not a seal: {text!r}")
    return base64.urlsafe_b64decode(text + "==")


class Scheme:
    """How a file's ids are made: of bytes (:meth:`of`), of a value, of a window's ids."""

    def __init__(self, name: str, size: int, of: Any) -> None:
        self.name = name
        self.size = size
        """The length of an id."""
        self.of: Final = of
        """The id of some bytes."""

    def content(self, value: Any) -> str:
        """The id of a value: of its canonical JSON."""
        return str(self.of(orjson.dumps(value, option=_SORTED)))

    def messages(self, ids: Iterable[str]) -> str:
        """One hash for a window: of its messages' ids, in order, nothing between."""
        h = _sha256()
        for one in ids:
            h.update(one.encode())
        return self.finish(h)

    def finish(self, h: Any) -> str:
        """The id a running sha256 stands at."""
        return str(h.hexdigest()) if self.size == 64 else short_id(h.digest())

    def request(self, digest: Mapping[str, Any]) -> str:
        """A call's hash: the id of its request's digest."""
        return self.content(digest)

    def looks_like(self, ref: object) -> bool:
        return isinstance(ref, str) and len(ref) == self.size


V10 = Scheme("sha256", 64, lambda raw: _sha256(raw).hexdigest())
V11 = Scheme("sha256-128", 22, lambda raw: short_id(_sha256(raw).digest()))
SCHEMES = {V10.name: V10, V11.name: V11}


def content_hash(value: Any, scheme: Scheme = V11) -> str:
    return scheme.content(value)


def messages_digest(ids: Iterable[str], scheme: Scheme = V11) -> str:
    return scheme.messages(ids)


def request_digest(
    *,
    model: str,
    system: Iterable[str],
    messages: str,
    tools: Iterable[str],
    params: Mapping[str, Any],
    cache: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """The request with every part replaced by its id (see the module's docstring)."""
    return {
        "model": model,
        "system": list(system),
        "messages": messages,
        "tools": list(tools),
        "params": dict(params),
        "cache": [dict(c) for c in cache],
    }


def request_hash(digest: Mapping[str, Any], scheme: Scheme = V11) -> str:
    return scheme.request(digest)
