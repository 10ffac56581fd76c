"""What a secret looks like: the rules redaction and the scanner share.

Patterns are RE2 expressions (linear-time on hostile text). A pattern is written once with
three markers and compiled twice: for text as it is (``{WS}``: whitespace, ``{Q}``: a quote)
and for the same text inside JSON, where a quote is ``\\"`` and a newline is ``\\n``; the
JSON form finds everything the plain form finds, so a value whose serialized bytes hold no
match holds no secret. An inner group named ``s`` marks the part to replace (the password
of a URL, the value of ``password=...``); without one, the whole match is replaced. A group
``k`` captures the key an assignment names, ``q`` the quote around it.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_FIELDS",
    "SHAPES",
    "Shape",
    "field_words_regex",
    "is_placeholder",
    "is_secret_key",
    "learnable",
    "looks_like_key",
    "looks_secret",
    "norm_key",
]

DEFAULT_FIELDS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "secretkey",
    "authorization",
    "auth",
    "credential",
    "credentials",
    "cookie",
    "cookies",
)
"""Words a secret key ends with, once lower-cased and stripped of ``-``, ``_``, ``.`` and
spaces: ``db_password``, ``X-Api-Key``, ``clientSecret``, ``access_token``,
``Proxy-Authorization`` all end with one. ``max_tokens`` does not."""

_SEP = re.compile(r"[-_. ]")


def norm_key(name: str) -> str:
    return _SEP.sub("", name.lower())


def is_secret_key(name: str, fields: tuple[str, ...]) -> bool:
    """Whether an object key names a secret. ``fields``: normalized words (``norm_key``)."""
    return norm_key(name).endswith(fields)


def field_words_regex(fields: tuple[str, ...]) -> str:
    """An RE2 alternation matching any of ``fields`` as it may be spelled in a key: any
    case, a separator between any two letters (``api_key``, ``API-KEY``, ``apiKey``)."""
    spelled = []
    for word in sorted(set(fields), key=len, reverse=True):
        spelled.append(r"[-_. ]*".join(re.escape(c) for c in word))
    return "(?i:" + "|".join(spelled) + ")"


_PLACEHOLDER = re.compile(
    r"\[redacted[:\]]|^\*{3,}$|^x{3,}$|^\.{3}$|^<[^<>]*>$|^\$\{[^}]*\}$|^\{\{.*\}\}$|^%\(.*\)s$"
    r"|^\$[A-Za-z_][A-Za-z0-9_]*$|^(?:none|null|nil|true|false|undefined|n/a|redacted|hidden)$",
    re.IGNORECASE,
)
_NAME_OR_CODE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)*$")


def is_placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: ``[redacted:...]``, ``***``,
    ``<your key>``, ``${TOKEN}``, ``$TOKEN``, ``null``..."""
    return _PLACEHOLDER.search(value) is not None


def _classes(value: str) -> int:
    lower = upper = digit = other = 0
    for c in value:
        if c.islower():
            lower = 1
        elif c.isupper():
            upper = 1
        elif c.isdigit():
            digit = 1
        else:
            other = 1
    return lower + upper + digit + other


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def looks_secret(value: str) -> bool:
    """A bare word (not quoted) that looks like a credential: 8 characters or more, not a
    placeholder, not a name or an expression (``os.environ``, ``get_token()``, ``str``),
    with at least two kinds of character (lower, upper, digits, symbols)."""
    if len(value) < 8 or is_placeholder(value) or any(c in value for c in "()[]{}"):
        return False
    if _NAME_OR_CODE.match(value) and not any(c.isdigit() for c in value):
        return False
    return _classes(value) >= 2


_HEX = re.compile(r"^[0-9a-fA-F]+$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


_OBJECT_ID = re.compile(
    r"^(?:msg|toolu|srvtoolu|call|req|resp|run|thread|asst|batch|file|evt)[_-]|^chatcmpl-"
)
"""Vendors' ids of messages, calls, requests: random-looking, never secret."""

KEY_QUALIFIERS = (
    "cache",
    "sort",
    "primary",
    "partition",
    "foreign",
    "idempotency",
    "object",
    "row",
    "hash",
    "dedup",
    "lookup",
    "unique",
    "composite",
    "routing",
    "index",
)
"""Words that make the *key* after them a name for data, not a credential."""


def looks_like_key(value: str) -> bool:
    """A value beside the bare word *key* (weaker evidence than *password* or *token*):
    20 to 256 characters of random-looking mixed case and digits, not a hash or a uuid
    (cache keys and idempotency keys are those), not a vendor's object id, not a path or a
    file name, not a blob (an image, a signature)."""
    if not 20 <= len(value) <= 256 or _HEX.match(value) or _UUID.match(value) or "." in value:
        return False
    if _OBJECT_ID.match(value):
        return False
    if not looks_secret(value):
        return False
    kinds = (any(c.islower() for c in value), any(c.isupper() for c in value))
    return all(kinds) and any(c.isdigit() for c in value) and entropy(value) >= 3.5


def learnable(value: str) -> bool:
    """Whether a value found under a secret key is worth replacing everywhere else in the
    run: 8 characters or more (shorter ones turn up by chance), and not a plain word such
    as ``disabled`` or ``required`` (which would then be replaced in every text)."""
    return (
        len(value) >= 8 and not (value.isalpha() and len(value) < 16) and not is_placeholder(value)
    )


def _basic_credentials(value: str) -> bool:
    """``Basic <base64>`` is a credential when the base64 decodes to ``user:password``."""
    token = value.split()[-1]
    if len(token) < 8:
        return False
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded and all(32 <= b < 127 for b in decoded)


@dataclass(frozen=True)
class Shape:
    """A credential's shape."""

    name: str
    pattern: str
    """RE2, with the markers of this module's docstring."""
    screen: str | None = None
    """A looser RE2 over JSON bytes, when the pattern's own JSON form would be costly;
    every match of the pattern lies in a match of this."""
    check: Callable[[str], bool] | None = None
    """Whether a match (the part to replace) really is a secret."""


# Prefixes are the vendors' documented ones; lengths are lower bounds, so a key that grows
# is still caught.
SHAPES: tuple[Shape, ...] = (
    Shape("anthropic_key", r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    Shape("openai_key", r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}"),
    Shape("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    Shape("google_oauth_token", r"\bya29\.[A-Za-z0-9_\-]{20,}"),
    Shape("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    Shape("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    Shape("gitlab_token", r"\bgl(?:pat|dt|rt|ptt|cbt|ft|soat|imt)-[A-Za-z0-9_\-]{20,}"),
    Shape("slack_token", r"\b(?:xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,})"),
    Shape(
        "slack_webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"
    ),
    Shape("stripe_key", r"\b(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/=]{24,})"),
    Shape("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    Shape("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    Shape("pypi_token", r"\bpypi-AgE[A-Za-z0-9_\-]{50,}"),
    Shape("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    Shape("groq_key", r"\bgsk_[A-Za-z0-9]{40,}"),
    Shape("xai_key", r"\bxai-[A-Za-z0-9]{40,}"),
    Shape(
        "private_key",
        # Whole blocks; a block cut short (no END line) loses everything after BEGIN.
        r"-----BEGIN[A-Z0-9 ]* PRIVATE KEY(?: BLOCK)?-----(?:(?s:.)*?-----END[A-Z0-9 ]* "
        r"PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\-\s]*)",
        screen=r"-----BEGIN[A-Z0-9 ]* PRIVATE KEY",
    ),
    Shape("jwt", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.?[A-Za-z0-9_\-]*"),
    Shape("bearer", r"\b(?i:bearer){WS}+[A-Za-z0-9._~+/\-]{16,}=*"),
    Shape(
        "basic_auth",
        # base64 of user:password has an upper-case letter or a digit past its first
        # character; "Basic understanding" does not.
        r"\b(?i:basic){WS}+[A-Za-z0-9+/][a-z+/]*[A-Z0-9][A-Za-z0-9+/]*={0,2}",
        check=_basic_credentials,
    ),
    Shape(
        "url_password",
        # scheme://user:password@host: the password, up to the authority's last '@'.
        r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:\"'<>]*:(?P<s>[^\s/?#\"'<>]+)@",
    ),
)
"""Credential shapes, in the order they are tried at one position."""
