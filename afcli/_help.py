"""``--help`` as typer draws it with Rich, without the modules af's help never uses.

typer's help formatter (``typer.rich_utils``) imports ``rich.markdown`` (markdown-it,
pygments) and ``rich.traceback`` (attrs) when it is first imported: a third of ``af
--help``'s start-up. af's help is Rich markup (``rich_markup_mode="rich"``), so Markdown is
never drawn, and af prints its own errors, so a pretty traceback never is either. The
formatter is imported with stand-ins for those two names that import the real module the
first time they are used, and the two modules are left out of ``sys.modules`` for whoever
imports them next.

In Rich markup mode typer joins the lines of an option's help but not those of a command's
paragraphs, which Markdown did; :func:`reflow` joins them, so the help reads as before.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Any

from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group", "reflow"]

_DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}


class _Later(type):
    """The class of a stand-in: calls, attributes and isinstance go to the real class."""

    def _real(cls) -> Any:
        module: str = cls.__module__
        return getattr(importlib.import_module(module), cls.__name__)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._real()(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._real(), name)

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._real())


class _Module:
    def __init__(self, name: str, attr: str) -> None:
        self.__name__ = name
        setattr(self, attr, _Later(attr, (), {"__module__": name}))


def _load_formatter() -> None:
    if "typer.rich_utils" in sys.modules:
        return
    placed = [name for name in _DEFERRED if name not in sys.modules]
    for name in placed:
        sys.modules[name] = _Module(name, _DEFERRED[name])  # type: ignore[assignment]
    try:
        importlib.import_module("typer.rich_utils")
    finally:
        for name in placed:
            del sys.modules[name]


class Group(TyperGroup):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _load_formatter()
        super().format_help(ctx, formatter)


class Command(TyperCommand):
    def format_help(self, ctx: Any, formatter: Any) -> None:
        _load_formatter()
        super().format_help(ctx, formatter)


_CODE = re.compile(r"`([^`]+)`")


def reflow(doc: str | None) -> str:
    """A command's docstring as Rich markup that reads as its Markdown did: each paragraph
    on one line, `code` styled as Markdown styles it, a fenced block kept line by line."""
    paragraphs = []
    for p in inspect.cleandoc(doc or "").split("\n\n"):
        if p.startswith("```"):
            code = p.strip("`\n").splitlines()
            # Padded by a line above and below, as Markdown draws a block; the indent inside
            # the style, which typer's cleandoc of the text would strip.
            lines = ["", *code, ""]
            paragraphs.append("\n".join(f"[markdown.code_block] {escape(c)}[/]" for c in lines))
            continue
        pieces = _CODE.split(" ".join(p.split()))
        paragraphs.append(
            "".join(
                f"[markdown.code]{escape(piece)}[/]" if i % 2 else escape(piece)
                for i, piece in enumerate(pieces)
            )
        )
    return "\n\n".join(paragraphs)
