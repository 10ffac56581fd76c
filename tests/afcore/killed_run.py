"""A run for a test to kill: ``python -m tests.afcore.killed_run DIR RUN_ID``. A scripted
model asks for a tool at each of many iterations (some replies ask for two), each tool
sleeps a little and its result is long enough to be a blob, and the final answer is too."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

from afcore import Agent, RecordingConfig, define_tool, mock
from afcore.messages import Request

ITERATIONS = 300


def main(folder: Path, run_id: str) -> None:
    rng = random.Random(run_id)

    def respond(request: Request) -> Any:
        step = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
        if step >= ITERATIONS:
            return "done: " + "the answer, at length. " * 20
        calls = [{"id": f"c{step}", "name": "look", "args": {"n": step}}]
        if step % 7 == 3:
            calls.append({"id": f"d{step}", "name": "look", "args": {"n": -step}})
        return {"tool_calls": calls}

    def look(args: dict[str, Any], ctx: Any) -> str:
        time.sleep(rng.random() / 1000)
        return f"item {args['n']}: " + "x" * rng.randrange(10, 400)

    tool = define_tool(
        "look",
        "Looks an item up.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        look,
    )
    agent = (
        Agent.create(
            provider=mock(respond=respond),
            model="m",
            max_iterations=ITERATIONS + 1,
            record=RecordingConfig(dir=folder, run_id=run_id),
        )
        .tool(tool)
        .build()
    )
    agent.run("look everything up")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
