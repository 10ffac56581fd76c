"""Ctrl-C at any moment of a read command's life, start-up included: af ends with a word and
exit code 130 (or was not yet or no longer listening), never with a traceback."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "recordings" / "sample-trip.jsonl"

AF = [sys.executable, "-X", "faulthandler", "-c", "from afcli import main; main()"]
ENV = {**os.environ, "COLUMNS": "120"}


def _through_af(said: str) -> bool:
    """Whether a traceback passes through af's code. One that does not is the interpreter's
    own start-up (site, the first line of the script) being interrupted before af runs."""
    return "Traceback" in said and ("afcli" in said or "afcore" in said)


@pytest.mark.slow
def test_ctrl_c_at_random_moments_of_start_up_never_shows_a_traceback() -> None:
    commands = [
        ["--help"],
        ["ls", str(SAMPLE.parent)],
        ["show", str(SAMPLE)],
        ["why", str(SAMPLE), "answer"],
    ]
    rng = random.Random(14)
    interrupted = 0
    for trial in range(48):
        argv = commands[trial % len(commands)]
        process = subprocess.Popen(
            [*AF, *argv], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        said = err.decode()
        assert not _through_af(said), (argv, said)
        assert "Fatal Python error: Segmentation fault" not in said, (argv, said)
        if "Traceback" in said:
            continue  # the interpreter's start-up, before af's first line
        # Not yet listening (killed by the signal), done before it came, or interrupted.
        assert process.returncode in (-signal.SIGINT, 0, 130), (argv, process.returncode, said)
        if process.returncode == 130:
            interrupted += 1
            # typer ends an interrupted parse or help quietly; af says so once it runs.
            assert said.strip() in ("", "error: interrupted"), said
    assert interrupted > 0, "no trial interrupted af while it ran: the test tested nothing"
