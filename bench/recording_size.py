"""How a recording grows: with the content a run produces, not with calls x window.

The scripted af loop runs 100 and then 1,000 iterations; each tool result is about 1 KB of
fresh text (unique per call, seeded so every run writes the same). Every model call's window
holds the whole history, so a format that restated windows would grow with the square of the
iterations (a 1,000-iteration file ~100x the 100-iteration one); stored once and referred to,
the content grows about 10x. Run: ``python -m bench.recording_size``.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from afcore.recording import canonical, open_recording
from bench._af_loop import build_agent, recordings_dir, run_once
from bench._report import print_table, verdict

RATIO_TARGET = 12.0
"""The 1,000-iteration file at most 12x the 100-iteration one (10x more content)."""
OVERHEAD_TARGET = 900
"""At most 900 bytes per iteration beyond the unique content (format 1.1)."""
INJECTED_OVERHEAD_TARGET = 1200
"""With 200 injections, at 100 iterations: at most 1,200 bytes per iteration beyond it."""
RESULT_BYTES = 1024

# Some words carry non-ASCII letters so that sizes are counted in UTF-8 bytes, not characters.
_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu café naïve "
    "über façade jalapeño smörgåsbord crème brûlée 42 1.5e3 -7 null true"
).split()


def fresh_text(n: int, size: int = RESULT_BYTES, *, label: str | None = None) -> str:
    """About ``size`` UTF-8 bytes of text, unique to ``n`` and the same on every run, opening
    with ``label`` (by default ``result <n>:``)."""
    rng = random.Random(n)
    words = [label or f"result {n}:"]
    length = len(words[0])
    while length < size:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word.encode()) + 1
    return " ".join(words)


def unique_content(path: Path) -> int:
    """UTF-8 bytes of the distinct texts the run produced, each counted once (see
    :func:`unique_texts`)."""
    return sum(len(t.encode()) for t in unique_texts(path))


def unique_texts(path: Path) -> set[str]:
    """The distinct texts the run produced: the user message, the assistant texts and tool call
    arguments (as canonical JSON), the tool results, the injected messages, the system segments
    and the tool specs (canonical JSON), all read back from the recording."""
    texts: set[str] = set()
    with open_recording(path) as rec:
        for n in range(1, rec.message_count + 1):
            message: dict[str, Any] = rec.message(n)
            if message["role"] != "assistant":
                texts.add(message["content"])
                continue
            for block in message["content"]:
                if block["type"] == "text":
                    texts.add(block["text"])
                elif block["type"] == "thinking":
                    texts.add(block["thinking"])
                elif block["type"] == "tool_call":
                    texts.add(canonical(block["args"]).decode())
        for n in range(1, rec.call_count + 1):
            for segment in rec.segments(n):
                if segment.ref is not None:
                    texts.add(rec.blob(segment.ref)["text"])
                elif segment.text is not None:
                    texts.add(segment.text)
            for tool in rec.tools(n):
                texts.add(canonical(rec.blob(tool.ref)).decode())
    return texts


def measure(iterations: int, folder: Path) -> tuple[int, int]:
    """The recording's size and its unique content, in bytes, for one run."""
    agent = build_agent(iterations, record=folder, result=fresh_text)
    run_once(agent, iterations)
    path = agent.last_recording
    assert path is not None
    return path.stat().st_size, unique_content(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--large", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    worst = 0.0
    sizes = []
    with recordings_dir() as folder:
        for n in (args.small, args.large):
            size, unique = measure(n, folder)
            beyond = (size - unique) / n
            worst = max(worst, beyond)
            sizes.append(size)
            rows.append(
                (
                    f"{n:,} iterations",
                    f"{size:,}",
                    f"{unique:,}",
                    f"{size - unique:,}",
                    f"{beyond:,.0f}",
                )
            )
    ratio = sizes[1] / sizes[0]
    print_table(
        f"recording size: scripted af loop, ~{RESULT_BYTES} B of fresh text per tool result "
        "(bytes)",
        ("run", "file", "unique content", "beyond", "beyond / iteration"),
        rows,
    )
    growth = args.large / args.small
    print(
        f"size ratio {args.large:,} / {args.small:,} iterations: {ratio:.2f}x "
        f"(content {growth:.0f}x); target <= {RATIO_TARGET:g}x: {verdict(ratio <= RATIO_TARGET)}"
    )
    print(
        f"bytes beyond unique content: {worst:,.0f} per iteration at worst; "
        f"target <= {OVERHEAD_TARGET:,}: {verdict(worst <= OVERHEAD_TARGET)}"
    )


if __name__ == "__main__":
    main()
