"""Sessions: what a session turn costs over a plain run, and many sessions under load.

1. **Overhead.** A conversation of T turns on the scripted model (each turn one tool call
   and an answer, recording on), three ways, interleaved: through a session
   (``session.send``), as plain runs carrying the transcript in memory
   (``agent.run(..., history=...)``, what an application does without sessions), and as
   fresh plain runs (``agent.run``, no history). Prints ms per turn and the ratios.
2. **Load.** 100 sessions, 8 processes, 13 sending threads each (104 senders at once),
   each thread sending its messages to sessions spread so that every session hears from
   several processes; the model answers after a short delay. Then every session is read
   back: every message taken by exactly one turn, none lost, none twice, each sender's
   messages in the order sent, inboxes empty.

Run: ``python -m bench.sessions`` (``--stores sqlite,postgres`` also runs PostgreSQL, on a
server started on loopback by ``scripts.postgres_server``).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import shutil
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from afcore import Agent, RecordingConfig, define_tool, mock
from afcore.messages import AssistantMessage, Request, ToolResultMessage, UserMessage
from afcore.sessions import PostgresStore, Session, SessionStore, SQLiteStore
from bench._report import print_table, verdict

TARGET = 1.5
"""A session turn takes at most 1.5x a plain run of the same turn, on SQLite."""
ANSWER = "done"


def build_agent(folder: Path, delay: float = 0.0) -> Agent:
    """One tool call, then the answer; the same script for every turn of a conversation."""

    def respond(request: Request) -> dict[str, Any]:
        if delay:
            time.sleep(delay)
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return {"content": ANSWER}
        return {
            "tool_calls": [{"id": f"c{len(request.messages)}", "name": "echo", "args": {"n": 1}}]
        }

    echo = define_tool(
        "echo",
        "Echo the number back.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        lambda args, ctx: f"ok {args['n']}",
    )
    return (
        Agent.create(
            provider=mock(respond=respond, usage={"input_tokens": 1, "output_tokens": 1}),
            model="mock",
            max_iterations=4,
            record=RecordingConfig(dir=folder),
            name="bench-sessions",
        )
        .system("You count.")
        .tool(echo)
        .build()
    )


def open_spec(spec: str) -> SessionStore:
    return PostgresStore(spec) if spec.startswith("postgresql://") else SQLiteStore(spec)


# -- 1. overhead -------------------------------------------------------------------------


def _conversation(turn: Callable[[], str], turns: int) -> list[float]:
    times = []
    for _ in range(turns):
        t0 = time.perf_counter()
        answer = turn()
        times.append(time.perf_counter() - t0)
        if answer != ANSWER:
            raise RuntimeError(f"the scripted turn went wrong: {answer!r}")
    return times


def overhead(spec: str, folder: Path, turns: int, rounds: int) -> dict[str, list[list[float]]]:
    """Seconds per turn of each way, per round."""
    agent = build_agent(folder)
    store = open_spec(spec)
    out: dict[str, list[list[float]]] = {"session": [], "history": [], "fresh": []}
    conversations = 0

    def session_way() -> list[float]:
        nonlocal conversations
        conversations += 1
        session = Session(agent, store, f"bench-{conversations}")
        return _conversation(lambda: session.send("go").answer, turns)

    def history_way() -> list[float]:
        transcript: tuple[Any, ...] = ()

        def turn() -> str:
            nonlocal transcript
            answer = agent.run("go", history=transcript)
            assert agent.last_result is not None
            transcript = agent.last_result.transcript
            return answer

        return _conversation(turn, turns)

    def fresh_way() -> list[float]:
        return _conversation(lambda: agent.run("go"), turns)

    ways = [("session", session_way), ("history", history_way), ("fresh", fresh_way)]
    try:
        for _, way in ways:  # warm-up: imports, the store's tables, first-call caches
            way()
        for r in range(rounds):
            for name, way in ways[r % 3 :] + ways[: r % 3]:
                gc.collect()
                out[name].append(way())
                for f in folder.glob("*.jsonl"):
                    f.unlink()
    finally:
        store.close()
    return out


def report_overhead(store_name: str, times: dict[str, list[list[float]]], turns: int) -> None:
    def per_turn(name: str, how: Callable[[list[float]], float]) -> float:
        return how([sum(c) / len(c) for c in times[name]]) * 1000

    def first(name: str, how: Callable[[list[float]], float]) -> float:
        return how([c[0] for c in times[name]]) * 1000

    rows = []
    for name, label in (
        ("session", "session.send"),
        ("history", "agent.run(history=)"),
        ("fresh", "agent.run (no history)"),
    ):
        rows.append(
            (
                label,
                f"{per_turn(name, min):.3f}",
                f"{per_turn(name, statistics.median):.3f}",
                f"{first(name, min):.3f}",
            )
        )
    ratio = per_turn("session", min) / per_turn("history", min)
    ratio_median = per_turn("session", statistics.median) / per_turn("history", statistics.median)
    ratio_first = first("session", min) / first("fresh", min)
    rows.append(
        (
            "ratio session / run(history=)",
            f"{ratio:.2f}",
            f"{ratio_median:.2f}",
            "",
        )
    )
    rows.append(("ratio first turn / fresh run", "", "", f"{ratio_first:.2f}"))
    print_table(
        f"session turn overhead on {store_name}: {turns}-turn conversations (a tool call and an "
        f"answer each, recording on), ms per turn, {len(times['session'])} interleaved rounds",
        ("", "best", "median", "turn 1 best"),
        rows,
    )
    if store_name == "sqlite":
        met = max(ratio, ratio_first) <= TARGET
        print(f"target: session / plain run <= {TARGET} (best, both ratios): {verdict(met)}")
    else:
        added = per_turn("session", min) - per_turn("history", min)
        print(f"no target on {store_name}: a session turn adds {added:.2f} ms (best runs)")
    print()


# -- 2. load -----------------------------------------------------------------------------


def _sender(
    spec: str,
    folder: str,
    proc: int,
    threads: int,
    per_thread: int,
    sessions: int,
    delay: float,
    start: Any,
) -> list[tuple[str, str, str, str, float]]:
    """One process: ``threads`` threads sending ``per_thread`` messages each."""
    agent = build_agent(Path(folder), delay)
    store = open_spec(spec)
    results: list[tuple[str, str, str, str, float]] = []
    lock = threading.Lock()

    def run(t: int) -> None:
        g = proc * threads + t
        handles: dict[str, Session] = {}
        start.wait()
        for j in range(per_thread):
            sid = f"load-{(g * 7 + j * 13) % sessions}"
            session = handles.setdefault(sid, Session(agent, store, sid))
            text = f"w{g}-{j}"
            t0 = time.perf_counter()
            try:
                result = session.send(text)
            except Exception as e:  # counted and shown: a send that fails is a failure
                with lock:
                    results.append((sid, text, "", f"error: {type(e).__name__}: {e}", 0.0))
                continue
            took = time.perf_counter() - t0
            with lock:
                results.append((sid, text, result.message_id, result.status, took))

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    store.close()
    return results


def load(
    spec: str, folder: Path, procs: int, threads: int, per_thread: int, sessions: int, delay: float
) -> tuple[float, list[tuple[str, str, str, str, float]]]:
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager()
    start = manager.Event()
    with ctx.Pool(procs) as pool:
        jobs = [
            pool.apply_async(
                _sender,
                (spec, str(folder), p, threads, per_thread, sessions, delay, start),
            )
            for p in range(procs)
        ]
        time.sleep(2.0)  # the processes import af and open the store
        t0 = time.perf_counter()
        start.set()
        results = [r for job in jobs for r in job.get(timeout=1800)]
        wall = time.perf_counter() - t0
    manager.shutdown()
    return wall, results


def check_load(
    spec: str, folder: Path, results: list[tuple[str, str, str, str, float]]
) -> dict[str, int]:
    """Read every session back and count what went wrong: messages lost (sent, taken by no
    turn), taken twice, or out of the order their sender sent them in; sessions left busy."""
    agent = build_agent(folder)
    store = open_spec(spec)
    sent: dict[str, dict[str, str]] = defaultdict(dict)  # session -> id -> text
    for sid, text, mid, status, _ in results:
        if not status.startswith("error"):
            sent[sid][mid] = text
    counts = dict.fromkeys(
        ("turns", "taken", "lost", "twice", "unordered", "busy", "unanswered"), 0
    )
    try:
        for sid, ids in sent.items():
            session = Session(agent, store, sid)
            info = session.info()
            if info is None or info.state != "idle" or info.inbox:
                counts["busy"] += 1
            these = session.turns()
            counts["turns"] += len(these)
            got = [i for t in these for i in t.messages]
            counts["twice"] += len(got) - len(set(got))
            counts["lost"] += len(set(ids) - set(got))
            counts["unanswered"] += sum(t.status != "answer" for t in these)
            counts["taken"] += len(set(got) & set(ids))
            # Each sender's messages in the order sent, each once, in the transcript.
            texts: list[str] = []
            transcript = session.transcript()
            for m in transcript:
                if isinstance(m, UserMessage):
                    texts += [line for line in m.content.splitlines() if line and line[0] != "["]
            if sorted(texts) != sorted(ids.values()):
                counts["lost"] += len(set(ids.values()) - set(texts))
                counts["twice"] += len(texts) - len(set(texts))
            last: dict[str, int] = {}
            for text in texts:
                sender, j = text.split("-")
                if last.get(sender, -1) >= int(j):
                    counts["unordered"] += 1
                last[sender] = int(j)
            answers = sum(isinstance(m, AssistantMessage) for m in transcript)
            counts["unanswered"] += max(0, len(these) - answers)
    finally:
        store.close()
    counts["sessions"] = len(sent)
    return counts


def report_load(
    store_name: str,
    wall: float,
    results: list[tuple[str, str, str, str, float]],
    counts: dict[str, int],
    procs: int,
    threads: int,
) -> None:
    latencies = sorted(r[4] for r in results if not r[3].startswith("error"))
    queued = sum(r[3] == "queued" for r in results)
    failed = [r[3] for r in results if r[3].startswith("error")]

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    print_table(
        f"load on {store_name}: {counts['sessions']} sessions, {procs} processes x {threads} "
        f"threads sending at once",
        ("", "figure"),
        [
            ("messages sent", f"{len(results)}"),
            ("send() that raised", f"{len(failed)}" + (f" ({failed[0]})" if failed else "")),
            ("messages taken by a turn (each once)", f"{counts['taken']}"),
            (
                "lost / taken twice / out of order",
                f"{counts['lost']} / {counts['twice']} / {counts['unordered']}",
            ),
            (
                "sessions left busy / turns without an answer",
                f"{counts['busy']} / {counts['unanswered']}",
            ),
            ("turns", f"{counts['turns']}"),
            ("messages per turn", f"{counts['taken'] / counts['turns']:.2f}"),
            ("sent while a turn ran (queued)", f"{queued} ({queued / len(results):.0%})"),
            ("wall time, s", f"{wall:.2f}"),
            ("messages / s", f"{len(results) / wall:.0f}"),
            ("turns / s", f"{counts['turns'] / wall:.0f}"),
            ("send() latency p50 / p99, ms", f"{pct(0.5):.1f} / {pct(0.99):.1f}"),
        ],
    )
    clean = not failed and not any(
        counts[k] for k in ("lost", "twice", "unordered", "busy", "unanswered")
    )
    print(f"target: no message lost, duplicated or reordered: {verdict(clean)}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stores", default="sqlite", help="sqlite, postgres, or both: sqlite,postgres"
    )
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--threads", type=int, default=13)
    parser.add_argument("--messages", type=int, default=20, help="per thread")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.005, help="the model's answer, s")
    parser.add_argument("--skip", choices=["overhead", "load"], default=None)
    args = parser.parse_args()
    with ExitStack() as stack:
        for store_name in args.stores.split(","):
            root = Path(tempfile.mkdtemp(prefix="af-bench-sessions-"))
            stack.callback(shutil.rmtree, root, True)
            if store_name == "postgres":
                from scripts.postgres_server import postgres_server

                server = stack.enter_context(postgres_server())
                import psycopg

                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute("CREATE DATABASE overhead")
                    conn.execute("CREATE DATABASE load")
                spec = {k: server.rsplit("/", 1)[0] + f"/{k}" for k in ("overhead", "load")}
            elif store_name == "sqlite":
                spec = {k: str(root / k / ".af" / "sessions.db") for k in ("overhead", "load")}
            else:
                parser.error(f"unknown store {store_name!r}")
            if args.skip != "overhead":
                folder = root / "overhead-recordings"
                folder.mkdir()
                times = overhead(spec["overhead"], folder, args.turns, args.rounds)
                report_overhead(store_name, times, args.turns)
            if args.skip != "load":
                folder = root / "load-recordings"
                folder.mkdir()
                wall, results = load(
                    spec["load"],
                    folder,
                    args.processes,
                    args.threads,
                    args.messages,
                    args.sessions,
                    args.delay,
                )
                counts = check_load(spec["load"], folder, results)
                report_load(store_name, wall, results, counts, args.processes, args.threads)


if __name__ == "__main__":
    main()
