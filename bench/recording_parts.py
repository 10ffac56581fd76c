"""What each part of the recorder costs inside the loop: the scripted loop with recording
off, on, and on with one part of the recorder's per-iteration work taken out at a time.

A part's cost is what the loop saves without it (best of interleaved runs); what the parts
do not account for is the loop's own recording glue (the records' fields it gathers) and
the interplay of the parts (caches, the allocator). Runs are timed in the loop thread's CPU
time, which a machine shared with other work disturbs far less than the wall clock (time
spent waiting for the sync thread's GIL is not counted). Taking a part out breaks the recording
(nothing is screened, nothing is written...): the files are thrown away, and nothing here
is a benchmark with a target (``bench.recording_cost`` is). cProfile (``bench.profile_loop``)
slows every Python call about threefold; this times the loop as it runs.

The floor is timed twice: alone (its steps in a loop of their own, which keeps them hot in
the caches), and in the loop (the recorder's methods doing the floor's steps and nothing
else, the rest of the run as it is, its header and closing included): what recording can
cost at best where it runs, between the provider, the tools and the loop's own work.
Run: ``python -m bench.recording_parts``.
"""

from __future__ import annotations

import argparse
import binascii
import gc
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson

import afcore.recording._writer as writer
from afcore.messages import AssistantMessage, ToolCall, ToolResultMessage
from afcore.recording._models import Line
from afcore.secrets import Redaction
from bench._af_loop import build_agent, recordings_dir, run_once
from bench._report import print_table

Recorder = writer.Recorder


@contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


class _NoWrite:
    """The ``os`` module as the writer sees it, but writing nothing."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def write(fd: int, data: Any) -> int:
        return len(data)


@contextmanager
def _no_screen() -> Iterator[None]:
    """Each run's redactor says no value holds a secret (restored after)."""
    made: list[tuple[Any, Any]] = []
    init = Recorder.__init__

    def patched(self: Recorder, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append((self.redactor, self.redactor.screen))
        self.redactor.screen = lambda raw: False

    with _patched(Recorder, "__init__", patched):
        try:
            yield
        finally:
            for redactor, screen in made:
                redactor.screen = screen


def _message(self: Recorder, message: Any, **_: Any) -> tuple[int, Line]:
    n = self._messages = self._messages + 1
    return n, Line({"key": f"message:{n}", "value": None})


def _count(self: Recorder, *args: Any, **kwargs: Any) -> int:
    self.seq += 1
    return self.seq


def _call(self: Recorder, *args: Any, **kwargs: Any) -> str:
    self.flush()  # the write and its seal stay
    return ""


def _flush(self: Recorder) -> None:
    self._pending.clear()


PARTS: dict[str, Callable[[], Any]] = {
    "the write (os.write)": lambda: _patched(writer, "os", _NoWrite()),
    "the seal and the write (flush)": lambda: _patched(Recorder, "flush", _flush),
    "the screen (2 values)": _no_screen,
    "messages: JSON, screen, id (2)": lambda: _patched(Recorder, "message", _message),
    "the reply's record": lambda: _patched(Recorder, "reply", _count),
    "the tool's commit": lambda: _patched(Recorder, "commit", _count),
    "the call's hashes and record": lambda: _patched(Recorder, "call", _call),
}


def _floor(iterations: int, folder: Path) -> float:
    """Seconds for what recording an iteration cannot do without, done alone for the same
    iterations: the canonical JSON of its two messages, their screen and ids, the window's
    and the call's hashes, its three records (orjson, the messages inside as fragments),
    the seal's hash and one write. No Python glue beyond this loop's own."""
    redactor = Redaction().compile()
    screen = redactor.screen
    tool_calls = [ToolCall(str(n), "echo", {"n": n}) for n in range(1, iterations + 1)]
    replies = [AssistantMessage((c,)) for c in tool_calls]
    results = [ToolResultMessage(c.id, "echo", f"ok {c.id}") for c in tool_calls]
    sha256, b64, urlsafe = hashlib.sha256, binascii.b2a_base64, bytes.maketrans(b"+/", b"-_")
    dumps, fragment, canonical = orjson.dumps, orjson.Fragment, orjson.OPT_SORT_KEYS
    before, after = b'{"messages":"', b'","model":"mock","system":[],"tools":[]}'
    path = folder / "floor.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        gc.collect()
        start = time.thread_time()
        history, chain = sha256(), b""
        for n in range(iterations):
            ids = []
            for message in (replies[n], results[n]):
                raw = dumps(message.to_json(), option=canonical)
                screen(raw)
                ids.append(raw)
                hashed = b64(sha256(raw).digest()[:16])[:22].translate(urlsafe)
                history.update(hashed)
            window = b64(history.copy().digest()[:16])[:22].translate(urlsafe)
            call = b64(sha256(before + window + after).digest()[:16])[:22].translate(urlsafe)
            lines = [
                dumps({"t": "reply", "seq": n, "writes": [fragment(ids[0])], "ms": 0.01}),
                dumps({"t": "commit", "seq": n, "writes": [fragment(ids[1])], "ms": 0.01}),
                dumps({"t": "call", "seq": n, "window": [(1, n)], "hash": call.decode()}),
                b"",
            ]
            batch = b"\n".join(lines)
            chain = sha256(chain + batch).digest()[:16]
            seal = b64(chain)[:22].translate(urlsafe)
            os.write(fd, batch + b'{"t":"seal","h":"' + seal + b'"}\n')
        return time.thread_time() - start
    finally:
        os.close(fd)
        path.unlink()


class _FloorRecorder:
    """The recorder's per-iteration methods doing the floor's steps and nothing else (no
    versions, reads, ranges, sparse fields, observers, sync): the floor as the loop pays it,
    its own calls into the recorder included. Its files are thrown away."""

    _sha256, _b64 = hashlib.sha256, binascii.b2a_base64
    _urlsafe = bytes.maketrans(b"+/", b"-_")
    _before, _after = b'{"messages":"', b'","model":"mock","system":[],"tools":[]}'

    @staticmethod
    def message(self: Any, message: Any, **_: Any) -> tuple[int, Line]:
        f = _FloorRecorder
        raw = orjson.dumps(message.to_json(), option=orjson.OPT_SORT_KEYS)
        self.redactor.screen(raw)
        hashed = f._b64(f._sha256(raw).digest()[:16])[:22].translate(f._urlsafe)
        self._history_digest.update(hashed)
        n = self._messages = self._messages + 1
        return n, Line({"key": "message", "value": orjson.Fragment(raw)})

    @staticmethod
    def reply(self: Any, *_: Any, message_write: Line, **__: Any) -> int:
        self.seq += 1
        record = {"t": "reply", "seq": self.seq, "writes": [message_write], "ms": 0.01}
        self._pending.append(orjson.dumps(record))
        return int(self.seq)

    @staticmethod
    def commit(self: Any, *_: Any, writes: list[Line] | None = None, **__: Any) -> int:
        self.seq += 1
        record = {"t": "commit", "seq": self.seq, "writes": writes or [], "ms": 0.01}
        self._pending.append(orjson.dumps(record))
        return int(self.seq)

    @staticmethod
    def call(self: Any, *_: Any, **__: Any) -> str:
        f = _FloorRecorder
        window = f._b64(self._history_digest.copy().digest()[:16])[:22].translate(f._urlsafe)
        digest = f._sha256(f._before + window + f._after).digest()[:16]
        self.seq += 1
        record = {
            "t": "call",
            "seq": self.seq,
            "window": [(1, self.seq)],
            "hash": f._b64(digest)[:22].translate(f._urlsafe).decode(),
        }
        self._pending.append(orjson.dumps(record))
        self.flush()
        return ""

    @staticmethod
    def flush(self: Any) -> None:
        f = _FloorRecorder
        pending = self._pending
        if not pending or self._fd < 0:
            pending.clear()
            return
        pending.append(b"")
        batch = b"\n".join(pending)
        pending.clear()
        chain = self._chain = f._sha256(self._chain + batch).digest()[:16]
        seal = f._b64(chain)[:22].translate(f._urlsafe)
        os.write(self._fd, batch + b'{"t":"seal","h":"' + seal + b'"}\n')

    @staticmethod
    def nothing(self: Any, *_: Any, **__: Any) -> None:
        pass


@contextmanager
def _floor_in_the_loop() -> Iterator[None]:
    f = _FloorRecorder
    with ExitStack() as stack:
        for name in ("message", "reply", "commit", "call", "flush"):
            stack.enter_context(_patched(Recorder, name, getattr(f, name)))
        for name in ("before_tool", "sync"):
            stack.enter_context(_patched(Recorder, name, f.nothing))
        yield


def _timed(agent: Any, iterations: int) -> float:
    gc.collect()
    start = time.thread_time()
    run_once(agent, iterations)
    elapsed = time.thread_time() - start
    path = agent.last_recording
    if path is not None:
        path.unlink(missing_ok=True)  # a run that wrote nothing has no file
    return elapsed


def measure(iterations: int, rounds: int) -> tuple[float, float, float, float, dict[str, float]]:
    """Best seconds per run: recording on, off, the floor alone, the floor in the loop, and
    on without each part."""
    with recordings_dir() as folder:
        on = build_agent(iterations, record=folder)
        off = build_agent(iterations, record=None)
        run_once(on, iterations)
        run_once(off, iterations)
        _floor(iterations, folder)
        best_on = best_off = best_floor = best_looped = float("inf")
        without = dict.fromkeys(PARTS, float("inf"))
        for r in range(rounds):
            best_off = min(best_off, _timed(off, iterations))
            best_floor = min(best_floor, _floor(iterations, folder))
            with _floor_in_the_loop():
                best_looped = min(best_looped, _timed(on, iterations))
            names = list(PARTS) if r % 2 == 0 else list(reversed(PARTS))
            for name in names:
                with PARTS[name]():
                    without[name] = min(without[name], _timed(on, iterations))
            best_on = min(best_on, _timed(on, iterations))
    return best_on, best_off, best_floor, best_looped, without


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    n = args.iterations
    on, off, floor, looped, without = measure(n, args.rounds)

    def us(seconds: float) -> str:
        return f"{seconds / n * 1e6:.2f}"

    rows = [(name, us(on - t)) for name, t in without.items()]
    print_table(
        f"recording's parts: {n}-iteration scripted af loop, us per iteration "
        f"(best of {args.rounds} interleaved runs each)",
        ("", "us"),
        [
            ("loop, record=False", us(off)),
            ("loop, recording on", us(on)),
            ("added by recording", us(on - off)),
            ("ratio on / off", f"{on / off:.2f}"),
            ("the floor: what cannot be left out", us(floor)),
            ("ratio at the floor (off + floor) / off", f"{(off + floor) / off:.2f}"),
            ("the floor in the loop (the recorder's methods)", us(looped - off)),
            ("ratio at the floor in the loop", f"{looped / off:.2f}"),
            ("-- saved by taking out --", ""),
            *rows,
        ],
    )


if __name__ == "__main__":
    main()
