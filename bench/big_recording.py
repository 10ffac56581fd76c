"""Writes a big, valid recording for the Lens to open: thousands of calls, run by a real af
agent on a scripted model, so that every line is what af itself writes.

    python -m bench.big_recording [--mb 300] [--shape prose|short-lines] [--out DIR] [--run-id ID]

The agent searches and reads pages until the file reaches the size asked for, then answers.
Tool results are fresh text (seeded, so a size and a shape give the same file). It has a
system prompt, a steering segment, a fact computed at every iteration (an `inject` stage per
call), two tools, one tool call in forty with an argument the schema refuses, and a window
strategy, so every call's window stays bounded, as a real model's context must. Two shapes:

- `prose` (the default): one tool call per step, each result about 64 KB of words, under
  `summarize_oldest`: every few steps the oldest turns fold into a summary written by a
  second scripted model, so the file holds folds, `context_evicted` events, summarizer calls
  and their transcripts. About 3,000 calls in 300 MB.
- `short-lines`: five tool calls per step, each result about 5 KB, under `sliding_window`:
  no line reaches 10 KB. About 9,000 calls in 300 MB.

Prints the path, the size, the calls and the time it took. `af verify` passes on what it
writes (the tests check small ones).
"""

from __future__ import annotations

import argparse
import random
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afcore import Agent, AgentBuilder, RecordingConfig, define_tool, mock
from afcore.messages import Request, ToolResultMessage
from afcore.window import sliding_window

__all__ = ["SHAPES", "QUESTION", "Shape", "build_agent", "write"]

QUESTION = "What does the archive say about the harbour?"

WORDS = (
    "agent context window recording model call tool result fold summary segment cache "
    "provenance lisbon porto museum tram harbour tile bridge river market fado "
    "überfahrt café naïve façade smörgåsbord 東京 данные"
).split()

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "What to search for."}},
    "required": ["q"],
    "additionalProperties": False,
}
READ_SCHEMA = {
    "type": "object",
    "properties": {"page": {"type": "integer", "description": "The page number."}},
    "required": ["page"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Shape:
    result_chars: int
    """About how long each tool result is."""
    per_step: int
    """Tool calls in each reply."""
    summarize: bool
    """summarize_oldest (folds with summaries) rather than sliding_window."""


SHAPES = {
    "prose": Shape(result_chars=64_000, per_step=1, summarize=True),
    "short-lines": Shape(result_chars=5_000, per_step=5, summarize=False),
}


def _text(seed: int, size: int) -> str:
    """About ``size`` characters of words, the same for the same seed."""
    rng = random.Random(seed)
    words: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words)


def _tool_call(n: int) -> dict[str, Any]:
    if n % 40 == 0:
        # A wrong argument type: the call is refused and the model reads why.
        return {"id": f"c{n}", "name": "read_page", "args": {"page": "one"}}
    if n % 2:
        return {"id": f"c{n}", "name": "search", "args": {"q": f"topic {n}"}}
    return {"id": f"c{n}", "name": "read_page", "args": {"page": n}}


def build_agent(folder: Path, run_id: str, target_bytes: int, shape: Shape) -> Agent:
    """The scripted agent; it answers once its recording holds ``target_bytes``."""
    path = folder / f"{run_id}.jsonl"
    size = shape.result_chars

    def respond(request: Request) -> dict[str, Any]:
        # The step is the number of the last tool call answered (its id is c<n>).
        step = 0
        for message in reversed(request.messages):
            if isinstance(message, ToolResultMessage):
                step = int(message.tool_call_id.removeprefix("c"))
                break
        if path.exists() and path.stat().st_size >= target_bytes:
            return {"content": f"Done after {step} tool calls: the answer is 42."}
        calls = [_tool_call(step + i) for i in range(1, shape.per_step + 1)]
        return {"content": f"Looking further after {step} tool calls.", "tool_calls": calls}

    search = define_tool(
        "search",
        "Search the archive; returns matching passages.",
        SEARCH_SCHEMA,
        lambda args, ctx: (
            f"results for {args['q']}: " + _text(zlib.crc32(args["q"].encode()), size)
        ),
    )
    read_page = define_tool(
        "read_page",
        "Read one page of the archive.",
        READ_SCHEMA,
        lambda args, ctx: f"page {args['page']}: " + _text(args["page"], size),
    )
    builder: AgentBuilder = (
        Agent.create(
            provider=mock(respond=respond, authoritative=True),
            model="mock-researcher",
            max_iterations=10_000,
            record=RecordingConfig(dir=folder, run_id=run_id),
            name="big-research",
        )
        .system("You research a question in the archive, step by step, and answer it.")
        .steering("Cite the page of every fact.", id="cite")
        .fact(lambda s: f"This is step {s.iteration}.", id="step")
        .tool(search)
        .tool(read_page)
    )
    if shape.summarize:
        builder = builder.compaction(
            threshold_tokens=size,  # about four results' worth of tokens in the window
            summarizer=mock(reply="Earlier steps searched the archive and read pages."),
            keep_recent_turns=2,
        )
    else:
        builder = builder.window(sliding_window(keep_recent_turns=4))
    return builder.build()


def write(folder: Path, *, mb: float, shape: str = "prose", run_id: str = "big") -> Path:
    """Run the agent until its recording in ``folder`` holds ``mb`` megabytes."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.jsonl"
    path.unlink(missing_ok=True)
    agent = build_agent(folder, run_id, int(mb * 1024 * 1024), SHAPES[shape])
    agent.run(QUESTION)
    assert agent.last_recording == path
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=300, help="the size to reach (default 300)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="prose")
    parser.add_argument("--out", type=Path, default=Path("recordings"), help="the folder")
    parser.add_argument("--run-id", default="big", help="the file's name (default big)")
    args = parser.parse_args()
    start = time.perf_counter()
    path = write(args.out, mb=args.mb, shape=args.shape, run_id=args.run_id)
    from afcore.recording import open_recording

    with open_recording(path) as rec:
        calls = rec.call_count
    size = path.stat().st_size / 1024 / 1024
    print(f"{path}: {size:,.0f} MB, {calls:,} calls, {time.perf_counter() - start:,.1f} s")


if __name__ == "__main__":
    main()
