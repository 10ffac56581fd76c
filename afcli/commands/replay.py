"""``af replay``: run a recorded agent again, every model call answered from the recording,
and say where the run first departs from it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import RunArg

if TYPE_CHECKING:
    from afcore import Agent
    from afcore.replay import ReplayReport

__all__ = ["replay"]


@command
def replay(
    run: RunArg,
    agent: Annotated[
        str | None,
        typer.Argument(
            metavar="[AGENT]",
            help="The agent to run: file.py, file.py:NAME or module:NAME, as af run takes it. "
            "Default: the one the recording names.",
            show_default=False,
        ),
    ] = None,
    tools: Annotated[
        str,
        typer.Option(
            "--tools",
            metavar="run|recorded",
            help="run: the tools run again and their results are compared with the "
            "recorded ones; recorded: the recorded results are served and no tool runs.",
        ),
    ] = "run",
    then_live: Annotated[
        bool,
        typer.Option(
            "--then-live",
            help="Go on past the first difference with the agent's own provider (its key "
            "from the environment).",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Folder for the replay's recording (default: $AF_RECORDINGS or ./recordings).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"status", "calls", "identical_calls", "divergence", "recording"} '
            "on stdout.",
        ),
    ] = False,
) -> None:
    """Run a recorded agent again with every model call answered from the recording: no
    network, no key. Each request the agent builds is compared with the recorded one; the
    first difference stops the replay and is shown with the `af why` key that explains
    the recorded side.

    Exit 0 when the replay is identical ("23 calls, identical"), 1 when it departs from the
    recording or cannot be run, 2 when the agent cannot be loaded.
    """
    from afcli._render import err_console, print_json
    from afcli._runs import refuse_a_flow, resolve
    from afcore.replay import Tape
    from afcore.replay import replay as run_replay

    if tools not in ("run", "recorded"):
        raise CliError(f"--tools is run or recorded, not {tools!r}", EXIT_USAGE)
    mode: Literal["run", "recorded"] = "run" if tools == "run" else "recorded"
    path = resolve(run)
    refuse_a_flow(path, "replay")
    try:
        tape = Tape.read(path)
    except Exception as e:
        from afcore.errors import RecordingError

        if isinstance(e, RecordingError):
            raise CliError(str(e), EXIT_FAILED) from None
        raise
    try:
        spec = agent or tape.rec.header.agent.source or ""
        loaded = _load(spec, agent is None, run)
        made_by = tape.rec.header.agent.name
    finally:
        tape.close()
    if out is not None and out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file; give a folder", EXIT_USAGE)
    if not json_output:
        from rich.text import Text

        from afcore.readmodel import safe

        err = err_console()
        err.print(
            Text.assemble(("replaying ", "dim"), safe(path.name), (" with ", "dim"), safe(spec)),
            soft_wrap=True,
        )
        if loaded.name != made_by:
            # Not an error (a renamed agent replays), but the likely cause of what follows.
            err.print(
                Text.assemble(
                    ("note: ", "yellow"),
                    f"the recording was made by agent {safe(made_by)!r}; this one is "
                    f"{safe(loaded.name)!r}",
                ),
                soft_wrap=True,
            )
    report = run_replay(path, loaded, tools=mode, then_live=then_live, out=out)
    if json_output:
        print_json(report.to_json())
    else:
        _print(report, run)
    if not report.ok:  # a difference, a failure, or a run the recording does not hold whole
        raise typer.Exit(EXIT_FAILED)


def _load(spec: str, from_header: bool, run: str) -> Agent:
    """The agent to replay with, loaded as af run loads it, without its keys (no call will
    need them)."""
    from afcli._loading import LoadError, load_agent
    from afcore.providers import keys_when_called

    if not spec:
        raise CliError(
            f"the recording does not say what its agent was; name it: af replay {run} AGENT",
            EXIT_USAGE,
        )
    where, _, attr = spec.rpartition(":")
    if from_header and (not where or not attr.replace(".", "").isidentifier()):
        # Built where it was run (`__main__:12`): there is nothing to load by that name.
        raise CliError(
            f"the recording's agent was built at {spec}, which cannot be loaded; name it: "
            f"af replay {run} file.py:NAME",
            EXIT_USAGE,
        )
    try:
        with keys_when_called():
            loaded = load_agent(spec).agent
    except LoadError as e:
        if from_header:
            raise CliError(
                f"the recording's agent, {spec}, does not load here ({e.message}); name it: "
                f"af replay {run} AGENT",
                EXIT_USAGE,
            ) from None
        raise
    from afcore import Agent

    if not isinstance(loaded, Agent):
        raise CliError(
            f"{spec} is a flow: af replay replays one agent's run (a flow's are in the folder "
            "beside its log); name the agent: file.py:NAME",
            EXIT_USAGE,
        )
    return loaded


def _print(report: ReplayReport, run: str) -> None:
    from rich.text import Text

    from afcli._changes import SLOT_NAMES, change_lines
    from afcli._render import Line, Printer, err_console, out_console
    from afcore.readmodel import line, plural, safe

    console = out_console()
    out = Printer(console)
    width = console.width or 100
    d = report.divergence
    if report.status == "identical":
        out.print(Line((report.summary(), "bold green" if report.ok else "bold yellow")))
    elif report.status == "failed":
        out.print(Line(("failed: ", "bold red"), safe(report.error or "")))
    elif d is not None:
        out.print(
            Line(
                ("diverged ", "bold red"),
                f"at call {d.call}, ",
                (SLOT_NAMES.get(d.slot, d.slot), "bold"),
            )
        )
        for row in change_lines(
            d.kind, d.path, d.recorded, d.replayed, labels=("recorded", "replayed"), width=width
        ):
            out.print(row)
        if d.why_key is not None:
            why = Line("      ", ("why".ljust(8), "dim"), "  ", _why(run, d.why_key, d.call))
            out.print(why, soft_wrap=True)  # a command to copy: never broken
        notes = [
            f"{plural(report.identical_calls, 'call')} identical before it"
            if report.identical_calls
            else "the first call differs"
        ]
        if d.others:
            notes.append(f"{plural(d.others, 'more difference')} at call {d.call}")
        out.print(Line(("  " + "; ".join(notes), "dim")))
        if report.live_from is not None:
            out.print(
                Line(
                    ("  then live: ", "dim"),
                    f"calls {report.live_from} to {report.calls} were answered by the agent's "
                    "own provider",
                )
            )
        if report.error:
            out.print(Line(("  the run ended on ", "dim"), safe(report.error)))
        elif report.live_from is not None and report.answer:
            out.print(Line(("  answer: ", "dim"), line(report.answer, max(width - 10, 24))))
    out.flush()
    err = err_console()
    if report.recording is not None:
        err.print(Text.assemble(("recording ", "dim"), safe(str(report.recording))), soft_wrap=True)
        if d is not None:
            err.print(
                Text.assemble(
                    ("every difference: ", "dim"),
                    f"af diff {safe(run)} {safe(report.recording.stem)}",
                ),
                soft_wrap=True,
            )


def _why(run: str, key: str, call: int) -> str:
    """The af why command for the recorded side: an injection's segment is asked about at
    the call (the other keys name their place themselves)."""
    from afcore.readmodel import safe

    at = f" --at call:{call}" if key.startswith("system:") else ""
    return f"af why {safe(run)} {safe(key)}{at}"
