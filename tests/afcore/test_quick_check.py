"""The quick argument check (jsonschema_rs) says yes only where jsonschema says yes: over
random JSON values, for schemas made of the keywords both read alike; and a schema with a
keyword they may read otherwise gets no quick check at all."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afcore import define_tool
from afcore.tools import validate_args
from afcore.tools._quick_check import quick_check

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 2, "maxLength": 5},
            "unit": {"enum": ["c", "f"]},
            "days": {"type": "integer", "minimum": 1, "exclusiveMaximum": 8},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "at": {"anyOf": [{"type": "null"}, {"type": "number", "maximum": 1.5}]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": ["boolean", "integer"]}},
                "minProperties": 1,
            },
            "kind": {"const": "x"},
            "neg": {"not": {"type": "string"}},
        },
        "oneOf": [{"required": ["opts"]}, {"required": ["kind"]}],
    },
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["c", "f", "x", "ab", "abcdef"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["n", "city", "unit", "days", "tags", "at", "opts", "deep", "kind"]),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=8,
)
_args = st.dictionaries(
    st.sampled_from(["n", "city", "unit", "days", "tags", "at", "opts", "kind", "neg", "z"]),
    _values,
    max_size=5,
)


@pytest.mark.parametrize("schema", SCHEMAS)
@settings(max_examples=400, deadline=None)
@given(args=_args)
def test_the_quick_check_agrees_with_jsonschema(schema: dict[str, Any], args: Any) -> None:
    quick = quick_check(schema)
    assert quick is not None
    assert quick(args) == jsonschema.Draft202012Validator(schema).is_valid(args)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}},
        {"type": "object", "properties": {"s": {"type": "string", "format": "email"}}},
        {"type": "object", "properties": {"n": {"multipleOf": 0.1}}},
        {"type": "object", "properties": {"n": {"enum": [1, True]}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    ],
)
def test_a_keyword_read_otherwise_leaves_jsonschema_alone_to_judge(schema: Any) -> None:
    assert quick_check(schema) is None
    tool = define_tool("t", "t", schema, lambda a, c: "ok")
    assert tool.quick_check is None


def test_a_call_the_quick_check_rejects_gets_jsonschemas_words() -> None:
    tool = define_tool("t", "t", SCHEMAS[1], lambda a, c: "ok")
    assert tool.quick_check is not None
    assert validate_args(tool, {"city": "Paris"}) == []
    problems = validate_args(tool, {"city": "P", "unit": "k"})
    assert [p.path for p in problems] == ["$.city", "$.unit"]
