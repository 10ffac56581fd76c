"""Records made typed: parsed JSON turned into the Structs of ``_structs`` without pydantic,
and the few things readers do with a record besides reading its fields.

msgspec checks a value strictly, in C. What it rejects is handed to the record models, which
accept it with their coercions (a ``1`` for ``true``, ``"3"`` for ``3``) or say why not: a
value is accepted or rejected, and read as, exactly what the models say, and pydantic is
imported only for such a line. The models stay the one definition of each record;
``scripts/make_structs.py`` generates the Structs from them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

import msgspec

from afcore.recording._structs import TYPES, UnknownRecord, _Record, _Value

__all__ = [
    "InvalidRecord",
    "beyond_defaults",
    "dump",
    "first_error",
    "record",
    "typed",
]

_S = TypeVar("_S", bound=msgspec.Struct)
_convert: Final = msgspec.convert
_Invalid: Final = msgspec.ValidationError


class InvalidRecord(ValueError):
    """A value the record models reject; the message is their first complaint
    (``where: what``, cut to 80 characters), as the readers have always worded it."""


def record(data: dict[str, Any]) -> _Record | UnknownRecord:
    """An agent recording's line (a dict with its ``t``) as its Struct; a type this reader
    does not know as an :class:`UnknownRecord`. Raises :class:`InvalidRecord`."""
    cls = TYPES.get(data.get("t"))  # type: ignore[arg-type]
    if cls is None:
        return unknown(data)
    try:
        return _convert(data, cls)
    except _Invalid:
        return _by_model(cls, data, union=True)


def typed(cls: type[_S], data: Any) -> _S:
    """``data`` as the Struct ``cls`` (a record or a value inside one), judged as its model
    judges it. Raises :class:`InvalidRecord`."""
    try:
        return _convert(data, cls)
    except _Invalid:
        return _by_model(cls, data, union=False)


def unknown(data: dict[str, Any]) -> UnknownRecord:
    """A record of a type this reader does not know, kept as it was."""
    t = data.get("t")
    if not isinstance(t, str):
        return _by_model(UnknownRecord, data, union=False)
    return UnknownRecord(t=t, fields={k: v for k, v in data.items() if k != "t"})


def _by_model(cls: type[_S], data: Any, *, union: bool) -> _S:
    """What the record model makes of a value msgspec would not take as it is."""
    from pydantic import ValidationError

    from afcore.recording import _flows, _models

    model = getattr(_models, cls.__name__, None) or getattr(_flows, cls.__name__)
    validate: Callable[[Any], Any] = (
        _models.RECORD_ADAPTER.validate_python
        if union and cls.__name__ in _models.__all__
        else model.model_validate
    )
    try:
        done = validate(data)
    except ValidationError as e:
        raise InvalidRecord(first_error(e)) from None
    if cls is UnknownRecord:
        return unknown(done.model_dump())  # type: ignore[return-value]
    # What the model made of it is of the Struct's types: msgspec takes it as it is.
    return _convert(done.model_dump(), cls)


def first_error(e: Any) -> str:
    """A pydantic ValidationError's first complaint, as ``where: what``."""
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "record"
    return _short(f"{where}: {err['msg']}")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def dump(value: Any, *, exclude_defaults: bool = False) -> Any:
    """A Struct as plain JSON values: what ``model_dump(mode="json")`` gives for its model,
    with ``exclude_defaults`` as there (fields holding their default left out, at every
    depth). Anything else is returned as it is, lists and dicts walked."""
    if isinstance(value, UnknownRecord):
        return {"t": value.t, **value.fields}
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        if isinstance(value, _Record) and not exclude_defaults:  # ``t`` is its default
            out["t"] = value.t
        defaults = _defaults(type(value)) if exclude_defaults else None
        for name in value.__struct_fields__:
            v = getattr(value, name)
            if defaults is not None and name in defaults and defaults[name] == v:
                continue
            out[name] = dump(v, exclude_defaults=exclude_defaults)
        return out
    if isinstance(value, list):
        return [dump(v, exclude_defaults=exclude_defaults) for v in value]
    if isinstance(value, tuple):
        return tuple(dump(v, exclude_defaults=exclude_defaults) for v in value)
    if isinstance(value, dict):
        return {k: dump(v, exclude_defaults=exclude_defaults) for k, v in value.items()}
    return value


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults(cls: type[msgspec.Struct]) -> dict[str, Any]:
    found = _DEFAULTS.get(cls)
    if found is None:
        info = msgspec.structs.fields(cls)
        found = {
            f.name: (f.default if f.default is not msgspec.NODEFAULT else f.default_factory())
            for f in info
            if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT
        }
        _DEFAULTS[cls] = found
    return found


def beyond_defaults(value: msgspec.Struct) -> dict[str, Any]:
    """The fields of ``value`` that hold other than their default, as they are (not dumped):
    what ``model_dump(exclude_defaults=True)`` keeps at the top."""
    defaults = _defaults(type(value))
    return {
        name: getattr(value, name)
        for name in value.__struct_fields__
        if name not in defaults or defaults[name] != getattr(value, name)
    }


_ = _Value  # the base of every value Struct, re-exported for isinstance checks
