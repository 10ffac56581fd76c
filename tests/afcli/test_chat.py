"""``af chat`` as a person uses it: lines typed (or piped) become turns of a session kept in a
store, Ctrl-C interrupts the running turn and a second one leaves, and the conversation
goes on in the next process. Driven in subprocesses, through a pipe and through a
pseudo-terminal, with real signals."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import textwrap
import threading
import time
from pathlib import Path

import pytest

from afcore import recording as rec
from afcore.messages import AssistantMessage, TextBlock, ToolResultMessage, UserMessage
from afcore.sessions import SQLiteStore
from tests.afcli.conftest import Invoke

TALKER = textwrap.dedent(
    """
    import asyncio, pathlib, signal, threading, time
    from afcore import Agent, define_tool, mock
    from afcore.messages import ToolResultMessage

    HERE = pathlib.Path(__file__).parent

    def reply(request):
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return {"content": f"after {last.name}"}
        for name in ("slow", "stubborn", "gated", "deaf"):
            if name in last.content:
                n = len(request.messages)
                return {"tool_calls": [{"id": f"s{n}", "name": name, "args": {}}]}
        return {"content": f"answer to: {last.content}"}

    def _slow(args, ctx):
        (HERE / "started").write_text("yes")
        time.sleep(600)
        return "done"

    async def _stubborn(args, ctx):
        (HERE / "started").write_text("yes")
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            (HERE / "cancel-seen").write_text("yes")
            await asyncio.sleep(600)  # takes its time to stop
            raise
        return "done"

    async def _deaf(args, ctx):
        # Another thread that takes signals, and a main thread that does not: a Ctrl-C
        # lands on the other thread, as it may on a loaded machine.
        threading.Thread(target=threading.Event().wait, daemon=True).start()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        (HERE / "started").write_text("yes")
        try:
            await asyncio.sleep(600)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return "done"

    def _gated(args, ctx):
        (HERE / "started").write_text("yes")
        while not (HERE / "open").exists():
            time.sleep(0.02)
        return "opened"

    def make():
        slow = define_tool("slow", "Sleeps.", {"type": "object"}, _slow)
        stubborn = define_tool("stubborn", "Sleeps on.", {"type": "object"}, _stubborn)
        gated = define_tool("gated", "Waits for its gate.", {"type": "object"}, _gated)
        deaf = define_tool("deaf", "Sleeps, deaf to signals.", {"type": "object"}, _deaf)
        return Agent.create(provider=mock(respond=reply), model="mock", name="talker").tools(
            [slow, stubborn, gated, deaf]
        ).build()

    def other():
        return Agent.create(provider=mock(reply="hi"), model="mock", name="other").build()
    """
)

AF = [sys.executable, "-c", "from afcli.app import main; main()"]
GUARD = 60
"""Seconds a test waits for a process before calling it hung: a guard, not a measure."""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "AF_RECORDINGS": str(tmp_path / "runs"), "COLUMNS": "200"}


def _store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / ".af" / "sessions.db")


class _Chat:
    """``af chat`` in a subprocess fed through a pipe, its stderr read as it comes."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        (tmp_path / "talker.py").write_text(TALKER)
        self.tmp_path = tmp_path
        self.process = subprocess.Popen(
            [*AF, "chat", "talker.py:make", *args],
            cwd=tmp_path,
            env=_env(tmp_path),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.err: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.err.append(raw.decode())

    def say(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def wait_for(self, text: str = "", path: Path | None = None) -> None:
        deadline = time.monotonic() + GUARD
        while not (path.exists() if path is not None else text in "".join(self.err)):
            assert self.process.poll() is None, "".join(self.err)
            assert time.monotonic() < deadline, f"never saw {text or path}: {''.join(self.err)}"
            time.sleep(0.02)

    def end(self) -> tuple[int, str, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        with self.process.stdout:
            out = self.process.stdout.read()
        code = self.process.wait(GUARD)
        self._reader.join(GUARD)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code, out.decode(), "".join(self.err)


def test_a_piped_conversation_is_kept_turn_by_turn(tmp_path: Path) -> None:
    chat = _Chat(tmp_path, "--session", "piped-1")
    chat.say("hello")
    chat.say("again")
    chat.say("/history")
    code, out, err = chat.end()
    assert code == 0, err
    assert out.splitlines()[:2] == ["answer to: hello", "answer to: again"]
    assert "you    hello" in out and "agent  answer to: again" in out
    assert "session kept: af chat talker.py:make --session piped-1 continues it" in err
    assert "Traceback" not in err
    with _store(tmp_path) as store:
        info = store.info("piped-1")
        assert info is not None and (info.agent, info.turns, info.messages) == ("talker", 2, 4)
        with store.transaction("piped-1", write=False) as tx:
            turns = tx.turns()
    # Each turn is a recording that verifies and names its place in the session.
    links = []
    for t in turns:
        with rec.open_recording(Path(str(t.recording))) as opened:
            assert rec.verify(opened).ok
            assert opened.header.session is not None
            links.append(rec.dump(opened.header.session))
    assert links == [
        {"id": "piped-1", "turn": 1, "previous": None},
        {"id": "piped-1", "turn": 2, "previous": turns[0].run_id},
    ]


def test_a_message_sent_while_another_process_runs_a_turn_waits_its_turn(
    tmp_path: Path,
) -> None:
    first = _Chat(tmp_path, "--session", "both-1")
    first.say("run gated")
    first.wait_for(path=tmp_path / "started")
    second = _Chat(tmp_path, "--session", "both-1")
    second.say("one from the second")
    second.wait_for("queued: a turn of another process is running")
    # Ctrl-C while queued stops waiting; it interrupts nobody's turn, and loses nothing.
    second.process.send_signal(signal.SIGINT)
    second.wait_for("stopped waiting: your message stays in the inbox")
    second.say("two from the second")
    deadline = time.monotonic() + GUARD
    while "".join(second.err).count("queued: ") < 2:
        assert time.monotonic() < deadline, "".join(second.err)
        time.sleep(0.02)
    (tmp_path / "open").write_text("")
    code, out, err = second.end()
    assert code == 0, err
    # Both waiting messages are answered by one turn, the one after the gated one.
    assert "one from the second" in out and "two from the second" in out
    assert out.index("one from the second") < out.index("two from the second")
    assert "answered by turn 2, run " in err
    assert "interrupting the turn" not in err
    code, out, err = first.end()
    assert code == 0, err
    assert out.splitlines() == ["after gated"]
    # The process that ran the turn says whose words the next turn answers.
    said = next(line for line in err.splitlines() if line.startswith("sent meanwhile"))
    assert "(by another sender)" in said and "one from the second" in said
    with _store(tmp_path) as store:
        assert [t.status for t in _turns(store, "both-1")] == ["answer", "answer"]
        assert store.info("both-1").inbox == 0  # type: ignore[union-attr]


def test_ctrl_c_interrupts_the_turn_and_the_conversation_goes_on(tmp_path: Path) -> None:
    chat = _Chat(tmp_path, "--session", "stopped-1")
    chat.say("run slow")
    chat.wait_for(path=tmp_path / "started")
    chat.process.send_signal(signal.SIGINT)
    chat.wait_for("turn 1 interrupted")
    chat.say("and now?")
    code, out, err = chat.end()
    assert code == 0, err
    assert err.index("interrupting the turn: cancelling slow (running") < err.index(
        "turn 1 interrupted: what it did so far is kept; 1 unfinished tool call closed"
    )
    assert "Traceback" not in err
    assert out.splitlines() == ["answer to: and now?"]
    with _store(tmp_path) as store, store.transaction("stopped-1", write=False) as tx:
        turns = tx.turns()
        transcript = tx.transcript()
    assert [(t.status, t.note) for t in turns] == [
        ("interrupted", "the turn was cancelled in its process"),
        ("answer", None),
    ]
    # The unfinished call is answered in the transcript, by af, so the model knows.
    user, asked, closed, *rest = transcript
    assert user.message == UserMessage("run slow")
    assert isinstance(asked.message, AssistantMessage) and asked.message.tool_calls
    assert isinstance(closed.message, ToolResultMessage) and closed.message.is_error
    assert closed.message.tool_call_id == asked.message.tool_calls[0].id
    assert "did not finish" in closed.message.content
    assert closed.note is not None and closed.note.startswith("closed by af")
    assert [m.message for m in rest] == [
        UserMessage("and now?"),
        AssistantMessage((TextBlock("answer to: and now?"),)),
    ]
    # The interrupted turn's recording says so, and verifies.
    with rec.open_recording(Path(str(turns[0].recording))) as opened:
        assert rec.verify(opened).ok
        assert opened.end is not None and opened.end.status == "interrupted"
        (commit,) = opened.tool_commits()
        assert commit.tool is not None and commit.tool.status == "interrupted"


def test_a_second_ctrl_c_leaves_and_the_next_chat_recovers(tmp_path: Path) -> None:
    chat = _Chat(tmp_path, "--session", "left-1")
    chat.say("run slow")
    chat.wait_for(path=tmp_path / "started")
    chat.process.send_signal(signal.SIGINT)
    chat.wait_for("interrupting the turn")
    # Wherever it lands, during the turn or at the prompt after it: the chat ends, without
    # waiting for more input.
    chat.process.send_signal(signal.SIGINT)
    chat.process.wait(GUARD)
    code, out, err = chat.end()
    assert code == 130, err
    assert "Traceback" not in err
    # However far the first got, the next process finds the turn ended or its process gone,
    # and the conversation goes on from what was stored.
    again = _Chat(tmp_path, "--session", "left-1")
    again.say("still there?")
    code, out, err = again.end()
    assert code == 0, err
    assert out.splitlines() == ["answer to: still there?"]
    with _store(tmp_path) as store, store.transaction("left-1", write=False) as tx:
        turns = tx.turns()
        transcript = [m.message for m in tx.transcript()]
    assert [t.status for t in turns] == ["interrupted", "answer"]
    assert transcript[0] == UserMessage("run slow")
    closing = transcript[2]
    assert isinstance(closing, ToolResultMessage) and closing.is_error


def test_a_second_ctrl_c_during_a_turn_that_is_slow_to_stop_leaves_at_once(
    tmp_path: Path,
) -> None:
    chat = _Chat(tmp_path, "--session", "left-2")
    chat.say("be stubborn")
    chat.wait_for(path=tmp_path / "started")
    chat.process.send_signal(signal.SIGINT)
    chat.wait_for(path=tmp_path / "cancel-seen")  # the tool takes ten minutes to stop
    chat.process.send_signal(signal.SIGINT)
    chat.process.wait(GUARD)  # well before the tool stops
    code, _, err = chat.end()
    assert code == 130, err
    assert "Traceback" not in err
    again = _Chat(tmp_path, "--session", "left-2")
    again.say("hello")
    code, out, err = again.end()
    assert code == 0, err
    assert out.splitlines() == ["answer to: hello"]
    with _store(tmp_path) as store:
        assert [t.status for t in _turns(store, "left-2")] == ["interrupted", "answer"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads the chat's wait in /proc")
def test_a_ctrl_c_another_thread_takes_interrupts_the_turn_at_once(tmp_path: Path) -> None:
    chat = _Chat(tmp_path, "--session", "deaf-1")
    chat.say("go deaf")
    chat.wait_for(path=tmp_path / "started")
    # Sent once the chat's main thread sleeps in its event loop's selector (where the
    # kernel says), so that only a wake-up makes it run the handler.
    wchan = Path(f"/proc/{chat.process.pid}/task/{chat.process.pid}/wchan")
    deadline = time.monotonic() + GUARD
    while wchan.read_text() not in ("", "0") and "epoll" not in wchan.read_text():
        assert time.monotonic() < deadline, wchan.read_text()
        time.sleep(0.02)
    chat.process.send_signal(signal.SIGINT)
    chat.wait_for("interrupting the turn")
    code, _, err = chat.end()
    assert code == 0, err
    assert "Traceback" not in err
    with _store(tmp_path) as store:
        assert [t.status for t in _turns(store, "deaf-1")] == ["interrupted"]


def _pty_chat(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], _Screen]:
    """``af chat`` on a pseudo-terminal of its own, as in a terminal: Ctrl-C typed there is
    a SIGINT from the terminal."""
    (tmp_path / "talker.py").write_text(TALKER)
    leader, follower = pty.openpty()
    terminal = os.ttyname(follower)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, b"\x28\x00\xc8\x00\x00\x00\x00\x00")  # 40x200

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**_env(tmp_path), "TERM": "xterm-256color"}
    env.pop("COLUMNS")
    process = subprocess.Popen(
        [*AF, "chat", "talker.py:make", *args],
        cwd=tmp_path,
        env=env,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        preexec_fn=own_terminal,
    )
    os.close(follower)
    return process, _Screen(leader, terminal)


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class _Screen:
    """What the terminal was sent, as text without its escape sequences; each wait reads on
    from where the last one's text was found."""

    def __init__(self, leader: int, terminal: str) -> None:
        self.leader = leader
        self.terminal = terminal
        self.raw = b""
        self.at = 0

    @property
    def text(self) -> str:
        return _ANSI.sub("", self.raw.decode(errors="replace"))

    def read_until(self, wanted: str, again: str | None = None) -> None:
        """Read until ``wanted`` shows; ``again``: keys typed once more each second it
        does not."""
        deadline = time.monotonic() + GUARD
        retype = time.monotonic() + 1
        while (found := self.text.find(wanted, self.at)) < 0:
            assert time.monotonic() < deadline, f"never saw {wanted!r}: {self.text[-3000:]!r}"
            if again is not None and time.monotonic() > retype:
                self.type(again)
                retype = time.monotonic() + 1
            ready, _, _ = select.select([self.leader], [], [], 0.1)
            if ready:
                try:
                    self.raw += os.read(self.leader, 65536)
                except OSError:  # the other end closed: the process has ended
                    assert wanted in self.text[self.at :], self.text[-3000:]
        self.at = found + len(wanted)

    def type(self, keys: str) -> None:
        os.write(self.leader, keys.encode())

    def type_ahead(self, line: str) -> None:
        """Type a line while the program is not reading, and return once the terminal holds
        it: the kernel takes typed keys in later, and until it has, whether they are echoed
        is not yet decided."""
        self.type(line)
        held = os.open(self.terminal, os.O_RDWR | os.O_NOCTTY)
        try:
            deadline = time.monotonic() + GUARD
            while True:
                queued = fcntl.ioctl(held, termios.FIONREAD, b"\0\0\0\0")
                if int.from_bytes(queued, sys.byteorder) >= len(line):
                    return
                assert time.monotonic() < deadline, "the terminal never took the keys"
                time.sleep(0.01)
        finally:
            os.close(held)

    def close(self) -> None:
        os.close(self.leader)


def _wait_for_file(path: Path, process: subprocess.Popen[bytes]) -> None:
    """Until ``path`` exists: a guard against a hang, not a measurement."""
    deadline = time.monotonic() + GUARD
    while not path.exists():
        assert process.poll() is None, f"af chat ended before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def _others_taking_sigint(pid: int) -> list[str]:
    """The threads of ``pid`` but its main one that do not block SIGINT (Linux's /proc says;
    elsewhere, none are known)."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return []
    taking = []
    for task in tasks.iterdir():
        status = dict(
            line.split(":", 1) for line in (task / "status").read_text().splitlines() if ":" in line
        )
        blocked = int(status["SigBlk"], 16)
        if int(task.name) != pid and not blocked & (1 << (signal.SIGINT - 1)):
            taking.append(task.name)
    return taking


def test_in_a_terminal_ctrl_c_interrupts_a_turn_and_another_leaves(tmp_path: Path) -> None:
    process, screen = _pty_chat(tmp_path, "--session", "typed-1")
    try:
        screen.read_until("› ")
        screen.type("hello\r")
        screen.read_until("answer to: hello")
        screen.read_until("› ")
        screen.type("run slow\r")
        screen.read_until("→ slow()")
        _wait_for_file(tmp_path / "started", process)
        # The tool sleeps on the main thread, where only a signal the kernel hands to that
        # thread wakes it: no other thread (the spinner's, the recorder's) may take a Ctrl-C.
        assert _others_taking_sigint(process.pid) == []
        screen.type("\x03")  # Ctrl-C, as the terminal sends it
        screen.read_until("turn 2 interrupted")
        screen.read_until("› ")
        # CPython's readline sees a signal only while it waits in select(): a Ctrl-C that
        # lands while it handles the key before (or prints the prompt) waits for the next
        # key. A person's next Ctrl-C is that key; so is the test's.
        screen.type("\x03")
        screen.read_until("continues it", again="\x03")
        assert process.wait(GUARD) == 130
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        screen.close()
    shown = screen.text
    assert "interrupting the turn: cancelling slow (running" in shown
    assert "Traceback" not in shown
    with _store(tmp_path) as store:
        assert [t.status for t in _turns(store, "typed-1")] == ["answer", "interrupted"]


def _turns(store: SQLiteStore, sid: str) -> list[object]:
    with store.transaction(sid, write=False) as tx:
        return list(tx.turns())


@pytest.fixture
def talker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "talker.py").write_text(TALKER)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AF_RECORDINGS", str(tmp_path / "runs"))
    return tmp_path


def test_commands_and_a_line_that_starts_with_a_slash(talker: Path, invoke: Invoke) -> None:
    ran = invoke("chat", "talker.py:make", "-s", "slashes", input="/nope\n//etc/hosts\n/quit\n")
    assert ran.code == 0, ran.err
    assert "unknown command /nope: /help lists them" in ran.err
    assert ran.out.splitlines() == ["answer to: /etc/hosts"]


def test_a_new_session_gets_an_id_to_continue_it_by(talker: Path, invoke: Invoke) -> None:
    ran = invoke("chat", "talker.py:make", input="hi\n")
    assert ran.code == 0, ran.err
    said = ran.err.splitlines()[-1]
    assert said.startswith("session kept: af chat talker.py:make --session chat-")
    sid = said.split("--session ")[1].split()[0]
    again = invoke("chat", "talker.py:make", "-s", sid, input="/history\n")
    assert "you    hi" in again.out
    assert f"session {sid} · 1 turn so far" in again.err


def test_another_agents_session_is_refused(talker: Path, invoke: Invoke) -> None:
    assert invoke("chat", "talker.py:make", "-s", "mine", input="hi\n").code == 0
    ran = invoke("chat", "talker.py:other", "-s", "mine", input="hi\n")
    assert ran.code == 2
    assert "session 'mine' is a conversation with the agent 'talker', not 'other'" in ran.err


@pytest.mark.parametrize("bad", ["", "a b", "../x", "x" * 129, "é"])
def test_a_hostile_session_id_is_refused(bad: str, talker: Path, invoke: Invoke) -> None:
    ran = invoke("chat", "talker.py:make", "--session", bad, input="hi\n")
    assert ran.code == 2 and "--session: a session id is 1 to 128 characters" in ran.err
    assert not (talker / ".af").exists() or not _store(talker).sessions()


def test_store_takes_a_sqlite_path(talker: Path, invoke: Invoke) -> None:
    path = talker / "elsewhere" / "chats.db"
    assert invoke("chat", "talker.py:make", "-s", "x1", "--store", path, input="hi\n").code == 0
    with SQLiteStore(path) as store:
        assert [s.id for s in store.sessions()] == ["x1"]


def test_in_a_terminal_a_paste_of_several_lines_is_one_message(tmp_path: Path) -> None:
    process, screen = _pty_chat(tmp_path, "--session", "pasted-1")
    try:
        screen.read_until("› ")
        # The prompt asks the terminal to bracket what is pasted (a terminal not asked sends
        # a paste's lines as lines typed, each a message); a bracketed paste is one message.
        assert b"\x1b[?2004h" in screen.raw
        screen.type("\x1b[200~first line\nsecond line\x1b[201~\r")
        screen.read_until("answer after")
        screen.read_until("› ")
        screen.type("/quit\r")
        screen.read_until("continues it")
        assert process.wait(GUARD) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        screen.close()
    with _store(tmp_path) as store:
        assert len(_turns(store, "pasted-1")) == 1
        with store.transaction("pasted-1", write=False) as tx:
            said = [m.message for m in tx.transcript() if isinstance(m.message, UserMessage)]
    assert [m.content for m in said] == ["first line\nsecond line"]


def test_in_a_terminal_what_is_typed_during_a_turn_waits_for_the_prompt(tmp_path: Path) -> None:
    process, screen = _pty_chat(tmp_path, "--session", "ahead-1")
    try:
        screen.read_until("› ")
        screen.type("run gated\r")
        screen.read_until("→ gated()")
        _wait_for_file(tmp_path / "started", process)
        screen.type_ahead("typed meanwhile\r")
        (tmp_path / "open").write_text("")
        screen.read_until("answer after")
        screen.read_until("› typed meanwhile")
        # Not echoed into the turn's output: first shown at the prompt, and sent from there.
        # (What was read may already hold the prompt: the output is checked up to it.)
        shown = screen.text
        first = shown.find("typed meanwhile")
        assert first > shown.find("answer after") > 0, shown
        assert shown[:first].endswith("› "), shown
        screen.read_until("answer to: typed meanwhile")
        screen.read_until("› ")
        screen.type("\x04")  # Ctrl-D
        screen.read_until("continues it")
        assert process.wait(GUARD) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        screen.close()
    with _store(tmp_path) as store:
        assert [t.status for t in _turns(store, "ahead-1")] == ["answer", "answer"]
