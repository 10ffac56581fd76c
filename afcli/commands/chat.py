"""``af chat``: a conversation with an agent in the terminal, kept as a session so that it
outlives the process (``af chat bot.py --session ID`` continues it, from here or elsewhere).

Each message runs one turn of the session (``Session.asend``), shown as ``af run`` shows a
run: the model's words as they stream, the tool calls, and what the turn used. Ctrl-C
interrupts the running turn (what it stored is kept, and its unfinished tool calls are
closed in the transcript); a second Ctrl-C leaves.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from afcli._errors import EXIT_INTERRUPTED, EXIT_USAGE, CliError, command, key_words
from afcli._stores import StoreOption

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from afcli._progress import Progress
    from afcore import Agent
    from afcore.sessions import SendResult, Session, SessionStore

__all__ = ["chat"]

PROMPT = "› "

COMMANDS = [
    ("/history", "the conversation so far, turn by turn"),
    ("/lens", "open the Lens on the last turn ([ and ] there step through the turns)"),
    ("/help", "these commands"),
    ("/quit", "leave (so do Ctrl-D, and Ctrl-C when no turn runs)"),
]
"""What a line starting with / does; //text sends /text."""


class _Leave(Exception):
    """The person asked to leave (a second Ctrl-C)."""


@command
def chat(
    agent: Annotated[
        str,
        typer.Argument(
            metavar="AGENT",
            help="file.py, file.py:NAME or module:NAME: an Agent, or a function with no "
            "arguments returning one (as af run takes it).",
            show_default=False,
        ),
    ],
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            metavar="ID",
            help="The conversation to continue, or to start under this id (1 to 128 of "
            "A-Z a-z 0-9 . _ : -). Default: a new one, whose id is printed.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="PROVIDER:MODEL",
            help="Call this model instead of the agent's own (as af run --model).",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only the answers: no progress."),
    ] = False,
) -> None:
    """Talk with an agent: each message is one turn of a session, kept in a store, so the
    conversation outlives this process and any process can continue it.

    Replies stream as `af run` shows them; each turn is recorded. Ctrl-C interrupts the
    running turn, a second Ctrl-C leaves. Lines starting with / are commands: /history,
    /lens, /help, /quit (//text sends /text). Read from a pipe, each line is a message and
    the answers go to stdout.
    """
    from afcli._loading import load_agent, prepare
    from afcli._render import err_console
    from afcore import Agent
    from afcore.errors import UsageError
    from afcore.sessions import Session, check_session_id

    loaded = load_agent(agent)
    built = loaded.named
    if not isinstance(built, Agent):
        raise CliError(
            f"{agent} is a flow: af chat talks with one agent (run a flow with af run)",
            EXIT_USAGE,
        )
    if model is not None:
        built = built.with_model(model)
    runnable = prepare(built, loaded.source)
    sid = session if session is not None else _new_id()
    try:
        check_session_id(sid)
    except UsageError as e:
        raise CliError(f"--session: {e}", EXIT_USAGE) from None
    opened = _store(store, runnable)
    with opened:
        talk = _Chat(Session(runnable, opened, sid), agent, err_console(), quiet)
        talk.check()
        left = talk.loop()
    if left:
        raise typer.Exit(EXIT_INTERRUPTED)


def _new_id() -> str:
    import secrets

    return f"chat-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def _store(spec: str | None, agent: Agent) -> SessionStore:
    """``--store``, else the agent's own sessions store (``sessions=``), else the default."""
    from afcli._stores import open_store

    if spec is not None:
        store = open_store(spec, create=True)
        assert store is not None
        return store
    from afcore.sessions import open_store as open_spec

    return open_spec(agent.sessions, recordings=agent.recording)


class _Chat:
    def __init__(self, session: Session, spec: str, err: Console, quiet: bool) -> None:
        from afcli._render import out_console

        self.session = session
        self.spec = spec
        self.err = err
        self.out = out_console()
        self.quiet = quiet
        self.interactive = sys.stdin.isatty()
        self._editing = False

    # -- the conversation ----------------------------------------------------------------

    def check(self) -> None:
        """Refuse another agent's session; say where the conversation stands."""
        from rich.text import Text

        from afcore.readmodel import plural, safe

        info = self.session.info()
        agent = self.session.agent.name
        if info is not None and info.agent != agent:
            raise CliError(
                f"session {info.id!r} is a conversation with the agent {info.agent!r}, not "
                f"{agent!r}: give another --session, or chat with {info.agent!r}"
            )
        if self.quiet:
            return
        head = Text.assemble(("chat with ", "dim"), (safe(agent), "bold"))
        head.append(" · session ", "dim")
        head.append(safe(self.session.id), "bold cyan")
        if info is None or not info.turns:
            head.append(" · new", "dim")
        else:
            head.append(
                f" · {plural(info.turns, 'turn')} so far, last {_since(info.last_activity)}",
                "dim",
            )
        self.err.print(head, soft_wrap=True)
        if info is not None and info.stopped:
            self.err.print(
                Text(
                    f"turn {info.turns} lost its process: your next message closes it as "
                    "interrupted, keeping what it stored",
                    "yellow",
                )
            )
        elif info is not None and info.state == "running":
            self.err.print(
                Text("a turn is running in another process: your messages wait for it", "yellow")
            )
        if info is not None and info.inbox:
            self.err.print(
                Text(
                    f"{plural(info.inbox, 'message')} wait in its inbox: the next turn "
                    "answers them with yours",
                    "yellow",
                )
            )
        if self.interactive:
            self.err.print(
                Text("/help lists the commands · Ctrl-C interrupts a turn, twice leaves", "dim")
            )

    def loop(self) -> bool:
        """Read and send until the person leaves; True when they left with Ctrl-C."""
        left = False
        try:
            while True:
                try:
                    text = self._read()
                except EOFError:
                    break
                except KeyboardInterrupt:
                    left = True
                    break
                stripped = text.strip()
                if not stripped:
                    continue
                if stripped.startswith("/") and not stripped.startswith("//"):
                    if self._command(stripped):
                        break
                    continue
                if stripped.startswith("//"):
                    text = stripped[1:]
                self._turn(text)
        except _Leave:
            left = True
        if self.interactive:
            self.err.print()
        if not self.quiet:
            from rich.text import Text

            from afcore.readmodel import safe

            self.err.print(
                Text.assemble(
                    ("session kept: ", "dim"),
                    safe(f"af chat {self.spec} --session {self.session.id}"),
                    (" continues it", "dim"),
                ),
                soft_wrap=True,
            )
        return left

    def _read(self) -> str:
        if not self.interactive:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return line.rstrip("\n")
        if not self._editing:
            import readline  # line editing and history for input()

            # A paste arrives as one message, its lines kept: without this, each line of a
            # pasted stack trace would be a turn of its own. (Python turns it off.)
            readline.parse_and_bind("set enable-bracketed-paste on")
            self._editing = True
        if sys.stdout.isatty():
            return input(PROMPT)
        sys.stderr.write(PROMPT)  # stdout holds only the answers
        sys.stderr.flush()
        return input()

    # -- one turn ------------------------------------------------------------------------

    def _turn(self, text: str) -> None:
        """Send ``text`` and show its turn; Ctrl-C interrupts it, a second one leaves."""
        # Here, not at the top: asyncio alone costs every other command's start-up 14 ms.
        import asyncio
        import signal

        from rich.text import Text

        from afcli._progress import Progress
        from afcore.errors import AfError
        from afcore.readmodel import line, safe

        progress = None if self.quiet else Progress(self.err)
        from afcore.loop import SignalWake

        runner = asyncio.Runner()
        loop = runner.get_loop()
        wake = SignalWake(loop)
        task: asyncio.Task[SendResult] | None = None
        stops = 0
        queued: str | None = None
        """the id of the message, when it waits for another process's turn"""

        def on_sigint(signum: int, frame: object) -> None:
            nonlocal stops
            stops += 1
            if stops > 1 or task is None:
                raise KeyboardInterrupt
            if queued is not None:
                # The turn running is another process's: stop waiting, interrupt nothing.
                loop.call_soon_threadsafe(task.cancel)
                return
            waits = progress.waiting_for() if progress is not None else ""
            self.err.print(
                Text.assemble(
                    ("interrupting the turn", "bold yellow"),
                    f": {waits}" if waits else "",
                    (" · Ctrl-C again leaves", "dim"),
                ),
                soft_wrap=True,
            )
            if progress is not None and progress.footer is not None:
                progress.footer.update(Text("interrupting", "yellow"))
            loop.call_soon_threadsafe(task.cancel)

        headers = 0

        def observe(record: dict[str, Any]) -> None:
            # The turns after the first that this send runs answer what others sent
            # meanwhile: say what, or their answers would come out of nowhere.
            nonlocal headers
            assert progress is not None
            progress(record)
            if record.get("t") == "header":
                headers += 1
            elif headers > 1 and record.get("t") == "commit" and _stage(record) == "seed":
                write = next(
                    (w for w in record.get("writes", []) if w.get("key") == "user_message"), None
                )
                said = progress.value_of(write)
                if isinstance(said, str):
                    head = Text.assemble(
                        ("sent meanwhile ", "bold yellow"), ("(by another sender) ", "dim")
                    )
                    head.append(line(said, max(self.err.width - len(head.plain), 20)))
                    self.err.print(head)

        async def main() -> SendResult:
            nonlocal task, queued
            task = asyncio.current_task()
            sent = await self.session.asend(
                text,
                stream=progress.stream if progress is not None else None,
                observe=observe if progress is not None else None,
            )
            if sent.status == "queued":
                queued = sent.message_id
                if not self.quiet:
                    self.err.print(
                        Text(
                            "queued: a turn of another process is running; your message is "
                            "answered when it ends",
                            "yellow",
                        )
                    )
                sent = await self.session.await_(sent.message_id)
            return sent

        previous = signal.signal(signal.SIGINT, on_sigint)
        result: SendResult | None = None
        echo = self._quiet_keys()
        try:
            with wake.armed():
                if progress is not None and self.err.is_terminal:
                    with progress.footing(Text("sending", "dim")):
                        result = runner.run(main())
                else:
                    result = runner.run(main())
        except asyncio.CancelledError:
            pass  # interrupted: said below
        except KeyboardInterrupt:
            raise _Leave from None
        except AfError as e:
            self.err.print(
                Text.assemble(("error: ", "bold red"), safe(key_words(e) or str(e))),
                soft_wrap=True,
            )
            return
        finally:
            signal.signal(signal.SIGINT, previous)
            wake.close()
            runner.close()
            if echo is not None:
                echo()
        if result is None and queued is not None:
            self.err.print(
                Text(
                    "stopped waiting: your message stays in the inbox, and the turn that "
                    f"takes it answers it (af sessions {self.session.id} shows it)",
                    "yellow",
                ),
                soft_wrap=True,
            )
            return
        if result is None:
            self._interrupted()
            return
        self._show(result, progress)
        if queued is not None and result.turn is not None and not self.quiet:
            self.err.print(
                Text(f"answered by turn {result.turn}, run {result.run_id}", "dim"),
                soft_wrap=True,
            )

    def _quiet_keys(self) -> Callable[[], None] | None:
        """Stop the terminal echoing keys while a turn runs: what is typed meanwhile would
        land inside the turn's output. It is kept, and shows at the next prompt as the next
        message. Returns what puts the echo back (None: not a terminal)."""
        if not self.interactive:
            return None
        import termios

        fd = sys.stdin.fileno()
        try:
            before = termios.tcgetattr(fd)
            quiet = list(before)
            quiet[3] &= ~termios.ECHO
            termios.tcsetattr(fd, termios.TCSANOW, quiet)
        except termios.error:
            return None

        def restore() -> None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSANOW, before)

        return restore

    def _show(self, result: SendResult, progress: Progress | None) -> None:
        from rich.text import Text

        from afcore.readmodel import safe

        if result.status in ("answer", "max_iterations") and result.answer:
            streamed = (
                progress is not None
                and progress.answer_streamed
                and self.err.is_terminal
                and self.out.is_terminal
            )
            if not streamed:
                if self.out.is_terminal:
                    self.out.print(Text(safe(result.answer)), soft_wrap=True)
                else:
                    data = result.answer if result.answer.endswith("\n") else result.answer + "\n"
                    sys.stdout.flush()
                    sys.stdout.buffer.write(data.encode("utf-8", "backslashreplace"))
                    sys.stdout.flush()
        if result.status == "max_iterations":
            self.err.print(
                Text.assemble(
                    ("stopped: ", "bold yellow"),
                    f"turn {result.turn} reached the agent's limit of iterations without an answer",
                )
            )
        elif result.status == "interrupted":
            self.err.print(
                Text.assemble(
                    ("interrupted: ", "bold yellow"),
                    f"turn {result.turn}: {safe(result.note or 'another message interrupted it')}",
                ),
                soft_wrap=True,
            )

    def _interrupted(self) -> None:
        """What a Ctrl-C left: the turn's state as the store now says it."""
        from rich.text import Text

        from afcore.readmodel import plural

        turns = self.session.turns()
        if not turns or turns[-1].status != "interrupted":
            self.err.print(Text("interrupted before the turn began", "yellow"))
            return
        turn = turns[-1]
        closed = [
            m
            for m in self.session.history()
            if m.turn == turn.n and (m.note or "").startswith("closed by af")
        ]
        said = f"turn {turn.n} interrupted: what it did so far is kept"
        if closed:
            said += f"; {plural(len(closed), 'unfinished tool call')} closed as not finished"
        self.err.print(Text(said, "bold yellow"))
        if turn.run_id is not None and not self.quiet:
            self.err.print(Text(f"recording {turn.recording}", "dim"), soft_wrap=True)

    # -- commands ------------------------------------------------------------------------

    def _command(self, line: str) -> bool:
        """Run a / command; True to leave."""
        from rich.text import Text

        from afcore.readmodel import safe

        name = line.split()[0].lower()
        if name in ("/quit", "/exit", "/q"):
            return True
        if name == "/history":
            self._history()
        elif name == "/lens":
            self._lens()
        elif name in ("/help", "/?"):
            for cmd, what in COMMANDS:
                self.err.print(Text.assemble((f"  {cmd:<10}", "bold"), (what, "dim")))
            self.err.print(Text("  //text     sends /text", "dim"))
        else:
            self.err.print(
                Text.assemble(
                    ("unknown command ", "yellow"),
                    safe(name),
                    (": /help lists them (//text sends a line that starts with /)", "dim"),
                ),
                soft_wrap=True,
            )
        return False

    def _history(self) -> None:
        from rich.text import Text

        from afcore.messages import AssistantMessage, ToolResultMessage, UserMessage
        from afcore.readmodel import args_text, line, safe, status_style

        turns = {t.n: t for t in self.session.turns()}
        history = self.session.history()
        if not history:
            self.err.print(Text("nothing said yet", "dim"))
            return
        out = self.out
        width = max(out.width, 60)
        current: int | None = None
        for m in history:
            if m.turn != current:
                current = m.turn
                t = turns.get(m.turn)
                head = Text(f"turn {m.turn}", "bold cyan")
                if t is not None:
                    head.append(f" · {t.status.replace('_', ' ')}", status_style(t.status))
                    if t.run_id:
                        head.append(f" · run {safe(t.run_id)}", "dim")
                out.print(head, soft_wrap=True)
            message = m.message
            if isinstance(message, UserMessage):
                out.print(Text.assemble(("  you    ", "bold"), _hanging(message.content)))
            elif isinstance(message, AssistantMessage):
                if message.text:
                    out.print(Text.assemble(("  agent  ", "bold"), _hanging(message.text)))
                for call in message.tool_calls:
                    out.print(
                        Text.assemble(
                            ("  agent  ", "bold"),
                            ("→ ", "cyan"),
                            (safe(call.name), "bold cyan"),
                            ("(", "dim"),
                            args_text(call.args, width - len(call.name) - 14),
                            (")", "dim"),
                        )
                    )
            elif isinstance(message, ToolResultMessage):
                style = "red" if message.is_error else "green"
                head = Text.assemble(
                    ("  tool   ", "bold"),
                    ("← ", style),
                    (safe(message.name), "cyan"),
                    (" error" if message.is_error else "", "red"),
                    ": ",
                )
                content = (
                    message.content if isinstance(message.content, str) else str(message.content)
                )
                head.append(line(content, max(width - len(head.plain), 20)))
                out.print(head)
            if m.note:
                out.print(Text(f"         ({safe(m.note)})", "dim"), soft_wrap=True)

    def _lens(self) -> None:
        from rich.text import Text

        from afcli.commands.lens import run_lens

        turns = [t for t in self.session.turns() if t.recording]
        if not turns:
            self.err.print(Text("no turn has been recorded yet", "dim"))
            return
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            self.err.print(Text("the Lens needs a terminal", "yellow"))
            return
        from pathlib import Path

        path = Path(str(turns[-1].recording))
        if not path.exists():
            self.err.print(Text(f"turn {turns[-1].n}'s recording is gone: {path}", "yellow"))
            return
        try:
            run_lens(path)
        except CliError as e:
            self.err.print(Text(f"error: {e.message}", "red"))


def _hanging(text: str) -> str:
    """Untrusted text made safe, its later lines under its first in the history's column."""
    from afcore.readmodel import safe

    return safe(text).replace("\n", "\n         ")


def _since(when: float) -> str:
    import time

    age = max(time.time() - when, 0.0)
    if age < 90:
        return "just now"
    if age < 5400:
        return f"{age / 60:.0f} min ago"
    if age < 2 * 86400:
        return f"{age / 3600:.0f} h ago"
    return f"on {datetime.fromtimestamp(when, UTC):%Y-%m-%d}"


def _stage(record: dict[str, Any]) -> str:
    """A commit's stage: named on the line before 1.1, the part of its rsid before ``#`` since."""
    stage = record.get("stage")
    return stage if isinstance(stage, str) else str(record.get("rsid", "")).partition("#")[0]
