"""What af adds to a real provider's call: an agent on the Anthropic provider, its transport
answering instantly from a canned exchange, against the ``anthropic`` SDK called directly
with the very requests the agent sent.

The transport answers each request at once with a Messages API response shaped like the
real ones (a tool_use block asking for the next step, then a final answer), so what is
timed is everything but the network: for af, building the request from the agent's slots,
the SDK's own request and response handling, parsing into af's messages, running the
(trivial) tool, and recording it all; for the SDK alone, ``client.messages.create(...)``
with the same bodies, one after the other, parsed into the SDK's models. Both use the same
async SDK client type over the same kind of transport, in one process; runs alternate.

Run: ``python -m bench.provider_overhead``. Target: af / SDK <= 1.3 per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import anthropic as sdk
import httpx2
import orjson

from afcore import Agent, RecordingConfig, define_tool
from afcore.providers import anthropic
from bench._af_loop import recordings_dir
from bench._report import print_table, verdict

TARGET = 1.3
MODEL = "claude-sonnet-4-5"
KEY = "sk-ant-bench-0000000000000000000000"


def answer(body: dict[str, Any], steps: int) -> dict[str, Any]:
    """The canned response to a Messages API request: ask for the next step until ``steps``
    tool results came back, then answer."""
    done = sum(
        1
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )
    usage = {"input_tokens": 120 + 40 * done, "output_tokens": 30}
    if done < steps:
        content = [
            {"type": "text", "text": f"Step {done + 1}."},
            {
                "type": "tool_use",
                "id": f"toolu_{done + 1:04d}",
                "name": "echo",
                "input": {"n": done + 1},
            },
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": "done"}], "end_turn"
    return {
        "id": f"msg_{done:04d}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def transport(steps: int, sent: list[dict[str, Any]] | None = None) -> httpx2.MockTransport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        body = orjson.loads(request.content)
        if sent is not None:
            sent.append(body)
        return httpx2.Response(200, json=answer(body, steps))

    return httpx2.MockTransport(handle)


def build(steps: int, folder: Any, sent: list[dict[str, Any]] | None = None) -> Agent:
    echo = define_tool(
        "echo",
        "Echo the number back.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        lambda args, ctx: f"ok {args['n']}",
    )
    provider = anthropic(
        MODEL, api_key=KEY, http_client=httpx2.AsyncClient(transport=transport(steps, sent))
    )
    return (
        Agent.create(
            provider=provider,
            model=MODEL,
            max_iterations=steps + 1,
            record=RecordingConfig(dir=folder),
        )
        .system("You count. Call echo with the next number until told to stop, then say done.")
        .tool(echo)
        .build()
    )


def time_af(agent: Agent, steps: int) -> float:
    start = time.perf_counter()
    result = agent.run("go")
    took = time.perf_counter() - start
    assert result == "done" and agent.last_result is not None
    assert agent.last_result.calls == steps + 1
    return took / (steps + 1)


def time_sdk(bodies: list[dict[str, Any]], steps: int) -> float:
    async def go() -> float:
        client = sdk.AsyncAnthropic(
            api_key=KEY, max_retries=0, http_client=httpx2.AsyncClient(transport=transport(steps))
        )
        start = time.perf_counter()
        for body in bodies:
            message = await client.messages.create(**body)
            assert message.content
        took = time.perf_counter() - start
        await client.close()
        return took / len(bodies)

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="tool steps per run")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    steps = args.steps
    with recordings_dir() as folder:
        sent: list[dict[str, Any]] = []
        time_af(build(steps, folder, sent), steps)  # warm-up, and the bodies af sends
        bodies = sent[: steps + 1]
        time_sdk(bodies, steps)
        af_times, sdk_times = [], []
        for r in range(args.rounds):
            pair = ("af", "sdk") if r % 2 == 0 else ("sdk", "af")
            for who in pair:
                if who == "af":
                    af_times.append(time_af(build(steps, folder), steps))
                else:
                    sdk_times.append(time_sdk(bodies, steps))
    af_best, sdk_best = min(af_times), min(sdk_times)
    ratio = af_best / sdk_best
    print_table(
        f"provider overhead: {steps + 1} calls a run through an instant transport, us per call "
        f"({args.rounds} interleaved runs each)",
        ("", "best", "median"),
        [
            (
                "af agent, anthropic provider, recording on",
                f"{af_best * 1e6:.0f}",
                f"{statistics.median(af_times) * 1e6:.0f}",
            ),
            (
                "anthropic SDK called directly",
                f"{sdk_best * 1e6:.0f}",
                f"{statistics.median(sdk_times) * 1e6:.0f}",
            ),
            (
                "ratio af / SDK",
                f"{ratio:.2f}",
                f"{statistics.median(af_times) / statistics.median(sdk_times):.2f}",
            ),
        ],
    )
    print(f"target: ratio <= {TARGET} (best): {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
