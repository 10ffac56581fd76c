"""Runs killed at random moments (SIGKILL, SIGINT, SIGTERM), from before the file exists to
after the run ended: every call a recording holds whole verifies, and no recording is left
empty (the file takes its name once its header is in it)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from afcore import recording as rec
from afcore.errors import RecordingError

AGENT = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from afcore import Agent, RecordingConfig, define_tool, mock

    def work(args, ctx):
        time.sleep(0.004)  # a run long enough for kills to land all through it
        return f"{args['i']} " + "x" * 3000

    tool = define_tool("work", "Works.", {"type": "object"}, work)
    replies = [{"tool_calls": [{"id": f"c{i}", "name": "work", "args": {"i": i}}]}
               for i in range(200)]
    agent = (
        Agent.create(provider=mock(replies=[*replies, "done"]), model="m",
                     max_iterations=250, record=RecordingConfig(dir=Path(sys.argv[1])))
        .tool(tool)
        .build()
    )
    try:
        agent.run("go")
    except KeyboardInterrupt:
        pass
    """
)


@pytest.mark.slow
def test_every_whole_call_verifies_after_a_kill_at_a_random_moment(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    rng = random.Random(14)
    signals = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
    calls = 0
    for trial in range(24):
        runs = tmp_path / f"runs{trial}"
        process = subprocess.Popen(
            [sys.executable, str(script), str(runs)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        time.sleep(rng.uniform(0.0, 1.5))
        process.send_signal(signals[trial % len(signals)])
        _, err = process.communicate(timeout=120)
        assert "Segmentation fault" not in err.decode(), err.decode()
        for path in runs.glob("*.jsonl") if runs.exists() else ():
            assert path.stat().st_size > 0, f"an empty recording was left: {path.name}"
            try:
                opened = rec.open_recording(path)
            except RecordingError as e:
                pytest.fail(f"trial {trial}: {e}")
            with opened:
                report = rec.verify(opened)
                assert report.verified == report.calls, (trial, report.problems)
                calls += report.calls
    assert calls > 0, "no trial got as far as a call: the test tested nothing"
