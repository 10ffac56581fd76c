"""Write ``afcore/recording/_plain_spec.py``: the record models' fields as the table the plain
reader (``afcore/recording/_plain.py``) checks lines against without pydantic.

    python -m scripts.make_plain_spec

Run it after changing a record model; ``tests/afcore/test_plain_records.py`` fails until the
table matches the models. A model or field this table cannot say (a validator, an alias, a
constraint, a type it has no kind for) stops it with the reason: the plain reader must then
learn it, or leave that model to pydantic.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from afcore.recording import _flows, _models

SPEC = Path(__file__).resolve().parent.parent / "afcore" / "recording" / "_plain_spec.py"
MODULES = (_models, _flows)

HEAD = '''"""The record models' fields, for the plain reader (``_plain.py``). Generated from the
models by ``scripts/make_plain_spec.py``: do not edit.

Each model: ``(field, kind, required, default)`` in declaration order. A kind is ``"str"``,
``"int"``, ``"float"`` (an int is made a float), ``"float!"`` (in a union with ``int``: floats
only), ``"bool"``, ``"none"``, ``"any"``, or a pair: ``("model", name)``, ``("lit", values)``,
``("list", kind)``, ``("dict", kind)`` (string keys), ``("tuple", kinds)``, ``("union", kinds)``.
"""

from typing import Any

MODELS: dict[str, tuple[tuple[str, Any, bool, Any], ...]] = {
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


def kind(annotation: Any, where: str) -> Any:
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is str:
        return "str"
    if annotation is int:
        return "int"
    if annotation is float:
        return "float"
    if annotation is bool:
        return "bool"
    if annotation is NoneType:
        return "none"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation.model_config.get("extra") != "ignore":
            raise SystemExit(f"{where}: {annotation.__name__} is not read as the others")
        return ("model", annotation.__name__)
    if origin is Literal:
        if not all(type(a) is str for a in args):
            raise SystemExit(f"{where}: a Literal of other than strings")
        return ("lit", tuple(args))
    if origin is list and len(args) == 1:
        return ("list", kind(args[0], where))
    if origin is dict and len(args) == 2 and args[0] is str:
        return ("dict", kind(args[1], where))
    if origin is tuple and args and Ellipsis not in args:
        return ("tuple", tuple(kind(a, where) for a in args))
    if origin in (Union, UnionType):
        members = [kind(a, where) for a in args]
        if "int" in members:
            members = ["float!" if m == "float" else m for m in members]
        return ("union", tuple(members))
    raise SystemExit(f"{where}: no kind for {annotation!r}")


def table() -> str:
    """The text of ``_plain_spec.py`` for the models as they are."""
    out = [HEAD]
    for model in models():
        decorators = model.__pydantic_decorators__
        if any(
            getattr(decorators, name)
            for name in ("validators", "field_validators", "model_validators", "root_validators")
        ):
            raise SystemExit(f"{model.__name__} has a validator the plain reader cannot run")
        out.append(f"    {model.__name__!r}: (\n")
        for name, f in model.model_fields.items():
            where = f"{model.__name__}.{name}"
            if f.alias or f.validation_alias:
                raise SystemExit(f"{where}: an alias")
            if any(repr(m) != "Sparse" for m in f.metadata):
                raise SystemExit(f"{where}: a constraint ({f.metadata})")
            required = f.is_required()
            default = None if required else f.default
            if type(default) in (list, dict) and default:
                raise SystemExit(f"{where}: a default that is not empty")
            if not required and default != eval(repr(default)):  # noqa: S307
                raise SystemExit(f"{where}: a default that is not a literal")
            entry = (name, kind(f.annotation, where), required, default)
            out.append(f"        {entry!r},\n")
        out.append("    ),\n")
    out.append("}\n")
    # As the project's formatter leaves it, so that the check of formatting passes too.
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(SPEC), "-"],
        input="".join(out),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main() -> None:
    text = table()
    if SPEC.exists() and SPEC.read_text() == text:
        print(f"{SPEC.name}: up to date")
        return
    SPEC.write_text(text)
    print(f"wrote {SPEC.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
