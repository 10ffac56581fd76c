"""Ctrl-C at any moment of a read command's life, start-up included: af ends with a word and
exit code 130 (or was not yet or no longer listening), never with a traceback.

The moments are points in the process's own progress, not times: ``-X importtime`` writes a
line as each module's import ends, and the Ctrl-C comes after the n-th. A moment timed in
seconds lands, on a loaded machine, in the interpreter's start-up every time."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "recordings" / "sample-trip.jsonl"

AF = [
    sys.executable,
    *("-X", "faulthandler", "-X", "importtime"),
    *("-c", "from afcli import main; main()"),
]
ENV = {**os.environ, "COLUMNS": "120"}
GUARD = 60
"""Seconds a command may take before it is called hung: a guard, not a measure."""


def _said(err: bytes) -> str:
    """What the process wrote to stderr, less the import lines."""
    lines = err.decode().splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("import time:"))


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
    imports = {}
    for argv in commands:  # how many imports each command's life holds, start-up's included
        ran = subprocess.run([*AF, *argv], env=ENV, capture_output=True, timeout=GUARD)
        assert ran.returncode == 0, ran.stderr.decode()
        imports[argv[0]] = ran.stderr.count(b"import time:")
    rng = random.Random(14)
    interrupted = 0
    for trial in range(48):
        argv = commands[trial % len(commands)]
        # Unbuffered: a line read ahead into a reader's buffer would be lost to communicate(),
        # which reads the pipe itself, and the rest of that line would read as af's words.
        process = subprocess.Popen(
            [*AF, *argv], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0
        )
        assert process.stderr is not None
        head = b""
        for _ in range(rng.randrange(imports[argv[0]] + 10)):  # past the last, after it ended
            line = process.stderr.readline()
            if not line:
                break
            head += line
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=GUARD)
        said = _said(head + err)
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
