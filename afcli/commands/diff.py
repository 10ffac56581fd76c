"""``af diff``: two recordings aligned call by call, and what differs in each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from afcli._errors import EXIT_FAILED, command
from afcli._params import RunArg

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from afcli._render import Line, Printer
    from afcore.readmodel import CallDiff, Change, FlowDiff, RunDiff

__all__ = ["diff"]


@command
def diff(
    a: RunArg,
    b: Annotated[
        str,
        typer.Argument(
            metavar="B",
            help="The recording to compare with RUN: a path, a run id or a unique prefix.",
            show_default=False,
        ),
    ],
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"identical", "a", "b", "compared", "identical_calls", "calls", "end"} '
            "on stdout.",
        ),
    ] = False,
) -> None:
    """Compare two recordings (a run and its replay, or two runs of one agent before and
    after a change), call by call: what differs in each slot (segments with their
    injections, messages, tools, params), in the tool calls and their results, and in the
    answers.

    Two flows' runs (their logs) are compared step by step: the steps that ran in one and
    not the other, the decisions that went another way with the values their predicates
    read, what steps gave and wrote, the merges, then call by call inside each agent step
    both ran.

    A difference a later call is sent again is listed at the first call that has it. Exit 0
    when the runs are identical, 1 when they differ.
    """
    from afcli._render import Printer, out_console, print_json
    from afcli._runs import open_run, reading_only, resolve
    from afcore.readmodel import diff_runs
    from afcore.recording import is_flow

    reading_only()

    left_path, right_path = resolve(a), resolve(b)
    flows = is_flow(left_path), is_flow(right_path)
    if any(flows):
        _flows_or_refuse(left_path, right_path, flows)
        result_flow = _diff_flows(left_path, right_path)
        if json_output:
            print_json(result_flow.to_json())
        else:
            console = out_console()
            out = Printer(console)
            _print_flow(out, result_flow, console.width or 100)
            out.flush()
        if not result_flow.identical:
            raise typer.Exit(EXIT_FAILED)
        return
    with open_run(left_path) as left, open_run(right_path) as right:
        result = diff_runs(left, right)
    if json_output:
        print_json(result.to_json())
    else:
        console = out_console()
        out = Printer(console)
        _print(out, result, console.width or 100)
        out.flush()
    if not result.identical:
        raise typer.Exit(EXIT_FAILED)


def _flows_or_refuse(a: Path, b: Path, flows: tuple[bool, bool]) -> None:
    """A flow's run is compared with a flow's run only: one with an agent's run is refused
    in a sentence that says where the flow's agents' runs are."""
    from afcli._errors import EXIT_USAGE, CliError

    if all(flows):
        return
    log, other = (a, b) if flows[0] else (b, a)
    raise CliError(
        f"{log} is a flow's log and {other} is one agent's run: af diff compares two flows' "
        "runs (and each agent step's run in both), or two agents' runs",
        EXIT_USAGE,
    )


def _diff_flows(a: Path, b: Path) -> FlowDiff:
    from afcli._flows import open_flow_cli
    from afcore.readmodel import diff_flows

    return diff_flows(open_flow_cli(a), open_flow_cli(b))


def _print_flow(out: Printer, d: FlowDiff, width: int) -> None:
    from afcli._render import Line
    from afcore.readmodel import line, plural, safe

    _sides(out, d.a, d.b, "step")
    for step in d.steps:
        head = Line(
            ("step ", "bold"), (safe(step.path or "(top)"), "bold"), (f"  {step.kind}", "dim")
        )
        if step.only_in is not None:
            head.append(f"  ran only in {step.only_in}", "yellow")
        out.print(head)
        _print_changes(out, step.changes, width)
        if step.run_error is not None:
            out.print(Line("  ", ("✗ ", "red"), line(step.run_error, max(width - 4, 24))))
        if step.run is not None:
            run = step.run
            out.print(
                Line(
                    "  ",
                    ("agent run", "cyan"),
                    (f"  {len(run.calls)} of {plural(run.compared, 'call')} differ", "dim"),
                )
            )
            for call in run.calls:
                _print_call(out, call, width)
            for change in run.end:
                _print_change(out, change, width, indent=4)
    _ending(out, d, len(d.steps), "step", width)


def _print(out: Printer, d: RunDiff, width: int) -> None:
    _sides(out, d.a, d.b, "call")
    shown = 0
    for call in d.calls:
        if call.call > shown + 1:
            out.print(_same(shown + 1, call.call - 1))
        _print_call(out, call, width)
        shown = call.call
    if d.compared > shown:
        out.print(_same(shown + 1, d.compared))
    _ending(out, d, len(d.calls), "call", width)


def _sides(out: Printer, a: Any, b: Any, unit: str) -> None:
    """The two recordings compared, a line each: name, size, how each ended."""
    from pathlib import Path

    from afcli._render import Line
    from afcore.readmodel import plural, safe

    for label, side in (("a", a), ("b", b)):
        size = plural(side.calls, "call")
        if unit == "step":
            size = f"{plural(side.steps, 'step')} · {size}"
        out.print(
            Line(
                (f"{label}  ", "bold"),
                safe(Path(side.path).name),
                (f"  {size} · {side.status or 'did not finish'}", "dim"),
            )
        )


def _ending(out: Printer, d: RunDiff | FlowDiff, differing: int, unit: str, width: int) -> None:
    """How the runs ended, if that differs, and the verdict."""
    from afcli._render import Line
    from afcore.readmodel import plural

    if d.end:
        out.print(Line(("end", "bold")))
        for change in d.end:
            _print_change(out, change, width)
    if d.identical:
        out.print(Line((f"identical: {plural(d.compared, unit)}, the same ending", "bold green")))
    else:
        out.print(
            Line(
                (f"{differing} of {plural(d.compared, unit)} differ", "bold"),
                ("" if not d.end else " · the endings differ", "bold"),
            )
        )


def _same(first: int, last: int) -> Line:
    from afcli._render import Line

    which = f"call {first}" if first == last else f"calls {first}–{last}"
    return Line((f"{which}  identical", "dim"))


def _print_call(out: Printer, c: CallDiff, width: int) -> None:
    from afcli._render import Line
    from afcore.readmodel import plural

    head = Line((f"call {c.call}", "bold"))
    if not c.in_a or not c.in_b:
        head.append("  only in " + ("b" if not c.in_a else "a"), "yellow")
    elif c.same_request:
        head.append("  the same request", "dim")
    out.print(head)
    _print_changes(out, c.changes, width)
    if c.carried:
        out.print(
            Line(
                ("    " if c.changes else "  ", ""),
                (f"{plural(c.carried, 'difference')} carried from earlier calls", "dim"),
            )
        )


def _print_changes(out: Printer, changes: Iterable[Change], width: int) -> None:
    """A step's or a call's changes, under a heading for each slot (a change to the run as a
    whole stands on its own), with what each side's predicates read where a decision
    differs."""
    from afcli._changes import SLOT_NAMES
    from afcli._render import Line
    from afcore.readmodel import evidence_text, line

    slot = None
    for change in changes:
        whole = change.slot == "run"
        if change.slot != slot and not whole:
            slot = change.slot
            out.print(Line("  ", (SLOT_NAMES.get(slot, slot), "cyan")))
        _print_change(out, change, width, indent=2 if whole else 4)
        for label, key in (("a read", "reads_a"), ("b read", "reads_b")):
            reads = change.where.get(key)
            if isinstance(reads, dict) and reads:
                out.print(
                    Line(
                        "        ",
                        (label.ljust(8), "dim"),
                        "  ",
                        line(evidence_text(reads), max(width - 20, 24)),
                    )
                )


def _print_change(out: Printer, change: Change, width: int, indent: int = 2) -> None:
    from afcli._changes import change_lines

    for row in change_lines(
        change.kind, change.path, change.a, change.b, labels=("a", "b"), width=width, indent=indent
    ):
        out.print(row)
