"""A session opened as its turns in order: ``af show --session``, ``af why --session`` and
``af lens --session``, from the session store or from the recordings alone (a session's
recordings attached to a report), with hostile text inside and turns gone missing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from afcore.sessions import SQLiteStore
from tests.afcli.conftest import Invoke
from tests.afcli.test_chat import AF, GUARD, TALKER, _env
from tests.tui.conftest import screen_text, until
from tui.app import LensApp, make_lens_app

HOSTILE = "look [bold red]here[/] \x1b[31mred\x1b[0m \x1b]0;owned\x07"


@pytest.fixture
def chatted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke: Invoke) -> Path:
    """Session ``s1``: three turns (hello; the hostile line; bye) over two processes."""
    (tmp_path / "talker.py").write_text(TALKER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AF_RECORDINGS", str(tmp_path / "runs"))
    first = invoke("chat", "talker.py:make", "-s", "s1", input=f"hello\n{HOSTILE}\n")
    assert first.code == 0, first.err
    second = invoke("chat", "talker.py:make", "-s", "s1", input="bye\n")
    assert second.code == 0, second.err
    return tmp_path


def _run_ids(folder: Path) -> list[str]:
    with SQLiteStore(folder / ".af" / "sessions.db") as store:
        with store.transaction("s1", write=False) as tx:
            return [t.run_id or "" for t in tx.turns()]


def test_show_a_session_turn_by_turn(chatted: Path, invoke: Invoke) -> None:
    ran = invoke("show", "--session", "s1")
    assert ran.code == 0, ran.err
    out = ran.out
    runs = _run_ids(chatted)
    assert out.startswith("session s1  talker  model mock  3 turns in ")
    heads = [line for line in out.splitlines() if line.startswith("━━ turn")]
    assert [h.split()[2] for h in heads] == ["1", "2", "3"]
    assert [h.split("run ")[1].split()[0] for h in heads] == runs
    assert "you  hello" in out and "you  bye" in out
    # What the user typed is shown as text: no markup applied, no escape sequence sent.
    assert "you  look [bold red]here[/] \\x1b[31mred\\x1b[0m \\x1b]0;owned\\x07" in out
    assert "\x1b" not in out
    assert out.index("you  hello") < out.index("you  look") < out.index("you  bye")

    data = invoke("show", "--session", "s1", "--json").json()
    assert data["session"] == "s1"
    assert [t["run_id"] for t in data["turns"]] == runs
    assert [t["turn"] for t in data["turns"]] == [1, 2, 3]
    assert [t["user_message"] for t in data["turns"]] == ["hello", HOSTILE, "bye"]
    assert [t["previous"] for t in data["turns"]] == [None, *runs[:2]]
    assert all(t["status"] == "answer" for t in data["turns"])


def test_a_session_read_from_its_recordings_alone(chatted: Path, invoke: Invoke) -> None:
    runs = _run_ids(chatted)
    (chatted / ".af" / "sessions.db").unlink()
    by_id = invoke("show", "--session", "s1", "--json").json()
    assert [t["run_id"] for t in by_id["turns"]] == runs
    assert "status" not in by_id["turns"][0]  # no store: the recordings' links alone
    # Any turn's run names the session; its turns are found beside it.
    by_run = invoke("show", "--session", runs[1], "--json").json()
    assert [t["run_id"] for t in by_run["turns"]] == runs
    # A turn gone from the folder is said, and the rest still read in order.
    (chatted / "runs" / f"{runs[0]}.jsonl").unlink()
    ran = invoke("show", "--session", "s1")
    assert ran.code == 0, ran.err
    assert f"turn 1's recording (run {runs[0]}) is not in" in ran.out
    assert "you  hello" not in ran.out and "you  bye" in ran.out


def test_session_errors_are_one_sentence(chatted: Path, invoke: Invoke) -> None:
    ran = invoke("show", "--session", "nobody")
    assert ran.code == 2 and "no session 'nobody' in the session store" in ran.err
    ran = invoke("show", "--session", "s1", "--store", chatted / "other.db")
    assert ran.code == 2 and "there is no session store at" in ran.err
    ran = invoke("show", "RUN", "--session", "s1")
    assert ran.code == 2 and "--session shows a whole session" in ran.err
    ran = invoke("show", "--store", chatted / ".af" / "sessions.db")
    assert ran.code == 2 and "give --session ID" in ran.err
    ran = invoke("why", "--session", "s1", "--turn", "7", "answer")
    assert ran.code == 2 and "session 's1' has no turn 7 recorded here (its turns: 1, 2, 3)" in (
        ran.err
    )
    ran = invoke("why", "--turn", "1", "answer")
    assert ran.code == 2 and "give --session ID too" in ran.err
    for err in (ran.err,):
        assert "Traceback" not in err


def test_a_store_that_lost_a_turns_recording(chatted: Path, invoke: Invoke) -> None:
    runs = _run_ids(chatted)
    (chatted / "runs" / f"{runs[1]}.jsonl").unlink()
    ran = invoke("show", "--session", "s1")
    assert ran.code == 0, ran.err
    assert "turn 2's recording is not at " in ran.out
    assert [line.split()[2] for line in ran.out.splitlines() if line.startswith("━━")] == [
        "1",
        "3",
    ]


def test_why_follows_a_message_back_into_the_turn_that_wrote_it(
    chatted: Path, invoke: Invoke
) -> None:
    runs = _run_ids(chatted)
    ran = invoke("why", "--session", "s1", "message:2")
    assert ran.code == 0, ran.err
    assert ran.out.startswith("message:2  turn 1: assistant 'answer to: hello'")
    assert f"written by turn 1 as its message:2 (af why {runs[0]} message:2):" in ran.out
    assert "message 1: 'hello'" in ran.out  # what turn 1's call read, in turn 1's recording
    data = invoke("why", "--session", "s1", "message:2", "--json").json()
    assert [(o["turn"], o["run_id"], o["key"]) for o in data["origins"]] == [
        (1, runs[0], "message:2")
    ]
    # --turn asks another turn; the answer of turn 2 is the hostile line's, shown as text.
    ran = invoke("why", "--session", "s1", "--turn", "2", "answer")
    assert ran.code == 0, ran.err
    assert "answer to: look [bold red]here[/] \\x1b[31mred" in ran.out
    assert "\x1b" not in ran.out
    listed = invoke("why", "-s", "s1", "--list").out
    assert "message:1     history#0   turn 1" in listed


def test_a_turn_whose_process_died_reads_as_the_store_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke: Invoke
) -> None:
    (tmp_path / "talker.py").write_text(TALKER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AF_RECORDINGS", str(tmp_path / "runs"))
    process = subprocess.Popen(
        [*AF, "chat", "talker.py:make", "-s", "d1"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None
    process.stdin.write(b"run slow\n")
    process.stdin.flush()
    deadline = time.monotonic() + GUARD
    while not (tmp_path / "started").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(GUARD)
    process.stdin.close()
    assert invoke("chat", "talker.py:make", "-s", "d1", input="again\n").code == 0
    ran = invoke("show", "--session", "d1")
    assert ran.code == 0, ran.err
    assert "incomplete: the recording has no run_end" in ran.out
    assert "the session store says turn 1 ended interrupted: the process running the turn" in (
        ran.out
    )


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[LensApp]:
    """The Lens apps af lens made, instead of running them."""
    seen: list[LensApp] = []
    monkeypatch.setattr(LensApp, "run", lambda self: seen.append(self))
    return seen


def test_lens_opens_a_session_at_a_turn(
    chatted: Path, invoke: Invoke, opened: list[LensApp]
) -> None:
    runs = _run_ids(chatted)
    assert invoke("lens", "--session", "s1").code == 0
    assert invoke("lens", "--session", "s1", "--turn", "1").code == 0
    assert [Path(a.rec.path).stem for a in opened] == [runs[2], runs[0]]
    session = opened[0].session_runs()
    assert session is not None and [t.run_id for t in session.turns] == runs
    ran = invoke("lens", "RUN", "--session", "s1")
    assert ran.code == 2 and "name one with --turn N" in ran.err


async def test_lens_steps_from_turn_to_turn(chatted: Path) -> None:
    runs = _run_ids(chatted)
    # Opened on a turn's recording alone, it finds the session's other turns beside it.
    app = make_lens_app(chatted / "runs" / f"{runs[1]}.jsonl")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert f"{runs[1]}  talker  model mock  turn 2/3 of session s1" in screen_text(app)

        def on(turn: int) -> bool:
            """Whether the turn's screen is on top, drawn, its footer too (drawn after)."""
            said = f"{runs[turn - 1]}  talker  model mock  turn {turn}/3 of session s1"
            text = screen_text(app)
            return app.screen.is_mounted and said in text and "[ Prev turn" in text

        await pilot.press("right_square_bracket")
        await until(pilot, lambda: on(3), "turn 3")
        await pilot.press("right_square_bracket")  # the last: stays, and says so
        await until(pilot, lambda: bool(app._notifications), "the note")
        assert runs[2] in screen_text(app)
        assert [n.message for n in app._notifications] == ["turn 3 is the session's last one here"]
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: on(2), "turn 2")
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: on(1), "turn 1")
        text = screen_text(app)
        assert "[ Prev turn" in text


async def test_lens_on_a_run_of_no_session_hides_the_turn_keys(chatted: Path) -> None:
    from tests.tui.conftest import SAMPLES

    app = make_lens_app(SAMPLES / "sample-trip.jsonl")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("right_square_bracket")
        await pilot.pause()
        text = screen_text(app)
        assert "Prev turn" not in text and "of session" not in text
        assert "trip-demo" in text  # the run is on screen, without the session's keys
