"""What ``af export`` redacts beyond the run's own policy, and how.

Three kinds of rule: **fields** (a path of object keys: ``email``, ``customer.email``,
``args.*.phone``; whatever stands under it, in any record, in JSON inside a string too),
**patterns** (a name and a regular expression) and the built-in ones (``email``, ``card``:
card numbers that pass the Luhn check). A value a rule finds is learned, and every occurrence
of it anywhere in the file becomes one placeholder, ``[redacted:<rule>:<n>]``: the same value
the same placeholder, another value another number, so a reader can still follow one
customer through a run without seeing who it is.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afcore.errors import UsageError

__all__ = ["BUILTIN_RULES", "ExportPolicy", "FieldPath", "luhn"]

BUILTIN_RULES: dict[str, str] = {
    "email": r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?!\w)",
    "card": r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])",
}
"""Personal data af knows the shape of: on unless the policy leaves one out."""


def luhn(text: str) -> bool:
    """Whether the digits of ``text`` pass the Luhn check (card numbers do)."""
    digits = [int(c) for c in text if c.isdecimal()]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            d -= 9 if d > 9 else 0
        total += d
    return len(digits) >= 13 and total % 10 == 0


@dataclass(frozen=True)
class FieldPath:
    """A path of object keys; ``*`` stands for any one key. It matches a value whose keys,
    from the record down, end with it (list positions are not keys)."""

    spec: str

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(p for p in self.spec.strip().removeprefix("$.").split(".") if p)

    def matches(self, keys: tuple[str, ...]) -> bool:
        """Whether a value at ``keys`` is under this path (at it, or inside what it holds)."""
        parts = self.parts
        n = len(parts)
        for end in range(n, len(keys) + 1):
            window = keys[end - n : end]
            if all(p in ("*", k) for p, k in zip(parts, window, strict=True)):
                return True
        return False


@dataclass(frozen=True)
class ExportPolicy:
    """The redaction ``af export`` adds. Built-in rules apply unless named in ``keep``."""

    fields: tuple[str, ...] = ()
    patterns: tuple[tuple[str, str], ...] = ()
    keep: tuple[str, ...] = ()
    """Built-in rules left out (``email``, ``card``)."""

    def __post_init__(self) -> None:
        for name, rx in self.patterns:
            try:
                re.compile(rx)
            except re.error as e:
                raise UsageError(f"the pattern {name!r} is not a regular expression: {e}") from None
            if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
                raise UsageError(f"a pattern's name is letters, digits, _ . - (not {name!r})")
        unknown = set(self.keep) - set(BUILTIN_RULES)
        if unknown:
            raise UsageError(
                f"no built-in rule named {sorted(unknown)[0]!r} (there are: "
                + ", ".join(BUILTIN_RULES)
                + ")"
            )
        for spec in self.fields:
            if not FieldPath(spec).parts:
                raise UsageError(f"{spec!r} is not a field path (keys joined by dots)")

    @property
    def rules(self) -> list[tuple[str, re.Pattern[str]]]:
        """Every pattern that applies, built-in ones first."""
        builtin = [(n, rx) for n, rx in BUILTIN_RULES.items() if n not in self.keep]
        return [(n, re.compile(rx)) for n, rx in (*builtin, *self.patterns)]

    def describe(self) -> dict[str, Any]:
        """The policy as the report states it: field paths, and patterns by name only (an
        expression may spell the very value it hides: ``--redact hunter2``)."""
        return {
            "fields": list(self.fields),
            "patterns": [n for n, _ in self.patterns],
            "builtin": [n for n in BUILTIN_RULES if n not in self.keep],
        }

    def merged(self, other: ExportPolicy) -> ExportPolicy:
        return ExportPolicy(
            fields=(*self.fields, *other.fields),
            patterns=(*self.patterns, *other.patterns),
            keep=(*self.keep, *other.keep),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ExportPolicy:
        """A policy file, TOML or JSON::

        fields = ["customer.email", "args.phone"]
        keep = ["card"]
        [patterns]
        order_id = "ORD-[0-9]{6}"
        """
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read the policy file {path}: {e}") from None
        try:
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as e:
            raise UsageError(f"the policy file {path} does not parse: {e}") from None
        if not isinstance(data, dict):
            raise UsageError(f"the policy file {path} must hold a table")
        unknown = set(data) - {"fields", "patterns", "keep"}
        if unknown:
            raise UsageError(
                f"the policy file {path} has an unknown entry {sorted(unknown)[0]!r} "
                "(it may hold fields, patterns, keep)"
            )
        fields, patterns, keep = (
            data.get("fields", []),
            data.get("patterns", {}),
            data.get("keep", []),
        )
        if not (
            isinstance(fields, list)
            and all(isinstance(f, str) for f in fields)
            and isinstance(patterns, dict)
            and all(isinstance(v, str) for v in patterns.values())
            and isinstance(keep, list)
            and all(isinstance(k, str) for k in keep)
        ):
            raise UsageError(
                f"the policy file {path}: fields and keep are lists of strings, patterns a "
                "table of names to expressions"
            )
        return cls(fields=tuple(fields), patterns=tuple(patterns.items()), keep=tuple(keep))
