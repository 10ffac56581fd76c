"""Another release of a peer, in a virtual environment of its own, made on first use.

The loop bench runs pydantic-ai's latest release in the project's environment and its
fastest (1.0.x) in ``.bench-venv/pydantic-ai-<version>/`` beside the checkout, where the
peer's script runs in a process of its own; the timed runs are the script's, after its
warm-up, so neither process start nor imports are on the clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["FASTEST", "OldPeer"]

FASTEST = "1.0.10"
"""The pydantic-ai release the loop bench measures as the fastest (1.0.x: fifteen times
faster than 2.68 on this loop)."""

PINS = ("opentelemetry-api==1.37.0",)
"""What the release ran with: later opentelemetry-api dropped a module 1.0.x imports."""

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("pydantic_ai_loop.py")


class OldPeer:
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

    def _installed(self) -> bool:
        if not self.python.exists():
            return False
        probe = "import importlib.metadata as m; print(m.version('pydantic-ai-slim'))"
        done = subprocess.run([str(self.python), "-c", probe], capture_output=True, text=True)
        return done.returncode == 0 and done.stdout.strip() == self.version

    def runs(self, iterations: int, runs: int) -> list[float]:
        """Seconds of each of ``runs`` timed runs of the scripted loop, after a warm-up."""
        done = subprocess.run(
            [str(self.python), str(SCRIPT), "--iterations", str(iterations), "--runs", str(runs)],
            capture_output=True,
            text=True,
            check=True,
        )
        return [float(x) for x in json.loads(done.stdout.strip().splitlines()[-1])]
