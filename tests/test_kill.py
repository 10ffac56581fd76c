"""Runs killed at random points (SIGKILL, SIGINT, SIGTERM), from before the file exists to
after the run ended: every call a recording holds whole verifies, and no recording is left
empty (the file takes its name once its header is in it)."""

from __future__ import annotations

import os
import random
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from afcore import recording as rec
from afcore.errors import RecordingError
from tests.kills import Run, full_size

AGENT = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from afcore import Agent, RecordingConfig, define_tool, mock

    def work(args, ctx):
        time.sleep(0.004)  # a run of many writes, for kills to land all through it
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
def test_every_whole_call_verifies_after_a_kill_at_a_random_point(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    size = full_size(
        [sys.executable, str(script), str(tmp_path / "full")], tmp_path / "full", env=env
    )
    rng = random.Random(14)
    signals = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
    calls = 0
    for trial in range(24):
        runs = tmp_path / f"runs{trial}"
        # Points skewed to the start, where the file is made, and past the end (the run ends
        # before the signal); the first trial's lands before the interpreter is up.
        at = 0 if trial == 0 else int(size * rng.uniform(0.0, 1.2) ** 3)
        run = Run([sys.executable, str(script), str(runs)], runs, env=env)
        err = run.kill_at(at, signals[trial % len(signals)])
        assert "Segmentation fault" not in err, err
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


FLOW = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from afcore import Agent, RecordingConfig, define_tool, mock
    from afcore.flows import Sequence

    folder = Path(sys.argv[1])

    def stuck(args, ctx):
        (folder / "in-tool").write_text("")
        time.sleep(120)  # killed here
        return "never"

    tool = define_tool("stuck", "Hangs.", {"type": "object"}, stuck)
    first = Agent.create(provider=mock(reply="one"), model="m", name="first").build()
    hangs = (
        Agent.create(provider=mock(replies=[{"tool_calls": [{"id": "s", "name": "stuck",
                     "args": {}}]}, "two"]), model="m", name="hangs")
        .tool(tool)
        .build()
    )
    flow = (
        Sequence.create("cut", record=RecordingConfig(dir=folder / "runs"))
        .step("first", first)
        .step("hangs", hangs)
        .build()
    )
    flow.run("go")
    """
)


def test_a_flow_killed_mid_way_keeps_its_runs_beside_its_log_and_reads(tmp_path: Path) -> None:
    import subprocess
    import time

    from tests.kills import GUARD

    script = tmp_path / "flow.py"
    script.write_text(FLOW)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + GUARD  # a guard against a hang, not a measure
        while not (tmp_path / "in-tool").exists():
            assert process.poll() is None, "the flow ended before its tool ran"
            assert time.monotonic() < deadline, "the flow never reached its tool"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    (log,) = (tmp_path / "runs").glob("*.jsonl")
    flow = rec.open_flow(log)
    assert flow.end is None and flow.frames == {}  # not folded: the flow never ended
    first = flow.find("first")
    assert first is not None and first.end is not None
    file = flow.run_file(first)
    assert file is not None and file.parent == log.with_suffix("")  # the run beside the log
    with rec.open_recording(file) as r:
        assert rec.verify(r).ok
    report = rec.verify_flow(flow)
    said = " ".join(m for _, m in report.problems)
    assert not report.ok and "no flow_end" in said and "'hangs' started and never ended" in said
    assert report.calls == report.verified == 1
