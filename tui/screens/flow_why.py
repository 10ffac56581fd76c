"""``w`` on a flow's step or decision: the graph of what produced it (afcore's
``flow_graph``), drawn as a tree from the key down what explains it: the decision that
chose a step and the values its predicates read, the step that wrote each value, a merge's
branches, an agent step's calls. A node met a second time is named, not repeated. Enter on
a call goes to it on the flow's scrubber.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from afcore.readmodel import FlowGraph, FlowKeyError, FlowTimeline, GraphNode, flow_graph, safe
from afcore.readmodel import line as one_line
from afcore.recording import FlowRecording

__all__ = ["FlowWhyScreen", "graph_tree"]

_WORDS = {
    "produced_by": "← produced by",
    "decided_by": "⇐ decided by",
    "read": "← read",
    "ran_in": "ran in",
}
_STYLE = {
    "answer": "bold",
    "step": "bold",
    "decision": "magenta",
    "merge": "magenta",
    "call": "cyan",
    "value": "",
}


def _label(node: GraphNode, via: str, width: int) -> Text:
    text = Text()
    if via:
        text.append(f"{via} ", style="dim")
    text.append(safe(node.label), style=_STYLE.get(node.kind, ""))
    text.truncate(max(width, 20), overflow="ellipsis")
    return text


def graph_tree(tree: Tree[int], graph: FlowGraph, width: int = 120) -> None:
    """Fill ``tree`` with ``graph`` from its root: each node's children are what explains
    it. A call's node holds its index on the flow's timeline."""
    shown: set[str] = set()

    def data(node: GraphNode) -> int | None:
        index = node.data.get("index")
        return index if isinstance(index, int) else None

    def grow(branch: TreeNode[int], id: str, depth: int) -> None:
        for edge in graph.out(id):
            if edge.kind == "ran_in":
                continue  # a call's step is the one it is listed under
            node = graph.nodes[edge.target]
            room = width - 4 * (depth + 1)
            if edge.target in shown:
                label = _label(node, _WORDS[edge.kind], room)
                label.append(" (above)", style="dim")
                branch.add_leaf(label, data=data(node))
                continue
            shown.add(edge.target)
            child = branch.add(_label(node, _WORDS[edge.kind], room), data=data(node), expand=True)
            grow(child, edge.target, depth + 1)
            if not child.children:
                child.allow_expand = False

    root = graph.nodes[graph.root]
    tree.root.set_label(_label(root, "", width))
    tree.root.data = data(root)
    shown.add(graph.root)
    grow(tree.root, graph.root, 0)
    tree.root.expand()


def summary(graph: FlowGraph) -> Text:
    """What the key holds, and for a decision every predicate asked with all it read."""
    root = graph.nodes[graph.root]
    text = Text(safe(root.label), style="bold")
    if root.kind == "decision":
        for v in root.data.get("verdicts", []):
            mark = ("✓ ", "green") if v.get("fired") else ("✗ ", "dim")
            text.append("\n  ")
            text.append(*mark)
            text.append(f"{safe(str(v.get('name')))}: {safe(str(v.get('reason')))}")
            for key, value in v.get("reads", []):
                text.append(f"\n      read {safe(str(key))} = {one_line(repr(value), 200)}", "dim")
            if v.get("error"):
                text.append(f"\n      error: {safe(str(v['error']))}", "red")
    elif "value" in root.data and root.data["value"] is not None:
        text.append(f"\n  {one_line(str(root.data['value']), 400)}")
    return text


class FlowWhyScreen(ModalScreen[int | None]):
    """Dismissed with the flow-timeline index of the call chosen, or None."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Back", id="flowwhy.back"),
        Binding("enter", "go", "Go to the call", id="flowwhy.go", priority=True),
        Binding("tab", "focus_next", "Summary / graph", id="flowwhy.switch"),
    ]

    def __init__(self, flow: FlowRecording, timeline: FlowTimeline, key: str) -> None:
        super().__init__()
        self.flow = flow
        self.timeline = timeline
        self.key = key

    def compose(self) -> ComposeResult:
        tree: Tree[int] = Tree(Text(""))
        with Vertical():
            yield Static(Text(f"why {safe(self.key)}", style="bold"), id="why-title")
            with VerticalScroll(id="why-summary"):
                yield Static(Text(""), id="why-text")
            yield tree
        yield Footer()

    def on_mount(self) -> None:
        tree = self.query_one(Tree)
        said = self.query_one("#why-text", Static)
        try:
            graph = flow_graph(self.flow, self.key, timeline=self.timeline)
        except FlowKeyError as e:
            said.update(Text(safe(str(e)), style="yellow"))
            tree.display = False
            return
        said.update(summary(graph))
        graph_tree(tree, graph, width=int(self.app.size.width * 0.96) - 6)
        tree.focus()

    def action_go(self) -> None:
        node = self.query_one(Tree).cursor_node
        if node is not None and node.data is not None:
            self.dismiss(node.data)

    @on(Tree.NodeSelected)
    def _chosen(self, event: Tree.NodeSelected[int]) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)
