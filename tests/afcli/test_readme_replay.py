"""The README's replay stories run as written: each shell block in its "Replay, diff, and
recordings as test fixtures" section is run with bash in a folder holding the samples, and
each output block shown after one is what it printed (its lines, in order)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Replay, diff, and recordings as test fixtures"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text[start:end])]


def test_the_section_has_the_three_stories() -> None:
    kinds = [kind for kind, _ in blocks()]
    assert kinds.count("bash") >= 5 and kinds.count("python") == 1


def test_the_stories_run_as_written(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not on this machine")
    (tmp_path / "recordings").mkdir()
    for sample in (ROOT / "recordings").glob("sample-*.jsonl"):
        shutil.copy(sample, tmp_path / "recordings" / sample.name)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AF_RECORDINGS": str(tmp_path / "recordings"),
        "COLUMNS": "80",
        "NO_COLOR": "1",
    }
    env.pop("PYTEST_ADDOPTS", None)
    found = blocks()
    ran = 0
    for i, (kind, text) in enumerate(found):
        if kind == "python":
            name = text.splitlines()[0].removeprefix("# ").strip()
            (tmp_path / name).write_text(text)
            continue
        if kind != "bash":
            continue
        # The Lens is a full-screen app: the tests drive it elsewhere.
        script = "\n".join(x for x in text.splitlines() if not x.startswith("af lens "))
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        ran += 1
        assert "Traceback" not in done.stderr and "error:" not in done.stderr, done.stderr
        if "pytest" in script:
            assert done.returncode == 0, done.stdout + done.stderr
            assert (tmp_path / "cassettes" / "test_trip").is_dir()
        shown = found[i + 1] if i + 1 < len(found) and found[i + 1][0] == "" else None
        if shown is None:
            continue
        printed = [x.rstrip() for x in done.stdout.splitlines()]
        at = 0
        for want in (x.rstrip() for x in shown[1].splitlines() if x.strip()):
            assert want in printed[at:], f"{want!r} not printed by:\n{script}\n{done.stdout}"
            at = printed.index(want, at) + 1
    assert ran >= 5
