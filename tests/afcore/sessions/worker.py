"""A process that talks to a session, for the tests that need more than one process.

    python -m tests.afcore.sessions.worker post STORE SESSION --prefix p1 --count 20 ...
    python -m tests.afcore.sessions.worker slow STORE SESSION --marker FILE ...

``post`` sends ``<prefix>-0`` .. ``<prefix>-<count-1>`` one after the other (after ``--go``
exists, so that two workers start together) and prints one JSON line per send. ``slow``
sends a message that runs the blocking ``slow`` tool, which writes ``--marker`` and then
blocks for ten minutes: the test kills the process while it does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

from tests.afcore.sessions.agents import SLOW, blocking_slow_tool, builder


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
    agent = builder(args.store, args.recordings, delay=args.delay).build()
    session = agent.session(args.session)
    if args.go is not None:
        while not args.go.exists():
            time.sleep(0.005)
    for k in range(args.count):
        result = session.send(f"{args.prefix}-{k}")
        line = {"text": f"{args.prefix}-{k}", "status": result.status, "id": result.message_id}
        sys.stdout.write(orjson.dumps(line).decode() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
