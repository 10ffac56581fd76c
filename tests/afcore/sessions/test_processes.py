"""Sessions across processes, on both stores: two processes posting to one session at once,
and a process killed with SIGKILL in the middle of a turn."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from afcore import recording as rec
from afcore.messages import AssistantMessage, ToolResultMessage, UserMessage
from afcore.sessions import SessionStore
from afcore.sessions._turns import PROCESS_STOPPED
from tests.afcore.sessions.agents import SLOW, builder
from tests.afcore.sessions.conftest import open_spec

ROOT = Path(__file__).resolve().parents[3]
COUNT = 15


def worker(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.afcore.sessions.worker", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for(path: Path, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the worker ended early: {proc.communicate()[1].decode()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.01)


@pytest.mark.slow
def test_two_processes_posting_at_once_get_one_turn_at_a_time_and_every_answer(
    store_spec: str, tmp_path: Path
) -> None:
    recordings = tmp_path / "recordings"
    go = tmp_path / "go"
    procs = [
        worker(
            "post",
            store_spec,
            "shared",
            "--prefix",
            prefix,
            "--count",
            str(COUNT),
            "--delay",
            "0.02",
            "--go",
            str(go),
            "--ready",
            str(tmp_path / f"ready-{prefix}"),
            "--overlap",
            str(tmp_path / "held"),
            "--recordings",
            str(recordings),
        )
        for prefix in ("p1", "p2")
    ]
    for prefix, p in zip(("p1", "p2"), procs, strict=True):
        wait_for(tmp_path / f"ready-{prefix}", p)
    go.write_text("go")  # both have the session: they start together
    sent: list[dict[str, str]] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
        sent += [orjson.loads(line) for line in out.splitlines()]
    assert len(sent) == 2 * COUNT
    # The first turn waited for the other process's message (--overlap), so at least one.
    assert any(s["status"] == "queued" for s in sent), "the processes never overlapped"

    store = open_spec(store_spec)
    try:
        session = builder(store, recordings).build().session("shared")
        info = session.info()
        assert info is not None and (info.state, info.inbox) == ("idle", 0)
        turns = session.turns()
        # Every message taken by exactly one turn; none lost, none twice.
        taken = [i for t in turns for i in t.messages]
        assert sorted(taken) == sorted(s["id"] for s in sent)
        assert len(set(taken)) == len(taken)
        # One turn at a time: each began after the one before it ended.
        assert all(t.status == "answer" for t in turns)
        for before, after in zip(turns, turns[1:], strict=False):
            assert before.ended is not None and before.ended <= after.started
        # Each turn's user message holds its messages in the order they were sent, and the
        # reply right after it answers exactly that.
        transcript = session.transcript()
        assert len(transcript) == 2 * len(turns)
        order: list[str] = []
        for user, reply in zip(transcript[::2], transcript[1::2], strict=True):
            assert isinstance(user, UserMessage) and isinstance(reply, AssistantMessage)
            assert reply.text == f"answer to: {user.content}"
            parts = [
                line for line in user.content.splitlines() if line and not line.startswith("[af-")
            ]
            order += parts
        assert sorted(order) == sorted(s["text"] for s in sent)
        for prefix in ("p1", "p2"):
            mine = [int(t.split("-")[1]) for t in order if t.startswith(prefix)]
            assert mine == list(range(COUNT))
        for t in turns:
            assert rec.verify(rec.open_recording(Path(str(t.recording)))).ok
    finally:
        store.close()


@pytest.mark.slow
def test_a_turn_killed_mid_tool_is_recovered_by_the_next_message(
    store_spec: str, tmp_path: Path
) -> None:
    recordings = tmp_path / "recordings"
    marker = tmp_path / "started"
    # The model takes 20 ms, as a real one takes longer: its reply is written before the
    # tool it asks for runs (a scripted model's instant replies share the next write).
    proc = worker(
        "slow",
        store_spec,
        "crashy",
        "--marker",
        str(marker),
        "--recordings",
        str(recordings),
        "--delay",
        "0.02",
    )
    try:
        wait_for(marker, proc)
        store: SessionStore = open_spec(store_spec)
        session = builder(store, recordings).build().session("crashy")
        waiting = session.send("queued while it ran")
        assert waiting.status == "queued"
        running = session.info()
        assert running is not None and running.state == "running"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)  # reaped: a zombie would still look alive
    try:
        assert proc.returncode == -signal.SIGKILL
        result = session.send("after the crash")
        assert result.status == "answer" and result.turn == 2
        transcript = session.transcript()
        assert transcript[0] == UserMessage(SLOW)
        call = transcript[1]
        assert isinstance(call, AssistantMessage) and [c.name for c in call.tool_calls] == ["slow"]
        closing = transcript[2]
        assert isinstance(closing, ToolResultMessage) and closing.is_error
        assert closing.tool_call_id == call.tool_calls[0].id
        assert f"did not finish: {PROCESS_STOPPED}" in closing.content
        delivered = transcript[3]
        assert isinstance(delivered, UserMessage)
        assert re.fullmatch(
            r"(\[af-[0-9a-f]{12}) message 1 of 2\]\nqueued while it ran\n\n"
            r"\1 message 2 of 2\]\nafter the crash",
            delivered.content,
        ), delivered.content
        assert isinstance(transcript[4], AssistantMessage)
        assert transcript[4].text == f"answer to: {transcript[3].content}"
        turns = session.turns()
        assert [(t.status, t.note) for t in turns] == [
            ("interrupted", PROCESS_STOPPED),
            ("answer", None),
        ]
        assert turns[1].messages == (waiting.message_id, result.message_id)
        # The killed turn's recording holds what it reached, and says it did not finish.
        killed = rec.open_recording(Path(str(turns[0].recording)))
        assert killed.end is None
        # The reply that asked for the tool went out before the tool ran.
        assert any(
            isinstance(r, rec.Reply) and [c.name for c in r.tool_calls] == ["slow"]
            for _, r in killed.records()
        )
        # The next turn's recording verifies, with the closed call among what it continues.
        report = rec.verify(rec.open_recording(Path(str(turns[1].recording))))
        assert report.ok, report.problems
    finally:
        store.close()
