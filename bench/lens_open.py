"""Opening a 300 MB recording: the Lens (``af lens``) against Toolong, time to the first call
on screen, and the Lens's peak memory.

    python -m bench.lens_open [--mb 300] [--runs 3] [--timeout 60] [--shape S] [--folder DIR]

**The files.** Two recordings of the given size are written by ``bench/big_recording.py``
(a real af agent on a scripted model, so every line is what af writes) into a cache folder,
and reused by later runs: ``prose`` (about 3,000 calls; 64 KB tool results folded by
``summarize_oldest``, so long lines and folds) and ``short-lines`` (about 9,000 calls; every
line under 10 KB). Both shapes are reported: Toolong cuts lines at 10,000 characters, and a
cut JSON line then goes through its regular expressions for web server logs, which take
minutes on a line of prose; on ``short-lines`` it parses every line as JSON and is at its
best.

**The peer.** Toolong 1.5.0 pins ``textual>=0.58,<0.59``; the Lens needs Textual 8, so the
two cannot share an environment. The first run creates a virtual environment for Toolong in
the cache folder (``python -m venv``, then ``pip install toolong==1.5.0``) and later runs
reuse it.

**What is timed.** Each app runs headless in Textual's test harness (``App.run_test``) at
120x40, in a process of its own (``bench/peers/lens_open.py``, ``bench/peers/toolong_open.py``),
started fresh for every run: the clock starts when the probe module starts, before Textual
and the app are imported, and stops when the screen (rendered to text every 5 ms) shows a
call: for the Lens, its position line ``call 1/`` and the first call's user message; for
Toolong, a line holding a call record (Toolong opens at the end of a file, so the last call).
Runs alternate between the two and which goes first; the table shows the best run and the
median. A peer run that shows no call within ``--timeout`` seconds is stopped and reported so.

**Also measured, for the Lens:** when the background index of the whole file is done, the
time from End to the last call on screen, the median time from a step back (←) to its call on
screen over twenty steps (the actions the keys are bound to, called directly: Textual's test
pilot adds some 40 ms of its own to each key press), and the process's peak resident memory
(Linux's ``VmHWM``; the Lens hands the pages of the file it has read back to the system, so
this is its own memory).

**Targets:** first call, Lens / Toolong <= 1.0 (best runs, each shape); the Lens's peak
memory <= 200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._report import print_table, verdict
from bench.big_recording import QUESTION, SHAPES

ROOT = Path(__file__).resolve().parent.parent
PEER = "toolong==1.5.0"
TARGET_RATIO = 1.0
TARGET_MB = 200
TARGET_STEP = 1.0
"""Seconds from a step back (←) to its call on screen, at most (the median of twenty)."""


def _files(folder: Path, mb: float, shapes: list[str]) -> dict[str, Path]:
    out = {}
    for shape in shapes:
        path = folder / f"{shape}-{mb:g}mb.jsonl"
        if not path.exists():
            print(f"writing a {mb:g} MB recording ({shape}) to {path} ...", flush=True)
            # In a process of its own: the agent that writes it holds its history.
            command = [sys.executable, "-m", "bench.big_recording", "--mb", f"{mb:g}"]
            command += ["--shape", shape, "--out", str(folder), "--run-id", path.stem]
            subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        out[shape] = path
    return out


def _peer_python(folder: Path) -> Path:
    """Toolong's own virtual environment, made on first use."""
    venv = folder / "toolong-venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if python.exists() and _run([str(python), "-c", "import toolong"], 60).returncode == 0:
        return python
    print(f"creating a virtual environment for {PEER} in {venv} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", PEER], check=True)
    return python


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


def _probe(command: list[str], timeout: float) -> dict[str, Any]:
    try:
        done = _run(command, timeout + 30)
    except subprocess.TimeoutExpired:
        return {"first_call": None}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def measure(path: Path, peer: Path, runs: int, timeout: float) -> dict[str, list[dict[str, Any]]]:
    lens = [sys.executable, "-m", "bench.peers.lens_open", str(path), QUESTION, str(timeout)]
    toolong = [str(peer), "-m", "bench.peers.toolong_open", str(path), str(timeout)]
    out: dict[str, list[dict[str, Any]]] = {"lens": [], "toolong": []}
    for i in range(runs):
        order = [("lens", lens), ("toolong", toolong)]
        for name, command in order if i % 2 == 0 else reversed(order):
            out[name].append(_probe(command, timeout))
    return out


def _seconds(values: list[float | None], how: str, timeout: float) -> str:
    shown = [v for v in values if v is not None]
    if not shown:
        return f"> {timeout:g} s"
    pick = min(shown) if how == "best" else statistics.median(shown)
    return f"{pick:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300, help="the files' size (default 300)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each app per file")
    parser.add_argument("--timeout", type=float, default=60, help="seconds a run may take")
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), action="append", help="only this file (repeatable)"
    )
    parser.add_argument(
        "--folder",
        type=Path,
        default=Path(tempfile.gettempdir()) / "af-bench-lens",
        help="where the files and Toolong's environment are kept",
    )
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    files = _files(args.folder, args.mb, args.shape or list(SHAPES))
    peer = _peer_python(args.folder)
    rows = []
    notes = []
    peaks: list[float] = []
    steps: list[float] = []
    met = True
    for shape, path in files.items():
        found = measure(path, peer, args.runs, args.timeout)
        lens = [r["first_call"] for r in found["lens"]]
        peer_times = [r["first_call"] for r in found["toolong"]]
        size = path.stat().st_size / 1024 / 1024
        best_lens = min((t for t in lens if t is not None), default=None)
        best_peer = min((t for t in peer_times if t is not None), default=None)
        if best_lens is None:
            ratio, ok = "-", False
        elif best_peer is None:
            ratio, ok = f"< {best_lens / args.timeout:.3f}", True
        else:
            ratio, ok = f"{best_lens / best_peer:.2f}", best_lens / best_peer <= TARGET_RATIO
        met = met and ok
        rows.append(
            (
                f"{shape} ({size:,.0f} MB)",
                _seconds(lens, "best", args.timeout),
                _seconds(lens, "median", args.timeout),
                _seconds(peer_times, "best", args.timeout),
                _seconds(peer_times, "median", args.timeout),
                ratio,
            )
        )
        done = [r for r in found["lens"] if r.get("first_call") is not None]
        peaks += [r["peak_rss_mb"] for r in done]
        steps += [r["per_step"] for r in done]
        if done:
            r = min(done, key=lambda r: r["first_call"])
            notes.append(
                (
                    f"{shape}: {r['calls']:,} calls",
                    f"{r['indexed']:.2f} s",
                    f"{r['to_last'] * 1000:.0f} ms",
                    f"{r['per_step'] * 1000:.0f} ms",
                    f"{max(x['peak_rss_mb'] for x in done):.0f} MB",
                )
            )
    print_table(
        f"first call on screen, {args.runs} runs of each (target: Lens / Toolong <= "
        f"{TARGET_RATIO:g})",
        ("file", "Lens best", "median", "Toolong best", "median", "ratio"),
        rows,
    )
    print(f"first call: {verdict(met)}")
    print()
    print_table(
        f"the Lens after the first call (targets: peak memory <= {TARGET_MB} MB, a step back "
        f"<= {TARGET_STEP:g} s)",
        ("file", "all indexed at", "End to last call", "per step back", "peak memory"),
        notes,
    )
    print(f"memory: {verdict(bool(peaks) and max(peaks) <= TARGET_MB)}")
    print(f"steps: {verdict(bool(steps) and max(steps) <= TARGET_STEP)}")


if __name__ == "__main__":
    main()
