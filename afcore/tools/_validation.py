"""Checking a tool call's arguments against the tool's JSON Schema, and telling the model
what to fix without echoing back what it sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema
import orjson

from afcore.secrets import shorten
from afcore.tools._tool import Tool

__all__ = ["ArgProblem", "correction", "validate_args"]

_PREVIEW = 40
"""Never show the model (or the recording's event) more than this much of a bad value."""

_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
    (type(None), "null"),
)


@dataclass(frozen=True, slots=True)
class ArgProblem:
    path: str
    """Where in the arguments, as a JSON path (`$.city`, `$.items[2].qty`)."""
    message: str
    """What was expected, in words; quotes at most a short prefix of the value."""

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


def validate_args(tool: Tool, args: Any) -> list[ArgProblem]:
    """Every way ``args`` breaks the tool's schema, most useful first, at most ten."""
    if not isinstance(args, dict):
        return [ArgProblem("$", f"expected an object of arguments, got {_type_name(args)}")]
    if tool.ask_or_assume:
        # A ruled argument the call left out is filled before the tool runs: judged filled.
        args = {**tool.ask_or_assume, **args}
    quick = tool.quick_check
    if quick is not None:
        try:
            if quick(args):
                return []
        except Exception:  # a value it cannot take (not JSON): jsonschema judges it
            pass
    errors = sorted(tool.validator.iter_errors(args), key=lambda e: (len(e.path), e.json_path))
    return [ArgProblem(e.json_path, _describe(e)) for e in errors[:10]]


def correction(tool: Tool, problems: list[ArgProblem]) -> str:
    """The text the model reads instead of a result when its arguments were rejected."""
    lines = [f"The call to {tool.name} was not run: its arguments do not match the tool's schema."]
    lines += [f"- at {p.path}: {p.message}" for p in problems]
    lines.append(f"Fix the arguments and call {tool.name} again.")
    return "\n".join(lines)


def _describe(e: jsonschema.ValidationError) -> str:
    v, got = e.validator, e.instance
    expected: Any = e.validator_value
    if v == "type":
        want = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"expected {want}, got {_type_name(got)} {_preview(got)}"
    if v == "required":
        missing = [k for k in expected if isinstance(got, dict) and k not in got]
        return f"missing required argument {', '.join(repr(k) for k in missing)}"
    if v == "enum":
        return f"expected one of {_preview(expected, 120)}, got {_preview(got)}"
    if v == "const":
        return f"expected {_preview(expected)}, got {_preview(got)}"
    if v == "pattern":
        return f"expected a string matching {expected!r}, got {_preview(got)}"
    if v in ("minLength", "maxLength"):
        size = len(got) if isinstance(got, str) else "?"
        return f"expected {v} {expected}, got a string of length {size}"
    if v in ("minItems", "maxItems"):
        size = len(got) if isinstance(got, list) else "?"
        return f"expected {v} {expected}, got an array of {size}"
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
        return f"expected {v} {expected}, got {_preview(got)}"
    if v == "additionalProperties" and isinstance(got, dict):
        schema: Any = e.schema
        allowed = set(schema.get("properties", {}) if isinstance(schema, dict) else ())
        extra = [k for k in got if k not in allowed]
        return f"unexpected argument {', '.join(_preview(k, 30) for k in extra[:5])}"
    # Anything rarer: jsonschema's own words, cut so a long value cannot ride along.
    return _cut(e.message, 80)


def _type_name(value: Any) -> str:
    for cls, name in _JSON_TYPES:
        if type(value) is cls:
            return name
    return type(value).__name__


def _preview(value: Any, limit: int = _PREVIEW) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    return shorten(text, limit)
