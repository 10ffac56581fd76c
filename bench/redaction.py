"""The secret screen: what redacting costs per value and per run, before and after.

Times ``redactor.redact(value)`` (serialize, screen, and walk when the screen finds a
candidate) for values a run writes at every iteration, and ``policy.compile(...)``, the
set-up every run pays. The figures before are those of the redactor of another revision
(``--baseline``, by default the last one before ``afcore.secrets``), loaded from git and
timed in the same process, alternating with today's. ``--engines`` times the matchers the
screen could be built on, over the same bytes. Run: ``python -m bench.redaction``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import re
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from afcore.secrets import Redaction
from bench._report import print_table

BASELINE = "1541ba0"
"""The last revision whose redactor lived in afcore/recording/_redaction.py alone."""

_WORDS = (
    "the quick brown fox jumps over a lazy dog while agents call tools and read results "
    "résumé naïve Zürich 東京 weather forecast hotel booking flight itinerary refund policy"
).split()


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def values(rng: random.Random) -> dict[str, Any]:
    """Values as the recorder screens them: a message, a commit's write, a tool result."""
    return {
        "tool result, 80 B": {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "echo",
            "content": _text(rng, 80),
        },
        "assistant tool call": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look that up."},
                {"type": "tool_use", "id": "t1", "name": "search", "input": {"q": "Paris"}},
            ],
        },
        "reply record": {
            "t": "reply",
            "seq": 12,
            "rsid": "call-llm#9",
            "iter": 4,
            "call": 4,
            "writes": [{"key": "message:9", "ref": "a" * 64}],
            "stop_reason": "tool_use",
            "tool_calls": [{"id": "t4", "name": "echo", "k": 4}],
            "usage": {"input_tokens": 812, "output_tokens": 31, "cache_read_tokens": 0},
            "model": "claude-sonnet-4-5",
            "ms": 0.41,
        },
        "tool result, 1 KB": {
            "role": "tool",
            "tool_call_id": "call_2",
            "name": "fetch",
            "content": _text(rng, 1000),
        },
        "tool result, 64 KB": {
            "role": "tool",
            "tool_call_id": "call_3",
            "name": "fetch",
            "content": _text(rng, 64_000),
        },
        "64 KB of hex": {
            "role": "tool",
            "tool_call_id": "call_4",
            "name": "dump",
            "content": rng.randbytes(32_000).hex(),
        },
        "1 KB holding a key": {
            "role": "tool",
            "tool_call_id": "call_5",
            "name": "env",
            "content": _text(rng, 500)
            + " OPENAI_API_KEY=sk-"
            + "".join(rng.choice(string.ascii_letters) for _ in range(48))
            + " "
            + _text(rng, 450),
        },
    }


def load_baseline(rev: str) -> ModuleType | None:
    """The redaction module of revision ``rev``, or None when git cannot show it."""
    root = Path(__file__).resolve().parent.parent
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:afcore/recording/_redaction.py"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    folder = Path(tempfile.mkdtemp(prefix="af-bench-redaction-"))
    path = folder / "baseline_redaction.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("baseline_redaction", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_redaction"] = module
    spec.loader.exec_module(module)
    return module


def per_call(fn: Callable[[], Any], number: int) -> float:
    """Seconds per call of ``fn``, over ``number`` calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def measure(
    makers: dict[str, Callable[[], Any]], vals: dict[str, Any], rounds: int
) -> dict[tuple[str, str], list[float]]:
    """Per value and per redactor, seconds per redact(), rounds alternating the order."""
    times: dict[tuple[str, str], list[float]] = {}
    redactors = {name: make() for name, make in makers.items()}
    for r in range(rounds):
        order = list(redactors.items())
        if r % 2:
            order.reverse()
        for label, value in vals.items():
            number = 40 if "64 KB" in label else 2000
            for name, redactor in order:
                redactor.redact(value)  # warm, and the learning a secret teaches
                times.setdefault((label, name), []).append(
                    per_call(lambda redactor=redactor, value=value: redactor.redact(value), number)
                )
    return times


def engines(vals: dict[str, Any], rounds: int) -> list[tuple[str, ...]]:
    """The same screen on other matchers: Python's re (the whole rule set in one
    alternation), RE2 (what afcore.secrets uses), and Aho-Corasick over the rules' literal
    anchors (a lower bound: each hit would still need its rule confirmed)."""
    import re2

    from afcore.secrets._matcher import Matcher
    from afcore.secrets._rules import DEFAULT_FIELDS, norm_key

    fields = tuple(sorted({norm_key(f) for f in DEFAULT_FIELDS}))
    literals = [
        (f"env:V{i}", "".join(random.choices(string.ascii_letters, k=40))) for i in range(6)
    ]
    ours = Matcher(literals, fields=fields)
    pattern = ours.screen.pattern
    try:
        python_re: Any = re.compile(pattern)
    except re.error:
        python_re = None
    anchors = [v.encode() for _, v in literals] + [
        a.encode()
        for a in (
            "sk-", "aiza", "ya29.", "akia", "asia", "gh", "github_pat_", "gl", "xox", "xapp-",
            "hooks.slack.com", "_live_", "_test_", "whsec_", "hf_", "npm_", "pypi-", "sg.",
            "gsk_", "xai-", "private key", "eyj", "bearer", "basic", "://", *fields, "key",
        )
    ]  # fmt: skip
    contenders: dict[str, Callable[[bytes], Any]] = {
        "RE2, one expression": lambda raw: ours.screen.search(raw),
    }
    if python_re is not None:
        contenders["Python re, one expression"] = lambda raw: python_re.search(raw)
    try:
        import ahocorasick

        automaton = ahocorasick.Automaton()
        for i, a in enumerate(anchors):
            automaton.add_word(a.decode(), i)
        automaton.make_automaton()
        contenders["pyahocorasick, anchors"] = lambda raw: next(
            automaton.iter(raw.lower().decode()), None
        )
    except ImportError:
        pass
    try:
        import ahocorasick_rs

        rs = ahocorasick_rs.BytesAhoCorasick(anchors)
        contenders["ahocorasick_rs, anchors"] = lambda raw: rs.find_matches_as_indexes(raw.lower())
    except ImportError:
        pass
    del re2
    rows = []
    raws = {k: orjson.dumps(v) for k, v in vals.items() if "key" not in k}
    for name, fn in contenders.items():
        cells = [name]
        for label, raw in raws.items():
            number = 20 if "64 KB" in label else 2000
            if name.startswith("Python re") and "64 KB" in label:
                number = 3
            best = min(per_call(lambda fn=fn, raw=raw: fn(raw), number) for _ in range(rounds))
            cells.append(f"{best * 1e6:.1f}")
        rows.append(tuple(cells))
    return [("matcher", *raws), *rows]


class _BaselinePolicy:
    """The baseline's policy where today's recorder expects one: the redactor it compiles
    gets the two names today's loop calls (``learn``, ``pattern_names``) as no-ops."""

    def __init__(self, module: ModuleType) -> None:
        self._policy = module.Redaction()

    def compile(self, provider_secrets: Any = ()) -> Any:
        redactor = self._policy.compile(provider_secrets)
        redactor.learn = lambda value: None
        redactor.pattern_names = [name for name, _ in redactor.policy.patterns]
        return redactor


def loop(baseline: ModuleType | None, rounds: int) -> list[tuple[str, ...]]:
    """The scripted loop (bench/_af_loop.py), recording on, with short and with 1 KB tool
    results: us per iteration with today's redactor and with the baseline's in its place."""
    from afcore.recording import RecordingConfig
    from bench._af_loop import build_agent, recordings_dir, run_once, timed_run

    n = 200
    rng = random.Random(3)
    kilobyte = [_text(rng, 1000) for _ in range(64)]
    results: dict[str, Callable[[int], str]] = {
        "short results": lambda i: f"ok {i}",
        "1 KB results": lambda i: f"{i} {kilobyte[i % 64]}",
    }
    rows = []
    with recordings_dir() as folder:
        for label, result in results.items():
            agents = {"now": build_agent(n, record=folder, result=result)}
            if baseline is not None:
                old = build_agent(n, record=folder, result=result)
                old.recording = RecordingConfig(dir=folder, redaction=_BaselinePolicy(baseline))  # type: ignore[arg-type]
                agents = {"before": old, **agents}
            times: dict[str, list[float]] = {k: [] for k in agents}
            for agent in agents.values():
                run_once(agent, n)
                assert agent.last_recording is not None
                agent.last_recording.unlink()
            for r in range(rounds):
                order = list(agents.items())
                for name, agent in order if r % 2 == 0 else reversed(order):
                    times[name].append(timed_run(agent, n) / n * 1e6)
            best = {k: min(v) for k, v in times.items()}
            cells = [label, *(f"{best[k]:.1f}" for k in agents)]
            if baseline is not None:
                cells.append(f"{best['before'] - best['now']:.1f}")
            rows.append(tuple(cells))
    header = ("200-iteration loop", *(f"{k} us/iter" for k in agents))
    if baseline is not None:
        header += ("saved us/iter",)
    return [header, *rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--engines", action="store_true", help="also time other matchers")
    parser.add_argument("--loop", action="store_true", help="also time the recorded loop")
    args = parser.parse_args()
    # A realistic environment: a provider key and a dozen secret-looking variables.
    rng = random.Random(7)
    for i in range(12):
        os.environ.setdefault(
            f"BENCH_SERVICE_{i}_TOKEN", "".join(rng.choice(string.ascii_letters) for _ in range(32))
        )
    key = "sk-ant-api03-" + "".join(rng.choice(string.ascii_letters) for _ in range(90))
    vals = values(random.Random(1))

    makers: dict[str, Callable[[], Any]] = {"now": lambda: Redaction().compile([key])}
    baseline = load_baseline(args.baseline)
    if baseline is not None:
        makers = {"before": lambda: baseline.Redaction().compile([key]), **makers}
    else:
        print(f"(no baseline: git cannot show {args.baseline}; timing today's only)")

    times = measure(makers, vals, args.rounds)
    header = ["value (JSON bytes)", *(f"{n} us" for n in makers)]
    if baseline is not None:
        header.append("before / now")
    rows = []
    for label, value in vals.items():
        size = len(orjson.dumps(value))
        cells = [f"{label} ({size:,})"]
        best = {n: min(times[(label, n)]) * 1e6 for n in makers}
        cells += [f"{best[n]:.2f}" for n in makers]
        if baseline is not None:
            cells.append(f"{best['before'] / best['now']:.1f}x")
        rows.append(cells)
    print_table(
        f"redact(value), best of {args.rounds} interleaved rounds (median in the notes below)",
        header,
        rows,
    )
    for label in vals:
        med = ", ".join(f"{n} {statistics.median(times[(label, n)]) * 1e6:.2f}" for n in makers)
        print(f"  median {label}: {med}")

    setup_rows = []
    for name, make in makers.items():
        make()
        best = min(per_call(make, 50) for _ in range(args.rounds))
        setup_rows.append((name, f"{best * 1e6:.1f}"))
    print()
    print_table("set-up per run: policy.compile(provider secrets), us", ("", "us"), setup_rows)

    if args.loop:
        table = loop(baseline, 15)
        print()
        print_table(
            "the scripted loop, recording on, best of 15 interleaved runs", table[0], table[1:]
        )

    if args.engines:
        table = engines(vals, 5)
        print()
        print_table("the screen alone on other matchers, us per value", table[0], table[1:])


if __name__ == "__main__":
    main()
