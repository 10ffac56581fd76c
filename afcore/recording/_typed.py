"""Records made typed: parsed JSON turned into the Structs of ``_structs`` without pydantic,
and the few things readers do with a record besides reading its fields.

msgspec checks a value strictly, in C. What it rejects is handed to the record models, which
accept it with their coercions (a ``1`` for ``true``, ``"3"`` for ``3``) or say why not: a
value is accepted or rejected, and read as, exactly what the models say, and pydantic is
imported only for such a line. The models stay the one definition of each record;
``scripts/make_structs.py`` generates the Structs from them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from operator import attrgetter
from typing import Any, Final, Literal, TypeVar

import msgspec

from afcore.recording._structs import KNOWN_TYPES, TYPES, Record, UnknownRecord, _Record, _Value

__all__ = [
    "InvalidRecord",
    "beyond_defaults",
    "dump",
    "record",
    "typed",
]

_S = TypeVar("_S", bound=msgspec.Struct)
_convert: Final = msgspec.convert
_Invalid: Final = msgspec.ValidationError


AGENT_TYPES: Final[dict[str, Any]] = {t: cls for t, cls in TYPES.items() if t in KNOWN_TYPES}
"""Each record type of an agent's recording, by its ``t``: a reader's walk converts with
msgspec itself, and hands :func:`judged` what it rejects (as :func:`record` does)."""


class InvalidRecord(ValueError):
    """A value the record models reject; the message is their first complaint
    (``where: what``, cut to 80 characters), as the readers have always worded it."""

    def __init__(self, where: str, msg: str) -> None:
        super().__init__(_short(f"{where or 'record'}: {msg}"))
        self.where = where
        """Where in the value, dotted (``usage.input_tokens``); empty for the value itself."""
        self.msg = msg
        """What is wrong there."""


def record(data: dict[str, Any]) -> Record | UnknownRecord:
    """An agent recording's line (a dict with its ``t``) as its Struct; a type this reader
    does not know as an :class:`UnknownRecord`. Raises :class:`InvalidRecord`."""
    cls = AGENT_TYPES.get(data.get("t"))  # type: ignore[arg-type]
    if cls is None:
        return unknown(data)
    try:
        found: Record = _convert(data, cls)
    except _Invalid:
        found = judged(cls, data)
    return found


def judged(cls: type[_S], data: dict[str, Any]) -> _S:
    """An agent recording's line that msgspec rejected, as the models judge it (worded as
    the record union words it). Raises :class:`InvalidRecord`."""
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
        _models.RECORD_ADAPTER.validate_python if union else model.model_validate
    )
    try:
        done = validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise InvalidRecord(".".join(str(p) for p in err["loc"]), err["msg"]) from None
    if cls is UnknownRecord:
        return unknown(done.model_dump())  # type: ignore[return-value]
    # What the model made of it is of the Struct's types: msgspec takes it as it is.
    return _convert(done.model_dump(), cls)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def dump(
    value: Any,
    *,
    mode: Literal["python", "json"] = "python",
    exclude_defaults: bool = False,
    exclude_none: bool = False,
    exclude: Collection[str] = (),
) -> Any:
    """A Struct as plain values: what its model's ``model_dump`` gives with the same
    arguments (``exclude`` at the top only). Fields holding their default (or None) are left
    out at every depth; ``mode="json"`` makes tuples lists. Anything else is returned as it
    is, lists, tuples and dicts walked."""
    if isinstance(value, UnknownRecord):
        return {k: v for k, v in {"t": value.t, **value.fields}.items() if k not in exclude}
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        if isinstance(value, _Record) and not exclude_defaults and "t" not in exclude:
            out["t"] = value.t  # a record's ``t`` is always its default
        defaults = _defaults(type(value)) if exclude_defaults else None
        for name in value.__struct_fields__:
            v = getattr(value, name)
            if (
                name in exclude
                or (exclude_none and v is None)
                or (defaults is not None and name in defaults and defaults[name] == v)
            ):
                continue
            out[name] = dump(
                v, mode=mode, exclude_defaults=exclude_defaults, exclude_none=exclude_none
            )
        return out
    if isinstance(value, list) or (mode == "json" and isinstance(value, tuple)):
        return [
            dump(v, mode=mode, exclude_defaults=exclude_defaults, exclude_none=exclude_none)
            for v in value
        ]
    if isinstance(value, tuple):
        return tuple(
            dump(v, mode=mode, exclude_defaults=exclude_defaults, exclude_none=exclude_none)
            for v in value
        )
    if isinstance(value, dict):
        return {
            k: dump(v, mode=mode, exclude_defaults=exclude_defaults, exclude_none=exclude_none)
            for k, v in value.items()
        }
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


_OTHERS: dict[tuple[type, frozenset[str]], tuple[Callable[[Any], Any], Any] | None] = {}


def at_defaults(value: msgspec.Struct, but: frozenset[str]) -> bool:
    """True when every field of ``value`` but those in ``but`` holds its default: what
    ``beyond_defaults(value).keys() <= but`` says, without building the dict."""
    key = (type(value), but)
    if key in _OTHERS:
        found = _OTHERS[key]
    else:
        defaults = _defaults(type(value))
        names = [name for name in value.__struct_fields__ if name not in but]
        # The fields read in C as one tuple, compared with their defaults' (a field
        # outside ``but`` without a default is always beyond).
        found = _OTHERS[key] = (
            None
            if any(name not in defaults for name in names)
            else (_fields(names), tuple(defaults[name] for name in names))
        )
    if found is None:
        return False
    fields, held = found
    return bool(held == fields(value))


def _fields(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving these fields of a value as a tuple."""
    if len(names) > 1:
        return attrgetter(*names)
    return lambda value: tuple(getattr(value, name) for name in names)


_ = _Value  # the base of every value Struct, re-exported for isinstance checks


def as_model(value: msgspec.Struct) -> Any:
    """A Struct read from a file as its record model, for the writer (which writes models):
    what the model made of the line it was read from."""
    from afcore.recording import _flows, _models

    name = type(value).__name__
    model = getattr(_models, name, None) or getattr(_flows, name)
    return model.model_validate(dump(value))
