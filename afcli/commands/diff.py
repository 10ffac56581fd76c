"""``af diff``: two recordings aligned call by call, and what differs in each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from afcli._errors import EXIT_FAILED, command
from afcli._params import RunArg

if TYPE_CHECKING:
    from afcli._render import Line, Printer
    from afcore.readmodel import CallDiff, Change, RunDiff

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

    A difference a later call is sent again is listed at the first call that has it. Exit 0
    when the runs are identical, 1 when they differ.
    """
    from afcli._render import Printer, out_console, print_json
    from afcli._runs import open_run, refuse_a_flow, resolve
    from afcore.readmodel import diff_runs

    for ref in (a, b):
        refuse_a_flow(resolve(ref), "diff")
    with open_run(a) as left, open_run(b) as right:
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


def _print(out: Printer, d: RunDiff, width: int) -> None:
    from pathlib import Path

    from afcli._render import Line
    from afcore.readmodel import plural, safe

    for label, side in (("a", d.a), ("b", d.b)):
        out.print(
            Line(
                (f"{label}  ", "bold"),
                safe(Path(side.path).name),
                (f"  {plural(side.calls, 'call')} · {side.status or 'did not finish'}", "dim"),
            )
        )
    shown = 0
    for call in d.calls:
        if call.call > shown + 1:
            out.print(_same(shown + 1, call.call - 1))
        _print_call(out, call, width)
        shown = call.call
    if d.compared > shown:
        out.print(_same(shown + 1, d.compared))
    if d.end:
        out.print(Line(("end", "bold")))
        for change in d.end:
            _print_change(out, change, width)
    differing = len(d.calls)
    if d.identical:
        out.print(Line((f"identical: {plural(d.compared, 'call')}, the same ending", "bold green")))
    else:
        out.print(
            Line(
                (f"{differing} of {plural(d.compared, 'call')} differ", "bold"),
                ("" if not d.end else " · the endings differ", "bold"),
            )
        )


def _same(first: int, last: int) -> Line:
    from afcli._render import Line

    which = f"call {first}" if first == last else f"calls {first}–{last}"
    return Line((f"{which}  identical", "dim"))


def _print_call(out: Printer, c: CallDiff, width: int) -> None:
    from afcli._changes import SLOT_NAMES
    from afcli._render import Line
    from afcore.readmodel import plural

    head = Line((f"call {c.call}", "bold"))
    if not c.in_a or not c.in_b:
        head.append("  only in " + ("b" if not c.in_a else "a"), "yellow")
    elif c.same_request:
        head.append("  the same request", "dim")
    out.print(head)
    slot = None
    for change in c.changes:
        if change.slot != slot and change.slot != "run":
            slot = change.slot
            out.print(Line("  ", (SLOT_NAMES.get(slot, slot), "cyan")))
        _print_change(out, change, width, indent=4 if change.slot != "run" else 2)
    if c.carried:
        out.print(
            Line(
                ("    " if c.changes else "  ", ""),
                (f"{plural(c.carried, 'difference')} carried from earlier calls", "dim"),
            )
        )


def _print_change(out: Printer, change: Change, width: int, indent: int = 2) -> None:
    from afcli._changes import change_lines

    for row in change_lines(
        change.kind, change.path, change.a, change.b, labels=("a", "b"), width=width, indent=indent
    ):
        out.print(row)
