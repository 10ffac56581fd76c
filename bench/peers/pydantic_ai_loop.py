"""Peer for af's loop-overhead benchmark: the same scripted tool loop run through pydantic-ai.

An ``Agent`` driven by a ``FunctionModel`` (in-process, no network) asks for one ``echo`` tool
call per model request for ``iterations`` requests, then answers "done". Because the model and
the tool do almost nothing, the time per iteration is the framework's own overhead for one
request -> tool call -> tool return round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits


def build(iterations: int) -> Callable[[], str]:
    """Build the agent once; return a function that does one whole run and returns the answer."""
    calls = 0

    def echo(n: int) -> str:
        """Echo the number back."""
        nonlocal calls
        calls += 1
        return f"ok {n}"

    async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        # The step is read from the tool return the model is answering, so every run starts again
        # at 1 without shared state. `async def` because FunctionModel runs a plain `def` in a
        # worker thread, which would add thread hand-off cost no real async model client pays.
        last = messages[-1]
        done = 0
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    done = int(part.tool_call_id)
        # A fixed usage stands in for what a provider reports; without it FunctionModel estimates
        # tokens by walking the whole history on every request, a test-double cost.
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        if done < iterations:
            n = done + 1
            call = ToolCallPart("echo", {"n": n}, tool_call_id=str(n))
            return ModelResponse(parts=[call], usage=usage)
        return ModelResponse(parts=[TextPart("done")], usage=usage)

    agent = Agent(FunctionModel(script), tools=[echo])
    # The default request_limit (50) would stop the loop; one request per iteration plus the answer.
    limits = UsageLimits(request_limit=iterations + 1)

    def run() -> str:
        nonlocal calls
        calls = 0
        answer = agent.run_sync("go", usage_limits=limits).output
        if calls != iterations:
            raise RuntimeError(f"echo ran {calls} times, expected {iterations}")
        return answer

    return run


def per_iteration_seconds(iterations: int = 200, repeats: int = 5) -> float:
    """Best (minimum) seconds per iteration over ``repeats`` timed runs, after one warm-up run."""
    run = build(iterations)
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best / iterations


def main() -> None:
    """Run as a script by a venv holding another pydantic-ai (see ``bench.peers.releases``):
    ``--runs K`` prints the seconds of each of K timed runs, after a warm-up, as JSON."""
    import argparse
    import gc
    import json

    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--runs", type=int, default=0)
    args = parser.parse_args()
    if not args.runs:
        seconds = per_iteration_seconds(args.iterations) * 1000
        print(f"pydantic-ai: {seconds:.3f} ms per iteration ({args.iterations} iterations)")
        return
    run = build(args.iterations)
    run()
    times = []
    for _ in range(args.runs):
        gc.collect()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(json.dumps(times))


if __name__ == "__main__":
    main()
