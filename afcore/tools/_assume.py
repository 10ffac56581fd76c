"""``ask_or_assume``: a default for an argument the model may leave out, declared as a rule
on the tool rather than buried in its code, so the library fills it, records it as
assumed (not as the model's or the person's choice) and tells the model in one note.

A log search that defaults its look-back to two hours answers "any errors?" with "none",
meaning "none in a window nobody chose". The rule makes that choice visible.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import orjson

from afcore.errors import UsageError
from afcore.tools._notes import TEMPLATES

__all__ = ["Assumed", "assumed_note", "check_ask_or_assume", "fill_assumed", "served_schema"]

_SCALARS = ("string", "number", "integer", "boolean")


@dataclass(frozen=True, slots=True)
class Assumed:
    """An argument value the tool's rule supplied (``sent``: the model sent the rule's own
    value, which is filed as the default too: copying a default is not a choice)."""

    tool: str
    argument: str
    value: Any
    sent: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {"tool": self.tool, "argument": self.argument, "value": self.value}
        if self.sent:
            out["sent"] = True
        return out


def check_ask_or_assume(
    tool: str, input_schema: Mapping[str, Any], rules: Mapping[str, Any]
) -> dict[str, Any]:
    """The rules as ``{argument: value}``, or a UsageError naming what is wrong: an argument
    the schema does not offer, one that is not a single scalar type, a rule other than
    ``{"assume": value}``, or a value the property's own schema rejects."""
    where = f"define_tool({tool!r}): ask_or_assume"
    if not isinstance(rules, Mapping):
        raise UsageError(f"{where} takes {{argument: {{'assume': value}}}}, got {rules!r}")
    properties = input_schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    out: dict[str, Any] = {}
    for argument, rule in rules.items():
        prop = properties.get(argument)
        if not isinstance(prop, Mapping):
            raise UsageError(f"{where}: {argument!r} is not an argument in the input_schema")
        if prop.get("type") not in _SCALARS:
            raise UsageError(
                f"{where}: {argument!r} must have exactly one type of "
                f"{', '.join(_SCALARS)}; a rule fills one plain value"
            )
        if not isinstance(rule, Mapping) or set(rule) != {"assume"}:
            if isinstance(rule, Mapping) and "ask" in rule:
                raise UsageError(
                    f"{where}: {argument!r} asks the person, which af does not do from "
                    "inside a run yet; declare {'assume': value}"
                )
            raise UsageError(f"{where}: the rule for {argument!r} is {{'assume': value}}")
        value = rule["assume"]
        errors = sorted(jsonschema.validators.validator_for(prop)(prop).iter_errors(value), key=str)
        if errors:
            raise UsageError(
                f"{where}: {argument!r} assumes {_show(value)}, which its own schema rejects: "
                f"{errors[0].message[:120]}"
            )
        out[argument] = value
    return out


def fill_assumed(
    tool: str, rules: Mapping[str, Any], args: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[Assumed, ...]]:
    """The arguments the tool runs with (each ruled argument the call left out, filled) and
    what was assumed, in the rules' order."""
    filled = dict(args)
    assumed = []
    for argument, value in rules.items():
        if argument not in filled:
            filled[argument] = value
            assumed.append(Assumed(tool, argument, value))
        elif filled[argument] == value and type(filled[argument]) is type(value):
            assumed.append(Assumed(tool, argument, value, sent=True))
    return filled, tuple(assumed)


def assumed_note(assumed: Assumed) -> str | None:
    """The one past-tense sentence the model reads after the result, for a value it left
    out (None for one it sent)."""
    if assumed.sent:
        return None
    return TEMPLATES["ASSUMED_ARGUMENT_NOTE"].format(
        argument=assumed.argument, tool=assumed.tool, value=_show(assumed.value)
    )


def served_schema(input_schema: Mapping[str, Any], rules: Mapping[str, Any]) -> dict[str, Any]:
    """The schema the model is served: each ruled argument out of ``required``, and its
    description saying what a call that leaves it out runs with. The author's schema (the
    one arguments are validated against) is never edited."""
    schema = copy.deepcopy(dict(input_schema))
    if not rules:
        return schema
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [r for r in required if r not in rules]
        if not schema["required"]:
            del schema["required"]
    properties = schema.get("properties", {})
    for argument, value in rules.items():
        prop = properties[argument]
        hint = TEMPLATES["ASSUMED_ARGUMENT_SCHEMA_HINT"].format(value=_show(value))
        description = prop.get("description")
        prop["description"] = f"{description} {hint}" if description else hint
    return schema


def _show(value: Any) -> str:
    return orjson.dumps(value).decode()
