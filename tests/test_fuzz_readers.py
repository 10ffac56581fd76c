"""Mutated recordings through every reader: the library's (open, verify, the read model's
run, call and timeline views, af why) and the commands (show, show --call, verify, why).
Whatever the file holds, nothing but af's own errors comes out, and memory follows the file.

The mutations are what damaged or hostile files hold: bytes that are not UTF-8, control
characters, NaN and infinities, nesting past any parser's depth, numbers far past anything
written (``"call": 99999999``, beyond 64 bits), fields of the wrong type, lines swapped,
lost, doubled or cut short."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from afcli.app import app
from afcore.errors import AfError
from afcore.readmodel import Timeline, build, call_detail, call_view, run_view
from afcore.recording import open_recording, verify
from afcore.why import why

ROOT = Path(__file__).resolve().parents[1]
# The samples the repository ships (runs a developer made land in recordings/ too).
SAMPLES = {
    p.name: p.read_bytes().split(b"\n")
    for pattern in ("sample-*.jsonl", "flow-*.jsonl")
    for p in (ROOT / "recordings").glob(pattern)
}
assert SAMPLES, "no sample recordings in recordings/"
EXAMPLES = int(os.environ.get("AF_FUZZ_EXAMPLES", "60"))

ODD_VALUES: list[Any] = [
    None,
    True,
    1.5,
    -1,
    0,
    99_999_999,
    100_000_001,
    "",
    "x",
    [],
    {},
    [1, 2],
    {"t": "commit"},
    "message:99999999",
]
RAW_VALUES = [b"Infinity", b"NaN", b"-Infinity", b"1e400", str(2**70).encode(), b"9" * 5000]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            found += _paths(v, (*at, i))
    return found


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    value[path[0]] = _set(value[path[0]], path[1:], new)
    return value


def _mutate(lines: list[bytes], rng: random.Random, how: str) -> list[bytes]:
    lines = list(lines)
    i = rng.randrange(len(lines) - 1)  # the file ends with a newline: the last one is empty
    line = lines[i]
    if how == "field":
        data = orjson.loads(line)
        path = rng.choice(_paths(data))
        lines[i] = orjson.dumps(_set(data, path, rng.choice(ODD_VALUES)))
    elif how == "raw":
        data = orjson.loads(line)
        path = rng.choice(_paths(data)[1:] or [()])
        marker = "\x00marker\x00"
        text = orjson.dumps(_set(data, path, marker)) if path else b'"\\u0000marker\\u0000"'
        lines[i] = text.replace(b'"\\u0000marker\\u0000"', rng.choice(RAW_VALUES))
    elif how == "bytes":
        at = rng.randrange(len(line) + 1)
        odd = rng.choice([b"\xff", b"\xed\xa0\x80", b"\x01", b"\x1b[2J", b"\x00", b"\\ud800"])
        lines[i] = line[:at] + odd + line[at:]
    elif how == "deep":
        depth = rng.choice([300, 1100, 5000])
        lines[i] = b'{"t":"blob","id":"' + b"0" * 64 + b'","value":' + b"[" * depth
        lines[i] += b"]" * depth + b"}"
    elif how == "swap":
        j = rng.randrange(len(lines) - 1)
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "drop":
        del lines[i]
    elif how == "double":
        lines.insert(i, line)
    elif how == "cut":
        lines[i] = line[: rng.randrange(len(line) + 1)]
    elif how == "tail":
        lines[-1] = line[: rng.randrange(len(line) + 1)]  # a torn last line
    return lines


def _library(path: Path) -> None:
    try:
        rec = open_recording(path)
    except AfError:
        return
    with rec:
        verify(rec)
        for _ in run_view(rec):
            pass
        for n in rec.call_numbers[:6]:
            try:
                call_detail(rec, n)
            except AfError:
                pass
        timeline = Timeline()
        for _ in build(rec, timeline):
            pass
        for mark in timeline.marks[:6]:
            try:
                call_view(rec, timeline, mark.n)
            except AfError:
                pass
        for key in ("answer", "message:3", "call:2"):
            try:
                why(rec, key)
            except AfError:
                pass


def _commands(path: Path) -> None:
    runner = CliRunner()
    for args in (
        ["show", path],
        ["show", path, "--call", "2"],
        ["show", path, "--json"],
        ["verify", path],
        ["why", path, "answer"],
    ):
        result = runner.invoke(app, [str(a) for a in args])
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"af {args[0]} raised {result.exception!r}")
        assert "failed unexpectedly" not in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr, (args, result.stderr)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sample=st.sampled_from(sorted(SAMPLES)),
    mutations=st.lists(
        st.sampled_from(
            ["field", "field", "raw", "bytes", "deep", "swap", "drop", "double", "cut", "tail"]
        ),
        min_size=1,
        max_size=3,
    ),
    seed=st.integers(0, 2**32),
)
def test_a_mutated_recording_gives_only_afs_own_errors(
    tmp_path_factory: pytest.TempPathFactory, sample: str, mutations: list[str], seed: int
) -> None:
    rng = random.Random(seed)
    lines = SAMPLES[sample]
    for how in mutations:
        lines = _mutate(lines, rng, how)
    path = tmp_path_factory.mktemp("fuzz") / sample
    body = b"\n".join(lines)
    path.write_bytes(body)
    tracemalloc.start()
    try:
        _library(path)
        _commands(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Memory follows the file (a few hundred KB here), never a number written in it.
    assert peak < 64 * 1024 * 1024 + 200 * len(body), f"{peak / 1e6:.0f} MB for {mutations}"
