"""``af why``: which stages, rules and values produced a key, answered from the recording."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from msgspec import Struct

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import complete_run
from afcli._stores import StoreOption

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

    from afcore.recording import FlowRecording, Recording
    from afcore.why import Slice

__all__ = ["why"]

KEYS_HELP = """\
Keys:

```
answer                  the final answer
<id>, injection:<id>    an injection (an instruction, a skill, a fact,
                        ...): where it landed, in any slot, and why
                        (at --at call:N, or the last call it reached)
message:<n>             message n of the run
call:<n>                model call n
tools@<n>               the tools visible at call n, and whence
system:<id>             injection <id>'s segment of the system prompt
tool:<name>#<k>.args    the arguments of a tool's k-th call
                        (or tool:<call id>.args)
tool:<name>#<k>.result  what that call returned
fold:<n>                the n-th fold of the window: what was
                        measured, what left, what refused
<name>                  any key a stage wrote: user_message, route,
                        system, tools, injections, model, ...
```

af why RUN --list prints every key of a run. The default output leads with the decisions
and what the call read; --full draws every stage as a tree, --json gives the slice with
its stage ids (docs/why.md says what they are).
"""


@command
def why(
    run: Annotated[
        str | None,
        typer.Argument(
            metavar="[RUN]",
            help="A recording's path, or a run id (or its unique prefix). Default: the newest "
            "recording; a single argument that names no recording is the KEY.",
            show_default=False,
            autocompletion=complete_run,
        ),
    ] = None,
    key: Annotated[
        str | None,
        typer.Argument(metavar="KEY", help="What to explain (see Keys below).", show_default=False),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="Only what was written up to call N (call:N), or before a stage id "
            "(call-llm#7, as --json shows them).",
            show_default=False,
        ),
    ] = None,
    depth: Annotated[
        int, typer.Option("--depth", min=0, max=1000, help="How many steps back to follow.")
    ] = 8,
    nodes: Annotated[
        int, typer.Option("--nodes", min=1, max=100_000, help="The most stages to show.")
    ] = 100,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Draw every stage as a tree, following every message of every call.",
        ),
    ] = False,
    list_keys: Annotated[
        bool, typer.Option("--list", help="List the keys one can ask about, and who wrote them.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            metavar="ID",
            help="Ask a turn of this session (its id, or a run of one of its turns): the "
            "last, or the one --turn names.",
            show_default=False,
        ),
    ] = None,
    turn: Annotated[
        int | None,
        typer.Option(
            "--turn",
            "-t",
            min=1,
            metavar="N",
            help="With --session: ask turn N (from 1).",
            show_default=False,
        ),
    ] = None,
    step: Annotated[
        str | None,
        typer.Option(
            "--step",
            metavar="PATH",
            help="Of a flow's run: ask the run of its agent step at PATH (route/billing; af "
            "show RUN names them), from the log alone when the flow ended.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json", help='Print {"key", "writer", "nodes", "edges", "truncated"} on stdout.'
        ),
    ] = False,
) -> None:
    """Why does KEY hold what it holds? Walks back from the stage that wrote it through what
    each stage read, with the rules that decided on the way and their evidence, offline.

    ```
    af why RUN answer
    af why RUN refunds --at call:5
    af why RUN tool:search#2.args
    af why answer                (the newest run)
    af why RUN --list
    af why --session ID message:2
    af why FLOW message:2 --step route/billing
    ```

    A message a session's turn continued from is followed back into the turn that wrote it.
    """
    from afcli._runs import open_run, reading_only

    reading_only()  # before afcore.why builds its models
    from afcli._render import print_json
    from afcore.why import NeverWrittenError, UnknownPositionError, cross_flow, keys
    from afcore.why import why as slice_of

    if session is not None:
        from afcli._runs import find_session, session_turn

        if run is not None and key is not None:
            raise CliError("with --session, give only the KEY: af why --session ID KEY")
        path, key = session_turn(find_session(session, store), turn).path, key or run
    elif turn is not None or store is not None:
        raise CliError("--turn and --store name a session's turn: give --session ID too")
    else:
        path, key = _run_and_key(run, key)
    if key is not None and not key.strip():
        raise CliError("the KEY is empty: give one to explain (af why RUN --list shows them)")
    if not list_keys and key is None:
        raise CliError("give a KEY to explain (af why RUN --list shows them)", EXIT_USAGE)
    from afcore.recording import is_flow

    flow: FlowRecording | None = None
    if step is not None:
        flow, path = _step_run(path, step)
    elif is_flow(path):
        _why_flow(path, key, list_keys=list_keys, json_output=json_output)
        return
    with open_run(path) as rec:
        if list_keys:
            listed = keys(rec)
            if json_output:
                print_json(
                    [
                        {"key": k.key, "writer": k.writer, "line": k.line, "what": k.what}
                        for k in listed
                    ]
                )
            else:
                _print_keys([(k.key, k.writer, k.what) for k in listed])
            return
        assert key is not None
        unfinished = (
            f" (the file ends early, at line {rec.torn_tail.line}: the run may not have finished)"
            if rec.torn_tail is not None
            else " (the run did not finish, or is still running)"
            if rec.end is None
            else ""
        )
        try:
            result = slice_of(rec, key, at=at, depth=depth, max_nodes=nodes, full=full)
        except NeverWrittenError as e:
            raise CliError(f"{e}{unfinished}", EXIT_FAILED) from None
        except UnknownPositionError as e:
            raise CliError(str(e), EXIT_USAGE) from None
        if flow is not None:
            cross_flow(result, flow)  # state its rules read: the flow's step that wrote it
        origins = _origins(rec, result, depth=depth, nodes=nodes, full=full)
    if json_output:
        out = result.to_json()
        if origins:
            out["origins"] = [o.to_json() for o in origins]
        print_json(out)
        return
    from afcli._render import out_console

    console = out_console()
    _print_slice(console, result, full, "")
    for o in origins:
        console.print()
        said = _plain(o.said, "bold cyan" if o.slice is not None else "yellow")
        console.print(said, soft_wrap=True)
        if o.slice is not None:
            _print_slice(console, o.slice, full, "")


def _print_slice(console: Console, result: Slice, full: bool, indent: str) -> None:
    """The slice, then, for each tool stage in it that ran an agent, why that run answered
    what it did: reached into through the link the stage recorded."""
    from rich.padding import Padding
    from rich.text import Text

    from afcore.readmodel import safe

    if full:
        console.print(Padding(_tree(result), (0, 0, 0, len(indent))))
    else:
        for text in _compact(result):
            console.print(Text(indent) + text, soft_wrap=True)
    for rsid, inner in result.inner.items():
        run = inner.run
        console.print(Text(""))
        console.print(
            Text.assemble(
                (indent + "↳ ", "cyan"),
                (safe(rsid), "bold"),
                f" ran agent {safe(str(run.get('agent')))}: run {safe(str(run.get('run_id')))} "
                f"({safe(str(run.get('status')))})",
                (f" in {safe(str(run['recording']))}" if run.get("recording") else "", "dim"),
            ),
            soft_wrap=True,
        )
        if inner.slice is None:
            console.print(Text(f"{indent}  not followed: {safe(inner.problem or '')}", "yellow"))
        else:
            _print_slice(console, inner.slice, full, indent + "  ")


why.__doc__ = inspect.cleandoc(why.__doc__ or "") + "\n\n" + KEYS_HELP


class _Origin(Struct):
    """Where a message a session's turn continued from was written: the turn, and the
    slice of the message in that turn's recording."""

    turn: int
    note: str | None
    run_id: str | None
    path: str | None
    key: str | None
    said: str
    slice: Slice | None

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "note": self.note,
            "run_id": self.run_id,
            "path": self.path,
            "key": self.key,
            "slice": self.slice.to_json() if self.slice is not None else None,
        }


def _origins(
    rec: Recording, result: Slice, *, depth: int, nodes: int, full: bool, limit: int = 50
) -> list[_Origin]:
    """A message written by a turn's ``history`` stage, followed back into the turn that
    wrote it (and on, should that be a message it continued from too)."""
    from afcore.errors import RecordingError
    from afcore.readmodel import history_origin
    from afcore.recording import open_recording
    from afcore.why import why as slice_of

    out: list[_Origin] = []
    key, here = result.key, rec
    opened: list[Recording] = []
    try:
        while key.startswith("message:") and key[8:].isdecimal() and len(out) < limit:
            found = history_origin(here, int(key[8:]))
            if found is None:
                break
            run = found.run
            if found.closed:
                why_closed = (found.note or "").partition(": ")[2] or "it did not finish"
                said = (
                    f"{key} was written by af when turn {found.turn} ended, to close a tool "
                    f"call that did not finish ({why_closed}): no turn's own recording holds it"
                )
                out.append(_Origin(found.turn, found.note, None, None, None, said, None))
                break
            if run is None or found.key is None:
                where = (
                    f"turn {found.turn}'s recording (run {run.run_id}) does not hold it"
                    if run is not None
                    else f"turn {found.turn}'s recording is not beside this one"
                )
                said = f"{key} was written by turn {found.turn}, but {where}"
                out.append(_Origin(found.turn, None, None, None, None, said, None))
                break
            try:
                there = open_recording(run.path)
            except RecordingError as e:
                said = f"{key} was written by turn {found.turn}, whose recording fails: {e}"
                out.append(_Origin(found.turn, None, run.run_id, str(run.path), None, said, None))
                break
            opened.append(there)
            followed = slice_of(there, found.key, depth=depth, max_nodes=nodes, full=full)
            said = (
                f"written by turn {found.turn} as its {found.key} "
                f"(af why {run.run_id} {found.key}):"
            )
            out.append(
                _Origin(found.turn, None, run.run_id, str(run.path), found.key, said, followed)
            )
            key, here = found.key, there
    finally:
        for r in opened:
            r.close()
    return out


def _why_flow(path: Path, key: str | None, *, list_keys: bool, json_output: bool) -> None:
    """A flow's recording: its answer, a state key or a step, across its agents."""
    from afcli._flows import flow_keys, open_flow_cli, why_flow
    from afcli._render import Printer, out_console, print_json

    flow = open_flow_cli(path)
    if list_keys:
        rows = flow_keys(flow)
        if json_output:
            print_json([{"key": k, "writer": w, "what": what} for k, w, what in rows])
        else:
            _print_keys(rows)
        return
    assert key is not None
    if json_output:
        from afcore.readmodel import FlowKeyError, flow_graph

        try:
            print_json(flow_graph(flow, key).to_json())
        except FlowKeyError as e:
            raise CliError(str(e), EXIT_FAILED) from None
        return
    said = why_flow(flow, key)
    out = Printer(out_console())
    for line in said:
        out.print(line)
    out.flush()


def _step_run(path: Path, step: str) -> tuple[FlowRecording, Path]:
    """The flow's recording at ``path`` and the run of its agent step at ``step``: the one
    folded into the log, else the file beside it."""
    from afcli._flows import open_flow_cli
    from afcore.recording import is_flow

    if not is_flow(path):
        raise CliError(f"--step names an agent step of a flow's run; {path} is an agent's run")
    flow = open_flow_cli(path)
    found = flow.find(step)
    if found is None or found.kind != "agent":
        raise CliError(f"{path} has no agent step at {step!r} (af show {path} names them)")
    file = flow.run_file(found)
    if file is None or not file.is_file():
        raise CliError(
            f"the run of step {step!r} is neither in {path} nor beside it"
            + (" (the step did not end)" if found.end is None else ""),
            EXIT_FAILED,
        )
    return flow, file


def _run_and_key(run: str | None, key: str | None) -> tuple[Path, str | None]:
    """``af why RUN KEY``, ``af why KEY`` (the newest run) or ``af why RUN``."""
    from afcli._runs import newest, resolve

    if run is None:
        return newest("af why"), None
    if key is not None:
        return resolve(run), key
    try:
        return resolve(run), None
    except CliError:
        # Names no recording: the key, asked of the newest run.
        return newest("af why"), run


def _print_keys(rows: list[tuple[str, str, str]]) -> None:
    from rich.table import Table

    from afcli._render import out_console
    from afcore.readmodel import safe

    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    table.add_column("key")
    table.add_column("written by", style="dim")
    table.add_column("")
    for key, writer, what in rows:
        table.add_row(safe(key), safe(writer), safe(what))
    out_console().print(table)


_CUT = {"evidence": 110, "input": 110}
"""Kinds of summary line cut to one line of this many characters (the rest wrap)."""
_STYLE = {
    "head": "",
    "from": "dim",
    "note": "yellow",
    "title": "bold cyan",
    "decided": "bold magenta",
    "decision": "magenta",
    "evidence": "dim",
    "input": "",
    "more": "dim",
    "warn": "yellow",
}


def _compact(result: Slice) -> list[Text]:
    """The slice as a person reads it first (``afcore.why.summary``), styled."""
    from rich.text import Text

    from afcore.readmodel import line, safe
    from afcore.why import summary

    out = []
    for row in summary(result):
        if row.kind == "blank":
            out.append(Text(""))
            continue
        text = line(row.text, _CUT[row.kind]) if row.kind in _CUT else safe(row.text)
        if row.kind == "head":
            key, _, rest = text.partition("  ")
            out.append(Text.assemble((key, "bold"), "  ", rest))
        else:
            title = row.kind == "title" and row.text == "decided"
            out.append(Text(text, "bold magenta" if title else _STYLE[row.kind]))
    return out


def _tree(result: Slice) -> Tree:
    """One stage a line: the root is the stage that wrote the key, each child a stage it
    read from, with the key that links them; a stage reached again is named, not repeated."""
    from rich.tree import Tree

    from afcore.why import key_words, rest_text

    root = Tree(_line(result, result.writer, None))
    shown = {result.writer}
    stack = [(root, result.writer)]
    while stack:
        branch, rsid = stack.pop()
        node = result.nodes[rsid]
        for words in node.decisions:
            branch.add(_plain(f"decided: {words}", "magenta"))
        for note in node.notes:
            branch.add(_plain(f"note: {note}", "yellow"))
        rest = rest_text(node.rest)
        if rest:
            branch.add(_plain(rest, "dim"))
        children = []
        for edge in result.parents(rsid):
            if edge.source in shown:
                again = f"← {key_words(edge.key)} from {result.nodes[edge.source].label} (above)"
                if edge.label:
                    again += f"\n{edge.label}"
                branch.add(_plain(again, "dim"))
                continue
            shown.add(edge.source)
            child = branch.add(_line(result, edge.source, edge))
            children.append((child, edge.source))
        stack.extend(reversed(children))
    if result.truncated["by_depth"] or result.truncated["by_nodes"]:
        cut = []
        if result.truncated["by_depth"]:
            cut.append(f"{result.truncated['by_depth']} links deeper than --depth")
        if result.truncated["by_nodes"]:
            cut.append(f"{result.truncated['by_nodes']} links past --nodes")
        root.add(_plain("not followed: " + ", ".join(cut), "yellow"))
    return root


def _line(result: Slice, rsid: str, edge: object) -> Text:
    from rich.text import Text

    from afcore.readmodel import safe
    from afcore.why import Edge, key_words

    node = result.nodes[rsid]
    text = Text()
    if isinstance(edge, Edge):
        arrow = "⇐" if edge.kind == "control" else "←"
        text.append(
            f"{arrow} {safe(key_words(edge.key))}: ",
            style="cyan" if edge.kind == "data" else "magenta",
        )
    text.append(safe(node.label), style="bold")
    text.append(f"  iteration {node.iteration}", style="dim")
    if node.value:
        text.append("  ")
        text.append(safe(node.value))
    if isinstance(edge, Edge) and edge.label:
        text.append("\n")
        text.append(safe(edge.label), style="magenta")
    return text


def _plain(words: str, style: str) -> Text:
    from rich.text import Text

    from afcore.readmodel import safe

    return Text(safe(words), style=style)
