"""The scripted af agent the benchmarks share: one tool call per iteration, then an answer.

The mock computes each reply from the request it is given (the tool result it answers names
the step), so one agent is built once and run many times, the way the
pydantic-ai peer is. The model and the tool do almost nothing, so the time per iteration is
af's own overhead for one request -> tool call -> tool result round trip.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from afcore import Agent, AgentBuilder, RecordingConfig, define_tool, mock
from afcore.messages import Request, ToolResultMessage, UserMessage
from bench._report import timed

__all__ = [
    "ANSWER",
    "SYSTEM",
    "build_agent",
    "recordings_dir",
    "run_once",
    "timed_run",
]

SYSTEM = "You count. Call echo with the next number until told to stop, then say done."
ANSWER = "done"
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "description": "The number to echo."}},
    "required": ["n"],
}
# A fixed usage stands in for what a provider reports; without it the mock estimates tokens by
# walking the whole history on every call, a test-double cost (the peer does the same).
USAGE = {"input_tokens": 1, "output_tokens": 1}


def build_agent(
    iterations: int,
    *,
    record: Path | None,
    result: Callable[[int], Any] = lambda n: f"ok {n}",
    extend: Callable[[AgentBuilder], AgentBuilder] | None = None,
) -> Agent:
    """An agent that calls ``echo`` ``iterations`` times, then answers :data:`ANSWER`.

    ``record``: the folder each run's recording goes to, or None for ``record=False``.
    ``result(n)``: what the tool returns for its n-th call (a value with limits, too).
    ``extend(builder)``: adds to the agent before it is built (injections, more tools).
    """

    def respond(request: Request) -> dict[str, object]:
        # The step is read from the tool result the model is answering (its call id is the step
        # number), as the peer does. Counting the tool results in the whole history would be the
        # same number at O(history) per call: ~0.01 ms per iteration at 200 iterations, a fifth
        # of af's unrecorded loop, charged to the script rather than to af. Injected messages
        # come after the history: the walk steps back over them (none without injections),
        # by their class alone (two isinstance calls a message were ~5 us a call with 27
        # injected messages, a tenth of what 200 injections add, charged to the script).
        done = 0
        for message in reversed(request.messages):
            cls = message.__class__
            if cls is UserMessage:
                continue
            if cls is ToolResultMessage:
                done = int(message.tool_call_id)
            break
        if done < iterations:
            n = done + 1
            return {"tool_calls": [{"id": str(n), "name": "echo", "args": {"n": n}}]}
        return {"content": ANSWER}

    echo = define_tool(
        name="echo",
        description="Echo the number back.",
        input_schema=ECHO_SCHEMA,
        execute=lambda args, ctx: result(args["n"]),
    )
    builder = (
        Agent.create(
            provider=mock(respond=respond, usage=USAGE),
            model="mock",
            # One call per tool iteration plus the one that answers.
            max_iterations=iterations + 1,
            record=RecordingConfig(dir=record) if record is not None else False,
            name="bench-loop",
        )
        .system(SYSTEM)
        .tool(echo)
    )
    if extend is not None:
        builder = extend(builder)
    return builder.build()


def run_once(agent: Agent, iterations: int, *, state: dict[str, Any] | None = None) -> None:
    """One whole run, checked so that a broken loop cannot pass for a fast one. ``state``:
    the values the run's rules may read (``s.state``); a copy is given to each run."""
    answer = agent.run("go", state=dict(state) if state is not None else None)
    last = agent.last_result
    if answer != ANSWER or last is None or last.iterations != iterations + 1:
        raise RuntimeError(f"the scripted run went wrong: {answer!r}, {last!r}")


def timed_run(agent: Agent, iterations: int, *, state: dict[str, Any] | None = None) -> float:
    """Seconds for one whole run; its recording (if any) is deleted after the clock stops."""
    elapsed = timed(lambda: run_once(agent, iterations, state=state))
    path = agent.last_recording
    if path is not None:
        path.unlink()
    return elapsed


@contextmanager
def recordings_dir() -> Iterator[Path]:
    """A temporary folder for recordings, removed afterwards. It is made in the working
    directory, as the default ``recordings/`` is, so that a run pays for creating its file
    what it pays in use: the system's temporary folder may be another filesystem (a tmpfs,
    or one that costs far more per file created: 260 us against 7 on one machine measured)."""
    folder = Path(tempfile.mkdtemp(prefix=".af-bench-", dir=Path.cwd()))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    """Run as ``python -m bench._af_loop --iterations N --runs K`` (the loop bench starts it
    in a process of its own, as it does the peers' scripts): ``K`` timed runs of the
    scripted loop, recording on (``--no-record``: off), after a warm-up run, each after a
    garbage collection (see :func:`timed_run`); prints their seconds as JSON."""
    import argparse
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    with recordings_dir() as folder:
        agent = build_agent(args.iterations, record=None if args.no_record else folder)
        run_once(agent, args.iterations)
        path = agent.last_recording
        if path is not None:
            path.unlink()
        times = [timed_run(agent, args.iterations) for _ in range(args.runs)]
    print(json.dumps(times))


if __name__ == "__main__":
    main()
