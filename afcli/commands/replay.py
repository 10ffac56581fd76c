"""``af replay``: run a recorded agent again, every model call answered from the recording,
and say where the run first departs from it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import RunArg

if TYPE_CHECKING:
    from afcore import Agent
    from afcore.flows import Flow
    from afcore.recording import FlowRecording
    from afcore.replay import Divergence, FlowDivergence, FlowReplayReport, ReplayReport

__all__ = ["replay"]


@command
def replay(
    run: RunArg,
    agent: Annotated[
        str | None,
        typer.Argument(
            metavar="[AGENT]",
            help="The agent (or, for a flow's run, the flow) to run: file.py, file.py:NAME or "
            "module:NAME, as af run takes it. Default: the one the recording names.",
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
            "from the environment); a flow goes on live from its first difference, each "
            "agent step from there on with its agent's provider.",
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

    A flow's run (its log) is replayed by running the flow again: its functions and
    predicates run, each agent step is answered from its recorded run, and the first
    difference may be a step, a decision (with the values its predicates read), a merge,
    or a call inside an agent step.

    Exit 0 when the replay is identical ("23 calls, identical"; a flow's "4 steps, 2 calls,
    identical"), 1 when it departs from the recording or cannot be run, 2 when the agent
    cannot be loaded.
    """
    from afcli._render import print_json
    from afcli._runs import resolve
    from afcore.recording import is_flow
    from afcore.replay import Tape
    from afcore.replay import replay as run_replay

    if tools not in ("run", "recorded"):
        raise CliError(f"--tools is run or recorded, not {tools!r}", EXIT_USAGE)
    mode: Literal["run", "recorded"] = "run" if tools == "run" else "recorded"
    path = resolve(run)
    if out is not None and out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file; give a folder", EXIT_USAGE)
    if is_flow(path):
        _replay_flow(path, run, agent, mode, out, json_output, then_live)
        return
    try:
        tape = Tape.read(path)
    except Exception as e:
        from afcore.errors import RecordingError

        if isinstance(e, RecordingError):
            raise CliError(str(e), EXIT_FAILED) from None
        raise
    try:
        spec = agent or tape.rec.header.agent.source or ""
        loaded = _load(spec, agent is None, run, path)
        made_by = tape.rec.header.agent.name
    finally:
        tape.close()
    if not json_output:
        _announce("agent", path.name, spec, made_by, loaded.name)
    report = run_replay(path, loaded, tools=mode, then_live=then_live, out=out)
    if json_output:
        print_json(report.to_json())
    else:
        _print(report, run, path)
    if not report.ok:  # a difference, a failure, or a run the recording does not hold whole
        raise typer.Exit(EXIT_FAILED)


def _load(spec: str, from_header: bool, run: str, path: Path) -> Agent:
    """The agent to replay with, loaded as af run loads it, without its keys (no call will
    need them)."""
    from afcli._loading import LoadError, load_agent
    from afcore.providers import keys_when_called

    step = _step_of_a_flow(path)
    if step is not None and from_header:
        # An agent step's header names where its agent was built, inside the flow: it is
        # the flow that replays it.
        log, at = step
        raise CliError(
            f"{path.name} is the run of step {at} of the flow run {log}: replay the flow (af "
            f"replay {log}), or name an agent to replay this step alone: af replay {run} "
            "file.py:NAME",
            EXIT_USAGE,
        )
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
            f"{spec} is a flow, and {path.name} is one agent's run: a flow replays the run "
            "of a flow (af replay FLOWRUN FLOW); name the agent to replay this run: "
            "file.py:NAME",
            EXIT_USAGE,
        )
    return loaded


def _step_of_a_flow(path: Path) -> tuple[str, str] | None:
    """For an agent step's run (in the folder beside its flow's log): the log, and the
    step's path."""
    from afcore.errors import RecordingError
    from afcore.recording import is_flow, open_flow

    log = path.parent.with_suffix(".jsonl")
    if not is_flow(log):
        return None
    try:
        flow = open_flow(log)
    except (OSError, RecordingError):
        return None
    name = f"{path.parent.name}/{path.name}"
    at = next((s.path for s in flow.steps() if s.end is not None and s.end.run == name), None)
    return (_shown(log), at) if at is not None else None


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


# -- a flow's run ---------------------------------------------------------------------------


def _replay_flow(
    path: Path,
    run: str,
    spec: str | None,
    mode: Literal["run", "recorded"],
    out: Path | None,
    json_output: bool,
    then_live: bool = False,
) -> None:
    from afcli._flows import open_flow_cli
    from afcli._render import print_json
    from afcore.replay import replay_flow

    recorded = open_flow_cli(path)
    chosen = spec or _flow_source(recorded)
    flow = _load_flow(chosen, spec is None, run, path)
    if not json_output:
        _announce("flow", path.name, chosen, recorded.header.flow.name, flow.name)
    report = replay_flow(recorded, flow, tools=mode, then_live=then_live, out=out)
    if json_output:
        print_json(report.to_json())
    else:
        _print(report, run, path)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _flow_source(flow: FlowRecording) -> str:
    """Where the recorded flow came from: its header's ``source`` (``af run`` writes it);
    for a log written before it did, the one ``module:function`` all its agents name as
    theirs (the built-in demo's agents name the function that builds the flow)."""
    if flow.header.source:
        return flow.header.source
    sources: set[str] = set()

    def walk(node: Any) -> None:
        if not isinstance(node, dict):
            return
        if node.get("kind") == "agent":
            sources.add(str(node.get("source") or ""))
        for child in node.get("steps") or ():
            walk(child)

    from afcore.recording import dump

    walk(dump(flow.header.flow))
    if len(sources) == 1:
        (found,) = sources
        where, _, attr = found.rpartition(":")
        if where and attr.replace(".", "").isidentifier():
            return found
    return ""


def _load_flow(spec: str, from_header: bool, run: str, path: Path) -> Flow:
    from afcli._loading import LoadError, load_agent
    from afcore.flows import Flow
    from afcore.providers import keys_when_called

    if not spec:
        raise CliError(
            f"{path.name} does not say where its flow came from (it was run from Python, not "
            f"af run); name it: af replay {run} file.py:NAME",
            EXIT_USAGE,
        )
    try:
        with keys_when_called():
            loaded = load_agent(spec).agent
    except LoadError as e:
        if from_header:
            raise CliError(
                f"the recording's flow, {spec}, does not load here ({e.message}); name it: "
                f"af replay {run} FLOW",
                EXIT_USAGE,
            ) from None
        raise
    if not isinstance(loaded, Flow):
        folder = path.with_suffix("")
        raise CliError(
            f"{spec} is an agent, and {path.name} is a flow's log: name the flow that made it "
            f"(af replay {run} file.py:NAME), or replay one agent step's run with this agent "
            f"(its runs are in {_shown(folder)}/)",
            EXIT_USAGE,
        )
    return loaded


def _announce(kind: str, name: str, spec: str, made_by: str, loading: str) -> None:
    """On stderr: what is replayed with what, and a note when the agent or flow loaded is
    not the one the recording names (not an error, but the likely cause of what follows)."""
    from rich.text import Text

    from afcli._render import err_console
    from afcore.readmodel import safe

    err = err_console()
    what = "replaying " if kind == "agent" else "replaying the flow run "
    err.print(
        Text.assemble((what, "dim"), safe(name), (" with ", "dim"), safe(spec)), soft_wrap=True
    )
    if loading != made_by:
        err.print(
            Text.assemble(
                ("note: ", "yellow"),
                f"the recording was made by {kind} {safe(made_by)!r}; this one is "
                f"{safe(loading)!r}",
            ),
            soft_wrap=True,
        )


def _print(report: ReplayReport | FlowReplayReport, run: str, path: Path) -> None:
    """An agent's replay and a flow's alike: the verdict, and for a divergence where it is
    (a flow's: its step first), what each side holds there, the af why command for the
    recorded side and what was identical before it."""
    from rich.text import Text

    from afcli._changes import SLOT_NAMES, change_lines
    from afcli._render import Line, Printer, err_console, out_console
    from afcore.readmodel import evidence_text, line, plural, safe
    from afcore.replay import FlowDivergence, ReplayReport

    console = out_console()
    out = Printer(console)
    width = console.width or 100
    d = report.divergence
    agent = isinstance(report, ReplayReport)
    if report.status == "identical":
        out.print(Line((report.summary(), "bold green" if report.ok else "bold yellow")))
        if not agent and report.error:
            out.print(
                Line(("  the flow ended on ", "dim"), safe(report.error), (", as recorded", "dim"))
            )
    elif report.status == "failed":
        out.print(Line(("failed: ", "bold red"), safe(report.error or "")))
    elif d is not None:
        head = Line(("diverged ", "bold red"), "at ")
        if isinstance(d, FlowDivergence):
            head.append("step ")
            head.append(safe(d.step or "(top)"), "bold")
            head.append("" if d.call is None else f", call {d.call}")
        else:
            head.append(f"call {d.call}")
        head.append(", ")
        head.append(SLOT_NAMES.get(d.slot, d.slot), "bold")
        out.print(head)
        for row in change_lines(
            d.kind, d.path, d.recorded, d.replayed, labels=("recorded", "replayed"), width=width
        ):
            out.print(row)
        reads = d.where.get("reads_b")  # a flow's decision: what its predicates read
        if isinstance(reads, dict) and reads:
            out.print(
                Line(
                    "      ", ("read".ljust(8), "dim"), "  ", line(evidence_text(reads), width - 20)
                )
            )
        if d.why_key is not None:
            why = Line("      ", ("why".ljust(8), "dim"), "  ", _why(run, d))
            out.print(why, soft_wrap=True)  # a command to copy: never broken
        unit, before = (
            ("call", report.identical_calls)
            if isinstance(report, ReplayReport)
            else ("step", report.steps)
        )
        notes = [
            f"{plural(before, unit)} identical before it" if before else f"the first {unit} differs"
        ]
        if not agent and report.identical_calls:
            notes.append(f"{plural(report.identical_calls, 'call')} identical")
        if d.others:
            at = f"at call {d.call}" if agent else "there"
            notes.append(f"{plural(d.others, 'more difference')} {at}")
        out.print(Line(("  " + "; ".join(notes), "dim")))
        if isinstance(report, ReplayReport):
            if report.live_from is not None:
                out.print(
                    Line(
                        ("  then live: ", "dim"),
                        f"calls {report.live_from} to {report.calls} were answered by the "
                        "agent's own provider",
                    )
                )
            if report.error:
                out.print(Line(("  the run ended on ", "dim"), safe(report.error)))
            elif report.live_from is not None and report.answer:
                out.print(Line(("  answer: ", "dim"), line(report.answer, max(width - 10, 24))))
        elif report.then_live:
            live = report.live_steps
            said = (
                f"the flow went on; {plural(len(live), 'agent step')} answered by their "
                f"agents' own providers ({', '.join(safe(p) for p in live)})"
                if live
                else "the flow went on; no agent step after it called a model"
            )
            out.print(Line(("  then live: ", "dim"), said))
            if report.error:
                out.print(Line(("  the flow ended on ", "dim"), safe(report.error)))
            elif report.answer:
                out.print(Line(("  answer: ", "dim"), line(report.answer, max(width - 10, 24))))
    out.flush()
    err = err_console()
    if report.recording is not None:
        err.print(Text.assemble(("recording ", "dim"), safe(str(report.recording))), soft_wrap=True)
        if d is not None:
            # An agent's replay is found by its run id; a flow's log by its path.
            other = report.recording.stem if agent else str(report.recording)
            err.print(
                Text.assemble(("every difference: ", "dim"), f"af diff {safe(run)} {safe(other)}"),
                soft_wrap=True,
            )


def _why(run: str, d: Divergence | FlowDivergence) -> str:
    """The af why command for the recorded side: a flow's own keys are asked of its log, a
    call's of the agent step's run through the log (--step: the log holds it once the flow
    ended, so the command works where only the log was shared); an injection's segment is
    asked about at its call (the other keys name their place themselves)."""
    from shlex import quote

    from afcore.readmodel import safe
    from afcore.replay import FlowDivergence

    key = d.why_key or ""
    step = ""
    if isinstance(d, FlowDivergence) and d.run is not None:
        step = f" --step {safe(quote(d.step))}"
    at = f" --at call:{d.call}" if key.startswith("system:") and d.call is not None else ""
    return f"af why {safe(quote(run))} {safe(quote(key))}{step}{at}"
