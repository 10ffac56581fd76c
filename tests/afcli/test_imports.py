"""`af --help` and `af ls` stay light: they import neither the Lens's UI toolkit nor a
vendor SDK. The check runs in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# A finder that notes every attempt to import a watched package, even one that fails
# because the package is not installed: the check holds whether or not it is.
PROBE = r"""
import json, sys
from importlib.abc import MetaPathFinder

WATCHED = {"textual", "anthropic", "openai", "tui"}
attempts = []

class Spy(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in WATCHED:
            attempts.append(name)
        return None

sys.meta_path.insert(0, Spy())

from typer.testing import CliRunner
from afcli.app import app

report = {}
result = CliRunner().invoke(app, ["--help"])
report["help"] = {
    "code": result.exit_code,
    "attempts": list(attempts),
    "heavy": sorted(m for m in ("afcore.loop", "pydantic", "jsonschema") if m in sys.modules),
}
result = CliRunner().invoke(app, ["ls", sys.argv[1], "--json"])
report["ls"] = {"code": result.exit_code, "out": result.stdout, "attempts": list(attempts)}
print(json.dumps(report))
"""


def test_help_and_ls_import_neither_textual_nor_anthropic(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["help"]["code"] == 0
    assert report["help"]["attempts"] == []
    # --help does not even load the library: only the command definitions.
    assert report["help"]["heavy"] == []
    assert report["ls"]["code"] == 0 and json.loads(report["ls"]["out"]) == []
    assert report["ls"]["attempts"] == []
