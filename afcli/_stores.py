"""Opening the session store a command names with ``--store`` (``af chat``, ``af sessions``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from afcli._errors import EXIT_USAGE, CliError

if TYPE_CHECKING:
    from afcore.sessions import SessionStore

__all__ = ["StoreOption", "open_store", "store_path"]

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="PATH|URL",
        help="The session store: a SQLite file's path or a postgresql:// URL (default: "
        ".af/sessions.db beside the recordings folder).",
        show_default=False,
    ),
]


def store_path(spec: str | None) -> Path | None:
    """The SQLite file ``spec`` names (the default one when None); None for a URL."""
    from afcore.sessions import default_store_path

    if spec is None:
        return default_store_path()
    if "://" in spec:
        return None
    return Path(spec)


def open_store(spec: str | None, *, create: bool) -> SessionStore | None:
    """The store ``spec`` names. A SQLite file that is not there yet is made only with
    ``create``; otherwise None when it is the default one (nothing has used sessions here),
    and a usage error when it was named."""
    from afcore.errors import UsageError
    from afcore.sessions import open_store as open_spec

    path = store_path(spec)
    if path is not None and not create and not path.exists():
        if spec is None:
            return None
        raise CliError(f"there is no session store at {path}", EXIT_USAGE)
    if path is not None and path.is_dir():
        raise CliError(f"--store {path} is a folder; give the SQLite file's path", EXIT_USAGE)
    try:
        return open_spec(spec if path is None else path)
    except UsageError as e:
        raise CliError(f"--store: {e}", EXIT_USAGE) from None
