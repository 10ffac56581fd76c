"""A process that talks to a session, for the tests that need more than one process.

    python -m tests.afcore.sessions.worker post STORE SESSION --prefix p1 --count 20 ...
    python -m tests.afcore.sessions.worker slow STORE SESSION --marker FILE ...

``post`` writes ``--ready`` once it has the session, sends ``<prefix>-0`` ..
``<prefix>-<count-1>`` one after the other (after ``--go`` exists, so that two workers start
together) and prints one JSON line per send. With ``--overlap LOCK``, the worker that creates
``LOCK`` first holds the model call of its first turn until another process's message waits
in the inbox: that the workers overlap does not depend on how fast each starts. ``slow``
sends a message that runs the blocking ``slow`` tool, which writes ``--marker`` and then
blocks for ten minutes: the test kills the process while it does.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from afcore.sessions import PostgresStore, SessionStore, SQLiteStore
from tests.afcore.sessions.agents import SLOW, blocking_slow_tool, builder

GUARD = 120
"""Seconds to wait for the other process: a guard against a hang, not a measure."""


def _open(spec: str) -> SessionStore:
    return PostgresStore(spec) if spec.startswith("postgresql://") else SQLiteStore(spec)


def held_until_another_posts(spec: str, session: str, lock: Path) -> Callable[[], None]:
    """Before a model call: the first caller of all processes (the one that creates
    ``lock``) waits until a message waits in the session's inbox."""

    def hold() -> None:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        deadline = time.monotonic() + GUARD
        with _open(spec) as store:
            while (info := store.info(session)) is None or info.inbox == 0:
                if time.monotonic() > deadline:
                    sys.exit("no other process posted while this turn ran")
                time.sleep(0.01)

    return hold


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["post", "slow"])
    parser.add_argument("store")
    parser.add_argument("session")
    parser.add_argument("--recordings", type=Path, required=True)
    parser.add_argument("--prefix", default="p")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--go", type=Path)
    parser.add_argument("--ready", type=Path)
    parser.add_argument("--overlap", type=Path)
    parser.add_argument("--marker", type=Path)
    args = parser.parse_args()
    if args.mode == "slow":
        agent = builder(
            args.store,
            args.recordings,
            slow=blocking_slow_tool(args.marker, 600),
            delay=args.delay,
        ).build()
        agent.session(args.session).send(SLOW)
        sys.exit("the slow turn ended, but it should have been killed")
    hold = None
    if args.overlap is not None:
        hold = held_until_another_posts(args.store, args.session, args.overlap)
    agent = builder(args.store, args.recordings, delay=args.delay, before_reply=hold).build()
    session = agent.session(args.session)
    if args.ready is not None:
        args.ready.write_text("ready")
    if args.go is not None:
        deadline = time.monotonic() + GUARD
        while not args.go.exists():
            if time.monotonic() > deadline:
                sys.exit(f"{args.go} never appeared")
            time.sleep(0.005)
    for k in range(args.count):
        result = session.send(f"{args.prefix}-{k}")
        line = {"text": f"{args.prefix}-{k}", "status": result.status, "id": result.message_id}
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
