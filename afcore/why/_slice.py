"""Backward slices over a recording's commit log: which stages, rules and values produced a
key, answered from the file alone.

Start at the last commit that wrote the key (before a position, if given); for each key that
commit read, the read names the commit that wrote the version it read (its ``seq``): step to
it, and so on, to a depth and a node limit. A stage reached twice is one node. Decisions
(an injection fired or was skipped, a route was chosen) appear as *control* edges from the
stages that wrote their evidence, labelled with the evidence in words.

A model call reads its whole window; following every message through every call would
bury the answer, so by default a call is followed only into what bears on the question:
its system segments' injections, the tool results and user messages in its window, injected
and summary messages. The rest becomes one count on the call's node (``rest``). ``full``
follows everything.

Every record is read through the reader's typed records (``Commit``, ``Call``, ``Reply``);
a line that does not hold one is a stage the slice cannot follow, never an error. Each node
carries a ``label`` in the reader's terms (``call 2``, ``lookup_order, call 1``, ``the
user's message``); runtime stage ids stay the nodes' keys, for ``--json``.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from msgspec import Struct, field

from afcore.errors import AfError, UsageError
from afcore.governance._words import decision_words
from afcore.recording._reader import Recording
from afcore.recording._structs import Call, Commit, Reply
from afcore.recording._typed import InvalidRecord, dump

_Staged = Commit | Call | Reply
"""The records a stage writes: what a slice walks."""

__all__ = [
    "Edge",
    "KeyInfo",
    "NeverWrittenError",
    "Node",
    "Slice",
    "UnknownPositionError",
    "keys",
    "why",
]

_CUT = 100
"""Values are cut to this many characters on a node's line, the cut stated."""


class NeverWrittenError(AfError):
    """No commit wrote the key asked about (before the position given)."""

    def __init__(self, message: str, *, nearest: list[str]) -> None:
        super().__init__(message)
        self.nearest = nearest


class UnknownPositionError(UsageError):
    """``at`` names no stage or call of the recording."""


class Node(Struct):
    rsid: str
    stage: str
    iteration: int
    line: int
    """The line of the stage's first record."""
    wrote: list[str]
    value: str = ""
    """What it wrote that the question is about, on one line."""
    decisions: list[str] = field(default_factory=list)
    """Decisions made here, with their evidence, in words."""
    notes: list[str] = field(default_factory=list)
    rest: dict[str, int] | None = None
    """For a model call followed thinly: the messages of its window not followed, and how
    many messages had been folded out of the window before it."""
    label: str = ""
    """The stage in the reader's terms: ``call 2``, ``lookup_order, call 1``, ``the
    injections of iteration 3``, ``the user's message``."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "stage": self.stage,
            "iteration": self.iteration,
            "line": self.line,
            "wrote": self.wrote,
            "value": self.value,
        }
        if self.decisions:
            out["decisions"] = self.decisions
        if self.notes:
            out["notes"] = self.notes
        if self.rest is not None:
            out["rest"] = self.rest
        return out


class Edge(Struct, frozen=True):
    source: str
    """The stage that produced the value (or the evidence)."""
    target: str
    """The stage that used it."""
    kind: Literal["data", "control"]
    key: str
    label: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "kind": self.kind,
            "key": self.key,
            "label": self.label,
        }


class Slice(Struct):
    key: str
    writer: str
    """The stage that wrote the key: the root of the slice."""
    nodes: dict[str, Node]
    edges: list[Edge]
    truncated: dict[str, int]
    """``by_depth``, ``by_nodes``: edges not followed because of each limit."""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "writer": self.writer,
            "nodes": {rsid: n.to_json() for rsid, n in self.nodes.items()},
            "edges": [e.to_json() for e in self.edges],
            "truncated": dict(self.truncated),
            **({"inner": {k: v.to_json() for k, v in self.inner.items()}} if self.inner else {}),
            **({"flow_state": dict(self.flow_state)} if self.flow_state else {}),
        }

    def parents(self, rsid: str) -> list[Edge]:
        """The edges into ``rsid``, in the order they were found."""
        return [e for e in self.edges if e.target == rsid]

    inner: dict[str, Inner] = field(default_factory=dict)
    """For a tool stage of the slice that ran an agent (an agent called as a tool): that
    run, and why its answer is what it is."""
    flow_state: dict[str, str] = field(default_factory=dict)
    """For an agent step's run asked through its flow (``cross_flow``): each state value its
    rules read, ``state.<key>``, and the path of the flow's step that wrote it."""


class Inner(Struct, frozen=True):
    """The run a tool stage made, followed from its link."""

    run: dict[str, Any]
    """The link as recorded: ``run_id``, ``recording``, ``agent``, ``status``."""
    slice: Slice | None
    """Why its answer is what it is (None: it could not be followed, ``problem`` says why)."""
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run": self.run}
        if self.slice is not None:
            out["slice"] = self.slice.to_json()
        if self.problem is not None:
            out["problem"] = self.problem
        return out


class KeyInfo(Struct, frozen=True):
    key: str
    writer: str
    """The stage that (last) wrote it."""
    line: int
    what: str = ""


# -- the walk ------------------------------------------------------------------------------


class _Ask(Struct):
    """Why a node is expanded: which injections' decisions matter there (None: those it
    recorded), and whether a call's tools are part of the question."""

    focus: frozenset[str] | None = None
    tools: bool = False


def why(
    rec: Recording,
    key: str,
    *,
    at: str | None = None,
    depth: int = 8,
    max_nodes: int = 100,
    full: bool = False,
    follow: int = 3,
) -> Slice:
    """The backward slice of ``key``: see the module's docstring. ``at``: a runtime stage
    id (``call-llm#7``) or ``call:N``; only what was written before it counts. ``follow``:
    how many agents-called-as-tools deep to reach into the runs they made."""
    if depth < 0 or max_nodes < 1:
        raise UsageError("depth must be >= 0 and max_nodes >= 1")
    walk = _Walk(rec, full)
    limit = walk.position(at) if at is not None else None
    nodes: dict[str, Node] = {}
    walk.room = lambda: len(nodes) < max_nodes
    line, ask, link = walk.resolve(key, limit)
    root = walk.node_at(line)
    if link:
        root.value = link
    nodes[root.rsid] = root
    edges: list[Edge] = []
    seen: set[Edge] = set()
    truncated = {"by_depth": 0, "by_nodes": 0}
    queue: deque[tuple[str, int, int, _Ask]] = deque([(root.rsid, line, 0, ask)])
    expanded: set[tuple[int, frozenset[str] | None]] = set()
    while queue:
        rsid, node_line, d, ask = queue.popleft()
        if (node_line, ask.focus) in expanded:
            continue
        expanded.add((node_line, ask.focus))
        for parent_line, edge_key, kind, label, parent_ask in walk.parents(
            nodes[rsid], node_line, ask
        ):
            if not walk.known(parent_line):
                # A stage not met yet must fit in the limits; what does not is counted,
                # without reading its line.
                full = len(nodes) >= max_nodes
                cut = "by_depth" if d + 1 > depth else "by_nodes" if full else ""
                if cut:
                    truncated[cut] += 1
                    continue
            parent = walk.node_at(parent_line)
            if parent.rsid == rsid:
                # Another record of the same stage (a summarizer's commit, read by its
                # call): what it read is what the stage read.
                queue.append((rsid, parent_line, d, parent_ask))
                continue
            nodes.setdefault(parent.rsid, parent)
            edge = Edge(parent.rsid, rsid, kind, edge_key, label)
            if edge not in seen:
                seen.add(edge)
                edges.append(edge)
            queue.append((parent.rsid, parent_line, d + 1, parent_ask))
    result = Slice(key, root.rsid, nodes, edges, truncated)
    if follow > 0:
        _follow(rec, result, depth, max_nodes, follow - 1)
    return result


def _follow(rec: Recording, result: Slice, depth: int, max_nodes: int, follow: int) -> None:
    """Reach into the runs the slice's tool stages made: each one's answer, explained."""
    from afcore.recording import open_recording

    for commit in rec.tool_commits():
        tool = commit.tool
        if tool is None or tool.run is None or commit.rsid not in result.nodes:
            continue
        link = dump(tool.run, mode="json", exclude_defaults=True)
        if not tool.run.recording or rec.path is None:
            result.inner[commit.rsid] = Inner(link, None, "the run it made was not recorded")
            continue
        path = Path(rec.path).parent / tool.run.recording
        try:
            with open_recording(path) as sub:
                explained = why(sub, "answer", depth=depth, max_nodes=max_nodes, follow=follow)
        except (AfError, OSError) as e:
            result.inner[commit.rsid] = Inner(link, None, f"{type(e).__name__}: {e}")
            continue
        result.inner[commit.rsid] = Inner(link, explained)


class _Walk:
    def __init__(self, rec: Recording, full: bool) -> None:
        self.rec = rec
        self.full = full
        self._nodes: dict[str, Node] = {}
        self._lines: dict[int, str] = {}
        """line -> the rsid of the stage whose record it holds"""
        self._records: dict[int, _Staged | None] = {}
        self.room: Callable[[], bool] = lambda: True
        """Whether the slice can take another stage (set by the walk)."""

    # -- records -------------------------------------------------------------------------

    def record(self, line: int | None) -> _Staged | None:
        """The stage record on ``line``, typed; None for a line that holds none (another
        record type, or one that breaks the format: the reader reports those)."""
        if line is None:
            return None
        if line in self._records:
            return self._records[line]
        found: _Staged | None = None
        try:
            for _, record in self.rec.records([line]):
                found = record if isinstance(record, _Staged) else None
        except (IndexError, ValueError, InvalidRecord, orjson.JSONDecodeError):
            found = None
        self._records[line] = found
        return found

    def value(self, write: Any) -> Any:
        try:
            return self.rec.value(write)
        except (KeyError, TypeError):
            return None

    def first_value(self, record: _Staged | None) -> Any:
        """The value of a commit's or reply's first write."""
        if isinstance(record, Commit | Reply) and record.writes:
            return self.value(record.writes[0])
        return None

    def node_at(self, line: int) -> Node:
        """The node of the stage whose record is on ``line`` (made once per stage)."""
        r = self.record(line)
        rsid = r.rsid if r is not None else f"line {line}"
        self._lines[line] = rsid
        known = self._nodes.get(rsid)
        if known is not None:
            return known
        stage = r.stage if isinstance(r, Commit) else rsid.partition("#")[0]
        wrote = [w.key for w in r.writes] if isinstance(r, Commit | Reply) else []
        if isinstance(r, Call):
            wrote = [f"call:{r.call}"]
        node = Node(rsid, stage, r.iter if r is not None else 0, line, wrote)
        node.value = self._describe(r)
        node.label = self._label(r, rsid)
        if stage == "window":
            fold = self.first_value(r)
            for refusal in _listed(fold.get("refusals") if isinstance(fold, dict) else None):
                if isinstance(refusal, dict):
                    node.decisions.append(_refusal_words(refusal))
        if isinstance(r, Commit):
            for w in r.writes:
                if w.key.startswith(("govern:", "approval:", "output:")):
                    node.decisions.extend(decision_words(w.key, self.value(w)))
        self._nodes[rsid] = node
        return node

    def known(self, line: int) -> bool:
        """Whether the stage on ``line`` is already a node (without reading the line)."""
        return line in self._lines

    def _stage(self, line: int | None) -> str:
        r = self.record(line)
        return r.stage if isinstance(r, Commit) else ""

    def _label(self, r: _Staged | None, rsid: str) -> str:
        """The stage in the reader's terms."""
        if r is None:
            return rsid
        if isinstance(r, Call | Reply):
            who = "the summarizer's call" if rsid.startswith("summarize") else "call"
            return f"{who} {r.call}"
        stage = r.stage
        if stage.startswith("tool:") and r.tool is not None:
            return f"{r.tool.name}, call {r.tool.k}"
        if stage == "inject":
            return f"the injections of iteration {r.iter}"
        if stage == "seed":
            return "the user's message"
        if stage == "history":
            return "the conversation continued from"
        if stage == "window":
            folds = [w.key for w in r.writes if w.key.startswith("fold:")]
            return f"fold {folds[0][5:]}" if folds else "the window strategy"
        if stage == "summarize":
            return "the summarizer's transcript"
        if stage == "route":
            return f"the route after iteration {r.iter}"
        if stage == "finalize":
            return "the answer"
        if stage in ("govern:input", "govern:output"):
            return f"the message rules on the {'message' if stage.endswith('input') else 'answer'}"
        if stage.startswith("govern:"):
            k = next((w.key for w in r.writes if w.key.startswith("govern:")), "")
            return f"the tool rules on {stage[7:]}, call {k.rpartition('#')[2] or '?'}"
        if stage == "resume":
            return "a person's answer"
        if stage == "output":
            return "the check of the answer against the output schema"
        if stage == "fallback":
            return "the output schema's fallback"
        return f"{stage} (iteration {r.iter})"

    def _describe(self, r: _Staged | None) -> str:
        if r is None:
            return ""
        if isinstance(r, Call):
            return f"call {r.call} to {r.model}"
        if isinstance(r, Reply):
            message = self.first_value(r) or {}
            return _reply_words(message, r.call)
        writes = r.writes
        stage = r.stage
        if stage == "inject":
            messages = [w.key for w in writes if w.key.startswith("message:")]
            slots = [
                {"system": "the system prompt"}.get(w.key, w.key)
                for w in writes
                if w.key in ("system", "tools")
            ]
            if messages:
                slots.append(_numbers("message", [int(k[8:]) for k in messages]))
            return "composed " + ", ".join(slots) if slots else "decided the injections"
        if stage == "window":
            fold = self.first_value(r)
            return _fold_words(fold) if isinstance(fold, dict) else "a window stage"
        if stage == "summarize":
            keys = ", ".join(w.key for w in writes)
            return f"the transcript for the summarizer ({keys})"
        if stage == "seed":
            return _cut(next((w.value for w in writes if w.key == "user_message"), ""))
        for w in writes:
            if w.key.startswith("tool:") and w.key.endswith(".args"):
                return f"{w.key} = {_cut(self.value(w))}"
        for w in writes:
            key = w.key
            value = self.value(w)
            if key.startswith("message:") and isinstance(value, dict):
                if value.get("role") == "tool":
                    verb = "failed" if value.get("is_error") else "returned"
                    return f"{verb} {_cut(value.get('content'))}"
                return f"message {key[8:]}: {_message_words(value)}"
            if key in ("answer", "user_message", "route", "model", "instructions"):
                return f"{key} = {_cut(value)}"
        return ", ".join(w.key for w in writes)

    # -- where a question starts ---------------------------------------------------------

    def position(self, at: str) -> int:
        """The line before which a writer must be."""
        rec = self.rec
        if at.startswith("call:"):
            n = at[5:]
            lines = rec.writer_lines(at) if n.isdecimal() else []
            if not lines:
                raise UnknownPositionError(
                    f"--at {at}: this run has calls 1..{max(rec.call_numbers, default=0)}"
                )
            return lines[0]
        line = self._rsid_line(at)
        if line is None:
            first, last = self._rsid_range()
            raise UnknownPositionError(
                f"--at {at}: not a position of this run; give call:N (calls "
                f"1..{max(rec.call_numbers, default=0)}) or a stage id from {first} to {last}"
            )
        return line

    def _rsid_line(self, rsid: str) -> int | None:
        """The first record of stage ``rsid``: the stage counter grows with the file, so a
        binary search over the records finds it in a few parsed lines."""
        stage, _, counter = rsid.rpartition("#")
        if not stage or not counter.isdecimal():
            return None
        want = int(counter)
        lo, hi = 1, self.rec.seq_count
        while lo < hi:
            mid = (lo + hi) // 2
            if self._counter(mid) < want:
                lo = mid + 1
            else:
                hi = mid
        for seq in range(lo, min(lo + 3, self.rec.seq_count + 1)):
            line = self.rec.seq_line(seq)
            r = self.record(line)
            if r is not None and r.rsid == rsid:
                return line
        return None

    def _counter(self, seq: int) -> int:
        r = self.record(self.rec.seq_line(seq))
        tail = r.rsid.rpartition("#")[2] if r is not None else ""
        return int(tail) if tail.isdecimal() else -1

    def _rsid_range(self) -> tuple[str, str]:
        first = self.record(self.rec.seq_line(1))
        last = self.record(self.rec.seq_line(self.rec.seq_count))
        return (first.rsid if first else "?", last.rsid if last else "?")

    def resolve(self, key: str, limit: int | None) -> tuple[int, _Ask, str]:
        """The line of the record that answers ``key``, what matters when expanding it, and
        a value for the root's line (empty: its own)."""
        rec = self.rec
        if key.startswith("system:"):
            return self._system(key[7:], limit)
        if key.startswith("injection:"):
            return self._injection(key[10:], limit)
        if key.startswith("tools@"):
            n = key[6:]
            call = rec.writer_lines(f"call:{n}") if n.isdecimal() else []
            if not call:
                raise self._never(key)
            return call[0], _Ask(tools=True), ""
        if key.startswith("tool:") and key.endswith(".args"):
            # Arguments a tool middleware link changed: the stage that changed them.
            changed = [line for line in rec.writer_lines(key) if limit is None or line < limit]
            if changed:
                return changed[-1], _Ask(), ""
        if key.startswith("tool:") and key.endswith((".args", ".result")):
            return self._tool(key, limit)
        lines = [line for line in rec.writer_lines(key) if limit is None or line < limit]
        if not lines:
            if ":" not in key and key in self.injection_ids():
                # People think in injection ids: `refunds` is `injection:refunds`.
                return self._injection(key, limit)
            raise self._never(key, limit)
        if key.startswith("message:") and self._stage(lines[-1]) == "inject":
            # An injected message: the decision of the injection that sent it.
            return lines[-1], _Ask(focus=self._message_source(lines[-1], int(key[8:]))), ""
        if key.startswith("message:") and self._stage(lines[-1]) == "history":
            # A message the run continued from: where it came from, not the whole history.
            return lines[-1], _Ask(), self.history_words(lines[-1], int(key[8:]))
        return lines[-1], _Ask(), ""

    def history_words(self, line: int, n: int) -> str:
        """Message ``n`` of a ``history`` stage, said with where it came from: ``turn 2:
        assistant 'It is 22C.'``, ``turn 3; closed by af: ...: slow result '...'`` (a
        session's), ``history: user 'hi'`` (given to the run)."""
        r = self.record(line)
        writes = r.writes if isinstance(r, Commit) else []
        write = next((w for w in writes if w.key == f"message:{n}"), None)
        if write is None:
            return ""
        value = self.value(write)
        words = _message_words(value) if isinstance(value, dict) else "a message"
        source = write.source
        if source is None:
            return f"history: {words}"
        where = source.reason if source.kind == "session" and source.reason else source.kind
        return f"{where}: {words}"

    def _never(self, key: str, limit: int | None = None) -> NeverWrittenError:
        nearest = _nearest(key, [k.key for k in keys(self.rec)])
        where = " before that position" if limit is not None else ""
        hint = f"; nearest keys: {', '.join(nearest)}" if nearest else ""
        return NeverWrittenError(f"{key} was never written{where}{hint}", nearest=nearest)

    def injection_ids(self) -> dict[str, int]:
        """Every injection the run decided about or put in a prompt, with the line of the
        last record that says so."""
        ids: dict[str, int] = {}
        for line in self.rec.writer_lines("injections"):
            for id in self._decisions(self.record(line)):
                ids[id] = line
        for line, call in reversed(self._calls_before(None)):
            for id in self._injection_ids(call):
                ids[id] = max(ids.get(id, 0), line)
        return ids

    def _calls_before(self, limit: int | None) -> list[tuple[int, Call]]:
        """The agent's calls (not the summarizer's) at or before ``limit``, newest first."""
        out = []
        for n in reversed(self.rec.call_numbers):
            line = self.rec.writer_lines(f"call:{n}")[0]
            if limit is not None and line > limit:
                continue
            r = self.record(line)
            if isinstance(r, Call) and r.rsid.startswith("call-llm#"):
                out.append((line, r))
        return out

    def _system(self, id: str, limit: int | None) -> tuple[int, _Ask, str]:
        """The inject stage that put injection ``id``'s segment in the system prompt of the
        call at ``limit`` (or of the last call that had it)."""
        for _, call in self._calls_before(limit):
            hit = next((s for s in self._segments(call) if _source_id(s) == id), None)
            if hit is None:
                if limit is not None:
                    break  # not in the prompt of the call asked about
                continue
            line = self.rec.seq_line(dict(call.reads).get("system", 0))
            if line is None:
                raise self._never(f"system:{id}", limit)
            return (
                line,
                _Ask(focus=frozenset({id})),
                f"system:{id} in call {call.call}: {_cut(hit.get('text') or '(long segment)')}",
            )
        raise self._never(f"system:{id}", limit)

    def _injection(self, id: str, limit: int | None) -> tuple[int, _Ask, str]:
        """Injection ``id`` at the call at ``limit`` (or at the last call it reached, or
        the last decision about it): where it landed, in whichever slot, and why."""
        calls = self._calls_before(limit)
        if limit is not None:
            calls = calls[:1]
        for _, call in calls:
            where = self._landed(call, id)
            if where is None:
                continue
            slot, line, text = where
            value = f"injection {id} in the {slot} of call {call.call}"
            if text:
                value += f": {_cut(text)}"
            return line, _Ask(focus=frozenset({id})), value
        # Never in a call (or not in the one asked about): the decision that kept it out.
        last = calls[0][0] if calls else limit
        decided = self._decided_before(last + 1 if last is not None else None, id)
        if decided is None:
            raise self._never(f"injection:{id}", limit)
        line, _ = decided
        at = f" at call {calls[0][1].call}" if calls else ""
        return line, _Ask(focus=frozenset({id})), f"injection {id} was not in the prompt{at}"

    def _landed(self, call: Call, id: str) -> tuple[str, int, str] | None:
        """Where injection ``id`` is in ``call``: the slot, the line of the inject stage that
        put it there, and its text."""
        reads = dict(call.reads)
        for segment in self._segments(call):
            if _source_id(segment) == id:
                line = self.rec.seq_line(reads.get("system", 0))
                if line is not None:
                    return "system prompt", line, str(segment.get("text") or "")
        for a, b in (r for r in call.window if _is_range(r)):
            for n in range(a, b + 1):
                writer = self.rec.message_line(n)
                if writer is None or self._stage(writer) != "inject":
                    continue
                if self._message_source(writer, n) == frozenset({id}):
                    message = self._message(n)
                    content = message.get("content") if isinstance(message, dict) else None
                    text = content if isinstance(content, str) else ""
                    return f"messages (message {n})", writer, text
        try:
            tools = self.rec.listed(call.tools)
        except (KeyError, ValueError, TypeError):
            tools = []
        for tool in tools:
            if _source_id(tool) == id:
                line = self.rec.seq_line(reads.get("tools", 0))
                if line is not None:
                    return "tools", line, f"the tool {tool.get('name')}"
        return None

    def _message(self, n: int) -> Any:
        try:
            return self.rec.message(n)
        except (KeyError, IndexError, ValueError, TypeError):
            return None

    def _segments(self, call: Call) -> list[dict[str, Any]]:
        try:
            listed = self.rec.listed(call.system)
        except (KeyError, ValueError, TypeError):
            return []
        return [s for s in listed if isinstance(s, dict)]

    def _tool(self, key: str, limit: int | None) -> tuple[int, _Ask, str]:
        name_k, _, part = key[5:].rpartition(".")
        line = self.rec.tool_line(name_k)
        commits = [self.rec.tool_commit(line)] if line is not None else self.rec.tool_commits()
        for commit in commits:
            tool = commit.tool
            if tool is None:
                continue
            if name_k not in (f"{tool.name}#{tool.k}", tool.call_id):
                continue
            line = self.rec.writer_lines(commit.writes[0].key)[0] if commit.writes else None
            if part == "result" and line is not None and (limit is None or line < limit):
                return line, _Ask(), ""
            if part == "args":
                asked = next((v for k, v in commit.reads if k.startswith("reply:")), None)
                reply_line = self.rec.seq_line(asked) if asked else None
                if reply_line is not None and (limit is None or reply_line < limit):
                    block = self._asked_block(reply_line, tool.call_id)
                    if block is None:
                        return reply_line, _Ask(), ""
                    args = orjson.dumps(block.get("args"), option=orjson.OPT_SORT_KEYS)
                    return reply_line, _Ask(), f"{tool.name}({_cut(args.decode())})"
        raise self._never(key, limit)

    # -- one step back -------------------------------------------------------------------

    def parents(
        self, node: Node, line: int, ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        """(parent line, key, kind, label, what matters at the parent) for each read."""
        for record_line in self._records_of(node, line):
            r = self.record(record_line)
            if r is None or isinstance(r, Reply):
                continue
            reads = r.reads
            if isinstance(r, Call):
                yield from self._call_parents(node, r, ask)
                continue
            stage = r.stage
            if not reads and stage not in ("history", "seed", "govern:input"):
                _note(node.notes, "reads not recorded here: the slice may be incomplete")
            if stage == "inject":
                yield from self._inject_parents(node, r, ask)
                continue
            for key, version in reads:
                parent = self.rec.seq_line(version)
                if parent is None:
                    _note(node.notes, f"reads {key} from seq {version}, which the file lacks")
                    continue
                if stage == "route" and key.startswith("reply:"):
                    route = r.writes[0].value if r.writes else "?"
                    yield (
                        parent,
                        key,
                        "control",
                        f"route chose {route}: {self._asked(parent)}",
                        _Ask(),
                    )
                elif stage == "window" and key == "messages":
                    continue  # the window as a whole: its fold names what left
                else:
                    yield parent, key, "data", "", _Ask()

    def _records_of(self, node: Node, line: int) -> list[int]:
        """A stage's records that read something: a call-llm stage's call (reached through
        its reply), a summarize stage's commit and call."""
        r = self.record(line)
        if isinstance(r, Reply):
            call = self.rec.writer_lines(f"call:{r.call}")
            return call or [line]
        if node.stage == "summarize" and isinstance(r, Commit):
            return [line, *self._summarize_call(line)]
        return [line]

    def _summarize_call(self, line: int) -> list[int]:
        # The summarizer's call follows its commit (after the transcript's blob, if any).
        for offset in range(1, 4):
            if line + offset <= self.rec.line_count and self.rec.kind(line + offset) == "call":
                return [line + offset]
        return []

    def _asked(self, reply_line: int) -> str:
        r = self.record(reply_line)
        if not isinstance(r, Reply):
            return "the reply"
        calls = [c.name for c in r.tool_calls]
        return (
            f"reply {r.call} asked for {', '.join(calls)}" if calls else f"reply {r.call} answered"
        )

    def _call_parents(
        self, node: Node, call: Call, ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        reads = dict(call.reads)
        if "system" in reads and (line := self.rec.seq_line(reads["system"])) is not None:
            ids = self._injection_ids(call)
            if ids or self.full:
                said = f"with {', '.join(ids)}" if ids else ""
                yield line, "system", "data", said, _Ask(focus=frozenset(ids))
        if (ask.tools or self.full) and "tools" in reads:
            line = self.rec.seq_line(reads["tools"])
            if line is not None:
                yield line, "tools", "data", "", _Ask(tools=True)
        for key, version in call.reads:
            if key.startswith("message:") and (line := self.rec.seq_line(version)) is not None:
                yield line, key, "data", "", _Ask()  # a summarizer's transcript
        if "messages" not in reads:
            return
        # Newest first: when the node budget runs out, what was followed is the most recent.
        window = [r for r in call.window if _is_range(r)]
        total = sum(b - a + 1 for a, b in window)
        followed = 0
        for a, b in reversed(window):
            for n in range(b, a - 1, -1):
                if not self.room():
                    break
                writer = self.rec.message_line(n)
                if writer is None:
                    continue
                # Replies are the model's own messages; everything else a call reads was
                # written by a stage worth following (the user, a tool, an injection, a fold).
                if self.full or self.rec.kind(writer) != "reply":
                    followed += 1
                    focus = (
                        self._message_source(writer, n) if self._stage(writer) == "inject" else None
                    )
                    said = ""
                    if self._stage(writer) == "history":
                        said = self.history_words(writer, n)
                    if focus:
                        message = self._message(n)
                        content = message.get("content") if isinstance(message, dict) else None
                        said = f"injected by {', '.join(sorted(focus))}"
                        if isinstance(content, str):
                            said += f": {_cut(content, 60)}"
                    yield writer, f"message:{n}", "data", said, _Ask(focus=focus or frozenset())
        if not self.full:
            node.rest = {"messages": total - followed, "folded": self._folded_before(node.line)}

    def _message_source(self, line: int, n: int) -> frozenset[str] | None:
        """The injection that wrote message ``n`` (an inject stage's write names it)."""
        r = self.record(line)
        for w in r.writes if isinstance(r, Commit) else ():
            if w.key == f"message:{n}" and w.source is not None and w.source.id:
                return frozenset({w.source.id})
        return None

    def _injection_ids(self, call: Call) -> list[str]:
        out = []
        for s in self._segments(call):
            source = s.get("source")
            if isinstance(source, dict) and source.get("kind") not in (
                "base",
                "configure",
                "summarizer",
            ):
                if source.get("id"):
                    out.append(str(source["id"]))
        return out

    def _folded_before(self, line: int) -> int:
        total = 0
        for key in self.rec.written_keys():
            if key.startswith("fold:"):
                for fold_line in self.rec.writer_lines(key):
                    if fold_line < line:
                        fold = self.first_value(self.record(fold_line))
                        total += _int(fold.get("count")) if isinstance(fold, dict) else 0
        return total

    def _inject_parents(
        self, node: Node, r: Commit, ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        """An inject stage: its decisions, each from the evidence it rests on. A decision
        carried over from an earlier inject stage comes from that stage."""
        decisions = self._decisions(r)
        wanted = ask.focus if ask.focus is not None else frozenset(decisions)
        for id in sorted(wanted):
            decision = decisions.get(id)
            if decision is None:
                earlier = self._decided_before(node.line, id)
                if earlier is None:
                    if ask.focus is not None and len(ask.focus) == 1:
                        _note(
                            node.decisions, f"{id}: always on, with fixed text (nothing to decide)"
                        )
                    continue
                line, decision = earlier
                before = self.record(line)
                yield (
                    line,
                    "injections",
                    "control",
                    f"{_decision_words(decision)} (decided at iteration "
                    f"{before.iter if before else '?'}, unchanged since)",
                    _Ask(focus=frozenset({id})),
                )
                continue
            words = _decision_words(decision)
            _note(node.decisions, words)
            if decision.get("trigger") == "llm_activated" and decision.get("fired"):
                activation = self._activation(id, node.line)
                if activation is not None:
                    yield activation, "active_skills", "control", words, _Ask()
            for evidence in _listed(decision.get("reads")):
                if not isinstance(evidence, list) or not evidence:
                    continue
                name = str(evidence[0])
                source = self._evidence_source(name, r.reads)
                if source is None:
                    if name.startswith("state."):
                        _note(node.notes, f"{name} is application state, not in the log")
                    continue
                key, line = source
                yield line, key, "control", words, _Ask()

    def _activation(self, skill: str, before: int) -> int | None:
        """The line of the read_skill stage that activated ``skill`` (the last before)."""
        found = None
        for commit in self.rec.tool_commits():
            tool = commit.tool
            if (
                tool is None
                or tool.name != "read_skill"
                or tool.status != "ok"
                or not commit.writes
            ):
                continue
            line = self.rec.writer_lines(commit.writes[0].key)[0]
            if line >= before:
                break
            asked = next((v for k, v in commit.reads if k.startswith("reply:")), None)
            block = self._asked_block(self.rec.seq_line(asked) if asked else None, tool.call_id)
            args = block.get("args") if block is not None else None
            if isinstance(args, dict) and args.get("id") == skill:
                found = line
        return found

    def _asked_block(self, reply_line: int | None, call_id: str | None) -> dict[str, Any] | None:
        """The block of the reply at ``reply_line`` that asked for the tool call
        ``call_id``. The message is as the file wrote it: any JSON, not only an object with
        a list of blocks."""
        message = self.first_value(self.record(reply_line))
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("id") == call_id:
                return block
        return None

    def _evidence_source(self, name: str, reads: list[tuple[str, int]]) -> tuple[str, int] | None:
        """The key and the writer's line of a value a rule read, if the log holds it."""
        if name == "user_message":
            lines = self.rec.writer_lines("user_message")
            return ("user_message", lines[0]) if lines else None
        if name.startswith("last_tool_results."):
            tool = name.removeprefix("last_tool_results.")
            for key, version in reads:
                line = self.rec.seq_line(version) if key.startswith("message:") else None
                if line is not None and self._stage(line) == f"tool:{tool}":
                    return key, line
        return None

    def _decisions(self, r: _Staged | None) -> dict[str, dict[str, Any]]:
        for w in r.writes if isinstance(r, Commit) else ():
            if w.key == "injections":
                value = self.value(w)
                listed = value.get("decisions") if isinstance(value, dict) else None
                if isinstance(listed, list):
                    return {str(d.get("id")): d for d in listed if isinstance(d, dict)}
        return {}

    def _decided_before(self, line: int | None, id: str) -> tuple[int, dict[str, Any]] | None:
        for inject_line in reversed(self.rec.writer_lines("injections")):
            if line is not None and inject_line >= line:
                continue
            decision = self._decisions(self.record(inject_line)).get(id)
            if decision is not None:
                return inject_line, decision
        return None


# -- the keys one can ask about ------------------------------------------------------------


def keys(rec: Recording) -> list[KeyInfo]:
    """The keys a slice can start from, each with the stage that (last) wrote it."""
    walk = _Walk(rec, full=False)

    def rsid(line: int | None) -> str:
        r = walk.record(line)
        return r.rsid if r is not None else "?"

    out: list[KeyInfo] = []
    for key in rec.written_keys():
        lines = rec.writer_lines(key)
        if lines:
            out.append(KeyInfo(key, rsid(lines[-1]), lines[-1]))
    for n in range(1, rec.message_count + 1):
        lines = rec.writer_lines(f"message:{n}")
        if lines:
            what = ""
            if walk._stage(lines[0]) == "history":
                what = walk.history_words(lines[0], n).partition(": ")[0]
            out.append(KeyInfo(f"message:{n}", rsid(lines[0]), lines[0], what))
    for n in rec.call_numbers:
        line = rec.writer_lines(f"call:{n}")[0]
        out.append(KeyInfo(f"call:{n}", rsid(line), line))
        if rsid(line).startswith("call-llm#"):
            out.append(KeyInfo(f"tools@{n}", rsid(line), line, "the tools visible at this call"))
    seen: set[str] = set()
    for line, call in walk._calls_before(None):
        for id in walk._injection_ids(call):
            if id not in seen:
                seen.add(id)
                out.append(
                    KeyInfo(f"system:{id}", call.rsid, line, "last in the prompt of this call")
                )
    for id, line in walk.injection_ids().items():
        out.append(KeyInfo(f"injection:{id}", rsid(line), line, "where it landed, and why"))
    for commit in rec.tool_commits():
        if commit.tool is None or not commit.writes:
            continue
        base = f"tool:{commit.tool.name}#{commit.tool.k}"
        line = rec.writer_lines(commit.writes[0].key)[0]
        asked = next((v for k, v in commit.reads if k.startswith("reply:")), None)
        reply_line = rec.seq_line(asked) if asked else None
        if reply_line is not None:
            out.append(
                KeyInfo(
                    f"{base}.args", rsid(reply_line), reply_line, f"call id {commit.tool.call_id}"
                )
            )
        out.append(KeyInfo(f"{base}.result", commit.rsid, line))
    out.sort(key=lambda k: k.line)
    return out


def _nearest(key: str, known: list[str], n: int = 5) -> list[str]:
    """The known keys nearest ``key``, ranked by the id they name (``refunds`` is nearest
    ``injection:refunds``, then ``system:refunds``), then by the whole key."""
    want = _id_of(key)
    scored = []
    for candidate in dict.fromkeys(known):
        have = _id_of(candidate)
        by_id = difflib.SequenceMatcher(None, want, have).ratio() if want and have else 0.0
        whole = difflib.SequenceMatcher(None, key, candidate).ratio()
        prefer = 0.01 if candidate.startswith("injection:") else 0.0
        score = max(by_id + prefer, whole * 0.9)
        if score >= 0.6:
            scored.append((-score, candidate))
    return [c for _, c in sorted(scored)[:n]]


def _id_of(key: str) -> str:
    """The id a key names: ``refunds`` of ``system:refunds``, ``refund`` of
    ``tool:refund#2.args``, ``3`` of ``message:3``."""
    _, _, rest = key.rpartition(":")
    return rest.split("#")[0].split(".")[0].split("@")[0]


def _source_id(entry: Any) -> str | None:
    source = entry.get("source") if isinstance(entry, dict) else None
    if isinstance(source, dict) and source.get("kind") not in ("base", "configure", "summarizer"):
        id = source.get("id")
        return str(id) if id else None
    return None


def _numbers(noun: str, ns: list[int]) -> str:
    """``message 5`` / ``messages 1–2, 5``: numbers in order, runs as ranges."""
    ns = sorted(set(ns))
    spans: list[str] = []
    start = prev = None
    for n in [*ns, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            spans.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = n
    return f"{noun}{'s' if len(ns) > 1 else ''} {', '.join(spans)}"


# -- words -----------------------------------------------------------------------------------


def _decision_words(d: dict[str, Any]) -> str:
    """``rule refunds fired: user_message = "I want a refund" -> true``."""
    id, trigger = d.get("id", "?"), d.get("trigger", "")
    fired = "fired" if d.get("fired") else "skipped"
    kind = {"rule": "rule", "on_tool_return": "on tool return", "llm_activated": "skill"}.get(
        str(trigger), str(d.get("flavor") or "injection")
    )
    evidence = []
    for r in _listed(d.get("reads")):
        if isinstance(r, list) and r:
            evidence.append(str(r[0]) if len(r) == 1 else f"{r[0]} = {_cut(r[1], 40)}")
    because = ", ".join(evidence)
    reason = str(d.get("reason", ""))
    if trigger == "rule":
        verdict = "true" if d.get("fired") else "false"
        text = f"{kind} {id} {fired}: {because or 'read nothing'} -> {verdict}"
    else:
        text = f"{kind} {id} {fired}: {reason}"
    if d.get("error"):
        text += f" ({d['error']})"
    return text


_REFUSALS = {
    "current_request": "the current request",
    "unresolved_tool_call": "a tool call without its result",
    "last_tool_result": "the last tool result",
    "summarizer_failed": "the summarizer failed",
    "summary_not_smaller": "the summary was not smaller",
}


def _refusal_words(refusal: dict[str, Any]) -> str:
    ranges = [r for r in _listed(refusal.get("messages")) if _is_range(r)]
    which = f" {_numbers('message', [n for a, b in ranges for n in range(a, b + 1)])}"
    reason = str(refusal.get("reason"))
    text = f"kept{which if ranges else ''}: {_REFUSALS.get(reason, reason)}"
    if refusal.get("error"):
        text += f": {_cut(refusal['error'], 80)}"
    return text


def _fold_words(fold: dict[str, Any]) -> str:
    count = _int(fold.get("count"))
    ranges = [r for r in _listed(fold.get("messages")) if _is_range(r)]
    left = [n for a, b in ranges for n in range(a, min(b, a + 10_000) + 1)]
    span = f" ({_numbers('message', left)})" if left else ""
    text = f"fold at iteration {fold.get('iteration')}: {count} messages left{span}"
    text += f" by {fold.get('strategy')}"
    if fold.get("measured") is not None:
        measured, threshold = _int(fold.get("measured")), _int(fold.get("threshold"))
        text += f"; {measured:,} tokens measured, threshold {threshold:,}"
    return text


def _reply_words(message: Any, call: int) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    blocks = content if isinstance(content, list) else ()
    text = "".join(
        str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
    )
    calls = [
        f"{b.get('name')}(…)"
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_call"
    ]
    parts = [f"reply {call}"]
    if text:
        parts.append(_cut(text))
    if calls:
        parts.append("asks for " + ", ".join(calls))
    return ": ".join(parts[:2]) + (f"; {parts[2]}" if len(parts) > 2 else "")


def _message_words(message: dict[str, Any]) -> str:
    role = message.get("role")
    if role == "tool":
        return f"{message.get('name')} result {_cut(message.get('content'))}"
    content = message.get("content")
    if isinstance(content, str):
        return f"{role} {_cut(content)}"
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    calls = [f"{b.get('name')}(…)" for b in blocks if b.get("type") == "tool_call"]
    said = [_cut(text)] if text else []
    if calls:
        said.append("asks for " + ", ".join(calls))
    return f"{role} {'; '.join(said)}" if said else f"{role} message"


def _cut(value: Any, limit: int = _CUT) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    text = " ".join(text.split())
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    return f"{text[:limit]!r}… ({len(text) - limit} more chars)"


def _reads(data: dict[str, Any]) -> list[tuple[str, int]]:
    out = []
    for r in _listed(data.get("reads")):
        if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int):
            out.append((str(r[0]), r[1]))
    return out


def _listed(value: Any) -> list[Any]:
    """A list the file wrote, or none: a value in its place (a number, an object) is any
    JSON a hand or a bug put there, and names nothing to follow."""
    return value if isinstance(value, list) else []


def _is_range(r: Any) -> bool:
    return (
        isinstance(r, list | tuple)
        and len(r) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        and 0 <= r[1] - r[0] < 10_000_000
    )


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
