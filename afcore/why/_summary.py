"""A slice as a person reads it first, in plain text for any front end: what the key holds,
the call it came from, every decision in the slice once with the values it read, what that
call read, and how much more the slice holds. Each stage appears once; the front ends
style each line by its kind (``af why`` with Rich, the Lens's why popup with Textual)."""

from __future__ import annotations

from typing import Literal

from msgspec import Struct

from afcore.why._slice import Edge, Node, Slice

__all__ = ["SummaryLine", "key_words", "summary"]

Kind = Literal[
    "head", "from", "note", "blank", "title", "decision", "evidence", "input", "more", "warn"
]

_CALL_STAGES = ("call-llm", "summarize")
_READ_LINES = 14
"""The most inputs of the decisive call listed before the rest is counted."""


class SummaryLine(Struct, frozen=True):
    text: str
    """Untrusted text from the recording among af's words: make it safe before showing it."""
    kind: Kind


def key_words(key: str) -> str:
    """A key in the reader's terms: ``message 4``, ``the user's message``."""
    name, sep, rest = key.partition(":")
    if sep and name in ("message", "reply", "call", "fold") and rest.isdecimal():
        return f"{name} {rest}"
    return {
        "user_message": "the user's message",
        "system": "system prompt",
        "active_skills": "skill activated",
    }.get(key, key)


def summary(result: Slice) -> list[SummaryLine]:
    """The slice in a screenful: see the module's docstring."""
    nodes = result.nodes
    root = nodes[result.writer]
    shown = {root.rsid}
    out: list[SummaryLine] = []

    def say(text: str, kind: Kind) -> None:
        out.append(SummaryLine(text, kind))

    value = root.value.removeprefix(f"{result.key} = ") if root.value else root.label
    if root.stage.startswith("tool:"):
        value = f"{root.label} {value}"
    say(f"{result.key}  {value}", "head")
    # The way down to the call the key came from, one stage a step.
    path = [root]
    while path[-1].stage not in _CALL_STAGES:
        ups = [e for e in result.parents(path[-1].rsid) if e.kind == "data"]
        if len(ups) != 1 or ups[0].source in shown:
            break
        path.append(nodes[ups[0].source])
        shown.add(ups[0].source)
    if len(path) > 1:
        steps = " ← ".join(n.label for n in path[1:])
        say(f"  from {steps} (iteration {path[-1].iteration})", "from")
    elif "iteration" not in root.label:
        say(f"  {root.label} (iteration {root.iteration})", "from")
    for note in root.notes:
        say(f"  note: {note}", "note")

    decisions = _decisions(result)
    if decisions:
        say("", "blank")
        say("decided", "title")
        for words, sources in decisions:
            say(f"  {words}", "decision")
            for source in sources:
                node = nodes[source.source]
                shown.add(node.rsid)
                say(f"    on {_input(source, node)}", "evidence")

    call = path[-1] if path[-1].stage in _CALL_STAGES else root
    inputs = [e for e in result.parents(call.rsid) if e.source not in shown]
    if inputs:
        say("", "blank")
        say(f"{call.label} read" if call.stage in _CALL_STAGES else "from", "title")
    for n, edge in enumerate(inputs):
        if n == _READ_LINES:
            say(f"  + {len(inputs) - n} more (af why --full)", "more")
            break
        node = nodes[edge.source]
        shown.add(node.rsid)
        say(f"  {_input(edge, node)}", "input")
    said = rest_text(call.rest)
    if said:
        say(f"  {said}", "more")

    further = [n for rsid, n in nodes.items() if rsid not in shown]
    if further:
        calls = sorted({n.label for n in further if n.stage in _CALL_STAGES}, key=_call_order)
        said = _plural(len(further), "earlier stage")
        if calls:
            said += f", back through {', '.join(calls)}"
        say("", "blank")
        say(f"further back: {said} (af why --full draws them all)", "more")
    if result.truncated["by_depth"] or result.truncated["by_nodes"]:
        say("not followed past --depth or --nodes: raise them to see more", "warn")
    return out


def _input(edge: Edge, node: Node) -> str:
    """One thing a stage read, in the reader's terms: ``message 4: lookup_order, call 1
    returned '...'``."""
    key = key_words(edge.key)
    if edge.kind == "data" and edge.label:
        return f"{key}: {edge.label}"
    if node.stage == "seed":
        return f"{key}: {node.value}"
    if node.stage == "inject":
        return f"{key}: {node.label}"
    what = f"{node.label} {node.value}" if node.stage.startswith("tool:") else node.label
    return f"{key}: {what}"


def _decisions(result: Slice) -> list[tuple[str, list[Edge]]]:
    """Every decision in the slice once, with the edges of the values it read. A decision
    carried over from an earlier iteration is the same decision."""
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


def rest_text(rest: dict[str, int] | None) -> str:
    """``+ 4 messages of the model's own, not followed; 2 messages folded out of the window
    before``: what a call's node leaves out of its slice (:attr:`Node.rest`), or ``""``."""
    rest = rest or {}
    more = []
    if rest.get("messages"):
        more.append(f"{_plural(rest['messages'], 'message')} of the model's own, not followed")
    if rest.get("folded"):
        more.append(f"{_plural(rest['folded'], 'message')} folded out of the window before")
    return f"+ {'; '.join(more)}" if more else ""


def _call_order(label: str) -> int:
    tail = label.rpartition(" ")[2]
    return int(tail) if tail.isdecimal() else 0


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"
