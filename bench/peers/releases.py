"""Contenders timed in processes of their own, and another release of a peer, in a virtual
environment of its own, made on first use.

The loop bench times each contender the same way: a script run in a fresh process that
imports only its own stack (af, pydantic-ai's latest release in the project's environment,
its fastest, 1.0.x, in ``.bench-venv/pydantic-ai-<version>/`` beside the checkout) and
times its runs itself, after a warm-up, each after a garbage collection, so that neither
process start nor imports are on the clock, and no contender's runs start from another's
heap (a garbage collection walks every object the process holds, and leaves the caches
the colder for it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["FASTEST", "OldPeer", "Separate"]

FASTEST = "1.0.10"
"""The pydantic-ai release the loop bench measures as the fastest (1.0.x: fifteen times
faster than 2.68 on this loop)."""

PINS = ("opentelemetry-api==1.37.0",)
"""What the release ran with: later opentelemetry-api dropped a module 1.0.x imports."""

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("pydantic_ai_loop.py")


class Separate:
    """A contender run in a process of its own: ``command`` is a script that takes
    ``--iterations N --runs K``, times ``K`` runs after a warm-up and prints their seconds
    as JSON (its last line); ``cwd`` the folder it runs in (None: this one)."""

    def __init__(self, command: list[str], cwd: Path | None = None) -> None:
        self.command = command
        self.cwd = cwd

    def runs(self, iterations: int, runs: int) -> list[float]:
        """Seconds of each of ``runs`` timed runs of the scripted loop, after a warm-up."""
        done = subprocess.run(
            [*self.command, "--iterations", str(iterations), "--runs", str(runs)],
            capture_output=True,
            text=True,
            cwd=self.cwd,
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            sys.exit(
                f"{' '.join(self.command)} (in {self.cwd or '.'}) timed no runs:\n{done.stderr}"
            )
        return [float(x) for x in json.loads(lines[-1])]

    @classmethod
    def af(cls, checkout: Path | None = None) -> Separate:
        """af's scripted loop (``bench._af_loop``), recording on; ``checkout``: of the
        af in that checkout (its ``bench`` and ``afcore`` are the ones imported there)."""
        return cls([sys.executable, "-m", "bench._af_loop"], cwd=checkout)

    @classmethod
    def latest(cls) -> Separate:
        """pydantic-ai as the project's environment holds it (its latest release)."""
        return cls([sys.executable, str(SCRIPT)])


class OldPeer(Separate):
    """pydantic-ai ``version`` in its own environment (made and installed on first use)."""

    def __init__(self, version: str = FASTEST) -> None:
        self.version = version
        self.home = ROOT / ".bench-venv" / f"pydantic-ai-{version}"
        self.python = self.home / "bin" / "python"
        if not self._installed():
            print(f"making {self.home.relative_to(ROOT)} (pydantic-ai-slim {version}), once")
            venv.create(self.home, with_pip=True, clear=True)
            wanted = [f"pydantic-ai-slim=={version}", *PINS]
            pip = [str(self.python), "-m", "pip", "install", "-q"]
            subprocess.run([*pip, *wanted], check=True)
            if not self._installed():
                sys.exit(f"pydantic-ai-slim {version} did not install in {self.home}")
        super().__init__([str(self.python), str(SCRIPT)])

    def _installed(self) -> bool:
        if not self.python.exists():
            return False
        probe = "import importlib.metadata as m; print(m.version('pydantic-ai-slim'))"
        done = subprocess.run([str(self.python), "-c", probe], capture_output=True, text=True)
        return done.returncode == 0 and done.stdout.strip() == self.version
