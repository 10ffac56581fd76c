"""No module of afcore imports, however indirectly, a module that imports it back: counting
imports inside functions and under TYPE_CHECKING, which do not fail at import time but tie
the modules together all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import afcore

ROOT = Path(afcore.__file__).parent


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its own)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    root = next(iter(known)).split(".")[0]
    out: set[str] = set()

    def add(target: str) -> None:
        # `from a.b import c` names module a.b.c when there is one, else a name in a.b.
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != root:
                continue
            for alias in node.names:
                add(f"{base}.{alias.name}")
    return out


def cycles(root: Path) -> list[list[str]]:
    """The import cycles among the package's modules: one per strongly connected group of
    modules, each written as a path that returns to where it started."""
    known = modules(root)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:  # one cycle through it, though there may be more
                found.append(_path(sorted(group), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _path(group: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the group's first module, as the modules it passes."""
    start, members = group[0], set(group)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [*reversed(path), start]
                if w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{group} is not a cycle")


def test_afcore_has_no_import_cycle() -> None:
    found = cycles(ROOT)
    assert not found, "import cycles in afcore:\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_cycle_through_a_function_or_type_checking_import_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.a import A\n")
    (pkg / "sub" / "a.py").write_text(
        "def f():\n    from pkg.sub import b\n    return b\nclass A: ...\n"
    )
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n"
    )
    (pkg / "c.py").write_text("import pkg.sub.b\n")  # imports into the cycle, not part of it
    assert cycles(pkg) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]]
    (pkg / "sub" / "b.py").write_text("X = 1\n")
    assert cycles(pkg) == []


def test_importing_a_package_counts_as_importing_its_init(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import x\n")
    (pkg / "a.py").write_text("x = 1\ndef f():\n    from pkg import y\n")
    assert cycles(pkg) == [["pkg", "pkg.a", "pkg"]]
