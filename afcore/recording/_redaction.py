"""Keeping secrets out of recordings.

Every value goes through the policy before it is hashed and written, so a recording can be
attached to a bug report as it is. Three kinds of rule:

- **fields**: object keys (`api_key`, `authorization`, ...) whose string values are replaced
  wherever they occur;
- **patterns**: regular expressions for the shapes credentials take (`sk-ant-...`,
  `Bearer ...`); each match is replaced;
- **environment**: the values of environment variables whose names look secret
  (`*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`), and the values providers say they
  authenticate with, replaced wherever they occur.

A match becomes ``[redacted:<rule>]``. Hashes are taken after redaction, so a redacted file
still verifies; the header names the rules (never the values) and run_end counts the
replacements.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["DEFAULT_FIELDS", "DEFAULT_PATTERNS", "Redaction", "Redactor"]

DEFAULT_FIELDS: tuple[str, ...] = (
    "api_key",
    "apikey",
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "access_token",
    "refresh_token",
    "client_secret",
    "secret_key",
)

DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("anthropic_key", r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    ("openai_key", r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    ("bearer", r"\b(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    ("slack_token", r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("private_key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)

_ANCHORS: dict[tuple[str, str], tuple[bytes, ...]] = {
    DEFAULT_PATTERNS[0]: (b"sk-ant-",),
    DEFAULT_PATTERNS[1]: (b"sk-",),
    DEFAULT_PATTERNS[2]: (b"bearer",),
    DEFAULT_PATTERNS[3]: (b"akia", b"asia"),
    DEFAULT_PATTERNS[4]: (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_"),
    DEFAULT_PATTERNS[5]: (b"xox",),
    DEFAULT_PATTERNS[6]: (b"private key-----",),
}
"""For each default pattern, strings (lowercase) that every match contains."""

_SECRET_ENV = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_MIN_SECRET = 8
"""Shorter values are too likely to occur by chance (`true`, a port number) to replace."""


@dataclass(frozen=True)
class Redaction:
    """A redaction policy. The default covers common credential shapes and the secret-looking
    environment; add your own field names, patterns or literal secrets."""

    fields: tuple[str, ...] = DEFAULT_FIELDS
    patterns: tuple[tuple[str, str], ...] = DEFAULT_PATTERNS
    secrets: tuple[str, ...] = ()
    """Literal values to replace wherever they occur."""
    environment: bool = True
    """Also replace the values of secret-looking environment variables."""

    def compile(self, provider_secrets: Iterable[str] = ()) -> Redactor:
        return Redactor(self, provider_secrets)


class Redactor:
    """A compiled policy. ``redact(value)`` returns the value with every match replaced."""

    def __init__(self, policy: Redaction, provider_secrets: Iterable[str] = ()) -> None:
        self.policy = policy
        self.count = 0
        self.env_names: list[str] = []
        literals: list[tuple[str, str]] = []
        if policy.environment:
            for name, value in sorted(os.environ.items()):
                if _SECRET_ENV.search(name) and len(value) >= _MIN_SECRET:
                    self.env_names.append(name)
                    literals.append((f"env:{name}", value))
        for value in (*policy.secrets, *provider_secrets):
            if value and len(value) >= _MIN_SECRET:
                literals.append(("secret", value))
        self._literals = literals
        self._fields = frozenset(f.lower() for f in policy.fields)
        self._compile()

    def _compile(self) -> None:
        # Longest literals first, so a secret containing another is replaced whole.
        literals = sorted(self._literals, key=lambda p: -len(p[1]))
        self._rules: list[tuple[str, re.Pattern[str]]] = [
            (name, re.compile(re.escape(value))) for name, value in literals
        ]
        self._rules += [(name, re.compile(rx)) for name, rx in self.policy.patterns]
        # The screen decides, from the serialized bytes, whether a value needs the slow walk:
        # one regex over the lowercased bytes finds any literal (in its JSON-escaped
        # spelling, the one the bytes hold), any secret field name, or the fixed anchor of a
        # known pattern; only then do the patterns themselves run. Patterns without a known
        # anchor always run.
        needles = [orjson.dumps(v)[1:-1].lower() for _, v in literals]
        needles += [orjson.dumps(f) + b":" for f in sorted(self._fields)]
        self._checks: list[re.Pattern[bytes]] = []
        self._unanchored: list[re.Pattern[bytes]] = []
        for name, rx in self.policy.patterns:
            anchors = _ANCHORS.get((name, rx))
            if anchors:
                needles += anchors
            else:
                self._unanchored.append(re.compile(rx.encode()))
        self._needles = re.compile(b"|".join(re.escape(n) for n in needles)) if needles else None

    def needs_redaction(self, raw: bytes) -> bool:
        """Whether the JSON bytes of a value hold anything the policy replaces. Cheap when
        they do not, which is nearly always; may say yes when the walk then finds nothing."""
        if self._needles is not None and self._needles.search(raw.lower()) is not None:
            return True
        return any(rx.search(raw) is not None for rx in self._unanchored)

    def _learn(self, field_name: str, value: str) -> None:
        """A value found under a secret field is a secret everywhere else in the run too
        (a tool that echoes its arguments would otherwise leak it)."""
        if len(value) >= _MIN_SECRET and all(v != value for _, v in self._literals):
            self._literals.append((f"field:{field_name}", value))
            self._compile()

    def redact(self, value: Any) -> Any:
        """``value`` with every match replaced (the same object when nothing matched)."""
        try:
            raw = orjson.dumps(value)
        except TypeError:
            return self._walk(value)
        return self._walk(value) if self.needs_redaction(raw) else value

    def redact_text(self, text: str) -> str:
        for name, rx in self._rules:
            text, n = rx.subn(f"[redacted:{name}]", text)
            self.count += n
        return text

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if isinstance(k, str) and k.lower() in self._fields and isinstance(v, str):
                    out[k] = f"[redacted:field:{k}]"
                    self.count += 1
                    self._learn(k, v)
                else:
                    out[k] = self._walk(v)
            return out
        if isinstance(value, list | tuple):
            return [self._walk(v) for v in value]
        return value
