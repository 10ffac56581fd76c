"""``w``: why the selected item is what it is, as the causal slice ``afcore.why`` answers from
the file: first its summary (what the key holds, in full; the decisions and the values they
read; what the call read), wrapped to the popup; then the tree from the stage that wrote it
back to the stages, rules and values that produced it, in the reader's terms. A stage
reached a second time is named, not repeated. Enter on a stage goes to its call.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, Tree

from afcore.errors import AfError
from afcore.readmodel import line as one_line
from afcore.readmodel import safe
from afcore.recording import Recording
from afcore.why import NeverWrittenError, Node, Slice, key_words, rest_text, summary, why

__all__ = ["WhyScreen", "slice_tree"]


_VALUE = 60
"""A tree line's value is cut to this many characters (the summary above has it whole)."""

_STYLE = {
    "head": "bold",
    "from": "dim",
    "note": "yellow",
    "title": "bold cyan",
    "decision": "magenta",
    "evidence": "dim",
    "input": "",
    "more": "dim",
    "warn": "yellow",
}


def summary_text(found: Slice) -> Text:
    """The slice's summary, wrapped by the popup: nothing cut."""
    text = Text()
    for row in summary(found):
        if text:
            text.append("\n")
        style = "bold magenta" if row.kind == "title" and row.text == "decided" else None
        text.append(safe(row.text), style=style or _STYLE.get(row.kind, ""))
    return text


def _label(node: Node, via: str) -> Text:
    text = Text()
    if via:
        text.append(f"{via} ", style="cyan")
    text.append(safe(node.label), style="bold")
    if node.value:
        text.append(f"  {one_line(node.value, _VALUE)}")
    return text


def slice_tree(tree: Tree[int], found: Slice, width: int = 120) -> None:
    """Fill ``tree`` with ``found``: each node's children are the stages it read from. Each
    line is cut to fit ``width`` at its depth (the summary above has the values whole)."""
    root_node = found.nodes[found.writer]

    def fit(text: Text, depth: int) -> Text:
        text.truncate(max(20, width - 4 * depth - 2), overflow="ellipsis")
        return text

    tree.root.set_label(fit(_label(root_node, ""), 0))
    tree.root.data = root_node.line
    shown: set[str] = set()

    def grow(parent: object, rsid: str, depth: int) -> None:
        node = found.nodes[rsid]
        branch = parent  # a TreeNode
        for text in node.decisions:
            branch.add_leaf(fit(Text(f"decided: {one_line(text, width)}", "green"), depth + 1))  # type: ignore[attr-defined]
        for text in node.notes:
            branch.add_leaf(fit(Text(one_line(text, width), style="yellow"), depth + 1))  # type: ignore[attr-defined]
        rest = rest_text(node.rest)
        if rest:
            branch.add_leaf(fit(Text(rest, style="dim"), depth + 1))  # type: ignore[attr-defined]
        for edge in found.parents(rsid):
            parent_node = found.nodes.get(edge.source)
            if parent_node is None:
                continue
            arrow = "⇐" if edge.kind == "control" else "←"
            via = f"{arrow} {safe(key_words(edge.key))}:"
            if edge.source in shown:
                label = Text(f"{via} ", style="cyan")
                label.append(f"{safe(parent_node.label)} (above)", style="dim")
                branch.add_leaf(fit(label, depth + 1), data=parent_node.line)  # type: ignore[attr-defined]
                continue
            shown.add(edge.source)
            label = fit(_label(parent_node, via), depth + 1)
            child = branch.add(label, data=parent_node.line, expand=True)  # type: ignore[attr-defined]
            grow(child, edge.source, depth + 1)

    shown.add(found.writer)
    grow(tree.root, found.writer, 0)
    cut = {k: v for k, v in found.truncated.items() if v}
    if cut:
        said = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in cut.items())
        tree.root.add_leaf(Text(f"(not followed: {said})", style="dim"))
    tree.root.expand()


class WhyScreen(ModalScreen[int | None]):
    """Dismissed with the line of the stage chosen, or None."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Back", id="why.back"),
        Binding("enter", "go", "Go to the stage's call", id="why.go", priority=True),
        Binding("tab", "focus_next", "Summary / stages", id="why.switch"),
    ]

    def __init__(self, rec: Recording, key: str, at: str | None) -> None:
        super().__init__()
        self.rec = rec
        self.key = key
        self.at = at

    def compose(self) -> ComposeResult:
        title = Text(f"why {safe(self.key)}", style="bold")
        if self.at:
            title.append(f" at {safe(self.at)}", style="dim")
        tree: Tree[int] = Tree(Text(""))
        tree.show_root = True
        with Vertical():
            yield Static(title, id="why-title")
            with VerticalScroll(id="why-summary"):
                yield Static(Text(""), id="why-text")
            yield tree
        yield Footer()

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        said = self.query_one("#why-text", Static)
        try:
            found = why(self.rec, self.key, at=self.at)
        except NeverWrittenError as e:
            near = f" (nearest: {', '.join(e.nearest[:5])})" if e.nearest else ""
            said.update(Text(f"{safe(str(e))}{safe(near)}", style="yellow"))
            tree.display = False
            return
        except (AfError, KeyError, ValueError, IndexError) as e:
            said.update(Text(f"no slice: {safe(str(e))}", style="red"))
            tree.display = False
            return
        said.update(summary_text(found))
        # The popup is 96% of the screen, within its border and the tree's own margin.
        slice_tree(tree, found, width=int(self.app.size.width * 0.96) - 6)
        tree.focus()

    def action_go(self) -> None:
        tree = self.query_one(Tree)
        node = tree.cursor_node
        if node is not None and node.data is not None:
            self.dismiss(node.data)

    @on(Tree.NodeSelected)
    def _chosen(self, event: Tree.NodeSelected[int]) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)
