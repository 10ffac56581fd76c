"""``af resume``: continue a run that paused for a person, with their answer."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Annotated

import typer

from afcli._errors import EXIT_USAGE, CliError, command
from afcli._params import RunArg

if TYPE_CHECKING:
    from afcore import Agent

__all__ = ["resume"]


@command
def resume(
    run: RunArg,
    approve: Annotated[
        bool, typer.Option("--approve", help="Approve the call: the tool runs.")
    ] = False,
    decline: Annotated[
        bool, typer.Option("--decline", help="Decline the call: the model reads a denial.")
    ] = False,
    why: Annotated[
        str | None,
        typer.Option(
            "--why",
            metavar="TEXT",
            help="Why, in your words (the model reads it when you decline).",
            show_default=False,
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="NAME",
            help="Who decides (default: your user name).",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="AGENT",
            help="The agent that ran it, as af run takes it (file.py:make, module:NAME); "
            "default: what the recording says af run loaded.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the outcome as JSON on stdout.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the answer.")] = False,
) -> None:
    """Continue a paused run: a tool middleware link asked a person about a tool call.

    `af resume RUN --approve` runs the call (its rules go on after the one that asked);
    `af resume RUN --decline --why "over budget"` has the model read that you declined.
    The run goes on in the same recording, in this process, with the agent that ran it.
    Without `--approve` or `--decline`, says what is asked. Exit 0 on an answer or another
    pause, 1 when the run fails, 2 when the run is not paused or the agent cannot be loaded.
    """
    from rich.text import Text

    from afcli._render import err_console
    from afcli._runs import open_run
    from afcli.commands.run import show_outcome
    from afcore.loop import paused_checkpoint
    from afcore.readmodel import safe

    if approve and decline:
        raise CliError("give --approve or --decline, not both", EXIT_USAGE)
    _refuse_a_flow(run)
    with open_run(run) as rec:
        path = rec.path
        _, checkpoint = paused_checkpoint(rec)
        source = rec.header.agent.source
        name = rec.header.agent.name
    err = err_console()
    if not (approve or decline):
        err.print(
            Text.assemble(
                ("paused: ", "bold yellow"),
                (safe(checkpoint.link), "bold"),
                " asks: ",
                safe(checkpoint.question),
            ),
            soft_wrap=True,
        )
        raise CliError(f"answer it: af resume {run} --approve, or --decline --why TEXT")
    built = _load(agent, source, name)
    result_answer = built.resume(path, approve=approve, why=why, by=by)
    result = built.last_result
    assert result is not None
    del result_answer
    show_outcome(
        result,
        json_output=json_output,
        quiet=quiet,
        streamed=False,
        progress=False,
        interrupted=False,
        max_iterations=built.max_iterations,
    )


def _load(spec: str | None, source: str | None, name: str) -> Agent:
    """The agent that ran the paused run: ``--agent``, or what its recording says af run
    loaded."""
    from afcli._loading import LoadError, load_agent

    given = spec or source
    if not given:
        raise CliError(
            "the recording does not say where its agent came from: give it with --agent "
            "file.py:make",
            EXIT_USAGE,
        )
    try:
        loaded = load_agent(given)
    except LoadError as e:
        if spec is not None:
            raise
        raise CliError(
            f"the run's agent came from {given}, which af cannot load ({e.message}): give it "
            "with --agent file.py:make",
            EXIT_USAGE,
        ) from None
    from afcore import Agent

    if not isinstance(loaded.agent, Agent):
        raise CliError(
            f"{given} is a flow: give the agent whose run paused, with --agent file.py:NAME",
            EXIT_USAGE,
        )
    built = copy.copy(loaded.agent)
    if built.name == "agent" and name != "agent":
        built.name = loaded.name  # af run names an unnamed agent after what it loaded
    from afcore import RecordingConfig

    if built.recording is None:
        built.recording = RecordingConfig()
    built.source = source
    built.last_result = None
    return built


def _refuse_a_flow(run: str) -> None:
    """A flow does not resume: its paused step's agent run does, named in a sentence."""
    from afcli._runs import resolve
    from afcore.recording import is_flow

    path = resolve(run)
    if not is_flow(path):
        return
    from afcli._flows import open_flow_cli

    flow = open_flow_cli(path)
    paused = flow.end.paused if flow.end is not None else None
    step = flow.find(paused) if paused is not None else None
    named = step.end.run if step is not None and step.end is not None else None
    if step is None or named is None:
        raise CliError(f"{path} is a flow's log, and no step of it paused", EXIT_USAGE)
    # The step's own file beside the log goes on; the log keeps the run as it paused. A log
    # moved away from its folder has the run folded in: it is written back where the log
    # names it, for af resume to go on in.
    file = flow.path.parent / named
    back = ""
    frame = flow.frames.get(named)
    # Only where a flow writes its runs: the log names the file, and a log may be anyone's.
    inside = file.suffix == ".jsonl" and file.resolve().is_relative_to(flow.path.parent.resolve())
    if not file.exists() and frame is not None and inside:
        from afcore.recording import unfold

        folded, problem = unfold(flow.path, frame)
        if problem is None:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(folded.read_bytes())
            back = " (written back from the flow's log)"
    raise CliError(
        f"a flow does not resume: its step {paused!r} paused; answer that agent's run{back} "
        f"(af resume {file} --approve --agent FILE:NAME), then run the flow again",
        EXIT_USAGE,
    )
