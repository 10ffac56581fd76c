"""A throwaway PostgreSQL server on loopback, for the tests and benchmarks of the PostgreSQL
session store: ``initdb`` into a temporary folder, ``pg_ctl start`` on a free port, and
everything removed when it stops.

Needs the server's binaries (Debian's ``postgresql`` package; ``.ci/run`` installs it). As
root, which PostgreSQL refuses to run as, the server runs as the ``postgres`` user the
package creates.

    python -m scripts.postgres_server     # start one, print its URL, stop on Enter
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["find_binaries", "postgres_server"]


def find_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on PATH, or Debian's versioned folder."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server(bin_dir: Path | None = None) -> Iterator[str]:
    """Run a server until the block ends; yields its ``postgresql://`` URL (user ``af``, no
    password, trust on loopback only)."""
    bin_dir = bin_dir or find_binaries()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl) found")
    root = Path(tempfile.mkdtemp(prefix="af-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        for path in (root, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    run = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    try:
        subprocess.run(
            [
                *as_user,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                "af",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            **run,  # type: ignore[call-overload]
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {sockets} -c fsync=off "
            "-c max_connections=300"
        )
        subprocess.run(
            [
                *as_user,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ],
            **run,  # type: ignore[call-overload]
        )
        try:
            yield f"postgresql://af@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
    except subprocess.CalledProcessError as e:
        log = root / "log"
        detail = (e.stderr or b"").decode(errors="replace").strip()
        if log.exists():
            detail += "\n" + log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"PostgreSQL did not start: {detail}") from None
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    with postgres_server() as url:
        print(url, flush=True)
        input("running; Enter stops it\n")
