"""What a replay and a diff cost: replaying a 200-call recording with its tools' results
served, against the original run on the scripted provider and against pydantic-ai's run of
the same loop, at its latest release and at its fastest (in an environment of its own,
``bench.peers.releases``); and ``af diff`` of two 1,000-call recordings, against GNU diff
of the same two files.

Run: ``python -m bench.replay``. pydantic-ai has no replay: its figure is the plain loop a
replay re-runs, the bar af's loop is held to. GNU diff compares the files line by line,
knowing nothing of calls: the floor of reading two files and saying what differs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version

from afcore.replay import replay
from bench._af_loop import build_agent, recordings_dir, run_once
from bench._report import print_table, timed, verdict
from bench.peers import pydantic_ai_loop
from bench.peers.releases import FASTEST, OldPeer

REPLAY_TARGET = 1.5
"""A replay with --tools recorded takes at most 1.5x the original run."""
DIFF_TARGET = 2.0
"""af diff of two 1,000-call recordings, in seconds, wall clock."""


def bench_replay(n: int, rounds: int, fastest: str) -> None:
    old = OldPeer(fastest)
    times: dict[str, list[float]] = {"run": [], "replay": [], "peer": [], "old": []}
    with recordings_dir() as folder:
        agent = build_agent(n, record=folder / "runs")
        run_once(agent, n)
        original = agent.last_recording
        assert original is not None
        again = build_agent(n, record=folder / "x")
        peer = pydantic_ai_loop.build(n)

        def replayed() -> None:
            report = replay(original, again, tools="recorded", out=folder / "replays")
            if report.status != "identical" or report.calls != n + 1:
                raise RuntimeError(f"the replay went wrong: {report.summary()}")
            assert report.recording is not None
            report.recording.unlink()

        def ran() -> None:
            run_once(agent, n)
            path = agent.last_recording
            if path is not None and path != original:
                path.unlink()

        replayed()
        peer()
        for _ in range(rounds):
            # Interleaved, so that drift in the machine's speed falls on all alike.
            for _ in range(3):
                times["run"].append(timed(ran))
                times["replay"].append(timed(replayed))
            times["peer"].append(timed(peer))
            times["old"] += old.runs(n, 1)

    def ms(name: str, how: str) -> float:
        values = times[name]
        return (min(values) if how == "best" else statistics.median(values)) * 1000

    latest = f"pydantic-ai {version('pydantic-ai-slim')}"

    rows = [
        (
            label,
            f"{ms(key, 'best'):.1f}",
            f"{ms(key, 'median'):.1f}",
            f"{ms(key, 'best') / ms('run', 'best'):.2f}",
            f"{ms(key, 'best') / ms('peer', 'best'):.2f}",
            f"{ms(key, 'best') / ms('old', 'best'):.2f}",
        )
        for key, label in (
            ("run", "af, the original run (scripted provider)"),
            ("replay", "af replay --tools recorded"),
            ("peer", f"{latest}, the same loop (FunctionModel)"),
            ("old", f"pydantic-ai {fastest}, the same loop (FunctionModel)"),
        )
    ]
    print_table(
        f"replay: a {n}-iteration run ({n + 1} calls), ms per whole run, recording on",
        ("", "best", "median", "/ run", f"/ {latest}", f"/ pydantic-ai {fastest}"),
        rows,
    )
    ratio = ms("replay", "best") / ms("run", "best")
    print(f"target: replay / run <= {REPLAY_TARGET} (best): {verdict(ratio <= REPLAY_TARGET)}")


def bench_diff(n: int, rounds: int) -> None:
    af = [sys.executable, "-c", "from afcli.app import main; main()"]
    gnu = shutil.which("diff")
    with recordings_dir() as folder:
        # Two runs of one agent that part at the middle call: every later window differs.
        half = n // 2
        a = build_agent(n, record=folder / "a")
        b = build_agent(
            n, record=folder / "b", result=lambda k: f"ok {k}" + ("!" if k == half else "")
        )
        run_once(a, n)
        run_once(b, n)
        left, right = a.last_recording, b.last_recording
        assert left is not None and right is not None
        env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}

        def af_diff() -> None:
            done = subprocess.run(
                [*af, "diff", str(left), str(right)], env=env, capture_output=True
            )
            if done.returncode != 1 or b"differ" not in done.stdout:
                raise RuntimeError(f"af diff went wrong: {done.stderr.decode()[-400:]}")

        def af_same() -> None:
            done = subprocess.run([*af, "diff", str(left), str(left)], env=env, capture_output=True)
            if done.returncode != 0:
                raise RuntimeError(f"af diff went wrong: {done.stderr.decode()[-400:]}")

        def gnu_diff() -> None:
            assert gnu is not None
            subprocess.run([gnu, str(left), str(right)], capture_output=True, check=False)

        def af_help() -> None:
            subprocess.run([*af, "--version"], env=env, capture_output=True, check=True)

        runs: dict[str, Callable[[], None]] = {"af": af_diff, "same": af_same, "start": af_help}
        if gnu is not None:
            runs["gnu"] = gnu_diff
        times: dict[str, list[float]] = {name: [] for name in runs}
        for run in runs.values():
            run()  # warm the page cache
        for _ in range(rounds):
            for name, run in runs.items():
                times[name].append(timed(run))
        size = (left.stat().st_size + right.stat().st_size) / 1e6

    def s(name: str, how: str) -> float:
        values = times[name]
        return min(values) if how == "best" else statistics.median(values)

    labels = {
        "af": f"af diff, parted at call {half}",
        "same": "af diff, a file and itself",
        "start": "af --version (Python and af starting)",
        "gnu": "GNU diff, the same two files",
    }
    rows = [
        (labels[key], f"{s(key, 'best'):.2f}", f"{s(key, 'median'):.2f}")
        + ((f"{s(key, 'best') / s('gnu', 'best'):.1f}",) if "gnu" in times else ())
        for key in times
    ]
    print_table(
        f"diff: two {n}-iteration recordings ({n + 1} calls each, {size:.1f} MB together), "
        "seconds, wall clock",
        ("", "best", "median", *(("/ GNU diff",) if "gnu" in times else ())),
        rows,
    )
    best = s("af", "best")
    print(f"target: af diff <= {DIFF_TARGET} s (best): {verdict(best <= DIFF_TARGET)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="of the replayed run")
    parser.add_argument("--diff-iterations", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", choices=("replay", "diff"), default=None)
    parser.add_argument("--fastest", default=FASTEST, help="the pydantic-ai release to compare")
    args = parser.parse_args()
    if args.only != "diff":
        bench_replay(args.iterations, args.rounds, args.fastest)
    if args.only is None:
        print()
    if args.only != "replay":
        bench_diff(args.diff_iterations, args.rounds)


if __name__ == "__main__":
    main()
