"""Flows: branches at the same time, and what recording a composed run costs per call.

1. A Parallel of 8 agents, each of whose scripted tool waits 50 ms (a sync tool, on af's
   worker threads), against one of those agents alone: the wall time of the 8 over the
   branch alone (target: at most 1.3). The peer, pydantic-ai, runs the same 8 agents (a
   FunctionModel, a sync tool sleeping 50 ms) with ``asyncio.gather``, its way of running
   agents at once, against one alone.
2. 5 agents of 40 tool iterations each, run one after another on their own (each recorded
   as its run) and as the steps of a recorded Sequence: milliseconds per model call of each
   (target: composed / on their own at most 1.1), and, from the same runs with recording
   off, what recording adds per call in each.
3. A replay of that composed run (``af replay`` of a flow, the tools' results served)
   against the composed run itself: the same target as an agent's replay (at most 1.5x
   the original run). pydantic-ai has no replay (``python -m bench.replay`` holds af's
   loop to its plain run); the original run is the bar here.

Runs alternate (which goes first alternates each round) and the best of each is compared.
Run: ``python -m bench.flows``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from afcore import Agent, RecordingConfig, define_tool, mock
from afcore.flows import Parallel, Sequence
from afcore.messages import Request, ToolResultMessage
from afcore.replay import replay_flow
from bench._af_loop import build_agent, recordings_dir
from bench._report import print_table, timed, verdict

PARALLEL_TARGET = 1.3
COMPOSED_TARGET = 1.1
REPLAY_TARGET = 1.5
WAIT = 0.05
USAGE = {"input_tokens": 1, "output_tokens": 1}


def waiting_agent(name: str) -> Agent:
    """One model call asking for ``wait``, whose tool sleeps 50 ms, then the answer."""

    def respond(request: Request) -> dict[str, Any]:
        if any(isinstance(m, ToolResultMessage) for m in request.messages):
            return {"content": f"{name} done"}
        return {"tool_calls": [{"id": "w", "name": "wait", "args": {}}]}

    def wait(args: dict[str, Any], ctx: Any) -> str:
        time.sleep(WAIT)
        return "waited"

    tool = define_tool("wait", "Wait a while.", {"type": "object", "properties": {}}, wait)
    return (
        Agent.create(provider=mock(respond=respond, usage=USAGE), model="mock", name=name)
        .tool(tool)
        .build()
    )


def fan(n: int, folder: Path) -> Parallel:
    builder = Parallel.create("fan", record=RecordingConfig(dir=folder))
    for i in range(n):
        builder = builder.branch(f"b{i}", waiting_agent(f"b{i}"))
    return builder.build()


def run_flow(flow: Any, expect: int) -> None:
    flow.run("go")
    result = flow.last_result
    if result is None or result.status != "answer" or result.calls != expect:
        raise RuntimeError(f"the flow went wrong: {result!r}")


def peer_fan(n: int) -> Any:
    """pydantic-ai: ``n`` agents whose sync tool sleeps 50 ms, run with asyncio.gather."""
    from pydantic_ai import Agent as PeerAgent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage

    async def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in last.parts
        ):
            return ModelResponse(parts=[TextPart("done")], usage=usage)
        return ModelResponse(parts=[ToolCallPart("wait", {}, tool_call_id="w")], usage=usage)

    def wait() -> str:
        """Wait a while."""
        time.sleep(WAIT)
        return "waited"

    agents = [PeerAgent(FunctionModel(script), tools=[wait]) for _ in range(n)]

    def run() -> None:
        async def all_at_once() -> list[Any]:
            return await asyncio.gather(*(a.run("go") for a in agents))

        outs = asyncio.run(all_at_once())
        if [o.output for o in outs] != ["done"] * n:
            raise RuntimeError("the peer's run went wrong")

    return run


def parallel(branches: int, rounds: int, peer: bool) -> list[tuple[str, str, str, str]]:
    with recordings_dir() as folder:
        many, one = fan(branches, folder / "many"), fan(1, folder / "one")
        jobs: list[tuple[str, Any]] = [
            ("af many", lambda: run_flow(many, 2 * branches)),
            ("af one", lambda: run_flow(one, 2)),
        ]
        if peer:
            jobs += [("peer many", peer_fan(branches)), ("peer one", peer_fan(1))]
        best = {name: float("inf") for name, _ in jobs}
        for _, job in jobs:
            job()  # warm up
        for r in range(rounds):
            for name, job in jobs if r % 2 == 0 else list(reversed(jobs)):
                best[name] = min(best[name], timed(job))
            shutil.rmtree(folder / "many", ignore_errors=True)
            shutil.rmtree(folder / "one", ignore_errors=True)
    rows = [
        (
            "af",
            f"{best['af one'] * 1000:.1f}",
            f"{best['af many'] * 1000:.1f}",
            f"{best['af many'] / best['af one']:.2f}",
        )
    ]
    if peer:
        rows.append(
            (
                "pydantic-ai (asyncio.gather)",
                f"{best['peer one'] * 1000:.1f}",
                f"{best['peer many'] * 1000:.1f}",
                f"{best['peer many'] / best['peer one']:.2f}",
            )
        )
    return rows


def composed(agents: int, each: int, rounds: int) -> dict[str, float]:
    """Best seconds per model call: ``agents`` agents of ``each`` iterations run one after
    another on their own, and the same agents as the steps of a Sequence; recorded and not."""
    calls = agents * (each + 1)
    with recordings_dir() as folder:

        def sequence(record: bool) -> Sequence:
            cfg: Any = RecordingConfig(dir=folder / "seq") if record else False
            builder = Sequence.create("chain", record=cfg)
            for i in range(agents):
                builder = builder.step(f"s{i}", build_agent(each, record=None))
            return builder.build()

        def alone(record: bool) -> Any:
            team = [
                build_agent(each, record=folder / "alone" if record else None)
                for _ in range(agents)
            ]

            def go() -> None:
                message = "go"
                for agent in team:
                    message = agent.run(message)  # type: ignore[assignment]
                    if message != "done":
                        raise RuntimeError("an agent's run went wrong")

            return go

        seq_on, seq_off = sequence(True), sequence(False)
        run_flow(seq_on, calls)
        original = folder / "original"
        assert seq_on.last_result is not None and seq_on.last_result.recording is not None
        shutil.move(seq_on.last_result.recording.parent, original)
        log = original / seq_on.last_result.recording.name
        again = sequence(True)

        def replayed() -> None:
            report = replay_flow(log, again, tools="recorded", out=folder / "replays")
            if not report.ok or report.calls != calls:
                raise RuntimeError(f"the replay went wrong: {report.summary()}")

        jobs: list[tuple[str, Any]] = [
            ("alone on", alone(True)),
            ("alone off", alone(False)),
            ("composed on", lambda: run_flow(seq_on, calls)),
            ("composed off", lambda: run_flow(seq_off, calls)),
            ("replay", replayed),
        ]
        best = {name: float("inf") for name, _ in jobs}
        for _, job in jobs:
            job()
        for r in range(rounds):
            for name, job in jobs if r % 2 == 0 else list(reversed(jobs)):
                best[name] = min(best[name], timed(job) / calls)
            for sub in ("alone", "seq", "replays"):
                shutil.rmtree(folder / sub, ignore_errors=True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=8)
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--each", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()

    rows = parallel(args.branches, args.rounds, not args.no_peer)
    print_table(
        f"Parallel of {args.branches} agents, each tool waiting {WAIT * 1000:.0f} ms: wall ms "
        f"(best of {args.rounds} interleaved)",
        ("", "one branch", f"{args.branches} branches", "ratio"),
        rows,
    )
    ratio = float(rows[0][3])
    print(f"target: af ratio <= {PARALLEL_TARGET}: {verdict(ratio <= PARALLEL_TARGET)}")
    print()

    b = composed(args.agents, args.each, args.rounds)

    def ms(s: float) -> str:
        return f"{s * 1000:.4f}"

    cost = b["composed on"] / b["alone on"]
    print_table(
        f"recording a composed run: {args.agents} agents x {args.each} tool iterations, run "
        f"one after another on their own and as a Sequence; ms per model call "
        f"(best of {args.rounds} interleaved)",
        ("", "recorded", "record=False", "added by recording"),
        [
            (
                "each agent on its own",
                ms(b["alone on"]),
                ms(b["alone off"]),
                ms(b["alone on"] - b["alone off"]),
            ),
            (
                "composed (Sequence)",
                ms(b["composed on"]),
                ms(b["composed off"]),
                ms(b["composed on"] - b["composed off"]),
            ),
            (
                "ratio composed / own",
                f"{cost:.2f}",
                f"{b['composed off'] / b['alone off']:.2f}",
                "",
            ),
        ],
    )
    print(f"target: recorded ratio <= {COMPOSED_TARGET}: {verdict(cost <= COMPOSED_TARGET)}")
    print()
    again = b["replay"] / b["composed on"]
    print_table(
        f"replaying the composed run ({args.agents} agents x {args.each} tool iterations, "
        f"tools recorded): ms per model call (best of {args.rounds} interleaved)",
        ("", "ms per call", "ratio"),
        [
            ("the composed run, recorded", ms(b["composed on"]), "1.00"),
            ("its replay (af replay)", ms(b["replay"]), f"{again:.2f}"),
        ],
    )
    print(f"target: replay ratio <= {REPLAY_TARGET}: {verdict(again <= REPLAY_TARGET)}")


if __name__ == "__main__":
    main()
