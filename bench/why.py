"""What answering ``af why`` costs on a big recording: building the index once, then a query.

A synthetic recording of about 1,000,000 commits (commits, calls and replies: four per
iteration of a tool loop: the call, its reply, the route, the tool stage, plus the blobs of
the messages) is written through af's own recorder, so its records are the real ones. Then:

- **index build**: opening it as a :class:`Recording`, which indexes every line (offsets,
  the writers of every key, messages, calls), against the floor for any Python reader: a
  plain pass that parses every line of the same file with orjson. Target: at most 2x.
- **query**: ``why(recording, key)`` on the open recording, for the answer, a message from
  the middle of the run and a tool result, with the default depth and node limits. Target:
  at most 0.2 s each, and no slower than 1/20 of the build.

Run: ``python -m bench.why`` (about a minute: most of it writes the file, which is kept in a
temporary folder and deleted). ``--commits`` makes it smaller.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from afcore.messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage, UserMessage
from afcore.recording import (
    AgentInfo,
    Header,
    Recorder,
    Redaction,
    RedactionInfo,
    ReplyToolCall,
    RunConfig,
    RunEnd,
    ToolOutcome,
    UsageInfo,
    open_recording,
)
from afcore.why import why
from bench._report import print_table, verdict

BUILD_TARGET = 2.0
QUERY_TARGET = 0.2
QUERY_SHARE = 1 / 20


def write_recording(path: Path, commits: int) -> int:
    """A tool loop of ``commits // 4`` iterations, recorded; returns the iterations."""
    rec = Recorder(path, run_id="bench", redactor=Redaction(environment=False).compile())
    rec.header(
        Header(
            run_id="bench",
            started_at="",
            af_version="bench",
            python="3",
            agent=AgentInfo(name="bench"),
            provider={"name": "mock"},
            model="m",
            config=RunConfig(max_iterations=commits, tool_arg_validation="enforce"),
            redaction=RedactionInfo(),
        )
    )
    seed = rec.next_rsid("seed")
    _, write = rec.message(UserMessage("Count to a million, one search at a time."))
    rec.commit(seed, "seed", 0, writes=[rec.write("user_message", "Count."), write])
    iterations = commits // 4
    for i in range(1, iterations + 1):
        rsid = rec.next_rsid("call-llm")
        rec.call(rsid, i, i, model="m", system=[], window=None, tools=[], params={}, cache=[])
        call = ToolCall(f"c{i}", "search", {"q": f"step {i}"})
        n, write = rec.message(AssistantMessage((TextBlock(f"Step {i}."), call)))
        rec.reply(
            rsid,
            i,
            i,
            message_write=write,
            stop_reason="tool_use",
            tool_calls=[ReplyToolCall(id=call.id, name="search", k=i)],
            usage=None,
            model="m",
            ms=1.0,
        )
        route = rec.next_rsid("route")
        rec.commit(
            route,
            "route",
            i,
            reads=(f"reply:{i}",),
            writes=[rec.write("route", "tools", trusted=True)],
        )
        tool = rec.next_rsid("tool:search")
        _, write = rec.message(ToolResultMessage(call.id, "search", f"result {i}: " + "x" * 80))
        rec.commit(
            tool,
            "tool:search",
            i,
            reads=(f"reply:{i}",),
            writes=[write],
            tool=ToolOutcome(name="search", k=i, call_id=call.id, status="ok", ms=1.0),
        )
    fin = rec.next_rsid("finalize")
    rec.commit(
        fin,
        "finalize",
        iterations,
        reads=(f"reply:{iterations}",),
        writes=[rec.write("answer", "done")],
    )
    rec.event(
        RunEnd(status="answer", iterations=iterations, calls=iterations, usage=UsageInfo(), ms=0.0)
    )
    rec.close()
    return iterations


def floor_pass(path: Path) -> float:
    """Seconds to parse every line of the file with orjson, the least any reader does."""
    gc.collect()
    start = time.perf_counter()
    with path.open("rb") as f:
        for line in f:
            orjson.loads(line)
    return time.perf_counter() - start


def build(path: Path) -> float:
    gc.collect()
    start = time.perf_counter()
    rec = open_recording(path)
    took = time.perf_counter() - start
    rec.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        start = time.perf_counter()
        iterations = write_recording(path, args.commits)
        wrote = time.perf_counter() - start
        size = os.path.getsize(path)
        print(f"wrote {size / 1e6:,.0f} MB, {iterations * 4 + 1:,} commits, in {wrote:.1f} s")
        floors, builds = [], []
        for r in range(args.rounds):
            # Alternate which goes first, so the page cache and the machine's drift fall on both.
            pair = (floor_pass, build) if r % 2 == 0 else (build, floor_pass)
            for fn in pair:
                (floors if fn is floor_pass else builds).append(fn(path))
        floor, index = min(floors), min(builds)
        ratio = index / floor
        with open_recording(path) as rec:
            assert rec.end is not None and rec.end.iterations == iterations
            queries = []
            for key in ("answer", f"message:{iterations}", f"tool:search#{iterations // 2}.result"):
                times = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    result = why(rec, key)
                    times.append(time.perf_counter() - start)
                assert result.nodes and result.writer != ""
                queries.append((key, min(times), statistics.median(times), len(result.nodes)))
    print_table(
        f"af why on a recording of {iterations * 4 + 1:,} commits ({size / 1e6:,.0f} MB), "
        f"seconds ({args.rounds} rounds, best)",
        ("", "seconds", "ratio"),
        [
            ("plain orjson pass over every line", f"{floor:.2f}", "1.00"),
            ("index build (open the recording)", f"{index:.2f}", f"{ratio:.2f}"),
        ],
    )
    print(
        f"target: index build <= {BUILD_TARGET:g}x the plain pass: {verdict(ratio <= BUILD_TARGET)}"
    )
    print()
    print_table(
        "queries with the index (default depth and node limits)",
        ("key", "best s", "median s", "nodes", "share of build"),
        [(k, f"{b:.4f}", f"{m:.4f}", str(n), f"1/{index / b:,.0f}") for k, b, m, n in queries],
    )
    worst = max(b for _, b, _, _ in queries)
    met = worst <= QUERY_TARGET and worst <= index * QUERY_SHARE
    print(f"target: each query <= {QUERY_TARGET} s and <= 1/20 of the build: {verdict(met)}")


if __name__ == "__main__":
    main()
