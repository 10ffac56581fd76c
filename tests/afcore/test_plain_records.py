"""The plain reader (records as dicts, checked without pydantic) against the record models:
its table is what the models generate, and on every line of the samples and frozen fixtures,
and on mutated lines, it either gives what the model gives or leaves the line to the model.
It never accepts a line the model rejects."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel, ValidationError

from afcore.recording import _flows, _models
from afcore.recording._plain import UNSURE, plain_record
from afcore.recording._plain_spec import MODELS
from scripts.make_plain_spec import SPEC, table

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "recordings").glob("sample-*.jsonl"),
        *(ROOT / "recordings").glob("flow-*.jsonl"),
        *(ROOT / "recordings").glob("flow-*/*.jsonl"),
        *(ROOT / "tests" / "fixtures").rglob("*.jsonl"),
    ]
)
SAMPLES = [p for p in FILES if p.parent.name != "fixtures" and "fixtures" not in p.parts]

# Each record type, by its `t`, as the readers dispatch it.
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


def same(model: type[BaseModel], data: Any) -> Any:
    """The plain reader's answer, checked against the model's; UNSURE when it left it."""
    got = plain_record(model.__name__, data)
    try:
        want = model.model_validate(data).model_dump()
    except ValidationError:
        assert got is UNSURE, f"{model.__name__}: accepted what the model rejects: {data!r}"
        return UNSURE
    if got is not UNSURE:
        assert got == want, model.__name__
        assert _types(got) == _types(want), model.__name__
    return got


def _types(value: Any) -> Any:
    """The value's shape with the type of each leaf (1 == 1.0 == True for ==)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return (type(value), [_types(v) for v in value])
    return type(value)


def test_the_table_is_what_the_models_generate() -> None:
    assert SPEC.read_text() == table(), "run: python -m scripts.make_plain_spec"


def test_every_record_type_has_its_model_in_the_table() -> None:
    assert {m.__name__ for m in BY_TYPE.values()} <= set(MODELS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_line_reads_as_its_model_reads_it(path: Path) -> None:
    for _, data in lines(path):
        model = BY_TYPE.get(data.get("t")) if isinstance(data, dict) else None
        if model is not None:
            same(model, data)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_samples_heads_and_ends_need_no_model(path: Path) -> None:
    # What af ls reads of each file: af writes them so that pydantic is never asked.
    for n, data in lines(path):
        if data.get("t") in ("header", "run_end", "flow", "flow_end"):
            assert same(BY_TYPE[data["t"]], data) is not UNSURE, f"line {n}"


ODD: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    3,
    2**63,
    1.0,
    1.5,
    float("inf"),
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
    decided = 0
    for path in FILES:
        for _, data in lines(path):
            if not isinstance(data, dict) or data.get("t") not in BY_TYPE:
                continue
            t = data["t"]
            if taken.get(t, 0) >= 6:  # a few of each type, from several files
                continue
            taken[t] = taken.get(t, 0) + 1
            for mutated in _mutations(data, rng):
                if same(BY_TYPE[t], mutated) is not UNSURE:
                    decided += 1
    assert decided > 500, "the plain reader decided too few of the mutated lines"


def test_coercions_are_left_to_the_model() -> None:
    # What pydantic's lax mode makes of a value of another type is its to say.
    usage = {"input_tokens": 1, "output_tokens": 2}
    assert plain_record("UsageInfo", usage) == {
        **usage,
        **dict.fromkeys(["cache_read_tokens"], 0),
    } | {
        "cache_write_tokens": 0,
        "estimated": False,
    }
    for odd in ("1", 1.0, True):
        assert plain_record("UsageInfo", {"input_tokens": odd}) is UNSURE
        same(_models.UsageInfo, {"input_tokens": odd})
    # An int where a float is asked is the float, as the model makes it.
    assert plain_record("BreakerInfo", {"failures": 3, "cooldown": 2}) == {
        "failures": 3,
        "cooldown": 2.0,
    }
    same(_models.BreakerInfo, {"failures": 3, "cooldown": 2})
