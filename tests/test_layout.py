"""The floors hold: ``afcore`` (the library and its read model) at the ground, ``afcli`` and
``tui`` above it, and neither front end built on the other's insides.

Every module's AST is walked, so imports inside functions and under ``TYPE_CHECKING`` count
as much as those at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("afcore", "afcli", "tui")
LENS_STARTER = "afcli/commands/lens.py"
"""The one module of afcli that may import tui: where a command starts the Lens."""


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _name(where: str) -> str:
    parts = where.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, where: str) -> Iterator[tuple[int, str]]:
    """Every module the module at ``where`` (``tui/app.py``) imports, anywhere in it, as
    absolute dotted names (for ``from a import b``: ``a.b`` as well as ``a``, since ``b`` may
    be a module)."""
    tree = ast.parse(source, filename=where)
    here = _name(where).split(".")
    if not where.endswith("__init__.py"):
        here = here[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def _private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _source(path: Path) -> tuple[str, str]:
    return path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()


def _violations(source: str, where: str) -> list[str]:
    own = where.split("/")[0]
    out = []
    for lineno, module in imports(source, where):
        top = module.split(".")[0]
        at = f"{where}:{lineno} imports {module}"
        if own == "afcore" and top in ("afcli", "tui", "typer", "textual"):
            out.append(f"{at}: the library imports a front end")
        if own == "tui" and top == "afcli":
            out.append(f"{at}: the Lens imports the command line")
        if own == "afcli" and top == "tui" and where != LENS_STARTER:
            out.append(f"{at}: only {LENS_STARTER} starts the Lens")
        if top in PACKAGES and top != own and _private(module):
            out.append(f"{at}: a private module of another package")
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_reaches_into_another(package: str) -> None:
    found = [v for path in _modules(package) for v in _violations(*_source(path))]
    assert found == []


def test_the_read_model_knows_no_terminal() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{lineno} imports {module}"
        for path in _modules("afcore/readmodel")
        for lineno, module in imports(*_source(path))
        if module.split(".")[0] in ("rich", "textual", "typer")
    ]
    assert found == []


@pytest.mark.parametrize(
    ("source", "where", "wrong"),
    [
        ("from afcli._render import fit\n", "tui/x.py", "imports the command line"),
        ("def f():\n    import afcli\n", "tui/x.py", "imports the command line"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tui import app\n",
            "afcore/x.py",
            "imports a front end",
        ),
        ("from tui.app import make_lens_app\n", "afcli/commands/show.py", "starts the Lens"),
        ("from afcore.recording._reader import _Index\n", "afcli/x.py", "private module"),
        ("from afcore.recording import _reader\n", "tui/x.py", "private module"),
    ],
)
def test_the_check_sees_what_it_should(source: str, where: str, wrong: str) -> None:
    assert any(wrong in v for v in _violations(source, where))


def test_the_check_lets_the_lens_starter_and_public_names_through() -> None:
    assert _violations("from tui import make_lens_app\n", LENS_STARTER) == []
    assert _violations("from afcore.readmodel import safe\n", "tui/x.py") == []
    assert _violations("from afcore.recording import _models\n", "afcore/why/x.py") == []


def test_relative_imports_resolve() -> None:
    found = [m for _, m in imports("from ..afcli import _render\n", "tui/x.py")]
    assert found[:2] == ["afcli", "afcli._render"]
