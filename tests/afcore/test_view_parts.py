"""The run's view reads the parts of a call in the common shape by shorter ways than the general
ones (a fold's value in one conversion, a call's lists once per ref): whatever the file holds,
each gives what the general way gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from afcore.readmodel._folds import checked, checked_json

_ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "?", "7", "\x1b[31m"]),
    st.lists(st.integers(0, 9), max_size=3),
    st.just({}),
)
"""Values no field of a fold should hold, or only some should."""


_INT = st.one_of(st.none(), st.integers(min_value=-3, max_value=40), st.integers(min_value=2**40))
_RANGES = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)).map(list), max_size=3)
_WORDS = st.lists(st.text(max_size=5), max_size=4)
_REFUSAL = st.fixed_dictionaries(
    {},
    optional={
        "reason": st.text(max_size=8),
        "messages": _RANGES,
        "writers": _WORDS,
        "error": st.one_of(st.none(), st.text(max_size=8)),
    },
)
_FOLD = st.fixed_dictionaries(
    {},
    optional={
        "strategy": st.text(max_size=8),
        "iteration": _INT,
        "count": _INT,
        "messages": _RANGES,
        "folded": _WORDS,
        "measured": _INT,
        "threshold": _INT,
        "summary": st.one_of(
            st.none(), st.fixed_dictionaries({}, optional={"message": _INT, "call": _INT})
        ),
        "refusals": st.lists(_REFUSAL, max_size=3),
        "after": _ODD,
    },
)
"""A fold's value in the shape the window strategies write it."""


def _spoilt(data: st.DataObject, value: Any) -> Any:
    """``value`` with one value in it, at any depth, replaced by one of another type."""
    inner = value if isinstance(value, dict | list) else None
    if not inner or data.draw(st.integers(0, 3)) == 0:
        return data.draw(_ODD)
    at = data.draw(
        st.sampled_from(list(inner.keys() if isinstance(inner, dict) else range(len(inner))))
    )
    inner[at] = _spoilt(data, inner[at])
    return value


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_fold_converted_is_the_fold_checked(data: st.DataObject) -> None:
    value = data.draw(_FOLD)
    for _ in range(data.draw(st.integers(0, 2))):
        value = _spoilt(data, value)
    value = json.loads(json.dumps(value))  # as parsed: arrays are lists
    assert checked_json(value, 3) == checked(value, 3)


_WHOLE = {
    "strategy": "summarize_oldest",
    "iteration": 5,
    "count": 6,
    "messages": [[2, 7]],
    "folded": ["call-llm#2", "tool:search#3"],
    "measured": 41210,
    "threshold": 30000,
    "summary": {"message": 9, "call": 4},
    "refusals": [
        {"messages": [[1, 1]], "reason": "current_request", "writers": ["seed#0"], "error": "e"}
    ],
}
"""A fold holding every field the words read."""

_ODD_VALUES = [None, True, False, 0, -1, 2**70, 1.0, -0.0, "", "7", [], [1], [[1]], {}, {"a": 1}]


def _every_place(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _every_place(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _every_place(v, (*at, i))
    return out


@pytest.mark.parametrize("at", _every_place(_WHOLE)[1:], ids=str)
def test_a_fold_with_any_one_value_of_another_type_is_converted_as_checked(
    at: tuple[Any, ...],
) -> None:
    for odd in _ODD_VALUES:
        value = json.loads(json.dumps(_WHOLE))
        parent = value
        for k in at[:-1]:
            parent = parent[k]
        parent[at[-1]] = odd
        assert checked_json(value, 3) == checked(value, 3), (at, odd)
        del parent[at[-1]]  # and without it
        assert checked_json(value, 3) == checked(value, 3), (at, "gone")


@pytest.mark.parametrize(
    "value",
    [
        {
            "count": 6,
            "folded": ["call-llm#2", "tool:search#3"],
            "iteration": 5,
            "messages": [[2, 7]],
            "refusals": [{"messages": [[1, 1]], "reason": "current_request", "writers": ["a"]}],
            "strategy": "sliding_window",
            "measured": 41210,
            "threshold": 30000,
            "summary": {"message": 9, "call": 4},
        },
        {"messages": [[1, 2], [4, 4]]},
        {},
    ],
)
def test_a_fold_in_the_strategies_shape_is_converted(value: dict[str, Any]) -> None:
    # Not by the general way: what the property above compares is two ways.
    from afcore.readmodel import _folds

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_folds, "checked", lambda value, fold: pytest.fail("not converted"))
        assert checked_json(value, 1) == checked(value, 1)


# -- a call's lists, read once per ref -------------------------------------------------


class _File:
    """What the resolver reads a list from: one list under ``list``, segment texts by ref."""

    def __init__(self, listed: Any, texts: dict[str, Any]) -> None:
        self._listed, self._texts = listed, texts

    def listed(self, ref: str) -> Any:
        if self._listed is KeyError:
            raise KeyError(ref)
        return self._listed

    def blob(self, ref: str) -> Any:
        return self._texts[ref]

    def value(self, write: Any) -> Any:
        return write.get("value")


def _general(listed: Any, texts: dict[str, Any]) -> tuple[Any, ...]:
    """What a call's summary held, each by the way it was worked out before the lists were
    read once per ref: the count, the characters, the names, the injections' sources."""
    from afcore.readmodel._text import as_dict, as_text
    from afcore.readmodel._walk import is_injection

    ok = isinstance(listed, list) and all(isinstance(x, dict) for x in listed)
    entries = listed if ok else None
    total: int | None = 0
    for seg in entries or []:
        text = seg.get("text")
        if text is None and seg.get("ref"):
            body = texts.get(seg["ref"])
            text = body.get("text") if isinstance(body, dict) else None
        total = None if not isinstance(text, str) or total is None else total + len(text)
    names = [as_text(t.get("name")) for t in entries or []]
    sources = [as_dict(x.get("source")) for x in entries or []]
    return (
        None if entries is None else len(entries),
        total,
        names,
        [s for s in sources if is_injection(s)],
    )


_SOURCE = st.one_of(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["base", "static", "steering", "skill", "fact", "summary", 3]),
            "id": st.sampled_from(["cite", "read_skill", "", None, 7]),
        },
        optional={"trigger": st.sampled_from(["always", "rule"]), "reason": st.text(max_size=3)},
    ),
    _ODD,
)
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(st.text(max_size=6), _ODD),
        "ref": st.sampled_from(["r1", "r2", "gone", "", 5]),
        "name": st.one_of(st.text(max_size=4), _ODD),
        "source": _SOURCE,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.lists(st.one_of(_ENTRY, _ENTRY, _ENTRY, _ODD), max_size=5), _ODD, st.just(KeyError)
    )
)
def test_a_call_s_lists_read_once_per_ref_are_what_each_call_worked_out(listed: Any) -> None:
    from afcore.readmodel._walk import Resolver

    texts = {"r1": {"text": "abc"}, "r2": {"text": 5}}
    resolver = Resolver(_File(listed, texts))  # type: ignore[arg-type]
    count, chars, names, injected = _general(listed if listed is not KeyError else None, texts)
    system, tools = resolver.system("ref"), resolver.tools("ref")
    assert (system.count, system.chars, system.injected) == (count, chars, injected)
    assert (tools.count, tools.names, tools.injected) == (count, names, injected)


def test_the_parts_built_by_position_have_their_fields_in_that_order() -> None:
    # The run's view builds these by position (a big run builds one a line or a call): a
    # field moved or added before the last so built would shift the others.
    from afcore.readmodel._model import CallSummary, Decision, FoldView, Response, ToolResult

    fields = {
        CallSummary: "call iteration rsid model line kind fold segments chars messages window"
        " tools tools_added tools_removed injections attempt",
        ToolResult: "name call_id status ms content is_error missing result_status shown notes"
        " run k",
        Response: "text tool_calls thinking_chars stop_reason usage model ms decision missing"
        " response_id unsent_params redacted_thinking opaque",
        Decision: "id flavor trigger fired reason",
        FoldView: "fold strategy iteration count messages folded measured threshold summary"
        " summary_call refusals",
    }
    for kind, names in fields.items():
        ordered = names.split()
        assert kind.__struct_fields__[: len(ordered)] == tuple(ordered), kind.__name__
