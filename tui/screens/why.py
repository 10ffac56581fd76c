"""``w``: why the selected item is what it is, as the causal slice ``afcore.why`` answers from
the file: a tree from the stage that wrote it back to the stages, rules and values that
produced it. A stage reached a second time is named, not repeated. Enter on a stage goes to
its call.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, Tree

from afcore.errors import AfError
from afcore.readmodel import line as one_line
from afcore.readmodel import safe
from afcore.recording import Recording
from afcore.why import NeverWrittenError, Node, Slice, why

__all__ = ["WhyScreen", "slice_tree"]


def _label(node: Node, via: str) -> Text:
    text = Text()
    if via:
        text.append(f"{via} ", style="cyan")
    text.append(safe(node.rsid), style="bold")
    text.append(f"  iteration {node.iteration}", style="dim")
    if node.value:
        text.append(f"  {one_line(node.value, 120)}")
    return text


def slice_tree(tree: Tree[int], found: Slice) -> None:
    """Fill ``tree`` with ``found``: each node's children are the stages it read from."""
    root_node = found.nodes[found.writer]
    tree.root.set_label(_label(root_node, ""))
    tree.root.data = root_node.line
    shown: set[str] = set()

    def grow(parent: object, rsid: str) -> None:
        node = found.nodes[rsid]
        branch = parent  # a TreeNode
        for text in node.decisions:
            branch.add_leaf(Text(f"decided: {one_line(text, 160)}", style="green"))  # type: ignore[attr-defined]
        for text in node.notes:
            branch.add_leaf(Text(one_line(text, 160), style="yellow"))  # type: ignore[attr-defined]
        if node.rest:
            said = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in node.rest.items() if v)
            if said:
                branch.add_leaf(Text(f"+ {said}", style="dim"))  # type: ignore[attr-defined]
        for edge in found.parents(rsid):
            parent_node = found.nodes.get(edge.source)
            if parent_node is None:
                continue
            arrow = "⇐" if edge.kind == "control" else "←"
            via = f"{arrow} {safe(edge.key)}"
            if edge.label:
                via += f" ({one_line(edge.label, 80)})"
            if edge.source in shown:
                label = Text(f"{via} ", style="cyan")
                label.append(f"{safe(edge.source)} (above)", style="dim")
                branch.add_leaf(label, data=parent_node.line)  # type: ignore[attr-defined]
                continue
            shown.add(edge.source)
            child = branch.add(_label(parent_node, via), data=parent_node.line, expand=True)  # type: ignore[attr-defined]
            grow(child, edge.source)

    shown.add(found.writer)
    grow(tree.root, found.writer)
    cut = {k: v for k, v in found.truncated.items() if v}
    if cut:
        said = ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in cut.items())
        tree.root.add_leaf(Text(f"(not followed: {said})", style="dim"))
    tree.root.expand()


class WhyScreen(ModalScreen[int | None]):
    """Dismissed with the line of the stage chosen, or None."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back", id="why.back")]

    def __init__(self, rec: Recording, key: str, at: str | None) -> None:
        super().__init__()
        self.rec = rec
        self.key = key
        self.at = at

    def compose(self) -> ComposeResult:
        title = Text(f"why {safe(self.key)}", style="bold")
        if self.at:
            title.append(f" at {safe(self.at)}", style="dim")
        title.append("  Enter: go to the stage's call · Esc: back", style="dim")
        tree: Tree[int] = Tree(Text(""))
        tree.show_root = True
        with Vertical():
            yield Static(title)
            yield tree

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        try:
            found = why(self.rec, self.key, at=self.at)
        except NeverWrittenError as e:
            near = f" (nearest: {', '.join(e.nearest[:5])})" if e.nearest else ""
            tree.root.set_label(Text(f"{safe(str(e))}{safe(near)}", style="yellow"))
            return
        except (AfError, KeyError, ValueError, IndexError) as e:
            tree.root.set_label(Text(f"no slice: {safe(str(e))}", style="red"))
            return
        slice_tree(tree, found)
        tree.focus()

    @on(Tree.NodeSelected)
    def _chosen(self, event: Tree.NodeSelected[int]) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)
