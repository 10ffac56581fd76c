"""Reading a flow's recording: its typed records as the tree of steps that ran, with their
decisions, merges and agents' runs; and checking it (the log whole and its hash chain, every
agent's run verified as an agent's recording is)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from afcore.errors import RecordingFormatError
from afcore.recording._hashing import seal, short_id, unseal
from afcore.recording._reader import MAX_LINE
from afcore.recording._structs import (
    FLOW_TYPES,
    FlowEnd,
    FlowHeader,
    RunFrame,
    Seal,
    StepDecision,
    StepEnd,
    StepMerge,
    StepStart,
    UnknownRecord,
)
from afcore.recording._typed import InvalidRecord, typed, unknown

__all__ = [
    "FlowLogStep",
    "FlowRecording",
    "FlowVerifyReport",
    "FrameAt",
    "folded_into",
    "folded_run",
    "open_flow",
    "unfold",
    "verify_flow",
]


@dataclass
class FlowLogStep:
    """One step of a recorded flow run."""

    path: str
    kind: str
    start: StepStart
    end: StepEnd | None = None
    """None: the step never ended (the run was cut off)."""
    steps: list[FlowLogStep] = field(default_factory=list)
    decisions: list[StepDecision] = field(default_factory=list)
    merge: StepMerge | None = None
    order: int = 0
    """Its place among the steps in the order they ended (0: it never ended)."""

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1].partition("@")[0] if self.path else ""

    @property
    def status(self) -> str:
        return self.end.status if self.end is not None else "unfinished"

    def walk(self) -> Iterator[FlowLogStep]:
        yield self
        for step in self.steps:
            yield from step.walk()


@dataclass(frozen=True)
class FrameAt:
    """An agent step's run folded into the log (a ``run`` frame) and where its bytes are."""

    record: RunFrame
    line: int
    """The frame's line in the log."""
    offset: int
    size: int
    """Its bytes as the log holds them (each line after a space)."""


# Each folded run is written out once per process, to be read as any agent's recording:
# (log, its size and time, offset) -> (the run's file, what is wrong with its frame or None).
_UNFOLDED: dict[tuple[Path, int, int, int], tuple[Path, str | None]] = {}
_UNFOLD_DIR: list[Path] = []
_UNFOLD_LOCK = threading.Lock()


def _unfold_dir() -> Path:
    if not _UNFOLD_DIR:
        from afcore.recording._scratch import scratch_folder

        _UNFOLD_DIR.append(scratch_folder("af-runs-"))
    return _UNFOLD_DIR[0]


def unfold(log: Path, frame: FrameAt) -> tuple[Path, str | None]:
    """The run folded at ``frame`` of the log at ``log``, written out as its own file (once
    per process), and what is wrong with it (its length or sha256 not the frame's) or None."""
    with _UNFOLD_LOCK:  # the Lens reads from worker threads: one file per run, made once
        return _unfold(log, frame)


def _unfold(log: Path, frame: FrameAt) -> tuple[Path, str | None]:
    st = log.stat()  # a log written over in place (a test, an edit) is unfolded anew
    key = (log.resolve(), st.st_size, st.st_mtime_ns, frame.offset)
    done = _UNFOLDED.get(key)
    if done is not None:
        return done
    with open(log, "rb") as f:
        f.seek(frame.offset)
        held = f.read(frame.size)
    body = b"\n".join(line[1:] for line in held.split(b"\n"))  # each line's space off
    if len(body) == frame.record.bytes + 1:  # the newline after a last line without one
        body = body[:-1]
    problem = None
    if len(body) != frame.record.bytes or held[:1] not in (b" ", b""):
        problem = f"its frame says {frame.record.bytes} bytes; it holds {len(body)}"
    elif hashlib.sha256(body).hexdigest() != frame.record.sha256:
        problem = "its bytes do not match the sha256 its frame names"
    # A folder per run: two logs may name their runs alike. Its name as the log has it.
    name = Path(frame.record.path).name
    if not name.endswith(".jsonl") or len(name) > 200:
        name = "run.jsonl"
    file = _unfold_dir() / str(len(_UNFOLDED)) / name
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(body)
    _UNFOLDED[key] = (file, problem)
    return file, problem


def folded_into(path: Path) -> tuple[FlowRecording, FlowLogStep] | None:
    """For an agent step's run that was at ``path``, in the folder a flow writes its runs
    to (``<run_id>/`` beside ``<run_id>.jsonl``): the flow's log that holds it folded and
    its step, or None when there is no such log or it holds no such run."""
    path = Path(path)
    folder = path.parent
    try:
        flow = open_flow(folder.with_name(folder.name + ".jsonl"))
    except (OSError, RecordingFormatError):
        return None
    named = f"{folder.name}/{path.name}"
    if named not in flow.frames:
        return None
    step = next((s for s in flow.steps() if s.end is not None and s.end.run == named), None)
    return (flow, step) if step is not None else None


def folded_run(path: Path) -> Path | None:
    """For an agent step's run that was at ``path`` and is gone since (the flow ended, its
    log took the run whole and the files beside it were removed once it was durable): its
    copy from the log (written out once per process), or None."""
    found = folded_into(path)
    if found is None:
        return None
    flow, step = found
    return flow.run_file(step)


@dataclass
class FlowRecording:
    """A flow's recording, read."""

    path: Path
    header: FlowHeader
    top: FlowLogStep | None
    end: FlowEnd | None
    problems: list[tuple[int, str]] = field(default_factory=list)
    """(line, what is wrong), for lines that are not the flow's records."""
    chain: list[tuple[int, str]] = field(default_factory=list)
    """(line, what is wrong) with the hash chain its seals make: a record changed, added,
    removed or moved (checked by :func:`verify_flow`)."""
    unknown: list[tuple[int, UnknownRecord]] = field(default_factory=list)
    """(line, record) for records of a type this reader does not know (written by a later
    version), kept as they are."""
    frames: dict[str, FrameAt] = field(default_factory=dict)
    """The agents' runs folded into the log once the flow ended, by the path the log names
    each by (``step_end.run``)."""
    opened: Path | None = None
    """The file it was opened as, when not ``path``: a bundle, ``path`` its log unpacked."""

    @property
    def shown(self) -> Path:
        """The file to name to a person: the bundle, or the log."""
        return self.opened or self.path

    def steps(self) -> Iterator[FlowLogStep]:
        return self.top.walk() if self.top is not None else iter(())

    def find(self, path: str) -> FlowLogStep | None:
        """The step at ``path``; without ``@turn``, the last turn's."""
        found = None
        for step in self.steps():
            if step.path == path:
                return step
            if "/".join(p.partition("@")[0] for p in step.path.split("/")) == path:
                found = step
        return found

    def run_file(self, step: FlowLogStep) -> Path | None:
        """The recording of an agent step's run: the one folded into the log when the flow
        ended (written out once per process), else the file the log names beside it (or,
        for a log read while its flow ran, gone since: the copy the log now holds)."""
        if step.end is None or step.end.run is None:
            return None
        frame = self.frames.get(step.end.run)
        if frame is not None:
            return unfold(self.path, frame)[0]
        beside = self.path.parent / step.end.run
        if not beside.exists() and self.end is None:
            return folded_run(beside) or beside
        return beside

    def run_shown(self, step: FlowLogStep) -> Path | None:
        """An agent step's run named to a person: its file as the log names it, beside the
        file given (a bundle, a log), never the copy :meth:`run_file` reads a folded run
        from (a temporary file, gone when the process ends)."""
        if step.end is None or step.end.run is None:
            return None
        return self.shown.parent / step.end.run

    def writer_of(self, key: str) -> FlowLogStep | None:
        """The step that last wrote state ``key`` (the merge of a Parallel counts as its
        step), in the order steps ended."""
        last: tuple[int, FlowLogStep] | None = None
        for order, step in self._ended():
            if step.end is not None and key in step.end.writes:
                last = (order, step)
            if step.merge is not None and key in step.merge.writes:
                last = (order, step)
        return last[1] if last else None

    def _ended(self) -> list[tuple[int, FlowLogStep]]:
        return sorted(((s.order, s) for s in self.steps() if s.end is not None), key=lambda x: x[0])


def open_flow(path: str | Path, *, max_line: int = MAX_LINE) -> FlowRecording:
    """Read the flow's recording at ``path``. Raises :class:`RecordingFormatError` when it
    is not one; a torn or malformed line is a problem, and the rest is read. A bundle (``af
    export``) is read as the flow's recording it holds."""
    path = opened = Path(path)
    with open(path, "rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"
    if zipped:
        from afcore.recording._bundled import recording_path

        path = recording_path(path)
    problems: list[tuple[int, str]] = []
    unknowns: list[tuple[int, UnknownRecord]] = []
    header: FlowHeader | None = None
    end: FlowEnd | None = None
    open_steps: dict[str, FlowLogStep] = {}
    top: FlowLogStep | None = None
    order = 0
    chain = _Chain()
    torn_at = 0
    frames: dict[str, FrameAt] = {}
    number = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while raw := f.readline():
            number += 1
            if raw.startswith(b'{"t":"seal",') and raw.endswith(b"\n"):
                chain.seal(number, raw)
                continue
            chain.add(number, raw)
            if not raw.endswith(b"\n"):
                torn_at = number
            if len(raw) > max_line:
                problems.append((number, f"a line of {len(raw):,} bytes, over the limit"))
                continue
            if not raw.strip():
                continue
            try:
                data = orjson.loads(raw)
                model = FLOW_TYPES.get(data["t"]) if isinstance(data["t"], str) else None
                if model is None and number > 1:
                    # A record of a type this reader does not know (a later writer's):
                    # kept as it is, as readers keep an agent's; its seal covers it.
                    unknowns.append((number, unknown(data)))
                    continue
                record = typed(model or FlowHeader, data)
            except (orjson.JSONDecodeError, KeyError, TypeError, InvalidRecord) as e:
                if number == 1:
                    # As the models' ValidationError was named before the records were Structs.
                    what = "ValidationError" if isinstance(e, InvalidRecord) else type(e).__name__
                    raise RecordingFormatError(
                        f"{path} is not a flow's recording: line 1: {what}", path=path
                    ) from None
                torn = not raw.endswith(b"\n")
                problems.append(
                    (number, "torn: cut off mid-write" if torn else "not a flow record")
                )
                continue
            if number == 1 and not isinstance(record, FlowHeader):
                raise RecordingFormatError(f"{path} is not a flow's recording", path=path)
            if isinstance(record, FlowHeader):
                header = record
            elif isinstance(record, StepStart):
                step = FlowLogStep(record.path, record.kind, record)
                parent = _parent(open_steps, record.path)
                if parent is not None:
                    parent.steps.append(step)
                elif top is None:
                    top = step
                open_steps[record.path] = step
            elif isinstance(record, StepEnd):
                done = open_steps.get(record.path)
                if done is None:
                    problems.append((number, f"step {record.path!r} ends without a start"))
                    continue
                done.end = record
                order += 1
                done.order = order
            elif isinstance(record, StepDecision):
                at = open_steps.get(record.path)
                if at is not None:
                    at.decisions.append(record)
            elif isinstance(record, StepMerge):
                at = open_steps.get(record.path)
                if at is not None:
                    at.merge = record
            elif isinstance(record, FlowEnd):
                end = record
            elif isinstance(record, RunFrame):
                # The run's bytes, each line after a space: taken whole into the chain,
                # not parsed (they are read as an agent's recording when asked for).
                offset = f.tell()
                want = max(record.bytes, 0) + max(record.lines, 0)
                body = f.read(min(want, size - offset))
                if body and not body.endswith(b"\n"):  # the run's last line had no newline
                    body += f.read(1)
                first = number
                number += body.count(b"\n")
                chain.add(number, body)
                if len(body) < want or body.count(b"\n") != record.lines:
                    problems.append(
                        (
                            first,
                            f"the run {record.path} folded here is cut off: its frame "
                            f"says {record.lines} lines, {record.bytes} bytes",
                        )
                    )
                    continue
                frames[record.path] = FrameAt(record, first, offset, len(body))
    if header is None:  # empty, or a first line that is blank or a seal
        raise RecordingFormatError(f"{path} is not a flow's recording: no flow header", path=path)
    return FlowRecording(
        path,
        header,
        top,
        end,
        problems,
        chain.end(torn_at),
        unknowns,
        frames,
        opened if opened != path else None,
    )


class _Chain:
    """The walk of a 1.1 file's seals, line by line: each seal is the hash of the seal
    before and of every byte after it, up to the seal (as ``verify`` checks an agent's)."""

    def __init__(self) -> None:
        self.problems: list[tuple[int, str]] = []
        self._chain = b""
        self._bytes: list[bytes] = []
        self._first = 1
        self._last = 0

    def add(self, number: int, raw: bytes) -> None:
        self._bytes.append(raw)
        self._last = number

    def seal(self, number: int, raw: bytes) -> None:
        h = seal(self._chain, b"".join(self._bytes))
        try:
            sealed = typed(Seal, orjson.loads(raw)).h
        except (orjson.JSONDecodeError, InvalidRecord):
            sealed = ""
        if short_id(h) != sealed:
            self.problems.append(
                (
                    number,
                    f"lines {self._first} to {number - 1} do not match their seal: a record in "
                    "them was changed, added, removed or moved",
                )
            )
            # Go on from the seal as written: each write is checked on its own.
            try:
                h = unseal(sealed)
            except ValueError:
                pass
        self._chain = h
        self._bytes = []
        self._first = number + 1
        self._last = number

    def end(self, torn_at: int) -> list[tuple[int, str]]:
        """The problems, once every line is read (a torn last line is reported as torn,
        not as unsealed)."""
        last = self._last - 1 if torn_at and torn_at == self._last else self._last
        if self._first <= last:
            self.problems.append(
                (
                    self._first,
                    f"lines {self._first} to {last} come after the last seal: nothing covers "
                    "them (added to the file, or their seal removed)",
                )
            )
        return self.problems


def _parent(open_steps: dict[str, FlowLogStep], path: str) -> FlowLogStep | None:
    if path == "":
        return None
    up = path.rpartition("/")[0]
    return open_steps.get(up)


@dataclass
class FlowVerifyReport:
    """What checking a flow's recording found."""

    ok: bool
    problems: list[tuple[int, str]]
    runs: list[tuple[str, Path, Any]]
    """(step path, its run's file, that run's VerifyReport or None when it cannot be read)."""

    @property
    def calls(self) -> int:
        return sum(r.calls for _, _, r in self.runs if r is not None)

    @property
    def verified(self) -> int:
        return sum(r.verified for _, _, r in self.runs if r is not None)


def verify_flow(flow: FlowRecording) -> FlowVerifyReport:
    """Check the log (its hash chain, every step that started ended, the flow ended, each
    agent step's run is there) and verify every agent's run as ``verify`` does an agent's
    recording."""
    from afcore.errors import RecordingError
    from afcore.recording._reader import open_recording
    from afcore.recording._verify import verify

    problems = sorted([*flow.problems, *flow.chain])
    runs: list[tuple[str, Path, Any]] = []
    named: set[str] = set()
    for step in flow.steps():
        began = step.start.at
        for child in step.steps:
            if began is not None and child.start.at is not None and child.start.at < began:
                problems.append(
                    (0, f"step {child.path!r} starts at {child.start.at} ms, before its flow")
                )
        if step.end is None:
            problems.append((0, f"step {step.path or '(top)'!r} started and never ended"))
            continue
        if step.kind != "agent":
            continue
        file = flow.run_file(step)
        if file is None:
            problems.append((0, f"agent step {step.path!r} names no run"))
            continue
        frame = flow.frames.get(step.end.run or "")
        if frame is not None:
            named.add(frame.record.path)
            problem = unfold(flow.path, frame)[1]
            if problem is not None:
                problems.append(
                    (frame.line, f"the run of step {step.path!r} folded here: {problem}")
                )
        elif flow.frames:
            problems.append(
                (0, f"the run of step {step.path!r} is not folded into the log with the others")
            )
        try:
            with open_recording(file, index=False) as rec:
                report = verify(rec)
                if rec.header.run_id != step.end.run_id:
                    problems.append(
                        (0, f"{file.name} is run {rec.header.run_id}, not {step.end.run_id}")
                    )
        except (OSError, RecordingError) as e:
            problems.append((0, f"the run of step {step.path!r} cannot be read: {e}"))
            runs.append((step.path, file, None))
            continue
        runs.append((step.path, file, report))
        for p in report.problems:
            problems.append((0, f"{step.path}: line {p.line}: {p.message}"))
    if flow.end is None:
        problems.append((0, "no flow_end: the flow did not finish (or is still running)"))
    for path, frame in flow.frames.items():
        if path not in named:
            problems.append((frame.line, f"a run no agent step names is folded here: {path}"))
    ok = not problems and all(r is not None and r.ok for _, _, r in runs)
    return FlowVerifyReport(ok, problems, runs)
