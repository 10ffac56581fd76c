"""How fast the read commands start: ``af --help``, ``af ls``, ``af show RUN`` and ``af why
RUN answer`` on a sample recording, against ``python -c "import typer, rich"``.

    python -m bench.startup [--runs 15] [--sample recordings/sample-trip.jsonl]

Each is a fresh process (the console script ``af``, as a person runs it, with its bytecode
cached as an installed package's is), output thrown away. Runs alternate between the
commands and the baseline, so that drift in the machine's speed falls on all of them; the
table shows each one's best run and median, its best CPU time, and the ratios of the bests to
the baseline's.
**Target: every ratio <= 2.5** (a read command imports only what it uses: not the loop, the
providers, jsonschema or Textual).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench._report import child_env, print_table, verdict

TARGET = 2.5
ROOT = Path(__file__).resolve().parent.parent


def _af() -> list[str]:
    found = shutil.which("af", path=str(Path(sys.executable).parent)) or shutil.which("af")
    if found is None:
        raise SystemExit("no af command: pip install -e . first")
    return [found]


def commands(sample: Path, folder: Path) -> dict[str, list[str]]:
    af = _af()
    return {
        'python -c "import typer, rich"': [sys.executable, "-c", "import typer, rich"],
        "af --help": [*af, "--help"],
        "af ls": [*af, "ls", str(folder)],
        "af show RUN": [*af, "show", str(sample)],
        "af why RUN answer": [*af, "why", str(sample), "answer"],
    }


# As a person runs af: with its modules' bytecode cached, as pip leaves site-packages (where
# typer and rich are).
ENV = child_env()


def _time(argv: list[str]) -> tuple[float, float]:
    """The run's wall time, and its CPU time (user and system: on a machine whose cores are
    shared, what waiting for one adds to the wall time is not the command's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--sample", type=Path, default=ROOT / "recordings" / "sample-trip.jsonl")
    args = parser.parse_args()
    runs = commands(args.sample, args.sample.parent)
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for argv in runs.values():
        _time(argv)  # warm the file cache and write the bytecode, off the clock
    for i in range(args.runs):
        order = list(runs.items())
        if i % 2:
            order.reverse()
        for name, argv in order:
            wall, cpu = _time(argv)
            times[name].append(wall)
            cpus[name].append(cpu)
    base_name = next(iter(runs))
    base, base_cpu = min(times[base_name]), min(cpus[base_name])
    rows = []
    worst = worst_cpu = 0.0
    for name, ts in times.items():
        ratio, ratio_cpu = min(ts) / base, min(cpus[name]) / base_cpu
        if name != base_name:
            worst, worst_cpu = max(worst, ratio), max(worst_cpu, ratio_cpu)
        rows.append(
            (
                name,
                f"{min(ts) * 1000:.0f}",
                f"{statistics.median(ts) * 1000:.0f}",
                f"{ratio:.2f}",
                f"{min(cpus[name]) * 1000:.0f}",
                f"{ratio_cpu:.2f}",
            )
        )
    print_table(
        f"read commands start-up, {args.runs} interleaved runs (ms; load {os.getloadavg()[0]:.1f})",
        ("command", "best", "median", "best / baseline", "best CPU", "CPU / baseline"),
        rows,
    )
    print(f"worst ratio {worst:.2f} (CPU {worst_cpu:.2f}); target <= {TARGET}: ", end="")
    print(verdict(worst <= TARGET))


if __name__ == "__main__":
    main()
