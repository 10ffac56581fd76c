"""Write ``afcore/recording/_structs.py``: every record model as a frozen msgspec Struct with
the same name, fields, order, defaults and types, for the readers (``afcore/recording/_typed.py``).

    python -m scripts.make_structs

Run it after changing a record model; ``tests/afcore/test_structs.py`` fails until the module
matches the models. A model or field a Struct cannot say as pydantic reads it (a validator, an
alias, a constraint, a default that is not a literal) stops it with the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from afcore.recording import _flows, _models

OUT = Path(__file__).resolve().parent.parent / "afcore" / "recording" / "_structs.py"
MODULES = (_models, _flows)

HEAD = '''"""The records as frozen msgspec Structs: what the readers hand out. Generated from the
record models (``_models.py``, ``_flows.py``) by ``scripts/make_structs.py``: do not edit.

Each class has its model's name, fields (in order), defaults and types; a record type is
tagged by its ``t`` (a class attribute here, the first key when dumped). ``_typed.py`` makes
them, and leaves to the models what msgspec would not take as they take it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from msgspec import Struct


class _Value(Struct, frozen=True, kw_only=True):
    """A value written inside a record."""


class _Record(Struct, frozen=True, kw_only=True, tag_field="t"):
    """A line of a recording or a flow's log, tagged by its ``t``."""

    t: ClassVar[str]


class UnknownRecord(Struct, frozen=True, kw_only=True):
    """A record of a type this reader does not know, kept as it was: its ``t`` and the rest
    of its fields, in their order."""

    t: str
    fields: dict[str, Any] = {}

'''


def models() -> list[type[BaseModel]]:
    """Every record model of the modules, each once, named uniquely."""
    found: dict[str, type[BaseModel]] = {}
    for module in MODULES:
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseModel)
                and obj.__module__ == module.__name__
                and not obj.__name__.startswith("_")
                and obj.model_config.get("extra") == "ignore"
            ):
                if found.get(obj.__name__, obj) is not obj:
                    raise SystemExit(f"two models named {obj.__name__}")
                found[obj.__name__] = obj
    return [found[name] for name in sorted(found)]


def tag(model: type[BaseModel]) -> str | None:
    """A record type's ``t``: a field with one literal value, that value its default."""
    f = model.model_fields.get("t")
    if f is None:
        return None
    args = get_args(f.annotation)
    if get_origin(f.annotation) is Literal and len(args) == 1 and f.default == args[0]:
        return str(args[0])
    raise SystemExit(f"{model.__name__}.t is not one literal with it as default")


def spell(annotation: Any, where: str) -> str:
    """The annotation as source, as msgspec reads it."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in (str, int, float, bool):
        return str(annotation.__name__)
    if annotation is NoneType:
        return "None"
    if annotation is Any:
        return "Any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation.model_config.get("extra") != "ignore":
            raise SystemExit(f"{where}: {annotation.__name__} is not read as the others")
        return annotation.__name__
    if origin is Literal:
        if not all(type(a) is str for a in args):
            raise SystemExit(f"{where}: a Literal of other than strings")
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin is list and len(args) == 1:
        return f"list[{spell(args[0], where)}]"
    if origin is dict and len(args) == 2 and args[0] is str:
        return f"dict[str, {spell(args[1], where)}]"
    if origin is tuple and args and Ellipsis not in args:
        return f"tuple[{', '.join(spell(a, where) for a in args)}]"
    if origin in (Union, UnionType):
        return " | ".join(spell(a, where) for a in args)
    raise SystemExit(f"{where}: no Struct type for {annotation!r}")


def source() -> str:
    """The text of ``_structs.py`` for the models as they are."""
    out = [HEAD]
    tags: dict[str, str] = {}
    for model in models():
        decorators = model.__pydantic_decorators__
        if any(
            getattr(decorators, name)
            for name in ("validators", "field_validators", "model_validators", "root_validators")
        ):
            raise SystemExit(f"{model.__name__} has a validator a Struct cannot run")
        t = tag(model)
        if t is None:
            out.append(f"\nclass {model.__name__}(_Value, frozen=True, kw_only=True):\n")
        else:
            tags[t] = model.__name__
            out.append(
                f"\nclass {model.__name__}(_Record, frozen=True, kw_only=True, tag={t!r}):\n"
            )
            out.append(f"    t: ClassVar[str] = {t!r}\n")
        fields = [(n, f) for n, f in model.model_fields.items() if n != "t" or t is None]
        for name, f in fields:
            where = f"{model.__name__}.{name}"
            if f.alias or f.validation_alias:
                raise SystemExit(f"{where}: an alias")
            if any(repr(m) != "Sparse" for m in f.metadata):
                raise SystemExit(f"{where}: a constraint ({f.metadata})")
            text = f"    {name}: {spell(f.annotation, where)}"
            if not f.is_required():
                default = f.default
                if type(default) in (list, dict) and default:
                    raise SystemExit(f"{where}: a default that is not empty")
                if default != eval(repr(default)):  # noqa: S307
                    raise SystemExit(f"{where}: a default that is not a literal")
                text += f" = {default!r}"
            out.append(text + "\n")
        if not fields:
            out.append("    pass\n")
    out.append("\n\nTYPES: dict[str, type[_Record]] = {\n")
    out.extend(f"    {t!r}: {name},\n" for t, name in sorted(tags.items()))
    out.append("}\n")
    out.append('"""Each record type, by its ``t``."""\n')
    for alias, union, doc in (
        ("Record", get_args(get_args(_models.Record)[0]), "A line of an agent's recording."),
        ("FlowRecord", get_args(_flows.FlowRecord), "A line of a flow's log."),
    ):
        out.append(f"\n{alias} = {' | '.join(m.__name__ for m in union)}\n")
        out.append(f'"""{doc}"""\n')
    out.append("\nFLOW_TYPES: dict[str, type[FlowRecord]] = {\n")
    out.extend(f"    {tag(m)!r}: {m.__name__},\n" for m in get_args(_flows.FlowRecord))
    out.append("}\n")
    out.append('"""Each record type of a flow\'s log, by its ``t``."""\n')
    known = sorted(str(tag(m)) for m in get_args(get_args(_models.Record)[0]))
    out.append(f"\nKNOWN_TYPES = frozenset({known!r})\n")
    out.append('"""The types of an agent\'s recording\'s records."""\n')
    # As the project's formatter leaves it, so that the check of formatting passes too.
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(OUT), "-"],
        input="".join(out),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main() -> None:
    text = source()
    if OUT.exists() and OUT.read_text() == text:
        print(f"{OUT.name}: up to date")
        return
    OUT.write_text(text)
    print(f"wrote {OUT.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
