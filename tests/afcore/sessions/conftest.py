"""Stores for the session tests: SQLite in a temporary folder, and PostgreSQL on a real server
these tests start on loopback (initdb into a temporary folder, pg_ctl on a free port), one
fresh database per test.

Without the server's binaries (or psycopg) the PostgreSQL tests skip, saying why; with
``AF_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) they fail instead, so CI cannot pass them by
skipping.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from afcore.sessions import PostgresStore, SessionStore, SQLiteStore
from scripts.postgres_server import find_binaries, postgres_server

REQUIRED = os.environ.get("AF_REQUIRE_POSTGRES", "") not in ("", "0")


def _missing(reason: str) -> None:
    if REQUIRED:
        pytest.fail(f"AF_REQUIRE_POSTGRES is set, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _missing('psycopg and psycopg_pool are not installed (pip install -e ".[dev]")')
    bins = find_binaries()
    if bins is None:
        _missing(
            "no PostgreSQL server binaries (initdb, pg_ctl) are installed: "
            "apt-get install postgresql"
        )
    assert bins is not None
    with postgres_server(bins) as url:
        yield url


def fresh_database(server: str) -> str:
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # a name of our own making
    return server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store is, as a process would be told: a SQLite file or a postgresql:// URL."""
    if request.param == "sqlite":
        return str(tmp_path / "state" / "sessions.db")
    return fresh_database(request.getfixturevalue("postgres_server_url"))


def open_spec(spec: str, **options: float) -> SessionStore:
    if spec.startswith("postgresql://"):
        return PostgresStore(spec, **options)
    return SQLiteStore(spec, **options)


@pytest.fixture
def store(store_spec: str) -> Iterator[SessionStore]:
    s = open_spec(store_spec)
    yield s
    s.close()


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    return tmp_path / "recordings"
