"""``af why``: which stages, rules and values produced a key, answered from the recording."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import complete_run

if TYPE_CHECKING:
    from rich.text import Text
    from rich.tree import Tree

    from afcore.why import Edge, Node, Slice

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
    ```
    """
    from afcli._render import print_json
    from afcli._runs import open_run
    from afcore.why import NeverWrittenError, UnknownPositionError, keys
    from afcore.why import why as slice_of

    path, key = _run_and_key(run, key)
    if key is not None and not key.strip():
        raise CliError("the KEY is empty: give one to explain (af why RUN --list shows them)")
    if not list_keys and key is None:
        raise CliError("give a KEY to explain (af why RUN --list shows them)", EXIT_USAGE)
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
    if json_output:
        print_json(result.to_json())
    else:
        from afcli._render import out_console

        console = out_console()
        if full:
            console.print(_tree(result))
        else:
            for text in _compact(result):
                console.print(text, soft_wrap=True)


why.__doc__ = inspect.cleandoc(why.__doc__ or "") + "\n\n" + KEYS_HELP


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


_CALL_STAGES = ("call-llm", "summarize")
_READ_LINES = 14
"""The most inputs of the decisive call listed before the rest is counted."""


def _key_words(key: str) -> str:
    """A key in the reader's terms."""
    name, sep, rest = key.partition(":")
    if sep and name in ("message", "reply", "call", "fold") and rest.isdigit():
        return f"{name} {rest}"
    return {
        "user_message": "the user's message",
        "system": "system prompt",
        "active_skills": "skill activated",
    }.get(key, key)


def _compact(result: Slice) -> list[Text]:
    """The slice as a person reads it first: what the key holds, the decisions that put it
    there with the values they read, the call it came from and what that call read. Each
    stage once; ``--full`` draws the whole tree."""
    from rich.text import Text

    from afcore.readmodel import plural, safe

    nodes = result.nodes
    root = nodes[result.writer]
    shown = {root.rsid}
    value = root.value.removeprefix(f"{result.key} = ") if root.value else root.label
    if root.stage.startswith("tool:"):
        value = f"{root.label} {value}"
    out: list[Text] = [Text.assemble((safe(result.key), "bold"), "  ", safe(value))]
    # The way down to the call the key came from, one stage a step.
    path = [root]
    while path[-1].stage not in _CALL_STAGES:
        ups = [e for e in result.parents(path[-1].rsid) if e.kind == "data"]
        if len(ups) != 1 or ups[0].source in shown:
            break
        path.append(nodes[ups[0].source])
        shown.add(ups[0].source)
    if len(path) > 1:
        steps = " ← ".join(safe(n.label) for n in path[1:])
        out.append(Text(f"  from {steps} (iteration {path[-1].iteration})", "dim"))
    elif "iteration" not in root.label:
        out.append(Text(f"  {safe(root.label)} (iteration {root.iteration})", "dim"))
    for note in root.notes:
        out.append(Text(f"  note: {safe(note)}", "yellow"))

    decisions = _decisions(result)
    if decisions:
        out += [Text(""), Text("decided", "bold magenta")]
        for words, sources in decisions:
            out.append(Text(f"  {safe(words)}", "magenta"))
            for source in sources:
                node = nodes[source.source]
                shown.add(node.rsid)
                out.append(Text(safe(_one_line(f"    on {_input(source, node)}", 110)), "dim"))

    call = path[-1] if path[-1].stage in _CALL_STAGES else root
    inputs = [e for e in result.parents(call.rsid) if e.source not in shown]
    if inputs:
        title = f"{call.label} read" if call.stage in _CALL_STAGES else "from"
        out += [Text(""), Text(title, "bold cyan")]
    for n, edge in enumerate(inputs):
        if n == _READ_LINES:
            out.append(Text(f"  + {len(inputs) - n} more (af why --full)", "dim"))
            break
        node = nodes[edge.source]
        shown.add(node.rsid)
        out.append(Text(safe(_one_line(f"  {_input(edge, node)}", 110))))
    rest = call.rest or {}
    more = []
    if rest.get("messages"):
        more.append(f"{plural(rest['messages'], 'message')} of the model's own, not followed")
    if rest.get("folded"):
        more.append(f"{plural(rest['folded'], 'message')} folded out of the window before")
    if more:
        out.append(Text(f"  + {'; '.join(more)}", "dim"))

    further = [n for rsid, n in nodes.items() if rsid not in shown]
    if further:
        calls = sorted({n.label for n in further if n.stage in _CALL_STAGES}, key=_call_order)
        said = plural(len(further), "earlier stage")
        if calls:
            said += f", back through {', '.join(calls)}"
        out += [Text(""), Text(f"further back: {safe(said)} (af why --full draws them all)", "dim")]
    if result.truncated["by_depth"] or result.truncated["by_nodes"]:
        out.append(Text("not followed past --depth or --nodes: raise them to see more", "yellow"))
    return out


def _input(edge: Edge, node: Node) -> str:
    """One thing a stage read, in the reader's terms: ``message 4: lookup_order, call 1
    returned '...'``."""
    key = _key_words(edge.key)
    if edge.kind == "data" and edge.label:
        return f"{key}: {edge.label}"
    if node.stage == "seed":
        return f"{key}: {node.value}"
    if node.stage == "inject":
        return f"{key}: {node.label}"
    what = f"{node.label} {node.value}" if node.stage.startswith("tool:") else node.label
    return f"{key}: {what}"


def _call_order(label: str) -> int:
    tail = label.rpartition(" ")[2]
    return int(tail) if tail.isdigit() else 0


def _decisions(result: Slice) -> list[tuple[str, list[Edge]]]:
    """Every decision in the slice once, newest stage first, with the edges of the values
    it read. A decision carried over from an earlier iteration is the same decision."""
    found: dict[str, list[Edge]] = {}
    for node in result.nodes.values():
        for words in node.decisions:
            found.setdefault(_base(words), [])
    for edge in result.edges:
        if edge.kind == "control" and edge.label:
            sources = found.setdefault(_base(edge.label), [])
            if not edge.label.endswith("unchanged since)") and edge not in sources:
                sources.append(edge)
    return list(found.items())


def _base(words: str) -> str:
    """A decision's words without where it was carried over from."""
    head, sep, _ = words.rpartition(" (decided at iteration ")
    return head if sep else words


def _one_line(text: str, limit: int) -> str:
    from afcore.readmodel import line

    return line(text, limit)


def _tree(result: Slice) -> Tree:
    """One stage a line: the root is the stage that wrote the key, each child a stage it
    read from, with the key that links them; a stage reached again is named, not repeated."""
    from rich.tree import Tree

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
        if node.rest is not None and (node.rest["messages"] or node.rest["folded"]):
            rest = f"+ {node.rest['messages']} earlier messages not followed"
            if node.rest["folded"]:
                rest += f", {node.rest['folded']} folded out of the window before this call"
            branch.add(_plain(rest, "dim"))
        children = []
        for edge in result.parents(rsid):
            if edge.source in shown:
                again = f"← {_key_words(edge.key)} from {result.nodes[edge.source].label} (above)"
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
    from afcore.why import Edge

    node = result.nodes[rsid]
    text = Text()
    if isinstance(edge, Edge):
        arrow = "⇐" if edge.kind == "control" else "←"
        text.append(
            f"{arrow} {safe(_key_words(edge.key))}: ",
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
