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
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from afcore.errors import AfError, UsageError
from afcore.recording._reader import Recording

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


@dataclass
class Node:
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
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


@dataclass(frozen=True)
class Edge:
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


@dataclass
class Slice:
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
        }

    def parents(self, rsid: str) -> list[Edge]:
        """The edges into ``rsid``, in the order they were found."""
        return [e for e in self.edges if e.target == rsid]


@dataclass(frozen=True)
class KeyInfo:
    key: str
    writer: str
    """The stage that (last) wrote it."""
    line: int
    what: str = ""


# -- the walk ------------------------------------------------------------------------------


@dataclass
class _Ask:
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
) -> Slice:
    """The backward slice of ``key``: see the module's docstring. ``at``: a runtime stage
    id (``call-llm#7``) or ``call:N``; only what was written before it counts."""
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
    return Slice(key, root.rsid, nodes, edges, truncated)


class _Walk:
    def __init__(self, rec: Recording, full: bool) -> None:
        self.rec = rec
        self.full = full
        self._nodes: dict[str, Node] = {}
        self._lines: dict[int, str] = {}
        """line -> the rsid of the stage whose record it holds"""
        self.room: Callable[[], bool] = lambda: True
        """Whether the slice can take another stage (set by the walk)."""

    # -- records -------------------------------------------------------------------------

    def raw(self, line: int) -> dict[str, Any]:
        try:
            data = self.rec.raw(line)
        except (IndexError, orjson.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def value(self, write: Any) -> Any:
        try:
            return self.rec.value(write)
        except (KeyError, TypeError):
            return None

    def node_at(self, line: int) -> Node:
        """The node of the stage whose record is on ``line`` (made once per stage)."""
        data = self.raw(line)
        rsid = str(data.get("rsid") or f"line {line}")
        self._lines[line] = rsid
        known = self._nodes.get(rsid)
        if known is not None:
            return known
        stage = str(data.get("stage") or rsid.partition("#")[0])
        wrote = [str(w.get("key")) for w in data.get("writes") or () if isinstance(w, dict)]
        if data.get("t") == "call":
            wrote = [f"call:{data.get('call')}"]
        node = Node(rsid, stage, _int(data.get("iter")), line, wrote)
        node.value = self._describe(data)
        if stage == "window":
            fold = self.value((data.get("writes") or [{}])[0])
            for refusal in (fold or {}).get("refusals") or () if isinstance(fold, dict) else ():
                if isinstance(refusal, dict):
                    node.decisions.append(_refusal_words(refusal))
        self._nodes[rsid] = node
        return node

    def known(self, line: int) -> bool:
        """Whether the stage on ``line`` is already a node (without reading the line)."""
        return line in self._lines

    def _stage(self, line: int) -> str:
        return str(self.raw(line).get("stage") or "")

    def _describe(self, data: dict[str, Any]) -> str:
        t = data.get("t")
        if t == "call":
            return f"call {data.get('call')} to {data.get('model')}"
        if t == "reply":
            message = self.value((data.get("writes") or [{}])[0]) or {}
            return _reply_words(message, data)
        writes = [w for w in data.get("writes") or () if isinstance(w, dict)]
        stage = str(data.get("stage", ""))
        if stage == "inject":
            return "composed " + ", ".join(str(w.get("key")) for w in writes)
        if stage == "window":
            fold = self.value(writes[0]) if writes else None
            return _fold_words(fold) if isinstance(fold, dict) else "a window stage"
        if stage == "summarize":
            keys = ", ".join(str(w.get("key")) for w in writes)
            return f"the transcript for the summarizer ({keys})"
        for w in writes:
            key = str(w.get("key"))
            value = self.value(w)
            if key.startswith("message:") and isinstance(value, dict):
                return f"{key}: {_message_words(value)}"
            if key in ("answer", "user_message", "route", "model", "instructions"):
                return f"{key} = {_cut(value)}"
        return ", ".join(str(w.get("key")) for w in writes)

    # -- where a question starts ---------------------------------------------------------

    def position(self, at: str) -> int:
        """The line before which a writer must be."""
        rec = self.rec
        if at.startswith("call:"):
            n = at[5:]
            lines = rec.writer_lines(at) if n.isdigit() else []
            if not lines:
                raise UnknownPositionError(
                    f"--at {at}: this run has calls 1..{max(rec.call_numbers, default=0)}"
                )
            return lines[0]
        line = self._rsid_line(at)
        if line is None:
            first, last = self._rsid_range()
            raise UnknownPositionError(
                f"--at {at}: not a stage of this run; give a runtime stage id from {first} to "
                f"{last} (as `af why --list` shows them) or call:N"
            )
        return line

    def _rsid_line(self, rsid: str) -> int | None:
        """The first record of stage ``rsid``: the stage counter grows with the file, so a
        binary search over the records finds it in a few parsed lines."""
        stage, _, counter = rsid.rpartition("#")
        if not stage or not counter.isdigit():
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
            if line is not None and self.raw(line).get("rsid") == rsid:
                return line
        return None

    def _counter(self, seq: int) -> int:
        line = self.rec.seq_line(seq)
        rsid = str(self.raw(line).get("rsid", "")) if line else ""
        tail = rsid.rpartition("#")[2]
        return int(tail) if tail.isdigit() else -1

    def _rsid_range(self) -> tuple[str, str]:
        count = self.rec.seq_count
        first = self.rec.seq_line(1)
        last = self.rec.seq_line(count)
        return (
            str(self.raw(first).get("rsid", "?")) if first else "?",
            str(self.raw(last).get("rsid", "?")) if last else "?",
        )

    def resolve(self, key: str, limit: int | None) -> tuple[int, _Ask, str]:
        """The line of the record that answers ``key``, what matters when expanding it, and
        a value for the root's line (empty: its own)."""
        rec = self.rec
        if key.startswith("system:"):
            return self._system(key[7:], limit)
        if key.startswith("tools@"):
            n = key[6:]
            call = rec.writer_lines(f"call:{n}") if n.isdigit() else []
            if not call:
                raise self._never(key)
            return call[0], _Ask(tools=True), ""
        if key.startswith("tool:") and key.endswith((".args", ".result")):
            return self._tool(key, limit)
        lines = [line for line in rec.writer_lines(key) if limit is None or line < limit]
        if not lines:
            raise self._never(key, limit)
        if key.startswith("message:") and self.raw(lines[-1]).get("stage") == "inject":
            # An injected message: the decision of the injection that sent it.
            return lines[-1], _Ask(focus=self._message_source(lines[-1], int(key[8:]))), ""
        return lines[-1], _Ask(), ""

    def _never(self, key: str, limit: int | None = None) -> NeverWrittenError:
        known = [k.key for k in keys(self.rec)]
        nearest = difflib.get_close_matches(key, known, n=5, cutoff=0.5)
        where = " before that position" if limit is not None else ""
        hint = f"; nearest keys: {', '.join(nearest)}" if nearest else ""
        return NeverWrittenError(f"{key} was never written{where}{hint}", nearest=nearest)

    def _system(self, id: str, limit: int | None) -> tuple[int, _Ask, str]:
        """The inject stage that put injection ``id``'s segment in the system prompt of the
        call at ``limit`` (or of the last call that had it)."""
        rec = self.rec
        numbers = [
            n
            for n in rec.call_numbers
            if limit is None or (rec.writer_lines(f"call:{n}") or [0])[0] <= limit
        ]
        for n in reversed(numbers):
            call_line = rec.writer_lines(f"call:{n}")[0]
            data = self.raw(call_line)
            if not str(data.get("rsid", "")).startswith("call-llm#"):
                continue
            try:
                segments = rec.listed(str(data.get("system")))
            except (KeyError, ValueError, TypeError):
                continue
            hit = next(
                (
                    s
                    for s in segments
                    if isinstance(s, dict) and (s.get("source") or {}).get("id") == id
                ),
                None,
            )
            if hit is None:
                if limit is not None:
                    break  # not in the prompt of the call asked about
                continue
            version = dict(_reads(data)).get("system")
            line = rec.seq_line(version) if version else None
            if line is None:
                raise self._never(f"system:{id}", limit)
            return (
                line,
                _Ask(focus=frozenset({id})),
                f"system:{id} in call {n}: {_cut(hit.get('text') or '(long segment)')}",
            )
        raise self._never(f"system:{id}", limit)

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
                    message = self.value((self.raw(reply_line).get("writes") or [{}])[0]) or {}
                    for block in message.get("content") or ():
                        if isinstance(block, dict) and block.get("id") == tool.call_id:
                            args = orjson.dumps(block.get("args"), option=orjson.OPT_SORT_KEYS)
                            return reply_line, _Ask(), f"{tool.name}({_cut(args.decode())})"
                    return reply_line, _Ask(), ""
        raise self._never(key, limit)

    # -- one step back -------------------------------------------------------------------

    def parents(
        self, node: Node, line: int, ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        """(parent line, key, kind, label, what matters at the parent) for each read."""
        for record_line in self._records_of(node, line):
            data = self.raw(record_line)
            reads = _reads(data)
            t = data.get("t")
            stage = str(data.get("stage", ""))
            if not reads and t == "commit" and stage not in ("history", "seed"):
                _note(node.notes, "reads not recorded here: the slice may be incomplete")
            if t == "call":
                yield from self._call_parents(node, data, ask)
                continue
            if stage == "inject":
                yield from self._inject_parents(node, data, ask)
                continue
            for key, version in reads:
                parent = self.rec.seq_line(version)
                if parent is None:
                    _note(node.notes, f"reads {key} from seq {version}, which the file lacks")
                    continue
                if stage == "route" and key.startswith("reply:"):
                    route = next((w.get("value") for w in data.get("writes") or ()), "?")
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
        data = self.raw(line)
        if data.get("t") == "reply":
            call = self.rec.writer_lines(f"call:{data.get('call')}")
            return call or [line]
        if node.stage == "summarize" and data.get("t") == "commit":
            return [line, *self._summarize_call(line)]
        return [line]

    def _summarize_call(self, line: int) -> list[int]:
        data = self.raw(line + 1) if line else {}
        # The summarizer's call follows its commit (after the transcript's blob, if any).
        for offset in range(1, 4):
            data = self.raw(line + offset)
            if data.get("t") == "call":
                return [line + offset]
        return []

    def _asked(self, reply_line: int) -> str:
        data = self.raw(reply_line)
        calls = [c.get("name") for c in data.get("tool_calls") or () if isinstance(c, dict)]
        n = data.get("call")
        return (
            f"reply {n} asked for {', '.join(map(str, calls))}" if calls else f"reply {n} answered"
        )

    def _call_parents(
        self, node: Node, data: dict[str, Any], ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        reads = dict(_reads(data))
        if "system" in reads and (line := self.rec.seq_line(reads["system"])) is not None:
            ids = self._injection_ids(data)
            if ids or self.full:
                yield line, "system", "data", "", _Ask(focus=frozenset(ids))
        if (ask.tools or self.full) and "tools" in reads:
            line = self.rec.seq_line(reads["tools"])
            if line is not None:
                yield line, "tools", "data", "", _Ask(tools=True)
        for key, version in _reads(data):
            if key.startswith("message:") and (line := self.rec.seq_line(version)) is not None:
                yield line, key, "data", "", _Ask()  # a summarizer's transcript
        if "messages" not in reads:
            return
        # Newest first: when the node budget runs out, what was followed is the most recent.
        window = [r for r in data.get("window") or () if _is_range(r)]
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
                    yield writer, f"message:{n}", "data", "", _Ask(focus=focus or frozenset())
        if not self.full:
            node.rest = {"messages": total - followed, "folded": self._folded_before(node.line)}

    def _message_source(self, line: int, n: int) -> frozenset[str] | None:
        """The injection that wrote message ``n`` (an inject stage's write names it)."""
        for w in self.raw(line).get("writes") or ():
            if isinstance(w, dict) and w.get("key") == f"message:{n}":
                source = w.get("source")
                if isinstance(source, dict) and source.get("id"):
                    return frozenset({str(source["id"])})
        return None

    def _injection_ids(self, call: dict[str, Any]) -> list[str]:
        try:
            segments = self.rec.listed(str(call.get("system")))
        except (KeyError, ValueError, TypeError):
            return []
        out = []
        for s in segments:
            source = s.get("source") if isinstance(s, dict) else None
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
                        data = self.raw(fold_line)
                        fold = self.value((data.get("writes") or [{}])[0])
                        total += _int((fold or {}).get("count")) if isinstance(fold, dict) else 0
        return total

    def _inject_parents(
        self, node: Node, data: dict[str, Any], ask: _Ask
    ) -> Iterator[tuple[int, str, Literal["data", "control"], str, _Ask]]:
        """An inject stage: its decisions, each from the evidence it rests on. A decision
        carried over from an earlier inject stage comes from that stage."""
        decisions = self._decisions(data)
        wanted = ask.focus if ask.focus is not None else frozenset(decisions)
        reads = _reads(data)
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
                yield (
                    line,
                    "injections",
                    "control",
                    f"{_decision_words(decision)} (decided at iteration "
                    f"{_int(self.raw(line).get('iter'))}, unchanged since)",
                    _Ask(focus=frozenset({id})),
                )
                continue
            words = _decision_words(decision)
            _note(node.decisions, words)
            if decision.get("trigger") == "llm_activated" and decision.get("fired"):
                activation = self._activation(id, node.line)
                if activation is not None:
                    yield activation, "active_skills", "control", words, _Ask()
            for evidence in decision.get("reads") or ():
                if not isinstance(evidence, list) or not evidence:
                    continue
                name = str(evidence[0])
                source = self._evidence_source(name, reads)
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
            reply_line = self.rec.seq_line(asked) if asked else None
            message = (
                self.value((self.raw(reply_line).get("writes") or [{}])[0]) if reply_line else None
            )
            for block in (message or {}).get("content") or ():
                if isinstance(block, dict) and block.get("id") == tool.call_id:
                    if (block.get("args") or {}).get("id") == skill:
                        found = line
        return found

    def _evidence_source(self, name: str, reads: list[tuple[str, int]]) -> tuple[str, int] | None:
        """The key and the writer's line of a value a rule read, if the log holds it."""
        if name == "user_message":
            lines = self.rec.writer_lines("user_message")
            return ("user_message", lines[0]) if lines else None
        if name.startswith("last_tool_results."):
            tool = name.removeprefix("last_tool_results.")
            for key, version in reads:
                line = self.rec.seq_line(version) if key.startswith("message:") else None
                if line is not None and str(self.raw(line).get("stage")) == f"tool:{tool}":
                    return key, line
        return None

    def _decisions(self, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
        for w in data.get("writes") or ():
            if isinstance(w, dict) and w.get("key") == "injections":
                value = self.value(w)
                listed = value.get("decisions") if isinstance(value, dict) else None
                if isinstance(listed, list):
                    return {str(d.get("id")): d for d in listed if isinstance(d, dict)}
        return {}

    def _decided_before(self, line: int, id: str) -> tuple[int, dict[str, Any]] | None:
        for inject_line in reversed(self.rec.writer_lines("injections")):
            if inject_line >= line:
                continue
            decision = self._decisions(self.raw(inject_line)).get(id)
            if decision is not None:
                return inject_line, decision
        return None


# -- the keys one can ask about ------------------------------------------------------------


def keys(rec: Recording) -> list[KeyInfo]:
    """The keys a slice can start from, each with the stage that (last) wrote it."""
    walk = _Walk(rec, full=False)
    out: list[KeyInfo] = []
    for key in rec.written_keys():
        lines = rec.writer_lines(key)
        if lines:
            out.append(KeyInfo(key, str(walk.raw(lines[-1]).get("rsid", "?")), lines[-1]))
    for n in range(1, rec.message_count + 1):
        lines = rec.writer_lines(f"message:{n}")
        if lines:
            data = walk.raw(lines[0])
            out.append(KeyInfo(f"message:{n}", str(data.get("rsid", "?")), lines[0]))
    for n in rec.call_numbers:
        line = rec.writer_lines(f"call:{n}")[0]
        rsid = str(walk.raw(line).get("rsid", "?"))
        out.append(KeyInfo(f"call:{n}", rsid, line))
        if rsid.startswith("call-llm#"):
            out.append(KeyInfo(f"tools@{n}", rsid, line, "the tools visible at this call"))
    seen: set[str] = set()
    for n in reversed(rec.call_numbers):
        line = rec.writer_lines(f"call:{n}")[0]
        data = walk.raw(line)
        for id in walk._injection_ids(data):
            if id not in seen:
                seen.add(id)
                out.append(
                    KeyInfo(
                        f"system:{id}",
                        str(data.get("rsid", "?")),
                        line,
                        "last in the prompt of this call",
                    )
                )
    for commit in rec.tool_commits():
        if commit.tool is None or not commit.writes:
            continue
        base = f"tool:{commit.tool.name}#{commit.tool.k}"
        line = rec.writer_lines(commit.writes[0].key)[0]
        asked = next((v for k, v in commit.reads if k.startswith("reply:")), None)
        reply_line = rec.seq_line(asked) if asked else None
        if reply_line is not None:
            rsid = str(walk.raw(reply_line).get("rsid", "?"))
            out.append(KeyInfo(f"{base}.args", rsid, reply_line, f"call id {commit.tool.call_id}"))
        out.append(KeyInfo(f"{base}.result", commit.rsid, line))
    out.sort(key=lambda k: k.line)
    return out


# -- words -----------------------------------------------------------------------------------


def _decision_words(d: dict[str, Any]) -> str:
    """``rule refunds fired: user_message = "I want a refund" -> true``."""
    id, trigger = d.get("id", "?"), d.get("trigger", "")
    fired = "fired" if d.get("fired") else "skipped"
    kind = {"rule": "rule", "on_tool_return": "on tool return", "llm_activated": "skill"}.get(
        str(trigger), str(d.get("flavor") or "injection")
    )
    evidence = []
    for r in d.get("reads") or ():
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
    writers = refusal.get("writers") or []
    who = f" ({', '.join(map(str, writers))})" if writers else ""
    reason = str(refusal.get("reason"))
    text = f"kept{who}: {_REFUSALS.get(reason, reason)}"
    if refusal.get("error"):
        text += f": {_cut(refusal['error'], 80)}"
    return text


def _fold_words(fold: dict[str, Any]) -> str:
    count = _int(fold.get("count"))
    folded = fold.get("folded") or []
    span = (
        f" ({folded[0]} .. {folded[-1]})"
        if len(folded) > 1
        else f" ({folded[0]})"
        if folded
        else ""
    )
    text = f"fold at iteration {fold.get('iteration')}: {count} messages{span}"
    text += f" by {fold.get('strategy')}"
    if fold.get("measured") is not None:
        measured, threshold = _int(fold.get("measured")), _int(fold.get("threshold"))
        text += f"; {measured:,} tokens measured, threshold {threshold:,}"
    return text


def _reply_words(message: Any, data: dict[str, Any]) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    text = "".join(
        str(b.get("text", ""))
        for b in content or ()
        if isinstance(b, dict) and b.get("type") == "text"
    )
    calls = [
        f"{b.get('name')}(…)"
        for b in content or ()
        if isinstance(b, dict) and b.get("type") == "tool_call"
    ]
    parts = [f"reply {data.get('call')}"]
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
    return f"{role} message"


def _cut(value: Any, limit: int = _CUT) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    text = " ".join(text.split())
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    return f"{text[:limit]!r}… ({len(text) - limit} more chars)"


def _reads(data: dict[str, Any]) -> list[tuple[str, int]]:
    out = []
    for r in data.get("reads") or ():
        if isinstance(r, list) and len(r) == 2 and isinstance(r[1], int):
            out.append((str(r[0]), r[1]))
    return out


def _is_range(r: Any) -> bool:
    return (
        isinstance(r, list)
        and len(r) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        and 0 <= r[1] - r[0] < 10_000_000
    )


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
