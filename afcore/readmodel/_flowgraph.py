"""What produced a flow's answer (or a state value, or a step's output), as a graph: the
steps, decisions, merges, agent calls and values read that bear on it, and how each leads
to the next. ``af why FLOWRUN KEY --json`` prints it; the Lens's ``w`` draws it.

Edges point from what is explained to what explains it:

- ``produced_by``: the answer, a step, a merge or a value, to what made it (the step whose
  output the answer is; a flow to the step or merge whose output is its own; an agent step
  to the call whose reply is its answer; a merge to its branches; a state value to the step
  that wrote it; a step's input to the step before it, whose output it is);
- ``decided_by``: a step to the decision that chose it (a Conditional's branch; a loop's
  turn, by the decision after the turn before);
- ``read``: a decision, a merge, a function step or an agent's call (through its rules'
  evidence) to each value it read; a step to its input; an agent's call to the call before
  it in its run (whose reply, and the results of the tools it asked for, it was sent);
- ``ran_in``: an agent's call to the step that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from afcore.errors import AfError
from afcore.readmodel._flow import FlowTimeline, flow_timeline
from afcore.readmodel._text import as_text, json_text, line
from afcore.recording import FlowLogStep, FlowRecording
from afcore.recording._typed import dump

__all__ = ["EDGE_KINDS", "FlowEdge", "FlowGraph", "FlowKeyError", "GraphNode", "flow_graph"]

EDGE_KINDS = ("produced_by", "decided_by", "read", "ran_in")

_VALUE = 200
"""Characters of a value kept in a node (the recording has it whole)."""


class FlowKeyError(AfError):
    """A key no step wrote and no step is at."""


@dataclass(slots=True)
class GraphNode:
    id: str
    kind: str
    """``answer``, ``step``, ``decision``, ``merge``, ``call`` or ``value``."""
    label: str
    """The node in words, one line."""
    data: dict[str, Any] = field(default_factory=dict)
    """What the record says: a step's path, kind, status, ms; a decision's chosen branch and
    verdicts; a call's step, agent, run and number; a value's key and value."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, **self.data}


@dataclass(frozen=True, slots=True)
class FlowEdge:
    source: str
    """The node explained."""
    target: str
    """What explains it."""
    kind: str
    """One of :data:`EDGE_KINDS`."""

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "kind": self.kind}


@dataclass
class FlowGraph:
    key: str
    root: str
    """The node of the key asked about."""
    nodes: dict[str, GraphNode] = field(default_factory=dict)
    edges: list[FlowEdge] = field(default_factory=list)

    def out(self, node: str, kind: str | None = None) -> list[FlowEdge]:
        """The edges from ``node`` (of ``kind``)."""
        return [e for e in self.edges if e.source == node and (kind is None or e.kind == kind)]

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "root": self.root,
            "nodes": {k: n.to_json() for k, n in self.nodes.items()},
            "edges": [e.to_json() for e in self.edges],
        }


def flow_graph(
    flow: FlowRecording, key: str = "answer", *, timeline: FlowTimeline | None = None
) -> FlowGraph:
    """The graph of what produced ``key`` of ``flow``: ``answer``, a state value
    (``state.<key>`` or ``<key>``), a step's path, a decision (``decision:<path>#<k>``, k
    from 1 in the order the step took them) or a merge (``merge:<path>``).
    ``timeline``: the flow's, when open already (its agents' calls). Raises
    :class:`FlowKeyError` for a key that names none of these."""
    own = timeline is None
    times = flow_timeline(flow) if timeline is None else timeline
    try:
        return _Builder(flow, times).build(key)
    finally:
        if own:
            times.close()


class _Builder:
    def __init__(self, flow: FlowRecording, timeline: FlowTimeline) -> None:
        self.flow = flow
        self.timeline = timeline
        self.graph = FlowGraph("", "")
        self._values: dict[tuple[str, bytes], str] = {}
        self._done: set[str] = set()

    def build(self, key: str) -> FlowGraph:
        g = self.graph
        g.key = key
        if key == "answer":
            g.root = self._answer()
        elif key.startswith("decision:"):
            path, _, k = key.removeprefix("decision:").rpartition("#")
            step = self.flow.find(path)
            if step is None or not k.isdecimal() or not 1 <= int(k) <= len(step.decisions):
                raise FlowKeyError(f"no decision {key!r} in this flow")
            g.root = self._decision(step, int(k))
        elif key.startswith("merge:"):
            step = self.flow.find(key.removeprefix("merge:"))
            if step is None or step.merge is None:
                raise FlowKeyError(f"no merge {key!r} in this flow")
            g.root = self._merge(step)
        elif (step := self.flow.find(key)) is not None and key:
            g.root = self._step(step)
        else:
            name = key.removeprefix("state.")
            writer = self.flow.writer_of(name)
            if writer is None:
                raise FlowKeyError(
                    f"no step wrote {key!r} and no step is at that path (af why RUN --list)"
                )
            g.root = self._value(f"state.{name}", _written(writer, name), writer)
        return g

    # -- nodes ---------------------------------------------------------------------------

    def _node(self, id: str, kind: str, label: str, **data: Any) -> bool:
        """Add a node; False when it is there already (it is explained once)."""
        if id in self.graph.nodes:
            return False
        self.graph.nodes[id] = GraphNode(id, kind, label, data)
        return True

    def _edge(self, source: str, target: str, kind: str) -> None:
        edge = FlowEdge(source, target, kind)
        if edge not in self.graph.edges:
            self.graph.edges.append(edge)

    def _answer(self) -> str:
        end = self.flow.end
        answer = end.answer if end is not None else None
        self._node(
            "answer",
            "answer",
            f"the answer: {line(repr(answer), 80)}" if end is not None else "no answer",
            value=line(answer or "", _VALUE) if answer is not None else None,
            status=end.status if end is not None else "unfinished",
        )
        if end is not None and end.produced_by is not None and self.flow.top is not None:
            self._edge("answer", self._step(self.flow.top), "produced_by")
        return "answer"

    def _step(self, step: FlowLogStep) -> str:
        id = f"step:{step.path}"
        end = step.end
        label = f"{step.path or self.flow.header.flow.name} ({step.kind}) {step.status}"
        if not self._node(
            id,
            "step",
            label,
            path=step.path,
            step_kind=step.kind,
            status=step.status,
            ms=end.ms if end is not None else None,
            output=_cut(end.output) if end is not None else None,
        ):
            return id
        self._chosen(step, id)
        self._input(step, id)
        if end is not None and step.kind == "function":
            for key, value in end.reads:
                self._edge(id, self._value(key, value), "read")
        if step.kind == "agent":
            self._agent(step, id)
        elif step.merge is not None:
            self._edge(id, self._merge(step), "produced_by")
        elif end is not None and end.produced_by and end.produced_by != step.path:
            # Down the tree one level at a time: the step inside it on the way to the step
            # whose output this is.
            inner = self.flow.find(end.produced_by)
            while inner is not None and self._parent(inner) is not step:
                inner = self._parent(inner)
            if inner is not None:
                self._edge(id, self._step(inner), "produced_by")
        return id

    def _chosen(self, step: FlowLogStep, id: str) -> None:
        """The decision that chose the step: its Conditional's, or for a loop's turn after
        the first, the decision after the turn before."""
        if step.kind == "loop" and step.decisions:
            # How the loop ended: its last decision (done, or the limit).
            self._edge(id, self._decision(step, len(step.decisions)), "decided_by")
        parent = self._parent(step)
        if parent is None:
            return
        if parent.kind == "conditional":
            for k, d in enumerate(parent.decisions, 1):
                if d.chosen == step.name:
                    self._edge(id, self._decision(parent, k), "decided_by")
        elif parent.kind == "loop":
            turn = _turn(step.path)
            for k, d in enumerate(parent.decisions, 1):
                if turn is not None and d.turn == turn - 1:
                    self._edge(id, self._decision(parent, k), "decided_by")

    def _input(self, step: FlowLogStep, id: str) -> None:
        """A step of a sequence or a loop after the first is given the output of the one
        before it."""
        parent = self._parent(step)
        if parent is None or parent.kind not in ("sequence", "loop"):
            return
        at = parent.steps.index(step)
        if at == 0:
            return
        before = parent.steps[at - 1]
        value = self._value(f"input:{step.path}", step.start.input)
        self._edge(id, value, "read")
        self._edge(value, self._step(before), "produced_by")

    def _parent(self, step: FlowLogStep) -> FlowLogStep | None:
        if not step.path:
            return None
        up = step.path.rpartition("/")[0]
        return next((s for s in self.flow.steps() if s.path == up), None)

    def _decision(self, step: FlowLogStep, k: int) -> str:
        d = step.decisions[k - 1]
        id = f"decision:{step.path}#{k}"
        which = f"turn {d.turn}: " if d.turn is not None else ""
        chosen = d.chosen if d.chosen is not None else "nothing"
        if not self._node(
            id,
            "decision",
            f"{step.path or self.flow.header.flow.name} {which}chose {chosen}",
            path=step.path,
            chosen=d.chosen,
            turn=d.turn,
            verdicts=[dump(v, exclude_defaults=True) for v in d.verdicts],
        ):
            return id
        for v in d.verdicts:
            for key, value in v.reads:
                self._edge(id, self._value(key, value), "read")
        return id

    def _merge(self, step: FlowLogStep) -> str:
        m = step.merge
        assert m is not None
        id = f"merge:{step.path}"
        said = " ".join(f"{k}={v}" for k, v in m.branches.items())
        if not self._node(
            id,
            "merge",
            f"merge of {step.path or self.flow.header.flow.name}: {said}",
            path=step.path,
            branches=m.branches,
            output=_cut(m.output),
        ):
            return id
        for key, value in m.reads:
            self._edge(id, self._value(key, value), "read")
        for branch in step.steps:
            self._edge(id, self._step(branch), "produced_by")
        return id

    def _agent(self, step: FlowLogStep, id: str) -> None:
        run = self.timeline.run_of(step.path)
        if run is None or run.rec is None:
            return
        from afcore.readmodel._call import call_detail

        answered: str | None = None
        before: str | None = None
        for call in self.timeline.calls:
            if call.run is not run:
                continue
            node = f"call:{step.path}#{call.n}"
            self._node(
                node,
                "call",
                f"{run.agent} call {call.n} ({step.path})",
                step=step.path,
                agent=run.agent,
                run=run.step.end.run if run.step.end is not None else None,
                call=call.n,
                index=call.index,
            )
            self._edge(node, id, "ran_in")
            if before is not None:
                self._edge(node, before, "read")  # the call before's reply is in its window
            before = node
            if call.mark.agent and call.mark.replied:
                answered = node
            try:
                detail = call_detail(run.rec, call.n)
            except (AfError, KeyError, ValueError):
                continue
            decisions = detail.injections.fired if detail.injections is not None else []
            for d in decisions:
                for key, value in (d.reads or {}).items():
                    if key.startswith("state."):
                        self._edge(node, self._value(key, value), "read")
        if answered is not None:
            self._edge(id, answered, "produced_by")

    def _value(self, key: str, value: Any, writer: FlowLogStep | None = None) -> str:
        """A value read (or written): one node per key and value; a state value leads to
        the step that wrote it."""
        try:
            raw = orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # nested past the 255 levels orjson writes
            raw = json_text(value).encode()
        id = self._values.get((key, raw))
        if id is not None:
            return id
        same = sum(1 for k, _ in self._values if k == key)
        id = f"value:{key}" + (f"#{same + 1}" if same else "")
        self._values[(key, raw)] = id
        self._node(id, "value", f"{key} = {line(as_text(value), 80)}", key=key, value=_cut(value))
        if key.startswith("state."):
            name = key.removeprefix("state.")
            found = writer or self._writer(name, value)
            if found is not None:
                self._edge(id, self._step(found), "produced_by")
        return id

    def _writer(self, name: str, value: Any) -> FlowLogStep | None:
        """The step that wrote ``value`` to ``name`` (the last that did, in the order steps
        ended; else the last that wrote the key at all)."""
        found = None
        for step in sorted(self.flow.steps(), key=lambda s: s.order):
            if step.end is None:
                continue
            written = {**step.end.writes, **(step.merge.writes if step.merge else {})}
            if name in written and _same(written[name], value):
                found = step
        return found or self.flow.writer_of(name)


def _written(step: FlowLogStep, name: str) -> Any:
    if step.merge is not None and name in step.merge.writes:
        return step.merge.writes[name]
    return step.end.writes.get(name) if step.end is not None else None


def _same(written: Any, read: Any) -> bool:
    # A value read is cut to a line in the evidence: a written value that starts like it.
    if written == read:
        return True
    a, b = as_text(written), as_text(read)
    return bool(b) and b.endswith("…") and a.startswith(b[:-1])


def _turn(path: str) -> int | None:
    last = path.rsplit("/", 1)[-1]
    _, at, turn = last.partition("@")
    return int(turn) if at and turn.isdecimal() else None


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return line(value, _VALUE) if len(value) > _VALUE else value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = as_text(value)
    return line(text, _VALUE) if len(text) > _VALUE else value
