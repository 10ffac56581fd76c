"""``af run``: run an agent (or the offline demo), showing its progress, recording the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from afcli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, CliError, command

if TYPE_CHECKING:
    from rich.console import Console

    from afcli._progress import Progress
    from afcore import Agent, RunResult
    from afcore.flows import Flow

__all__ = ["run"]

DEMO = "demo"
DEMO_SOURCE = "afcore.demos.trip:build_agent"
DEMO_NAMES = ("trip", "compaction", "sliding", "router")
"""The built-in demos (``afcore.demos.DEMOS``), named here so that ``--help`` lists them
without importing the library."""


@command
def run(
    agent: Annotated[
        str | None,
        typer.Argument(
            metavar="AGENT",
            help="file.py, file.py:NAME or module:NAME: an Agent, or a function with no "
            "arguments returning one. Leave it out (or say 'demo') to run the offline demo; "
            "a single argument that names no file or module is the demo's message.",
            show_default=False,
        ),
    ] = None,
    message: Annotated[
        str | None,
        typer.Argument(
            metavar="MESSAGE",
            help="The message to send. The demo has a default one.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Folder for the recording (default: $AF_RECORDINGS or ./recordings).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the outcome as JSON on stdout.")
    ] = False,
    max_iterations: Annotated[
        int | None,
        typer.Option(
            "--max-iterations",
            min=1,
            max=10_000,
            help="Stop after this many model calls (default: the agent's own).",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Print only the answer: no progress, no streamed words."
        ),
    ] = False,
    lens: Annotated[
        bool,
        typer.Option(
            "--lens", help="Open the Lens on the recording as it is written (af lens --follow)."
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            metavar="PROVIDER:MODEL",
            help="Call this model instead of the agent's own (anthropic:claude-sonnet-4-5, "
            "openai:gpt-4o, ollama:llama3.1, lmstudio:...); its key from the environment.",
            show_default=False,
        ),
    ] = None,
    demo: Annotated[
        str | None,
        typer.Option(
            "--demo",
            metavar="NAME",
            help=f"Run a built-in offline demo by name: {', '.join(DEMO_NAMES)}. Without "
            "it, af run runs trip. A single argument is then the message.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run an agent on a message and record the run.

    `af run` runs the offline demo; `af run "Trip to Porto?"` sends the demo that message;
    `af run bot.py "Hello"` runs the Agent that bot.py defines (or `bot.py:make`, a function
    returning one). Progress goes to stderr, the answer to stdout. Exit 0 on an answer, 1
    when the run fails or stops at max iterations, 2 when the agent cannot be loaded.
    """
    from rich.text import Text

    from afcli._loading import prepare
    from afcli._progress import Progress
    from afcli._render import err_console
    from afcore.errors import AfError

    built, source, text = _load(agent, message, demo)
    from afcore.flows import Flow

    if isinstance(built, Flow):
        for given, option in ((model, "--model"), (max_iterations, "--max-iterations")):
            if given is not None:
                raise CliError(f"{option} applies to one agent; a flow's agents keep their own")
        if lens:
            raise CliError("--lens follows one agent's run; open a flow's with af lens after it")
        from afcli._flowrun import run_flow

        run_flow(built, text, source=source, out=out, json_output=json_output, quiet=quiet)
        return
    if model is not None:
        built = built.with_model(model)  # a missing key or a bad id: a usage error, exit 2
    runnable = prepare(built, source, out, max_iterations)

    err = err_console()
    interrupted = False
    progress = None if quiet or json_output else Progress(err)
    try:
        if lens:
            _run_in_lens(runnable, text)
        elif progress is not None and err.is_terminal:
            # A footer under the streamed output: where the run is and what it has used.
            with progress.footing(Text("starting", "dim")):
                _run_stoppable(runnable, text, progress, err)
        else:
            _run_stoppable(runnable, text, progress, err)
    except KeyboardInterrupt:
        interrupted = True
    except AfError:
        if runnable.last_result is None:
            raise  # refused before the run began (a recording folder it cannot write, ...)
    result = runnable.last_result
    if result is None:  # interrupted before the run began
        raise typer.Exit(EXIT_INTERRUPTED)

    show_outcome(
        result,
        json_output=json_output,
        quiet=quiet,
        streamed=progress is not None and progress.answer_streamed,
        progress=progress is not None,
        interrupted=interrupted,
        max_iterations=runnable.max_iterations,
    )


def show_outcome(
    result: RunResult,
    *,
    json_output: bool,
    quiet: bool,
    streamed: bool,
    progress: bool,
    interrupted: bool,
    max_iterations: int,
) -> None:
    """How a run ended, for a person (the answer on stdout, the rest on stderr) or as JSON;
    then the exit code: 0 for an answer or a pause, 1 for a failure, 130 interrupted."""
    from rich.text import Text

    from afcli._render import err_console, out_console, print_json
    from afcore.readmodel import safe

    err = err_console()
    error = _error_text(result)
    stdout = out_console()
    if json_output:
        print_json(_outcome(result, error))
    elif result.status == "answer" and not (
        # Streamed to this very terminal already: not twice.
        streamed and err.is_terminal and stdout.is_terminal
    ):
        if stdout.is_terminal:
            stdout.print(Text(safe(result.answer)), soft_wrap=True)
        else:
            # For a pipe or a file, the model's text exactly: escaping is for terminals.
            _write_exact(result.answer)
    if result.paused is not None:
        p = result.paused
        err.print(
            Text.assemble(
                ("paused: ", "bold yellow"),
                (safe(p.link), "bold"),
                " asks before ",
                (safe(f"{p.tool} (call {p.k})"), "cyan"),
                ": ",
                safe(p.question),
            ),
            soft_wrap=True,
        )
        err.print(
            Text.assemble(
                ("continue with ", "dim"),
                f"af resume {result.run_id} --approve",
                (" or ", "dim"),
                "--decline --why TEXT",
            ),
            soft_wrap=True,
        )
    if result.output is not None and not result.output.met and result.status == "answer":
        said = "; ".join(f"{e['path']}: {e['message']}" for e in result.output.errors[:3])
        err.print(
            Text.assemble(
                ("contract not met: ", "bold yellow"),
                f"the answer does not hold to the output schema: {safe(said)}",
            ),
            soft_wrap=True,
        )

    if result.status == "answer" and result.stop_reason == "max_tokens":
        err.print(
            Text.assemble(
                ("cut: ", "bold yellow"),
                "the answer stopped at the model's max_tokens limit and is incomplete "
                "(raise max_tokens in the agent's params)",
            )
        )
    if result.status == "max_iterations":
        err.print(
            Text.assemble(
                ("stopped: ", "bold yellow"),
                f"the agent reached its limit of {max_iterations} iterations without an answer",
            )
        )
        if result.answer and not json_output:
            err.print(Text.assemble(("the model's last text: ", "dim"), safe(result.answer)))
    elif result.status == "error":
        err.print(
            Text.assemble(("error: ", "bold red"), f"the run failed: {safe(error or '')}"),
            soft_wrap=True,
        )
    elif result.status not in ("answer", "paused") and (
        not progress or result.status != "interrupted"
    ):
        # (an interrupted run's progress ends on a line that says so)
        err.print(Text.assemble(("stopped: ", "bold yellow"), safe(result.status)))
    if interrupted and result.status != "interrupted":
        # Ctrl-C landed while nothing awaited: the run finished before it could be stopped.
        err.print(Text.assemble(("interrupted", "bold yellow"), " after the run had finished"))
    if result.recording is not None and not quiet:
        # Never broken across lines: it is there to be copied.
        err.print(Text.assemble(("recording ", "dim"), safe(str(result.recording))), soft_wrap=True)

    if interrupted or result.status == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.status not in ("answer", "paused"):
        raise typer.Exit(EXIT_FAILED)


def _run_stoppable(agent: Agent, text: str, progress: Progress | None, err: Console) -> None:
    """Run ``agent`` on its own event loop, stopped by Ctrl-C as a person expects: the first
    says at once that the run is stopping and what it waits for, and cancels it (a model call
    or an async tool is cancelled, a sync tool's thread left behind, the recording closed);
    a second quits at once. Raises KeyboardInterrupt when the run was stopped."""
    import asyncio
    import signal
    import threading

    from rich.text import Text

    from afcore.loop import SignalWake

    if threading.current_thread() is not threading.main_thread():
        agent.run(text, observe=progress, stream=progress.stream if progress else None)
        return
    runner = asyncio.Runner()
    loop = runner.get_loop()
    task: asyncio.Task[Any] | None = None
    stops = 0

    def on_sigint(signum: int, frame: object) -> None:
        nonlocal stops
        stops += 1
        if stops > 1 or task is None:
            raise KeyboardInterrupt
        waits = progress.waiting_for() if progress is not None else ""
        err.print(
            Text.assemble(
                ("stopping", "bold yellow"),
                f": {waits}" if waits else "",
                (" · Ctrl-C again quits at once", "dim"),
            ),
            soft_wrap=True,
        )
        if progress is not None and progress.footer is not None:
            progress.footer.update(Text("stopping", "yellow"))
        loop.call_soon_threadsafe(task.cancel)

    async def main() -> None:
        nonlocal task
        task = asyncio.current_task()
        await agent.arun(text, observe=progress, stream=progress.stream if progress else None)

    wake = SignalWake(loop)
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with wake.armed():
            runner.run(main())
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGINT, previous)
        wake.close()
        runner.close()


def _write_exact(text: str) -> None:
    import sys

    data = text if text.endswith("\n") else text + "\n"
    # A lone surrogate (which no UTF-8 can carry) is the only thing written otherwise.
    sys.stdout.flush()
    sys.stdout.buffer.write(data.encode("utf-8", "backslashreplace"))
    sys.stdout.flush()


def _run_in_lens(agent: Agent, text: str) -> None:
    """Run ``agent`` in a thread and follow its recording in the Lens. Leaving the Lens
    leaves the run going: it is waited for (Ctrl-C stops the wait; the file keeps what was
    written)."""
    import dataclasses
    import threading
    import time

    from afcli.commands.lens import run_lens
    from afcore.recording import default_dir, new_run_id

    assert agent.recording is not None  # prepare() made it record
    run_id = agent.recording.run_id or new_run_id(agent.recording.now())
    agent.recording = dataclasses.replace(agent.recording, run_id=run_id)
    path = (agent.recording.dir or default_dir()) / f"{run_id}.jsonl"
    failure: list[BaseException] = []

    def work() -> None:
        try:
            agent.run(text)
        except BaseException as e:  # reported by the caller from last_result
            failure.append(e)

    worker = threading.Thread(target=work, name="af-run", daemon=True)
    worker.start()
    # The Lens opens a recording by its header: wait for the first line.
    deadline = time.monotonic() + 10
    while not (path.exists() and path.stat().st_size) and worker.is_alive():
        if time.monotonic() > deadline:
            raise CliError(f"the run wrote no recording at {path} in 10 s", EXIT_FAILED)
        time.sleep(0.02)
    if path.exists() and path.stat().st_size:
        run_lens(path, follow=True)
    worker.join()
    if failure and agent.last_result is None:
        raise failure[0]


def _load(
    agent: str | None, message: str | None, demo: str | None
) -> tuple[Agent | Flow, str, str]:
    from afcli._loading import load_agent, names_an_agent

    if demo is not None:
        return _demo(demo, agent, message)
    if agent is not None and message is None and not names_an_agent(agent):
        # `af run "Trip to Porto?"`: one argument that names no agent is the demo's message.
        agent, message = None, agent
    if agent is None or agent == DEMO:
        from afcore.demos import DEFAULT_MESSAGE, build_agent

        return build_agent(), DEMO_SOURCE, message if message is not None else DEFAULT_MESSAGE
    if message is None:
        raise CliError(f"say what to send to the agent: af run {agent} MESSAGE", EXIT_USAGE)
    loaded = load_agent(agent)
    return loaded.named, loaded.source, message


def _demo(name: str, agent: str | None, message: str | None) -> tuple[Agent | Flow, str, str]:
    """``--demo NAME [MESSAGE]``: the one argument there is (after an optional ``demo``) is
    the message."""
    from afcore.demos import DEMOS

    found = DEMOS.get(name)
    if found is None:
        *first, last = DEMOS
        names = f"{', '.join(first)} and {last}"
        raise CliError(f"there is no demo named {name!r}; the demos are {names}", EXIT_USAGE)
    if agent == DEMO:
        agent, message = message, None
    if agent is not None and message is not None:
        raise CliError(
            f"--demo {name} runs a built-in agent: give it one message, not an agent and a message",
            EXIT_USAGE,
        )
    text = agent if agent is not None else found.message
    return found.build(), found.source, text


def _error_text(result: RunResult) -> str | None:
    if result.error is None or result.status != "error":
        return None
    return str(result.error) or type(result.error).__name__


def _outcome(result: RunResult, error: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "run_id": result.run_id,
        "recording": str(result.recording) if result.recording else None,
        "status": result.status,
        "stop_reason": result.stop_reason,
        "answer": result.answer,
        "iterations": result.iterations,
        "calls": result.calls,
        "usage": result.usage.to_json(),
        "error": error,
    }
    if result.paused is not None:
        out["paused"] = result.paused.to_json()
    if result.output is not None:
        o = result.output
        out["output"] = {"met": o.met, "checks": o.checks, "tier": o.tier, "errors": o.errors}
    if result.answer_coverage is not None:
        out["answer_coverage"] = result.answer_coverage.to_json()
    return out
