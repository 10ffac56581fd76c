"""Records read as plain dicts, checked without pydantic, for the commands that must start
fast (``af ls`` reads a header and a run_end per file).

The record models in ``_models`` and ``_flows`` stay the one definition of each record: the
table this reads (``_plain_spec``) is generated from them by ``scripts/make_plain_spec.py``,
and a test fails when the two differ. :func:`plain_record` takes the well-formed line, as af writes
it, and gives what ``Model.model_validate(data).model_dump()`` gives; for anything else (a
value pydantic would coerce, a missing field, a wrong type) it says :data:`UNSURE`, and the
caller asks the model, which accepts or says why not. A test runs both on every line of the
samples and fixtures and on mutated lines.
"""

from __future__ import annotations

from typing import Any, Final

from afcore.recording._plain_spec import MODELS

__all__ = ["UNSURE", "beyond_defaults", "plain_record"]


class _Unsure:
    def __repr__(self) -> str:
        return "UNSURE"


UNSURE: Final[Any] = _Unsure()
"""Not decided here: validate with the model."""

_NO = UNSURE


def plain_record(model: str, data: Any) -> Any:
    """``data`` as the model named ``model`` dumps it once validated, or :data:`UNSURE`."""
    return _model(model, data)


def beyond_defaults(model: str, value: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``value`` (a dict :func:`plain_record` gave for ``model``) that hold other than
    their default, as ``model_dump(exclude_defaults=True)`` leaves them."""
    return {
        field: value[field]
        for field, _, required, default in MODELS[model]
        if required or value[field] != default
    }


def _model(name: str, data: Any) -> Any:
    if type(data) is not dict:
        return _NO
    out: dict[str, Any] = {}
    for field, kind, required, default in MODELS[name]:
        if field in data:
            value = _value(kind, data[field])
            if value is _NO:
                return _NO
            out[field] = value
        elif required:
            return _NO
        else:
            # Mutable defaults are empty (the generator checks): each record its own.
            out[field] = type(default)() if type(default) in (list, dict) else default
    return out


def _value(kind: Any, v: Any) -> Any:
    if type(kind) is str:
        t = type(v)
        if kind == "str":
            return v if t is str else _NO
        if kind == "int":
            return v if t is int else _NO
        if kind == "float":
            # pydantic makes a float of an int (within a double's exact range).
            if t is float:
                return v
            return float(v) if t is int and -(2**53) <= v <= 2**53 else _NO
        if kind == "float!":  # in a union that holds int too: an int is the int's
            return v if t is float else _NO
        if kind == "bool":
            return v if t is bool else _NO
        if kind == "none":
            return v if v is None else _NO
        if kind == "any":
            return v
        raise ValueError(f"unknown kind {kind!r}")
    how, arg = kind
    if how == "model":
        return _model(arg, v)
    if how == "lit":
        return v if type(v) is str and v in arg else _NO
    if how == "list":
        if type(v) is not list:
            return _NO
        items = [_value(arg, x) for x in v]
        return _NO if any(x is _NO for x in items) else items
    if how == "dict":
        if type(v) is not dict:
            return _NO
        out = {}
        for key, x in v.items():
            x = _value(arg, x)
            if x is _NO:
                return _NO
            out[key] = x
        return out
    if how == "tuple":
        if type(v) is not list or len(v) != len(arg):
            return _NO
        items = [_value(k, x) for k, x in zip(arg, v, strict=True)]
        return _NO if any(x is _NO for x in items) else tuple(items)
    if how == "union":
        # Exactly one member takes the value, or pydantic decides among them.
        found = [x for x in (_value(k, v) for k in arg) if x is not _NO]
        return found[0] if len(found) == 1 else _NO
    raise ValueError(f"unknown kind {how!r}")
