"""Scratch folders of copies a process reads (bundles unpacked, a flow's runs unfolded): a
process that did not end cleanly leaves its folder, and the next one removes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from afcore.recording._scratch import scratch_folder

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process ids are asked on POSIX")


def test_a_folder_left_by_a_killed_process_is_removed_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # A process that reads a flow's runs, killed before it can clean up after itself.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, tempfile, time; tempfile.tempdir = sys.argv[1];"
            "from afcore.recording._scratch import scratch_folder;"
            "(scratch_folder('af-runs-') / 'run.jsonl').write_text('{}');"
            "print('ready', flush=True); time.sleep(60)",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    with child:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        child.send_signal(signal.SIGTERM)
    left = list(tmp_path.glob(f"af-runs-{child.pid}-*"))
    assert len(left) == 1 and (left[0] / "run.jsonl").exists()
    # A live process's folder, another prefix's, and names that are not a process's stay.
    live = tmp_path / f"af-runs-{os.getppid()}-live"
    other = tmp_path / f"af-bundle-{child.pid}-x"
    odd = [tmp_path / "af-runs-notapid-x", tmp_path / "af-runs-x"]
    for folder in (live, other, *odd):
        folder.mkdir()
    made = scratch_folder("af-runs-")
    assert made.name.startswith(f"af-runs-{os.getpid()}-") and made.is_dir()
    assert not left[0].exists()
    assert live.exists() and other.exists() and all(f.exists() for f in odd)
