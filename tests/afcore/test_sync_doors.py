"""The synchronous doors run on their thread's own event loop, kept from run to run: what
``asyncio.run`` promised each run (context, no leftovers, Ctrl-C, the refusal inside a
running loop) still holds, loop-bound objects survive between a thread's runs, and threads
and forked children each get loops of their own."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from afcore import Agent, UsageError, define_tool, mock
from afcore.flows import Sequence
from afcore.loop._sync import run_sync
from afcore.messages import Request, ToolResultMessage
from afcore.providers import anthropic

ROOT = Path(__file__).resolve().parents[2]

caller: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="unset")


def agent_with(tool: Any) -> Agent:
    """An agent that calls ``tool`` once per run, then answers ``done``."""

    def respond(request: Request) -> Any:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return {"tool_calls": [{"id": "c1", "name": tool.name, "args": {}}]}

    return Agent.create(provider=mock(respond=respond), model="m", record=False).tool(tool).build()


def probe(fn: Any, name: str = "probe") -> Any:
    return define_tool(name, "Probe the run.", {"type": "object"}, fn)


def test_each_run_sees_the_callers_context_as_it_is_and_keeps_its_own_changes_inside() -> None:
    seen: list[str] = []

    async def look(args: dict[str, Any], ctx: Any) -> str:
        seen.append(caller.get())
        caller.set("set by the tool")
        return "ok"

    agent = agent_with(probe(look))
    token = caller.set("first")
    try:
        agent.run("go")
        assert caller.get() == "first"
        caller.set("second")
        agent.run("go")
        assert caller.get() == "second"
    finally:
        caller.reset(token)
    assert seen == ["first", "second"]


def test_one_thread_keeps_its_loop_and_another_thread_has_its_own() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def look(args: dict[str, Any], ctx: Any) -> str:
        loops.append(asyncio.get_running_loop())
        return "ok"

    agent = agent_with(probe(look))
    agent.run("go")
    agent.run("go")
    other = threading.Thread(target=agent.run, args=("go",))
    other.start()
    other.join()
    assert loops[0] is loops[1] and loops[2] is not loops[0]
    # The thread is gone: its loop is closed with it, no warning of an unclosed loop.
    gc.collect()
    assert loops[2].is_closed() and not loops[0].is_closed()


def test_tasks_a_run_leaves_pending_are_cancelled_when_it_ends() -> None:
    left: list[asyncio.Task[None]] = []

    async def spawn(args: dict[str, Any], ctx: Any) -> str:
        left.append(asyncio.get_running_loop().create_task(asyncio.sleep(3600)))
        return "spawned"

    agent_with(probe(spawn)).run("go")
    [task] = left
    assert task.cancelled()


def test_async_generators_a_run_leaves_open_are_closed_when_it_ends() -> None:
    closed: list[str] = []
    held: list[Any] = []

    async def numbers() -> Any:
        try:
            for n in range(10):
                yield n
        finally:
            closed.append("closed")

    async def start(args: dict[str, Any], ctx: Any) -> str:
        gen = numbers()
        held.append(gen)  # still referenced: only the end of the run closes it
        return str(await gen.__anext__())

    agent_with(probe(start)).run("go")
    assert closed == ["closed"]


class _Messages(http.server.BaseHTTPRequestHandler):
    """A Messages API that answers every request with one short text, over keep-alive
    connections; each request's client address says which connection it came on."""

    protocol_version = "HTTP/1.1"
    peers: list[tuple[str, int]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.peers.append(self.client_address)
        body = json.dumps(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "hi"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def messages_api() -> Iterator[tuple[str, list[tuple[str, int]]]]:
    peers: list[tuple[str, int]] = []
    handler = type("Handler", (_Messages,), {"peers": peers})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", peers
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("own_client", [True, False], ids=["given-client", "sdk-client"])
def test_a_providers_http_client_serves_two_sync_runs_on_one_connection(
    messages_api: tuple[str, list[tuple[str, int]]], own_client: bool
) -> None:
    # With a new loop per run, the second run of a given client failed ("Event loop is
    # closed": its pooled connection belonged to the first run's loop).
    url, peers = messages_api
    client = httpx2.AsyncClient() if own_client else None
    provider = anthropic("claude-x", api_key="sk-test", base_url=url, http_client=client)
    agent = Agent.create(provider=provider, model="claude-x", record=False).build()
    assert agent.run("one") == "hi"
    assert agent.run("two") == "hi"
    assert len(peers) == 2 and peers[0] == peers[1]

    provider.close()  # the SDK's client it made, on the loop its connection belongs to
    if client is not None:
        run_sync(client.aclose(), "close")


def test_a_sync_door_inside_a_running_loop_says_which_to_await_and_starts_nothing() -> None:
    ran: list[str] = []

    async def look(args: dict[str, Any], ctx: Any) -> str:
        ran.append("tool")
        return "ok"

    agent = agent_with(probe(look))
    flow = Sequence.create(record=False).step("a", agent).build()

    async def inside() -> None:
        with pytest.raises(UsageError, match=r"run\(\) was called inside a running event loop"):
            agent.run("go")
        with pytest.raises(UsageError, match=r"await arun\(\.\.\.\) instead"):
            flow.run("go")

    # A coroutine made and never awaited would warn (an error under this suite's filters).
    asyncio.run(inside())
    gc.collect()
    assert ran == [] and agent.last_result is None


def _script(body: str, timeout: float = 120) -> str:
    """``body`` run by a fresh interpreter (warnings shown); its stdout, with nothing on
    stderr. A hang fails the test by its timeout."""
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", textwrap.dedent(body)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


_THREADED = """
    import os, sys, time
    from afcore import Agent, define_tool, mock

    def slow(args, ctx):
        time.sleep(0.05)  # the loop waits in select() for the threads to hand back
        return "ok"

    calls = {"tool_calls": [{"id": f"c{i}", "name": "slow", "args": {}} for i in range(2)]}

    def agent():
        return (
            Agent.create(provider=mock(replies=[calls, "done"]), model="m", record=False)
            .tool(define_tool("slow", "s", {"type": "object"}, slow))
            .build()
        )
"""


def test_a_forked_child_makes_its_own_loop_and_leaves_the_parents_working() -> None:
    # Two tool calls of one reply run on threads, which wake the loop through its
    # self-pipe: a child that unregistered the pipe from the epoll instance it shares with
    # its parent would leave the parent's next run waiting forever.
    out = _script(
        _THREADED
        + """
    import asyncio, gc
    assert agent().run("go") == "done"
    pid = os.fork()
    if pid == 0:
        code = 0 if agent().run("go") == "done" else 1
        gc.collect()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert agent().run("go") == "done"
    print("parent ok")
    """,
        timeout=60,
    )
    assert out.strip() == "parent ok"


def test_ctrl_c_cancels_the_run_raises_keyboard_interrupt_and_the_next_run_goes_on() -> None:
    out = _script(
        """
        import asyncio, signal
        from afcore import Agent, define_tool, mock

        async def interrupt(args, ctx):
            signal.raise_signal(signal.SIGINT)
            await asyncio.sleep(60)
            return "never"

        calls = {"tool_calls": [{"id": "c1", "name": "interrupt", "args": {}}]}
        agent = (
            Agent.create(provider=mock(replies=[calls, "done"]), model="m")
            .tool(define_tool("interrupt", "i", {"type": "object"}, interrupt))
            .build()
        )
        try:
            agent.run("go")
        except KeyboardInterrupt:
            print("interrupted", agent.last_result.status)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        again = Agent.create(provider=mock(reply="hi"), model="m", record=False).build()
        print(again.run("go"))
        """
    )
    assert out.split() == ["interrupted", "interrupted", "hi"]


@pytest.mark.skipif(sys.platform != "linux", reason="reads the main thread's wait in /proc")
def test_ctrl_c_taken_by_another_thread_wakes_a_run_asleep_in_its_selector() -> None:
    # A process-directed SIGINT goes to any thread that does not block it. Taken by another
    # thread, the C handler only marks it for the main thread; a run asleep in its selector
    # with a long timeout must wake and stop all the same. The main thread blocks SIGINT
    # here so that the other thread is the one that takes it, as it may under load.
    out = _script(
        """
        import asyncio, os, signal, threading, time
        from afcore.loop._sync import run_sync

        main = threading.get_native_id()
        asleep = threading.Event()

        def wchan():
            with open(f"/proc/self/task/{main}/wchan") as f:
                return f.read()

        def other():
            asleep.wait()
            while "epoll" not in wchan() and wchan() not in ("", "0"):
                time.sleep(0.01)
            if wchan() in ("", "0"):  # the kernel does not say: leave the loop time to sleep
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGINT)

        async def run():
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            asleep.set()
            await asyncio.sleep(600)

        threading.Thread(target=other, daemon=True).start()
        try:
            run_sync(run(), "run")
        except KeyboardInterrupt:
            print("interrupted")
        """,
        timeout=60,
    )
    assert out.split() == ["interrupted"]


def test_the_signal_wake_is_armed_only_for_a_run_that_waits_and_put_back_after_it() -> None:
    # A signal need only wake a loop asleep in its selector: a run that never sleeps there
    # leaves the wakeup fd alone; one that does has it armed while it sleeps, and the fd
    # in force before is put back when the run ends, whichever way it ends.
    out = _script(
        """
        import asyncio, signal
        from afcore import Agent, mock
        from afcore.loop._sync import run_sync

        set_fds = []
        real = signal.set_wakeup_fd

        def spy(fd, **kw):
            set_fds.append(fd)
            return real(fd, **kw)

        signal.set_wakeup_fd = spy
        agent = Agent.create(provider=mock(reply="hi"), model="m", record=False).build()
        print(agent.run("go"), len(set_fds))
        armed = []

        async def waits():
            await asyncio.sleep(0.01)
            armed.append(real(-1))  # the fd in force while the run sleeps...
            real(armed[-1])  # ...left as it was

        run_sync(waits(), "run")
        print(armed[0] >= 0, len(set_fds), real(-1))
        async def fails():
            await asyncio.sleep(0.01)
            raise ValueError("x")

        try:
            run_sync(fails(), "run")
        except ValueError:
            print("raised", len(set_fds), real(-1))
        """
    )
    assert out.split() == ["hi", "0", "True", "2", "-1", "raised", "4", "-1"]


def test_the_loops_are_closed_at_exit_without_a_warning() -> None:
    out = _script(
        _THREADED
        + """
    import threading
    assert agent().run("go") == "done"
    worker = threading.Thread(target=lambda: agent().run("go"))
    worker.start()
    worker.join()
    print("ok")
    """
    )
    assert out.strip() == "ok"


def test_a_sync_run_hands_its_closed_file_to_the_sync_thread_as_the_door_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Woken as the run closes its file, the sync thread would take the GIL from the run's
    # last steps; the door hands the file over as it returns, and the file is durable and
    # closed once the syncs are waited for, as before.
    from afcore import recording
    from afcore.recording import _writer

    handed: list[tuple[int, bool]] = []
    real = _writer._SYNCER._put
    monkeypatch.setattr(_writer._SYNCER, "_put", lambda job: (handed.append(job[:2]), real(job)))
    inside: list[list[tuple[int, bool]]] = []

    async def look(args: dict[str, Any], ctx: Any) -> str:
        return "ok"

    def respond(request: Request) -> Any:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return {"tool_calls": [{"id": "c1", "name": "probe", "args": {}}]}

    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=tmp_path)
        .tool(probe(look))
        .build()
    )

    async def run_and_look() -> str:
        answer = await agent.arun("go")
        # The run is over, its file closed: not handed yet (a sync at an iteration
        # boundary, on a slow machine, goes at once).
        inside.append([job for job in handed if job[1]])
        return answer

    assert run_sync(run_and_look(), "run") == "done"
    assert inside == [[]]
    assert sum(close for _, close in handed) == 1 and handed[-1][1]
    assert recording.wait_for_syncs(timeout=30)
    assert agent.last_recording is not None
    assert _closed(handed[-1][0], agent.last_recording)  # by the sync thread
    with recording.open_recording(agent.last_recording) as r:
        assert recording.verify(r).ok
    # Waited for inside the door, the files it holds are handed over and waited for.
    durable: list[bool] = []

    async def run_and_wait() -> None:
        await agent.arun("go")
        assert recording.wait_for_syncs(timeout=30)
        assert agent.last_recording is not None
        durable.append(_closed(handed[-1][0], agent.last_recording))

    handed.clear()
    run_sync(run_and_wait(), "run")
    assert durable == [True]

    # An async run (no door) hands its file over as it closes.
    async def run_alone() -> list[bool]:
        await agent.arun("go")
        return [close for _, close in handed]

    handed.clear()
    assert asyncio.run(run_alone())[-1:] == [True]


def _closed(fd: int, path: Path) -> bool:
    """Whether ``fd`` no longer refers to the file at ``path`` (closed, or its number
    taken since by another file)."""
    try:
        return os.fstat(fd).st_ino != os.stat(path).st_ino
    except OSError:
        return True


def test_a_child_forked_inside_a_sync_run_holds_none_of_its_parents_files() -> None:
    out = _script(
        """
    import os
    from afcore.recording import _writer
    from afcore.loop._sync import run_sync

    async def fork_inside():
        pid = os.fork()
        if pid == 0:
            # The child's own runs hand their files over as they close.
            ok = getattr(_writer._SYNCER._held, "jobs", None) is None
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    assert run_sync(fork_inside(), "run") == 0
    print("parent ok")
    """,
        timeout=60,
    )
    assert out.strip() == "parent ok"


def test_a_child_forked_while_a_file_is_being_synced_exits_without_waiting_for_it() -> None:
    out = _script(
        """
    import os, sys, time
    from afcore.recording import _writer

    # A closing job the sync thread is still on when the process forks (its callback slow).
    fd = os.open(os.devnull, os.O_RDONLY)
    _writer._SYNCER._put((fd, True, lambda: time.sleep(3), None))
    pid = os.fork()
    if pid == 0:
        # Its exit waits for the syncs asked for in this process (none): a child that
        # waited on its parent's job, which no thread of its own runs, never ended.
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    print("parent ok")
    """,
        timeout=60,
    )
    assert out.strip() == "parent ok"
