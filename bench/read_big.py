"""``af show`` and ``af verify`` on big recordings, against a bare orjson pass over the same
file's lines: time and peak memory.

    python -m bench.read_big [--mb 300] [--iterations 2500] [--runs 3] [--only NAME] [--folder DIR]

**The files**, written once into a cache folder and reused by later runs:

- ``prose`` and ``short-lines``: ``bench/big_recording.py`` at ``--mb`` (a real af agent on a
  scripted model, under a window strategy: 64 KB tool results folded by a summarizer, or
  five 5 KB results a step under a sliding window);
- ``long-results``: the scripted af loop of ``bench/_af_loop.py`` for ``--iterations``
  iterations, each tool result 48 KB of fresh text, every call's window the whole history
  (about 127 MB at 2,500): the shape that made verification quadratic.

**What is timed.** Each command is a fresh process (the console script ``af``), its output
sent to ``/dev/null`` as a pipe would take it; the peer is a fresh process that parses every
line of the file with ``orjson.loads`` and nothing else. af's sources are compiled before the
first run, and the runs read that bytecode whatever the caller's environment says
(``PYTHONDONTWRITEBYTECODE`` is unset for them), so that no run pays compiling them. Runs
alternate between the three, so that drift in the machine's speed falls on all of them; the
table shows each one's best time, its peak resident memory (``ru_maxrss`` of the process),
and the ratio of its best to the peer's. **Targets: af show and af verify each <= 3x the
orjson pass, and <= 250 MB.**
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from bench._report import child_env, print_table, verdict

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 3.0
TARGET_MB = 250
PEER = """
import sys, orjson
with open(sys.argv[1], "rb") as f:
    for line in f:
        orjson.loads(line)
"""


def _write_long(path: Path, iterations: int) -> None:
    from bench._af_loop import build_agent, run_once
    from bench.recording_size import fresh_text

    agent = build_agent(iterations, record=path.parent, result=partial(fresh_text, size=48 * 1024))
    run_once(agent, iterations)
    assert agent.last_recording is not None
    agent.last_recording.replace(path)


def files(
    folder: Path, mb: float, iterations: int, only: list[str] | None = None
) -> dict[str, Path]:
    """The files, each written first if the cache folder lacks it (only those in ``only``)."""
    out = {}
    for shape in ("prose", "short-lines"):
        if only and shape not in only:
            continue
        path = folder / f"{shape}-{mb:g}mb.jsonl"
        if not path.exists():
            print(f"writing a {mb:g} MB recording ({shape}) to {path} ...", flush=True)
            # In a process of its own: the agent that writes it holds its history.
            command = [sys.executable, "-m", "bench.big_recording", "--mb", f"{mb:g}"]
            command += ["--shape", shape, "--out", str(folder), "--run-id", path.stem]
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        out[shape] = path
    if only and "long-results" not in only:
        return out
    path = folder / f"long-results-{iterations}.jsonl"
    if not path.exists():
        print(f"writing a {iterations:,}-iteration recording to {path} ...", flush=True)
        command = [sys.executable, "-m", "bench.read_big", "--write-long", str(path)]
        command += ["--iterations", str(iterations)]
        subprocess.run(command, cwd=ROOT, check=True)
    out["long-results"] = path
    return out


CHILD_ENV = child_env()


def _compile() -> None:
    """Compile af's sources once, before anything is timed."""
    import compileall

    for package in ("afcore", "afcli", "tui"):
        compileall.compile_dir(ROOT / package, quiet=1)


def _run(argv: list[str]) -> tuple[float, float]:
    """Seconds and peak resident MB of one process."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, env=CHILD_ENV)
        _, status, usage = os.wait4(process.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {process.stderr.read().decode()[-500:]}")
    process.stderr.close()
    return took, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300, help="the two shapes' size")
    parser.add_argument("--iterations", type=int, default=2500, help="of the long-results run")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command per file")
    parser.add_argument("--only", action="append", help="only this file (repeatable)")
    parser.add_argument(
        "--folder", type=Path, default=Path(tempfile.gettempdir()) / "af-bench-read"
    )
    parser.add_argument("--write-long", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_long is not None:
        _write_long(args.write_long, args.iterations)
        return
    args.folder.mkdir(parents=True, exist_ok=True)
    _compile()
    said = "PYTHONDONTWRITEBYTECODE" in os.environ
    unset = " (PYTHONDONTWRITEBYTECODE unset for them)" if said else ""
    print(f"af's sources compiled first: the timed runs read their bytecode{unset}", flush=True)
    af = str(Path(sys.executable).parent / "af")
    rows = []
    met = True
    for name, path in files(args.folder, args.mb, args.iterations, args.only).items():
        if args.only and name not in args.only:
            continue
        commands = {
            "orjson pass": [sys.executable, "-c", PEER, str(path)],
            "af show": [af, "show", str(path)],
            "af verify": [af, "verify", str(path)],
        }
        best: dict[str, tuple[float, float]] = {}
        for i in range(args.runs):
            order = list(commands.items())
            if i % 2:
                order.reverse()
            for label, argv in order:
                took, mb = _run(argv)
                was = best.get(label)
                best[label] = (min(took, was[0]), max(mb, was[1])) if was else (took, mb)
        peer = best["orjson pass"][0]
        size = path.stat().st_size / 1024 / 1024
        for label, (took, mb) in best.items():
            ratio = took / peer
            if label != "orjson pass":
                met = met and ratio <= TARGET_RATIO and mb <= TARGET_MB
            rows.append(
                (f"{name} ({size:,.0f} MB)", label, f"{took:.2f}", f"{mb:.0f}", f"{ratio:.2f}")
            )
    print_table(
        f"reading big recordings, best of {args.runs} interleaved runs",
        ("file", "command", "s", "peak MB", "x orjson pass"),
        rows,
    )
    print(
        f"targets: af show and af verify <= {TARGET_RATIO:g}x the orjson pass and "
        f"<= {TARGET_MB} MB: {verdict(met)}"
    )


if __name__ == "__main__":
    main()
