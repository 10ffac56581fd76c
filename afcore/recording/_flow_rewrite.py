"""Rewriting a flow's recording consistently (what ``af export`` redacts a composed run
with): each agent's run through :func:`~afcore.recording.rewrite`, so it verifies, and the
log's own records (the values that passed between steps: inputs, outputs, state written,
evidence read, merges, the answer) through the same function of the content, written anew
by the recording's writer with each rewritten run folded into it.

The composition itself (step paths and names, kinds, statuses, the runs' names, counts,
durations, usage) is the flow's code and bookkeeping, never content.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from afcore.recording._flow_reader import FlowRecording, open_flow
from afcore.recording._flows import FLOW_TYPES, RunFrame
from afcore.recording._models import Line, UnknownRecord
from afcore.recording._rewrite import Leaf, Rewritten, Transform, rewrite
from afcore.recording._typed import as_model

__all__ = ["RewrittenFlow", "flow_content_leaves", "flow_runs", "rewrite_flow"]

_KEEP = frozenset(
    {
        "t",
        "path",
        "kind",
        "status",
        "ms",
        "produced_by",
        "run",
        "run_id",
        "calls",
        "usage",
        "chosen",
        "turn",
        "branches",
        "iterations",
        "duration_ms",
        "paused",
        "at",
    }
)
"""A flow record's keys that hold its structure and bookkeeping, never content."""
_VERDICT_KEEP = frozenset({"name", "fired"})


@dataclass
class RewrittenFlow:
    """What a rewrite of a flow's recording did."""

    log: Rewritten = field(default_factory=Rewritten)
    """The log's own lines (``dropped``: lines that are not JSON)."""
    runs: dict[str, Rewritten] = field(default_factory=dict)
    """Each agent step's run (by the step's path)."""


def flow_runs(flow: FlowRecording) -> Iterator[tuple[str, str, Path]]:
    """(step path, the run's name in the log, its file) for each agent step that names a run
    that can be read, in the order the runs started (their names' numbers)."""
    found = []
    for step in flow.steps():
        if step.kind != "agent" or step.end is None or step.end.run is None:
            continue
        file = flow.run_file(step)
        if file is not None and file.is_file():
            found.append((step.end.run, step.path, file))
    for name, path, file in sorted(found):
        yield path, name, file


def _walk(
    value: Any, path: tuple[str | int, ...], on: Callable[[Any, tuple[Any, ...], bool], Any]
) -> Any:
    if isinstance(value, str) or (isinstance(value, int | float) and not isinstance(value, bool)):
        return on(value, path, False)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = on(k, (*path, k), True)
            key = key if isinstance(key, str) else str(key)
            while key in out:  # two keys redacted alike stay two keys
                key += "'"
            out[key] = _walk(v, (*path, k), on)
        return out
    if isinstance(value, list):
        return [_walk(v, (*path, i), on) for i, v in enumerate(value)]
    return value


def _content(record: dict[str, Any], line: int, transform: Transform) -> dict[str, Any]:
    """``record`` (one of the log's own, not its header) with ``transform`` applied to its
    content."""
    kind = str(record.get("t"))

    def on(value: Any, path: tuple[Any, ...], is_key: bool) -> Any:
        return transform(value, Leaf(line, kind, path, is_key))

    out: dict[str, Any] = {}
    for k, v in record.items():
        if k in _KEEP:
            out[k] = v
        elif k == "verdicts" and isinstance(v, list):
            out[k] = [
                {
                    vk: vv if vk in _VERDICT_KEEP else _walk(vv, (k, i, vk), on)
                    for vk, vv in verdict.items()
                }
                if isinstance(verdict, dict)
                else _walk(verdict, (k, i), on)
                for i, verdict in enumerate(v)
            ]
        else:
            out[k] = _walk(v, (k,), on)
    return out


def flow_content_leaves(src: str | os.PathLike[str]) -> Iterator[tuple[Any, Leaf]]:
    """Every piece of content in the log's own records (not its runs': each is read as
    an agent's recording, ``content_leaves``), with where it is."""
    found: list[tuple[Any, Leaf]] = []

    def note(value: Any, leaf: Leaf) -> Any:
        found.append((value, leaf))
        return value

    for n, record in _records(Path(src)):
        if record.get("t") not in ("flow", "run"):
            _content(record, n, note)
            yield from found
            found.clear()


def _records(src: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The log's own records, by line (not its seals, nor the lines of the runs folded into
    it, each after a space)."""
    with open(src, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if raw[:1] == b" " or raw.startswith(b'{"t":"seal",'):
                continue
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("t"), str):
                yield n, record


def rewrite_flow(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    transform_for: Callable[[str | None], Transform],
) -> RewrittenFlow:
    """Write the flow's recording at ``src`` to ``dst`` (which must not exist) with each
    piece of content rewritten: the log's own records by ``transform_for(None)``, the run of
    the agent step at ``path`` by ``transform_for(path)`` (ids, refs, call hashes and seals
    made anew), every run folded into ``dst``, before its ``flow_end``, as a finished flow's
    are. ``dst`` verifies wherever ``src`` did."""
    from afcore.recording._redaction import Redaction
    from afcore.recording._writer import Recorder

    src, dst = Path(src), Path(dst)
    flow = open_flow(src)
    done = RewrittenFlow()
    with tempfile.TemporaryDirectory(prefix="af-rewrite-") as tmp:
        runs: list[tuple[str, bytes]] = []
        for i, (path, name, file) in enumerate(flow_runs(flow)):
            out = Path(tmp) / f"{i}.jsonl"
            done.runs[path] = rewrite(file, out, transform_for(path))
            runs.append((name, out.read_bytes()))

        transform = transform_for(None)
        # The values were screened by the run's own policy when written: written again
        # as they now are (trusted), by the writer, which seals each write.
        w = Recorder(dst, run_id=flow.header.run_id, redactor=Redaction().compile())
        try:
            w.header(as_model(flow.header))
            folded = False
            for n, record in _records(src):
                done.log.lines = n
                t = record["t"]
                if t in ("flow", "run"):
                    continue
                if t == "flow_end" and not folded:
                    _fold(w, runs)
                    folded = True
                rewritten = _content(record, n, transform)
                model = FLOW_TYPES.get(t)
                if model is None:  # a later writer's record: kept, its content rewritten
                    unknown = UnknownRecord.model_validate(rewritten)
                    w.event(Line(unknown.model_dump()), trusted=True)
                else:
                    w.event(model.model_validate(rewritten), trusted=True)
            if not folded:
                _fold(w, runs)
        finally:
            w.close()
        done.log.dropped = _not_json(src)
    return done


def _fold(w: Any, runs: list[tuple[str, bytes]]) -> None:
    for name, body in runs:
        lines = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
        frame = RunFrame(
            path=name, bytes=len(body), sha256=hashlib.sha256(body).hexdigest(), lines=lines
        )
        w.embed(frame, body)


def _not_json(src: Path) -> list[int]:
    out = []
    with open(src, "rb") as f:
        for n, raw in enumerate(f, start=1):
            if raw[:1] == b" " or not raw.strip():
                continue
            try:
                orjson.loads(raw)
            except orjson.JSONDecodeError:
                out.append(n)
    return out
