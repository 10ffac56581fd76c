"""The Structs the readers hand out against the record models they are generated from: the
module is what the models generate, and on every line of the samples and frozen fixtures, and
on mutated lines, a line is accepted or rejected, and read as, exactly what the model says;
what msgspec takes on its own (no pydantic) it takes as the model does."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from pydantic import BaseModel, ValidationError

from afcore.recording import _flows, _models, _structs
from afcore.recording._typed import (
    InvalidRecord,
    at_defaults,
    beyond_defaults,
    dump,
    record,
    typed,
)
from scripts.make_structs import OUT, models, source

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "recordings").glob("sample-*.jsonl"),
        *(ROOT / "recordings").glob("flow-*.jsonl"),
        *(ROOT / "recordings").glob("flow-*/*.jsonl"),
        *(ROOT / "tests" / "fixtures").rglob("*.jsonl"),
    ]
)

BY_TYPE: dict[str, type[BaseModel]] = {
    m.model_fields["t"].default: m
    for module in (_models, _flows)
    for m in vars(module).values()
    if isinstance(m, type)
    and issubclass(m, BaseModel)
    and "t" in m.model_fields
    and isinstance(m.model_fields["t"].default, str)
}


def lines(path: Path) -> Iterator[tuple[int, Any]]:
    for n, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            yield n, orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue


def _types(value: Any) -> Any:
    """The value's shape with the type of each leaf (1 == 1.0 == True for ==)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return (type(value), [_types(v) for v in value])
    return type(value)


def _struct(model: type[BaseModel]) -> type[msgspec.Struct]:
    cls: type[msgspec.Struct] = getattr(_structs, model.__name__)
    return cls


def same(model: type[BaseModel], data: Any) -> bool:
    """Whether msgspec alone decided ``data``; either way, it reads as the model reads it."""
    cls = _struct(model)
    try:
        want: Any = model.model_validate(data).model_dump()
    except ValidationError:
        want = None
    try:
        fast: Any = msgspec.convert(data, cls)
    except msgspec.ValidationError:
        fast = None
    try:
        got: Any = typed(cls, data)
    except InvalidRecord:
        got = None
    if want is None:
        assert fast is None, f"{model.__name__}: msgspec took what the model rejects: {data!r}"
        assert got is None, f"{model.__name__}: accepted what the model rejects: {data!r}"
        return False
    assert got is not None, f"{model.__name__}: rejected what the model takes: {data!r}"
    for value in (got, fast) if fast is not None else (got,):
        assert type(value) is cls
        assert orjson.dumps(dump(value)) == orjson.dumps(want), model.__name__
        assert _types(dump(value)) == _types(want), model.__name__
    return fast is not None


def test_the_module_is_what_the_models_generate() -> None:
    assert OUT.read_text() == source(), "run: python -m scripts.make_structs"


def test_every_model_has_its_struct_and_every_type_its_tag() -> None:
    for model in models():
        cls = _struct(model)
        fields = [f for f in model.model_fields if not (f == "t" and model in BY_TYPE.values())]
        assert list(cls.__struct_fields__) == fields, model.__name__
    assert {t: cls.__name__ for t, cls in _structs.TYPES.items()} == {
        t: m.__name__ for t, m in BY_TYPE.items()
    }


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_line_reads_as_its_model_reads_it(path: Path) -> None:
    for n, data in lines(path):
        model = BY_TYPE.get(data.get("t")) if isinstance(data, dict) else None
        if model is not None:
            # As af writes them, msgspec takes them alone: pydantic is never asked.
            assert same(model, data), f"line {n}"


ODD: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    3,
    2**63 - 1,
    1.0,
    1.5,
    1e300,
    "",
    "3",
    "1.5",
    "true",
    "answer",
    "sha256",
    [],
    [1, 2],
    ["a", 1],
    [[1, 2]],
    [["a"]],
    [["a", 1]],
    {},
    {"name": "x"},
    {"input_tokens": "2"},
]


def _mutations(data: Any, rng: random.Random) -> Iterator[Any]:
    """``data`` with one value somewhere replaced, or one key dropped."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, at: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                paths.append((*at, k))
                walk(v, (*at, k))
        elif isinstance(value, list):
            for i, v in enumerate(value[:3]):
                paths.append((*at, i))
                walk(v, (*at, i))

    walk(data, ())
    for path in rng.sample(paths, min(len(paths), 12)):
        for odd in [*rng.sample(ODD, 6), "drop"]:
            copy = orjson.loads(orjson.dumps(data))
            holder = copy
            for step in path[:-1]:
                holder = holder[step]
            if odd == "drop":
                if isinstance(holder, dict):
                    del holder[path[-1]]
                else:
                    holder.pop(path[-1])
            else:
                holder[path[-1]] = odd
            yield copy


def test_mutated_lines_read_as_their_model_reads_them() -> None:
    rng = random.Random(11)
    taken: dict[str, int] = {}
    fast = slow = 0
    for path in FILES:
        for _, data in lines(path):
            if not isinstance(data, dict) or data.get("t") not in BY_TYPE:
                continue
            t = data["t"]
            if taken.get(t, 0) >= 6:  # a few of each type, from several files
                continue
            taken[t] = taken.get(t, 0) + 1
            for mutated in _mutations(data, rng):
                if mutated.get("t") != t:
                    continue  # dispatched by t: another type's, or an unknown record
                if same(BY_TYPE[t], mutated):
                    fast += 1
                else:
                    slow += 1
    assert fast > 500 and slow > 500, (fast, slow)


def test_coercions_are_the_models() -> None:
    usage = _structs.UsageInfo
    for odd, want in (("1", 1), (1.0, 1), (True, 1)):
        got = typed(usage, {"input_tokens": odd})
        assert type(got.input_tokens) is int and got.input_tokens == want
    assert typed(_structs.BreakerInfo, {"failures": 3, "cooldown": 2}).cooldown == 2.0
    assert type(typed(_structs.BreakerInfo, {"failures": 3, "cooldown": 2}).cooldown) is float
    with pytest.raises(InvalidRecord, match="input_tokens: Input should be a valid integer"):
        typed(usage, {"input_tokens": "x"})


def test_a_record_that_fails_is_worded_as_the_union_words_it() -> None:
    with pytest.raises(InvalidRecord, match=r"^seal\.h: Field required$"):
        record({"t": "seal"})
    with pytest.raises(InvalidRecord, match=r"^h: Field required$"):
        typed(_structs.Seal, {"t": "seal"})


def test_unknown_records_keep_their_fields() -> None:
    got = record({"x": 1, "t": "future", "y": [2]})
    assert isinstance(got, _structs.UnknownRecord)
    assert (
        dump(got)
        == _models.UnknownRecord.model_validate({"x": 1, "t": "future", "y": [2]}).model_dump()
    )


def _typed_lines() -> Iterator[tuple[Any, Any, Any]]:
    """Every record line of every file: its model, its JSON and its Struct."""
    for path in FILES:
        for _, data in lines(path):
            model = BY_TYPE.get(data.get("t")) if isinstance(data, dict) else None
            if model is not None:
                yield model, data, typed(_struct(model), data)


def test_dump_is_model_dump() -> None:
    for model, data, got in _typed_lines():
        want = model.model_validate(data)
        for how in (
            {"exclude_defaults": True},
            {"exclude_none": True},
            {"mode": "json"},
            {"mode": "json", "exclude_defaults": True},
        ):
            mine, theirs = dump(got, **how), want.model_dump(**how)
            assert orjson.dumps(mine) == orjson.dumps(theirs), how
            assert _types(mine) == _types(theirs), how
        assert list(beyond_defaults(got)) == list(want.model_dump(exclude_defaults=True))


def test_at_defaults_says_what_beyond_defaults_says() -> None:
    """``at_defaults(value, but)`` is ``beyond_defaults(value).keys() <= but``, for every
    value of every file and a few sets of fields left out (none, one, all, the plain tool
    outcome's)."""
    from afcore.readmodel._run import _PLAIN_OUTCOME

    seen = 0
    for _, _, got in _typed_lines():
        values = [got, *(v for v in vars_of(got) if isinstance(v, msgspec.Struct))]
        for value in values:
            fields = list(value.__struct_fields__)
            for but in (
                frozenset(),
                frozenset(fields[:1]),
                frozenset(fields[1:]),
                frozenset(fields),
                _PLAIN_OUTCOME,
            ):
                assert at_defaults(value, but) == (beyond_defaults(value).keys() <= but)
                seen += 1
    assert seen > 1000


def vars_of(value: msgspec.Struct) -> list[Any]:
    return [getattr(value, name) for name in value.__struct_fields__]
