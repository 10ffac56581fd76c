"""Checking a recording: every call rebuilt and its hash compared, the commit log consistent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from afcore.recording._hashing import content_hash
from afcore.recording._models import (
    Blob,
    Call,
    Commit,
    ContextEvicted,
    Header,
    Reply,
    RunEnd,
    UnknownRecord,
)
from afcore.recording._reader import CallCheck, Problem, Recording, TornTail
from afcore.recording._window_check import WindowReplay

__all__ = ["VerifyReport", "verify"]


@dataclass
class VerifyReport:
    calls: int = 0
    verified: int = 0
    problems: list[Problem] = field(default_factory=list)
    torn_tail: TornTail | None = None
    unknown_records: int = 0
    checks: list[CallCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verified == self.calls and not self.problems and self.torn_tail is None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "calls": self.calls,
            "verified": self.verified,
            "problems": [p.to_json() for p in self.problems],
            "torn_tail": self.torn_tail.to_json() if self.torn_tail else None,
            "unknown_records": self.unknown_records,
        }


def verify(rec: Recording) -> VerifyReport:
    """Rebuild every call and check its hash; check sequence numbers, reads, refs and blobs,
    and that each call's window is the one the folds before it left."""
    report = VerifyReport(torn_tail=rec.torn_tail, unknown_records=rec.unknown_records)
    window = WindowReplay(rec.value)
    problems = report.problems
    written: dict[int, set[str]] = {}
    """seq -> keys that commit wrote"""
    blobs: set[str] = set()
    messages = 0
    calls = 0
    last_seq = 0
    end_line: int | None = None
    last_line = 0

    def check_ref(line: int, ref: str | None, what: str) -> None:
        if ref is not None and ref not in blobs:
            problems.append(
                Problem(line, f"{what} refers to blob {ref[:12]}, not stored before it")
            )

    def check_reads(line: int, seq: int, reads: list[tuple[str, int]]) -> None:
        for key, version in reads:
            keys = written.get(version)
            if keys is None or version >= seq:
                problems.append(
                    Problem(line, f"reads {key} at seq {version}, not an earlier commit")
                )
            elif key not in keys and not (
                key == "messages" and any(k.startswith(("message:", "fold:")) for k in keys)
            ):
                problems.append(
                    Problem(line, f"reads {key} at seq {version}, which did not write it")
                )

    def check_seq(line: int, seq: int) -> None:
        nonlocal last_seq
        if seq != last_seq + 1:
            problems.append(Problem(line, f"seq {seq} follows seq {last_seq}"))
        last_seq = seq

    def note_writes(line: int, seq: int, writes: list[Any], extra: tuple[str, ...] = ()) -> None:
        nonlocal messages
        keys = set(extra)
        for w in writes:
            keys.add(w.key)
            check_ref(line, w.ref, f"write of {w.key}")
            if w.key.startswith("message:"):
                messages += 1
                if w.key != f"message:{messages}":
                    problems.append(
                        Problem(line, f"writes {w.key} where message:{messages} was due")
                    )
        written[seq] = keys

    for line, record in rec.records():
        last_line = line
        if end_line is not None:
            problems.append(Problem(line, f"a {record.t} record follows run_end (line {end_line})"))
            end_line = None
        if isinstance(record, Header):
            if line != 1:
                problems.append(Problem(line, "a second header"))
        elif isinstance(record, Blob):
            if content_hash(record.value) != record.id:
                problems.append(Problem(line, f"blob {record.id[:12]} does not hash to its id"))
            blobs.add(record.id)
        elif isinstance(record, Commit):
            check_seq(line, record.seq)
            check_reads(line, record.seq, record.reads)
            note_writes(line, record.seq, record.writes)
            problems.extend(Problem(line, p) for p in window.commit(record))
        elif isinstance(record, Call):
            check_seq(line, record.seq)
            check_reads(line, record.seq, record.reads)
            calls += 1
            if record.call != calls:
                problems.append(Problem(line, f"call {record.call} where call {calls} was due"))
            check_ref(line, record.system, "the system segments")
            check_ref(line, record.tools, "the tool list")
            if record.system in blobs and record.tools in blobs:
                try:
                    for listed in (record.system, record.tools):
                        value = rec.blob(listed)
                        if isinstance(value, dict) and isinstance(value.get("base"), str):
                            check_ref(line, value["base"], "the list a delta extends")
                    for seg in rec.segments(record.call):
                        check_ref(line, seg.ref, "a system segment")
                    for tool in rec.tools(record.call):
                        check_ref(line, tool.ref, f"tool {tool.name}")
                except (KeyError, ValueError, TypeError):
                    problems.append(Problem(line, "the segment or tool list it names is malformed"))
            for a, b in record.window:
                if not 1 <= a <= b <= messages:
                    problems.append(
                        Problem(line, f"window range [{a}, {b}] is outside messages 1..{messages}")
                    )
            written[record.seq] = {f"call:{record.call}"}
            differs = window.call(record)
            if differs is not None:
                problems.append(Problem(line, f"call {record.call}: {differs}"))
            check = rec.check_call(record.call)
            report.checks.append(check)
            if check.ok:
                report.verified += 1
            else:
                problems.append(Problem(line, f"call {record.call}: {check.problem}"))
        elif isinstance(record, Reply):
            check_seq(line, record.seq)
            note_writes(line, record.seq, record.writes, (f"reply:{record.call}",))
            window.reply(record)
            if record.call != calls:
                problems.append(
                    Problem(line, f"reply to call {record.call} while call {calls} is open")
                )
        elif isinstance(record, RunEnd):
            end_line = line
            if record.answer is not None:
                check_ref(line, record.answer.ref, "the answer")
        elif isinstance(record, ContextEvicted):
            wrong = window.evicted(record)
            if wrong is not None:
                problems.append(Problem(line, wrong))
        elif isinstance(record, UnknownRecord):
            pass  # kept as it is; counted in unknown_records
    report.calls = calls
    problems.extend(Problem(0, p) for p in window.unaccounted())
    if rec.end is None and rec.torn_tail is None:
        problems.append(
            Problem(0, "no run_end record: the run did not finish, or is still running")
        )
    problems.extend(p for p in rec.problems if p not in problems)
    problems.sort(key=lambda p: p.line)
    del last_line
    return report
