"""What governance costs per iteration: the scripted tool loop without middleware, with a
tool middleware chain (two links: one on each call, one on each result, each decision
recorded), and with a watcher, against pydantic-ai's loop in the same process.

Run: ``python -m bench.governance``. The peer has no middleware chain of its own: it is the
same plain loop ``bench.loop_overhead`` measures, the bar af's governed loop is held to.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from afcore import AgentBuilder, ToolMiddleware, allow
from bench._af_loop import build_agent, recordings_dir, run_once, timed_run
from bench._report import print_table, timed, verdict
from bench.peers import pydantic_ai_loop

TARGET = 0.5
"""af's governed loop, recording included, at most half of pydantic-ai's time per iteration
(the target of af's plain loop)."""


def _governed(builder: AgentBuilder[Any]) -> AgentBuilder[Any]:
    return builder.tool_middleware(
        ToolMiddleware("small", on_tool_call=lambda c: allow() if c.args["n"] > 0 else allow()),
        ToolMiddleware("tidy", on_tool_result=lambda r: allow()),
    )


def _watched(builder: AgentBuilder[Any]) -> AgentBuilder[Any]:
    seen: list[str] = []
    return builder.watch(lambda record: seen.append(record.t))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    n: int = args.iterations
    times: dict[str, list[float]] = {"plain": [], "governed": [], "watched": [], "peer": []}
    with recordings_dir() as folder:
        agents = {
            "plain": build_agent(n, record=folder),
            "governed": build_agent(n, record=folder, extend=_governed),
            "watched": build_agent(n, record=folder, extend=_watched),
        }
        peer = pydantic_ai_loop.build(n)
        for agent in agents.values():
            run_once(agent, n)
            path = agent.last_recording
            if path is not None:
                path.unlink()
        peer()
        for _ in range(args.rounds):
            # Interleaved, so that drift in the machine's speed falls on all alike.
            for name, agent in agents.items():
                times[name] += [timed_run(agent, n) for _ in range(3)]
            times["peer"].append(timed(peer))

    def ms(name: str, how: str) -> float:
        pick = min(times[name]) if how == "best" else statistics.median(times[name])
        return pick / n * 1000

    peer = ms("peer", "best")
    rows = [
        (
            label,
            f"{ms(key, 'best'):.3f}",
            f"{ms(key, 'median'):.3f}",
            f"{ms(key, 'best') / peer:.3f}",
        )
        for key, label in (
            ("plain", "af, no middleware"),
            ("governed", "af, 2-link tool middleware"),
            ("watched", "af, one watcher"),
            ("peer", "pydantic-ai (FunctionModel)"),
        )
    ]
    print_table(
        f"governance: {n}-iteration scripted tool loop, ms per iteration, recording on",
        ("", "best", "median", "/ pydantic-ai"),
        rows,
    )
    extra = ms("governed", "best") - ms("plain", "best")
    print(f"the chain costs {extra * 1000:.1f} µs per iteration (one call and one result walked)")
    ratio = ms("governed", "best") / peer
    print(f"target: governed / pydantic-ai <= {TARGET} (best): {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
